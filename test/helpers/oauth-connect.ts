import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { oauthServer, type OAuthServer } from './oauth-server.ts'

// What connecting accounts needs of the providers (docs/integrations.md): Google's authorize, token and revocation
// endpoints (the shared OAuth authorization server, test/helpers/oauth-server.ts) with the one Calendar API request
// of the account check, and Calendly's GET /users/me for a personal access token. The calendar and booking tools'
// full stand-ins are elsewhere; this one answers only what connecting asks.

export const CLIENT_ID = 'switchboard-test-client.apps.googleusercontent.com'
export const CLIENT_SECRET = 'switchboard-test-secret'
export const ACCOUNT_EMAIL = 'jane@example.com'
export const CALENDLY_TOKEN = 'calendly-pat-0123456789'
export const CALENDLY_EMAIL = 'booker@example.com'

export interface AccountsStandIn {
  url: string
  /** Points the Google and Calendly variables here (and lets the guarded client reach loopback). */
  env: Record<string, string>
  oauth: OAuthServer
  /** The next token request answers this instead. */
  failTokens: (status: number, body: unknown) => void
  /** The revocation endpoint answers this status (and revokes nothing) from now on. */
  failRevoke: (status: number) => void
  /** The account check answers this status from now on (200: works again). */
  failAccount: (status: number) => void
}

export async function accountsStandIn (t: Test): Promise<AccountsStandIn> {
  const oauth = oauthServer({ authorizePath: '/o/oauth2/v2/auth', tokenPath: '/token', revokePath: '/revoke', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET })
  const failures = { token: undefined as undefined | { status: number, body: unknown }, revoke: 200, account: 200 }
  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(typeof body === 'string' ? body : JSON.stringify(body))
  }
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://stand-in')
      const body = Buffer.concat(chunks).toString()
      if (url.pathname === '/token' && failures.token !== undefined) {
        const { status, body: answer } = failures.token
        failures.token = undefined
        return json(res, status, answer)
      }
      if (url.pathname === '/revoke' && failures.revoke !== 200) return json(res, failures.revoke, { error: 'temporarily_unavailable' })
      if (oauth.handle(req, res, url.pathname, url.searchParams, body)) return
      if (url.pathname === '/calendar/v3/calendars/primary/events') {
        if (!oauth.valid(req.headers.authorization)) return json(res, 401, { error: { code: 401, message: 'Request had invalid authentication credentials.', status: 'UNAUTHENTICATED' } })
        if (failures.account !== 200) return json(res, failures.account, { error: { code: failures.account, message: 'The caller does not have permission', status: 'PERMISSION_DENIED' } })
        return json(res, 200, { kind: 'calendar#events', summary: ACCOUNT_EMAIL, timeZone: 'Europe/Berlin', items: [] })
      }
      if (url.pathname === '/calendly/users/me') {
        if (req.headers.authorization !== `Bearer ${CALENDLY_TOKEN}`) return json(res, 401, { title: 'Unauthenticated', message: 'The access token is invalid' })
        if (failures.account !== 200) return json(res, failures.account, { title: 'Internal Server Error', message: 'failing' })
        return json(res, 200, { resource: { email: CALENDLY_EMAIL, name: 'Booker', uri: 'https://api.calendly.com/users/AAAA' } })
      }
      json(res, 404, { error: 'not found' })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
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
    oauth,
    failTokens: (status, body) => { failures.token = { status, body } },
    failRevoke: (status) => { failures.revoke = status },
    failAccount: (status) => { failures.account = status }
  }
}
