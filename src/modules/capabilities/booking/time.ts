// Wall-clock times in a time zone, without a library: Intl knows every zone's offsets (and their daylight-saving
// changes); these turn a local 'YYYY-MM-DDTHH:mm' into an instant and back, and say an instant the way people do.

const LOCAL = /^(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-4]):([0-5]\d)$/

const partsFormats = new Map<string, Intl.DateTimeFormat>()

/** The zone's wall clock at an instant, as numbers. */
function wallClock (at: Date, timeZone: string): { year: number, month: number, day: number, hour: number, minute: number, weekday: number } {
  let format = partsFormats.get(timeZone)
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', weekday: 'short' })
    partsFormats.set(timeZone, format)
  }
  const parts = Object.fromEntries(format.formatToParts(at).map((part) => [part.type, part.value]))
  return {
    year: Number(parts.year),
    month: Number(parts.month),
    day: Number(parts.day),
    hour: Number(parts.hour),
    minute: Number(parts.minute),
    weekday: ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'].indexOf(parts.weekday)
  }
}

/** The zone's offset from UTC at an instant, in ms. */
function offsetAt (at: number, timeZone: string): number {
  const wall = wallClock(new Date(at), timeZone)
  return Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute) - (at - (at % 60_000))
}

/** Whether `local` is a 'YYYY-MM-DDTHH:mm' wall-clock time. */
export const isLocal = (local: string) => LOCAL.test(local) && !Number.isNaN(Date.parse(`${local.replace('T24:00', 'T00:00')}:00Z`))

/**
 * The instant a wall-clock time names in a zone. Across a change: a time the clocks skip (02:30 when they jump to
 * 03:00) is read with the offset before the change; a time they pass twice is the first of the two.
 */
export function zonedToUtc (local: string, timeZone: string): Date {
  const parts = LOCAL.exec(local)
  if (parts === null || !isLocal(local)) throw new RangeError(`"${local}" is not a local time such as 2026-12-01T14:30`)
  const [year, month, day, hour, minute] = parts.slice(1).map(Number)
  const naive = Date.UTC(year, month - 1, day, hour, minute)
  const before = offsetAt(naive - 86_400_000 / 2, timeZone)
  const after = offsetAt(naive + 86_400_000 / 2, timeZone)
  // Of the offsets around it, the one whose reading gives the same wall clock back (the earlier instant when both do).
  for (const offset of [before, after]) {
    const at = naive - offset
    if (offsetAt(at, timeZone) === offset) return new Date(at)
  }
  return new Date(naive - before)
}

const pad = (n: number) => String(n).padStart(2, '0')

/** The wall-clock time of an instant in a zone: 'YYYY-MM-DDTHH:mm'. */
export function localOf (at: Date, timeZone: string): string {
  const wall = wallClock(at, timeZone)
  return `${wall.year}-${pad(wall.month)}-${pad(wall.day)}T${pad(wall.hour)}:${pad(wall.minute)}`
}

/** The weekday of an instant in a zone: 0 Sunday … 6 Saturday. */
export const weekdayOf = (at: Date, timeZone: string) => wallClock(at, timeZone).weekday

/** The calendar day after a 'YYYY-MM-DD' one. */
export function nextDay (date: string): string {
  const next = new Date(Date.parse(`${date}T00:00:00Z`) + 86_400_000)
  return next.toISOString().slice(0, 10)
}

/** A language tag Intl knows, else English. */
function known (language: string): string {
  try {
    return Intl.DateTimeFormat.supportedLocalesOf([language]).length > 0 ? language : 'en'
  } catch {
    return 'en'
  }
}

/** An instant as people say it in the agent's language: "Tuesday, December 1 at 2:30 PM". */
export function spoken (at: Date, timeZone: string, language: string): string {
  return new Intl.DateTimeFormat(known(language), { timeZone, weekday: 'long', month: 'long', day: 'numeric', hour: 'numeric', minute: '2-digit' }).format(at)
}

/** Today as people say it, with the time: the model reads it to understand "tomorrow" or "next Tuesday". */
export function spokenToday (at: Date, timeZone: string, language: string): string {
  return new Intl.DateTimeFormat(known(language), { timeZone, weekday: 'long', year: 'numeric', month: 'long', day: 'numeric', hour: 'numeric', minute: '2-digit' }).format(at)
}
