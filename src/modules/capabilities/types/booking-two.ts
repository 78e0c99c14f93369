import { Type, type Static } from 'typebox'
import { connectionForCall, IntegrationError, type ApiRequest, type Connection } from '../../integrations/client.ts'
import { BookingProblem, SlotTaken, type Attendee, type Booking, type BookingBackend, type Slot } from '../booking/backend.ts'
import { BOOKING_LABELS, bookingSettings, requireConnection } from '../booking/settings.ts'
import { bookingTools } from '../booking/tools.ts'
import { defineCapability } from '../registry.ts'

// booking_two: Calendly (API v2, https://developer.calendly.com/api-docs) with a personal access token or OAuth 2.0.
// Free times are Calendly's own (GET /event_type_available_times, at most 7 days a request: longer ranges are split),
// bookings are made with the Scheduling API (POST /invitees, a paid Calendly plan), found with GET /scheduled_events
// and cancelled with POST /scheduled_events/{uuid}/cancellation. Calendly has no call that moves an event: a
// reschedule books the new time first and then cancels the old one, so the caller never ends up with neither.

const DAY = 86_400_000
/** Calendly's widest available-times window (its docs now allow 31 days; 7 works with both). */
const WINDOW = 7 * DAY
/** Calendly refuses a window starting in the past: the first one starts this far from now. */
const LEAD = 60_000
/** At most this many pages (100 each) are read when listing event types or a caller's events. */
const MAX_PAGES = 5

const CalendlySettings = Type.Object({
  ...bookingSettings().properties,
  event_type_id: Type.String({ minLength: 1, maxLength: 200, description: 'the Calendly event type: its URI (https://api.calendly.com/event_types/…), its UUID, or its slug (the last part of its booking link)' })
})

interface EventType { uri: string, name: string, duration: number }

/** Calendly's error text: { title, message, details: [{ parameter, message }] }. */
const detailsOf = (body: any): Array<{ parameter?: string, message?: string }> => Array.isArray(body?.details) ? body.details : []

/**
 * A time taken meanwhile. Calendly documents no code of its own for it: a 409, or a 400 whose details name
 * start_time (the time is not one it offers any more).
 */
function slotTakenOr (error: unknown): unknown {
  if (!(error instanceof IntegrationError) || error.reason !== 'rejected') return error
  const body: any = error.body
  if (error.status === 409 || (error.status === 400 && detailsOf(body).some((d) => d.parameter === 'start_time'))) {
    return new SlotTaken([body?.message, ...detailsOf(body).map((d) => d.message)].filter((m) => typeof m === 'string').join(' '))
  }
  if (error.status === 403) return new BookingProblem(`Calendly refused to book (${String(body?.message ?? 'Permission Denied')}): its Scheduling API needs a paid Calendly plan`)
  return error
}

/** The last path segment of a Calendly URI: a scheduled event's or event type's UUID. */
const uuidOf = (uri: string) => uri.split('/').filter((part) => part !== '').at(-1) ?? ''

/** All pages of a Calendly collection, following pagination.next_page (a full URL on the API's origin). */
async function collect (conn: Connection, first: ApiRequest, signal: AbortSignal): Promise<any[]> {
  const items: any[] = []
  let next: ApiRequest | undefined = first
  for (let page = 0; next !== undefined && page < MAX_PAGES; page++) {
    const answer = await conn.request(next, signal)
    items.push(...(answer.body?.collection ?? []))
    const link = answer.body?.pagination?.next_page
    next = typeof link === 'string' && link !== '' ? { method: 'GET', path: link } : undefined
  }
  return items
}

