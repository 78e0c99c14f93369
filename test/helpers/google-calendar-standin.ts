import { randomBytes } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { oauthServer, type OAuthServer, type OAuthServerOptions } from './oauth-server.ts'

// A local server that answers like the Google Calendar API v3 (https://www.googleapis.com/calendar/v3) for what the
// calendar_one adapter uses, written from Google's reference (developers.google.com/calendar/api/v3/reference and
// the API's discovery document):
// - POST /freeBusy: {timeMin, timeMax, timeZone?, items: [{id}]} -> {kind: 'calendar#freeBusy', timeMin, timeMax,
//   calendars: {<id>: {busy: [{start, end}]} | {errors: [{domain, reason: 'notFound'}], busy: []}}}; opaque,
//   non-cancelled events count as busy, clipped to the range and merged.
// - GET/POST /calendars/{calendarId}/events (list: timeMin/timeMax, singleEvents, orderBy=startTime (only with
//   singleEvents), privateExtendedProperty=key=value (repeatable), q, maxResults, pageToken -> nextPageToken, and
//   nextSyncToken on the last page); GET/PATCH/DELETE /calendars/{calendarId}/events/{eventId} (DELETE: 204, 410
//   `deleted` when cancelled already, 404 `notFound`).
// - GET /calendars/{calendarId} and GET /users/me/calendarList/{calendarId}. 'primary' is the owner's calendar,
//   whose id is the owner's e-mail address and whose title (summary) is that address too, as Google makes it.
// - Bearer tokens; a token that is not (or no longer) valid gets 401 `authError` "Invalid Credentials". Errors
//   carry Google's body: {error: {code, message, errors: [{domain, reason, message}], status}}.
// - Scopes: each method answers 403 `insufficientPermissions` unless the connection holds one of the scopes its
//   reference lists (by default the connection holds what calendar_one asks for: calendar.events, calendar.freebusy).
// Event times are stored as instants; `dateTime` without an offset is read in the `timeZone` given beside it, and
// answered with the offset of the event's time zone (or of the calendar's).

export interface StandinRequest { method: string, path: string, query: URLSearchParams, body: any, token: string | undefined }

export interface EventDateTime { dateTime?: string, date?: string, timeZone?: string }

/** An event as the stand-in keeps it: Google's resource, plus its instants. */
export interface StoredEvent {
  id: string
  status: 'confirmed' | 'tentative' | 'cancelled'
  summary?: string
  description?: string
  location?: string
  start: EventDateTime
  end: EventDateTime
  attendees?: Array<{ email: string, displayName?: string, comment?: string, responseStatus?: string }>
  extendedProperties?: { private?: Record<string, string>, shared?: Record<string, string> }
  transparency?: 'opaque' | 'transparent'
  sequence: number
  created: string
  updated: string
  /** The query parameter `sendUpdates` of the request that made or last changed it. */
  sendUpdates: string | null
  /** Instants of start and end. */
  from: Date
  to: Date
  [key: string]: unknown
}

interface Calendar { id: string, summary: string, timeZone: string, events: Map<string, StoredEvent> }

