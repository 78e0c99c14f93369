import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { connectionOf, IntegrationError } from '../../../src/modules/integrations/client.ts'
import { connectIntegration, integrationOf } from '../../../src/modules/integrations/queries.ts'
import { createLogger } from '../../../src/logger.ts'
import { createAccount, setup } from '../../helpers/app.ts'
import { oauthServer } from '../../helpers/oauth-server.ts'

// The provider client against a loopback service that speaks OAuth 2.0 (token and refresh endpoints) and answers
// Bearer-authenticated JSON: refresh before expiry and on a 401, one refresh for concurrent requests, revocation,
// and one retry after a rate limit. The HubSpot variables point at it; any provider would do.

interface Service { url: string, oauth: ReturnType<typeof oauthServer>, answers: Array<{ status: number, headers?: Record<string, string>, body?: unknown }>, seen: string[] }

async function service (): Promise<Service> {
  const oauth = oauthServer({ authorizePath: '/oauth/authorize', tokenPath: '/oauth/v1/token', clientId: 'client-1', clientSecret: 'secret-1', rotate: true, autoApprove: true })
  const answers: Service['answers'] = []
  const seen: string[] = []
  const server = http.createServer((req, res) => {
    let body = ''
    req.on('data', (chunk) => { body += String(chunk) })
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x')
      if (oauth.handle(req, res, url.pathname, url.searchParams, body)) return
      seen.push(`${req.method} ${url.pathname}${url.search} ${req.headers.authorization ?? ''}`)
      if (req.headers.authorization !== 'Bearer key-1' && !oauth.valid(req.headers.authorization)) {
        res.writeHead(401, { 'content-type': 'application/json' })
        return res.end(JSON.stringify({ status: 'error', message: 'Authentication credentials not found.', category: 'INVALID_AUTHENTICATION' }))
      }
      const answer = answers.shift() ?? { status: 200, body: { ok: true, path: url.pathname } }
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers })
      res.end(JSON.stringify(answer.body ?? {}))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, oauth, answers, seen }
}

const s = await service()
const ctx = await setup(t, {
  HUBSPOT_API_URL: s.url,
  HUBSPOT_AUTHORIZE_URL: `${s.url}/oauth/authorize`,
  HUBSPOT_TOKEN_URL: `${s.url}/oauth/v1/token`,
  HUBSPOT_CLIENT_ID: 'client-1',
  HUBSPOT_CLIENT_SECRET: 'secret-1',
  DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true',
  CALL_TIME_SCALE: '0.001'
})
const deps = { db: ctx.db, config: ctx.config, log: createLogger(ctx.config) }

async function oauthAccount (expiresInS = 3600) {
  const account = await createAccount(ctx.db)
  const tokens = s.oauth.issue()
  await connectIntegration(ctx.db, account.user.id, 'crm', { account_label: 'HubSpot account 1', method: 'oauth', credentials: tokens, expires_at: new Date(Date.now() + expiresInS * 1000) })
  return { userId: account.user.id, tokens }
}

