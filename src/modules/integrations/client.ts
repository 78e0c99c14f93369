import { setTimeout as delay } from 'node:timers/promises'
import type { Logger } from 'pino'
import type { Agent } from 'undici'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { guardedAgent } from '../../net/guard.ts'
import { send, type Outcome } from '../../net/request.ts'
import { integrationOf, markRevoked, storeTokens, type Credentials } from './queries.ts'
import { endpointsOf, PROVIDER_INFO } from './providers.ts'
import type { ApiAnswer, ApiRequest, Connection, Provider } from './types.ts'

// The one way Switchboard talks to a connected account's service: the account's credentials as a Bearer token, an
// OAuth access token refreshed before it runs out and once on a 401, one retry after a rate limit, and every
// failure as an IntegrationError whose reason a tool can turn into words. Requests go through the guarded client
// (addresses checked, time and bytes bounded), as every outbound request does.

export interface IntegrationDeps { db: DB, config: Config, log: Logger }

export type { ApiAnswer, ApiRequest, Connection } from './types.ts'

/**
 * `not_connected`, `revoked` (the service refuses the credentials for good: connect again), `rate_limited` (still
 * after one retry), `unavailable` (no answer, or one that is not JSON), `rejected` (any other non-2xx: `status`, `body`).
 */
export type IntegrationFailure = 'not_connected' | 'revoked' | 'rate_limited' | 'unavailable' | 'rejected'

export class IntegrationError extends Error {
  readonly reason: IntegrationFailure
  readonly status: number | undefined
  readonly body: unknown
  constructor (reason: IntegrationFailure, message: string, status?: number, body?: unknown) {
    super(message)
    this.reason = reason
    this.status = status
    this.body = body
  }
}

/** A service answers within this, or the request fails as `unavailable`: a caller is waiting. */
const TIMEOUT_MS = 10_000
/** The most of an answer read (event lists, contact searches). */
const ANSWER_BYTES = 1_000_000
/** An access token this close to its end is refreshed first. */
const REFRESH_MARGIN_MS = 60_000
/** The longest Retry-After honoured before the one retry, in seconds (times CALL_TIME_SCALE); default 1 s. */
const MAX_WAIT_S = 5
const USER_AGENT = 'Switchboard (self-hosted voice agents)'

const agents = new WeakMap<object, Agent>()

/** One guarded agent per configuration: its connections are reused across calls. */
function agentOf (config: Config): Agent {
  let agent = agents.get(config.delivery)
  if (agent === undefined) {
    agent = guardedAgent(config.delivery)
    agents.set(config.delivery, agent)
  }
  return agent
}

interface Raw { status: number, body: any, retryAfter?: number }

/** One request; a 2xx or error status with its parsed JSON; no answer (or one that is not JSON) throws `unavailable`. */
async function exchange (deps: IntegrationDeps, provider: Provider, request: { method: string, url: string, authorization?: string, headers?: Record<string, string>, body?: string, contentType?: string }, signal?: AbortSignal): Promise<Raw> {
  const service = PROVIDER_INFO[provider].service
  const outcome: Outcome = await send(agentOf(deps.config), {
    method: request.method,
    url: request.url,
    headers: { 'user-agent': USER_AGENT, accept: 'application/json' },
    // The credentials go to the service's own origin only, never after a redirect elsewhere.
    configured: { ...request.headers, ...(request.authorization === undefined ? {} : { authorization: request.authorization }) },
    ...(request.body === undefined ? {} : { body: request.body }),
    ...(request.contentType === undefined ? {} : { contentType: request.contentType }),
    id: `integration:${provider}`
  }, TIMEOUT_MS, deps.log, { previewBytes: ANSWER_BYTES, ...(signal === undefined ? {} : { signal }) })
  if (outcome.status_code === undefined) throw new IntegrationError('unavailable', `${service} could not be reached (${outcome.error ?? 'no answer'})`)
  let body: unknown = null
  if (outcome.response_preview !== undefined) {
    try {
      body = JSON.parse(outcome.response_preview)
    } catch {
      if (outcome.ok) throw new IntegrationError('unavailable', `${service} answered something that is not JSON`, outcome.status_code)
      body = outcome.response_preview
    }
  }
  return { status: outcome.status_code, body, ...(outcome.retry_after_s === undefined ? {} : { retryAfter: outcome.retry_after_s }) }
}

