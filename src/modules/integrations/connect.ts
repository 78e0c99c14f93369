import { createHash, randomBytes } from 'node:crypto'
import type { Transaction } from 'kysely'
import type { Config } from '../../config.ts'
import type { Database } from '../../db/schema.ts'
import { guardedAgent } from '../../net/guard.ts'
import { send } from '../../net/request.ts'
import { openSecret, sealSecret } from '../../db/secrets.ts'
import { HttpError } from '../../http/errors.ts'
import { hashToken } from '../users/keys.ts'
import { connectionOf, expiryOf, IntegrationError, tokenRequest, type IntegrationDeps, type Tokens } from './client.ts'
import { endpointsOf, oauthConfigured, PROVIDER_INFO, PROVIDERS, type AuthMethod, type Provider } from './providers.ts'
import {
  connectIntegration, countActiveTools, deactivateTools, deleteExpiredStates, disconnectIntegration, insertState, integrationOf,
  listIntegrations, takeState, type Credentials
} from './queries.ts'

// Connecting and disconnecting accounts (docs/integrations.md, "Connecting an account"): the OAuth 2.0 authorization
// code grant with PKCE (S256), an API key checked before it is kept, and a disconnect that revokes at the provider
// where it can and switches the dependent tools off. The console and the API both call these.

/** How long a pending authorization waits for the provider's callback. */
export const STATE_TTL_MS = 10 * 60_000

/** Where every provider sends the browser back: PUBLIC_BASE_URL + this, registered in each provider's console. */
export const CALLBACK_PATH = '/integrations/oauth/callback'

export const redirectUriOf = (config: Pick<Config, 'publicBaseUrl'>) => `${config.publicBaseUrl}${CALLBACK_PATH}`

/** The prefix of the variables that hold the installation's OAuth client of each OAuth provider (config.ts). */
const CLIENT_PREFIX: Partial<Record<Provider, string>> = { calendar_one: 'GOOGLE', calendar_two: 'MICROSOFT', booking_two: 'CALENDLY', crm: 'HUBSPOT' }

export const clientVariablesOf = (provider: Provider): string[] => {
  const prefix = CLIENT_PREFIX[provider]
  return prefix === undefined ? [] : [`${prefix}_CLIENT_ID`, `${prefix}_CLIENT_SECRET`]
}

/** A PKCE verifier (43 characters from 32 random bytes, RFC 7636 4.1) and its S256 challenge. */
export function pkcePair (): { verifier: string, challenge: string } {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') }
}

/** What the console and `GET /v1/integrations` show of one provider on an account: never a token. */
export interface IntegrationState {
  provider: Provider
  service: string
  methods: AuthMethod[]
  oauthConfigured: boolean
  /** The variables that configure the provider's OAuth client (none: it has no OAuth). */
  clientVariables: string[]
  /** The authorize page's origin, when OAuth is configured (the console's CSP lets a form's redirect go there). */
  authorizeOrigin: string | undefined
  status: 'not_connected' | 'connected' | 'revoked'
  statusReason: string | null
  method: AuthMethod | null
  accountLabel: string
  connectedAt: Date | null
  expiresAt: Date | null
  /** The account's active tools of the provider's type: what a disconnect switches off. */
  activeTools: number
}

export async function integrationStates (deps: Pick<IntegrationDeps, 'db' | 'config'>, userId: string): Promise<IntegrationState[]> {
  const rows = new Map((await listIntegrations(deps.db, userId)).map((row) => [row.provider, row]))
  const tools = await countActiveTools(deps.db, userId)
  return PROVIDERS.map((provider) => {
    const row = rows.get(provider)
    const configured = oauthConfigured(deps.config, provider)
    return {
      provider,
      service: PROVIDER_INFO[provider].service,
      methods: PROVIDER_INFO[provider].methods,
      oauthConfigured: configured,
      clientVariables: clientVariablesOf(provider),
      authorizeOrigin: configured ? new URL(endpointsOf(deps.config, provider).authorize!).origin : undefined,
      status: row?.status ?? 'not_connected',
      statusReason: row?.status_reason ?? null,
      method: row?.method ?? null,
      accountLabel: row?.account_label ?? '',
      connectedAt: row?.connected_at ?? null,
      expiresAt: row?.expires_at ?? null,
      activeTools: tools[provider] ?? 0
    }
  })
}

