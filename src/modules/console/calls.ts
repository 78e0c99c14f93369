import { readFileSync } from 'node:fs'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Type, type Static } from 'typebox'
import type { ConcurrencyLimits } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { calendarDay, optionalDateRange } from '../../http/dates.ts'
import { sendCallDetailsCsv } from '../calls/export.ts'
import { callFigures, countCalls, findCallJson, listCallsJson, type CallFilter, type CallSearch, type OutcomeFilter } from '../calls/queries.ts'
import { findRecording, sendRecording } from '../calls/recordings.ts'
import type { CallDetail, CallListItem } from '../calls/schemas.ts'
import { listDeliveries, type DeliveryRow } from '../deliveries/queries.ts'
import { findContact, type ContactRow } from '../contacts/queries.ts'
import { contactLabel } from './contacts.ts'
import { listMessages, type MessageRow } from '../messaging/queries.ts'
import { deliveryKind, messagesTable } from './messages.ts'
import { formatNumber } from './charts.ts'
import { filterBar, filterField, filterSelect, pager } from './components.ts'
import { notADay } from './fields.ts'
import { FIELD_NAME, OUTCOME_NAMES, outcomeWords, parseOutcome, type OutcomeParams } from './outcomes.ts'
import { html, type SafeHtml } from './html.ts'
import { layout, messagePage, notice, viewerOf, when, type Viewer } from './pages.ts'
import { filterAgents, inScope, viewScope, type Scope } from './scope.ts'
import { ID, idParams, listFilter, page, sendPage, text, withChosen } from './reply.ts'

type ListItem = Static<typeof CallListItem>
type Detail = Static<typeof CallDetail>

export const PAGE_SIZE = 50
// A search counts its calls up to this many ("more than"): a phrase is checked call by call, 0.3 s for 10,000 (npm run
// bench:calls-search). Without a search the daily rollups count them all.
export const COUNT_CAP = 1000
// Extracted fields shown as columns at once, and the longest search.
const MAX_COLUMNS = 5
const MAX_SEARCH = 200

const STATUSES = ['started', 'pending', 'success', 'failed']
const TYPES = ['phone', 'web']
const DIRECTIONS = ['inbound', 'outbound']
// A search of digits, spaces and phone punctuation is a number when it has this many digits.
const NUMBER_SHAPED = /^[+\d\s().-]+$/
const MIN_DIGITS = 3

/**
 * The list's filters as the form sends them ('' means any), the chosen extracted-field columns, and the keyset
 * page: the calls older than `before`, or newer than `after` (a call's id each).
 */
interface Filters extends OutcomeParams { q: string, agent: string, status: string, type: string, direction: string, from: string, to: string, column: string[], before: string, after: string }

// The outcomes the Analytics page links to (outcomes.ts) come last: the bar has no controls for them.
const FILTER_NAMES = ['q', 'agent', 'status', 'type', 'direction', 'from', 'to', ...OUTCOME_NAMES] as const

/** What the search box finds (calls/queries.ts, CallSearch): an id, a number's digits, or words of the transcript. */
export function callSearch (q: string): CallSearch | undefined {
  if (q === '') return undefined
  if (ID.test(q)) return { id: q.toLowerCase() }
  const digits = q.replace(/\D/g, '')
  if (NUMBER_SHAPED.test(q) && digits.length >= MIN_DIGITS) return { digits }
  return { words: q }
}