export interface GoogleCalendarStandin {
  /** The API's base URL, for GOOGLE_CALENDAR_API_URL (ends in /calendar/v3). */
  url: string
  /** The server's origin (other endpoints, such as OAuth's, may be mounted on it with `routes`). */
  origin: string
  /** Every API request, in order. */
  requests: StandinRequest[]
  /** The primary calendar's owner. */
  owner: { email: string }
  /**
   * Whether a bearer token is valid now. Default: it is one of `tokens` (tests that run an OAuth server replace
   * this with that server's check).
   */
  accepts: (token: string) => boolean
  /** The access tokens the default `accepts` takes. */
  tokens: Set<string>
  /** The scopes the connection was granted (Google checks each method's). */
  scopes: Set<string>
  /** Most events one page of events.list holds (Google allows up to 2500); default 250. */
  pageSize: number
  /** Adds a calendar the owner can use (besides the primary one). */
  addCalendar: (id: string, summary: string, timeZone: string) => void
  /** An event someone else put in the calendar, busy from `start` to `end`; answers it. */
  busy: (start: Date, end: Date, options?: { calendarId?: string, summary?: string, extendedProperties?: StoredEvent['extendedProperties'], transparency?: 'opaque' | 'transparent' }) => StoredEvent
  /** The events of a calendar (cancelled ones too), by start. */
  events: (calendarId?: string) => StoredEvent[]
  /**
   * The next API requests (after authentication) are answered with these failures, in turn. `reason` defaults to
   * Google's for the status (429 and 403: rateLimitExceeded, 500 and 503: backendError).
   */
  failNext: (status: number, options?: { reason?: string, retryAfter?: number }) => void
  /** Runs when a request arrives, before it is answered (for example: take a slot between two requests). */
  onRequest: ((request: StandinRequest) => void | Promise<void>) | undefined
  /** Extra endpoints on the same server (an OAuth server's authorize and token pages): true when handled. */
  routes: Array<(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => boolean | Promise<boolean>>
}

const SCOPE = 'https://www.googleapis.com/auth/calendar'
/** What each method accepts, from its reference page ("Authorization": at least one of these scopes). */
const SCOPES = {
  freeBusy: [SCOPE, `${SCOPE}.readonly`, `${SCOPE}.freebusy`, `${SCOPE}.events.freebusy`],
  readEvents: [SCOPE, `${SCOPE}.readonly`, `${SCOPE}.events`, `${SCOPE}.events.readonly`, `${SCOPE}.events.owned`, `${SCOPE}.events.owned.readonly`],
  writeEvents: [SCOPE, `${SCOPE}.events`, `${SCOPE}.events.owned`],
  calendar: [SCOPE, `${SCOPE}.readonly`, `${SCOPE}.calendars`, `${SCOPE}.calendars.readonly`, `${SCOPE}.app.created`],
  calendarList: [SCOPE, `${SCOPE}.readonly`, `${SCOPE}.calendarlist`, `${SCOPE}.calendarlist.readonly`]
}

/** What calendar_one asks for (src/modules/integrations/providers/calendar-one.ts). */
export const NARROW_SCOPES = [`${SCOPE}.events`, `${SCOPE}.freebusy`]

const STATUS: Record<number, string> = { 400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND', 409: 'ALREADY_EXISTS', 410: 'NOT_FOUND', 429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE' }

const DEFAULT_REASON: Record<number, { reason: string }> = {
  403: { reason: 'rateLimitExceeded' },
  429: { reason: 'rateLimitExceeded' },
  500: { reason: 'backendError' },
  503: { reason: 'backendError' }
}

/** Messages and domains of the reasons Google's error guide lists. */
const REASONS: Record<string, { domain: string, message: string }> = {
  rateLimitExceeded: { domain: 'usageLimits', message: 'Rate Limit Exceeded' },
  userRateLimitExceeded: { domain: 'usageLimits', message: 'User Rate Limit Exceeded' },
  quotaExceeded: { domain: 'usageLimits', message: 'Calendar usage limits exceeded.' },
  forbiddenForNonOrganizer: { domain: 'calendar', message: 'Shared properties can only be changed by the organizer of the event.' },
  backendError: { domain: 'global', message: 'Backend Error' }
}

/** Google's error body. */
export function googleError (code: number, reason: string, message: string, domain = 'global') {
  return { error: { errors: [{ domain, reason, message }], code, message, status: STATUS[code] ?? 'UNKNOWN' } }
}

class Failure extends Error {
  readonly code: number
  readonly reason: string
  readonly domain: string
  constructor (code: number, reason: string, message: string, domain = 'global') {
    super(message)
    this.code = code
    this.reason = reason
    this.domain = domain
  }
}

const badRequest = (message: string, reason = 'invalid') => new Failure(400, reason, message)

/** Minutes the time zone is ahead of UTC at that instant. */
function offsetOf (at: Date, timeZone: string): number {
  const parts = Object.fromEntries(new Intl.DateTimeFormat('en-US', {
    timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit'
  }).formatToParts(at).map((p) => [p.type, p.value]))
  const wall = Date.UTC(Number(parts.year), Number(parts.month) - 1, Number(parts.day), Number(parts.hour), Number(parts.minute), Number(parts.second))
  return Math.round((wall - Math.floor(at.getTime() / 1000) * 1000) / 60_000)
}

const pad = (n: number) => String(n).padStart(2, '0')

/** RFC 3339 with the offset of the time zone at that instant ('Z' in UTC), as Google answers times. */
export function rfc3339 (at: Date, timeZone: string): string {
  const offset = offsetOf(at, timeZone)
  const wall = new Date(at.getTime() + offset * 60_000).toISOString().slice(0, 19)
  if (offset === 0) return `${wall}Z`
  const sign = offset < 0 ? '-' : '+'
  return `${wall}${sign}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`
}

const validZone = (timeZone: string) => { try { offsetOf(new Date(), timeZone); return true } catch { return false } }

/** An RFC 3339 instant (with offset), or undefined. */
function instant (value: unknown): Date | undefined {
  if (typeof value !== 'string' || !/^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)$/i.test(value)) return undefined
  const at = new Date(value)
  return Number.isNaN(at.getTime()) ? undefined : at
}

