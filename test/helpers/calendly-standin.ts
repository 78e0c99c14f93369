import { randomUUID } from 'node:crypto'
import type { Test } from 'tap'
import { bearerOf, startJsonServer, type JsonReply, type JsonServer, type StandInRequest } from './json-standin.ts'
import { oauthServer, type OAuthServer } from './oauth-server.ts'

// A stand-in for Calendly's API v2 (https://developer.calendly.com/api-docs), for what booking_two uses:
// GET /users/me, GET /event_types?user= (and /event_types/{uuid}), GET /event_type_available_times (a window of at
// most 7 days, start in the future), POST /invitees (the Scheduling API), GET /scheduled_events?user=&invitee_email=
// &status=&min_start_time= with page_token pagination (pagination.next_page), GET /scheduled_events/{uuid}/invitees,
// POST /scheduled_events/{uuid}/cancellation; Calendly's error JSON { title, message, details? }. Auth is a bearer
// token: a personal access token from `tokens`, or an access token of the OAuth server mounted on the same origin at
// Calendly's auth.calendly.com paths (/oauth/authorize, /oauth/token, /oauth/revoke; tokens last 2 hours as Calendly's).
// A taken time answers 400 "Invalid Argument" with a start_time detail (Calendly documents no dedicated code for it).

export const TAKEN_DETAIL = 'The selected time is no longer available.'

export interface CalendlyEventType { uuid: string, name: string, slug: string, duration: number, active: boolean, openings: Date[] }
export interface CalendlyInvitee { uuid: string, name: string, email: string, timezone: string, text_reminder_number: string | null, status: 'active' | 'canceled', created_at: string }
export interface CalendlyEvent {
  uuid: string
  eventType: string
  name: string
  status: 'active' | 'canceled'
  start: Date
  end: Date
  invitees: CalendlyInvitee[]
  cancellation?: { canceled_by: string, reason: string | null, canceler_type: 'host' | 'invitee', created_at: string }
  created_at: string
}

export interface CalendlyStandIn extends JsonServer {
  /** CALENDLY_API_URL. */
  apiUrl: string
  /** Personal access tokens that authenticate; remove one to revoke it. */
  tokens: Set<string>
  /** Calendly's OAuth server (auth.calendly.com): CALENDLY_AUTHORIZE_URL, CALENDLY_TOKEN_URL and CALENDLY_REVOKE_URL are these. */
  oauth: OAuthServer & { authorizeUrl: string, tokenUrl: string, revokeUrl: string }
  user: { uuid: string, name: string, slug: string, email: string, timezone: string, organization: string }
  eventTypes: Map<string, CalendlyEventType>
  events: CalendlyEvent[]
  /** When set, the next POST /invitees finds its time just taken by another invitee. */
  takeNextSlot: boolean
  /** The Scheduling API needs a paid plan: on "free", POST /invitees answers 403. */
  plan: 'paid' | 'free'
  addEventType: (type: Omit<CalendlyEventType, 'uuid' | 'active' | 'openings'> & { uuid?: string, openings?: Date[] }) => CalendlyEventType
  /** Books `start` as another client would. */
  book: (eventTypeUuid: string, start: Date, invitee: { name: string, email: string, timezone?: string, text_reminder_number?: string }) => CalendlyEvent
  uriOf: (kind: 'event_types' | 'scheduled_events' | 'users', uuid: string) => string
}

const error = (status: number, title: string, message: string, details?: Array<{ parameter: string, message: string }>): JsonReply =>
  ({ status, body: { title, message, ...(details === undefined ? {} : { details }) } })

const invalid = (parameter: string, message: string) => error(400, 'Invalid Argument', 'The supplied parameters are invalid.', [{ parameter, message }])

/** Calendly's timestamps: microseconds, UTC. */
const stamp = (date: Date) => date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z')

const DAY = 86_400_000

export const CLIENT_ID = 'calendly-client-id'
export const CLIENT_SECRET = 'calendly-client-secret'