/** Who asks for an authorization: an account, in a console session (its id's hash) or through the API (null). */
export interface Requester { userId: string, sessionIdHash: string | null }

/**
 * A pending authorization: its row, and the provider's authorize URL to send the browser to. Refused with 422 for a
 * provider without OAuth and 409 when the installation has no OAuth client for it.
 */
export async function startAuthorization (deps: Pick<IntegrationDeps, 'db' | 'config'>, requester: Requester, provider: Provider): Promise<{ authorizationUrl: string, expiresAt: Date }> {
  const info = PROVIDER_INFO[provider]
  if (!info.methods.includes('oauth')) {
    throw new HttpError(422, 'auth_method_not_offered', `${info.service} (${provider}) connects with an API key, not OAuth: PUT /v1/integrations/${provider} with api_key`)
  }
  if (!oauthConfigured(deps.config, provider)) {
    throw new HttpError(409, 'integration_not_configured', `connecting ${info.service} (${provider}) with OAuth is not configured on this installation: ` +
      `whoever runs the server sets ${clientVariablesOf(provider).join(' and ')} (docs/integrations.md)`)
  }
  const endpoints = endpointsOf(deps.config, provider)
  const state = randomBytes(32).toString('base64url')
  const { verifier, challenge } = pkcePair()
  const expiresAt = new Date(Date.now() + STATE_TTL_MS)
  await deleteExpiredStates(deps.db)
  await insertState(deps.db, { state_hash: hashToken(state), user_id: requester.userId, session_id: requester.sessionIdHash, provider, code_verifier: sealSecret(verifier), expires_at: expiresAt })
  const url = new URL(endpoints.authorize!)
  const params = {
    client_id: endpoints.clientId!,
    redirect_uri: redirectUriOf(deps.config),
    response_type: 'code',
    ...(info.scopes.length === 0 ? {} : { scope: info.scopes.join(' ') }),
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    ...info.authorizeParams
  }
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value)
  return { authorizationUrl: url.toString(), expiresAt }
}

/** Why a callback did not connect (the console's words for each are in console/integrations.ts). */
export type FailedReason = 'denied' | 'provider_error' | 'missing_code' | 'unknown_state' | 'expired' | 'other_session' | 'token_failed' | 'unreachable' | 'account_failed'

export type Finished =
  | { ok: true, viaApi: boolean, provider: Provider, service: string, accountLabel: string }
  | { ok: false, viaApi: boolean, reason: FailedReason, provider?: Provider, service?: string, detail: string }

/** A short, safe word or two from a provider for a message (an OAuth error code, a status): nothing else passes. */
const detailOf = (text: unknown) => typeof text === 'string' && /^[\w .:-]{1,60}$/.test(text) ? text : ''

/**
 * The provider's callback: the state names its pending authorization, which is deleted at once (whatever follows,
 * a state works once), then checked (not expired, same console session), the code exchanged with the verifier,
 * and the account connected and checked.
 */
