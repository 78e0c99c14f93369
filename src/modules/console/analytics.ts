import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { ConcurrencyLimits } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { DAY_MS, type DateRange } from '../../db/days.ts'
import { calendarDay, dateRange, MAX_RANGE_DAYS } from '../../http/dates.ts'
import { badRequest } from '../../http/errors.ts'
import { listAgents } from '../agents/queries.ts'
import { sendCallDetailsCsv, sendCostsCsv } from '../calls/export.ts'
import { dailyCallsByAgent, dailyMetrics, latencyMetrics, sentimentCounts, type CallFilter } from '../calls/queries.ts'
import { costsBreakdown } from '../calls/reports.ts'
import { barChart, columnChart, formatNumber, keepLargest, SERIES_COLOURS, stackedColumnChart, type Bar, type Series } from './charts.ts'
import { notADay } from './fields.ts'
import { html } from './html.ts'
import { layout, notice, viewerOf, type Viewer } from './pages.ts'
import { sessionOf } from './security.ts'
import { HIDDEN, ID, sendPage, withChosen } from './reply.ts'

/** Days the page shows when the form names none: the last 30, today included. */
export const DEFAULT_DAYS = 30
// As on the Calls page: the agent select lists at most this many; a filter by any other still works.
const MAX_AGENT_OPTIONS = 500
// Agents drawn in the per-day chart (one colour each, the last for the others together) and in the costs chart.
const MAX_DAY_AGENTS = SERIES_COLOURS - 1
const MAX_COST_AGENTS = 12
// Past a year the per-period charts have a column per month: 3660 day columns would be narrower than a pixel
// and weigh megabytes.
const MAX_DAY_COLUMNS = 366

const SENTIMENTS = ['positive', 'neutral', 'negative'] as const

/** The form's values as given (for redisplay) or defaulted. */
interface Form { from: string, to: string, agent: string }

const isoDay = (epochMs: number) => new Date(epochMs).toISOString().slice(0, 10)

/** The form, and the range and filter it asks for or the reason it cannot be used (the API's limits). */
function parseForm (query: Record<string, unknown>, now: number): { form: Form, range?: DateRange, filter?: CallFilter, problem?: string } {
  const text = (name: string) => typeof query[name] === 'string' ? (query[name] as string).trim() : ''
  const to = text('to') || isoDay(now)
  const toDay = calendarDay(to)
  const from = text('from') || (toDay === undefined ? '' : isoDay(toDay.getTime() - (DEFAULT_DAYS - 1) * DAY_MS))
  const form: Form = { from, to, agent: text('agent').toLowerCase() }
  const problem = (message: string) => ({ form, problem: message })
  const repeated = ['from', 'to', 'agent'].find((name) => query[name] !== undefined && typeof query[name] !== 'string')
  if (repeated !== undefined) return problem(`The field “${repeated}” was given more than once.`)
  if (form.agent !== '' && !ID.test(form.agent)) return problem('That agent is not a valid agent id.')
  // “To” first: without it the default “from” is empty too.
  const fromDay = calendarDay(from)
  if (toDay === undefined) return problem(notADay('To'))
  if (fromDay === undefined) return problem(notADay('From'))
  if (toDay < fromDay) return problem('“To” must not be before “from”.')
  if ((toDay.getTime() - fromDay.getTime()) / DAY_MS + 1 > MAX_RANGE_DAYS) return problem(`The range may be at most ${MAX_RANGE_DAYS} days long.`)
  return { form, range: dateRange({ date_from: from, date_to: to }), filter: { agentIds: form.agent === '' ? undefined : [form.agent] } }
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
  latency: Awaited<ReturnType<typeof latencyMetrics>>
}

/** Sums of rows per period (a day, or a month for long ranges), in order; every period of the range is present. */
function byPeriod<T extends { date: string }> (rows: T[], periods: string[], periodOf: (date: string) => string, add: (sum: number[], row: T) => void, size: number): number[][] {
  const index = new Map(periods.map((period, i) => [period, i]))
  const sums = periods.map(() => Array<number>(size).fill(0))
  for (const row of rows) add(sums[index.get(periodOf(row.date))!], row)
  return sums
}

