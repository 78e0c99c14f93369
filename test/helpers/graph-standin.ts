import { randomUUID } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { localOf, zonedToUtc } from '../../src/modules/capabilities/booking/time.ts'
import { oauthServer, type OAuthServer } from './oauth-server.ts'

// A local stand-in for Microsoft Graph v1.0 (the calendar_two tool), written from Graph's public reference: GET /me;
// calendar view (GET /me/calendarView, /me/calendar/calendarView, /me/calendars/{id}/calendarView) with
// startDateTime/endDateTime, `Prefer: outlook.timezone`, $top/$select and @odata.nextLink paging; events (list with a
// singleValueExtendedProperties filter, create, get, update, delete, cancel); Bearer tokens; Graph's error body
// {error: {code, message, innerError}} with 401 InvalidAuthenticationToken and 429 with Retry-After. The Microsoft
// identity platform's v2.0 authorize and token endpoints (tenant `common`) are the OAuth stand-in's, on the same
// server; Microsoft rotates refresh tokens, so the stand-in does too.

export interface DateTimeTimeZone { dateTime: string, timeZone: string }

export interface GraphEvent {
  id: string
  calendarId: string
  subject: string
  body: { contentType: string, content: string }
  start: Date
  end: Date
  /** The time zone the event was written in (originalStartTimeZone). */
  timeZone: string
  showAs: string
  attendees: Array<{ type: string, emailAddress: { address: string, name?: string } }>
  /** singleValueExtendedProperties, by id. */
  properties: Map<string, string>
  createdDateTime: string
  lastModifiedDateTime: string
}

export interface GraphRequest {
  method: string
  path: string
  query: URLSearchParams
  authorization: string | undefined
  prefer: string | undefined
  body: any
}

export interface GraphUser { id: string, displayName: string, mail: string | null, userPrincipalName: string }

export interface Cancellation { event: GraphEvent, comment: string | null }

export interface GraphStandIn {
  /** For MICROSOFT_GRAPH_URL (ends in /v1.0). */
  url: string
  /** The configuration that points Switchboard here: Graph, the authorize and token URLs, the client. */
  env: Record<string, string>
  /** The authorization server: tokens issued, expire(), revokeAll(), issue(). */
  oauth: OAuthServer
  /** Every request, in order. */
  requests: GraphRequest[]
  /** The signed-in user GET /me answers with. */
  user: GraphUser
  /** The events of every calendar (created through the API or by `busy`). */
  events: GraphEvent[]
  /** Events cancelled through POST …/cancel, with the comment sent to the attendees. */
  cancellations: Cancellation[]
  /** The default calendar's id (what "primary" stands for in the tool's settings). */
  defaultCalendarId: string
  /** Adds a calendar other than the default one. */
  addCalendar: (id: string) => void
  /** An event someone else put in the calendar (showAs busy unless told). */
  busy: (start: Date, end: Date, options?: { calendarId?: string, showAs?: string, subject?: string }) => GraphEvent
  /** The most events a page holds, whatever $top asks (Graph pages on its own too): small to test paging. */
  pageSize: number
  /** The next request (after its token is checked) is answered with this status and Graph's error body. */
  failNext: (status: number, options?: { code?: string, message?: string, retryAfter?: number }) => void
  close: () => Promise<void>
}

export interface GraphStandInOptions {
  /** Seconds an access token lasts (default 3600). */
  lifetime?: number
  /** Approve at once instead of showing the consent page. */
  autoApprove?: boolean
}

export const CLIENT_ID = '6731de76-14a6-49ae-97bc-6eba6914391e'
export const CLIENT_SECRET = 'graph-standin-client-secret'

/** The stand-in for a tap test: closed at teardown. */
export async function startGraphStandIn (t: Test, options: GraphStandInOptions = {}): Promise<GraphStandIn> {
  const standIn = await createGraphStandIn(options)
  t.teardown(standIn.close)
  return standIn
}

