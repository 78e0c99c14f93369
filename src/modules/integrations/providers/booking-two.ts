import type { ProviderInfo } from '../types.ts'

// Calendly (booking_two): OAuth 2.0 (an app at developer.calendly.com; authorization code with PKCE, refresh tokens)
// or a personal access token (Integrations → API & Webhooks). The scopes cover what the tool does: the user
// (GET /users/me), event types and their available times, and scheduled events, whose write scope also books
// (POST /invitees) and cancels. The account check is GET /users/me.
export const bookingTwo: ProviderInfo = {
  provider: 'booking_two',
  service: 'Calendly',
  methods: ['oauth', 'api_key'],
  scopes: ['users:read', 'event_types:read', 'scheduled_events:write'],
  account: async (conn, signal) => {
    const me = (await conn.request({ method: 'GET', path: '/users/me' }, signal)).body?.resource
    const name = String(me?.name ?? '')
    const email = String(me?.email ?? '')
    return name !== '' && email !== '' ? `${name} (${email})` : name || email
  }
}
