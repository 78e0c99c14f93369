import { Type, type Static } from 'typebox'
import type { Slot } from './backend.ts'
import { localOf, nextDay, weekdayOf, zonedToUtc } from './time.ts'

// Opening hours (per weekday, in the tool's time zone) and the free slots they leave around what is booked: the
// built-in calendar and the two calendar services (which know only busy times) offer these; the booking services
// (Cal.com, Calendly) have availability of their own.

const Clock = Type.String({ pattern: '^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$', description: 'HH:MM, 24-hour (24:00: midnight at the end of the day)' })
const Ranges = Type.Array(Type.Object({ from: Clock, to: Clock }, { additionalProperties: false }), { maxItems: 6 })

export const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const

export const OpeningHours = Type.Object(Object.fromEntries(WEEKDAYS.map((day) => [day, Type.Optional(Ranges)])) as Record<typeof WEEKDAYS[number], Type.TOptional<typeof Ranges>>, {
  additionalProperties: false,
  description: 'when appointments may start and end, per weekday in the tool\'s time zone: { "mon": [{ "from": "09:00", "to": "12:00" }, { "from": "13:00", "to": "17:00" }], … }; a day left out is closed (default Monday to Friday 09:00–17:00)'
})
export type OpeningHours = Static<typeof OpeningHours>

const WORKDAY = [{ from: '09:00', to: '17:00' }]
export const DEFAULT_HOURS: OpeningHours = { mon: WORKDAY, tue: WORKDAY, wed: WORKDAY, thu: WORKDAY, fri: WORKDAY }

/** How the calendar members act when they are unset. */
export const CALENDAR_DEFAULTS = { opening_hours: DEFAULT_HOURS, buffer_minutes: 0, days_ahead: 60, min_notice_minutes: 60 } as const

/** When a booking may start at the earliest (the minimum notice) and end at the latest (days ahead), from `now`. */
export function bookingWindow (settings: { min_notice_minutes?: number, days_ahead?: number }, now = Date.now()): { notBefore: Date, notAfter: Date } {
  return {
    notBefore: new Date(now + (settings.min_notice_minutes ?? CALENDAR_DEFAULTS.min_notice_minutes) * MINUTE),
    notAfter: new Date(now + (settings.days_ahead ?? CALENDAR_DEFAULTS.days_ahead) * 86_400_000)
  }
}

/** The settings members every calendar-like tool shares (the built-in one, Google, Outlook). */
export const CalendarMembers = {
  opening_hours: Type.Optional(OpeningHours),
  buffer_minutes: Type.Optional(Type.Integer({ minimum: 0, maximum: 240, description: 'free time kept before and after every appointment (default 0)' })),
  days_ahead: Type.Optional(Type.Integer({ minimum: 1, maximum: 365, description: 'how far ahead appointments may be booked, in days (default 60)' })),
  min_notice_minutes: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_080, description: 'how soon the earliest appointment may start (default 60)' }))
}

/** What a schema cannot say about opening hours: a range that ends before it starts, or ranges of a day that overlap. */
export function hoursProblem (hours: OpeningHours): string | undefined {
  for (const day of WEEKDAYS) {
    const ranges = [...(hours[day] ?? [])].sort((a, b) => a.from.localeCompare(b.from))
    for (const [n, range] of ranges.entries()) {
      if (range.from >= range.to) return `opening_hours.${day}: ${range.from}–${range.to} ends before it starts`
      if (n > 0 && ranges[n - 1].to > range.from) return `opening_hours.${day}: ${ranges[n - 1].from}–${ranges[n - 1].to} and ${range.from}–${range.to} overlap`
    }
  }
  return undefined
}

const MINUTE = 60_000
/** The most days one search of free slots walks (the model asks for a day or a week). */
export const MAX_SEARCH_DAYS = 31

export interface FreeSlotsQuery {
  from: Date
  to: Date
  hours: OpeningHours
  timeZone: string
  slotMinutes: number
  bufferMinutes: number
  busy: Slot[]
  /** Nothing starts before this (now plus the minimum notice). */
  notBefore: Date
  /** Nothing starts after this (now plus days_ahead). */
  notAfter?: Date
}

/**
 * The slots inside the opening hours between `from` and `to`, one slot length apart from the start of each range, that
 * keep `bufferMinutes` clear of every busy interval. Days are walked in the zone's calendar, so a daylight-saving
 * change moves the instants, not the wall-clock hours.
 */
export function freeSlots (query: FreeSlotsQuery): Slot[] {
  const { timeZone, slotMinutes, bufferMinutes } = query
  const earliest = Math.max(query.from.getTime(), query.notBefore.getTime())
  const latest = Math.min(query.to.getTime(), query.notAfter?.getTime() ?? Infinity)
  const busy = query.busy.map((b) => ({ start: b.start.getTime() - bufferMinutes * MINUTE, end: b.end.getTime() + bufferMinutes * MINUTE }))
  const slots: Slot[] = []
  let day = localOf(query.from, timeZone).slice(0, 10)
  const lastDay = localOf(query.to, timeZone).slice(0, 10)
  for (let n = 0; n <= MAX_SEARCH_DAYS && day <= lastDay; n++, day = nextDay(day)) {
    const noon = zonedToUtc(`${day}T12:00`, timeZone)
    for (const range of query.hours[WEEKDAYS[weekdayOf(noon, timeZone)]] ?? []) {
      const opens = zonedToUtc(`${day}T${range.from}`, timeZone).getTime()
      const closes = range.to === '24:00' ? zonedToUtc(`${nextDay(day)}T00:00`, timeZone).getTime() : zonedToUtc(`${day}T${range.to}`, timeZone).getTime()
      for (let start = opens; start + slotMinutes * MINUTE <= closes; start += slotMinutes * MINUTE) {
        const end = start + slotMinutes * MINUTE
        if (start < earliest || end > latest) continue
        if (busy.some((b) => b.start < end && b.end > start)) continue
        slots.push({ start: new Date(start), end: new Date(end) })
      }
    }
  }
  return slots
}