/** Graph writes dateTime with seven fractional digits and no offset (the zone is beside it). */
const graphDateTime = (date: Date, timeZone: string) => `${localOf(date, timeZone)}:${String(date.getUTCSeconds()).padStart(2, '0')}.0000000`

/** The instant a dateTimeTimeZone names (UTC or an IANA zone); undefined when either part is not understood. */
function instantOf (value: DateTimeTimeZone): Date | undefined {
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2})(?::(\d{2}))?(\.\d{1,7})?$/.exec(String(value.dateTime))
  if (match === null) return undefined
  try {
    return new Date(zonedToUtc(match[1], String(value.timeZone)).getTime() + Number(match[2] ?? 0) * 1000)
  } catch {
    return undefined
  }
}

/** startDateTime/endDateTime: ISO 8601; without an offset the value is UTC (Graph's reference, "List calendarView"). */
function queryInstant (value: string | null): Date | undefined {
  if (value === null || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(value)) return undefined
  const date = new Date(/(Z|[+-]\d{2}:\d{2})$/.test(value) ? value : `${value}Z`)
  return Number.isNaN(date.getTime()) ? undefined : date
}

/** `Prefer: outlook.timezone="…"`: the zone answers are written in (UTC without it). */
function preferredZone (prefer: string | undefined): string {
  const match = /outlook\.timezone\s*=\s*"?([^",;]+)"?/i.exec(prefer ?? '')
  if (match === null) return 'UTC'
  try {
    localOf(new Date(), match[1])
    return match[1]
  } catch {
    return 'UTC'
  }
}

