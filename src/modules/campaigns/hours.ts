import type { CallingHours } from '../../db/schema.ts'
import { PREFIXES, ZONES } from './timezone-data.ts'

// A contact's time zone and whether it may be called now (docs/campaigns.md, "Calling hours").

/** E.164: a plus, then 7 to 15 digits, the first not 0. */
const E164 = /^\+[1-9]\d{6,14}$/

/** A number as written in a list ("+1 (415) 555-0100") in E.164, or undefined when it is none. */
export function normalisePhone (text: string): string | undefined {
  const compact = text.trim().replace(/[\s().\-/]/g, '')
  const e164 = compact.startsWith('00') ? `+${compact.slice(2)}` : compact
  return E164.test(e164) ? e164 : undefined
}

let prefixes: Map<string, string> | undefined

/** The zone of an E.164 number from its country and area (libphonenumber's table, longest prefix), if known. */
export function zoneOfNumber (e164: string): string | undefined {
  prefixes ??= new Map(PREFIXES.split(',').map((entry) => {
    const [prefix, zone] = entry.split(':')
    return [prefix, ZONES[parseInt(zone, 36)]]
  }))
  const digits = e164.slice(1)
  for (let n = Math.min(digits.length, 10); n > 0; n--) {
    const zone = prefixes.get(digits.slice(0, n))
    if (zone !== undefined) return zone
  }
  return undefined
}

const formats = new Map<string, Intl.DateTimeFormat>()

/** A formatter of the zone's weekday and time; undefined for a name that is not an IANA zone. */
function formatIn (zone: string): Intl.DateTimeFormat | undefined {
  let format = formats.get(zone)
  if (format === undefined) {
    try {
      format = new Intl.DateTimeFormat('en-US', { timeZone: zone, weekday: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })
    } catch {
      return undefined
    }
    formats.set(zone, format)
  }
  return format
}

/** The IANA zone's canonical spelling (`europe/berlin` → `Europe/Berlin`), or undefined when there is none such. */
export function knownZone (zone: string): string | undefined {
  return formatIn(zone)?.resolvedOptions().timeZone
}

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const

/** Calling hours when a campaign names none: weekdays 09:00 to 18:00. */
export const DEFAULT_CALLING_HOURS: CallingHours = Object.fromEntries(WEEKDAYS.slice(0, 5).map((day) => [day, [{ start: '09:00', end: '18:00' }]]))

/** The calling windows are open at `now` in the zone. */
export function withinHours (hours: CallingHours, zone: string, now: Date): boolean {
  const parts = formatIn(zone)?.formatToParts(now)
  if (parts === undefined) return false
  const part = (type: string) => parts.find((p) => p.type === type)?.value ?? ''
  const day = part('weekday').toLowerCase().slice(0, 3) as typeof WEEKDAYS[number]
  const time = `${part('hour')}:${part('minute')}`
  return (hours[day] ?? []).some((window) => window.start <= time && time < window.end)
}
