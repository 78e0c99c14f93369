// What a booking or calendar service must do for the agent's booking functions (tools.ts): the built-in calendar,
// Google Calendar, Microsoft Graph, Cal.com and Calendly each implement it over their own API.

export interface Slot { start: Date, end: Date }

export interface Attendee { name: string, email: string | null, phone: string | null, notes: string | null }

export interface Booking { id: string, start: Date, end: Date, title: string }

/** The slot was taken meanwhile (between finding it and booking it): the caller is offered others. */
export class SlotTaken extends Error {}

/** A request the service cannot take as it is: the model is told `message` and can put it right (an e-mail it needs). */
export class BookingProblem extends Error {}

export interface BookingBackend {
  /** Free start times between two instants (each slot as long as a booking). */
  slots: (from: Date, to: Date, signal: AbortSignal) => Promise<Slot[]>
  /** Books a slot for the caller; SlotTaken when it is no longer free. */
  book: (slot: Slot, attendee: Attendee, signal: AbortSignal) => Promise<Booking>
  /** The caller's upcoming bookings, found by their e-mail or phone number. */
  find: (who: { email: string | null, phone: string | null }, signal: AbortSignal) => Promise<Booking[]>
  /** Moves one of the caller's bookings (as `find` gave it) to another slot; SlotTaken when that is no longer free. */
  reschedule: (booking: Booking, slot: Slot, signal: AbortSignal) => Promise<Booking>
  cancel: (booking: Booking, reason: string | null, signal: AbortSignal) => Promise<void>
}