export function calendlyBackend (conn: Connection, settings: Static<typeof CalendlySettings>): BookingBackend {
  const timeZone = settings.time_zone
  let resolving: Promise<{ user: string, type: EventType }> | undefined

  /** The user and the configured event type, looked up once per call (GET /users/me, GET /event_types?user=). */
  const resolve = async (signal: AbortSignal) => {
    resolving ??= (async () => {
      const me = (await conn.request({ method: 'GET', path: '/users/me' }, signal)).body?.resource
      const user = String(me?.uri ?? '')
      const wanted = settings.event_type_id.trim()
      const key = uuidOf(wanted)
      const types = await collect(conn, { method: 'GET', path: '/event_types', query: { user, count: 100 } }, signal)
      const type = types.find((t) => t.uri === wanted || uuidOf(String(t.uri)) === key || t.slug === key)
      if (type === undefined) {
        const names = types.slice(0, 10).map((t) => `${String(t.name)} (${String(t.slug)})`).join(', ')
        throw new Error(`Calendly has no event type "${wanted}" for ${String(me?.name ?? 'this account')}${names === '' ? '' : `; it has: ${names}`}`)
      }
      return { user, type: { uri: String(type.uri), name: String(type.name), duration: Number(type.duration) } }
    })()
    try {
      return await resolving
    } catch (error) {
      resolving = undefined
      throw error
    }
  }

  const bookingOf = (type: EventType, event: any): Booking => ({
    id: uuidOf(String(event.uri)), start: new Date(event.start_time), end: new Date(event.end_time), title: String(event.name ?? type.name)
  })

  /** Books `start` for the invitee through the Scheduling API; answers the new event's booking. */
  const invite = async (type: EventType, start: Date, invitee: { name: string, email: string, timezone: string }, signal: AbortSignal): Promise<Booking> => {
    try {
      const answer = await conn.request({ method: 'POST', path: '/invitees', body: { event_type: type.uri, start_time: start.toISOString(), invitee } }, signal)
      const event = String(answer.body?.resource?.event ?? '')
      return { id: uuidOf(event), start, end: new Date(start.getTime() + type.duration * 60_000), title: type.name }
    } catch (error) {
      throw slotTakenOr(error)
    }
  }

  const cancelEvent = async (id: string, reason: string | null, signal: AbortSignal) => {
    await conn.request({ method: 'POST', path: `/scheduled_events/${encodeURIComponent(id)}/cancellation`, body: reason === null ? {} : { reason } }, signal)
  }

  return {
    async slots (from: Date, to: Date, signal: AbortSignal): Promise<Slot[]> {
      const { type } = await resolve(signal)
      const slots: Slot[] = []
      for (let start = Math.max(from.getTime(), Date.now() + LEAD); start < to.getTime(); start += WINDOW) {
        const end = Math.min(start + WINDOW, to.getTime())
        const answer = await conn.request({
          method: 'GET', path: '/event_type_available_times',
          query: { event_type: type.uri, start_time: new Date(start).toISOString(), end_time: new Date(end).toISOString() }
        }, signal)
        for (const time of answer.body?.collection ?? []) {
          if (time.status !== 'available') continue
          const at = new Date(time.start_time)
          slots.push({ start: at, end: new Date(at.getTime() + type.duration * 60_000) })
        }
      }
      return slots.sort((a, b) => a.start.getTime() - b.start.getTime())
    },

    async book (slot: Slot, attendee: Attendee, signal: AbortSignal): Promise<Booking> {
      if (attendee.email === null) throw new BookingProblem('Calendly books only with the caller\'s e-mail address: ask the caller for it, then book again with email.')
      const { type } = await resolve(signal)
      return await invite(type, slot.start, { name: attendee.name, email: attendee.email, timezone: timeZone }, signal)
    },

    async find (who, signal): Promise<Booking[]> {
      // Calendly finds an invitee's events by e-mail only (a phone number is stored only for SMS reminders).
      if (who.email === null) return []
      const { user, type } = await resolve(signal)
      const events = await collect(conn, {
        method: 'GET', path: '/scheduled_events',
        query: { user, invitee_email: who.email, status: 'active', min_start_time: new Date().toISOString(), sort: 'start_time:asc', count: 100 }
      }, signal)
      return events.filter((event) => event.event_type === type.uri).map((event) => bookingOf(type, event))
    },

    async reschedule (booking: Booking, slot: Slot, signal: AbortSignal): Promise<Booking> {
      const { type } = await resolve(signal)
      const invitees = await collect(conn, { method: 'GET', path: `/scheduled_events/${encodeURIComponent(booking.id)}/invitees`, query: { status: 'active', count: 100 } }, signal)
      const invitee = invitees.find((i) => i.status === 'active')
      if (invitee === undefined) throw new Error('this booking has no active invitee any more (it was cancelled)')
      const moved = await invite(type, slot.start, { name: String(invitee.name), email: String(invitee.email), timezone: String(invitee.timezone ?? timeZone) }, signal)
      try {
        await cancelEvent(booking.id, `Rescheduled to ${slot.start.toISOString()}`, signal)
      } catch (error) {
        throw new Error(`the new time is booked, but the old booking could not be cancelled (${error instanceof Error ? error.message : String(error)}): the caller now has both`)
      }
      return moved
    },

    async cancel (booking: Booking, reason: string | null, signal: AbortSignal): Promise<void> {
      await cancelEvent(booking.id, reason, signal)
    }
  }
}

export const bookingTwo = defineCapability({
  type: 'booking_two',
  label: 'Booking (Calendly)',
  hint: 'Finds free times, books, reschedules and cancels in Calendly.',
  schema: CalendlySettings,
  defaults: {},
  fieldLabels: BOOKING_LABELS,
  check: requireConnection('booking_two'),
  live: async (row, ctx) => bookingTools(row, ctx, calendlyBackend(await connectionForCall(ctx, ctx.userId, 'booking_two'), row.settings), 'Calendly')
})
