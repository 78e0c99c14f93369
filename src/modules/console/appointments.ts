import type { FastifyInstance } from 'fastify'
import { Type, type Static } from 'typebox'
import { DAY_MS } from '../../db/days.ts'
import { calendarDay } from '../../http/dates.ts'
import { HttpError } from '../../http/errors.ts'
import { announce, cancelAppointment, localTime, type AppointmentDeps } from '../appointments/appointments.ts'
import { findAppointment, listAppointments, type AppointmentRow } from '../appointments/queries.ts'
import { formFields, notADay } from './fields.ts'
import { dataTable, filterBar, filterField, filterSelect, pager, type Column } from './components.ts'
import { html } from './html.ts'
import { csrfField, layout, notice, viewerOf, type Viewer } from './pages.ts'
import { filterAgents, changeScope, inScope, viewScope } from './scope.ts'
import { formBody, ID, idParams, listQuery, page, sendPage, text, withChosen } from './reply.ts'

// The console's appointments (docs/appointments.md): what the agents' appointment_booking tools booked, by start
// time, each with its call and contact, and a button that cancels one (e-mails included, as the API's does). The
// workspace rule is the calls' (scope.ts): an appointment belongs to its agent's workspace.

const PAGE_SIZE = 50
const STATUSES = ['booked', 'cancelled'] as const

interface Filters { agent: string, status: string, from: string, to: string, skip: number }
const FILTER_NAMES = ['agent', 'status', 'from', 'to'] as const
// The filters' problems are shown on the page, beside the filter bar (parseFilters).
const LIST_QUERY = Type.Object({ agent: text('The agent'), status: text('The status'), from: text('“From”'), to: text('“To”'), skip: text('The page position'), cancelled: text('The cancellation notice') })

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

/** The cancel button of a booked appointment; `back`: the list as filtered, where the cancellation returns. */
const cancelColumn = (csrfToken: string, back: string): Column<AppointmentRow> => ({
  header: 'Cancel',
  cell: (row) => row.status === 'booked'
    ? html`<form method="post" action="/appointments/${row.id}/cancel">${csrfField(csrfToken)}<input type="hidden" name="back" value="${back}"><button type="submit" class="danger" aria-label="Cancel the appointment of ${row.name} on ${localTime(row.starts_at, row.time_zone)}">Cancel</button></form>`
    : '—'
})

