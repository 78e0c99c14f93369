import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import type { ConcurrencyLimits } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { DAY_MS, type DateRange } from '../../db/days.ts'
import { calendarDay, dateRange, MAX_RANGE_DAYS } from '../../http/dates.ts'
import { badRequest } from '../../http/errors.ts'
import { sendCallDetailsCsv, sendCostsCsv } from '../calls/export.ts'
import { dailyCallsByAgent, dailyMetrics, extractedValues, medianWaitBuckets, outcomeCounts, sentimentCounts, transferCounts, turnWaits, type CallFilter, type OutcomeRow } from '../calls/queries.ts'
import { costsBreakdown } from '../calls/reports.ts'
import { duration } from './calls.ts'
import { barChart, columnChart, formatNumber, keepLargest, SERIES_COLOURS, stackedColumnChart, type Bar, type Series } from './charts.ts'
import { notADay } from './fields.ts'
import { filterBar, filterField, filterSelect } from './components.ts'
import { html, type SafeHtml } from './html.ts'
import { FIELD_NAME, reasonWords, type OutcomeParams } from './outcomes.ts'
import { layout, notice, viewerOf, type Viewer } from './pages.ts'
import { filterAgents, viewScope, type Scope } from './scope.ts'
import { ID, sendPage, withChosen } from './reply.ts'

/** Days the page shows when the form names none: the last 30, today included. */
export const DEFAULT_DAYS = 30
// Agents drawn in the per-day chart (one colour each, the last for the others together) and in the costs chart.
const MAX_DAY_AGENTS = SERIES_COLOURS - 1
const MAX_COST_AGENTS = 12
// Past a year the per-period charts have a column per month: 3660 day columns would be narrower than a pixel
// and weigh megabytes.
const MAX_DAY_COLUMNS = 366

const SENTIMENTS = ['positive', 'neutral', 'negative'] as const
// End reasons drawn one bar each (the rest as one), and an extracted field's values.
const MAX_REASONS = 10
const MAX_VALUES = 12
// The calls' median waits in buckets of half a second, the last for 3 s and more.
const WAIT_STEP_MS = 500
const WAIT_BUCKETS = 7

/** The form's values as given (for redisplay) or defaulted; `field`: the extracted field broken down ('' : the first). */
interface Form { from: string, to: string, agent: string, field: string }

const isoDay = (epochMs: number) => new Date(epochMs).toISOString().slice(0, 10)

/** The form, and the range and filter it asks for or the reason it cannot be used (the API's limits). */
function parseForm (query: Record<string, unknown>, now: number, scope: Scope): { form: Form, range?: DateRange, filter?: CallFilter, problem?: string } {
  const text = (name: string) => typeof query[name] === 'string' ? (query[name] as string).trim() : ''
  const to = text('to') || isoDay(now)
  const toDay = calendarDay(to)
  const from = text('from') || (toDay === undefined ? '' : isoDay(toDay.getTime() - (DEFAULT_DAYS - 1) * DAY_MS))
  const form: Form = { from, to, agent: text('agent').toLowerCase(), field: text('field') }
  const problem = (message: string) => ({ form, problem: message })
  const repeated = ['from', 'to', 'agent', 'field'].find((name) => query[name] !== undefined && typeof query[name] !== 'string')
  if (repeated !== undefined) return problem(`The field “${repeated}” was given more than once.`)
  if (form.agent !== '' && !ID.test(form.agent)) return problem('That agent is not a valid agent id.')
  if (form.field !== '' && !FIELD_NAME.test(form.field)) return problem('An extracted field\'s name has letters, digits and _, not starting with a digit.')
  // “To” first: without it the default “from” is empty too.
  const fromDay = calendarDay(from)
  if (toDay === undefined) return problem(notADay('To'))
  if (fromDay === undefined) return problem(notADay('From'))
  if (toDay < fromDay) return problem('“To” must not be before “from”.')
  if ((toDay.getTime() - fromDay.getTime()) / DAY_MS + 1 > MAX_RANGE_DAYS) return problem(`The range may be at most ${MAX_RANGE_DAYS} days long.`)
  return { form, range: dateRange({ date_from: from, date_to: to }), filter: { agentIds: form.agent === '' ? undefined : [form.agent], workspaceId: scope.workspaceId } }
}

