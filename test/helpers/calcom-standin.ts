import { randomUUID } from 'node:crypto'
import type { Test } from 'tap'
import { bearerOf, isoInZone, startJsonServer, type JsonReply, type JsonServer, type StandInRequest } from './json-standin.ts'

// A stand-in for Cal.com's API v2 (https://cal.com/docs/api-reference/v2), for what booking_one uses:
// GET /v2/me, GET /v2/slots (cal-api-version 2024-09-04), POST /v2/bookings, GET /v2/bookings (take/skip pagination),
// POST /v2/bookings/{uid}/reschedule and /cancel (cal-api-version 2024-08-13), with API-key auth (Bearer cal_…) and
// Cal.com's error JSON { status: 'error', timestamp, path, error: { code, message } }. A taken slot answers what
// Cal.com's v2 booking service throws: 400 BadRequestException "User either already has booking at this time or is
// not available". In memory: one user, event types with their open start times, bookings.

export const SLOTS_VERSION = '2024-09-04'
export const BOOKINGS_VERSION = '2024-08-13'
export const TAKEN_MESSAGE = 'User either already has booking at this time or is not available'

export interface CalEventType { id: number, slug: string, title: string, lengthInMinutes: number, openings: Date[] }
export interface CalAttendee { name: string, email: string, timeZone: string, phoneNumber?: string, language?: string }
export interface CalBooking {
  id: number
  uid: string
  title: string
  status: 'accepted' | 'cancelled' | 'pending' | 'rejected'
  start: string
  end: string
  eventTypeId: number
  attendees: CalAttendee[]
  metadata: Record<string, string>
  bookingFieldsResponses: Record<string, unknown>
  cancellationReason?: string
  reschedulingReason?: string
  rescheduledFromUid?: string
  rescheduledToUid?: string
  createdAt: string
}

export interface CalcomStandIn extends JsonServer {
  /** CALCOM_API_URL: the origin plus /v2. */
  apiUrl: string
  /** API keys that authenticate (Bearer cal_live_…); remove one to revoke it. */
  apiKeys: Set<string>
  user: { id: number, username: string, email: string, name: string, timeZone: string }
  eventTypes: Map<number, CalEventType>
  bookings: CalBooking[]
  /** When set, the next POST /v2/bookings (or reschedule) finds its slot just taken by another caller. */
  takeNextSlot: boolean
  addEventType: (type: Omit<CalEventType, 'openings'> & { openings?: Date[] }) => CalEventType
  /** Books `start` for someone, as another client of the account would. */
  book: (eventTypeId: number, start: Date, attendee: CalAttendee) => CalBooking
}

const error = (status: number, request: StandInRequest, code: string, message: string): JsonReply =>
  ({ status, body: { status: 'error', timestamp: new Date().toISOString(), path: request.path, error: { code, message } } })

const success = (status: number, data: unknown, extra: Record<string, unknown> = {}): JsonReply =>
  ({ status, body: { status: 'success', data, ...extra } })