export async function startCalendlyStandIn (t: Test, options: { autoApprove?: boolean } = {}): Promise<CalendlyStandIn> {
  const oauth = oauthServer({ authorizePath: '/oauth/authorize', tokenPath: '/oauth/token', revokePath: '/oauth/revoke', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, lifetime: 7200, autoApprove: options.autoApprove ?? false })
  const tokens = new Set<string>()
  const eventTypes = new Map<string, CalendlyEventType>()
  const events: CalendlyEvent[] = []
  const user = { uuid: 'AAAAAAAAAAAAAAAA', name: 'Ada Lovelace', slug: 'ada', email: 'ada@ada-clinic.example', timezone: 'Europe/Berlin', organization: 'OOOOOOOOOOOOOOOO' }
  let origin = ''

  const uriOf = (kind: string, uuid: string) => `${origin}/${kind}/${uuid}`
  const userUri = () => uriOf('users', user.uuid)
  const typeOfUri = (uri: string) => [...eventTypes.values()].find((type) => uriOf('event_types', type.uuid) === uri)
  const busy = (type: CalendlyEventType, start: Date) => {
    const end = start.getTime() + type.duration * 60_000
    return events.some((e) => e.status === 'active' && e.start.getTime() < end && e.end.getTime() > start.getTime())
  }
  const open = (type: CalendlyEventType, start: Date) => type.openings.some((o) => o.getTime() === start.getTime()) && !busy(type, start) && start.getTime() > Date.now()

  const eventTypeResource = (type: CalendlyEventType) => ({
    uri: uriOf('event_types', type.uuid),
    name: type.name,
    active: type.active,
    booking_method: 'instant',
    slug: type.slug,
    scheduling_url: `https://calendly.com/${user.slug}/${type.slug}`,
    duration: type.duration,
    duration_options: null,
    kind: 'solo',
    pooling_type: null,
    type: 'StandardEventType',
    color: '#fff200',
    created_at: stamp(new Date(0)),
    updated_at: stamp(new Date(0)),
    internal_note: null,
    description_plain: null,
    description_html: null,
    profile: { type: 'User', name: user.name, owner: userUri() },
    secret: false,
    deleted_at: null,
    admin_managed: false,
    locations: null,
    position: 0,
    custom_questions: []
  })
  const inviteeResource = (event: CalendlyEvent, invitee: CalendlyInvitee) => ({
    uri: `${uriOf('scheduled_events', event.uuid)}/invitees/${invitee.uuid}`,
    email: invitee.email,
    first_name: null,
    last_name: null,
    name: invitee.name,
    status: invitee.status,
    questions_and_answers: [],
    timezone: invitee.timezone,
    event: uriOf('scheduled_events', event.uuid),
    created_at: invitee.created_at,
    updated_at: invitee.created_at,
    tracking: { utm_campaign: null, utm_source: null, utm_medium: null, utm_content: null, utm_term: null, salesforce_uuid: null },
    text_reminder_number: invitee.text_reminder_number,
    rescheduled: false,
    old_invitee: null,
    new_invitee: null,
    cancel_url: `https://calendly.com/cancellations/${invitee.uuid}`,
    reschedule_url: `https://calendly.com/reschedulings/${invitee.uuid}`,
    routing_form_submission: null,
    cancellation: event.cancellation ?? null,
    payment: null,
    no_show: null,
    reconfirmation: null,
    scheduling_method: null,
    invitee_scheduled_by: null
  })
  const eventResource = (event: CalendlyEvent) => ({
    uri: uriOf('scheduled_events', event.uuid),
    name: event.name,
    meeting_notes_plain: null,
    meeting_notes_html: null,
    status: event.status,
    start_time: stamp(event.start),
    end_time: stamp(event.end),
    event_type: event.eventType,
    location: { type: 'google_conference', status: 'pushed', join_url: `https://meet.google.com/${event.uuid.slice(0, 10)}` },
    invitees_counter: { total: event.invitees.length, active: event.invitees.filter((i) => i.status === 'active').length, limit: 1 },
    created_at: event.created_at,
    updated_at: event.created_at,
    event_memberships: [{ user: userUri(), user_email: user.email, user_name: user.name }],
    event_guests: [],
    ...(event.cancellation === undefined ? {} : { cancellation: event.cancellation })
  })

  const book = (type: CalendlyEventType, start: Date, who: { name: string, email: string, timezone?: string, text_reminder_number?: string }) => {
    const now = stamp(new Date())
    const event: CalendlyEvent = {
      uuid: randomUUID(),
      eventType: uriOf('event_types', type.uuid),
      name: type.name,
      status: 'active',
      start,
      end: new Date(start.getTime() + type.duration * 60_000),
      invitees: [{ uuid: randomUUID(), name: who.name, email: who.email, timezone: who.timezone ?? 'UTC', text_reminder_number: who.text_reminder_number ?? null, status: 'active', created_at: now }],
      created_at: now
    }
    events.push(event)
    return event
  }

  /** One page of `items`: Calendly's pagination with an opaque page_token and the next page's full URL. */
  const page = <T>(request: StandInRequest, items: T[]) => {
    const count = Math.min(Number(request.query.get('count') ?? 20), 100)
    const offset = request.query.has('page_token') ? Number(Buffer.from(request.query.get('page_token')!, 'base64url').toString()) : 0
    const slice = items.slice(offset, offset + count)
    const more = offset + count < items.length
    const next = new URLSearchParams(request.query)
    const token = Buffer.from(String(offset + count)).toString('base64url')
    next.set('page_token', token)
    return {
      collection: slice,
      pagination: {
        count: slice.length,
        next_page: more ? `${origin}${request.path}?${next.toString()}` : null,
        previous_page: null,
        next_page_token: more ? token : null,
        previous_page_token: null
      }
    }
  }

  function availableTimes (request: StandInRequest): JsonReply {
    const type = typeOfUri(request.query.get('event_type') ?? '')
    if (type === undefined) return error(404, 'Resource Not Found', 'The server could not find the requested resource.')
    const start = Date.parse(request.query.get('start_time') ?? '')
    const end = Date.parse(request.query.get('end_time') ?? '')
    if (!Number.isFinite(start)) return invalid('start_time', 'is required and must be a timestamp')
    if (!Number.isFinite(end)) return invalid('end_time', 'is required and must be a timestamp')
    if (start < Date.now()) return invalid('start_time', 'must be in the future')
    if (end <= start) return invalid('end_time', 'must be after start_time')
    if (end - start > 7 * DAY) return invalid('end_time', 'date range can be no greater than 1 week (7 days)')
    const collection = type.openings
      .filter((o) => o.getTime() >= start && o.getTime() <= end && open(type, o))
      .sort((a, b) => a.getTime() - b.getTime())
      .map((o) => ({ status: 'available', invitees_remaining: 1, start_time: stamp(o), scheduling_url: `https://calendly.com/${user.slug}/${type.slug}/${o.toISOString()}` }))
    return { status: 200, body: { collection } }
  }

  function invitee (request: StandInRequest): JsonReply {
    if (standIn.plan === 'free') return error(403, 'Permission Denied', 'Please upgrade your Calendly account to Standard')
    const body = request.body ?? {}
    const type = typeOfUri(String(body.event_type ?? ''))
    if (type === undefined) return invalid('event_type', 'is invalid')
    const who = body.invitee ?? {}
    if (typeof who.email !== 'string' || who.email === '') return invalid('invitee.email', 'is required')
    if (typeof who.timezone !== 'string' || who.timezone === '') return invalid('invitee.timezone', 'is required')
    if (typeof who.name !== 'string' && typeof who.first_name !== 'string') return invalid('invitee.name', 'is required')
    const start = new Date(String(body.start_time))
    if (Number.isNaN(start.getTime())) return invalid('start_time', 'must be a timestamp')
    if (standIn.takeNextSlot) {
      standIn.takeNextSlot = false
      if (!busy(type, start)) book(type, start, { name: 'Another Invitee', email: 'other@example.org' })
    }
    if (!open(type, start)) return invalid('start_time', TAKEN_DETAIL)
    const event = book(type, start, { name: who.name ?? who.first_name, email: who.email, timezone: who.timezone, ...(typeof who.text_reminder_number === 'string' ? { text_reminder_number: who.text_reminder_number } : {}) })
    return { status: 201, body: { resource: inviteeResource(event, event.invitees[0]) } }
  }

  function scheduledEvents (request: StandInRequest): JsonReply {
    const owner = request.query.get('user')
    if (owner === null && !request.query.has('organization')) return invalid('user', 'user or organization is required')
    if (owner !== null && owner !== userUri()) return error(403, 'Permission Denied', 'You do not have permission to access this resource.')
    const email = request.query.get('invitee_email')?.toLowerCase()
    const status = request.query.get('status')
    const min = Date.parse(request.query.get('min_start_time') ?? '')
    const max = Date.parse(request.query.get('max_start_time') ?? '')
    const matches = events.filter((e) => (email === undefined || e.invitees.some((i) => i.email.toLowerCase() === email)) &&
      (status === null || e.status === status) && (!Number.isFinite(min) || e.start.getTime() >= min) && (!Number.isFinite(max) || e.start.getTime() <= max))
    const descending = request.query.get('sort') === 'start_time:desc'
    matches.sort((a, b) => (a.start.getTime() - b.start.getTime()) * (descending ? -1 : 1))
    const result = page(request, matches)
    return { status: 200, body: { ...result, collection: result.collection.map(eventResource) } }
  }

  function handle (request: StandInRequest): JsonReply {
    const token = bearerOf(request)
    if (token === undefined || (!tokens.has(token) && !oauth.valid(`Bearer ${token}`))) return error(401, 'Unauthenticated', 'The access token is invalid')
    const { method, path } = request
    if (method === 'GET' && path === '/users/me') {
      return {
        status: 200,
        body: {
          resource: {
            uri: userUri(), name: user.name, slug: user.slug, email: user.email, scheduling_url: `https://calendly.com/${user.slug}`, timezone: user.timezone,
            time_notation: '24h', avatar_url: null, created_at: stamp(new Date(0)), updated_at: stamp(new Date(0)),
            current_organization: uriOf('organizations', user.organization), resource_type: 'User', locale: 'en'
          }
        }
      }
    }
    if (method === 'GET' && path === '/event_types') {
      const owner = request.query.get('user')
      if (owner === null && !request.query.has('organization')) return invalid('user', 'user or organization is required')
      if (owner !== null && owner !== userUri()) return error(403, 'Permission Denied', 'You do not have permission to access this resource.')
      const result = page(request, [...eventTypes.values()])
      return { status: 200, body: { ...result, collection: result.collection.map(eventTypeResource) } }
    }
    const oneType = /^\/event_types\/([^/]+)$/.exec(path)
    if (method === 'GET' && oneType !== null) {
      const type = eventTypes.get(oneType[1])
      return type === undefined ? error(404, 'Resource Not Found', 'The server could not find the requested resource.') : { status: 200, body: { resource: eventTypeResource(type) } }
    }
    if (method === 'GET' && path === '/event_type_available_times') return availableTimes(request)
    if (method === 'POST' && path === '/invitees') return invitee(request)
    if (method === 'GET' && path === '/scheduled_events') return scheduledEvents(request)
    const invitees = /^\/scheduled_events\/([^/]+)\/invitees$/.exec(path)
    if (method === 'GET' && invitees !== null) {
      const event = events.find((e) => e.uuid === invitees[1])
      if (event === undefined) return error(404, 'Resource Not Found', 'The server could not find the requested resource.')
      const result = page(request, event.invitees)
      return { status: 200, body: { ...result, collection: result.collection.map((i) => inviteeResource(event, i)) } }
    }
    const cancellation = /^\/scheduled_events\/([^/]+)\/cancellation$/.exec(path)
    if (method === 'POST' && cancellation !== null) {
      const event = events.find((e) => e.uuid === cancellation[1])
      if (event === undefined) return error(404, 'Resource Not Found', 'The server could not find the requested resource.')
      if (event.status === 'canceled') return error(403, 'Permission Denied', 'Event in the past or already canceled')
      event.status = 'canceled'
      event.cancellation = { canceled_by: user.name, reason: typeof request.body?.reason === 'string' ? request.body.reason : null, canceler_type: 'host', created_at: stamp(new Date()) }
      for (const i of event.invitees) i.status = 'canceled'
      return { status: 201, body: { resource: event.cancellation } }
    }
    return error(404, 'Resource Not Found', 'The server could not find the requested resource.')
  }

  const server = await startJsonServer(t, handle, () => oauth.handle)
  origin = server.url
  const standIn: CalendlyStandIn = {
    ...server,
    apiUrl: server.url,
    tokens,
    oauth: { ...oauth, authorizeUrl: `${server.url}/oauth/authorize`, tokenUrl: `${server.url}/oauth/token`, revokeUrl: `${server.url}/oauth/revoke` },
    user,
    eventTypes,
    events,
    takeNextSlot: false,
    plan: 'paid',
    addEventType: (type) => {
      const made = { uuid: randomUUID(), active: true, openings: [], ...type }
      eventTypes.set(made.uuid, made)
      return made
    },
    book: (uuid, start, who) => book(eventTypes.get(uuid)!, start, who),
    uriOf
  }
  return standIn
}