/** An event's start or end as an instant: `dateTime` with an offset, or read in `timeZone`; `date` is midnight there. */
function whenOf (value: EventDateTime | undefined, which: 'start' | 'end', calendarZone: string): Date {
  if (value === undefined || (value.dateTime === undefined && value.date === undefined)) throw new Failure(400, 'required', `Missing ${which} time.`)
  if (value.timeZone !== undefined && !validZone(value.timeZone)) throw new Failure(400, 'timeZoneInvalid', `Invalid time zone definition for ${which} time.`)
  const zoned = value.dateTime ?? `${value.date ?? ''}T00:00:00`
  const withOffset = instant(zoned)
  if (withOffset !== undefined) return withOffset
  const local = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d)(?::(\d\d))?$/.exec(zoned)
  if (local === null) throw badRequest(`Invalid ${which} time.`)
  const timeZone = value.timeZone ?? (value.date !== undefined ? calendarZone : undefined)
  if (timeZone === undefined) throw new Failure(400, 'required', `Missing time zone definition for ${which} time.`)
  const wall = Date.UTC(Number(local[1]), Number(local[2]) - 1, Number(local[3]), Number(local[4]), Number(local[5]), Number(local[6] ?? 0))
  // The offset at the guess, then at the result (right across a daylight-saving change).
  const first = wall - offsetOf(new Date(wall), timeZone) * 60_000
  return new Date(wall - offsetOf(new Date(first), timeZone) * 60_000)
}

/** Google's ids: base32hex (a-v, 0-9). */
const eventId = () => [...randomBytes(20)].map((b) => '0123456789abcdefghijklmnopqrstuv'[b % 32]).join('')

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/** Patch semantics: members given replace, objects merge, arrays are replaced whole, null clears. */
function merge (target: Record<string, unknown>, patch: Record<string, unknown>) {
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete target[key]
    else if (isObject(value) && isObject(target[key])) merge(target[key] as Record<string, unknown>, value)
    else target[key] = structuredClone(value)
  }
}

/** The stand-in for a tap test: closed at teardown. */
export async function startGoogleCalendarStandin (t: Test, owner = 'owner@example.com', timeZone = 'UTC'): Promise<GoogleCalendarStandin> {
  const standin = await createGoogleCalendarStandin(owner, timeZone)
  t.teardown(standin.close)
  return standin
}

