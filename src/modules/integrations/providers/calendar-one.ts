import type { ProviderInfo } from '../types.ts'

/** Google Calendar (API v3), OAuth 2.0 only. */
export const calendarOne: ProviderInfo = {
  provider: 'calendar_one',
  service: 'Google Calendar',
  methods: ['oauth'],
  // The narrowest scopes that do the work: events.insert/patch/delete/list (calendar.events) and freeBusy.query,
  // which calendar.events does not cover (calendar.freebusy). Neither reads calendar metadata (calendars.get and
  // calendarList.get need calendar.readonly or broader).
  scopes: ['https://www.googleapis.com/auth/calendar.events', 'https://www.googleapis.com/auth/calendar.freebusy'],
  // A refresh token is given only for offline access, and again on a reconnect only when consent is asked again.
  authorizeParams: { access_type: 'offline', prompt: 'consent' },
  // events.list answers the calendar's title beside its events; the primary calendar's title is the account's
  // e-mail address. One event at most: the call proves the token and the scope, nothing more is read.
  account: async (conn, signal) => {
    const answer = await conn.request({ method: 'GET', path: '/calendars/primary/events', query: { maxResults: 1 } }, signal)
    return typeof answer.body?.summary === 'string' ? answer.body.summary : ''
  }
}
