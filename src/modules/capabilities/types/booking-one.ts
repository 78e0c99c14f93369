import { Type, type Static } from 'typebox'
import { connectionForCall, IntegrationError, type Connection } from '../../integrations/client.ts'
import { BookingProblem, SlotTaken, type Attendee, type Booking, type BookingBackend, type Slot } from '../booking/backend.ts'
import { BOOKING_LABELS, bookingSettings, requireConnection } from '../booking/settings.ts'
import { bookingTools } from '../booking/tools.ts'
import { defineCapability } from '../registry.ts'

// booking_one: Cal.com (API v2, https://cal.com/docs/api-reference/v2) with an API key. Free times come from Cal.com's
// own availability (GET /v2/slots), bookings are made, found, moved and cancelled through /v2/bookings. Cal.com pins
// each endpoint's behaviour to a cal-api-version header: the values below are the ones these shapes were read from.

const SLOTS_VERSION = { 'cal-api-version': '2024-09-04' }
const BOOKINGS_VERSION = { 'cal-api-version': '2024-08-13' }

/** At most this many pages of a caller's upcoming bookings are read (100 each). */
const MAX_PAGES = 5

const CalcomSettings = Type.Object({
  ...bookingSettings().properties,
  event_type_id: Type.String({ minLength: 1, maxLength: 12, pattern: '^[0-9]+$', description: 'the Cal.com event type\'s id: a number (Event Types, open one: the number in its address)' })
})

/** A Cal.com booking (BookingOutput_2024_08_13) as the tools speak of it: its uid is what reschedule and cancel take. */
function bookingOf (data: any): Booking {
  return { id: String(data.uid), start: new Date(data.start), end: new Date(data.end), title: String(data.title ?? '') }
}

/** Cal.com's error text: { status: 'error', error: { code, message } }. */
const messageOf = (body: any): string => typeof body?.error?.message === 'string' ? body.error.message : typeof body?.message === 'string' ? body.message : ''

/**
 * A slot taken meanwhile: Cal.com's booking service answers "User either already has booking at this time or is not
 * available" (400 BadRequestException; team event types say "One of the hosts …"; newer versions may answer 409).
 */
function slotTakenOr (error: unknown): unknown {
  if (error instanceof IntegrationError && error.reason === 'rejected' && (error.status === 400 || error.status === 409) &&
    /already has booking|is not available|no_available_users/i.test(messageOf(error.body))) return new SlotTaken(messageOf(error.body))
  return error
}

/** An international number Cal.com accepts as attendee.phoneNumber (a browser call's placeholder is not one). */
const phoneFor = (phone: string | null) => phone !== null && /^\+[1-9][0-9]{6,14}$/.test(phone) ? phone : undefined

const digits = (phone: string) => phone.replace(/[^0-9]/g, '')

export function calcomBackend (conn: Connection, settings: Static<typeof CalcomSettings>, callId: string): BookingBackend {
  const eventTypeId = Number(settings.event_type_id)
  const timeZone = settings.time_zone
  return {
    async slots (from: Date, to: Date, signal: AbortSignal): Promise<Slot[]> {
      const answer = await conn.request({
        method: 'GET', path: '/slots', headers: SLOTS_VERSION,
        query: { eventTypeId, start: from.toISOString(), end: to.toISOString(), timeZone, format: 'range' }
      }, signal)
      const days: Record<string, Array<{ start: string, end?: string }>> = answer.body?.data ?? {}
      return Object.values(days).flat()
        .map((slot) => ({ start: new Date(slot.start), end: new Date(slot.end ?? slot.start) }))
        .filter((slot) => slot.start >= from && slot.start < to && slot.end > slot.start)
        .sort((a, b) => a.start.getTime() - b.start.getTime())
    },

    async book (slot: Slot, attendee: Attendee, signal: AbortSignal): Promise<Booking> {
      if (attendee.email === null) throw new BookingProblem('Cal.com books only with the caller\'s e-mail address: ask the caller for it, then book again with email.')
      const phoneNumber = phoneFor(attendee.phone)
      try {
        const answer = await conn.request({
          method: 'POST', path: '/bookings', headers: BOOKINGS_VERSION,
          body: {
            start: slot.start.toISOString(),
            eventTypeId,
            attendee: { name: attendee.name, email: attendee.email, timeZone, ...(phoneNumber === undefined ? {} : { phoneNumber }) },
            metadata: { switchboard_call_id: callId },
            ...(attendee.notes === null || attendee.notes === '' ? {} : { bookingFieldsResponses: { notes: attendee.notes } })
          }
        }, signal)
        return bookingOf(answer.body?.data)
      } catch (error) {
        throw slotTakenOr(error)
      }
    },

    async find (who, signal): Promise<Booking[]> {
      const phone = who.phone === null ? '' : digits(who.phone)
      // Cal.com filters by e-mail; a phone number is matched here against the attendees it stores.
      if (who.email === null && phone === '') return []
      const found: Booking[] = []
      for (let page = 0; page < MAX_PAGES; page++) {
        const answer = await conn.request({
          method: 'GET', path: '/bookings', headers: BOOKINGS_VERSION,
          query: { status: 'upcoming', eventTypeId, attendeeEmail: who.email ?? undefined, take: 100, skip: page * 100 }
        }, signal)
        for (const data of answer.body?.data ?? []) {
          if (data.status !== 'accepted' && data.status !== 'pending') continue
          if (who.email === null && !(data.attendees ?? []).some((a: any) => typeof a.phoneNumber === 'string' && digits(a.phoneNumber) === phone)) continue
          found.push(bookingOf(data))
        }
        if (answer.body?.pagination?.hasNextPage !== true) break
      }
      return found.sort((a, b) => a.start.getTime() - b.start.getTime())
    },

    async reschedule (booking: Booking, slot: Slot, signal: AbortSignal): Promise<Booking> {
      try {
        // Cal.com moves a booking by making a new one (a new uid) and cancelling the old one with a link to it.
        const answer = await conn.request({
          method: 'POST', path: `/bookings/${encodeURIComponent(booking.id)}/reschedule`, headers: BOOKINGS_VERSION,
          body: { start: slot.start.toISOString(), reschedulingReason: 'Rescheduled by the caller on the phone' }
        }, signal)
        return bookingOf(answer.body?.data)
      } catch (error) {
        throw slotTakenOr(error)
      }
    },

    async cancel (booking: Booking, reason: string | null, signal: AbortSignal): Promise<void> {
      await conn.request({
        method: 'POST', path: `/bookings/${encodeURIComponent(booking.id)}/cancel`, headers: BOOKINGS_VERSION,
        body: { cancellationReason: reason ?? 'Cancelled by the caller on the phone' }
      }, signal)
    }
  }
}

export const bookingOne = defineCapability({
  type: 'booking_one',
  label: 'Booking (Cal.com)',
  hint: 'Finds free times, books, reschedules and cancels in Cal.com.',
  schema: CalcomSettings,
  defaults: {},
  fieldLabels: BOOKING_LABELS,
  check: requireConnection('booking_one'),
  live: async (row, ctx) => bookingTools(row, ctx, calcomBackend(await connectionForCall(ctx, ctx.userId, 'booking_one'), row.settings, ctx.callId), 'Cal.com')
})
