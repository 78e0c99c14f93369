import type { FastifyInstance } from 'fastify'
import { Type, type Static } from 'typebox'
import type { DB } from '../../db/database.ts'
import type { PhoneNumbersTable } from '../../db/schema.ts'
import type { Selectable } from 'kysely'
import { HttpError } from '../../http/errors.ts'
import { E164 } from '../../http/schemas.ts'
import type { JobSender } from '../../jobs/queues.ts'
import type { AgentRow } from '../agents/queries.ts'
import { placePhoneCall } from '../calls/phone-calls.ts'
import { listPhoneNumbers } from '../phone-numbers/queries.ts'
import { fieldCheck, formOf, inputField, problemsNotice, selectField, type Problems } from './fields.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, layout, notice, viewerOf, type Viewer } from './pages.ts'
import { formBody, ID, idParams, page, sendPage, text } from './reply.ts'
import { scopeOf, viewScope, type Scope } from './scope.ts'
import { agentInScope } from './agent-capabilities.ts'

// "Place a test phone call" (the agent's page: ring my phone with this agent) and "Simulate a call to this number"
// (a sandbox number's page). Both call the calls module's functions that the API calls (placePhoneCall is
// POST /v1/call/make-phone-call), so do-not-call, an inactive agent, a number whose calls nobody carries and every
// other refusal are the API's, said here in words on the form (docs/console.md, "Test phone calls").

const FIELDS = ['from_number', 'to_number'] as const
type Form = Record<typeof FIELDS[number], string>
type Number = Selectable<PhoneNumbersTable>

/** More numbers than a select shows usefully; the API places calls from any of them. */
const NUMBER_LIMIT = 200

const checkTo = fieldCheck('The number to call', E164, 'Write the number with + and its country code, such as +14155550123.')

/** The number as typed, without the spaces, dashes, dots and brackets people write numbers with. */
const dialled = (text: string) => text.replace(/[\s\-.()]/g, '')

/** Calls from a sandbox number are simulated: no phone rings (docs/voice.md, "Simulated calls"). */
const simulated = (number: Pick<Number, 'carrier'>) => number.carrier === 'sandbox'

/** The numbers the agent may call from: the scope's, this agent's outbound numbers first. */
export async function numbersFor (db: DB, scope: Scope, agent: AgentRow): Promise<Number[]> {
  const numbers = await listPhoneNumbers(db, scope.ownerId, { limit: NUMBER_LIMIT, workspace_id: scope.workspaceId })
  return [...numbers.filter((n) => n.outbound_agent_id === agent.id), ...numbers.filter((n) => n.outbound_agent_id !== agent.id)]
}

function numberLabel (number: Number, agent: AgentRow): string {
  const notes = [
    number.nickname !== '' && number.nickname,
    simulated(number) ? 'sandbox: simulated' : number.carrier === 'sip' ? 'SIP trunk' : number.carrier === 'twilio' ? 'Twilio' : 'Telnyx',
    number.outbound_agent_id === agent.id && 'this agent\'s'
  ].filter((note) => typeof note === 'string')
  return `${number.phone_number} (${notes.join(', ')})`
}

interface FormState { form?: Form, problems?: Problems, error?: string | SafeHtml, placed?: { callId: string, to: string, simulated: boolean } }

/** The form (or why there is none): in the agent's page, and alone on /agents/:id/phone-call after a refusal or a call. */
function phoneCallForm (viewer: Viewer, agent: AgentRow, numbers: Number[], state: FormState): SafeHtml {
  if (numbers.length === 0) {
    return html`<p>You have no phone number to call from yet: <a href="/phone-numbers">buy or import one on Phone numbers</a> (the sandbox's numbers place simulated calls), then come back here.</p>`
  }
  const form = state.form ?? { from_number: numbers[0].phone_number, to_number: '' }
  const problems = state.problems ?? {}
  const { placed } = state
  return html`${placed !== undefined && notice('success', html`${placed.simulated
    ? `A simulated call to ${placed.to} started: no phone rings (calls from sandbox numbers are simulated), and its transcript appears on the call's page in a few seconds.`
    : `Calling ${placed.to} now: the phone should ring in a moment. Answer it to talk to ${agent.agent_name}.`} <a href="/calls/${placed.callId}">View this call</a>`)}
${state.error !== undefined && notice('error', state.error)}
${problemsNotice(problems)}
<form method="post" action="/agents/${agent.id}/phone-call#phone-call" class="stack">
  ${csrfField(viewer.csrfToken)}
  ${selectField({ name: 'from_number', label: 'Call from', value: form.from_number, problems, prefix: 'phone-call-', hint: 'One of your numbers: the caller id the phone shows. Calls from the sandbox\'s numbers are simulated: no phone rings.', choices: numbers.map((n) => ({ value: n.phone_number, label: numberLabel(n, agent) })) })}
  ${inputField({ name: 'to_number', label: 'Number to call', value: form.to_number, problems, prefix: 'phone-call-', hint: 'Your phone, with + and the country code, such as +14155550123.', attrs: html` type="tel" autocomplete="tel" maxlength="30" required` })}
  <button type="submit">${placed === undefined ? 'Call this number' : 'Call again'}</button>
</form>`
}