function appointmentsPage ({ viewer, canChange, filters, agents, rows, total = 0, error, cancelled }: ListPage): string {
  const agentName = new Map(agents.map((agent) => [agent.id, agent.name]))
  const query = (skip: number) => listQuery(filters, FILTER_NAMES, skip)
  const back = `/appointments${query(filters.skip)}`
  const columns: Array<Column<AppointmentRow>> = [
    {
      header: 'When',
      cell: (row) => html`<time datetime="${row.starts_at.toISOString()}">${localTime(row.starts_at, row.time_zone)}</time>, until ${new Intl.DateTimeFormat('en-GB', { timeZone: row.time_zone, timeStyle: 'short' }).format(row.ends_at)}`
    },
    { header: 'Who', cell: (row) => html`${row.name}${row.phone !== null && html`<br>${row.phone}`}${row.email !== null && html`<br>${row.email}`}${row.notes !== null && html`<br><span class="hint">${row.notes}</span>`}` },
    { header: 'Agent', cell: (row) => agentName.get(row.agent_id) ?? row.agent_id },
    { header: 'Status', cell: (row) => html`${capital(row.status)}${row.cancel_reason !== null && html`: ${row.cancel_reason}`}` },
    { header: 'Call', cell: (row) => row.call_id === null ? '—' : html`<a href="/calls/${row.call_id}">The call</a>` },
    { header: 'Contact', cell: (row) => row.contact_id === null ? '—' : html`<a href="/contacts/${row.contact_id}">The contact</a>` }
  ]
  return layout({
    title: 'Appointments',
    viewer,
    current: '/appointments',
    body: html`
${cancelled === true && notice('success', 'The appointment is cancelled: its time is free again, and the e-mails with the cancellation are sent.')}
<p>What your agents' appointment booking tools booked during calls, soonest first. Times are in each appointment's time zone.</p>
${filterBar({
  action: '/appointments',
  label: 'Filter appointments',
  fields: [
    filterField('agent', 'Agent', filterSelect('agent', 'Any agent', withChosen(agents, filters.agent).map((agent) => ({ value: agent.id, label: agent.name })), filters.agent)),
    filterField('status', 'Status', filterSelect('status', 'Any status', STATUSES.map((status) => ({ value: status, label: capital(status) })), filters.status)),
    filterField('from', 'Starting from (UTC day)', html`<input id="from" name="from" type="date" value="${filters.from}">`),
    filterField('to', 'Starting until (UTC day, included)', html`<input id="to" name="to" type="date" value="${filters.to}">`)
  ],
  submit: 'Show appointments'
})}
${error !== undefined && notice('error', error)}
${rows !== undefined && dataTable({
  caption: `Appointments ${filters.skip + 1}–${filters.skip + rows.length} of ${total}, soonest first`,
  columns: [...columns, ...canChange ? [cancelColumn(viewer.csrfToken, back)] : []],
  rows,
  empty: filters.skip > 0 ? 'No more appointments.' : 'No appointments match. An agent with an appointment booking tool books them during calls.'
})}
${rows !== undefined && pager({
  label: 'Pages of appointments',
  previous: filters.skip > 0 ? { href: `/appointments${query(Math.max(0, filters.skip - PAGE_SIZE))}`, text: 'Earlier appointments' } : undefined,
  next: filters.skip + PAGE_SIZE < total ? { href: `/appointments${query(filters.skip + PAGE_SIZE)}`, text: 'Later appointments' } : undefined
})}`
  })
}

export async function consoleAppointmentRoutes (app: FastifyInstance, deps: AppointmentDeps): Promise<void> {
  const { db } = deps

  app.get<{ Querystring: Static<typeof LIST_QUERY> }>('/appointments', page({ querystring: LIST_QUERY }), async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const { scope, session } = scoped
    const viewer = viewerOf(session)
    const { agents } = await filterAgents(db, scope)
    const { filters, problem } = parseFilters(request.query)
    const shown = { viewer, canChange: scope.canChange, filters, agents }
    if (problem !== undefined) return sendPage(reply, 400, appointmentsPage({ ...shown, error: problem }))
    const from = calendarDay(filters.from)
    const to = calendarDay(filters.to)
    const { rows, total } = await listAppointments(db, scope.ownerId, {
      agentId: filters.agent === '' ? undefined : filters.agent,
      status: filters.status === '' ? undefined : filters.status as typeof STATUSES[number],
      from,
      to: to === undefined ? undefined : new Date(to.getTime() + DAY_MS),
      workspaceId: scope.workspaceId
    }, { limit: PAGE_SIZE, offset: filters.skip })
    return sendPage(reply, 200, appointmentsPage({ ...shown, rows, total, cancelled: request.query.cancelled !== undefined }))
  })

  app.post<{ Params: { id: string } }>('/appointments/:id/cancel', page({ params: idParams('id'), body: formBody({ back: text('The list to return to') }) }), async (request, reply) => {
    const scope = changeScope(request)
    const row = await findAppointment(db, scope.ownerId, request.params.id)
    if (row === undefined || !inScope(scope, row)) throw new HttpError(404, 'not_found', 'You have no appointment with that id.')
    const cancelled = await cancelAppointment(db, scope.ownerId, row.id, null)
    if (cancelled?.changed === true) await announce({ ...deps, log: request.log }, cancelled.row, 'cancelled')
    // Back to the list as it was filtered: only a path of this page, never another site.
    const { back } = formFields(request.body, ['back'])
    const to = /^\/appointments(\?[^\s]*)?$/.test(back) ? back : '/appointments'
    return reply.redirect(`${to}${to.includes('?') ? '&' : '?'}cancelled=1`, 303)
  })
}
