import type { OutcomeFilter } from '../calls/queries.ts'
import { formatNumber } from './charts.ts'

// The outcomes that the Analytics page counts and links to, as the Calls list filters by them (docs/console.md,
// "Analytics"): the address's parameters, their check, and words for them.

/** Why calls end (calls.disconnection_reason, as the voice engine, the carriers and the deadline write it), in words. */
// Short enough for a chart's label (24 characters).
const REASONS: Record<string, string> = {
  user_hangup: 'The caller hung up',
  agent_hangup: 'The agent ended it',
  call_transfer: 'Put through to a person',
  inactivity: 'Nobody spoke for long',
  max_duration_reached: 'Reached the longest time',
  voicemail: 'Reached a voicemail',
  fax_detected: 'A fax machine answered',
  no_answer: 'No answer',
  busy: 'The line was busy',
  canceled: 'Cancelled before answer',
  failed: 'The carrier could not call',
  dial_failed: 'Dialling failed',
  invalid_number: 'Not a valid number',
  not_connected: 'Never connected',
  stream_not_connected: 'Audio never connected',
  stream_dropped: 'Audio connection dropped',
  stream_timeout: 'Audio went silent',
  runtime_error: 'An error stopped it',
  protocol_error: 'A connection error',
  server_shutdown: 'The server shut down'
}

/** A disconnection reason in words; one this list does not know (an outside runtime's own) with its underscores as spaces. */
export function reasonWords (reason: string): string {
  const known = REASONS[reason]
  if (known !== undefined) return known
  const words = reason.replaceAll('_', ' ').trim()
  return words === '' ? 'Not recorded' : words.charAt(0).toUpperCase() + words.slice(1)
}

/** The outcome parameters as the address gives them ('' means not set). */
export interface OutcomeParams { task: string, reason: string, transferred: string, wait_from: string, wait_to: string, field: string, value: string }

export const OUTCOME_NAMES = ['task', 'reason', 'transferred', 'wait_from', 'wait_to', 'field', 'value'] as const

const TASKS: Record<string, boolean> = { achieved: true, not_achieved: false }
// An extracted field's name, as agents' data_retrieval names them.
export const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/
const MAX_TEXT = 200
// A wait is whole ms, below about 3 hours.
const WAIT = /^\d{1,7}$/

/**
 * The outcome filter of the address's parameters (undefined when none is set), or the reason it cannot be used.
 * A repeated parameter is refused by the caller with the list's other filters.
 */
export function parseOutcome (params: OutcomeParams): { outcome?: OutcomeFilter, problem?: string } {
  if (OUTCOME_NAMES.every((name) => params[name] === '')) return {}
  const outcome: OutcomeFilter = {}
  if (params.task !== '') {
    if (TASKS[params.task] === undefined) return { problem: 'The task filter must be “achieved” or “not_achieved”.' }
    outcome.taskAchieved = TASKS[params.task]
  }
  if (params.reason !== '') {
    if (params.reason.length > MAX_TEXT) return { problem: `The end reason must be at most ${MAX_TEXT} characters.` }
    outcome.disconnectionReason = params.reason
  }
  if (params.transferred !== '') {
    if (params.transferred !== 'yes') return { problem: 'The transferred filter can only be “yes”.' }
    outcome.transferred = true
  }
  if (params.wait_from !== '' || params.wait_to !== '') {
    if ([params.wait_from, params.wait_to].some((ms) => ms !== '' && !WAIT.test(ms))) return { problem: 'A wait must be a whole number of milliseconds.' }
    const wait = { from: params.wait_from === '' ? undefined : Number(params.wait_from), to: params.wait_to === '' ? undefined : Number(params.wait_to) }
    if (wait.from !== undefined && wait.to !== undefined && wait.to <= wait.from) return { problem: 'The longest wait must be more than the shortest.' }
    outcome.wait = wait
  }
  if (params.field !== '' || params.value !== '') {
    if (!FIELD_NAME.test(params.field)) return { problem: 'An extracted field\'s name has letters, digits and _, not starting with a digit.' }
    if (params.value === '' || params.value.length > MAX_TEXT) return { problem: `Give the extracted field's value (at most ${MAX_TEXT} characters).` }
    outcome.extracted = { name: params.field, value: params.value }
  }
  return { outcome }
}

const ms = (value: number) => `${formatNumber(value)} ms`

/** What an outcome filter keeps, in words, for the list's line above its calls. */
export function outcomeWords (outcome: OutcomeFilter): string {
  const parts: string[] = []
  if (outcome.taskAchieved !== undefined) parts.push(outcome.taskAchieved ? 'the task was achieved' : 'the task was not achieved')
  if (outcome.disconnectionReason !== undefined) parts.push(`ended: ${reasonWords(outcome.disconnectionReason).toLowerCase()}`)
  if (outcome.transferred === true) parts.push('put through to someone else')
  if (outcome.wait !== undefined) {
    const { from, to } = outcome.wait
    parts.push(from !== undefined && to !== undefined
      ? `the caller usually waited ${ms(from)} to ${ms(to)}`
      : from !== undefined ? `the caller usually waited ${ms(from)} or more` : `the caller usually waited less than ${ms(to!)}`)
  }
  if (outcome.extracted !== undefined) parts.push(`${outcome.extracted.name} is “${outcome.extracted.value}”`)
  return parts.join('; ')
}
