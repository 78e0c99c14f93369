import { Type, type Static } from 'typebox'
import { connectionForCall, type Connection } from '../../integrations/client.ts'
import { PROVIDER_INFO } from '../../integrations/providers.ts'
import { SlotTaken, type Booking, type BookingBackend, type Slot } from '../booking/backend.ts'
import { bookingWindow, CalendarMembers, DEFAULT_HOURS, freeSlots } from '../booking/hours.ts'
import { BOOKING_LABELS, calendarCheck } from '../booking/settings.ts'
import { zonedToUtc } from '../booking/time.ts'
import { bookingTools } from '../booking/tools.ts'
import { defineCapability } from '../registry.ts'
import { Description, Minutes, Name, TimeZone } from '../../agents/settings-parts.ts'

// calendar_two: Microsoft Outlook through Microsoft Graph v1.0 (docs/integrations.md). Free times are the tool's
// opening hours minus the calendar view's events that are not shown as free; a booking is an event in the chosen
// calendar with the caller as attendee (when an e-mail is known), and the caller's phone number and e-mail kept in
// single-value extended properties, so that their upcoming events are found again by a filter on those.

/** The property set of Switchboard's extended properties: a GUID of its own, as Graph's reference asks. */
const PROPERTY_SET = '{6c2a4f1e-8b3d-4e57-9a0c-2f7d5b1e3c48}'
const PHONE_PROPERTY = `String ${PROPERTY_SET} Name SwitchboardCallerPhone`
const EMAIL_PROPERTY = `String ${PROPERTY_SET} Name SwitchboardCallerEmail`

/** Answers in UTC whatever the mailbox's zone, so that times are read one way. */
const PREFER_UTC = { Prefer: 'outlook.timezone="UTC"' }

/** Events asked for per page; Graph may send fewer, with a next link. */
const PAGE = 100
/** A bound on the pages one look-up follows: a search of up to 31 days holds far fewer. */
const MAX_PAGES = 20

const MINUTE = 60_000

const Settings = Type.Object({
  name: Name,
  description: Description,
  calendar_id: Type.String({ maxLength: 200, description: '"primary" (or empty): the account\'s default calendar; else the id of one of its calendars (Graph\'s GET /me/calendars)' }),
  time_zone: TimeZone,
  duration_minutes: Minutes(5, 480, 'length of an appointment'),
  ...CalendarMembers
})
type Settings = Static<typeof Settings>

interface DateTimeTimeZone { dateTime: string, timeZone: string }
interface GraphEvent { id: string, subject?: string, start: DateTimeTimeZone, end: DateTimeTimeZone, showAs?: string, isCancelled?: boolean }

/** The instant a Graph dateTimeTimeZone names: UTC as asked ('2026-12-01T14:00:00.0000000'), or an IANA zone's wall clock. */
function instantOf (value: DateTimeTimeZone): Date {
  const local = value.dateTime.slice(0, 19)
  return value.timeZone === 'UTC' ? new Date(`${local}Z`) : zonedToUtc(local.slice(0, 16), value.timeZone)
}

/** An instant as events are written: in UTC, which every Graph method takes (not every one takes every IANA zone). */
const graphTime = (at: Date): DateTimeTimeZone => ({ dateTime: at.toISOString().slice(0, 19), timeZone: 'UTC' })

/** An OData string literal (a quote inside is doubled). */
const literal = (value: string) => `'${value.replaceAll("'", "''")}'`

const bookingOf = (event: GraphEvent): Booking => ({ id: event.id, start: instantOf(event.start), end: instantOf(event.end), title: event.subject ?? '' })