/** What an OAuth token endpoint answers. */
export interface Tokens { access_token: string, refresh_token?: string, expires_in?: number }

/**
 * A request to the provider's OAuth token endpoint (authorization_code or refresh_token grant) with the
 * installation's client: `invalid_grant` (a refresh token revoked or expired, a code used twice) throws `revoked`.
 */
export async function tokenRequest (deps: IntegrationDeps, provider: Provider, form: Record<string, string>, signal?: AbortSignal): Promise<Tokens> {
  const endpoints = endpointsOf(deps.config, provider)
  const service = PROVIDER_INFO[provider].service
  if (endpoints.token === undefined || endpoints.clientId === undefined || endpoints.clientSecret === undefined) {
    throw new IntegrationError('not_connected', `OAuth for ${service} is not configured on this installation`)
  }
  const body = new URLSearchParams({ ...form, client_id: endpoints.clientId, client_secret: endpoints.clientSecret }).toString()
  const answer = await exchange(deps, provider, { method: 'POST', url: endpoints.token, body, contentType: 'application/x-www-form-urlencoded' }, signal)
  if (answer.status >= 200 && answer.status < 300 && typeof answer.body?.access_token === 'string') {
    const { access_token: accessToken, refresh_token: refreshToken, expires_in: expiresIn } = answer.body
    return { access_token: accessToken, ...(typeof refreshToken === 'string' ? { refresh_token: refreshToken } : {}), ...(typeof expiresIn === 'number' ? { expires_in: expiresIn } : {}) }
  }
  const error = typeof answer.body?.error === 'string' ? answer.body.error : `HTTP ${answer.status}`
  const description = typeof answer.body?.error_description === 'string' ? `: ${answer.body.error_description.slice(0, 200)}` : ''
  if (error === 'invalid_grant') throw new IntegrationError('revoked', `${service} no longer accepts this connection (${error}${description})`, answer.status, answer.body)
  throw new IntegrationError('rejected', `${service}'s token endpoint refused the request (${error}${description})`, answer.status, answer.body)
}

/** When tokens that last `expires_in` seconds run out; null when the service does not say. */
export const expiryOf = (tokens: Tokens): Date | null => tokens.expires_in === undefined ? null : new Date(Date.now() + tokens.expires_in * 1000)

/** The URL of a request: under the provider's API URL, or a full URL on its origin (a pagination link). */
function urlOf (api: string, req: ApiRequest): string {
  const url = /^https?:\/\//.test(req.path) ? new URL(req.path) : new URL(api + (req.path.startsWith('/') ? req.path : `/${req.path}`))
  if (url.origin !== new URL(api).origin) throw new IntegrationError('rejected', `a link to ${url.origin} is not on the service's own origin`)
  for (const [name, value] of Object.entries(req.query ?? {})) {
    if (value !== undefined) url.searchParams.set(name, String(value))
  }
  return url.toString()
}

/** What the service said was wrong, in a few words (each service shapes its errors its own way). */
function problemOf (body: unknown): string {
  if (typeof body === 'string') return body.slice(0, 200)
  if (typeof body !== 'object' || body === null) return ''
  const record = body as Record<string, any>
  const message = record.error?.message ?? record.message ?? record.error_description ?? record.title ?? (typeof record.error === 'string' ? record.error : '')
  return typeof message === 'string' ? message.slice(0, 200) : ''
}

/**
 * The account's connection to a provider: throws `not_connected` or `revoked` when it cannot be used. Its `request`
 * refreshes OAuth tokens (serialised on the integration row: two calls refreshing at once use one new token).
 */
