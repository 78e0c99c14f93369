import { timingSafeEqual } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ConsoleSession } from './queries.ts'

// What a console page may do: nothing but load this server's own styles, scripts and recordings and post its own forms.
export const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; media-src 'self'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store'
}

/** The policy of a page whose script talks to this server (fetch, the agent page's web call and its WebSocket). */
export const CONNECTING_PAGE_CSP = `${PAGE_HEADERS['content-security-policy']}; connect-src 'self'`

export const SESSION_COOKIE = 'switchboard_session'
/** The sign-in form's CSRF token before there is a session (double submit: cookie and form field must agree). */
export const LOGIN_CSRF_COOKIE = 'switchboard_login_csrf'

/** `a=1; b=2` as a map; the first of repeated names wins, and a value that is not valid %-encoding is skipped. */
export function parseCookies (header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>()
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=')
    if (eq < 0) continue
    const name = part.slice(0, eq).trim()
    if (name === '' || cookies.has(name)) continue
    try {
      cookies.set(name, decodeURIComponent(part.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1')))
    } catch {}
  }
  return cookies
}

export interface CookieOptions { path?: string, maxAgeSeconds?: number, secure: boolean }

/** HttpOnly and SameSite=Lax always: no script reads it, and other sites' forms do not send it. */
export function serializeCookie (name: string, value: string, options: CookieOptions): string {
  const parts = [`${name}=${value}`, `Path=${options.path ?? '/'}`, 'HttpOnly', 'SameSite=Lax']
  if (options.maxAgeSeconds !== undefined) parts.push(`Max-Age=${options.maxAgeSeconds}`)
  if (options.secure) parts.push('Secure')
  return parts.join('; ')
}

/** Constant-time comparison of two tokens; false for a missing one. */
export function sameToken (given: string | undefined, expected: string | undefined): boolean {
  if (given === undefined || expected === undefined || expected === '') return false
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

/**
 * A POST from a page of another site carries that site's Origin. Browsers send it on every cross-origin
 * POST (and modern ones on same-origin POSTs too); a request without one (curl, an old browser) relies on
 * the CSRF token alone.
 */
export function originAllowed (origin: string | undefined, publicBaseUrl: string, host: string | undefined): boolean {
  if (origin === undefined) return true
  const own = [new URL(publicBaseUrl).origin, ...(host === undefined ? [] : [`http://${host.toLowerCase()}`, `https://${host.toLowerCase()}`])]
  return own.includes(origin.toLowerCase())
}

/**
 * Where a browser goes after signing in: `next` when it is a path of this site, else the agents. The
 * WHATWG parser reads `next` as a browser would (backslashes as slashes, tabs and line breaks dropped,
 * dot segments resolved), and the answer is its normalised path: `/.//evil` resolves to `//evil`, which a
 * browser would read as another host, so a path that starts with two slashes is refused too.
 */
export function afterSignIn (next: string | undefined): string {
  if (next === undefined || next.length > 2000 || !next.startsWith('/')) return HOME
  const url = new URL(next, 'http://console.invalid')
  if (url.origin !== 'http://console.invalid' || /^\/[/\\]/.test(url.pathname)) return HOME
  return `${url.pathname}${url.search}`
}

export const HOME = '/agents'

/**
 * The signed-in session of a page's request; signed out, the browser is sent to the sign-in page, which
 * brings it back here afterwards (a failure e-mail's link to the delivery log, say).
 */
export function sessionOf (request: FastifyRequest, reply: FastifyReply): ConsoleSession | undefined {
  if (request.consoleSession === undefined) void reply.redirect(`/login?next=${encodeURIComponent(request.url)}`, 303)
  return request.consoleSession
}
