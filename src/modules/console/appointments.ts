import type { FastifyInstance } from 'fastify'
import { DAY_MS } from '../../db/days.ts'
import { calendarDay } from '../../http/dates.ts'
import { HttpError } from '../../http/errors.ts'
import { listAgents } from '../agents/queries.ts'
import { announce, cancelAppointment, localTime, type AppointmentDeps } from '../appointments/appointments.ts'
import { findAppointment, listAppointments, type AppointmentRow } from '../appointments/queries.ts'
import { formFields, notADay } from './fields.ts'
import { html } from './html.ts'
import { csrfField, layout, notice, viewerOf, type Viewer } from './pages.ts'
import { changeScope, inScope, viewScope } from './scope.ts'
import { HIDDEN, ID, listQuery, sendPage, withChosen } from './reply.ts'

// The console's appointments (docs/appointments.md): what the agents' appointment_booking tools booked, by start
// time, each with its call and contact, and a button that cancels one (e-mails included, as the API's does). The
// workspace rule is the calls' (scope.ts): an appointment belongs to its agent's workspace.

const PAGE_SIZE = 50
const MAX_AGENT_OPTIONS = 500
const STATUSES = ['booked', 'cancelled'] as const

interface Filters { agent: string, status: string, from: string, to: string, skip: number }
const FILTER_NAMES = ['agent', 'status', 'from', 'to'] as const

function parseFilters (query: unknown): { filters: Filters, problem?: string } {
  const fields = formFields(query, [...FILTER_NAMES, 'skip'])
  const filters: Filters = { agent: fields.agent.toLowerCase(), status: fields.status, from: fields.from, to: fields.to, skip: 0 }
  const problem = (message: string) => ({ filters, problem: message })
  if (filters.agent !== '' && !ID.test(filters.agent)) return problem('That agent is not a valid agent id.')
  if (filters.status !== '' && !(STATUSES as readonly string[]).includes(filters.status)) return problem(`The status must be one of ${STATUSES.join(', ')}.`)
  const from = calendarDay(filters.from)
  const to = calendarDay(filters.to)
  if (filters.from !== '' && from === undefined) return problem(notADay('From'))
  if (filters.to !== '' && to === undefined) return problem(notADay('To'))
  if (from !== undefined && to !== undefined && to < from) return problem('“To” must not be before “from”.')
  if (fields.skip !== '' && !/^\d{1,9}$/.test(fields.skip)) return problem('The page position must be a whole number.')
  filters.skip = Number(fields.skip)
  return { filters }
}

const capital = (text: string) => text.charAt(0).toUpperCase() + text.slice(1)

interface ListPage {
  viewer: Viewer
  canChange: boolean
  filters: Filters
  agents: Array<{ id: string, name: string }>
  rows?: AppointmentRow[]
  total?: number
  error?: string
  cancelled?: boolean
}

