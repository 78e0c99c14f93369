import { IntegrationError } from '../../integrations/client.ts'
import type { LiveSet, LiveTool, ToolContext, ToolOutcome } from '../live.ts'
import { BookingProblem, SlotTaken, type Booking, type BookingBackend, type Slot } from './backend.ts'
import { MAX_SEARCH_DAYS } from './hours.ts'
import { isLocal, localOf, nextDay, spoken, spokenToday, zonedToUtc } from './time.ts'

// The functions a booking or calendar tool offers the model, the same for every service: find free times, book,
// find the caller's booking, reschedule, cancel. Times go in and out as wall-clock times in the tool's time zone
// ('2026-12-01T14:30'), with each answer also saying them as people do, so that the model neither converts zones
// nor reads ISO instants aloud. A failure becomes a sentence the model can act on; the call goes on.

export interface BookingToolSettings { name: string, description?: string, time_zone: string, duration_minutes?: number }

/** The most free times one answer lists: a caller is offered two or three, the model picks among these. */
const LISTED_SLOTS = 8
/** A booking's length when the service does not set it (Cal.com and Calendly use their event type's). */
const DEFAULT_MINUTES = 30

const LocalTime = (description: string) => ({ type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2})?$', description })

/** Why a service failed, as the model should understand it: what happened and what to tell the caller. */
function failure (err: unknown, service: string): Error {
  if (err instanceof SlotTaken || err instanceof BookingProblem) return err
  if (err instanceof IntegrationError) {
    const advice = err.reason === 'rate_limited' || err.reason === 'unavailable'
      ? 'Tell the caller the booking system is not answering right now; offer to try again in a moment or to take their details.'
      : 'Tell the caller you cannot book right now and offer to take their details so that someone calls back.'
    return new Error(`${err.message}. ${advice}`)
  }
  if (err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError')) return new Error(`${service} did not answer in time`)
  return err instanceof Error ? err : new Error(String(err))
}

/**
 * The booking functions of one tool over a service. `service` names it in errors ("Google Calendar"). The set's
 * instructions tell the model today's date and time in the tool's zone, which it needs for "next Tuesday afternoon".
 */
export function bookingTools (row: { type: string, settings: BookingToolSettings }, ctx: ToolContext, backend: BookingBackend, service: string): LiveSet {
  const { name, time_zone: timeZone } = row.settings
  const minutes = row.settings.duration_minutes ?? DEFAULT_MINUTES
  const language = ctx.language
  /** What the caller said their e-mail is during this call (a web caller's, or one given to book). */
  let givenEmail: string | null = null
  const say = (at: Date) => spoken(at, timeZone, language)
  const described = (booking: Booking) => ({ booking_id: booking.id, start: localOf(booking.start, timeZone), spoken: say(booking.start), title: booking.title })
  const listed = (slots: Slot[]) => slots.slice(0, LISTED_SLOTS).map((slot) => ({ start: localOf(slot.start, timeZone), spoken: say(slot.start) }))
  const answer = (value: unknown): ToolOutcome => ({ output: JSON.stringify(value) })

  /** A 'YYYY-MM-DD' or 'YYYY-MM-DDTHH:mm' argument as an instant in the tool's zone (a bare date: its midnight). */
  function instant (value: unknown, member: string): Date {
    const text = typeof value === 'string' ? value.trim() : ''
    const local = /^\d{4}-\d{2}-\d{2}$/.test(text) ? `${text}T00:00` : text
    if (!isLocal(local)) throw new BookingProblem(`${member} must be a local time in ${timeZone} such as 2026-12-01T14:30, got "${text}"`)
    return zonedToUtc(local, timeZone)
  }

  /** The end of a search: a bare date means the end of that day. */
  function searchEnd (value: unknown): Date {
    const text = typeof value === 'string' ? value.trim() : ''
    return /^\d{4}-\d{2}-\d{2}$/.test(text) ? zonedToUtc(`${nextDay(text)}T00:00`, timeZone) : instant(value, 'to')
  }

  /** A start the caller chose, as a slot of the tool's length; not in the past. */
  function slotAt (value: unknown): Slot {
    const start = instant(value, 'start')
    if (start.getTime() < Date.now()) throw new BookingProblem(`${say(start)} has already passed; offer a later time`)
    return { start, end: new Date(start.getTime() + minutes * 60_000) }
  }

  /** Free times the same day as a slot that was taken meanwhile, to offer instead. */
  async function nearby (slot: Slot): Promise<ReturnType<typeof listed>> {
    const day = localOf(slot.start, timeZone).slice(0, 10)
    try {
      return listed(await backend.slots(zonedToUtc(`${day}T00:00`, timeZone), zonedToUtc(`${nextDay(day)}T00:00`, timeZone), ctx.signal))
    } catch {
      return []
    }
  }

  const who = (args: Record<string, unknown>) => {
    const email = typeof args.email === 'string' && args.email.includes('@') ? args.email.trim() : null
    if (email !== null) givenEmail = email
    const phone = typeof args.phone === 'string' && args.phone.trim() !== '' ? args.phone.trim() : null
    return { email: email ?? givenEmail ?? ctx.customer.email, phone: ctx.customer.phone ?? phone }
  }

  /** One of the caller's own bookings: an id the caller does not hold is refused, whoever's it is. */
  async function ownBooking (args: Record<string, unknown>): Promise<Booking> {
    const id = typeof args.booking_id === 'string' ? args.booking_id : ''
    const bookings = await backend.find(who(args), ctx.signal)
    const booking = bookings.find((b) => b.id === id)
    if (booking === undefined) throw new BookingProblem(`the caller has no upcoming booking ${JSON.stringify(id)}; use ${name}_find_booking to list theirs`)
    return booking
  }

  const guarded = (run: (args: Record<string, unknown>) => Promise<ToolOutcome>) => async (args: Record<string, unknown>): Promise<ToolOutcome> => {
    try {
      return await run(args)
    } catch (err) {
      throw failure(err, service)
    }
  }

  const tools: LiveTool[] = [
    {
      type: row.type,
      spec: {
        name: `${name}_find_times`,
        description: row.settings.description !== undefined && row.settings.description !== ''
          ? `${row.settings.description} Finds free appointment times between two local times.`
          : `Finds free appointment times in ${service} between two local times (${timeZone}). Use it before booking; turn the caller's words ("Tuesday afternoon") into from/to.`,
        parameters: {
          type: 'object',
          properties: {
            from: LocalTime(`start of the search, local time in ${timeZone}: 2026-12-01T12:00 or a date`),
            to: LocalTime(`end of the search, local time in ${timeZone}: 2026-12-01T18:00 or a date (the whole day)`)
          },
          required: ['from', 'to']
        }
      },
      run: guarded(async (args) => {
        const from = instant(args.from, 'from')
        const to = searchEnd(args.to ?? args.from)
        if (to.getTime() <= from.getTime()) throw new BookingProblem('`to` must be after `from`')
        if (to.getTime() - from.getTime() > MAX_SEARCH_DAYS * 86_400_000) throw new BookingProblem(`search at most ${MAX_SEARCH_DAYS} days at once; ask the caller which days suit them`)
        const slots = await backend.slots(from, to, ctx.signal)
        if (slots.length === 0) return answer({ time_zone: timeZone, free_times: [], note: `Nothing is free between ${say(from)} and ${say(to)}. Ask the caller for another day or time.` })
        return answer({ time_zone: timeZone, free_times: listed(slots), more: Math.max(0, slots.length - LISTED_SLOTS), note: 'Offer two or three of these as `spoken` says them; book with `start` exactly as given.' })
      })
    },
    {
      type: row.type,
      spec: {
        name: `${name}_book`,
        description: `Books an appointment in ${service} at a free time found with ${name}_find_times, once the caller has agreed to it and given their name.`,
        parameters: {
          type: 'object',
          properties: {
            start: LocalTime(`the chosen start, exactly as ${name}_find_times gave it (local time in ${timeZone})`),
            name: { type: 'string', description: 'the caller\'s full name' },
            email: { type: 'string', description: 'the caller\'s e-mail address, for the confirmation' },
            phone: { type: 'string', description: 'the caller\'s phone number, if they give one' },
            notes: { type: 'string', description: 'what the appointment is about, in a few words' }
          },
          required: ['start', 'name']
        }
      },
      run: guarded(async (args) => {
        const slot = slotAt(args.start)
        const person = typeof args.name === 'string' ? args.name.trim().slice(0, 200) : ''
        if (person === '') throw new BookingProblem('ask the caller for their name first')
        const contact = who(args)
        try {
          const booking = await backend.book(slot, { name: person, email: contact.email, phone: contact.phone, notes: typeof args.notes === 'string' ? args.notes.slice(0, 1000) : null }, ctx.signal)
          return answer({ booked: described(booking), note: 'Confirm the day and time to the caller.' })
        } catch (err) {
          if (!(err instanceof SlotTaken)) throw err
          return answer({ booked: null, problem: `${say(slot.start)} was taken by someone else meanwhile.`, free_times: await nearby(slot), note: 'Apologise and offer one of these instead.' })
        }
      })
    },
    {
      type: row.type,
      spec: {
        name: `${name}_find_booking`,
        description: `Finds the caller's upcoming appointments in ${service} (by their phone number, or the e-mail they booked with), before rescheduling or cancelling one.`,
        parameters: { type: 'object', properties: { email: { type: 'string', description: 'the e-mail address the caller booked with, when asked for it' } } }
      },
      run: guarded(async (args) => {
        const contact = who(args)
        if (contact.email === null && contact.phone === null) throw new BookingProblem('ask the caller for the e-mail address they booked with')
        const bookings = await backend.find(contact, ctx.signal)
        return answer({ bookings: bookings.slice(0, 10).map(described), ...(bookings.length === 0 ? { note: 'No upcoming appointment was found for the caller. Ask whether they booked with another e-mail address.' } : {}) })
      })
    },
    {
      type: row.type,
      spec: {
        name: `${name}_reschedule`,
        description: `Moves one of the caller's appointments (found with ${name}_find_booking) to a free time found with ${name}_find_times.`,
        parameters: {
          type: 'object',
          properties: { booking_id: { type: 'string' }, start: LocalTime(`the new start, exactly as ${name}_find_times gave it`) },
          required: ['booking_id', 'start']
        }
      },
      run: guarded(async (args) => {
        const slot = slotAt(args.start)
        const booking = await ownBooking(args)
        try {
          const moved = await backend.reschedule(booking, { start: slot.start, end: new Date(slot.start.getTime() + (booking.end.getTime() - booking.start.getTime())) }, ctx.signal)
          return answer({ rescheduled: described(moved), was: say(booking.start), note: 'Confirm the new day and time to the caller.' })
        } catch (err) {
          if (!(err instanceof SlotTaken)) throw err
          return answer({ rescheduled: null, problem: `${say(slot.start)} was taken by someone else meanwhile; the appointment stays at ${say(booking.start)}.`, free_times: await nearby(slot) })
        }
      })
    },
    {
      type: row.type,
      spec: {
        name: `${name}_cancel`,
        description: `Cancels one of the caller's appointments (found with ${name}_find_booking) once they have confirmed it.`,
        parameters: {
          type: 'object',
          properties: { booking_id: { type: 'string' }, reason: { type: 'string', description: 'why, in the caller\'s words' } },
          required: ['booking_id']
        }
      },
      run: guarded(async (args) => {
        const booking = await ownBooking(args)
        await backend.cancel(booking, typeof args.reason === 'string' ? args.reason.slice(0, 500) : null, ctx.signal)
        return answer({ cancelled: described(booking), note: 'Tell the caller it is cancelled.' })
      })
    }
  ]
  return {
    tools,
    instructions: `${service} (the ${name}_… functions) books appointments. Now it is ${spokenToday(new Date(Date.now()), timeZone, language)} in ${timeZone}; ` +
      'say every time in that zone as the functions\' `spoken` gives it.'
  }
}
