import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import type { DeliveryAttempt } from '../../db/schema.ts'
import { HttpError } from '../../http/errors.ts'
import { resend, type DeliveryDeps } from '../deliveries/engine.ts'
import { actionSettings, findDelivery, listDeliveries, type DeliveryRow } from '../deliveries/queries.ts'
import type { ApiCallSettings } from '../capabilities/types/api-call.ts'
import { displayUrl } from '../deliveries/render.ts'
import { deliveryKind } from './messages.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, layout, notice, viewerOf, when, type Viewer } from './pages.ts'
import { filterAgents, changeScope, viewScope, type Scope } from './scope.ts'
import { formBody, ID, idParams, listFilter, listQuery, page, sendPage, text, withChosen } from './reply.ts'

// The console's delivery log: the API's GET /v1/webhook-deliveries with its filters, one delivery with every
// attempt, and Send again, which calls the same resend() as POST /v1/webhook-deliveries/:id/resend.

export const PAGE_SIZE = 50
// An answer's preview is kept up to 1 KiB; the table shows its start.
const PREVIEW_CHARS = 200

/** The specification's words for the stored statuses; `pending` is Retrying (Queued before its first attempt). */
const STATUS_LABELS: Record<DeliveryRow['status'], string> = { delivered: 'Delivered', pending: 'Retrying', failed: 'Not delivered' }
const STATUSES = Object.keys(STATUS_LABELS) as Array<DeliveryRow['status']>

const statusOf = (row: DeliveryRow) => row.status === 'pending' && row.attempts_made === 0 ? 'Queued' : STATUS_LABELS[row.status]
const kindOf = deliveryKind
const nextAttempt = (row: DeliveryRow) => row.status === 'pending' && row.next_attempt_at !== null ? when(row.next_attempt_at) : '—'

/** The list's filters as the form sends them: '' means any. */
interface Filters { status: string, agent: string, call: string, skip: number }

const FILTER_NAMES = ['status', 'agent', 'call'] as const
const LIST_QUERY = Type.Object({ status: listFilter('The status'), agent: listFilter('The agent'), call: listFilter('The call'), skip: listFilter('The page position') })
const DELIVERY = idParams('id')

/** The query's filters, or the reason they cannot be used (shown on the page). */
function parseFilters (query: Record<string, unknown>): { filters: Filters, problem?: string } {
  const text = (name: string) => typeof query[name] === 'string' ? (query[name] as string).trim() : ''
  const filters: Filters = { status: text('status'), agent: text('agent').toLowerCase(), call: text('call').toLowerCase(), skip: 0 }
  const problem = (message: string) => ({ filters, problem: message })
  const repeated = [...FILTER_NAMES, 'skip'].find((name) => query[name] !== undefined && typeof query[name] !== 'string')
  if (repeated !== undefined) return problem(`The filter “${repeated}” was given more than once.`)
  if (filters.status !== '' && !(STATUSES as string[]).includes(filters.status)) return problem('Choose Delivered, Retrying or Not delivered as the status.')
  if (filters.agent !== '' && !ID.test(filters.agent)) return problem('That agent is not a valid agent id.')
  if (filters.call !== '' && !ID.test(filters.call)) return problem('A call id is 24 characters 0-9 and a-f, as on the call\'s page.')
  const skip = text('skip')
  if (skip !== '' && !/^\d{1,9}$/.test(skip)) return problem('The page position must be a whole number.')
  filters.skip = Number(skip)
  return { filters }
}

interface ListOptions { viewer: Viewer, filters: Filters, agents: Map<string, string>, rows?: DeliveryRow[], total?: number, error?: string }