export async function createGoogleCalendarStandin (ownerEmail = 'owner@example.com', ownerZone = 'UTC'): Promise<GoogleCalendarStandin & { close: () => Promise<void> }> {
  const calendars = new Map<string, Calendar>()
  const failures: Array<{ status: number, reason?: string, retryAfter?: number }> = []
  let etags = 0
  const etag = () => `"${Date.now()}${++etags}"`
  const addCalendar = (id: string, summary: string, timeZone: string) => { calendars.set(id, { id, summary, timeZone, events: new Map() }) }
  addCalendar(ownerEmail, ownerEmail, ownerZone)

  const calendarOf = (id: string) => {
    const calendar = calendars.get(id === 'primary' ? ownerEmail : id)
    if (calendar === undefined) throw new Failure(404, 'notFound', 'Not Found')
    return calendar
  }

  const resource = (calendar: Calendar, event: StoredEvent) => {
    const { from, to, sendUpdates: _sendUpdates, ...fields } = event
    const zoned = (at: Date, given: EventDateTime) => given.date !== undefined ? given : { dateTime: rfc3339(at, given.timeZone ?? calendar.timeZone), ...(given.timeZone !== undefined ? { timeZone: given.timeZone } : {}) }
    return {
      kind: 'calendar#event',
      etag: etag(),
      htmlLink: `https://www.google.com/calendar/event?eid=${Buffer.from(`${event.id} ${calendar.id}`).toString('base64url')}`,
      iCalUID: `${event.id}@google.com`,
      creator: { email: ownerEmail, self: true },
      organizer: { email: calendar.id, self: true },
      reminders: { useDefault: true },
      eventType: 'default',
      ...fields,
      start: zoned(from, event.start),
      end: zoned(to, event.end)
    }
  }

  const store = (calendar: Calendar, body: Record<string, unknown>, sendUpdates: string | null) => {
    const start = body.start as EventDateTime | undefined
    const end = body.end as EventDateTime | undefined
    const from = whenOf(start, 'start', calendar.timeZone)
    const to = whenOf(end, 'end', calendar.timeZone)
    if (to.getTime() <= from.getTime()) throw new Failure(400, 'timeRangeEmpty', 'The specified time range is empty.', 'calendar')
    if (Array.isArray(body.attendees) && body.attendees.some((a) => !isObject(a) || typeof a.email !== 'string' || !/^[^@\s]+@[^@\s]+$/.test(a.email))) {
      throw badRequest('Invalid attendee email.')
    }
    const now = new Date().toISOString()
    const { id: _id, ...fields } = body
    const event: StoredEvent = {
      ...fields,
      id: eventId(),
      status: 'confirmed',
      start: start!,
      end: end!,
      attendees: Array.isArray(body.attendees) ? body.attendees.map((a) => ({ responseStatus: 'needsAction', ...a })) : undefined,
      sequence: 0,
      created: now,
      updated: now,
      sendUpdates,
      from,
      to
    }
    if (event.attendees === undefined) delete event.attendees
    calendar.events.set(event.id, event)
    return event
  }

  const sorted = (calendar: Calendar) => [...calendar.events.values()].sort((a, b) => a.from.getTime() - b.from.getTime())

  const requests: StandinRequest[] = []
  const standin: GoogleCalendarStandin & { close: () => Promise<void> } = {
    url: '',
    origin: '',
    requests,
    owner: { email: ownerEmail },
    tokens: new Set(),
    scopes: new Set(NARROW_SCOPES),
    accepts: (token) => standin.tokens.has(token),
    pageSize: 250,
    addCalendar,
    busy: (start, end, options = {}) => {
      const calendar = calendarOf(options.calendarId ?? 'primary')
      const event = store(calendar, { summary: options.summary ?? 'Busy', start: { dateTime: start.toISOString() }, end: { dateTime: end.toISOString() }, extendedProperties: options.extendedProperties, transparency: options.transparency }, null)
      if (options.extendedProperties === undefined) delete event.extendedProperties
      if (options.transparency === undefined) delete event.transparency
      return event
    },
    events: (calendarId = 'primary') => sorted(calendarOf(calendarId)),
    failNext: (status, options = {}) => { failures.push({ status, ...options }) },
    onRequest: undefined,
    routes: [],
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  }

  const freeBusy = (body: Record<string, unknown>) => {
    const min = instant(body.timeMin)
    const max = instant(body.timeMax)
    if (min === undefined) throw new Failure(400, 'required', 'Missing timeMin.')
    if (max === undefined) throw new Failure(400, 'required', 'Missing timeMax.')
    if (max.getTime() <= min.getTime()) throw new Failure(400, 'timeRangeEmpty', 'The specified time range is empty.', 'calendar')
    const zone = typeof body.timeZone === 'string' ? body.timeZone : 'UTC'
    if (!validZone(zone)) throw badRequest('Invalid time zone.')
    if (!Array.isArray(body.items)) throw new Failure(400, 'required', 'Missing items.')
    const answered: Record<string, unknown> = {}
    for (const item of body.items as unknown[]) {
      const id = isObject(item) && typeof item.id === 'string' ? item.id : ''
      const calendar = calendars.get(id === 'primary' ? ownerEmail : id)
      if (calendar === undefined) {
        answered[id] = { errors: [{ domain: 'global', reason: 'notFound' }], busy: [] }
        continue
      }
      const periods: Array<{ from: number, to: number }> = []
      for (const event of sorted(calendar)) {
        if (event.status === 'cancelled' || event.transparency === 'transparent') continue
        const from = Math.max(event.from.getTime(), min.getTime())
        const to = Math.min(event.to.getTime(), max.getTime())
        if (from >= to) continue
        const last = periods.at(-1)
        if (last !== undefined && from <= last.to) last.to = Math.max(last.to, to)
        else periods.push({ from, to })
      }
      answered[id] = { busy: periods.map((p) => ({ start: rfc3339(new Date(p.from), zone), end: rfc3339(new Date(p.to), zone) })) }
    }
    return { kind: 'calendar#freeBusy', timeMin: rfc3339(min, zone), timeMax: rfc3339(max, zone), calendars: answered }
  }

  const list = (calendar: Calendar, query: URLSearchParams) => {
    const min = query.has('timeMin') ? instant(query.get('timeMin')) : undefined
    const max = query.has('timeMax') ? instant(query.get('timeMax')) : undefined
    if (query.has('timeMin') && min === undefined) throw badRequest('Bad Request')
    if (query.has('timeMax') && max === undefined) throw badRequest('Bad Request')
    if (min !== undefined && max !== undefined && max.getTime() <= min.getTime()) throw new Failure(400, 'timeRangeEmpty', 'The specified time range is empty.', 'calendar')
    const orderBy = query.get('orderBy')
    if (orderBy !== null && orderBy !== 'startTime' && orderBy !== 'updated') throw badRequest('Invalid value for orderBy.')
    if (orderBy === 'startTime' && query.get('singleEvents') !== 'true') throw badRequest('The requested ordering is not available for the particular query.')
    const wanted = query.getAll('privateExtendedProperty').map((constraint) => {
      const at = constraint.indexOf('=')
      if (at <= 0) throw badRequest('Invalid extended property constraint.')
      return [constraint.slice(0, at), constraint.slice(at + 1)] as const
    })
    const words = (query.get('q') ?? '').toLowerCase().split(/\s+/).filter((w) => w !== '')
    const showDeleted = query.get('showDeleted') === 'true'
    const maxResults = query.has('maxResults') ? Number(query.get('maxResults')) : 250
    if (!Number.isInteger(maxResults) || maxResults < 1) throw badRequest('Invalid value for maxResults.')
    const found = sorted(calendar).filter((event) =>
      (showDeleted || event.status !== 'cancelled') &&
      (min === undefined || event.to.getTime() > min.getTime()) &&
      (max === undefined || event.from.getTime() < max.getTime()) &&
      wanted.every(([key, value]) => event.extendedProperties?.private?.[key] === value) &&
      words.every((word) => [event.summary, event.description, event.location, ...(event.attendees ?? []).flatMap((a) => [a.email, a.displayName])]
        .some((text) => typeof text === 'string' && text.toLowerCase().includes(word))))
    if (orderBy === 'updated') found.sort((a, b) => a.updated.localeCompare(b.updated))
    // A page token names where the next page starts, for this query only (Google's are opaque too).
    const signature = [...query].filter(([key]) => key !== 'pageToken').map(([k, v]) => `${k}=${v}`).sort().join('&')
    let offset = 0
    const token = query.get('pageToken')
    if (token !== null) {
      const decoded = /^(\d+):(.*)$/s.exec(Buffer.from(token, 'base64url').toString())
      if (decoded === null || decoded[2] !== signature) throw badRequest('Invalid page token.')
      offset = Number(decoded[1])
    }
    const size = Math.min(maxResults, standin.pageSize, 2500)
    const items = found.slice(offset, offset + size)
    const more = offset + size < found.length
    return {
      kind: 'calendar#events',
      etag: etag(),
      summary: calendar.summary,
      description: '',
      updated: new Date().toISOString(),
      timeZone: calendar.timeZone,
      accessRole: 'owner',
      defaultReminders: [{ method: 'popup', minutes: 10 }],
      ...(more ? { nextPageToken: Buffer.from(`${offset + size}:${signature}`).toString('base64url') } : { nextSyncToken: `sync${etags}` }),
      items: items.map((event) => resource(calendar, event))
    }
  }

  const needs = (accepted: string[]) => {
    if (!accepted.some((scope) => standin.scopes.has(scope))) throw new Failure(403, 'insufficientPermissions', 'Request had insufficient authentication scopes.')
  }

  const answer = async (method: string, path: string, query: URLSearchParams, body: any): Promise<{ status: number, body?: unknown }> => {
    if (method === 'POST' && path === '/freeBusy') {
      needs(SCOPES.freeBusy)
      return { status: 200, body: freeBusy(isObject(body) ? body : {}) }
    }
    const calendarPath = /^\/(?:calendars|users\/me\/calendarList)\/([^/]+)$/.exec(path)
    if (method === 'GET' && calendarPath !== null) {
      needs(path.startsWith('/users/') ? SCOPES.calendarList : SCOPES.calendar)
      const calendar = calendarOf(decodeURIComponent(calendarPath[1]))
      const entry = { etag: etag(), id: calendar.id, summary: calendar.summary, timeZone: calendar.timeZone }
      return path.startsWith('/users/')
        ? { status: 200, body: { kind: 'calendar#calendarListEntry', ...entry, accessRole: 'owner', primary: calendar.id === ownerEmail, selected: true, defaultReminders: [] } }
        : { status: 200, body: { kind: 'calendar#calendar', ...entry } }
    }
    const events = /^\/calendars\/([^/]+)\/events(?:\/([^/]+))?$/.exec(path)
    if (events === null) throw new Failure(404, 'notFound', 'Not Found')
    needs(method === 'GET' ? SCOPES.readEvents : SCOPES.writeEvents)
    const calendar = calendarOf(decodeURIComponent(events[1]))
    if (events[2] === undefined) {
      if (method === 'GET') return { status: 200, body: list(calendar, query) }
      if (method === 'POST') {
        if (!isObject(body)) throw badRequest('Bad Request')
        return { status: 200, body: resource(calendar, store(calendar, body, query.get('sendUpdates'))) }
      }
      throw new Failure(405, 'httpMethodNotAllowed', 'Method Not Allowed')
    }
    const event = calendar.events.get(decodeURIComponent(events[2]))
    if (event === undefined) throw new Failure(404, 'notFound', 'Not Found')
    if (method === 'GET') return { status: 200, body: resource(calendar, event) }
    if (method === 'DELETE') {
      if (event.status === 'cancelled') throw new Failure(410, 'deleted', 'Resource has been deleted')
      event.status = 'cancelled'
      event.updated = new Date().toISOString()
      event.sendUpdates = query.get('sendUpdates')
      return { status: 204 }
    }
    if (method === 'PATCH') {
      if (!isObject(body)) throw badRequest('Bad Request')
      const { id: _id, from: _from, to: _to, sendUpdates: _send, sequence: _sequence, ...patch } = body
      const changed = structuredClone({ ...event, from: undefined, to: undefined }) as Record<string, unknown>
      merge(changed, patch)
      const from = whenOf(changed.start as EventDateTime, 'start', calendar.timeZone)
      const to = whenOf(changed.end as EventDateTime, 'end', calendar.timeZone)
      if (to.getTime() <= from.getTime()) throw new Failure(400, 'timeRangeEmpty', 'The specified time range is empty.', 'calendar')
      Object.assign(event, changed, { from, to, sequence: event.sequence + 1, updated: new Date().toISOString(), sendUpdates: query.get('sendUpdates') })
      return { status: 200, body: resource(calendar, event) }
    }
    throw new Failure(405, 'httpMethodNotAllowed', 'Method Not Allowed')
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      void (async () => {
        const raw = Buffer.concat(chunks)
        for (const route of standin.routes) if (await route(req, res, raw)) return
        const json = (status: number, payload?: unknown, headers: Record<string, string> = {}) => {
          if (payload === undefined) return res.writeHead(status, headers).end()
          res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', ...headers }).end(JSON.stringify(payload))
        }
        const url = new URL(req.url ?? '/', 'http://standin')
        if (!url.pathname.startsWith('/calendar/v3/')) return json(404, googleError(404, 'notFound', 'Not Found'))
        const path = url.pathname.slice('/calendar/v3'.length)
        let body: unknown
        try {
          body = raw.length === 0 ? undefined : JSON.parse(raw.toString('utf8'))
        } catch {
          return json(400, googleError(400, 'parseError', 'Parse Error'))
        }
        const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1]
        const request: StandinRequest = { method: req.method ?? '', path, query: url.searchParams, body, token: bearer }
        requests.push(request)
        await standin.onRequest?.(request)
        if (bearer === undefined || !standin.accepts(bearer)) {
          return json(401, googleError(401, 'authError', 'Invalid Credentials'), { 'www-authenticate': 'Bearer realm="https://accounts.google.com/", error="invalid_token"' })
        }
        const failure = failures.shift()
        if (failure !== undefined) {
          const reason = failure.reason ?? DEFAULT_REASON[failure.status]?.reason ?? 'backendError'
          const known = REASONS[reason] ?? { domain: 'global', message: reason }
          const headers: Record<string, string> = failure.retryAfter === undefined ? {} : { 'retry-after': String(failure.retryAfter) }
          return json(failure.status, googleError(failure.status, reason, known.message, known.domain), headers)
        }
        try {
          const answered = await answer(request.method, path, url.searchParams, body)
          return json(answered.status, answered.body)
        } catch (err) {
          if (!(err instanceof Failure)) throw err
          return json(err.code, googleError(err.code, err.reason, err.message, err.domain))
        }
      })().catch((err: unknown) => { res.writeHead(500).end(String(err)) })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  standin.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  standin.url = `${standin.origin}/calendar/v3`
  return standin
}

