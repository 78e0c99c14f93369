import type { Static } from 'typebox'
import { connectionForCall, IntegrationError, type Connection } from '../../integrations/client.ts'
import { PROVIDER_INFO } from '../../integrations/providers.ts'
import { BookingProblem, SlotTaken, type Attendee, type Booking, type BookingBackend, type Slot } from '../booking/backend.ts'
import { bookingWindow, CALENDAR_DEFAULTS, DEFAULT_HOURS, freeSlots, WEEKDAYS } from '../booking/hours.ts'
import { BOOKING_LABELS, calendarCheck, calendarSettings } from '../booking/settings.ts'
import { localOf, nextDay, weekdayOf, zonedToUtc } from '../booking/time.ts'
import { bookingTools } from '../booking/tools.ts'
import { defineCapability } from '../registry.ts'

// calendar_one: Google Calendar (API v3) through the connected account (OAuth 2.0). Free times are the tool's
// opening hours minus what freeBusy reports busy; a booking is an event (events.insert) with the caller as attendee
// and their phone and e-mail in private extended properties, which events.list can filter on, so that a later call
// finds, moves (events.patch) and cancels (events.delete) it. Google lets events overlap: whether the slot is still
// free is asked again right before the insert, and a slot taken meanwhile is SlotTaken.

const CalendarOneSettings = calendarSettings()
type CalendarOneSettings = Static<typeof CalendarOneSettings>

/** Unset members of the calendar settings (hours.ts, CalendarMembers). */

/** Private extended properties of the events it books (Google keeps them on this calendar's copy only). */
const PROPERTY = { booked: 'switchboard', phone: 'switchboard_phone', email: 'switchboard_email' } as const

/** A phone number as stored and searched: its digits and leading +, whatever spacing the caller or model used. */
const phoneKey = (phone: string) => phone.replace(/[^\d+]/g, '')

/** Most pages of events.list read when finding a caller's bookings (Google's pages hold up to 250 events). */
const MAX_PAGES = 10

interface GoogleEvent {
  id: string
  summary?: string
  status?: string
  start?: { dateTime?: string, date?: string }
  end?: { dateTime?: string, date?: string }
}

const bookingOf = (event: GoogleEvent): Booking | undefined => {
  if (event.start?.dateTime === undefined || event.end?.dateTime === undefined) return undefined
  return { id: event.id, start: new Date(event.start.dateTime), end: new Date(event.end.dateTime), title: event.summary ?? '' }
}

/** An instant as Google takes it: the wall-clock time in the tool's zone, with the zone (the event shows it so). */
const wall = (at: Date, timeZone: string) => ({ dateTime: `${localOf(at, timeZone)}:00`, timeZone })

const MINUTE = 60_000

/** The busy periods with one booking's own time taken out (it does not stand in its own way when moved). */
function without (busy: Slot[], own: Booking): Slot[] {
  return busy.flatMap((period) => {
    if (period.end <= own.start || period.start >= own.end) return [period]
    const parts: Slot[] = []
    if (period.start < own.start) parts.push({ start: period.start, end: own.start })
    if (period.end > own.end) parts.push({ start: own.end, end: period.end })
    return parts
  })
}

