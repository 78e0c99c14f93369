import type { FastifyRequest } from 'fastify'
import { Type, type Static } from 'typebox'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { ObjectId } from '../../http/schemas.ts'
import { findAgent, findLlm, type AgentRow } from '../agents/queries.ts'
import { CALL_SETTINGS_DEFAULTS } from '../agents/schemas.ts'
import { findCallByAccessToken } from '../calls/queries.ts'
import { renderText } from '../../templates.ts'
import { hashToken } from '../users/keys.ts'
import { chooseEngine } from './engines/index.ts'

// What a browser learns before it opens a web call's stream, and which pages may open it: shared by the web-call
// routes (POST /web-call/join, the stream) and the website widget's key route (docs/widget.md).

export const JoinDetails = Type.Object({
  call_id: ObjectId,
  agent_id: ObjectId,
  agent_name: Type.String(),
  language: Type.String(),
  voice_id: ObjectId,
  begin_message: Type.Union([Type.String(), Type.Null()]),
  mode: Type.Enum(['voice', 'text'], { description: 'voice: spoken (speech providers configured); text: typed turns with the simulator engine' }),
  stream_path: Type.String({ description: 'the WebSocket to open, with ?access_token=' }),
  expires_at: Type.Integer({ description: 'epoch ms: the token works until then, while the call runs, until a stream spends it' })
})

/** The started call a web-call access token opens; 403 for a token unknown, expired or spent (a stream clears it). */
export async function callOfToken (db: DB, token: string) {
  const call = await findCallByAccessToken(db, hashToken(token))
  if (call === undefined || call.access_token_expires_at === null || call.access_token_expires_at.getTime() < Date.now() || call.call_status !== 'started') {
    throw new HttpError(403, 'invalid_access_token', 'the access token is unknown, expired or spent, or its call has ended')
  }
  return { ...call, expiresAt: call.access_token_expires_at }
}

/** What joining the call of an access token answers. */
export async function joinDetails (db: DB, config: Config, token: string): Promise<Static<typeof JoinDetails>> {
  const call = await callOfToken(db, token)
  const agent = await findAgent(db, call.user_id, call.agent_id)
  const llm = agent === undefined ? undefined : await findLlm(db, call.user_id, agent.llm_id)
  if (agent === undefined || llm === undefined) throw new HttpError(403, 'invalid_access_token', 'the call\'s agent no longer exists')
  return {
    call_id: call.id,
    agent_id: call.agent_id,
    agent_name: call.agent_name,
    language: String(agent.call_settings.language ?? CALL_SETTINGS_DEFAULTS.language),
    voice_id: agent.voice_id,
    begin_message: llm.begin_message == null ? null : renderText(llm.begin_message, call.dynamic_context),
    mode: chooseEngine(config.voice, llm) === 'simulator' ? 'text' : 'voice',
    stream_path: '/web-call/stream',
    expires_at: call.expiresAt.getTime()
  }
}

/** Whether `origin` is one of `allowed` (origins or URLs; an entry that is no URL matches nothing). */
export function originListed (allowed: readonly string[], origin: string | undefined): boolean {
  if (origin === undefined) return false
  return allowed.some((entry) => {
    try {
      return new URL(entry).origin === origin
    } catch {
      return false
    }
  })
}

/** The agent's widget_settings.allowed_origins, as stored. */
export const allowedOrigins = (agent: Pick<AgentRow, 'widget_settings'>): string[] => agent.widget_settings.allowed_origins ?? []

/**
 * A page may open the stream when its Origin is this server's own or one of the agent's
 * widget_settings.allowed_origins ([] : any site; a browser always sends Origin, so none is refused then).
 */
export function streamOriginAllowed (agent: Pick<AgentRow, 'widget_settings'>, origin: string | undefined, own: string[]): boolean {
  if (origin !== undefined && own.includes(origin)) return true
  const allowed = allowedOrigins(agent)
  return allowed.length === 0 || originListed(allowed, origin)
}

/** This server's own origins: the public address, and the address the request reached. */
export function ownOrigins (config: Config, request: FastifyRequest): string[] {
  const host = request.headers.host
  return [new URL(config.publicBaseUrl).origin, ...(host === undefined ? [] : [`http://${host}`, `https://${host}`])]
}