/** The query's filters, or the reason they cannot be used (shown on the page). */
function parseFilters (query: Record<string, unknown>): { filters: Filters, outcome?: OutcomeFilter, problem?: string } {
  const text = (name: string) => typeof query[name] === 'string' ? (query[name] as string).trim() : ''
  const columns = query.column === undefined ? [] : [query.column].flat()
  const filters: Filters = {
    q: text('q'), agent: text('agent').toLowerCase(), status: text('status'), type: text('type'), direction: text('direction'), from: text('from'), to: text('to'),
    column: [...new Set(columns.filter((name): name is string => typeof name === 'string' && FIELD_NAME.test(name)))],
    before: text('before').toLowerCase(), after: text('after').toLowerCase(),
    // A reason or a value is matched as stored, spaces included.
    ...Object.fromEntries(OUTCOME_NAMES.map((name) => [name, name === 'reason' || name === 'value' ? String(query[name] ?? '') : text(name)])) as unknown as OutcomeParams
  }
  const problem = (message: string) => ({ filters, problem: message })
  const repeated = [...FILTER_NAMES, 'before', 'after'].find((name) => query[name] !== undefined && typeof query[name] !== 'string')
  if (repeated !== undefined) return problem(`The filter “${repeated}” was given more than once.`)
  if (filters.q.length > MAX_SEARCH) return problem(`The search must be at most ${MAX_SEARCH} characters.`)
  if (filters.agent !== '' && !ID.test(filters.agent)) return problem('That agent is not a valid agent id.')
  if (filters.status !== '' && !STATUSES.includes(filters.status)) return problem(`The status must be one of ${STATUSES.join(', ')}.`)
  if (filters.type !== '' && !TYPES.includes(filters.type)) return problem(`The type must be one of ${TYPES.join(', ')}.`)
  if (filters.direction !== '' && !DIRECTIONS.includes(filters.direction)) return problem(`The direction must be one of ${DIRECTIONS.join(', ')}.`)
  const from = calendarDay(filters.from)
  const to = calendarDay(filters.to)
  if (filters.from !== '' && from === undefined) return problem(notADay('From'))
  if (filters.to !== '' && to === undefined) return problem(notADay('To'))
  if (from !== undefined && to !== undefined && to < from) return problem('“To” must not be before “from”.')
  if (columns.length !== filters.column.length && columns.some((name) => typeof name !== 'string' || !FIELD_NAME.test(name))) {
    return problem('A column must be an extracted field\'s name: letters, digits and _, not starting with a digit.')
  }
  if (filters.column.length > MAX_COLUMNS) return problem(`Choose at most ${MAX_COLUMNS} extracted fields as columns.`)
  for (const name of ['before', 'after'] as const) if (filters[name] !== '' && !ID.test(filters[name])) return problem('The page position must be a call id.')
  if (filters.before !== '' && filters.after !== '') return problem('A page is either before or after a call, not both.')
  const { outcome, problem: outcomeProblem } = parseOutcome(filters)
  return outcomeProblem === undefined ? { filters, outcome } : problem(outcomeProblem)
}

/** The call filter and day range of valid filters, in the scope (the list, its total and its export). */
function callFilterOf (filters: Filters, outcome: OutcomeFilter | undefined, scope: Scope): { filter: CallFilter, range: { from?: Date, until?: Date } } {
  return {
    filter: {
      agentIds: filters.agent === '' ? undefined : [filters.agent],
      callStatus: filters.status === '' ? undefined : [filters.status],
      callType: filters.type === '' ? undefined : [filters.type],
      direction: filters.direction === '' ? undefined : [filters.direction],
      workspaceId: scope.workspaceId,
      search: callSearch(filters.q),
      outcome
    },
    range: optionalDateRange({ date_from: filters.from || undefined, date_to: filters.to || undefined })
  }
}

/** The query string of the filters and columns, plus a page position. */
function filterQuery (filters: Filters, page: { before?: string, after?: string } = {}): string {
  const params = new URLSearchParams()
  for (const name of FILTER_NAMES) if (filters[name] !== '') params.set(name, filters[name])
  for (const name of filters.column) params.append('column', name)
  if (page.before !== undefined) params.set('before', page.before)
  if (page.after !== undefined) params.set('after', page.after)
  const query = params.toString()
  return query === '' ? '' : `?${query}`
}

// Rewrites every <time datetime> of a page to the viewer's time zone (pages.ts, when(); the layout links it).
const LOCAL_TIME = readFileSync(new URL('./static/local-time.js', import.meta.url))
// Seeks the call page's recording to a transcript line and marks the line being heard.
const CALL_PAGE = readFileSync(new URL('./static/call-page.js', import.meta.url))

/** A call's time, to the second (calls a few seconds apart tell apart). */
const callTime = (epochMs: number | null) => when(epochMs, { none: '—', seconds: true })

