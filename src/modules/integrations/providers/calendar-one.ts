import type { ProviderInfo } from '../providers.ts'

/** Google Calendar (API v3), OAuth 2.0 only. */
export const calendarOne: ProviderInfo = {
  provider: 'calendar_one',
  service: 'Google Calendar',
  methods: ['oauth'],
  scopes: ['https://www.googleapis.com/auth/calendar.events', 'https://www.googleapis.com/auth/calendar.freebusy'],
  // A refresh token is given only for offline access, and again on a reconnect only when consent is asked again.
  authorizeParams: { access_type: 'offline', prompt: 'consent' },
  // The primary calendar's summary is the account's e-mail address.
  account: async (conn, signal) => String((await conn.request({ method: 'GET', path: '/calendars/primary' }, signal)).body?.summary ?? '')
}