function appointmentsPage ({ viewer, canChange, filters, agents, rows, total = 0, error, cancelled }: ListPage): string {
  const agentName = new Map(agents.map((agent) => [agent.id, agent.name]))
  const query = (skip: number) => listQuery(filters, FILTER_NAMES, skip)
  const back = `/appointments${query(filters.skip)}`
  return layout({
    title: 'Appointments',
    viewer,
    current: '/appointments',
    body: html`
${cancelled === true && notice('success', 'The appointment is cancelled: its time is free again, and the e-mails with the cancellation are sent.')}
<p>What your agents' appointment booking tools booked during calls, soonest first. Times are in each appointment's time zone.</p>
<form method="get" action="/appointments" aria-label="Filter appointments">
  <div class="stack">
    <label for="agent">Agent</label>
    <select id="agent" name="agent"><option value="">Any agent</option>${withChosen(agents, filters.agent).map((agent) =>
      html`<option value="${agent.id}"${agent.id === filters.agent && html` selected`}>${agent.name}</option>`)}</select>
    <label for="status">Status</label>
    <select id="status" name="status"><option value="">Any status</option>${STATUSES.map((status) =>
      html`<option value="${status}"${status === filters.status && html` selected`}>${capital(status)}</option>`)}</select>
    <label for="from">Starting from (UTC day)</label>
    <input id="from" name="from" type="date" value="${filters.from}">
    <label for="to">Starting until (UTC day, included)</label>
    <input id="to" name="to" type="date" value="${filters.to}">
    <button type="submit">Show appointments</button>
  </div>
</form>
${error !== undefined && notice('error', error)}
${rows !== undefined && (rows.length === 0
  ? html`<p>${filters.skip > 0 ? 'No more appointments.' : 'No appointments match. An agent with an appointment booking tool books them during calls.'}</p>`
  : html`<div class="table"><table>
  <caption>Appointments ${filters.skip + 1}–${filters.skip + rows.length} of ${total}, soonest first</caption>
  <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Agent</th><th scope="col">Status</th><th scope="col">Call</th><th scope="col">Contact</th>${canChange && html`<th scope="col">Cancel</th>`}</tr></thead>
  <tbody>${rows.map((row) => html`<tr>
    <td><time datetime="${row.starts_at.toISOString()}">${localTime(row.starts_at, row.time_zone)}</time>, until ${new Intl.DateTimeFormat('en-GB', { timeZone: row.time_zone, timeStyle: 'short' }).format(row.ends_at)}</td>
    <td>${row.name}${row.phone !== null && html`<br>${row.phone}`}${row.email !== null && html`<br>${row.email}`}${row.notes !== null && html`<br><span class="hint">${row.notes}</span>`}</td>
    <td>${agentName.get(row.agent_id) ?? row.agent_id}</td>
    <td>${capital(row.status)}${row.cancel_reason !== null && html`: ${row.cancel_reason}`}</td>
    <td>${row.call_id === null ? '—' : html`<a href="/calls/${row.call_id}">The call</a>`}</td>
    <td>${row.contact_id === null ? '—' : html`<a href="/contacts/${row.contact_id}">The contact</a>`}</td>
    ${canChange && html`<td>${row.status === 'booked'
      ? html`<form method="post" action="/appointments/${row.id}/cancel">${csrfField(viewer.csrfToken)}<input type="hidden" name="back" value="${back}"><button type="submit" class="danger" aria-label="Cancel the appointment of ${row.name} on ${localTime(row.starts_at, row.time_zone)}">Cancel</button></form>`
      : '—'}</td>`}
  </tr>`)}</tbody>
</table></div>`)}
${rows !== undefined && (filters.skip > 0 || filters.skip + PAGE_SIZE < total) && html`<nav aria-label="Pages of appointments"><ul class="pager">
  ${filters.skip > 0 && html`<li><a href="/appointments${query(Math.max(0, filters.skip - PAGE_SIZE))}" rel="prev">Earlier appointments</a></li>`}
  ${filters.skip + PAGE_SIZE < total && html`<li><a href="/appointments${query(filters.skip + PAGE_SIZE)}" rel="next">Later appointments</a></li>`}
</ul></nav>`}`
  })
}

export async function consoleAppointmentRoutes (app: FastifyInstance, deps: AppointmentDeps): Promise<void> {
  const { db } = deps

  app.get<{ Querystring: Record<string, unknown> }>('/appointments', HIDDEN, async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const { scope, session } = scoped
    const viewer = viewerOf(session)
    const agents = (await listAgents(db, scope.ownerId, { limit: MAX_AGENT_OPTIONS, workspace_id: scope.workspaceId })).map((agent) => ({ id: agent.id, name: agent.agent_name }))
    const { filters, problem } = parseFilters(request.query)
    const page = { viewer, canChange: scope.canChange, filters, agents }
    if (problem !== undefined) return sendPage(reply, 400, appointmentsPage({ ...page, error: problem }))
    const from = calendarDay(filters.from)
    const to = calendarDay(filters.to)
    const { rows, total } = await listAppointments(db, scope.ownerId, {
      agentId: filters.agent === '' ? undefined : filters.agent,
      status: filters.status === '' ? undefined : filters.status as typeof STATUSES[number],
      from,
      to: to === undefined ? undefined : new Date(to.getTime() + DAY_MS),
      workspaceId: scope.workspaceId
    }, { limit: PAGE_SIZE, offset: filters.skip })
    return sendPage(reply, 200, appointmentsPage({ ...page, rows, total, cancelled: request.query.cancelled !== undefined }))
  })

  app.post<{ Params: { id: string } }>('/appointments/:id/cancel', HIDDEN, async (request, reply) => {
    const scope = changeScope(request)
    const row = ID.test(request.params.id) ? await findAppointment(db, scope.ownerId, request.params.id) : undefined
    if (row === undefined || !inScope(scope, row)) throw new HttpError(404, 'not_found', 'You have no appointment with that id.')
    const cancelled = await cancelAppointment(db, scope.ownerId, row.id, null)
    if (cancelled?.changed === true) await announce({ ...deps, log: request.log }, cancelled.row, 'cancelled')
    // Back to the list as it was filtered: only a path of this page, never another site.
    const { back } = formFields(request.body, ['back'])
    const to = /^\/appointments(\?[^\s]*)?$/.test(back) ? back : '/appointments'
    return reply.redirect(`${to}${to.includes('?') ? '&' : '?'}cancelled=1`, 303)
  })
}