/** The query string of the form's values, for the CSV links. */
function queryOf (form: Form): string {
  const params = new URLSearchParams({ from: form.from, to: form.to })
  if (form.agent !== '') params.set('agent', form.agent)
  return `?${params.toString()}`
}

const minutes = (ms: number) => Math.round(ms / 600) / 100

interface Figures {
  days: Array<{ date: string, calls: number, duration_ms: number }>
  dayAgents: Array<{ date: string, agent_id: string, calls: number }>
  sentiments: Record<string, number>
  costs: Awaited<ReturnType<typeof costsBreakdown>>
  outcomes: OutcomeRow[]
  transfers: Awaited<ReturnType<typeof transferCounts>>
  waits: Awaited<ReturnType<typeof turnWaits>>
  /** Timed calls per WAIT_STEP_MS of their median wait. */
  waitBuckets: number[]
  /** The extracted field broken down, with its most frequent values; undefined: the agents extract none. */
  field?: { name: string } & Awaited<ReturnType<typeof extractedValues>>
}

/** The Calls list of the form's range and agent, narrowed by an outcome (outcomes.ts) or a status. */
function callsHref (form: Form, narrow: Partial<OutcomeParams> & { status?: string }): string {
  const params = new URLSearchParams({ from: form.from, to: form.to })
  if (form.agent !== '') params.set('agent', form.agent)
  for (const [name, value] of Object.entries(narrow)) params.set(name, value)
  return `/calls?${params.toString()}`
}

/** A share in per cent, at most one decimal; a dash of nothing. */
const percent = (part: number, whole: number) => whole === 0 ? '—' : `${formatNumber(Math.round((part / whole) * 1000) / 10)}%`

const seconds = (ms: number) => formatNumber(ms / 1000)

/** The label of a wait bucket: “0.5–1 s”, the first “Under 0.5 s”, the last “3 s or more”. */
function waitLabel (bucket: number): string {
  if (bucket === 0) return `Under ${seconds(WAIT_STEP_MS)} s`
  if (bucket === WAIT_BUCKETS - 1) return `${seconds(bucket * WAIT_STEP_MS)} s or more`
  return `${seconds(bucket * WAIT_STEP_MS)}–${seconds((bucket + 1) * WAIT_STEP_MS)} s`
}

/**
 * How the calls went (docs/console.md, "Analytics"): the rates as facts, then a chart each of results, end reasons,
 * waits and an extracted field's values. Every figure and bar links to its calls in the Calls list.
 */
