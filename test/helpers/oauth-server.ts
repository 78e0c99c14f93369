import { createHash, randomBytes } from 'node:crypto'
import type http from 'node:http'

// An OAuth 2.0 authorization server (RFC 6749 authorization code grant, RFC 7636 PKCE, RFC 7009 revocation) for
// the providers' stand-ins: each mounts it at its service's paths and checks Bearer tokens with `valid`.

export interface OAuthServerOptions {
  /** Paths as the service has them: Google `/o/oauth2/v2/auth` and `/token`, HubSpot `/oauth/v1/token`… */
  authorizePath: string
  tokenPath: string
  revokePath?: string
  clientId: string
  clientSecret: string
  /** Seconds an access token lasts (default 3600). */
  lifetime?: number
  /** A new refresh token with every refresh (Microsoft, HubSpot may rotate them; default false). */
  rotate?: boolean
  /** Approve at once instead of showing the Allow page (for tests without a browser). */
  autoApprove?: boolean
}

interface Grant { clientId: string, redirectUri: string, challenge: string, scope: string, used: boolean }
interface Family { refresh: string, access: Map<string, number>, revoked: boolean }

export interface OAuthServer {
  /** Answers the request when it is one of the server's paths; false otherwise (the stand-in handles it). */
  handle: (req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams, body: string) => boolean
  /** Whether an Authorization header holds a live access token. */
  valid: (authorization: string | undefined) => boolean
  /** Access tokens issued, oldest first, with whether each still works. */
  accessTokens: () => Array<{ token: string, live: boolean }>
  /** Grant requests the token endpoint received (grant_type and the form), in order. */
  tokenRequests: URLSearchParams[]
  /** Ends every access token now (a refresh gives a new one). */
  expire: () => void
  /** Revokes everything: access tokens stop working and refresh tokens answer invalid_grant. */
  revokeAll: () => void
  /** Issues a connection's tokens directly (as if a user had authorized): for tests that do not go through the browser. */
  issue: () => { access_token: string, refresh_token: string, expires_in: number }
  /** Tokens revoked through the revocation endpoint. */
  revoked: string[]
  /** The next request to the token or revocation endpoint is answered with this status and body instead. */
  failNext: (endpoint: 'token' | 'revoke', status: number, body?: unknown) => void
}

const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url')
const token = (prefix: string) => `${prefix}-${randomBytes(18).toString('base64url')}`

