import { Type } from 'typebox'
import { Email } from '../../../http/schemas.ts'
import { announce, bookAppointment, cancelAppointment, localTime, rescheduleAppointment, type Change } from '../../appointments/appointments.ts'
import { bookedBetween, findAppointment, upcomingOf, type AppointmentRow } from '../../appointments/queries.ts'
import { emailAddress, phoneNumber } from '../../contacts/contacts.ts'
import { findCallRow } from '../../calls/queries.ts'
import { BookingProblem, SlotTaken, type Booking, type BookingBackend, type Slot } from '../booking/backend.ts'
import { bookingWindow, CALENDAR_DEFAULTS, CalendarMembers, freeSlots } from '../booking/hours.ts'
import { BOOKING_LABELS, checkHours } from '../booking/settings.ts'
import { bookingTools } from '../booking/tools.ts'
import type { ToolContext } from '../live.ts'
import { defineCapability, type Typed } from '../registry.ts'
import { Description, Minutes, Name, TimeZone } from '../../agents/settings-parts.ts'

// The built-in calendar (docs/appointments.md): the agent's own opening hours, appointments kept in PostgreSQL
// (the appointments module), e-mails with an .ics file to notify_email and the caller. No external account.

const SERVICE = 'the appointment calendar'
const MINUTE = 60_000

export const AppointmentBookingSettings = Type.Object({
  name: Name,
  description: Description,
  time_zone: TimeZone,
  duration_minutes: Minutes(5, 480, 'length of an appointment: free times are offered this far apart from the start of each opening range'),
  ...CalendarMembers,
  notify_email: Type.Optional(Type.Union([Email, Type.Null()], { description: 'told of every booking, move and cancellation (with an .ics file)' }))
})

/** What a stored row leaves out: the defaults the schema describes. */
const DEFAULTS = { ...CALENDAR_DEFAULTS, notify_email: null } as const

const bookingOf = (row: AppointmentRow): Booking => ({ id: row.id, start: row.starts_at, end: row.ends_at, title: `Appointment: ${row.name}` })