/** The agent page's section (console/agents.ts puts it after "Talk to this agent"): the view of `numbers` (numbersFor). */
export const phoneCallSectionView = (viewer: Viewer, agent: AgentRow, numbers: Number[]): SafeHtml => html`<section aria-labelledby="phone-call-title" id="phone-call">
  <h2 id="phone-call-title">Place a test phone call</h2>
  <p>${agent.agent_name} calls the number you give, as POST /v1/call/make-phone-call would.</p>
  ${phoneCallForm(viewer, agent, numbers, {})}
</section>`

/** The section with its numbers loaded, for a page that has not loaded them itself. */
export async function phoneCallSection (db: DB, viewer: Viewer, scope: Scope, agent: AgentRow): Promise<SafeHtml> {
  return phoneCallSectionView(viewer, agent, await numbersFor(db, scope, agent))
}

/**
 * A sandbox number's section on its page (console/phone-numbers.ts): a simulated call to the number, and how the last
 * one went (the page returns here, #simulate, so the outcome is shown where the button was).
 */
export function simulateSection (viewer: Viewer, number: Pick<Number, 'id' | 'carrier' | 'phone_number' | 'inbound_agent_id'>, outcome: { callId?: string, error?: string }): SafeHtml | false {
  if (!simulated(number)) return false
  return html`<section aria-labelledby="simulate-title" id="simulate">
  <h2 id="simulate-title">Simulate a call to this number</h2>
  ${outcome.callId !== undefined && notice('success', html`A simulated call to ${number.phone_number} started: its inbound agent answers in a few seconds. <a href="/calls/${outcome.callId}">View this call</a>`)}
  ${outcome.error !== undefined && notice('error', outcome.error)}
  <p>The sandbox's numbers take no calls from phones. A simulated caller calls ${number.phone_number} from a fictional number and asks its inbound agent for an appointment; the call is kept, analysed and delivered as an inbound phone call.</p>
  ${number.inbound_agent_id === null
    ? html`<p>Choose an inbound agent above and save first: it answers the call.</p>`
    : html`<form method="post" action="/phone-numbers/${number.id}/simulate#simulate">${csrfField(viewer.csrfToken)}<button type="submit">Simulate a call</button></form>`}
</section>`
}

// simulateInboundCall's refusals of a number of the account: what the redirect after a refused "Simulate a call" names
// (Post/Redirect/Get), each in words for the number's page (`conflict`: not a sandbox number, whose form is not shown).
const SIMULATE_REFUSALS: Record<string, string> = {
  no_inbound_agent: 'No call: the number has no inbound agent. Choose one above and save, then simulate a call.',
  agent_inactive: 'No call: the number\'s inbound agent is inactive. Set its status to active on its page, then simulate a call.',
  conflict: 'No call: only the sandbox\'s numbers take simulated calls.'
}

/** The refusal of simulateInboundCall, named for the redirect; anything else is rethrown. */
export function simulateRefusal (err: unknown): string {
  if (err instanceof HttpError && err.statusCode === 409 && SIMULATE_REFUSALS[err.code] !== undefined) return err.code
  throw err
}

/** A refusal the number page's address names, in words; undefined for a name that is none. */
export const simulateRefusalText = (code: string | undefined): string | undefined => Object.hasOwn(SIMULATE_REFUSALS, code ?? '') ? SIMULATE_REFUSALS[code!] : undefined

// placePhoneCall's refusals (all of them: a wrong agent is a 404 before the form is read, a fault of ours a 500), each
// named in the redirect after a refused form (Post/Redirect/Get) so that the page says it again on a reload without
// placing anything; `invalid`: the number to call is not one.
const REFUSALS = ['invalid', 'do_not_call', 'agent_inactive', 'sip_not_connected', 'not_found'] as const
type Refusal = typeof REFUSALS[number]
const isRefusal = (code: string | undefined): code is Refusal => (REFUSALS as readonly string[]).includes(code ?? '')

