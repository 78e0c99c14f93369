import type { FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import { startCalendlyStandIn, type CalendlyStandIn } from './calendly-standin.ts'
import { CLIENT_ID, startGoogle, type GoogleCalendarStandin } from './google-calendar-standin.ts'
import type { OAuthServer } from './oauth-server.ts'

// What connecting accounts needs of the providers (docs/integrations.md): Google's stand-in with its OAuth 2.0
// server (authorize, token and revocation endpoints; the account check reads the primary calendar), and Calendly's,
// which takes a personal access token.

export { CLIENT_ID }
export const ACCOUNT_EMAIL = 'jane@example.com'
export const CALENDLY_TOKEN = 'calendly-pat-0123456789'
export const CALENDLY_EMAIL = 'booker@example.com'
/** What the Integrations page names the Calendly account: its user's name and e-mail (providers/booking-two.ts). */
export const CALENDLY_ACCOUNT = `Ada Lovelace (${CALENDLY_EMAIL})`

export interface AccountsStandIn {
  /** Points the Google and Calendly variables at the stand-ins (and lets the guarded client reach loopback). */
  env: Record<string, string>
  oauth: OAuthServer
  calendar: GoogleCalendarStandin
  calendly: CalendlyStandIn
}

export async function accountsStandIn (t: Test): Promise<AccountsStandIn> {
  const google = await startGoogle(t, { owner: ACCOUNT_EMAIL })
  const calendly = await startCalendlyStandIn(t)
  calendly.tokens.add(CALENDLY_TOKEN)
  calendly.user.email = CALENDLY_EMAIL
  return {
    env: { ...google.env, CALENDLY_API_URL: calendly.apiUrl, DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true' },
    oauth: google.oauth,
    calendar: google.calendar,
    calendly
  }
}

/**
 * Connects the API key's account to an OAuth provider the way an integrator does: the authorization URL from the API,
 * the person's Allow on the provider's page, the provider's redirect to the callback. Throws unless it connected.
 */
export async function connectThroughApi (app: FastifyInstance, headers: Record<string, string>, provider: string): Promise<void> {
  const asked = await app.inject({ method: 'POST', url: `/v1/integrations/${provider}/authorizations`, headers })
  if (asked.statusCode !== 201) throw new Error(`authorizations answered ${asked.statusCode}: ${asked.body}`)
  const page = new URL(asked.json().authorization_url)
  const form = new URLSearchParams(page.searchParams)
  form.set('decision', 'allow')
  const allowed = await fetch(`${page.origin}${page.pathname}`, { method: 'POST', body: form, redirect: 'manual' })
  const back = new URL(allowed.headers.get('location') ?? '')
  const done = await app.inject({ method: 'GET', url: `${back.pathname}${back.search}` })
  if (done.statusCode !== 200 || !done.body.includes('is connected')) throw new Error(`the callback answered ${done.statusCode}: ${done.body.slice(0, 300)}`)
}
