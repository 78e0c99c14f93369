import { Type } from 'typebox'
import { DAY_MS, type DateRange } from '../db/days.ts'
import { badRequest } from './errors.ts'

export type { DateRange }

const DAY = /^\d{4}-\d{2}-\d{2}$/
const Day = (description: string) => Type.String({ pattern: DAY.source, description: `${description}, YYYY-MM-DD (UTC day)` })

/** `date_from` and `date_to`, both required; `date_to` includes its whole day. */
export const DateRangeQuery = {
  date_from: Day('first day'),
  date_to: Day('last day, included')
}

/** The longest range a daily series answers, so that one request cannot ask for millions of rows. */
export const MAX_RANGE_DAYS = 3660

/**
 * Midnight UTC of a calendar day written YYYY-MM-DD, or undefined for anything else: 2026-13-01, 2026-02-30
 * and 9999-99-99 match the pattern but are no day. Year 0 is a calendar date to JavaScript but not to
 * PostgreSQL (there is no year 0 AD): days start at 0001-01-01.
 */
export function calendarDay (value: string): Date | undefined {
  if (!DAY.test(value)) return undefined
  const date = new Date(`${value}T00:00:00Z`)
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === value && date.getUTCFullYear() >= 1 ? date : undefined
}

function day (value: string, name: string): Date {
  const date = calendarDay(value)
  if (date === undefined) throw badRequest(`query.${name} ${value} is not a calendar date from 0001-01-01`)
  return date
}

/** `date_from` and `date_to` where both are optional (listings). */
export const OptionalDateRangeQuery = {
  date_from: Type.Optional(DateRangeQuery.date_from),
  date_to: Type.Optional(DateRangeQuery.date_to)
}

/** An open-ended range: either end may be missing. */
export function optionalDateRange (query: { date_from?: string, date_to?: string }): { from?: Date, until?: Date } {
  const from = query.date_from === undefined ? undefined : day(query.date_from, 'date_from')
  const to = query.date_to === undefined ? undefined : day(query.date_to, 'date_to')
  if (from !== undefined && to !== undefined && to < from) throw badRequest('query.date_to must not be before query.date_from')
  return { from, until: to === undefined ? undefined : new Date(to.getTime() + DAY_MS) }
}

/** Checks a validated date range query: real calendar days, in order, not longer than MAX_RANGE_DAYS. */
export function dateRange (query: { date_from: string, date_to: string }): DateRange {
  const from = day(query.date_from, 'date_from')
  const to = day(query.date_to, 'date_to')
  if (to < from) throw badRequest('query.date_to must not be before query.date_from')
  if ((to.getTime() - from.getTime()) / DAY_MS + 1 > MAX_RANGE_DAYS) {
    throw badRequest(`the range from date_from to date_to must not exceed ${MAX_RANGE_DAYS} days`)
  }
  return { from, until: new Date(to.getTime() + DAY_MS), dateFrom: query.date_from, dateTo: query.date_to }
}