/** The refusal of placePhoneCall; anything else (a fault of ours) is rethrown. */
function refusalOf (err: unknown): Refusal {
  if (err instanceof HttpError && isRefusal(err.code) && err.statusCode < 500) return err.code
  throw err
}

/** A refusal in words on the form. */
function refusalState (refusal: Refusal, form: Form): FormState {
  switch (refusal) {
    case 'invalid':
      return { form, problems: { to_number: checkTo(dialled(form.to_number)) } }
    case 'do_not_call':
      return { form, error: html`No call: ${form.to_number} is on your do-not-call list. <a href="/do-not-call">Take it off the list</a> to call it.` }
    case 'agent_inactive':
      return { form, error: 'No call: this agent is inactive. Set its status to active in its settings, then call again.' }
    case 'sip_not_connected':
      return { form, error: `No call: ${form.from_number} is connected to a SIP trunk whose calls this server does not carry (docs/sip.md). Choose another number.` }
    case 'not_found':
      return { form, error: `No call: ${form.from_number} is not one of your numbers. Choose one of the list.` }
  }
}

/** The form alone, after a refusal or a call (the agent's page holds it otherwise). */
function phoneCallPage (viewer: Viewer, agent: AgentRow, numbers: Number[], state: FormState): string {
  return layout({
    title: `Test phone call: ${agent.agent_name}`,
    viewer,
    current: '/agents',
    body: html`<p><a href="/agents/${agent.id}">Back to ${agent.agent_name}</a></p>
<div id="phone-call">${phoneCallForm(viewer, agent, numbers, state)}</div>`
  })
}

// What the redirect after the form carries: the number called and the one it was called from, with the call placed or
// the refusal.
const Outcome = Type.Object({ placed: text('The call'), refused: text('The refusal'), to: text('The number called'), from: text('The number called from') })

export async function consoleTestPhoneCallRoutes (app: FastifyInstance, { db, jobs }: { db: DB, jobs: JobSender }): Promise<void> {
  app.get<{ Params: { id: string }, Querystring: Static<typeof Outcome> }>('/agents/:id/phone-call', page({ params: idParams('id'), querystring: Outcome }), async (request, reply) => {
    const scoped = viewScope(request, reply)
    if (scoped === undefined) return reply
    const agent = await agentInScope(db, scoped.scope, request.params.id)
    const { placed, refused, to = '', from = '' } = request.query
    const numbers = await numbersFor(db, scoped.scope, agent)
    const number = numbers.find((n) => n.phone_number === from)
    const form = { from_number: from, to_number: to }
    const state: FormState = placed !== undefined && ID.test(placed) && number !== undefined
      ? { placed: { callId: placed, to, simulated: simulated(number) }, form }
      : isRefusal(refused) ? refusalState(refused, form) : {}
    return sendPage(reply, 200, phoneCallPage(viewerOf(scoped.session), agent, numbers, state))
  })

  // A member may place one, as they may talk to the agent: a call changes no setting (its credits are the owner's).
  // Placed or refused, the answer is a redirect to the form's page, which says what happened (Post/Redirect/Get).
  app.post<{ Params: { id: string } }>('/agents/:id/phone-call', page({ params: idParams('id'), body: formBody({ from_number: text('The number to call from'), to_number: text('The number to call') }) }), async (request, reply) => {
    const scope = scopeOf(request.consoleSession!)
    const agent = await agentInScope(db, scope, request.params.id)
    const typed = formOf(request, FIELDS)
    const form = { ...typed, to_number: dialled(typed.to_number) }
    const outcome = (query: { placed: string } | { refused: Refusal }, to: string) =>
      reply.redirect(`/agents/${agent.id}/phone-call?${new URLSearchParams({ ...query, to, from: form.from_number }).toString()}#phone-call`, 303)
    if (checkTo(form.to_number) !== undefined) return outcome({ refused: 'invalid' }, typed.to_number)
    // In a workspace only its numbers are offered: another is "not one of yours", as another account's is.
    const numbers = await numbersFor(db, scope, agent)
    try {
      if (!numbers.some((n) => n.phone_number === form.from_number)) throw new HttpError(404, 'not_found', `phone number ${form.from_number}`)
      const call = await placePhoneCall(db, jobs, scope.ownerId, { agent_id: agent.id, from_number: form.from_number, to_number: form.to_number })
      return outcome({ placed: call._id }, form.to_number)
    } catch (err) {
      return outcome({ refused: refusalOf(err) }, form.to_number)
    }
  })
}