/** The built-in calendar of one tool during one call. */
export function appointmentBackend (row: Typed<typeof AppointmentBookingSettings>, ctx: ToolContext): BookingBackend {
  const settings = { ...DEFAULTS, ...row.settings }
  const { time_zone: timeZone, duration_minutes: minutes, buffer_minutes: bufferMinutes } = settings
  const deps = { db: ctx.db, config: ctx.config, log: ctx.log, mailer: ctx.mailer }

  /** The free slots between two instants, leaving out the tool's booked appointments (but `except`, one being moved). */
  async function slots (from: Date, to: Date, except?: string): Promise<Slot[]> {
    // Busy times a buffer before `from` and after `to` still keep slots near the edges clear.
    const booked = await bookedBetween(ctx.db, row.id, new Date(from.getTime() - bufferMinutes * MINUTE), new Date(to.getTime() + bufferMinutes * MINUTE))
    return freeSlots({
      from,
      to,
      hours: settings.opening_hours,
      timeZone,
      slotMinutes: minutes,
      bufferMinutes,
      busy: booked.filter((b) => b.id !== except).map((b) => ({ start: b.starts_at, end: b.ends_at })),
      ...bookingWindow(settings)
    })
  }

  /**
   * A slot the caller chose, checked against the hours, the notice, days_ahead and the booked appointments: SlotTaken
   * when only an appointment stands in its way, else a problem the model can put right. The table's constraint
   * decides the race that remains (two calls booking it at once).
   */
  async function checked (slot: Slot, except?: string): Promise<Slot> {
    const around = { from: slot.start, to: new Date(slot.start.getTime() + minutes * MINUTE) }
    const isIn = (free: Slot[]) => free.some((s) => s.start.getTime() === slot.start.getTime())
    if (isIn(await slots(around.from, around.to, except))) return { start: around.from, end: around.to }
    const open = freeSlots({ ...around, hours: settings.opening_hours, timeZone, slotMinutes: minutes, bufferMinutes: 0, busy: [], ...bookingWindow(settings) })
    if (isIn(open)) throw new SlotTaken(`${localTime(slot.start, timeZone)} is taken`)
    throw new BookingProblem(`${localTime(slot.start, timeZone)} is not a free appointment time (opening hours, at least ${settings.min_notice_minutes} minutes' notice, at most ${settings.days_ahead} days ahead); offer one that ${row.settings.name}_find_times gives`)
  }

  /** E-mails after the answer: a slow mail server never holds the caller. */
  const tell = (appointment: AppointmentRow, change: Change) => {
    announce(deps, appointment, change).catch((err: unknown) => ctx.log.error({ err, appointmentId: appointment.id }, 'the appointment e-mails could not be sent'))
  }

  /** The caller's contact: the call's (its number, a web call's customer_phone or customer_email). */
  const contactOfCall = async () => (await findCallRow(ctx.db, ctx.callId))?.contact_id ?? null

  /** One of the caller's appointments, as `find` answered it (the booking functions check it is theirs). */
  async function own (booking: Booking): Promise<AppointmentRow> {
    const appointment = await findAppointment(ctx.db, ctx.userId, booking.id)
    if (appointment?.tool_id !== row.id || appointment.status !== 'booked') throw new BookingProblem(`the appointment ${booking.id} is no longer booked`)
    return appointment
  }

  return {
    slots: async (from, to) => await slots(from, to),
    async book (slot, attendee) {
      const free = await checked(slot)
      const booked = await bookAppointment(ctx.db, {
        userId: ctx.userId,
        agentId: row.agent_id,
        toolId: row.id,
        callId: ctx.callId,
        start: free.start,
        end: free.end,
        bufferMinutes,
        timeZone,
        name: attendee.name,
        email: attendee.email ?? ctx.customer.email,
        phone: attendee.phone ?? ctx.customer.phone,
        notes: attendee.notes
      })
      if (booked === 'taken') throw new SlotTaken(`${localTime(slot.start, timeZone)} is taken`)
      tell(booked, 'booked')
      return bookingOf(booked)
    },
    async find (who) {
      // Date.now, as everywhere in the booking functions: the one clock they read.
      const rows = await upcomingOf(ctx.db, ctx.userId, row.id, {
        phone: phoneNumber(who.phone) ?? null,
        email: emailAddress(who.email) ?? null,
        contactId: await contactOfCall()
      }, new Date(Date.now()))
      return rows.map(bookingOf)
    },
    async reschedule (booking, slot) {
      const appointment = await own(booking)
      const free = await checked(slot, appointment.id)
      const moved = await rescheduleAppointment(ctx.db, ctx.userId, appointment.id, { start: free.start, end: free.end, bufferMinutes, timeZone })
      if (moved === 'taken') throw new SlotTaken(`${localTime(slot.start, timeZone)} is taken`)
      if (moved === undefined) throw new BookingProblem(`the appointment ${booking.id} is no longer booked`)
      tell(moved, 'moved')
      return bookingOf(moved)
    },
    async cancel (booking, reason) {
      const appointment = await own(booking)
      const cancelled = await cancelAppointment(ctx.db, ctx.userId, appointment.id, reason)
      if (cancelled?.changed === true) tell(cancelled.row, 'cancelled')
    }
  }
}

export const appointmentBooking = defineCapability({
  type: 'appointment_booking',
  label: 'Appointment booking',
  hint: 'Finds free times in its opening hours and books, moves and cancels appointments in a built-in calendar, with e-mails and calendar files. No external account needed.',
  schema: AppointmentBookingSettings,
  defaults: { ...DEFAULTS },
  fieldLabels: { ...BOOKING_LABELS, notify_email: 'Notify e-mail' },
  // No account to connect: only the opening hours need a check the schema cannot make.
  check: async (_ctx, settings) => { checkHours(settings) },
  live: async (row, ctx) => bookingTools(row, ctx, appointmentBackend(row, ctx), SERVICE)
})