function json (res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' })
  res.end(JSON.stringify(body))
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

export function oauthServer (options: OAuthServerOptions): OAuthServer {
  const lifetime = options.lifetime ?? 3600
  const codes = new Map<string, Grant>()
  const families: Family[] = []
  const issued: string[] = []
  const tokenRequests: URLSearchParams[] = []
  const revoked: string[] = []
  const failures = new Map<'token' | 'revoke', { status: number, body: unknown }>()
  /** Answers a failure queued for the endpoint; true when it did. */
  const failed = (endpoint: 'token' | 'revoke', res: http.ServerResponse) => {
    const failure = failures.get(endpoint)
    if (failure === undefined) return false
    failures.delete(endpoint)
    res.writeHead(failure.status, { 'content-type': 'application/json' })
    res.end(typeof failure.body === 'string' ? failure.body : JSON.stringify(failure.body ?? {}))
    return true
  }

  function issue (): { access_token: string, refresh_token: string, expires_in: number } {
    const family: Family = { refresh: token('refresh'), access: new Map(), revoked: false }
    const access = token('access')
    family.access.set(access, Date.now() + lifetime * 1000)
    families.push(family)
    issued.push(access)
    return { access_token: access, refresh_token: family.refresh, expires_in: lifetime }
  }

  const live = (access: string) => families.some((f) => !f.revoked && (f.access.get(access) ?? 0) > Date.now())

  function redirect (res: http.ServerResponse, redirectUri: string, params: Record<string, string>): void {
    const to = new URL(redirectUri)
    for (const [name, value] of Object.entries(params)) to.searchParams.set(name, value)
    res.writeHead(302, { location: to.toString() })
    res.end()
  }

  function authorize (res: http.ServerResponse, params: URLSearchParams, decision: 'ask' | 'allow' | 'deny'): void {
    const [clientId, redirectUri, state, challenge, method] = ['client_id', 'redirect_uri', 'state', 'code_challenge', 'code_challenge_method'].map((n) => params.get(n) ?? '')
    if (clientId !== options.clientId || redirectUri === '') return json(res, 400, { error: 'invalid_request', error_description: 'unknown client or no redirect_uri' })
    if (params.get('response_type') !== 'code' || challenge === '' || method !== 'S256') return redirect(res, redirectUri, { error: 'invalid_request', error_description: 'PKCE S256 and response_type=code are required', state })
    if (decision === 'deny') return redirect(res, redirectUri, { error: 'access_denied', state })
    if (decision === 'ask') {
      const hidden = [...params].map(([n, v]) => `<input type="hidden" name="${escape(n)}" value="${escape(v)}">`).join('')
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      res.end(`<!doctype html><title>Authorize</title><h1>Allow Switchboard to use your account?</h1><p>Scopes: ${escape(params.get('scope') ?? '')}</p>` +
        `<form method="post" action="${escape(options.authorizePath)}">${hidden}<button name="decision" value="allow">Allow</button> <button name="decision" value="deny">Deny</button></form>`)
      return
    }
    const code = token('code')
    codes.set(code, { clientId, redirectUri, challenge, scope: params.get('scope') ?? '', used: false })
    redirect(res, redirectUri, { code, state })
  }

  function tokenEndpoint (req: http.IncomingMessage, res: http.ServerResponse, form: URLSearchParams): void {
    tokenRequests.push(form)
    const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1]
    const [basicId, basicSecret] = basic === undefined ? [] : Buffer.from(basic, 'base64').toString().split(':')
    if ((form.get('client_id') ?? basicId) !== options.clientId || (form.get('client_secret') ?? basicSecret) !== options.clientSecret) {
      return json(res, 401, { error: 'invalid_client', error_description: 'client authentication failed' })
    }
    if (form.get('grant_type') === 'authorization_code') {
      const grant = codes.get(form.get('code') ?? '')
      if (grant === undefined || grant.used) return json(res, 400, { error: 'invalid_grant', error_description: 'the code is unknown or was used' })
      grant.used = true
      if (grant.redirectUri !== form.get('redirect_uri')) return json(res, 400, { error: 'invalid_grant', error_description: 'redirect_uri does not match' })
      if (s256(form.get('code_verifier') ?? '') !== grant.challenge) return json(res, 400, { error: 'invalid_grant', error_description: 'PKCE verification failed' })
      return json(res, 200, { ...issue(), token_type: 'Bearer', scope: grant.scope })
    }
    if (form.get('grant_type') === 'refresh_token') {
      const family = families.find((f) => f.refresh === form.get('refresh_token'))
      if (family === undefined || family.revoked) return json(res, 400, { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' })
      const access = token('access')
      family.access.set(access, Date.now() + lifetime * 1000)
      issued.push(access)
      if (options.rotate === true) family.refresh = token('refresh')
      return json(res, 200, { access_token: access, expires_in: lifetime, token_type: 'Bearer', ...(options.rotate === true ? { refresh_token: family.refresh } : {}) })
    }
    json(res, 400, { error: 'unsupported_grant_type' })
  }

  return {
    tokenRequests,
    revoked,
    issue,
    failNext: (endpoint, status, body) => { failures.set(endpoint, { status, body }) },
    valid: (authorization) => live(/^Bearer (.+)$/.exec(authorization ?? '')?.[1] ?? ''),
    accessTokens: () => issued.map((t) => ({ token: t, live: live(t) })),
    expire: () => { for (const f of families) for (const t of f.access.keys()) f.access.set(t, 0) },
    revokeAll: () => { for (const f of families) f.revoked = true },
    handle (req, res, path, query, body) {
      if (path === options.authorizePath && req.method === 'GET') {
        authorize(res, query, options.autoApprove === true ? 'allow' : 'ask')
        return true
      }
      if (path === options.authorizePath && req.method === 'POST') {
        const form = new URLSearchParams(body)
        authorize(res, form, form.get('decision') === 'allow' ? 'allow' : 'deny')
        return true
      }
      if (path === options.tokenPath && req.method === 'POST') {
        if (failed('token', res)) return true
        tokenEndpoint(req, res, new URLSearchParams(body))
        return true
      }
      if (options.revokePath !== undefined && path === options.revokePath && req.method === 'POST') {
        if (failed('revoke', res)) return true
        const revokedToken = new URLSearchParams(body).get('token') ?? query.get('token') ?? ''
        revoked.push(revokedToken)
        for (const f of families) if (f.refresh === revokedToken || f.access.has(revokedToken)) f.revoked = true
        res.writeHead(200)
        res.end()
        return true
      }
      return false
    }
  }
}