export async function finishAuthorization (deps: IntegrationDeps, input: { state?: string, code?: string, error?: string, sessionIdHash: string | undefined }): Promise<Finished> {
  const row = input.state === undefined || input.state === '' || input.state.length > 200 ? undefined : await takeState(deps.db, hashToken(input.state))
  if (row === undefined) return { ok: false, viaApi: false, reason: 'unknown_state', detail: '' }
  const provider = row.provider
  const service = PROVIDER_INFO[provider].service
  const viaApi = row.session_id === null
  const failed = (reason: FailedReason, detail = ''): Finished => ({ ok: false, viaApi, reason, provider, service, detail })
  if (row.expires_at.getTime() <= Date.now()) return failed('expired')
  if (!viaApi && row.session_id !== input.sessionIdHash) return failed('other_session')
  if (input.error !== undefined) return input.error === 'access_denied' ? failed('denied') : failed('provider_error', detailOf(input.error))
  if (input.code === undefined || input.code === '') return failed('missing_code')

  let tokens: Tokens
  try {
    tokens = await tokenRequest(deps, provider, {
      grant_type: 'authorization_code', code: input.code, redirect_uri: redirectUriOf(deps.config), code_verifier: openSecret(row.code_verifier)
    })
  } catch (err) {
    if (!(err instanceof IntegrationError)) throw err
    deps.log.info({ userId: row.user_id, provider, err: err.message }, 'oauth code exchange failed')
    if (err.reason === 'unavailable') return failed('unreachable')
    return failed('token_failed', detailOf((err.body as { error?: unknown } | undefined)?.error) || (err.status === undefined ? '' : `HTTP ${err.status}`))
  }
  try {
    const previous = await integrationOf(deps.db, row.user_id, provider)
    const accountLabel = await connectChecked(deps, row.user_id, provider, { method: 'oauth', credentials: { access_token: tokens.access_token, refresh_token: tokens.refresh_token }, expires_at: expiryOf(tokens) })
    // A reconnect replaces the grant: the one it replaces is revoked, so that no forgotten token stays valid there.
    if (previous?.method === 'oauth' && previous.credentials.refresh_token !== tokens.refresh_token) await revokeAtProvider(deps, row.user_id, provider, previous.credentials)
    return { ok: true, viaApi, provider, service, accountLabel }
  } catch (err) {
    if (!(err instanceof IntegrationError)) throw err
    deps.log.info({ userId: row.user_id, provider, err: err.message }, 'oauth account check failed')
    return failed(err.reason === 'unavailable' ? 'unreachable' : 'account_failed', err.status === undefined ? err.reason : `HTTP ${err.status}`)
  }
}

/**
 * Stores the credentials and runs the provider's account check in one transaction: a check that fails rolls the
 * connection back, so that a refused key is never stored and a connection that worked before stays as it was.
 * The check's requests read the uncommitted row through the transaction. Answers the account's name.
 */
async function connectChecked (deps: IntegrationDeps, userId: string, provider: Provider,
  input: { method: AuthMethod, credentials: Credentials, expires_at?: Date | null, accountLabel?: string }): Promise<string> {
  return await deps.db.transaction().execute(async (trx) => {
    // The check sends the token as it is, as for a key: a token issued a moment ago that the API refuses is a failed
    // check, not one to refresh (and a refresh would open a transaction inside this one). The real method follows.
    await connectIntegration(trx, userId, provider, { method: 'api_key', credentials: input.credentials, account_label: '' })
    const name = await PROVIDER_INFO[provider].account(await connectionOf({ ...deps, db: trx }, userId, provider))
    const label = (input.accountLabel === undefined || input.accountLabel.trim() === '' ? name : input.accountLabel).slice(0, 200)
    await connectIntegration(trx, userId, provider, { method: input.method, credentials: input.credentials, expires_at: input.expires_at ?? null, account_label: label })
    return label
  })
}

/**
 * Connects with an API key or token after the provider's account check: 422 `integration_rejected` when the service
 * refuses it, 503 `integration_unavailable` when it cannot tell (no answer, a failure, busy); nothing is stored either way.
 */