export async function connectionOf (deps: IntegrationDeps, userId: string, provider: Provider): Promise<Connection> {
  const service = PROVIDER_INFO[provider].service
  const row = await integrationOf(deps.db, userId, provider)
  if (row === undefined) throw new IntegrationError('not_connected', `${service} is not connected on this account`)
  if (row.status === 'revoked') throw new IntegrationError('revoked', `${service} refused this account's connection${row.status_reason === null ? '' : ` (${row.status_reason})`}; it must be connected again`)
  const api = endpointsOf(deps.config, provider).api
  let credentials: Credentials = row.credentials
  let expiresAt = row.expires_at

  const revoked = async (reason: string): Promise<never> => {
    await markRevoked(deps.db, userId, provider, reason)
    deps.log.warn({ userId, provider }, `integration revoked: ${reason}`)
    throw new IntegrationError('revoked', `${service} refused this account's connection (${reason}); it must be connected again`)
  }

  /** A new access token, unless another request already got one since `stale` was read. */
  async function refresh (stale: string | undefined, signal?: AbortSignal): Promise<void> {
    let failure: IntegrationError | undefined
    await deps.db.transaction().execute(async (trx) => {
      const current = await integrationOf(trx, userId, provider, true)
      if (current === undefined) throw new IntegrationError('not_connected', `${service} was disconnected`)
      if (current.credentials.access_token !== stale || current.status === 'revoked') {
        credentials = current.credentials
        expiresAt = current.expires_at
        if (current.status === 'revoked') failure = new IntegrationError('revoked', `${service} refused this account's connection; it must be connected again`)
        return
      }
      if (current.credentials.refresh_token === undefined) {
        failure = new IntegrationError('revoked', 'the access token expired and there is no refresh token')
        return
      }
      try {
        const tokens = await tokenRequest(deps, provider, { grant_type: 'refresh_token', refresh_token: current.credentials.refresh_token }, signal)
        credentials = { access_token: tokens.access_token, refresh_token: tokens.refresh_token ?? current.credentials.refresh_token }
        expiresAt = expiryOf(tokens)
        await storeTokens(trx, userId, provider, credentials, expiresAt)
      } catch (err) {
        if (!(err instanceof IntegrationError) || err.reason !== 'revoked') throw err
        failure = err
      }
    })
    if (failure !== undefined) await revoked(failure.message)
  }

  async function once (req: ApiRequest, signal?: AbortSignal): Promise<Raw> {
    const token = credentials.api_key ?? credentials.access_token ?? ''
    return await exchange(deps, provider, {
      method: req.method,
      url: urlOf(api, req),
      authorization: `Bearer ${token}`,
      ...(req.headers === undefined ? {} : { headers: req.headers }),
      ...(req.body === undefined ? {} : { body: JSON.stringify(req.body) })
    }, signal)
  }

  async function request (req: ApiRequest, signal?: AbortSignal): Promise<ApiAnswer> {
    if (row!.method === 'oauth' && expiresAt !== null && expiresAt.getTime() - Date.now() < REFRESH_MARGIN_MS) await refresh(credentials.access_token, signal)
    let answer = await once(req, signal)
    if (answer.status === 401 && row!.method === 'oauth') {
      await refresh(credentials.access_token, signal)
      answer = await once(req, signal)
    }
    if (answer.status === 401) await revoked(`${service} answered 401${problemOf(answer.body) === '' ? '' : `: ${problemOf(answer.body)}`}`)
    if (answer.status === 429 || answer.status === 503) {
      const wait = Math.min(answer.retryAfter ?? 1, MAX_WAIT_S) * 1000 * deps.config.callTimeScale
      await delay(wait, undefined, signal === undefined ? {} : { signal })
      answer = await once(req, signal)
      if (answer.status === 429 || answer.status === 503) {
        throw new IntegrationError('rate_limited', `${service} is busy (HTTP ${answer.status}) and asked to try again later`, answer.status, answer.body)
      }
    }
    if (answer.status < 200 || answer.status >= 300) {
      const problem = problemOf(answer.body)
      throw new IntegrationError('rejected', `${service} refused the request (HTTP ${answer.status}${problem === '' ? '' : `: ${problem}`})`, answer.status, answer.body)
    }
    return { status: answer.status, body: answer.body }
  }

  return { provider, method: row.method, accountLabel: row.account_label, request }
}
