import { readFileSync } from 'node:fs'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Logger } from 'pino'
import { Type } from 'typebox'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { KEYLESS } from '../../http/rate-limit.ts'
import { errors, ObjectId } from '../../http/schemas.ts'
import type { Mailer } from '../../mail/mailer.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { findAgent, findLlm, type AgentRow } from '../agents/queries.ts'
import { CALL_SETTINGS_DEFAULTS } from '../agents/schemas.ts'
import { findCallByAccessToken, spendAccessToken } from '../calls/queries.ts'
import { renderText } from '../../templates.ts'
import { hashToken } from '../users/keys.ts'
import { chooseEngine } from './engines/index.ts'
import type { LiveCalls } from './live-calls.ts'
import { Session } from './session.ts'
import type { StreamAdmission } from './streams.ts'
import { CLOSE } from './socket-loop.ts'
import { browserStream } from './transports/browser.ts'

// The routes a browser reaches without an API key (docs/voice.md): joining a web call with its access
// token, the call's stream, the client script and a page that uses it. Everything else is under /v1.

const TAGS = ['web calls']

const file = (name: string) => readFileSync(new URL(`./web/${name}`, import.meta.url))
const ASSETS: Record<string, { type: string, body: Buffer }> = {
  'client.js': { type: 'text/javascript; charset=utf-8', body: file('client.js') },
  'worklet.js': { type: 'text/javascript; charset=utf-8', body: file('worklet.js') },
  'page.js': { type: 'text/javascript; charset=utf-8', body: file('page.js') },
  'page.css': { type: 'text/css; charset=utf-8', body: file('page.css') }
}
const PAGE = file('page.html')

// The page runs only its own scripts and talks only to this server; no other site may frame it.
const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; media-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer'
}

/**
 * A page may open the stream when its Origin is this server's own or one of the agent's
 * widget_settings.allowed_origins ([] : any site; a browser always sends Origin, so none is refused then).
 */
function originAllowed (agent: Pick<AgentRow, 'widget_settings'>, origin: string | undefined, own: string[]): boolean {
  if (origin !== undefined && own.includes(origin)) return true
  const allowed = (agent.widget_settings.allowed_origins as string[] | undefined) ?? []
  if (allowed.length === 0) return true
  if (origin === undefined) return false
  return allowed.some((entry) => {
    try {
      return new URL(entry).origin === origin
    } catch {
      return false
    }
  })
}

/** This server's own origins: the public address, and the address the request reached. */
function ownOrigins (config: Config, request: FastifyRequest): string[] {
  const host = request.headers.host
  return [new URL(config.publicBaseUrl).origin, ...(host === undefined ? [] : [`http://${host}`, `https://${host}`])]
}

/** The started call a web-call access token opens; 403 for a token unknown, expired or spent (a stream clears it). */
async function callOfToken (db: DB, token: string) {
  const call = await findCallByAccessToken(db, hashToken(token))
  if (call === undefined || call.access_token_expires_at === null || call.access_token_expires_at.getTime() < Date.now() || call.call_status !== 'started') {
    throw new HttpError(403, 'invalid_access_token', 'the access token is unknown, expired or spent, or its call has ended')
  }
  return { ...call, expiresAt: call.access_token_expires_at }
}

const tokenOf = (request: FastifyRequest) => (request.query as { access_token: string }).access_token

export const webCallRoutes: FastifyPluginAsyncTypebox<{ db: DB, jobs: JobSender, log: Logger, mailer: Mailer, live: LiveCalls, streams: StreamAdmission }> = async (app, { db, jobs, log, mailer, live, streams }) => {
  const { config } = jobs

  app.post('/web-call/join', {
    config: KEYLESS,
    schema: {
      tags: TAGS,
      summary: 'Join a web call with its access token',
      description: 'What a browser needs before it opens the call\'s stream (`GET /web-call/stream?access_token=…`, a WebSocket; docs/voice.md).',
      security: [],
      body: Type.Object({ access_token: Type.String({ minLength: 1, maxLength: 100 }) }),
      response: {
        200: Type.Object({
          call_id: ObjectId,
          agent_id: ObjectId,
          agent_name: Type.String(),
          language: Type.String(),
          voice_id: ObjectId,
          begin_message: Type.Union([Type.String(), Type.Null()]),
          mode: Type.Enum(['voice', 'text'], { description: 'voice: spoken (speech providers configured); text: typed turns with the simulator engine' }),
          stream_path: Type.String({ description: 'the WebSocket to open, with ?access_token=' }),
          expires_at: Type.Integer({ description: 'epoch ms: the token works until then, while the call runs, until a stream spends it' })
        }),
        ...errors(400, 403)
      }
    }
  }, async (request) => {
    const call = await callOfToken(db, request.body.access_token)
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
      mode: chooseEngine(config.voice, llm) === 'simulator' ? 'text' as const : 'voice' as const,
      stream_path: '/web-call/stream',
      expires_at: call.expiresAt.getTime()
    }
  })

  // Checked before the upgrade, so that a refused stream is a plain HTTP answer the browser can read; after the
  // query's validation (a preHandler), so that it reads one string (`?access_token=a&access_token=b` is a 400).
  async function admit (request: FastifyRequest, _reply: FastifyReply): Promise<void> {
    const call = await callOfToken(db, tokenOf(request))
    if (call.runtime !== 'voice') throw new HttpError(409, 'not_a_voice_call', `this call is held by the ${call.runtime} runtime, not the built-in voice engine (CALL_RUNTIME)`)
    const agent = await findAgent(db, call.user_id, call.agent_id)
    if (agent === undefined) throw new HttpError(403, 'invalid_access_token', 'the call\'s agent no longer exists')
    if (!originAllowed(agent, request.headers.origin, ownOrigins(config, request))) {
      throw new HttpError(403, 'origin_not_allowed', 'this site may not open the agent\'s calls: add its origin to the agent\'s widget_settings.allowed_origins')
    }
  }

  app.get('/web-call/stream', {
    websocket: true,
    config: KEYLESS,
    // The stream's place first (per address and process, before any lookup), then its token and origin.
    onRequest: streams.admit,
    preHandler: admit,
    schema: { hide: true, querystring: Type.Object({ access_token: Type.String({ minLength: 1, maxLength: 100 }) }) }
  }, async (socket, request) => {
    const { streamTimeoutMs: timeoutMs, streamStartTimeoutMs: startTimeoutMs } = config.voice
    const stream = browserStream(socket, {
      timeoutMs,
      startTimeoutMs,
      started: () => streams.started(request),
      refused: (problem) => request.log.warn({ problem }, 'a web call stream failed')
    })
    const call = await spendAccessToken(db, hashToken(tokenOf(request)))
    if (call === undefined) return stream.loop.refuse(CLOSE.forbidden, 'invalid_access_token', 'the access token was spent by another stream')
    const session = Session.open({ db, log, mailer, ...jobs }, call, stream.transport)
    live.add(session)
    stream.attach(session)
  })

  for (const [name, asset] of Object.entries(ASSETS)) {
    app.get(`/web-call/${name}`, { schema: { hide: true } }, async (_request, reply) => {
      return reply.type(asset.type).header('cache-control', 'no-cache').header('x-content-type-options', 'nosniff').send(asset.body)
    })
  }

  app.get('/web-call', { schema: { hide: true } }, async (_request, reply) => {
    return reply.type('text/html; charset=utf-8').headers(PAGE_HEADERS).header('cache-control', 'no-cache').send(PAGE)
  })
}