/** m:ss, or h:mm:ss from an hour. */
export function duration (ms: number | null): string {
  if (ms === null) return '—'
  const total = Math.round(ms / 1000)
  const [h, m, s] = [Math.floor(total / 3600), Math.floor(total / 60) % 60, total % 60]
  const pad = (n: number) => String(n).padStart(2, '0')
  return h > 0 ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`
}

const capital = (text: string) => text.charAt(0).toUpperCase() + text.slice(1)

/** What a call's status and end mean, in words (DESIGN.md, "Call lifecycle"; the engines' disconnection reasons). */
const STATUS_WORDS: Record<string, string> = { started: 'In progress', pending: 'Ended, being analysed', success: 'Success', failed: 'Failed' }
const REASON_WORDS: Record<string, string> = {
  user_hangup: 'The caller hung up',
  agent_hangup: 'The agent ended the call',
  hangup: 'Hung up',
  call_hangup: 'Hung up',
  call_transfer: 'Transferred',
  inactivity: 'Nobody spoke for too long',
  max_duration_reached: 'The call reached its longest duration',
  voicemail: 'Reached voicemail',
  busy: 'The line was busy',
  no_answer: 'Nobody answered',
  dial_failed: 'The number could not be called',
  not_connected: 'The call never connected',
  stream_not_connected: 'The call\'s audio never connected',
  stream_timeout: 'The call\'s audio stopped',
  error: 'An error ended the call'
}
/** A reason this page does not know yet still reads as words: `some_reason` → "Some reason". */
const inWords = (words: Record<string, string>, value: string) => words[value] ?? capital(value.replaceAll('_', ' '))

const choices = (values: string[]) => values.map((value) => ({ value, label: capital(value) }))

interface ListedCall extends ListItem { duration_ms: number | null, credits: number, extracted: Record<string, unknown> }

/** The list's page: which calls, the total, and whether newer and older pages exist. */
interface ListPage { calls: ListedCall[], total: number, newer: boolean, older: boolean }

const valueText = (value: unknown) => typeof value === 'string' ? value : JSON.stringify(value)

function callsPage (options: { viewer: Viewer, filters: Filters, outcome?: OutcomeFilter, agents: Array<{ id: string, name: string }>, fields: string[], list?: ListPage, error?: string }): string {
  const { viewer, filters, agents, list, outcome } = options
  const agentOptions = withChosen(agents, filters.agent)
  const fields = [...new Set([...options.fields, ...filters.column])]
  const calls = list?.calls
  return layout({
    title: 'Calls',
    viewer,
    current: '/calls',
    body: html`
${filterBar({
  action: '/calls',
  label: 'Filter calls',
  submit: 'Show calls',
  fields: [
    filterField('q', 'Search', html`<input id="q" name="q" type="search" value="${filters.q}" maxlength="${MAX_SEARCH}" placeholder="Number, call id or words" aria-describedby="q-hint">`),
    filterField('agent', 'Agent', filterSelect('agent', 'Any agent', agentOptions.map((agent) => ({ value: agent.id, label: agent.name })), filters.agent)),
    filterField('status', 'Status', filterSelect('status', 'Any', choices(STATUSES), filters.status)),
    filterField('type', 'Type', filterSelect('type', 'Any', choices(TYPES), filters.type)),
    filterField('direction', 'Direction', filterSelect('direction', 'Any', choices(DIRECTIONS), filters.direction)),
    filterField('from', 'From (UTC day)', html`<input id="from" name="from" type="date" value="${filters.from}">`),
    filterField('to', 'To (UTC day)', html`<input id="to" name="to" type="date" value="${filters.to}">`),
    fields.length > 0 && html`<details class="columns"><summary>Columns</summary><fieldset><legend>Extracted fields to show</legend>${fields.map((name) =>
      html`<label><input type="checkbox" name="column" value="${name}"${filters.column.includes(name) && html` checked`}> ${name}</label>`)}</fieldset></details>`,
    ...OUTCOME_NAMES.filter((name) => filters[name] !== '').map((name) => html`<input type="hidden" name="${name}" value="${filters[name]}">`)
  ].filter((item) => item !== false),
  hint: html`<p id="q-hint" class="hint">Search: a call id, 3 or more digits of a number, or words said (“a phrase”, -without).</p>`
})}
${options.error !== undefined && notice('error', options.error)}
${outcome !== undefined && html`<p class="outcome-filter">Only calls where ${outcomeWords(outcome)}. <a href="/calls${filterQuery({ ...filters, ...Object.fromEntries(OUTCOME_NAMES.map((name) => [name, ''])) })}">Show every call</a></p>`}
${list !== undefined && html`<p class="list-total"><strong>${list.total > COUNT_CAP && (filters.q !== '' || outcome !== undefined) ? `More than ${formatNumber(COUNT_CAP)} calls` : `${formatNumber(list.total)} ${list.total === 1 ? 'call' : 'calls'}`}</strong>${
  list.total > 0 && html` · <a href="/calls/export.csv${filterQuery({ ...filters, column: [] })}" download>Export these calls (CSV)</a>`}</p>`}
${calls !== undefined && (calls.length === 0
  ? html`<p>${filters.before !== '' || filters.after !== '' ? html`No more calls. <a href="/calls${filterQuery(filters)}">The newest calls</a>` : 'No calls match.'}</p>`
  : html`<div class="table"><table class="calls-list">
  <caption>Calls, newest first</caption>
  <thead><tr><th scope="col">Started</th><th scope="col">From</th><th scope="col">To</th><th scope="col">Agent</th><th scope="col">Type</th><th scope="col">Status</th><th scope="col">Duration</th><th scope="col">Sentiment</th><th scope="col" class="number">Credits</th>${
    filters.column.map((name) => html`<th scope="col">${name}</th>`)}</tr></thead>
  <tbody>${calls.map((call) => html`<tr>
    <td><a href="/calls/${call._id}">${callTime(call.start_timestamp)}</a></td>
    <td>${call.call_from ?? '—'}</td>
    <td>${call.call_to ?? '—'}</td>
    <td>${call.agent_name}</td>
    <td>${capital(call.call_type)}, ${call.direction}</td>
    <td>${inWords(STATUS_WORDS, call.call_status)}</td>
    <td>${duration(call.duration_ms)}</td>
    <td>${call.sentiment === null ? '—' : capital(call.sentiment.sentiment)}</td>
    <td class="number">${call.credits}</td>${filters.column.map((name) => html`
    <td>${call.extracted[name] === undefined || call.extracted[name] === null ? '—' : valueText(call.extracted[name])}</td>`)}
  </tr>`)}</tbody>
</table></div>`)}
${calls !== undefined && calls.length > 0 && pager({
  label: 'Pages of calls',
  first: list!.newer ? { href: `/calls${filterQuery(filters)}`, text: 'Newest calls' } : undefined,
  previous: list!.newer ? { href: `/calls${filterQuery(filters, { after: calls[0]._id })}`, text: 'Newer calls' } : undefined,
  next: list!.older ? { href: `/calls${filterQuery(filters, { before: calls[calls.length - 1]._id })}`, text: 'Older calls' } : undefined
})}
`
  })
}

const ms = (value: number | null) => value === null ? '—' : `${formatNumber(Math.round(value))} ms`

// The stages of a turn as the latency table shows them, in the order they happen.
const LATENCY_COLUMNS = [
  { label: 'End of turn', turn: 'end_of_turn_ms', stat: 'end_of_turn' },
  { label: 'Transcription', turn: 'transcription_ms', stat: 'transcription' },
  { label: 'Model', turn: 'llm_ms', stat: 'llm' },
  { label: 'Speech', turn: 'tts_ms', stat: 'tts' },
  { label: 'Caller waited', turn: 'e2e_ms', stat: 'e2e' }
] as const

/** Each answered turn's times and the call's p50 and p90 per stage; nothing for a call without timed turns. */
function latencySection (latency: Detail['latency'], start: number): SafeHtml | false {
  if (latency === null) return false
  const percentileRow = (name: 'p50' | 'p90') => html`<tr><th scope="row">${name}</th>${LATENCY_COLUMNS.map((column) =>
    html`<td class="number">${ms(latency[column.stat]?.[name] ?? null)}</td>`)}</tr>`
  return html`<h2>Latency</h2>
<p>Caller waited: <strong>${ms(latency.e2e.p50)}</strong> p50, <strong>${ms(latency.e2e.p90)}</strong> p90 over ${latency.e2e.num} ${latency.e2e.num === 1 ? 'turn' : 'turns'}.</p>
<div class="table"><table>
  <caption>Each answered turn, from the end of the caller's speech</caption>
  <thead><tr><th scope="col">Turn</th>${LATENCY_COLUMNS.map((column) => html`<th scope="col" class="number">${column.label}</th>`)}</tr></thead>
  <tbody>${latency.turns.map((turn, i) => html`<tr><th scope="row">${i + 1} <span class="hint">${duration(Math.max(0, turn.at - start))}</span></th>${
    LATENCY_COLUMNS.map((column) => html`<td class="number">${ms(turn[column.turn])}</td>`)}</tr>`)}</tbody>
  <tfoot>${percentileRow('p50')}${percentileRow('p90')}</tfoot>
</table></div>
<p class="hint">End of turn: the caller stopped speaking until the agent decided the turn was over. Transcription: until the turn's last words. Model: from its request to its first token. Speech: from the answer's first text to its first audio. Caller waited: from the end of the caller's speech to the agent's first audio. A dash: the call's providers have no such stage (a realtime model hears and speaks itself).</p>`
}