function listPage ({ viewer, filters, agents, rows, total = 0, error }: ListOptions): string {
  const agentOptions = withChosen([...agents].map(([id, name]) => ({ id, name })), filters.agent)
  const previous = Math.max(0, filters.skip - PAGE_SIZE)
  const hasNext = rows !== undefined && filters.skip + rows.length < total
  return layout({
    title: 'Deliveries',
    viewer,
    current: '/deliveries',
    body: html`
<p>After each call its data goes to the agent's webhook URL and to its API call actions. Every attempt is logged here.</p>
<form method="get" action="/deliveries" aria-label="Filter deliveries">
  <div class="stack">
    <label for="status">Status</label>
    <select id="status" name="status"><option value="">Any status</option>${STATUSES.map((status) =>
      html`<option value="${status}"${status === filters.status && html` selected`}>${STATUS_LABELS[status]}</option>`)}</select>
    <label for="agent">Agent</label>
    <select id="agent" name="agent"><option value="">Any agent</option>${agentOptions.map((agent) =>
      html`<option value="${agent.id}"${agent.id === filters.agent && html` selected`}>${agent.name}</option>`)}</select>
    <label for="call">Call id</label>
    <input id="call" name="call" value="${filters.call}" maxlength="24" autocomplete="off" spellcheck="false" aria-describedby="call-hint">
    <p id="call-hint" class="hint">Optional: the deliveries of one call.</p>
    <button type="submit">Show deliveries</button>
  </div>
</form>
${error !== undefined && notice('error', error)}
${rows !== undefined && (rows.length === 0
  ? html`<p>${filters.skip > 0 ? 'No more deliveries.' : 'No deliveries match.'}</p>`
  : html`<div class="table"><table>
  <caption>Deliveries ${filters.skip + 1}–${filters.skip + rows.length} of ${total}, newest first</caption>
  <thead><tr><th scope="col">Created</th><th scope="col">Kind</th><th scope="col">Name</th><th scope="col">Agent</th><th scope="col">Call</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Next attempt</th></tr></thead>
  <tbody>${rows.map((row) => html`<tr>
    <td><a href="/deliveries/${row.id}">${when(row.created_at)}</a></td>
    <td>${kindOf(row)}</td>
    <td>${row.name}</td>
    <td>${agents.get(row.agent_id) ?? row.agent_id}</td>
    <td><a href="/calls/${row.call_id}"><span class="visually-hidden">Call </span><code>…${row.call_id.slice(-8)}</code></a></td>
    <td>${statusOf(row)}</td>
    <td>${row.attempts_made} of ${row.attempts_max}</td>
    <td>${nextAttempt(row)}</td>
  </tr>`)}</tbody>
</table></div>`)}
${rows !== undefined && (filters.skip > 0 || hasNext) && html`<nav aria-label="Pages of deliveries"><ul class="pager">
  ${filters.skip > 0 && html`<li><a href="/deliveries${listQuery(filters, FILTER_NAMES, previous)}" rel="prev">Newer deliveries</a></li>`}
  ${hasNext && html`<li><a href="/deliveries${listQuery(filters, FILTER_NAMES, filters.skip + PAGE_SIZE)}" rel="next">Older deliveries</a></li>`}
</ul></nav>`}`
  })
}

/** What an attempt got: the status code, or the error (a time-out, an unreachable receiver). */
function answerOf (attempt: DeliveryAttempt): string {
  if (attempt.status_code !== undefined) return `HTTP ${attempt.status_code}${attempt.error === undefined ? '' : ` (${attempt.error})`}`
  return attempt.error ?? '—'
}

function preview (attempt: DeliveryAttempt): SafeHtml | string {
  const text = attempt.response_preview ?? ''
  if (text === '') return '—'
  return html`<code class="preview">${text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}…` : text}</code>`
}

/** The notice after Send again, read from the attempt it logged: true after a reload too, and nothing to store. */
function sentNotice (row: DeliveryRow, sent: number | undefined): SafeHtml | false {
  const attempt = (row.attempts ?? []).find((a) => a.n === sent && a.manual === true)
  if (attempt === undefined) return false
  const delivered = attempt.status_code !== undefined && attempt.status_code >= 200 && attempt.status_code < 300 && attempt.error === undefined
  return delivered
    ? notice('success', `Sent again: delivered (attempt ${attempt.n}, ${answerOf(attempt)} in ${attempt.duration_ms} ms).`)
    : notice('error', `Sent again: not delivered (attempt ${attempt.n}: ${answerOf(attempt)}). The status stays as it was.`)
}

interface DetailOptions { viewer: Viewer, scope: Scope, row: DeliveryRow, agentName: string | undefined, receiver: string | undefined, sent?: number, error?: string }

function deliveryPage ({ viewer, scope, row, agentName, receiver, sent, error }: DetailOptions): string {
  const attempts = row.attempts ?? []
  const fact = (label: string, value: unknown) => html`<dt>${label}</dt><dd>${value}</dd>`
  return layout({
    title: `${kindOf(row)}: ${row.name}`,
    viewer,
    current: '/deliveries',
    body: html`
<p><a href="/deliveries">All deliveries</a></p>
${sentNotice(row, sent)}
${error !== undefined && notice('error', error)}
<dl class="facts">
  ${fact('Status', statusOf(row))}
  ${fact('Attempts', `${row.attempts_made} of ${row.attempts_max} scheduled`)}
  ${fact('Next attempt', nextAttempt(row))}
  ${row.delivered_at !== null && fact('Delivered', when(row.delivered_at))}
  ${fact('Agent', agentName ?? row.agent_id)}
  ${fact('Call', html`<a href="/calls/${row.call_id}"><code>${row.call_id}</code></a>`)}
  ${fact('Receiver', receiver === undefined ? 'deleted' : html`<code>${receiver}</code>`)}
  ${fact('Created', when(row.created_at))}
  ${fact('Delivery id', html`<code>${row.delivery_id}</code>`)}