export const CLIENT_ID = 'switchboard-test.apps.googleusercontent.com'
export const CLIENT_SECRET = 'GOCSPX-test-secret'

/**
 * The Calendar stand-in with Google's OAuth 2.0 endpoints on the same server (the coordinator's OAuth server at
 * Google's paths: /o/oauth2/v2/auth, /token, /revoke): bearer tokens are valid while the OAuth server says so.
 * `env`: the configuration that points calendar_one at it.
 */
export async function startGoogle (t: Test, options: { owner?: string, timeZone?: string, oauth?: Partial<OAuthServerOptions> } = {}): Promise<{ calendar: GoogleCalendarStandin, oauth: OAuthServer, env: Record<string, string> }> {
  const calendar = await startGoogleCalendarStandin(t, options.owner, options.timeZone)
  const oauth = oauthServer({ authorizePath: '/o/oauth2/v2/auth', tokenPath: '/token', revokePath: '/revoke', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, ...options.oauth })
  calendar.accepts = (token) => oauth.valid(`Bearer ${token}`)
  calendar.routes.push((req, res, body) => {
    const url = new URL(req.url ?? '/', 'http://standin')
    return oauth.handle(req, res, url.pathname, url.searchParams, body.toString('utf8'))
  })
  const env = {
    GOOGLE_CALENDAR_API_URL: calendar.url,
    GOOGLE_AUTHORIZE_URL: `${calendar.origin}/o/oauth2/v2/auth`,
    GOOGLE_TOKEN_URL: `${calendar.origin}/token`,
    GOOGLE_REVOKE_URL: `${calendar.origin}/revoke`,
    GOOGLE_CLIENT_ID: CLIENT_ID,
    GOOGLE_CLIENT_SECRET: CLIENT_SECRET
  }
  return { calendar, oauth, env }
}