const speakers: Record<string, string> = { agent: 'Agent', user: 'Caller' }

/**
 * Each transcript line's place in the call: seconds from `start` (the recording's start when there is one, so
 * that a line seeks the player to it). `turn`: the timings of the caller's turn this agent line answers.
 */
interface Line { item: Detail['transcription'][number], at: number, turn?: NonNullable<Detail['latency']>['turns'][number] }

/** Pairs each timed turn with the first agent line said at or after the end of the caller's speech. */
function linesOf (call: Detail, start: number): Line[] {
  const turns = [...(call.latency?.turns ?? [])].sort((a, b) => a.at - b.at)
  let next = 0
  return call.transcription.map((item) => {
    const line: Line = { item, at: Math.max(0, (item.timestamp - start) / 1000) }
    if (item.speaker !== 'agent') return line
    while (next + 1 < turns.length && turns[next + 1].at <= item.timestamp) next++
    if (next < turns.length && turns[next].at <= item.timestamp) line.turn = turns[next++]
    return line
  })
}

/** What the caller waited for an answer, the stages that made it up (those the call's providers have), and whether the caller cut it off. */
function turnTimes (turn: NonNullable<Line['turn']>): SafeHtml {
  const stages = LATENCY_COLUMNS.filter((column) => column.stat !== 'e2e' && turn[column.turn] !== null)
    .map((column) => `${column.label.toLowerCase()} ${ms(turn[column.turn])}`)
  return html` <span class="turn-time">Answered in ${ms(turn.e2e_ms)}${stages.length > 0 && ` (${stages.join(', ')})`}${turn.interrupted === true && '; the caller cut it off'}</span>`
}

