import { createHash, randomBytes } from 'node:crypto'
import Fastify from 'fastify'
import type { Test } from 'tap'

// TEMPORARY minimal authorization server until the coordinator's test/helpers/oauth-server.ts is in main.

export const CLIENT_ID = 'switchboard-test-client'
export const CLIENT_SECRET = 'switchboard-test-secret'
export const ACCOUNT_EMAIL = 'jane@example.com'
export const CALENDLY_TOKEN = 'calendly-pat-0123456789'
export const CALENDLY_EMAIL = 'booker@example.com'

export interface AccountsStandIn {
  url: string
  /** The env that points the Google and Calendly variables at this server. */
  env: Record<string, string>
  tokenRequests: Array<Record<string, string>>
  revoked: string[]
  accessTokens: () => string[]
  /** The next token request answers this status and body instead. */
  failTokens: (status: number, body: unknown) => void
  failRevoke: (status: number) => void
  failAccount: (status: number) => void
}

/**
 * A loopback server standing in for Google's authorize, token and revocation endpoints and the one Calendar API
 * request of the account check (GET /calendar/v3/calendars/primary), and Calendly's GET /users/me.
 */
export async function accountsStandIn (t: Test): Promise<AccountsStandIn> {
  const app = Fastify()
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)))
  })
  const codes = new Map<string, { challenge: string, redirectUri: string }>()
  const tokens = new Set<string>()
  const state = { tokenFailure: undefined as undefined | { status: number, body: unknown }, revokeStatus: 200, accountStatus: 200 }
  const tokenRequests: Array<Record<string, string>> = []
  const revoked: string[] = []

  app.get<{ Querystring: Record<string, string> }>('/o/oauth2/v2/auth', async (request, reply) => {
    const q = request.query
    const code = randomBytes(16).toString('hex')
    codes.set(code, { challenge: q.code_challenge, redirectUri: q.redirect_uri })
    return reply.type('text/html').send(`<!doctype html><html lang="en"><head><title>Sign in</title></head><body><main><h1>Allow access?</h1>
<form method="get" action="${q.redirect_uri}"><input type="hidden" name="code" value="${code}"><input type="hidden" name="state" value="${q.state}"><button type="submit">Allow</button></form></main></body></html>`)
  })
  app.post<{ Body: Record<string, string> }>('/token', async (request, reply) => {
    const form = request.body
    tokenRequests.push(form)
    if (state.tokenFailure !== undefined) {
      const failure = state.tokenFailure
      state.tokenFailure = undefined
      return reply.code(failure.status).send(failure.body)
    }
    const pending = codes.get(form.code)
    codes.delete(form.code)
    if (form.client_id !== CLIENT_ID || form.client_secret !== CLIENT_SECRET) return reply.code(401).send({ error: 'invalid_client' })
    if (pending === undefined || pending.redirectUri !== form.redirect_uri ||
      createHash('sha256').update(form.code_verifier ?? '').digest('base64url') !== pending.challenge) return reply.code(400).send({ error: 'invalid_grant' })
    const access = randomBytes(16).toString('hex')
    tokens.add(access)
    return { access_token: access, refresh_token: randomBytes(16).toString('hex'), expires_in: 3600, token_type: 'Bearer' }
  })
  app.post<{ Body: Record<string, string> }>('/revoke', async (request, reply) => {
    revoked.push(request.body.token)
    return reply.code(state.revokeStatus).send({})
  })
  app.get('/calendar/v3/calendars/primary', async (request, reply) => {
    if (!tokens.has((request.headers.authorization ?? '').replace(/^Bearer /, ''))) return reply.code(401).send({ error: { code: 401, message: 'Invalid Credentials' } })
    if (state.accountStatus !== 200) return reply.code(state.accountStatus).send({ error: { code: state.accountStatus, message: 'failing' } })
    return { kind: 'calendar#calendar', id: ACCOUNT_EMAIL, summary: ACCOUNT_EMAIL, timeZone: 'Europe/Berlin' }
  })
  app.get('/calendly/users/me', async (request, reply) => {
    if (request.headers.authorization !== `Bearer ${CALENDLY_TOKEN}`) return reply.code(401).send({ title: 'Unauthenticated', message: 'The access token is invalid' })
    if (state.accountStatus !== 200) return reply.code(state.accountStatus).send({ title: 'Failing', message: 'failing' })
    return { resource: { email: CALENDLY_EMAIL, name: 'Booker', uri: 'https://api.calendly.com/users/AAA' } }
  })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  return {
    url,
    env: {
      GOOGLE_CLIENT_ID: CLIENT_ID,
      GOOGLE_CLIENT_SECRET: CLIENT_SECRET,
      GOOGLE_AUTHORIZE_URL: `${url}/o/oauth2/v2/auth`,
      GOOGLE_TOKEN_URL: `${url}/token`,
      GOOGLE_REVOKE_URL: `${url}/revoke`,
      GOOGLE_CALENDAR_API_URL: `${url}/calendar/v3`,
      CALENDLY_API_URL: `${url}/calendly`,
      DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true'
    },
    tokenRequests,
    revoked,
    accessTokens: () => [...tokens],
    failTokens: (status, body) => { state.tokenFailure = { status, body } },
    failRevoke: (status) => { state.revokeStatus = status },
    failAccount: (status) => { state.accountStatus = status }
  }
}
