import { Type, type Static } from 'typebox'
import { connectionOf, IntegrationError, type Connection } from '../../integrations/client.ts'
import { SlotTaken, type Attendee, type Booking, type BookingBackend, type Slot } from '../booking/backend.ts'
import { freeSlots, OpeningHours } from '../booking/hours.ts'
import { localOf } from '../booking/time.ts'
import { bookingTools } from '../booking/tools.ts'
import { defineCapability } from '../registry.ts'
import { Description, Minutes, Name, TimeZone } from '../schemas.ts'

// calendar_one: Google Calendar (API v3) through the connected account (OAuth 2.0). Free times are the tool's
// opening hours minus what freeBusy reports busy; a booking is an event (events.insert) with the caller as attendee
// and their phone and e-mail in private extended properties, which events.list can filter on, so that a later call
// finds, moves (events.patch) and cancels (events.delete) it. Google lets events overlap: whether the slot is still
// free is asked again right before the insert, and a slot taken meanwhile is SlotTaken.

export const CalendarOneSettings = Type.Object({
  name: Name,
  description: Description,
  calendar_id: Type.String({ minLength: 1, maxLength: 200, description: "calendar in the connected Google account: `primary` (its own calendar) or a calendar's id" }),
  time_zone: TimeZone,
  duration_minutes: Minutes(5, 480, 'length of an event'),
  buffer_minutes: Minutes(0, 240, 'free time kept before and after each event'),
  opening_hours: OpeningHours,
  days_ahead: Type.Integer({ minimum: 1, maximum: 365, description: 'how many days ahead times are offered' })
})
type CalendarOneSettings = Static<typeof CalendarOneSettings>

/** Private extended properties of the events it books (Google keeps them on this calendar's copy only). */
const PROPERTY = { booked: 'switchboard', phone: 'switchboard_phone', email: 'switchboard_email' } as const

/** Most pages of events.list read when finding a caller's bookings (Google's pages hold up to 250 events). */
const MAX_PAGES = 10

interface GoogleEvent {
  id: string
  summary?: string
  status?: string
  start?: { dateTime?: string, date?: string }
  end?: { dateTime?: string, date?: string }
  attendees?: unknown[]
}

const bookingOf = (event: GoogleEvent): Booking | undefined => {
  if (event.start?.dateTime === undefined || event.end?.dateTime === undefined) return undefined
  return { id: event.id, start: new Date(event.start.dateTime), end: new Date(event.end.dateTime), title: event.summary ?? '' }
}

const wall = (at: Date, timeZone: string) => ({ dateTime: `${localOf(at, timeZone)}:00`, timeZone })