function transcriptLine ({ item, at, turn }: Line, seekable: boolean): SafeHtml {
  // The script (static/call-page.js) makes a line with data-at seek the recording there.
  const attrs = (className?: string) => html`${className !== undefined && html` class="${className}"`}${seekable && html` data-at="${at.toFixed(2)}"`}`
  const offset = html`<span class="at">${duration(at * 1000)}</span>`
  if (item.speaker === 'tool' && item.tool !== undefined) {
    const { tool } = item
    return html`<li${attrs('tool')}>${offset} <strong>Tool</strong> <code>${tool.name}</code> (${tool.type}): arguments <code>${tool.arguments}</code>${
      tool.output !== undefined && html`; answered <code>${tool.output}</code>`}${tool.error !== undefined && html`; failed: ${tool.error}`}</li>`
  }
  if (item.speaker === 'step') return html`<li${attrs('step')}>${offset} <strong>Workflow step:</strong> ${item.step?.name ?? item.content}</li>`
  return html`<li${attrs(item.speaker)}>${offset} <strong>${speakers[item.speaker] ?? capital(item.speaker)}:</strong> ${item.content}${turn !== undefined && turnTimes(turn)}</li>`
}

function lastAttempt (row: DeliveryRow) {
  const attempts = row.attempts ?? []
  const last = attempts[attempts.length - 1]
  if (last === undefined) return '—'
  return html`${callTime(Date.parse(last.at))}${last.status_code !== undefined && html` (HTTP ${last.status_code})`}${last.error !== undefined && html` ${last.error}`}`
}

/** Why a callback was cancelled or failed, in words (calls/phone-calls.ts). */
const CALLBACK_REASONS: Record<string, string> = {
  called_back: 'the person called back',
  agent_deleted: 'the agent was deleted',
  agent_inactive: 'the agent is inactive',
  callbacks_disabled: 'callbacks were turned off',
  max_attempts_lowered: 'fewer callbacks are allowed now',
  do_not_call: 'the number is on the do-not-call list',
  number_gone: 'the calling number is no longer the account\'s',
  sip_not_connected: 'the calling number\'s SIP trunk is not carried here',
  no_credits: 'no credits left'
}

/** The callbacks of the call's chain (the call's own, or those of the call it calls back), one line each. */
function callbacksSection (call: Detail): SafeHtml | false {
  if (call.callbacks.length === 0) return false
  const line = (callback: Detail['callbacks'][number]) => {
    const attempt = `(attempt ${callback.attempt} of ${callback.max_attempts})`
    if (callback.status === 'scheduled') return html`Callback scheduled for ${callTime(callback.scheduled_at)} ${attempt}`
    if (callback.status === 'placed') {
      const placed = callback.call_id === call._id ? html`this call` : html`<a href="/calls/${callback.call_id ?? ''}">its call</a>`
      return html`Callback placed ${attempt}: ${placed}`
    }
    return html`Callback ${callback.status}: ${CALLBACK_REASONS[callback.reason ?? ''] ?? callback.reason ?? ''} ${attempt}`
  }
  return html`<h2>Callbacks</h2>
<ul>${call.callbacks.map((callback) => html`<li>${line(callback)}</li>`)}</ul>
<p class="hint">The agent's call-back settings call the person again when an outbound call does not connect; a call from them cancels what is scheduled.</p>`
}

const creditsOf = ({ call_credits_details: c }: Detail) => c.phone_call_credits + c.web_call_credits + c.text_message_credits + c.call_forwarding_credits