t.test('an API key is sent as a Bearer token; a 401 marks the connection revoked and later uses are refused', async (t) => {
  const account = await createAccount(ctx.db)
  await connectIntegration(ctx.db, account.user.id, 'crm', { account_label: '', method: 'api_key', credentials: { api_key: 'key-1' } })
  const conn = await connectionOf(deps, account.user.id, 'crm')
  const answer = await conn.request({ method: 'GET', path: '/crm/v3/objects/contacts', query: { limit: 2, after: undefined } })
  t.same(answer.body, { ok: true, path: '/crm/v3/objects/contacts' })
  t.match(s.seen.at(-1), /^GET \/crm\/v3\/objects\/contacts\?limit=2 Bearer key-1$/)

  await connectIntegration(ctx.db, account.user.id, 'crm', { account_label: '', method: 'api_key', credentials: { api_key: 'key-2' } })
  const refused = await connectionOf(deps, account.user.id, 'crm')
  await t.rejects(refused.request({ method: 'GET', path: '/x' }), { reason: 'revoked', message: /HubSpot refused this account's connection \(HubSpot answered 401: Authentication credentials not found\.\)/ })
  t.equal((await integrationOf(ctx.db, account.user.id, 'crm'))?.status, 'revoked')
  await t.rejects(connectionOf(deps, account.user.id, 'crm'), { reason: 'revoked', message: /must be connected again/ })
})

t.test('an account that is not connected is refused with not_connected', async (t) => {
  const account = await createAccount(ctx.db)
  await t.rejects(connectionOf(deps, account.user.id, 'calendar_one'), { reason: 'not_connected', message: 'Google Calendar is not connected on this account' })
})

t.test('an expired access token is refreshed on the 401 and the request sent again', async (t) => {
  const { userId, tokens } = await oauthAccount()
  s.oauth.expire()
  const before = s.oauth.tokenRequests.length
  const conn = await connectionOf(deps, userId, 'crm')
  t.same((await conn.request({ method: 'POST', path: '/crm/v3/objects/contacts/search', body: { limit: 1 } })).body, { ok: true, path: '/crm/v3/objects/contacts/search' })
  t.equal(s.oauth.tokenRequests.length, before + 1)
  t.equal(s.oauth.tokenRequests.at(-1)?.get('grant_type'), 'refresh_token')
  t.equal(s.oauth.tokenRequests.at(-1)?.get('refresh_token'), tokens.refresh_token)
  const stored = await integrationOf(ctx.db, userId, 'crm')
  t.not(stored?.credentials.access_token, tokens.access_token, 'the new access token is stored')
  t.not(stored?.credentials.refresh_token, tokens.refresh_token, 'and the rotated refresh token')
  t.ok(stored!.expires_at!.getTime() > Date.now() + 3000_000)
})

t.test('a token about to expire is refreshed before the request, not after a 401', async (t) => {
  const { userId } = await oauthAccount(30)
  const seen = s.seen.length
  const conn = await connectionOf(deps, userId, 'crm')
  await conn.request({ method: 'GET', path: '/ping' })
  t.equal(s.seen.length, seen + 1, 'one request reached the API')
  t.ok(s.oauth.valid(s.seen.at(-1)!.split(' ').slice(2).join(' ')), 'with the refreshed token')
})

t.test('requests of several calls that meet one expired token refresh it once (a rotated refresh token is used once)', async (t) => {
  const { userId } = await oauthAccount()
  const conns = await Promise.all(Array.from({ length: 5 }, async () => await connectionOf(deps, userId, 'crm')))
  s.oauth.expire()
  const before = s.oauth.tokenRequests.length
  const answers = await Promise.all(conns.map(async (conn) => await conn.request({ method: 'GET', path: '/ping' })))
  t.equal(answers.length, 5)
  t.equal(s.oauth.tokenRequests.length, before + 1, 'one refresh')
  t.equal((await integrationOf(ctx.db, userId, 'crm'))?.status, 'connected')
})

t.test('a revoked refresh token (invalid_grant) marks the connection revoked with the reason', async (t) => {
  const { userId } = await oauthAccount()
  const conn = await connectionOf(deps, userId, 'crm')
  s.oauth.revokeAll()
  const err: unknown = await conn.request({ method: 'GET', path: '/ping' }).catch((e: unknown) => e)
  t.ok(err instanceof IntegrationError)
  t.equal((err as IntegrationError).reason, 'revoked')
  t.match((err as IntegrationError).message, /invalid_grant: Token has been expired or revoked/)
  const stored = await integrationOf(ctx.db, userId, 'crm')
  t.equal(stored?.status, 'revoked')
  t.match(stored?.status_reason, /invalid_grant/)
})

t.test('a rate limit is waited out once (Retry-After) and then reported', async (t) => {
  const account = await createAccount(ctx.db)
  await connectIntegration(ctx.db, account.user.id, 'crm', { account_label: '', method: 'api_key', credentials: { api_key: 'key-1' } })
  const conn = await connectionOf(deps, account.user.id, 'crm')
  s.answers.push({ status: 429, headers: { 'retry-after': '2' }, body: { status: 'error', message: 'You have reached your secondly limit.', category: 'RATE_LIMITS' } })
  t.same((await conn.request({ method: 'GET', path: '/once' })).body, { ok: true, path: '/once' }, 'the retry succeeded')
  s.answers.push({ status: 429, body: {} }, { status: 503, body: {} })
  await t.rejects(conn.request({ method: 'GET', path: '/twice' }), { reason: 'rate_limited', message: 'HubSpot is busy (HTTP 503) and asked to try again later' })
})

t.test('any other failure is rejected with the status and what the service said', async (t) => {
  const account = await createAccount(ctx.db)
  await connectIntegration(ctx.db, account.user.id, 'crm', { account_label: '', method: 'api_key', credentials: { api_key: 'key-1' } })
  const conn = await connectionOf(deps, account.user.id, 'crm')
  s.answers.push({ status: 409, body: { status: 'error', message: 'Contact already exists. Existing ID: 501', category: 'CONFLICT' } })
  await t.rejects(conn.request({ method: 'POST', path: '/crm/v3/objects/contacts', body: {} }), { reason: 'rejected', status: 409, message: 'HubSpot refused the request (HTTP 409: Contact already exists. Existing ID: 501)' })
  await t.rejects(conn.request({ method: 'GET', path: 'http://127.0.0.9:1/elsewhere' }), { reason: 'rejected', message: /not on the service's own origin/ })
})