const minutes = (n: number) => n * 60_000

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
  const calendarId = settings.calendar_id
  const events = `/calendars/${encodeURIComponent(calendarId)}/events`
  const buffer = minutes(settings.buffer_minutes)

  const busy = async (from: Date, to: Date, signal: AbortSignal): Promise<Slot[]> => {
    const answer = await conn.request({ method: 'POST', path: '/freeBusy', body: { timeMin: from.toISOString(), timeMax: to.toISOString(), items: [{ id: calendarId }] } }, signal)
    const entry = answer.body?.calendars?.[calendarId]
    if (entry === undefined || (Array.isArray(entry.errors) && entry.errors.length > 0)) {
      throw new IntegrationError('rejected', `Google Calendar cannot read the calendar "${calendarId}" (${entry?.errors?.[0]?.reason ?? 'not in the answer'})`, { status: 404, body: answer.body })
    }
    return (entry.busy as Array<{ start: string, end: string }>).map((period) => ({ start: new Date(period.start), end: new Date(period.end) }))
  }

  const free = (slot: Slot, periods: Slot[]) => !periods.some((period) => period.start.getTime() < slot.end.getTime() + buffer && period.end.getTime() > slot.start.getTime() - buffer)

  /** Asked again right before a change: the slot (and its buffer) must still be free. */
  const stillFree = async (slot: Slot, signal: AbortSignal, own?: Booking) => {
    const periods = await busy(new Date(slot.start.getTime() - buffer), new Date(slot.end.getTime() + buffer), signal)
    if (!free(slot, own === undefined ? periods : without(periods, own))) throw new SlotTaken()
  }

  const list = async (property: string, value: string, signal: AbortSignal): Promise<GoogleEvent[]> => {
    const found: GoogleEvent[] = []
    let pageToken: string | undefined
    for (let page = 0; page < MAX_PAGES; page++) {
      const answer = await conn.request({
        method: 'GET',
        path: events,
        query: { privateExtendedProperty: `${property}=${value}`, timeMin: now().toISOString(), singleEvents: true, orderBy: 'startTime', maxResults: 250, pageToken }
      }, signal)
      found.push(...(answer.body?.items ?? []) as GoogleEvent[])
      pageToken = answer.body?.nextPageToken
      if (pageToken === undefined) break
    }
    return found
  }

  return {
    async slots (from, to, signal) {
      const periods = await busy(from, to, signal)
      return freeSlots({ from, to, hours: settings.opening_hours, timeZone: settings.time_zone, slotMinutes: settings.duration_minutes, bufferMinutes: settings.buffer_minutes, busy: periods, notBefore: now() })
    },

    async book (slot, attendee: Attendee, signal) {
      await stillFree(slot, signal)
      const email = attendee.email?.toLowerCase() ?? null
      const details = [`Name: ${attendee.name}`, attendee.phone === null ? undefined : `Phone: ${attendee.phone}`, email === null ? undefined : `E-mail: ${email}`, attendee.notes === null ? undefined : `Notes: ${attendee.notes}`]
      const answer = await conn.request({
        method: 'POST',
        path: events,
        // Google e-mails the invitation to the caller (when an address is known).
        query: { sendUpdates: email === null ? 'none' : 'all' },
        body: {
          summary: `${settings.name}: ${attendee.name}`,
          description: [...details.filter((line) => line !== undefined), 'Booked by the voice agent during a call.'].join('\n'),
          start: wall(slot.start, settings.time_zone),
          end: wall(slot.end, settings.time_zone),
          ...(email === null ? {} : { attendees: [{ email, displayName: attendee.name }] }),
          extendedProperties: {
            private: {
              [PROPERTY.booked]: '1',
              ...(attendee.phone === null ? {} : { [PROPERTY.phone]: attendee.phone }),
              ...(email === null ? {} : { [PROPERTY.email]: email })
            }
          }
        }
      }, signal)
      return bookingOf(answer.body) ?? { id: String(answer.body?.id), start: slot.start, end: slot.end, title: `${settings.name}: ${attendee.name}` }
    },

    async find (who, signal) {
      const lists = await Promise.all([
        who.phone === null ? [] : await list(PROPERTY.phone, who.phone, signal),
        who.email === null ? [] : await list(PROPERTY.email, who.email.toLowerCase(), signal)
      ])
      const unique = new Map(lists.flat().filter((event) => event.status !== 'cancelled').map((event) => [event.id, event]))
      return [...unique.values()].map(bookingOf).filter((booking) => booking !== undefined).sort((a, b) => a.start.getTime() - b.start.getTime())
    },

    async reschedule (booking, slot, signal) {
      await stillFree(slot, signal, booking)
      const answer = await conn.request({
        method: 'PATCH',
        path: `${events}/${encodeURIComponent(booking.id)}`,
        query: { sendUpdates: 'all' },
        body: { start: wall(slot.start, settings.time_zone), end: wall(slot.end, settings.time_zone) }
      }, signal)
      return bookingOf(answer.body) ?? { ...booking, start: slot.start, end: slot.end }
    },

    async cancel (booking, _reason, signal) {
      try {
        await conn.request({ method: 'DELETE', path: `${events}/${encodeURIComponent(booking.id)}`, query: { sendUpdates: 'all' } }, signal)
      } catch (err) {
        // 410: cancelled already (another call, or the owner in Google Calendar): what was asked is done.
        if (!(err instanceof IntegrationError && err.status === 410)) throw err
      }
    }
  }
}

export const calendarOne = defineCapability({
  type: 'calendar_one',
  label: 'Calendar (Google Calendar)',
  hint: 'Finds free times and books, moves and cancels events in a Google calendar.',
  schema: CalendarOneSettings,
  defaults: { calendar_id: 'primary', buffer_minutes: 0, days_ahead: 30 },
  fieldLabels: { duration_minutes: 'Length (minutes)', calendar_id: 'Calendar id', buffer_minutes: 'Buffer (minutes)', opening_hours: 'Opening hours', days_ahead: 'Days ahead' },
  live: async (row, ctx) => bookingTools(row, ctx, googleBackend(await connectionOf(ctx, ctx.userId, 'calendar_one'), row.settings))
})