/** A recording of the call: its count of tracks, and its length (ms). */
interface CallRecording { channels: 1 | 2, durationMs: number }

/**
 * Where the call's usage went, per provider or kind, with the credits charged for it: the minutes and messages
 * (charged at the installation's prices), and the model's tokens and the speech seconds (the providers' usage,
 * which the minute price includes).
 */
function costSection (call: Detail): SafeHtml {
  const credits = call.call_credits_details
  const minutes = Math.ceil((call.duration_ms ?? 0) / 60_000)
  const count = (n: number, one: string, many: string) => `${formatNumber(n)} ${n === 1 ? one : many}`
  const included = 'included'
  const rows: Array<{ what: SafeHtml | string, usage: string, credits: number | string }> = [
    { what: call.call_type === 'phone' ? 'Phone line (carrier)' : 'Web call', usage: count(minutes, 'started minute', 'started minutes'), credits: call.call_type === 'phone' ? credits.phone_call_credits : credits.web_call_credits },
    ...Object.entries(call.tokens.by_model).map(([model, tokens]) => ({
      what: html`Language model <code>${model}</code>`, usage: `${count(tokens.input, 'token', 'tokens')} in, ${formatNumber(tokens.output)} out`, credits: included
    })),
    ...(call.speech_seconds.recognised > 0 ? [{ what: 'Speech recognition', usage: `${formatNumber(call.speech_seconds.recognised)} s of the caller's speech`, credits: included }] : []),
    ...(call.speech_seconds.synthesised > 0 ? [{ what: 'Speech synthesis', usage: `${formatNumber(call.speech_seconds.synthesised)} s of the agent's speech`, credits: included }] : []),
    ...(credits.text_message_credits > 0 ? [{ what: 'Text messages', usage: '—', credits: credits.text_message_credits }] : []),
    ...(credits.call_forwarding_credits > 0 ? [{ what: 'Call forwarding', usage: '—', credits: credits.call_forwarding_credits }] : [])
  ]
  return html`<h2 id="cost-title">Cost</h2>
<div class="table"><table class="cost">
  <caption class="visually-hidden">Cost of the call by provider</caption>
  <thead><tr><th scope="col">Provider</th><th scope="col">Usage</th><th scope="col" class="number">Credits</th></tr></thead>
  <tbody>${rows.map((row) => html`<tr><td>${row.what}</td><td>${row.usage}</td><td class="number">${row.credits}</td></tr>`)}</tbody>
  <tfoot><tr><th scope="row">Total</th><td></td><td class="number">${creditsOf(call)}</td></tr></tfoot>
</table></div>
<p class="hint">1 credit = 1 US cent. Calls are charged per started minute and per message; the model's tokens and the speech are included in the minute's price.</p>`
}