function charts (form: Form, { days, dayAgents, sentiments, costs, latency }: Figures) {
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
  ${latency !== null && html`<dt>Caller waited</dt><dd>${formatNumber(latency.e2e.p50)} ms p50, ${formatNumber(latency.e2e.p90)} ms p90 (over ${formatNumber(latency.e2e.num)} answered turns of ${formatNumber(latency.calls)} timed ${latency.calls === 1 ? 'call' : 'calls'})</dd>`}
</dl>
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

function analyticsPage (options: { viewer: Viewer, form: Form, agents: Array<{ id: string, name: string }>, figures?: Figures, error?: string }): string {
  const { viewer, form, agents, figures } = options
  const agentOptions = withChosen(agents, form.agent)
  return layout({
    title: 'Analytics',
    viewer,
    current: '/analytics',
    body: html`
<form method="get" action="/analytics" aria-label="Range of the analytics">
  <div class="stack">
    <label for="from">From (UTC day)</label>
    <input id="from" name="from" type="date" value="${form.from}">
    <label for="to">To (UTC day, included)</label>
    <input id="to" name="to" type="date" value="${form.to}">
    <label for="agent">Agent</label>
    <select id="agent" name="agent"><option value="">Every agent</option>${agentOptions.map((agent) =>
      html`<option value="${agent.id}"${agent.id === form.agent && html` selected`}>${agent.name}</option>`)}</select>
    <button type="submit">Show</button>
  </div>
</form>
${options.error !== undefined && notice('error', options.error)}
${figures !== undefined && html`<ul class="downloads">
  <li><a href="/analytics/calls.csv${queryOf(form)}" download>Download the calls (CSV)</a></li>
  <li><a href="/analytics/costs.csv${queryOf(form)}" download>Download the costs by agent (CSV)</a></li>
</ul>
${charts(form, figures)}`}`
  })
}

/**
 * The console's Analytics page (docs/console.md): charts of the signed-in account's calls over a range of days,
 * from the same queries as the API's metrics, and the API's two CSV exports for the session.
 */
export async function consoleAnalyticsRoutes (app: FastifyInstance, { db, limits }: { db: DB, limits: ConcurrencyLimits }): Promise<void> {
  /** The range and filter of a CSV link; a bad one is a 400 page (the links are made by the page, so rarely). */
  const csvRequest = (request: FastifyRequest) => {
    const { range, filter, problem } = parseForm(request.query as Record<string, unknown>, Date.now())
    if (problem !== undefined) throw badRequest(problem)
    return { range: range!, filter: filter! }
  }

  app.get('/analytics', HIDDEN, async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const viewer = viewerOf(session)
    const agents = (await listAgents(db, session.userId, { limit: MAX_AGENT_OPTIONS })).map((agent) => ({ id: agent.id, name: agent.agent_name }))
    const { form, range, filter, problem } = parseForm(request.query as Record<string, unknown>, Date.now())
    if (problem !== undefined) return sendPage(reply, 400, analyticsPage({ viewer, form, agents, error: problem }))
    const [days, dayAgents, sentiments, costs, latency] = await Promise.all([
      dailyMetrics(db, session.userId, filter!, range!),
      dailyCallsByAgent(db, session.userId, filter!, range!),
      sentimentCounts(db, session.userId, filter!, range!),
      costsBreakdown(db, session.userId, 'agent', filter!, range!),
      latencyMetrics(db, session.userId, filter!, range!)
    ])
    return sendPage(reply, 200, analyticsPage({ viewer, form, agents, figures: { days, dayAgents, sentiments, costs, latency } }))
  })

  app.get('/analytics/calls.csv', HIDDEN, async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const { range, filter } = csvRequest(request)
    return sendCallDetailsCsv(db, request, reply, session.userId, filter, range, limits)
  })

  app.get('/analytics/costs.csv', HIDDEN, async (request, reply) => {
    const session = sessionOf(request, reply)
    if (session === undefined) return reply
    const { range, filter } = csvRequest(request)
    return sendCostsCsv(reply, 'agent', await costsBreakdown(db, session.userId, 'agent', filter, range), range)
  })
}
