// Calendar days (UTC) as queries sum them; http/dates.ts reads them from requests.

export const DAY_MS = 86_400_000

export interface DateRange {
  /** Midnight UTC of date_from. */
  from: Date
  /** Midnight UTC of the day after date_to. */
  until: Date
  dateFrom: string
  dateTo: string
}

/** Every UTC day of the range, YYYY-MM-DD. */
export function rangeDays (range: DateRange): string[] {
  const days: string[] = []
  for (let at = range.from.getTime(); at < range.until.getTime(); at += DAY_MS) days.push(new Date(at).toISOString().slice(0, 10))
  return days
}