function callPage (options: { viewer: Viewer, call: Detail, recording: CallRecording | undefined, deliveries: DeliveryRow[], contact: ContactRow | undefined, messages: MessageRow[] }): string {
  const { viewer, call, deliveries, recording } = options
  const extracted = Object.entries(call.custom_analysis_data ?? {})
  const fact = (label: string, value: unknown) => html`<dt>${label}</dt><dd>${value}</dd>`
  // Transcript times count from the recording's start, so that a line seeks the player to it: the recording ends
  // with the call, so it began its length before the end (a web call's record may exist a moment before its audio).
  const start = recording !== undefined && call.end_timestamp !== null
    ? Math.max(call.start_timestamp, call.end_timestamp - recording.durationMs)
    : call.start_timestamp
  const wav = `/calls/${call._id}/recording.wav`
  return layout({
    title: `${capital(call.call_type)} call with ${call.agent_name}`,
    viewer,
    current: '/calls',
    body: html`
<p><a href="/calls">All calls</a></p>
<dl class="facts">
  ${fact('Agent', html`<a href="/agents/${call.agent_id}">${call.agent_name}</a>${call.agent_version !== null && html` <span class="hint">version ${call.agent_version}</span>`}`)}
  ${fact('Type', `${capital(call.call_type)}, ${call.direction}`)}
  ${call.call_type === 'phone' && html`${fact('From', call.call_from ?? '—')}${fact('To', call.call_to ?? '—')}`}
  ${options.contact !== undefined && fact('Contact', html`<a href="/contacts/${options.contact.id}">${options.contact.name ?? contactLabel(options.contact)}</a>`)}
  ${fact('Started', callTime(call.start_timestamp))}
  ${fact('Ended', callTime(call.end_timestamp))}
  ${fact('Duration', duration(call.duration_ms))}
  ${fact('Status', inWords(STATUS_WORDS, call.call_status))}
  ${fact('How it ended', call.disconnection_reason === null ? '—' : inWords(REASON_WORDS, call.disconnection_reason))}
  ${call.callback_of !== null && fact('Callback of', html`<a href="/calls/${call.callback_of}">the call of ${call.callback_of}</a> (attempt ${call.callback_attempt ?? 1})`)}
  ${call.task_achieved !== null && fact('Task achieved', call.task_achieved ? 'Yes' : 'No')}
  ${call.latency !== null && fact('Caller waited', `${ms(call.latency.e2e.p50)} typically (p50), ${ms(call.latency.e2e.p90)} at p90`)}
  ${fact('Credits', html`<a href="#cost-title">${creditsOf(call)}</a>`)}
  ${fact('Call id', html`<code>${call._id}</code>`)}
</dl>
${callbacksSection(call)}
<h2>Summary</h2>
<p>${call.call_summary ?? 'No summary (not analysed yet, or summaries are off for this agent).'}</p>
<h2>Sentiment</h2>
${call.sentiment === null
  ? html`<p>Not analysed.</p>`
  : html`<p><strong>${capital(call.sentiment.sentiment)}</strong>${call.sentiment.explanation !== '' && html`: ${call.sentiment.explanation}`}</p>`}
${extracted.length > 0 && html`<h2>Extracted fields</h2>
<div class="table"><table>
  <thead><tr><th scope="col">Field</th><th scope="col">Value</th></tr></thead>
  <tbody>${extracted.map(([name, value]) => html`<tr><td>${name}</td><td>${valueText(value)}</td></tr>`)}</tbody>
</table></div>`}
<h2 id="transcript-title">${recording === undefined ? 'Transcript' : 'Recording and transcript'}</h2>
${recording !== undefined && html`<div class="player">
<audio id="recording" controls preload="metadata" src="${wav}"><a href="${wav}">Download the recording</a></audio>
<p><a href="${wav}" download>Download the recording (WAV)</a>${recording.channels === 2 &&
  html` · <a href="${wav}?channels=2" download="${call._id}-stereo.wav">Two tracks (stereo WAV: caller left, agent right)</a>`}</p>
</div>`}
${call.transcription.length === 0
  ? html`<p>No transcript.</p>`
  : html`${recording !== undefined && html`<p class="hint" id="transcript-hint">Choose a line's time to hear the call from there; the line being heard is marked.</p>`}
<ol class="transcript" aria-labelledby="transcript-title">${linesOf(call, start).map((line) => transcriptLine(line, recording !== undefined))}</ol>`}
${recording !== undefined && html`<script src="/console/call-page.js" defer></script>`}
${latencySection(call.latency, start)}
${costSection(call)}
${deliveries.length > 0 && html`<h2>Deliveries</h2>
<div class="table"><table>
  <thead><tr><th scope="col">Kind</th><th scope="col">Name</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last attempt</th></tr></thead>
  <tbody>${deliveries.map((row) => html`<tr><td><a href="/deliveries/${row.id}">${deliveryKind(row)}</a></td><td>${row.name}</td><td>${row.status}</td><td>${row.attempts_made} of ${row.attempts_max}</td><td>${lastAttempt(row)}</td></tr>`)}</tbody>
</table></div>`}
${options.messages.length > 0 && html`<h2>Messages</h2>
${messagesTable(options.messages, 'Messages sent for this call, newest first')}`}`
  })
}

// The list's filters are its own to refuse (parseFilters), on the page beside the filter bar that corrects them.
const LIST_QUERY = Type.Object(Object.fromEntries([...FILTER_NAMES, 'column', 'before', 'after'].map((name) => [name, listFilter(`The filter “${name}”`)])))
const CALL = idParams('id')
const RECORDING_QUERY = Type.Object({ channels: text('The choice of tracks') })

// At most this many of a call's deliveries are shown: one per action and webhook, so a few in practice.
const MAX_DELIVERIES = 100
// A call sends at most MESSAGES_PER_CALL_MAX live messages, and a few after it.
const MAX_MESSAGES = 100

/**
 * The console's Calls pages (docs/console.md), registered inside the console's session scope: the list with
 * the API's main filters, a call's page, and its recording streamed to the signed-in owner (the API key never
 * reaches the browser).
 */
