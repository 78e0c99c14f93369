import type { Static } from 'typebox'
import type { DB } from '../../db/database.ts'
import { HttpError, notFound } from '../../http/errors.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { findAgent } from '../agents/queries.ts'
import { versionExists } from '../agents/versions.ts'
import { generateToken, hashToken } from '../users/keys.ts'
import { idempotent } from './idempotency.ts'
import { startCall } from './lifecycle.ts'
import { renewAccessToken } from './queries.ts'
import type { WebCallBody, WebCallCreated } from './schemas.ts'

/** How long a web call's access token may be used to join it. */
export const WEB_CALL_TOKEN_TTL_MS = 5 * 60_000

type WebCallStarted = Static<typeof WebCallCreated>

/** The agent that places a call: the account's (404), and active (409 `agent_inactive`). */
export async function callingAgent (db: DB, userId: string, agentId: string) {
  const agent = await findAgent(db, userId, agentId)
  if (agent === undefined) throw notFound(`agent ${agentId}`)
  if (agent.status !== 'active') throw new HttpError(409, 'agent_inactive', `agent ${agent.id} is inactive; set its status to active to place calls`)
  return agent
}

/** A version a request pins must be one of the agent's (404 naming the field otherwise). */
export async function checkPin (db: DB, userId: string, agentId: string, version: number | undefined, field = 'body.agent_version'): Promise<void> {
  if (version !== undefined && !await versionExists(db, userId, agentId, version)) throw notFound(`version ${version} of agent ${agentId} (${field})`)
}

function newToken () {
  const token = generateToken('wct_')
  return { token, hash: hashToken(token), expires: new Date(Date.now() + WEB_CALL_TOKEN_TTL_MS) }
}

/**
 * Starts a web call of one of the account's agents and answers the access token a browser joins it with
 * (POST /v1/call/make-web-call, and the console's "Talk to this agent"). With an idempotency key a retry
 * answers the first call, with a fresh token: the token is a credential and is never stored (docs/calls.md).
 */
export async function startWebCall (db: DB, jobs: JobSender, userId: string, body: Static<typeof WebCallBody>, idempotencyKey?: string): Promise<WebCallStarted> {
  const agent = await callingAgent(db, userId, body.agent_id)
  await checkPin(db, userId, agent.id, body.agent_version)
  return await idempotent(db, userId, idempotencyKey, 'make-web-call', body, async (trx) => {
    const { token, hash, expires } = newToken()
    const call = await startCall(trx, jobs, agent, {
      call_type: 'web',
      direction: 'outbound',
      agent_version: body.agent_version,
      custom_data: body.custom_data,
      dynamic_context: body.dynamic_context,
      runtime: jobs.config.callRuntime,
      access_token_hash: hash,
      access_token_expires_at: expires
    })
    const created = {
      _id: call.id,
      call_type: 'web' as const,
      agent_id: call.agent_id,
      call_status: 'started' as const,
      start_timestamp: call.start_timestamp.getTime()
    }
    return { callId: call.id, stored: created, response: { ...created, access_token: token, access_token_expires_at: expires.getTime() } }
  }, async (trx, callId, stored) => {
    const { token, hash, expires } = newToken()
    if (!await renewAccessToken(trx, userId, callId, hash, expires)) {
      throw new HttpError(409, 'web_call_ended', `the web call ${callId} that this Idempotency-Key started has ended; send another key to start a new call`)
    }
    return { ...stored as Omit<WebCallStarted, 'access_token' | 'access_token_expires_at'>, access_token: token, access_token_expires_at: expires.getTime() }
  })
}
