import type { AjvIssue } from '../../http/errors.ts'
import { hoursProblem, OpeningHours, WEEKDAYS } from '../capabilities/booking/hours.ts'
import { validatorOf } from '../capabilities/registry.ts'
import { problemOf } from './forms.ts'

// Opening hours in a tool's form (the built-in calendar, Google Calendar, Outlook): one line per open day, as people
// write them ("Mon 09:00-12:00, 13:00-17:00"), read back into the settings' { mon: [{ from, to }] } and checked
// with the API's schema and rules, each problem naming its line.

/** Monday first, as a week is read; the schema's own order starts on Sunday. */
const ORDER = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const
const NAMES: Record<typeof WEEKDAYS[number], string> = { mon: 'Mon', tue: 'Tue', wed: 'Wed', thu: 'Thu', fri: 'Fri', sat: 'Sat', sun: 'Sun' }
const FULL: Record<typeof WEEKDAYS[number], string> = { mon: 'Monday', tue: 'Tuesday', wed: 'Wednesday', thu: 'Thursday', fri: 'Friday', sat: 'Saturday', sun: 'Sunday' }

export const HOURS_HINT = 'One line per open day: the day and its times in the tool\'s time zone, such as “Mon 09:00-12:00, 13:00-17:00” ' +
  '(24:00 is midnight at the end of the day). Days not listed are closed. Empty: Monday to Friday 09:00-17:00.'

/** Stored hours as the textarea shows them. */
export function hoursText (hours: unknown): string {
  if (hours === undefined || hours === null || typeof hours !== 'object') return ''
  const days = hours as Record<string, Array<{ from: string, to: string }> | undefined>
  return ORDER.filter((day) => (days[day]?.length ?? 0) > 0)
    .map((day) => `${NAMES[day]} ${days[day]!.map((range) => `${range.from}-${range.to}`).join(', ')}`).join('\n')
}

/** The day a line starts with: "Mon", "monday", "Mo." … */
function dayOf (word: string): typeof WEEKDAYS[number] | undefined {
  const text = word.toLowerCase().replace(/\.$/, '')
  return ORDER.find((day) => text.length >= 2 && FULL[day].toLowerCase().startsWith(text))
}

const RANGE = /^(\d{1,2}):?(\d{2})\s*(?:-|–|—|to)\s*(\d{1,2}):?(\d{2})$/

/** A day's ranges as the schema has them: how many it takes, and a time of day (24:00: midnight at the end of the day). */
const DAY_SCHEMA = OpeningHours.properties.mon as unknown as { maxItems: number, items: { properties: { from: { pattern: string } } } }
const MAX_RANGES = DAY_SCHEMA.maxItems
const CLOCK = new RegExp(DAY_SCHEMA.items.properties.from.pattern)

/** "9:00" → "09:00". */
const clock = (hours: string, minutes: string) => `${hours.padStart(2, '0')}:${minutes}`

/**
 * The textarea's hours as settings: null when empty (the default hours), or the problem to show under it. A day
 * may be given once; each of its ranges must be a time range that the schema and the API's rules accept.
 */
export function readHours (text: string): { value?: OpeningHours | null, problem?: string } {
  const lines = text.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== '')
  if (lines.length === 0) return { value: null }
  const hours: Record<string, Array<{ from: string, to: string }>> = {}
  for (const [n, line] of lines.entries()) {
    const where = `Line ${n + 1} of the opening hours (“${line.length > 40 ? `${line.slice(0, 39)}…` : line}”)`
    const [word, ...rest] = line.split(/\s+/)
    const day = dayOf(word)
    if (day === undefined) return { problem: `${where} must start with a day such as Mon, Tue … Sun.` }
    if (hours[day] !== undefined) return { problem: `${where}: ${FULL[day]} is given twice; put all its times on one line, separated by commas.` }
    const ranges = rest.join(' ').split(',').map((range) => range.trim()).filter((range) => range !== '')
    if (ranges.length === 0) return { problem: `${where} gives no times: write them after the day, such as ${NAMES[day]} 09:00-17:00, or leave the day out to close it.` }
    if (ranges.length > MAX_RANGES) return { problem: `${where} has ${ranges.length} time ranges; a day has at most ${MAX_RANGES}.` }
    hours[day] = []
    for (const range of ranges) {
      const parts = RANGE.exec(range)
      if (parts === null) return { problem: `${where}: “${range}” is not a time range such as 09:00-12:00.` }
      const [from, to] = [clock(parts[1], parts[2]), clock(parts[3], parts[4])]
      const wrong = [from, to].find((time) => !CLOCK.test(time))
      if (wrong !== undefined) return { problem: `${where}: ${wrong} is not a time of day (00:00 to 24:00).` }
      hours[day].push({ from, to })
    }
  }
  // What the checks above let through is what the schema takes; its own words are the last resort.
  const validate = validatorOf(OpeningHours)
  if (!validate(hours)) return { problem: problemOf('Opening hours', validate.errors![0] as AjvIssue) }
  const problem = hoursProblem(hours)
  if (problem !== undefined) {
    const [, day, rest] = /^opening_hours\.([a-z]{3}): (.*)$/.exec(problem) ?? [undefined, undefined, problem]
    return { problem: `${day === undefined ? 'The opening hours' : `The opening hours of ${FULL[day as typeof WEEKDAYS[number]]}`}: ${rest}.` }
  }
  return { value: hours }
}