export async function connectWithKey (deps: IntegrationDeps, userId: string, provider: Provider, input: { apiKey: string, accountLabel?: string }): Promise<string> {
  const { service, methods } = PROVIDER_INFO[provider]
  if (!methods.includes('api_key')) {
    throw new HttpError(422, 'auth_method_not_offered', `${service} (${provider}) connects with OAuth only: POST /v1/integrations/${provider}/authorizations, or Connect on the console's Integrations page`)
  }
  try {
    return await connectChecked(deps, userId, provider, { method: 'api_key', credentials: { api_key: input.apiKey }, accountLabel: input.accountLabel })
  } catch (err) {
    if (!(err instanceof IntegrationError)) throw err
    // `revoked` comes from a 401 (client.ts), which the error does not carry.
    const status = err.status ?? (err.reason === 'revoked' ? 401 : 0)
    if (err.reason === 'revoked' || (err.reason === 'rejected' && status >= 400 && status < 500)) {
      throw new HttpError(422, 'integration_rejected', `${service} refused the key${status === 0 ? '' : ` (HTTP ${status})`}: check that it is complete, not expired, and has the permissions docs/integrations.md lists`)
    }
    if (err.reason === 'rate_limited') throw new HttpError(503, 'integration_unavailable', `${service} is busy and could not check the key: try again in a minute`)
    throw new HttpError(503, 'integration_unavailable', `${service} could not be reached to check the key (${err.reason === 'unavailable' ? 'no answer' : `HTTP ${status}`}): try again in a moment`)
  }
}

/** How long a provider gets to confirm a revocation before the disconnect goes on without it. */
const REVOKE_TIMEOUT_MS = 5_000

/**
 * Revokes an OAuth grant at the provider (RFC 7009: the refresh token, which takes its access tokens with it) where
 * the provider has a revocation endpoint. Best effort: a failure is logged and the disconnect goes on.
 */
async function revokeAtProvider (deps: IntegrationDeps, userId: string, provider: Provider, credentials: Credentials): Promise<void> {
  const endpoints = endpointsOf(deps.config, provider)
  const token = credentials.refresh_token ?? credentials.access_token
  if (endpoints.revoke === undefined || endpoints.clientId === undefined || endpoints.clientSecret === undefined || token === undefined) return
  const agent = guardedAgent(deps.config.delivery)
  try {
    const outcome = await send(agent, {
      method: 'POST',
      url: endpoints.revoke,
      headers: { accept: 'application/json' },
      configured: {},
      body: new URLSearchParams({
        token, token_type_hint: credentials.refresh_token === undefined ? 'access_token' : 'refresh_token', client_id: endpoints.clientId, client_secret: endpoints.clientSecret
      }).toString(),
      contentType: 'application/x-www-form-urlencoded',
      id: `integration:${provider}`
    }, REVOKE_TIMEOUT_MS, deps.log)
    if (!outcome.ok) deps.log.warn({ userId, provider, status: outcome.status_code, error: outcome.error }, 'revoking the integration at the provider failed; disconnected here all the same')
  } finally {
    await agent.close()
  }
}

/**
 * What is done with the agents whose tools a disconnect switched off, in its transaction: the agents module (a layer
 * above) writes each a version.
 */
export type ToolsSwitchedOff = (trx: Transaction<Database>, userId: string, agentIds: string[]) => Promise<void>

/** Disconnects: revokes at the provider (best effort), deletes the credentials, switches the tools off; undefined when not connected. */
export async function disconnect (deps: IntegrationDeps, userId: string, provider: Provider, switchedOff: ToolsSwitchedOff): Promise<{ toolsSwitchedOff: number } | undefined> {
  const row = await integrationOf(deps.db, userId, provider)
  if (row === undefined) return undefined
  if (row.method === 'oauth') await revokeAtProvider(deps, userId, provider, row.credentials)
  return await deps.db.transaction().execute(async (trx) => {
    if (!await disconnectIntegration(trx, userId, provider)) return undefined
    const agentIds = await deactivateTools(trx, userId, provider)
    await switchedOff(trx, userId, [...new Set(agentIds)])
    return { toolsSwitchedOff: agentIds.length }
  })
}