/** The one $filter form the tool sends: events carrying a string extended property of a value (OData quotes doubled). */
const PROPERTY_FILTER = /^singleValueExtendedProperties\/Any\(ep: ep\/id eq '((?:[^']|'')*)' and ep\/value eq '((?:[^']|'')*)'\)$/

export async function createGraphStandIn (options: GraphStandInOptions = {}): Promise<GraphStandIn> {
  const oauth = oauthServer({
    authorizePath: '/common/oauth2/v2.0/authorize',
    tokenPath: '/common/oauth2/v2.0/token',
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    rotate: true,
    ...(options.lifetime === undefined ? {} : { lifetime: options.lifetime }),
    ...(options.autoApprove === undefined ? {} : { autoApprove: options.autoApprove })
  })
  const defaultCalendarId = 'AAMkAGI2-default-calendar'
  const calendars = new Set([defaultCalendarId])
  const requests: GraphRequest[] = []
  const events: GraphEvent[] = []
  const cancellations: Cancellation[] = []
  const failures: Array<{ status: number, code: string, message: string, retryAfter?: number }> = []
  let origin = ''
  let serial = 0

  const send = (res: http.ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}) => {
    if (body === undefined) {
      res.writeHead(status, headers).end()
      return
    }
    res.writeHead(status, { 'content-type': 'application/json; odata.metadata=minimal; odata.streaming=true; IEEE754Compatible=false; charset=utf-8', ...headers })
    res.end(JSON.stringify(body))
  }
  const error = (res: http.ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}) => {
    const id = randomUUID()
    send(res, status, { error: { code, message, innerError: { date: new Date().toISOString().slice(0, 19), 'request-id': id, 'client-request-id': id } } }, headers)
  }
  const notFound = (res: http.ServerResponse) => error(res, 404, 'ErrorItemNotFound', 'The specified object was not found in the store.')

  const resource = (event: GraphEvent, zone: string, select: string[] | undefined) => {
    const full: Record<string, unknown> = {
      '@odata.etag': `W/"${Buffer.from(event.lastModifiedDateTime).toString('base64')}"`,
      id: event.id,
      createdDateTime: event.createdDateTime,
      lastModifiedDateTime: event.lastModifiedDateTime,
      iCalUId: `040000008200E00074C5B7101A82E008${Buffer.from(event.id).toString('hex').toUpperCase()}`,
      subject: event.subject,
      bodyPreview: event.body.content.slice(0, 255),
      body: event.body,
      importance: 'normal',
      sensitivity: 'normal',
      isAllDay: false,
      isCancelled: false,
      isOrganizer: true,
      responseRequested: true,
      showAs: event.showAs,
      type: 'singleInstance',
      originalStartTimeZone: event.timeZone,
      originalEndTimeZone: event.timeZone,
      start: { dateTime: graphDateTime(event.start, zone), timeZone: zone },
      end: { dateTime: graphDateTime(event.end, zone), timeZone: zone },
      location: { displayName: '', locationType: 'default', uniqueIdType: 'unknown' },
      attendees: event.attendees.map((a) => ({ type: a.type, status: { response: 'none', time: '0001-01-01T00:00:00Z' }, emailAddress: a.emailAddress })),
      organizer: { emailAddress: { name: user.displayName, address: user.mail ?? user.userPrincipalName } },
      webLink: `https://outlook.office365.com/owa/?itemid=${encodeURIComponent(event.id)}&exvsurl=1&path=/calendar/item`
    }
    if (select === undefined) return full
    return Object.fromEntries(Object.entries(full).filter(([key]) => key === 'id' || key === '@odata.etag' || select.includes(key)))
  }

  /** A page of a collection: at most $top (and at most `pageSize`) items from $skip, with the link to the next. */
  const page = (url: URL, items: GraphEvent[], zone: string) => {
    const top = Math.min(Number(url.searchParams.get('$top') ?? 10) || 10, standIn.pageSize)
    const skip = Number(url.searchParams.get('$skip') ?? 0) || 0
    const select = url.searchParams.get('$select')?.split(',').map((s) => s.trim())
    const body: Record<string, unknown> = {
      '@odata.context': `${origin}/v1.0/$metadata#Collection(event)`,
      value: items.slice(skip, skip + top).map((e) => resource(e, zone, select))
    }
    if (skip + top < items.length) {
      const next = new URL(url.toString())
      next.searchParams.set('$skip', String(skip + top))
      body['@odata.nextLink'] = `${origin}${next.pathname}${next.search}`
    }
    return body
  }

  /** Writes start, end, subject, body, attendees, showAs and extended properties from a create or update body. */
  const apply = (event: GraphEvent, body: any): string | undefined => {
    for (const key of ['start', 'end'] as const) {
      if (body[key] === undefined) continue
      const instant = typeof body[key] === 'object' && body[key] !== null ? instantOf(body[key]) : undefined
      if (instant === undefined) return `The ${key} time or its time zone is not valid.`
      event[key] = instant
      event.timeZone = String(body[key].timeZone)
    }
    if (typeof body.subject === 'string') event.subject = body.subject
    if (body.body !== undefined) event.body = { contentType: String(body.body.contentType ?? 'html').toLowerCase(), content: String(body.body.content ?? '') }
    if (typeof body.showAs === 'string') event.showAs = body.showAs
    if (Array.isArray(body.attendees)) event.attendees = body.attendees.map((a: any) => ({ type: String(a.type ?? 'required').toLowerCase(), emailAddress: { address: String(a.emailAddress?.address), name: a.emailAddress?.name } }))
    if (Array.isArray(body.singleValueExtendedProperties)) for (const p of body.singleValueExtendedProperties) event.properties.set(String(p.id), String(p.value))
    if (event.end <= event.start) return 'The end time must be later than the start time.'
    event.lastModifiedDateTime = new Date().toISOString()
    return undefined
  }

  const newEvent = (calendarId: string): GraphEvent => {
    const now = new Date().toISOString()
    return {
      id: `AAMkAGI2THVSAAA${++serial}=`, calendarId, subject: '', body: { contentType: 'html', content: '' }, start: new Date(0), end: new Date(0), timeZone: 'UTC',
      showAs: 'busy', attendees: [], properties: new Map(), createdDateTime: now, lastModifiedDateTime: now
    }
  }

  /** The calendar a path names: /me (default), /me/calendar, /me/calendars/{id}; null: an unknown calendar. */
  const calendarOf = (segments: string[]): { calendarId: string | null, rest: string[] } => {
    if (segments[0] === 'calendar') return { calendarId: defaultCalendarId, rest: segments.slice(1) }
    if (segments[0] === 'calendars') return { calendarId: calendars.has(segments[1]) ? segments[1] : null, rest: segments.slice(2) }
    return { calendarId: defaultCalendarId, rest: segments }
  }

  const readBody = async (req: http.IncomingMessage): Promise<string> => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    return Buffer.concat(chunks).toString('utf8')
  }

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = new URL(req.url ?? '/', origin)
    const text = await readBody(req)
    if (oauth.handle(req, res, url.pathname, url.searchParams, text)) return
    let body: any = null
    if (text !== '') {
      try {
        body = JSON.parse(text)
      } catch {
        error(res, 400, 'BadRequest', 'Unable to read JSON request payload. Please ensure Content-Type header is set and payload is of valid JSON format.')
        return
      }
    }
    const authorization = req.headers.authorization
    const prefer = typeof req.headers.prefer === 'string' ? req.headers.prefer : undefined
    requests.push({ method: req.method ?? 'GET', path: url.pathname, query: url.searchParams, authorization, prefer, body })

    const token = /^Bearer (.+)$/.exec(authorization ?? '')?.[1]
    if (token === undefined) return error(res, 401, 'InvalidAuthenticationToken', 'Access token is empty.')
    if (!oauth.valid(authorization)) return error(res, 401, 'InvalidAuthenticationToken', 'Access token has expired or is not yet valid.', { 'www-authenticate': 'Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", error="invalid_token"' })
    const failure = failures.shift()
    if (failure !== undefined) return error(res, failure.status, failure.code, failure.message, failure.retryAfter === undefined ? {} : { 'retry-after': String(failure.retryAfter) })

    const segments = url.pathname.split('/').filter((s) => s !== '').map(decodeURIComponent)
    if (segments[0] !== 'v1.0' || segments[1] !== 'me') return error(res, 400, 'BadRequest', `Resource not found for the segment '${segments[1] ?? ''}'.`)
    const zone = preferredZone(prefer)
    const method = req.method ?? 'GET'
    const me = segments.slice(2)

    if (me.length === 0 && method === 'GET') {
      return send(res, 200, { '@odata.context': `${origin}/v1.0/$metadata#users/$entity`, businessPhones: [], givenName: null, jobTitle: null, mobilePhone: null, officeLocation: null, preferredLanguage: null, surname: null, ...user })
    }

    // /me/events/{id}[/cancel] (event ids are unique in the mailbox, whatever the calendar)
    if (me[0] === 'events' && me.length >= 2) {
      const event = events.find((e) => e.id === me[1])
      if (event === undefined) return notFound(res)
      if (me.length === 3 && me[2] === 'cancel' && method === 'POST') {
        events.splice(events.indexOf(event), 1)
        cancellations.push({ event, comment: typeof body?.Comment === 'string' ? body.Comment : typeof body?.comment === 'string' ? body.comment : null })
        return send(res, 202)
      }
      if (me.length !== 2) return error(res, 400, 'BadRequest', 'Unsupported segment.')
      if (method === 'GET') return send(res, 200, resource(event, zone, url.searchParams.get('$select')?.split(',')))
      if (method === 'DELETE') {
        events.splice(events.indexOf(event), 1)
        return send(res, 204)
      }
      if (method === 'PATCH') {
        const copy = { ...event, properties: new Map(event.properties) }
        const problem = apply(copy, body ?? {})
        if (problem !== undefined) return error(res, 400, 'ErrorInvalidRequest', problem)
        Object.assign(event, copy)
        return send(res, 200, resource(event, zone, undefined))
      }
      return error(res, 405, 'ErrorInvalidRequest', 'The OData request is not supported.')
    }

    const { calendarId, rest } = calendarOf(me)
    if (calendarId === null) return notFound(res)

    if (rest.length === 1 && rest[0] === 'calendarView' && method === 'GET') {
      const from = queryInstant(url.searchParams.get('startDateTime'))
      const to = queryInstant(url.searchParams.get('endDateTime'))
      if (from === undefined || to === undefined) return error(res, 400, 'ErrorInvalidParameter', 'This request requires a time window specified by the query string parameters StartDateTime and EndDateTime.')
      const overlapping = events.filter((e) => e.calendarId === calendarId && e.start < to && e.end > from).sort((a, b) => a.start.getTime() - b.start.getTime())
      return send(res, 200, page(url, overlapping, zone))
    }

    if (rest.length === 1 && rest[0] === 'events' && method === 'GET') {
      const filter = url.searchParams.get('$filter')
      let listed = events.filter((e) => e.calendarId === calendarId)
      if (filter !== null) {
        const match = PROPERTY_FILTER.exec(filter)
        if (match === null) return error(res, 400, 'BadRequest', 'Invalid filter clause')
        const [id, value] = [match[1], match[2]].map((s) => s.replaceAll("''", "'"))
        // The property's name is matched as written, its value without regard to case (Graph's reference).
        listed = listed.filter((e) => e.properties.get(id)?.toLowerCase() === value.toLowerCase())
      }
      return send(res, 200, page(url, listed, zone))
    }

    if (rest.length === 1 && rest[0] === 'events' && method === 'POST') {
      const event = newEvent(calendarId)
      const problem = body === null || body.start === undefined || body.end === undefined ? 'An event needs a start and an end.' : apply(event, body)
      if (problem !== undefined) return error(res, 400, 'ErrorInvalidRequest', problem)
      events.push(event)
      return send(res, 201, resource(event, zone, undefined))
    }

    return error(res, 400, 'BadRequest', `Resource not found for the segment '${rest[0] ?? ''}'.`)
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => error(res, 500, 'generalException', String(err)))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  const user: GraphUser = { id: '87d349ed-44d7-43e1-9a83-5f2406dee5bd', displayName: 'Megan Bowen', mail: 'MeganB@contoso.com', userPrincipalName: 'MeganB@contoso.com' }
  const standIn: GraphStandIn = {
    url: `${origin}/v1.0`,
    env: {
      MICROSOFT_GRAPH_URL: `${origin}/v1.0`,
      MICROSOFT_AUTHORIZE_URL: `${origin}/common/oauth2/v2.0/authorize`,
      MICROSOFT_TOKEN_URL: `${origin}/common/oauth2/v2.0/token`,
      MICROSOFT_CLIENT_ID: CLIENT_ID,
      MICROSOFT_CLIENT_SECRET: CLIENT_SECRET
    },
    oauth,
    requests,
    user,
    events,
    cancellations,
    defaultCalendarId,
    addCalendar: (id) => { calendars.add(id) },
    busy: (start, end, o = {}) => {
      const event = newEvent(o.calendarId ?? defaultCalendarId)
      Object.assign(event, { start, end, showAs: o.showAs ?? 'busy', subject: o.subject ?? 'Busy' })
      events.push(event)
      return event
    },
    pageSize: 1000,
    failNext: (status, o = {}) => {
      failures.push({ status, code: o.code ?? (status === 429 ? 'TooManyRequests' : 'ErrorInternalServerError'), message: o.message ?? (status === 429 ? 'Too many requests. Please try again later.' : 'An internal server error occurred.'), retryAfter: o.retryAfter })
    },
    close: async () => await new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) })
  }
  return standIn
}