function outcomeSection (form: Form, { outcomes, transfers: { calls: transferred, transfers }, waits, waitBuckets, field }: Figures): SafeHtml {
  const sum = (key: Exclude<keyof OutcomeRow, 'reason'>) => outcomes.reduce((n, row) => n + row[key], 0)
  const [calls, success, failed, judged, achieved, timed, durationMs] =
    (['calls', 'success', 'failed', 'judged', 'achieved', 'timed', 'duration_ms'] as const).map(sum)
  const span = `from ${form.from} to ${form.to}`
  const link = (text: string, narrow: Parameters<typeof callsHref>[1]) => html`<a href="${callsHref(form, narrow)}">${text}</a>`

  const results: Bar[] = [
    { label: 'Conversation held', value: success, href: callsHref(form, { status: 'success' }), kind: 'positive' },
    { label: 'Not connected', value: failed, href: callsHref(form, { status: 'failed' }), kind: 'negative' },
    { label: 'In progress', value: calls - success - failed, kind: 'unknown' }
  ]
  const tasks: Bar[] = [
    { label: 'Achieved', value: achieved, href: callsHref(form, { task: 'achieved' }), kind: 'positive' },
    { label: 'Not achieved', value: judged - achieved, href: callsHref(form, { task: 'not_achieved' }), kind: 'negative' },
    { label: 'Not judged yet', value: calls - judged, kind: 'unknown' }
  ]
  const ended = outcomes.filter((row) => row.reason !== '')
  const reasons = keepLargest<Bar>(
    ended.map((row) => ({ label: reasonWords(row.reason), value: row.calls, href: callsHref(form, { reason: row.reason }) })),
    MAX_REASONS,
    (bar) => bar.value,
    (rest) => ({ label: `${rest.length} other reasons`, value: rest.reduce((n, bar) => n + bar.value, 0), kind: `s${SERIES_COLOURS - 1}` }))
  const waitBars: Bar[] = waitBuckets.map((value, i) => ({
    label: waitLabel(i),
    value,
    href: callsHref(form, { wait_from: String(i * WAIT_STEP_MS), ...(i === WAIT_BUCKETS - 1 ? {} : { wait_to: String((i + 1) * WAIT_STEP_MS) }) })
  }))
  const others = field === undefined ? 0 : field.calls - field.values.reduce((n, row) => n + row.calls, 0)

  return html`<h2 id="outcomes">Outcomes</h2>
<dl class="facts">
  <dt>Success rate</dt><dd>${percent(success, success + failed)}: ${link(`${formatNumber(success)} of ${formatNumber(success + failed)} ended calls`, { status: 'success' })} held a conversation</dd>
  <dt>Task achieved</dt><dd>${percent(achieved, judged)}: ${link(`${formatNumber(achieved)} of ${formatNumber(judged)} judged calls`, { task: 'achieved' })} (the agent's required fields found and the caller not unhappy)</dd>
  <dt>Average duration</dt><dd>${timed === 0 ? '—' : html`${duration(durationMs / timed)} over ${formatNumber(timed)} ${timed === 1 ? 'call' : 'calls'}`}</dd>
  <dt>Transfers</dt><dd>${transferred === 0 ? 'None' : html`${link(`${formatNumber(transferred)} ${transferred === 1 ? 'call' : 'calls'}`, { transferred: 'yes' })} (${percent(transferred, calls)}) put through to someone else, ${formatNumber(transfers)} ${transfers === 1 ? 'transfer' : 'transfers'} in all`}</dd>
  <dt>Caller waited per turn</dt><dd>${waits === null ? 'No timed turns' : `${formatNumber(waits.p50)} ms p50, ${formatNumber(waits.p95)} ms p95 (over ${formatNumber(waits.turns)} answered turns of ${formatNumber(waits.calls)} timed ${waits.calls === 1 ? 'call' : 'calls'})`}</dd>
  ${waits !== null && html`<dt>Answers cut off</dt><dd>${percent(waits.interrupted, waits.turns)}: the caller talked over ${formatNumber(waits.interrupted)} of ${formatNumber(waits.turns)} answered turns</dd>`}
</dl>
<p class="hint">Select a bar, or a figure in a chart's table, to list its calls.</p>
<div class="chart-grid">
<div><h3>Results</h3>
${barChart({
  id: 'results', title: 'Result of the calls', labelHeader: 'Result', valueHeader: 'Calls', unit: 'calls', bars: results,
  description: `The calls ${span}: ${formatNumber(success)} held a conversation, ${formatNumber(failed)} never connected, ${formatNumber(calls - success - failed)} in progress (running, or its analysis not done).`
})}</div>
<div><h3>Task achieved</h3>
${barChart({
  id: 'tasks', title: 'Whether the task was achieved', labelHeader: 'Task', valueHeader: 'Calls', unit: 'calls', bars: tasks,
  description: `The calls ${span} by whether their analysis found the task achieved: ${percent(achieved, judged)} of the judged calls.`
})}</div>
<div><h3>Why calls ended</h3>
${ended.length === 0
  ? html`<p>No call of this range has ended yet.</p>`
  : barChart({
    id: 'reasons', title: 'Why calls ended', labelHeader: 'Reason', valueHeader: 'Calls', unit: 'calls', bars: reasons,
    description: `The ended calls ${span} by why they ended, most frequent first.`
  })}</div>
<div><h3>How long callers waited</h3>
${waits === null
  ? html`<p>No call of this range has timed turns (calls through the voice engine time each answered turn).</p>`
  : barChart({
    id: 'waits', title: 'Calls by the caller\'s usual wait', labelHeader: 'Median wait per turn', valueHeader: 'Calls', unit: 'calls', bars: waitBars,
    description: `The timed calls ${span} by the median time the caller waited for the agent's answer over the call's turns.`
  })}</div>
<div><h3>${field === undefined ? 'Extracted fields' : `Extracted field: ${field.name}`}</h3>
${field === undefined
  ? html`<p>None of these agents extracts fields from its calls (an agent's “Data retrieval” settings).</p>`
  : field.values.length === 0
  ? html`<p>No call of this range has a value for ${field.name}.</p>`
  : barChart({
    id: 'field', title: `Values of ${field.name}`, labelHeader: field.name, valueHeader: 'Calls', unit: 'calls',
    bars: [
      ...field.values.map((row) => ({ label: row.value, value: row.calls, href: callsHref(form, { field: field.name, value: row.value }) })),
      ...(others > 0 ? [{ label: 'Other values', value: others, kind: `s${SERIES_COLOURS - 1}` }] : [])
    ],
    description: `The ${formatNumber(field.calls)} calls ${span} with a value for ${field.name}, by value, most frequent first (choose the field above).`
  })}</div>
</div>`
}

/** Sums of rows per period (a day, or a month for long ranges), in order; every period of the range is present. */
function byPeriod<T extends { date: string }> (rows: T[], periods: string[], periodOf: (date: string) => string, add: (sum: number[], row: T) => void, size: number): number[][] {
  const index = new Map(periods.map((period, i) => [period, i]))
  const sums = periods.map(() => Array<number>(size).fill(0))
  for (const row of rows) add(sums[index.get(periodOf(row.date))!], row)
  return sums
}

function charts (form: Form, figures: Figures) {
  const { days, dayAgents, sentiments, costs } = figures
  const calls = days.reduce((n, day) => n + day.calls, 0)
  if (calls === 0) return html`<p>No calls in this range.</p>`
  const span = `from ${form.from} to ${form.to}`
  const totalMinutes = minutes(days.reduce((n, day) => n + day.duration_ms, 0))
  const names = new Map(costs.breakdown.map((row) => [row.agent_id!, row.agent_name || row.agent_id!]))

  const monthly = days.length > MAX_DAY_COLUMNS
  const period = monthly ? 'month' : 'day'
  const periodOf = monthly ? (date: string) => date.slice(0, 7) : (date: string) => date
  const periods = [...new Set(days.map((day) => periodOf(day.date)))]
  const periodHeader = monthly ? 'Month (UTC)' : 'Day (UTC)'
  const durations = byPeriod(days, periods, periodOf, (sum, day) => { sum[0] += day.duration_ms }, 1)

  const agentIds = [...new Set(dayAgents.map((row) => row.agent_id))]
  const column = new Map(agentIds.map((id, i) => [id, i]))
  const perAgent = byPeriod(dayAgents, periods, periodOf, (sum, row) => { sum[column.get(row.agent_id)!] += row.calls }, agentIds.length)
  const series = keepLargest<Series>(
    agentIds.map((id, i) => ({ name: names.get(id) ?? id, values: perAgent.map((sums) => sums[i]) })),
    MAX_DAY_AGENTS,
    (s) => s.values.reduce((n, v) => n + v, 0),
    (rest) => ({ name: `${rest.length} other agents`, values: periods.map((_, i) => rest.reduce((n, s) => n + s.values[i], 0)) }))

  const analysed = SENTIMENTS.reduce((n, name) => n + (sentiments[name] ?? 0), 0)
  const sentimentBars: Bar[] = [
    ...SENTIMENTS.map((name) => ({ label: name.charAt(0).toUpperCase() + name.slice(1), value: sentiments[name] ?? 0, kind: name })),
    { label: 'Unknown', value: Math.max(0, calls - analysed), kind: 'unknown' }
  ]

  const costBars = keepLargest<Bar>(
    costs.breakdown.map((row) => ({ label: names.get(row.agent_id!)!, value: row.credits.total })),
    MAX_COST_AGENTS,
    (bar) => bar.value,
    (rest) => ({ label: `${rest.length} other agents`, value: rest.reduce((n, bar) => n + bar.value, 0), kind: `s${SERIES_COLOURS - 1}` }))

  return html`
<dl class="facts">
  <dt>Calls</dt><dd>${formatNumber(calls)}</dd>
  <dt>Minutes</dt><dd>${formatNumber(totalMinutes)}</dd>
  <dt>Credits</dt><dd>${formatNumber(costs.totals.total_credits)} (1 credit = 1 US cent)</dd>
</dl>
${outcomeSection(form, figures)}
<h2>Call minutes per ${period}</h2>
${columnChart({
  id: 'minutes', title: `Call minutes per ${period}`, labelHeader: periodHeader, valueHeader: 'Minutes', unit: 'minutes',
  bars: periods.map((label, i) => ({ label, value: minutes(durations[i][0]) })),
  description: `Minutes of calls per UTC ${period} ${span}: ${formatNumber(totalMinutes)} minutes in all.`
})}
<h2>Calls per ${period} by agent</h2>
${stackedColumnChart({
  id: 'calls', title: `Calls per ${period} by agent`, labelHeader: periodHeader, valueHeader: 'Calls', unit: 'calls', whole: true, categories: periods, series,
  description: `Calls per UTC ${period} ${span}, stacked by agent: ${formatNumber(calls)} calls of ${agentIds.length} ${agentIds.length === 1 ? 'agent' : 'agents'}.`
})}
<h2>Sentiment</h2>
${barChart({
  id: 'sentiment', title: 'Sentiment of the calls', labelHeader: 'Sentiment', valueHeader: 'Calls', unit: 'calls', bars: sentimentBars,
  description: `The calls ${span} by the sentiment their analysis found; unknown: not analysed (yet, or sentiment analysis is off).`
})}
<h2>Costs by agent</h2>
${barChart({
  id: 'costs', title: 'Credits by agent', labelHeader: 'Agent', valueHeader: 'Credits', unit: 'credits', bars: costBars,
  description: `Credits charged for the calls ${span} per agent, highest first: ${formatNumber(costs.totals.total_credits)} in all.`
})}`
}

function analyticsPage (options: { viewer: Viewer, form: Form, agents: Array<{ id: string, name: string }>, fields: string[], figures?: Figures, error?: string }): string {
  const { viewer, form, agents, fields, figures } = options
  const agentOptions = withChosen(agents, form.agent)
  const chosenField = figures?.field?.name ?? form.field
  return layout({
    title: 'Analytics',
    viewer,
    current: '/analytics',
    body: html`
${filterBar({
  action: '/analytics',
  label: 'Range of the analytics',
  submit: 'Show',
  fields: [
    filterField('from', 'From (UTC day)', html`<input id="from" name="from" type="date" value="${form.from}">`),
    filterField('to', 'To (UTC day, included)', html`<input id="to" name="to" type="date" value="${form.to}">`),
    filterField('agent', 'Agent', filterSelect('agent', 'Every agent', agentOptions.map((agent) => ({ value: agent.id, label: agent.name })), form.agent)),
    fields.length > 0 && filterField('field', 'Extracted field', html`<select id="field" name="field">${fields.map((name) =>
      html`<option value="${name}"${name === chosenField && html` selected`}>${name}</option>`)}</select>`)
  ].filter((item) => item !== false)
})}
${options.error !== undefined && notice('error', options.error)}
${figures !== undefined && html`<ul class="downloads">
  <li><a href="/analytics/calls.csv${queryOf(form)}" download>Download the calls (CSV)</a></li>
  <li><a href="/analytics/costs.csv${queryOf(form)}" download>Download the costs by agent (CSV)</a></li>
</ul>
${charts(form, figures)}`}`
  })
}

// A parameter as the address gives it: repeated ones reach parseForm, which says so in words.
const Param = Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())]))
const PAGE_SCHEMA = { schema: { hide: true, querystring: Type.Object({ from: Param, to: Param, agent: Param, field: Param }) } }

/**
 * The console's Analytics page (docs/console.md): charts of the calls of the person's scope (their account, or the
 * workspace they work in) over a range of days, from the same queries as the API's metrics plus the outcomes of the
 * calls themselves, and the API's two CSV exports for the session.
 */
export async function consoleAnalyticsRoutes (app: FastifyInstance, { db, limits }: { db: DB, limits: ConcurrencyLimits }): Promise<void> {
  /** The scope, range and filter of a CSV link; a bad one is a 400 page (the links are made by the page, so rarely). */
  const csvRequest = (request: FastifyRequest, scope: Scope) => {
    const { range, filter, problem } = parseForm(request.query as Record<string, unknown>, Date.now(), scope)
    if (problem !== undefined) throw badRequest(problem)
    return { range: range!, filter: filter! }
  }

  app.get('/analytics', PAGE_SCHEMA, async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const { scope } = scoped
    const viewer = viewerOf(scoped.session)
    const { agents, fields } = await filterAgents(db, scope)
    const { form, range, filter, problem } = parseForm(request.query as Record<string, unknown>, Date.now(), scope)
    if (problem !== undefined) return sendPage(reply, 400, analyticsPage({ viewer, form, agents, fields, error: problem }))
    // A field no agent has now (a deleted agent's, or one renamed) still breaks down its calls' values.
    const fieldName = form.field || fields[0]
    const [days, dayAgents, sentiments, costs, outcomes, transfers, waits, waitBuckets, values] = await Promise.all([
      dailyMetrics(db, scope.ownerId, filter!, range!),
      dailyCallsByAgent(db, scope.ownerId, filter!, range!),
      sentimentCounts(db, scope.ownerId, filter!, range!),
      costsBreakdown(db, scope.ownerId, 'agent', filter!, range!),
      outcomeCounts(db, scope.ownerId, filter!, range!),
      transferCounts(db, scope.ownerId, filter!, range!),
      turnWaits(db, scope.ownerId, filter!, range!),
      medianWaitBuckets(db, scope.ownerId, filter!, range!, WAIT_STEP_MS, WAIT_BUCKETS),
      fieldName === undefined ? undefined : extractedValues(db, scope.ownerId, filter!, range!, fieldName, MAX_VALUES)
    ])
    const field = values === undefined ? undefined : { name: fieldName!, ...values }
    const figures = { days, dayAgents, sentiments, costs, outcomes, transfers, waits, waitBuckets, field }
    return sendPage(reply, 200, analyticsPage({ viewer, form, agents, fields: fieldName === undefined || fields.includes(fieldName) ? fields : [...fields, fieldName], figures }))
  })

  app.get('/analytics/calls.csv', PAGE_SCHEMA, async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const { range, filter } = csvRequest(request, scoped.scope)
    return sendCallDetailsCsv(db, request, reply, scoped.scope.ownerId, filter, range, limits)
  })

  app.get('/analytics/costs.csv', PAGE_SCHEMA, async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const { range, filter } = csvRequest(request, scoped.scope)
    return sendCostsCsv(reply, 'agent', await costsBreakdown(db, scoped.scope.ownerId, 'agent', filter, range), range)
  })
}