/** The booking functions' backend over one Outlook calendar of a connected Microsoft account. */
export function graphBackend (conn: Connection, settings: Settings): BookingBackend {
  const calendar = settings.calendar_id === '' || settings.calendar_id === 'primary' ? '/me/calendar' : `/me/calendars/${encodeURIComponent(settings.calendar_id)}`
  const buffer = (settings.buffer_minutes ?? 0) * MINUTE

  /** Every page of an event collection, following @odata.nextLink. */
  async function collect (path: string, query: Record<string, string | number>, signal: AbortSignal): Promise<GraphEvent[]> {
    const events: GraphEvent[] = []
    let next: { path: string, query?: Record<string, string | number> } = { path, query }
    for (let page = 0; page < MAX_PAGES; page++) {
      const { body } = await conn.request({ method: 'GET', ...next, headers: PREFER_UTC }, signal)
      events.push(...(Array.isArray(body?.value) ? body.value : []))
      const link = body?.['@odata.nextLink']
      if (typeof link !== 'string') return events
      next = { path: link }
    }
    return events
  }

  /** The events that keep [from, to) from being booked: every one not shown as free (or working elsewhere) nor cancelled. */
  async function busy (from: Date, to: Date, signal: AbortSignal): Promise<Array<Slot & { id: string }>> {
    const events = await collect(`${calendar}/calendarView`, { startDateTime: from.toISOString(), endDateTime: to.toISOString(), $select: 'start,end,showAs,isCancelled', $top: PAGE }, signal)
    return events.filter((e) => e.showAs !== 'free' && e.showAs !== 'workingElsewhere' && e.isCancelled !== true)
      .map((e) => ({ id: e.id, start: instantOf(e.start), end: instantOf(e.end) }))
  }

  /** Whether a slot is still free, the buffer around it included, leaving out the event being moved. */
  async function taken (slot: Slot, signal: AbortSignal, moving?: string): Promise<boolean> {
    const events = await busy(new Date(slot.start.getTime() - buffer), new Date(slot.end.getTime() + buffer), signal)
    return events.some((e) => e.id !== moving)
  }

  return {
    async slots (from, to, signal) {
      // Events just outside the search still keep their buffer clear inside it.
      const events = await busy(new Date(from.getTime() - buffer), new Date(to.getTime() + buffer), signal)
      return freeSlots({
        from,
        to,
        hours: settings.opening_hours ?? DEFAULT_HOURS,
        timeZone: settings.time_zone,
        slotMinutes: settings.duration_minutes,
        bufferMinutes: settings.buffer_minutes ?? 0,
        busy: events,
        ...bookingWindow(settings)
      })
    },

    async book (slot, attendee, signal) {
      // Graph takes overlapping events without a word: the check right before writing is what keeps a slot single.
      if (await taken(slot, signal)) throw new SlotTaken()
      const details = [
        `Booked by ${settings.name} for ${attendee.name}.`,
        attendee.phone === null ? undefined : `Phone: ${attendee.phone}`,
        attendee.email === null ? undefined : `E-mail: ${attendee.email}`,
        attendee.notes === null ? undefined : `Notes: ${attendee.notes}`
      ]
      const properties = [
        ...(attendee.phone === null ? [] : [{ id: PHONE_PROPERTY, value: attendee.phone }]),
        ...(attendee.email === null ? [] : [{ id: EMAIL_PROPERTY, value: attendee.email.toLowerCase() }])
      ]
      const { body } = await conn.request({
        method: 'POST',
        path: `${calendar}/events`,
        headers: PREFER_UTC,
        body: {
          subject: attendee.name,
          body: { contentType: 'text', content: details.filter((line) => line !== undefined).join('\n') },
          start: graphTime(slot.start),
          end: graphTime(slot.end),
          showAs: 'busy',
          // An attendee gets Outlook's invitation (and its cancellation when the event is deleted).
          attendees: attendee.email === null ? [] : [{ type: 'required', emailAddress: { address: attendee.email, name: attendee.name } }],
          singleValueExtendedProperties: properties
        }
      }, signal)
      return bookingOf(body)
    },

    async find (who, signal) {
      const lookups: Array<[string, string]> = [
        ...(who.phone === null ? [] : [[PHONE_PROPERTY, who.phone] as [string, string]]),
        ...(who.email === null ? [] : [[EMAIL_PROPERTY, who.email.toLowerCase()] as [string, string]])
      ]
      const found = await Promise.all(lookups.map(async ([id, value]) => await collect(`${calendar}/events`, {
        $filter: `singleValueExtendedProperties/Any(ep: ep/id eq ${literal(id)} and ep/value eq ${literal(value)})`,
        $select: 'subject,start,end,isCancelled',
        $top: PAGE
      }, signal)))
      const now = Date.now()
      const upcoming = new Map(found.flat().filter((e) => e.isCancelled !== true).map((e) => [e.id, bookingOf(e)]))
      return [...upcoming.values()].filter((b) => b.end.getTime() > now).sort((a, b) => a.start.getTime() - b.start.getTime())
    },

    async reschedule (booking, slot, signal) {
      if (await taken(slot, signal, booking.id)) throw new SlotTaken()
      const { body } = await conn.request({ method: 'PATCH', path: `/me/events/${encodeURIComponent(booking.id)}`, headers: PREFER_UTC, body: { start: graphTime(slot.start), end: graphTime(slot.end) } }, signal)
      return bookingOf(body)
    },

    async cancel (booking, _reason, signal) {
      // Deleting a meeting on the organiser's calendar sends its attendees Outlook's cancellation (Graph's "Delete event").
      await conn.request({ method: 'DELETE', path: `/me/events/${encodeURIComponent(booking.id)}` }, signal)
    }
  }
}

export const calendarTwo = defineCapability({
  type: 'calendar_two',
  label: 'Calendar (Microsoft Outlook)',
  hint: 'Checks and books times in an Outlook calendar.',
  schema: Settings,
  defaults: { calendar_id: 'primary' },
  fieldLabels: BOOKING_LABELS,
  check: calendarCheck('calendar_two'),
  live: async (row, ctx) => bookingTools(row, ctx, graphBackend(await connectionForCall(ctx, ctx.userId, 'calendar_two'), row.settings), PROVIDER_INFO.calendar_two.service)
})