export async function startCalcomStandIn (t: Test): Promise<CalcomStandIn> {
  const apiKeys = new Set<string>()
  const eventTypes = new Map<number, CalEventType>()
  const bookings: CalBooking[] = []
  const user = { id: 4711, username: 'ada-clinic', email: 'desk@ada-clinic.example', name: 'Ada Clinic', timeZone: 'Europe/Berlin' }
  let sequence = 0

  const active = (b: CalBooking) => b.status === 'accepted' || b.status === 'pending'
  const busy = (type: CalEventType, start: Date, except?: string) => {
    const end = start.getTime() + type.lengthInMinutes * 60_000
    return bookings.some((b) => active(b) && b.uid !== except && Date.parse(b.start) < end && Date.parse(b.end) > start.getTime())
  }
  const open = (type: CalEventType, start: Date, except?: string) =>
    type.openings.some((o) => o.getTime() === start.getTime()) && !busy(type, start, except)

  const output = (b: CalBooking) => ({
    id: b.id,
    uid: b.uid,
    title: b.title,
    description: '',
    hosts: [{ id: user.id, name: user.name, email: user.email, displayEmail: user.email, username: user.username, timeZone: user.timeZone }],
    status: b.status,
    ...(b.cancellationReason === undefined ? {} : { cancellationReason: b.cancellationReason }),
    ...(b.reschedulingReason === undefined ? {} : { reschedulingReason: b.reschedulingReason }),
    ...(b.rescheduledFromUid === undefined ? {} : { rescheduledFromUid: b.rescheduledFromUid }),
    ...(b.rescheduledToUid === undefined ? {} : { rescheduledToUid: b.rescheduledToUid }),
    start: b.start,
    end: b.end,
    duration: (Date.parse(b.end) - Date.parse(b.start)) / 60_000,
    eventTypeId: b.eventTypeId,
    eventType: { id: b.eventTypeId, slug: eventTypes.get(b.eventTypeId)?.slug ?? '' },
    location: `https://app.cal.com/video/${b.uid}`,
    absentHost: false,
    createdAt: b.createdAt,
    updatedAt: null,
    metadata: b.metadata,
    attendees: b.attendees.map((a) => ({ ...a, displayEmail: a.email, language: a.language ?? 'en', absent: false })),
    guests: [],
    bookingFieldsResponses: b.bookingFieldsResponses
  })

  const book = (eventTypeId: number, start: Date, attendee: CalAttendee, extra: Partial<CalBooking> = {}): CalBooking => {
    const type = eventTypes.get(eventTypeId)
    if (type === undefined) throw new Error(`no event type ${eventTypeId}`)
    sequence += 1
    const booking: CalBooking = {
      id: 9000 + sequence,
      uid: randomUUID().replaceAll('-', '').slice(0, 22),
      title: `${type.title} between ${user.name} and ${attendee.name}`,
      status: 'accepted',
      start: start.toISOString(),
      end: new Date(start.getTime() + type.lengthInMinutes * 60_000).toISOString(),
      eventTypeId,
      attendees: [attendee],
      metadata: {},
      bookingFieldsResponses: { name: attendee.name, email: attendee.email },
      createdAt: new Date().toISOString(),
      ...extra
    }
    bookings.push(booking)
    return booking
  }

  /** The next booking request's slot is taken by someone else just before it arrives. */
  const takeIfAsked = (type: CalEventType, start: Date) => {
    if (!standIn.takeNextSlot) return
    standIn.takeNextSlot = false
    if (!busy(type, start)) book(type.id, start, { name: 'Another Caller', email: 'other@example.org', timeZone: 'UTC' })
  }

  const versionOf = (request: StandInRequest) => String(request.headers['cal-api-version'] ?? '')

  function slots (request: StandInRequest): JsonReply {
    if (versionOf(request) !== SLOTS_VERSION) return error(400, request, 'BadRequestException', `cal-api-version must be ${SLOTS_VERSION} for this stand-in`)
    const type = eventTypes.get(Number(request.query.get('eventTypeId')))
    if (type === undefined) return error(404, request, 'NotFoundException', `Event type with id ${request.query.get('eventTypeId') ?? ''} not found`)
    const start = Date.parse(request.query.get('start') ?? '')
    const end = Date.parse(request.query.get('end') ?? '')
    if (!Number.isFinite(start) || !Number.isFinite(end)) return error(400, request, 'BadRequestException', 'start and end must be ISO 8601 date strings')
    const timeZone = request.query.get('timeZone') ?? 'UTC'
    const range = request.query.get('format') === 'range'
    const data: Record<string, Array<{ start: string, end?: string }>> = {}
    for (const opening of [...type.openings].sort((a, b) => a.getTime() - b.getTime())) {
      if (opening.getTime() < start || opening.getTime() > end || opening.getTime() < Date.now() || !open(type, opening)) continue
      const local = isoInZone(opening, timeZone)
      const slot = range ? { start: local, end: isoInZone(new Date(opening.getTime() + type.lengthInMinutes * 60_000), timeZone) } : { start: local }
      ;(data[local.slice(0, 10)] ??= []).push(slot)
    }
    return success(200, data)
  }

  function create (request: StandInRequest): JsonReply {
    const body = request.body ?? {}
    const type = eventTypes.get(Number(body.eventTypeId))
    if (type === undefined) return error(404, request, 'NotFoundException', `Event type with id ${String(body.eventTypeId)} not found.`)
    const attendee = body.attendee
    if (typeof attendee?.name !== 'string' || typeof attendee.timeZone !== 'string' || typeof attendee.email !== 'string') {
      return error(400, request, 'BadRequestException', 'attendee.name, attendee.email and attendee.timeZone are required')
    }
    const start = new Date(String(body.start))
    if (Number.isNaN(start.getTime())) return error(400, request, 'BadRequestException', 'start must be a valid ISO 8601 date')
    takeIfAsked(type, start)
    if (!open(type, start)) return error(400, request, 'BadRequestException', TAKEN_MESSAGE)
    const made = book(type.id, start, { name: attendee.name, email: attendee.email, timeZone: attendee.timeZone, ...(attendee.phoneNumber === undefined ? {} : { phoneNumber: attendee.phoneNumber }) }, {
      metadata: body.metadata ?? {},
      bookingFieldsResponses: { name: attendee.name, email: attendee.email, ...body.bookingFieldsResponses }
    })
    return success(201, output(made))
  }

  function list (request: StandInRequest): JsonReply {
    const statuses = (request.query.get('status') ?? '').split(',').filter((s) => s !== '')
    const email = request.query.get('attendeeEmail')?.toLowerCase()
    const eventTypeId = request.query.get('eventTypeId')
    const now = Date.now()
    const matches = bookings.filter((b) => {
      if (email !== undefined && !b.attendees.some((a) => a.email.toLowerCase() === email)) return false
      if (eventTypeId !== null && String(b.eventTypeId) !== eventTypeId) return false
      if (statuses.length === 0) return true
      return statuses.some((s) => (s === 'upcoming' && active(b) && Date.parse(b.end) >= now) ||
        (s === 'past' && Date.parse(b.end) < now) || (s === 'cancelled' && b.status === 'cancelled') || (s === 'unconfirmed' && b.status === 'pending'))
    }).sort((a, b) => a.start.localeCompare(b.start))
    const take = Math.min(Number(request.query.get('take') ?? 100), 250)
    const skip = Number(request.query.get('skip') ?? 0)
    const page = matches.slice(skip, skip + take)
    return success(200, page.map(output), {
      pagination: {
        totalItems: matches.length,
        remainingItems: Math.max(matches.length - skip - page.length, 0),
        returnedItems: page.length,
        itemsPerPage: take,
        currentPage: Math.floor(skip / take) + 1,
        totalPages: Math.ceil(matches.length / take),
        hasNextPage: skip + page.length < matches.length,
        hasPreviousPage: skip > 0
      }
    })
  }

  function reschedule (request: StandInRequest, booking: CalBooking): JsonReply {
    if (booking.status === 'cancelled') {
      return error(400, request, 'BadRequestException', `Can't reschedule booking with uid=${booking.uid} because it has been cancelled.${booking.rescheduledToUid === undefined ? '' : ` It was rescheduled to booking with uid=${booking.rescheduledToUid}.`}`)
    }
    const type = eventTypes.get(booking.eventTypeId)!
    const start = new Date(String(request.body?.start))
    if (Number.isNaN(start.getTime())) return error(400, request, 'BadRequestException', 'start must be a valid ISO 8601 date')
    takeIfAsked(type, start)
    if (!open(type, start, booking.uid)) return error(400, request, 'BadRequestException', TAKEN_MESSAGE)
    const reason = typeof request.body?.reschedulingReason === 'string' ? request.body.reschedulingReason : undefined
    const moved = book(type.id, start, booking.attendees[0], {
      metadata: booking.metadata, bookingFieldsResponses: booking.bookingFieldsResponses, rescheduledFromUid: booking.uid,
      ...(reason === undefined ? {} : { reschedulingReason: reason })
    })
    booking.status = 'cancelled'
    booking.rescheduledToUid = moved.uid
    return success(201, output(moved))
  }

  function cancel (request: StandInRequest, booking: CalBooking): JsonReply {
    if (booking.status === 'cancelled') return error(400, request, 'BadRequestException', `Can't cancel booking with uid=${booking.uid} because it has been cancelled already.`)
    booking.status = 'cancelled'
    if (typeof request.body?.cancellationReason === 'string') booking.cancellationReason = request.body.cancellationReason
    return success(200, output(booking))
  }

  function handle (request: StandInRequest): JsonReply {
    const key = bearerOf(request)
    if (key === undefined || !apiKeys.has(key)) return error(401, request, 'UnauthorizedException', 'ApiAuthGuard - Invalid API Key')
    const { method, path } = request
    if (method === 'GET' && path === '/v2/me') {
      return success(200, { id: user.id, username: user.username, email: user.email, name: user.name, timeFormat: 24, defaultScheduleId: 1, weekStart: 'Monday', timeZone: user.timeZone, locale: 'en', organizationId: null })
    }
    if (method === 'GET' && path === '/v2/slots') return slots(request)
    if (path === '/v2/bookings' || path.startsWith('/v2/bookings/')) {
      if (versionOf(request) !== BOOKINGS_VERSION) return error(400, request, 'BadRequestException', `cal-api-version must be ${BOOKINGS_VERSION} for this stand-in`)
      if (method === 'POST' && path === '/v2/bookings') return create(request)
      if (method === 'GET' && path === '/v2/bookings') return list(request)
      const action = /^\/v2\/bookings\/([^/]+)\/(reschedule|cancel)$/.exec(path)
      if (method === 'POST' && action !== null) {
        const booking = bookings.find((b) => b.uid === action[1])
        if (booking === undefined) return error(404, request, 'NotFoundException', `Booking with uid=${action[1]} was not found in the database`)
        return action[2] === 'reschedule' ? reschedule(request, booking) : cancel(request, booking)
      }
    }
    return error(404, request, 'NotFoundException', `Cannot ${method} ${path}`)
  }

  const server = await startJsonServer(t, handle)
  const standIn: CalcomStandIn = {
    ...server,
    apiUrl: `${server.url}/v2`,
    apiKeys,
    user,
    eventTypes,
    bookings,
    takeNextSlot: false,
    addEventType: (type) => {
      const made = { openings: [], ...type }
      eventTypes.set(made.id, made)
      return made
    },
    book: (eventTypeId, start, attendee) => book(eventTypeId, start, attendee)
  }
  return standIn
}