export async function consoleCallRoutes (app: FastifyInstance, { db, limits }: { db: DB, limits: ConcurrencyLimits }): Promise<void> {
  const noSuchCall = (request: FastifyRequest, reply: FastifyReply) =>
    sendPage(reply, 404, messagePage('No such call', 'You have no call with that id.', request.consoleSession && viewerOf(request.consoleSession)))
  const callInScope = async (scope: Scope, id: string): Promise<Detail | undefined> => {
    const json = await findCallJson(db, scope.ownerId, id)
    const call = json === undefined ? undefined : JSON.parse(json) as Detail
    return call !== undefined && inScope(scope, call) ? call : undefined
  }

  app.get('/calls', page({ querystring: LIST_QUERY }), async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const { scope } = scoped
    const viewer = viewerOf(scoped.session)
    const { agents, fields } = await filterAgents(db, scope)
    const { filters, outcome, problem } = parseFilters(request.query as Record<string, unknown>)
    if (problem !== undefined) return sendPage(reply, 400, callsPage({ viewer, filters, agents, fields, error: problem }))

    const { filter, range } = callFilterOf(filters, outcome, scope)
    // Keyset pages: older calls past `before` (newest first), or newer ones past `after` (read oldest first, then turned).
    // One more than a page tells whether a further page exists.
    const newerFirst = filters.after === ''
    const [listed, total] = await Promise.all([
      listCallsJson(db, scope.ownerId, filter, { ...range, order: newerFirst ? 'desc' : 'asc', limit: PAGE_SIZE + 1, skip: 0, after: (newerFirst ? filters.before : filters.after) || undefined }),
      countCalls(db, scope.ownerId, filter, range, COUNT_CAP)
    ])
    const found = JSON.parse(listed) as ListItem[]
    const page = newerFirst ? found.slice(0, PAGE_SIZE) : found.slice(0, PAGE_SIZE).reverse()
    const further = found.length > PAGE_SIZE
    const byId = new Map((await callFigures(db, scope.ownerId, page.map((call) => call._id))).map((row) => [row.id, row]))
    const calls = page.map((call) => {
      const row = byId.get(call._id)
      return { ...call, duration_ms: row?.duration_ms ?? null, credits: row?.credits ?? 0, extracted: row?.custom_analysis_data ?? {} }
    })
    const list = { calls, total, newer: newerFirst ? filters.before !== '' : further, older: newerFirst ? further : true }
    return sendPage(reply, 200, callsPage({ viewer, filters, outcome, agents, fields, list }))
  })

  app.get('/console/local-time.js', page(), async (_request, reply) => {
    return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(LOCAL_TIME)
  })

  app.get('/console/call-page.js', page(), async (_request, reply) => {
    return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(CALL_PAGE)
  })

  // The list's export: the API's call-details CSV of the same filters (every page), in the scope.
  app.get('/calls/export.csv', page({ querystring: LIST_QUERY }), async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const { filters, outcome, problem } = parseFilters(request.query as Record<string, unknown>)
    if (problem !== undefined) return sendPage(reply, 400, messagePage('Calls not exported', problem, viewerOf(scoped.session)))
    const { filter, range } = callFilterOf(filters, outcome, scoped.scope)
    const today = new Date().toISOString().slice(0, 10)
    return sendCallDetailsCsv(db, request, reply, scoped.scope.ownerId, filter, { ...range, dateFrom: filters.from || 'first', dateTo: filters.to || today }, limits)
  })

  app.get<{ Params: { id: string } }>('/calls/:id', page({ params: CALL }), async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const { scope } = scoped
    const { id } = request.params
    const call = await callInScope(scope, id)
    if (call === undefined) return noSuchCall(request, reply)
    const [recording, deliveries, contact, messages] = await Promise.all([
      findRecording(db, scope.ownerId, id),
      listDeliveries(db, scope.ownerId, { callId: id }, { limit: MAX_DELIVERIES, offset: 0 }),
      call.contact_id === null ? undefined : findContact(db, scope.ownerId, call.contact_id),
      listMessages(db, scope.ownerId, { callId: id, limit: MAX_MESSAGES })
    ])
    return sendPage(reply, 200, callPage({ viewer: viewerOf(scoped.session), call, recording: recording && { channels: recording.channels, durationMs: recording.durationMs }, deliveries: deliveries.rows, contact, messages }))
  })

  app.get<{ Params: { id: string }, Querystring: { channels?: string } }>('/calls/:id/recording.wav', page({ params: CALL, querystring: RECORDING_QUERY }), async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const { id } = request.params
    // `?channels=2`: the two tracks, as on the API (anything else: the mono mix).
    const channels = request.query.channels === '2' ? 2 : 1
    const recording = await callInScope(scoped.scope, id) === undefined ? undefined : await findRecording(db, scoped.scope.ownerId, id, channels)
    if (recording === undefined) return noSuchCall(request, reply)
    return await sendRecording(reply, recording, request.headers.range, limits)
  })
}