</dl>
<h2>Attempts</h2>
${attempts.length === 0
  ? html`<p>No attempt yet: the first one is on its way.</p>`
  : html`<div class="table"><table>
  <thead><tr><th scope="col">#</th><th scope="col">Time</th><th scope="col">Answer</th><th scope="col">Duration</th><th scope="col">Start of the answer</th></tr></thead>
  <tbody>${attempts.map((attempt) => html`<tr>
    <td>${attempt.n}${attempt.manual === true && html` <span class="hint">(sent again)</span>`}</td>
    <td>${when(new Date(attempt.at))}</td>
    <td>${answerOf(attempt)}</td>
    <td>${attempt.duration_ms} ms</td>
    <td>${preview(attempt)}</td>
  </tr>`)}</tbody>
</table></div>`}
<h2>Send again</h2>
${row.url === null
  ? html`<p>The request was deleted ${row.purged_at !== null && html`on ${when(row.purged_at)} `}after the retention period; it cannot be sent again.</p>`
  : scope.canChange
    ? html`<p>Sends the same request with the same delivery id now, outside the schedule, and waits for the answer. A success makes the delivery Delivered; a failure leaves its status as it is and sends no failure e-mail.</p>
<form method="post" action="/deliveries/${row.id}/resend">${csrfField(viewer.csrfToken)}<button type="submit">Send again</button></form>`
    : html`<p>An admin of this workspace can send it again.</p>`}`
  })
}
const noSuchDelivery = () => new HttpError(404, 'not_found', 'You have no delivery with that id.')

/**
 * The console's Deliveries pages (docs/console.md), inside the console's session scope: the log, a delivery
 * with its attempts, and Send again. A workspace sees the deliveries of its calls.
 */
export async function consoleDeliveryRoutes (app: FastifyInstance, { deliveries }: { deliveries: DeliveryDeps }): Promise<void> {
  const { db } = deliveries

  const agentNames = async (scope: Scope) => new Map((await filterAgents(db, scope)).agents.map((agent) => [agent.id, agent.name]))

  const deliveryInScope = async (scope: Scope, id: string) => {
    const row = await findDelivery(db, scope.ownerId, id, scope.workspaceId)
    if (row === undefined) throw noSuchDelivery()
    return row
  }

  const showDelivery = async (request: FastifyRequest, reply: FastifyReply, status: number, scope: Scope, row: DeliveryRow, extra: { sent?: number, error?: string }) => {
    // The action's settings tell which query values the masked URL may show, as the API's answer does.
    const settings = row.action_id === null ? undefined : await actionSettings(db, row.action_id) as ApiCallSettings | undefined
    const agentName = (await agentNames(scope)).get(row.agent_id)
    const receiver = row.url === null ? undefined : `${row.method} ${displayUrl(row.url, row.method, settings)}`
    return sendPage(reply, status, deliveryPage({ viewer: viewerOf(request.consoleSession!), scope, row, agentName, receiver, ...extra }))
  }

  app.get('/deliveries', page({ querystring: LIST_QUERY }), async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const { session, scope } = scoped
    const agents = await agentNames(scope)
    const { filters, problem } = parseFilters(request.query as Record<string, unknown>)
    if (problem !== undefined) return sendPage(reply, 400, listPage({ viewer: viewerOf(session), filters, agents, error: problem }))
    const { rows, total } = await listDeliveries(db, scope.ownerId, {
      status: filters.status === '' ? undefined : filters.status as DeliveryRow['status'],
      agentId: filters.agent || undefined,
      callId: filters.call || undefined,
      workspaceId: scope.workspaceId
    }, { limit: PAGE_SIZE, offset: filters.skip })
    return sendPage(reply, 200, listPage({ viewer: viewerOf(session), filters, agents, rows, total }))
  })

  app.get<{ Params: { id: string }, Querystring: { sent?: string } }>('/deliveries/:id', page({ params: DELIVERY, querystring: Type.Object({ sent: text('The attempt sent') }) }), async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const row = await deliveryInScope(scoped.scope, request.params.id)
    const sent = request.query.sent !== undefined && /^\d{1,9}$/.test(request.query.sent) ? Number(request.query.sent) : undefined
    return await showDelivery(request, reply, 200, scoped.scope, row, { sent })
  })

  app.post<{ Params: { id: string } }>('/deliveries/:id/resend', page({ params: DELIVERY, body: formBody({}) }), async (request, reply) => {
    const scope = changeScope(request)
    const row = await deliveryInScope(scope, request.params.id)
    let resent
    try {
      // Synchronous, as the API's resend: the attempt is sent and logged before this answers.
      resent = await resend(deliveries, scope.ownerId, row.id)
    } catch (err) {
      if (err instanceof HttpError && err.code === 'delivery_purged') {
        return await showDelivery(request, reply, 409, scope, row, { error: 'Not sent: the request was deleted after the retention period, so it cannot be sent again.' })
      }
      throw err
    }
    const attempts = resent.row.attempts ?? []
    return reply.redirect(`/deliveries/${row.id}?sent=${attempts[attempts.length - 1]?.n ?? ''}`, 303)
  })
}