/** A BookingBackend over one Google calendar of the connected account. */
export function googleBackend (conn: Connection, settings: CalendarOneSettings, now: () => Date = () => new Date()): BookingBackend {
  const { calendar_id: calendarId, time_zone: timeZone } = settings
  const events = `/calendars/${encodeURIComponent(calendarId)}/events`
  const hours = settings.opening_hours ?? DEFAULT_HOURS
  const buffer = (settings.buffer_minutes ?? 0) * MINUTE
  const notBefore = () => bookingWindow(settings, now().getTime()).notBefore
  const notAfter = () => bookingWindow(settings, now().getTime()).notAfter

  const busy = async (from: Date, to: Date, signal: AbortSignal): Promise<Slot[]> => {
    const answer = await conn.request({ method: 'POST', path: '/freeBusy', body: { timeMin: from.toISOString(), timeMax: to.toISOString(), items: [{ id: calendarId }] } }, signal)
    const entry = answer.body?.calendars?.[calendarId]
    const problem = entry === undefined ? 'it is not in the answer' : Array.isArray(entry.errors) && entry.errors.length > 0 ? String(entry.errors[0]?.reason) : undefined
    // Per calendar, freeBusy answers 200 with errors (notFound: a calendar_id the account cannot see).
    if (problem !== undefined) throw new IntegrationError('rejected', `Google Calendar cannot read the calendar "${calendarId}" of the connected account (${problem})`, answer.status, answer.body)
    return (Array.isArray(entry.busy) ? entry.busy as Array<{ start: string, end: string }> : []).map((period) => ({ start: new Date(period.start), end: new Date(period.end) }))
  }

  /** The slot lies in one of its day's opening ranges, within the notice and the days ahead. */
  const bookable = (slot: Slot) => {
    if (slot.start < notBefore()) throw new BookingProblem(`appointments start at least ${settings.min_notice_minutes ?? CALENDAR_DEFAULTS.min_notice_minutes} minutes from now; offer a later time`)
    if (slot.end > notAfter()) throw new BookingProblem(`appointments can be booked at most ${settings.days_ahead ?? CALENDAR_DEFAULTS.days_ahead} days ahead; offer an earlier day`)
    const day = localOf(slot.start, timeZone).slice(0, 10)
    const ranges = hours[WEEKDAYS[weekdayOf(slot.start, timeZone)]] ?? []
    const inside = ranges.some((range) => {
      const opens = zonedToUtc(`${day}T${range.from}`, timeZone)
      const closes = zonedToUtc(range.to === '24:00' ? `${nextDay(day)}T00:00` : `${day}T${range.to}`, timeZone)
      return opens <= slot.start && slot.end <= closes
    })
    if (!inside) throw new BookingProblem('that time is outside the opening hours; offer one of the free times found')
  }

  /** Asked again right before a change: the slot (and the buffer around it) must still be free. */
  const stillFree = async (slot: Slot, signal: AbortSignal, own?: Booking) => {
    const around = { start: new Date(slot.start.getTime() - buffer), end: new Date(slot.end.getTime() + buffer) }
    const periods = await busy(around.start, around.end, signal)
    if ((own === undefined ? periods : without(periods, own)).some((period) => period.start < around.end && period.end > around.start)) throw new SlotTaken()
  }

  /** The upcoming events it booked whose private property holds the value, every page (each with the same query). */
  const list = async (property: string, value: string, signal: AbortSignal): Promise<GoogleEvent[]> => {
    const query = { privateExtendedProperty: `${property}=${value}`, timeMin: now().toISOString(), singleEvents: true, orderBy: 'startTime', maxResults: 250 }
    const found: GoogleEvent[] = []
    let pageToken: string | undefined
    for (let page = 0; page < MAX_PAGES; page++) {
      const answer = await conn.request({ method: 'GET', path: events, query: { ...query, pageToken } }, signal)
      found.push(...(Array.isArray(answer.body?.items) ? answer.body.items as GoogleEvent[] : []))
      pageToken = typeof answer.body?.nextPageToken === 'string' ? answer.body.nextPageToken : undefined
      if (pageToken === undefined) break
    }
    return found
  }

  return {
    async slots (from, to, signal) {
      // Widened by the buffer: an event just outside the search still keeps its neighbouring slots busy.
      const periods = await busy(new Date(from.getTime() - buffer), new Date(to.getTime() + buffer), signal)
      return freeSlots({ from, to, hours, timeZone, slotMinutes: settings.duration_minutes, bufferMinutes: settings.buffer_minutes ?? 0, busy: periods, notBefore: notBefore(), notAfter: notAfter() })
    },

    async book (slot, attendee: Attendee, signal) {
      bookable(slot)
      await stillFree(slot, signal)
      const email = attendee.email?.toLowerCase() ?? null
      const details = [`Name: ${attendee.name}`, attendee.phone === null ? '' : `Phone: ${attendee.phone}`, email === null ? '' : `E-mail: ${email}`, attendee.notes === null ? '' : `Notes: ${attendee.notes}`]
      const title = `${settings.name}: ${attendee.name}`
      const answer = await conn.request({
        method: 'POST',
        path: events,
        // Google e-mails the caller the invitation when an address is known.
        query: { sendUpdates: email === null ? 'none' : 'all' },
        body: {
          summary: title,
          description: [...details.filter((line) => line !== ''), 'Booked by the voice agent during a call.'].join('\n'),
          start: wall(slot.start, timeZone),
          end: wall(slot.end, timeZone),
          ...(email === null ? {} : { attendees: [{ email, displayName: attendee.name }] }),
          extendedProperties: {
            private: {
              [PROPERTY.booked]: 'true',
              ...(attendee.phone === null ? {} : { [PROPERTY.phone]: phoneKey(attendee.phone) }),
              ...(email === null ? {} : { [PROPERTY.email]: email })
            }
          }
        }
      }, signal)
      return bookingOf(answer.body) ?? { id: String(answer.body?.id), start: slot.start, end: slot.end, title }
    },

    async find (who, signal) {
      const lists = await Promise.all([
        who.phone === null ? [] : list(PROPERTY.phone, phoneKey(who.phone), signal),
        who.email === null ? [] : list(PROPERTY.email, who.email.toLowerCase(), signal)
      ])
      const unique = new Map(lists.flat().filter((event) => event.status !== 'cancelled').map((event) => [event.id, event]))
      return [...unique.values()].map(bookingOf).filter((booking) => booking !== undefined).sort((a, b) => a.start.getTime() - b.start.getTime())
    },

    async reschedule (booking, slot, signal) {
      bookable(slot)
      await stillFree(slot, signal, booking)
      const answer = await conn.request({
        method: 'PATCH',
        path: `${events}/${encodeURIComponent(booking.id)}`,
        query: { sendUpdates: 'all' },
        body: { start: wall(slot.start, timeZone), end: wall(slot.end, timeZone) }
      }, signal)
      return bookingOf(answer.body) ?? { ...booking, start: slot.start, end: slot.end }
    },

    // Google's delete takes no reason; the attendees get Google's cancellation e-mail.
    async cancel (booking, _reason, signal) {
      try {
        await conn.request({ method: 'DELETE', path: `${events}/${encodeURIComponent(booking.id)}`, query: { sendUpdates: 'all' } }, signal)
      } catch (err) {
        // 410 `deleted`: cancelled already (by the owner in Google Calendar meanwhile): what was asked is done.
        if (!(err instanceof IntegrationError && err.status === 410)) throw err
      }
    }
  }
}

export const calendarOne = defineCapability({
  type: 'calendar_one',
  label: 'Calendar (Google Calendar)',
  hint: 'Finds free times and books, moves and cancels appointments in a connected Google calendar.',
  schema: CalendarOneSettings,
  defaults: {},
  fieldLabels: BOOKING_LABELS,
  check: calendarCheck('calendar_one'),
  live: async (row, ctx) => bookingTools(row, ctx, googleBackend(await connectionForCall(ctx, ctx.userId, 'calendar_one'), row.settings), PROVIDER_INFO.calendar_one.service)
})
