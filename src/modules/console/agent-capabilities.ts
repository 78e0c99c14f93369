import { readFileSync } from 'node:fs'
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { HttpError, type AjvIssue } from '../../http/errors.ts'
import { compileBodySchema, MAX_JSON_DEPTH } from '../../http/validation.ts'
import { countCapabilities, findAgent, findCapability, listAgents, listCapabilities, type AgentRow, type CapabilityRow } from '../agents/queries.ts'
import { ACTIONS, TOOLS, type Kind } from '../capabilities/catalog.ts'
import { apiRag } from '../capabilities/types/api-rag.ts'
import { addCapability, changeCapability, removeCapability } from '../capabilities/manage.ts'
import { whenOf } from '../capabilities/registry.ts'
import { headerProblem, MASK } from '../agents/settings-parts.ts'
import { ApiCallSettings } from '../capabilities/types/api-call.ts'
import { testApiCall, type SentRequest } from '../deliveries/action-test.ts'
import type { DeliveryDeps } from '../deliveries/engine.ts'
import { maskUrlTemplate, viewerApiCallSettings } from '../deliveries/render.ts'
import type { Outcome } from '../../net/request.ts'
import { listKnowledgeBaseRows } from '../knowledge-bases/queries.ts'
import {
  fieldValues, objectFields, pairValues, readFields, readPairs, renderField, renderFields, renderPairs, the,
  type Field, type FormValues, type Option, type Pairs, type Problems
} from './forms.ts'
import { KNOWLEDGE_TOOL_NAME } from './agent-knowledge.ts'
import { errorSummary } from './components.ts'
import { DRAFT_QUERY, draftOf, formSaved, refuseForm } from './drafts.ts'
import { describe } from './fields.ts'
import { hoursText, HOURS_HINT, readHours } from './opening-hours.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, layout, notice, viewerOf, type Viewer } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { changeScope, inScope, viewScope, type Scope } from './scope.ts'
import { formBody, ID, idParams, openFormBody, page, sendPage, text } from './reply.ts'
import { CONNECTING_PAGE_CSP } from './security.ts'

// An agent's actions (what happens after a call) and tools (what the agent may do during one) in the console:
// listed on the agent's page, each created, edited and deleted on its own page with a form drawn from its type's
// settings schema. They go through the API's functions (addCapability, changeCapability), so the limits, the
// checks and the write-only header values are the API's; an api_call action's Test button sends through the
// function of POST /v1/agent/:id/actions/:agentActionId/test.
/** A JSON body or a prompt-sized description is longer than the console's usual 16 KB form. */
const FORM_LIMIT = { bodyLimit: 512 * 1024 }
const KINDS = [ACTIONS, TOOLS]

const typeLabel = (kind: Kind, type: string) => kind.types[type]?.label ?? type

/** Labels of the members every type shares; each type adds its own (fieldLabels). */
const LABELS: Record<string, string> = { when: 'When' }
const labelsOf = (kind: Kind, type: string) => ({ ...LABELS, ...kind.types[type].fieldLabels })
/** Hints of the members every action shares, in words rather than the API's values. */
const HINTS: Record<string, string> = {
  when: 'After the call: sent once the call has been analysed, and retried until it is delivered. During the call: the agent may use it while it talks, once, and hears the result.',
  description: 'Tells the agent when to use it during a call.'
}

/** What a row's state says: whether it acts, and when (actions). */
function stateOf (kind: Kind, row: CapabilityRow): string {
  if (!row.is_active) return 'inactive'
  if (kind !== ACTIONS) return 'active'
  return { after_call: 'active, after the call', during_call: 'active, during the call', both: 'active, during and after the call' }[whenOf(row.settings)]
}

/** The write-only headers of api_call actions and mcp tools; the query parameters of api_call actions. */
const HEADERS: Pairs = { name: 'settings.headers', noun: 'header', caption: 'Headers (values are never shown)', keep: MASK }
const QUERY: Pairs = { name: 'settings.query', noun: 'parameter', caption: 'Query parameters ({{variables}} allowed)' }
const HAND_DRAWN = ['headers', 'query', 'body', 'retry_schedule', 'parameters', 'opening_hours']
/** An API call's members drawn before its headers, query and body. */
const FIRST = ['name', 'when', 'description', 'url', 'method']

const ACTIVE = objectFields(Type.Object({ is_active: Type.Boolean() }), '', { labels: { is_active: 'Active' }, hints: { is_active: 'An inactive one is kept but not used.' } })
const RETRY_MODE: Field = {
  name: 'retry',
  key: 'retry',
  label: 'Retries',
  schema: Type.Union([Type.Literal('default'), Type.Literal('none'), Type.Literal('custom')]),
  required: true,
  options: [
    { value: 'default', label: 'The default schedule (8 attempts over 3 days)' },
    { value: 'none', label: 'None: one attempt' },
    { value: 'custom', label: 'My own pauses' }
  ]
}
const RETRY_SCHEDULE = ApiCallSettings.properties.retry_schedule
const RETRY_LABEL = 'Pauses before each retry (seconds)'
const validateRetries = compileBodySchema(RETRY_SCHEDULE)

interface Choices { agents: Option[], knowledgeBases: Option[] }

const WHEN_OPTIONS: Option[] = [
  { value: 'after_call', label: 'After the call (a delivery, retried)' },
  { value: 'during_call', label: 'During the call (a function the agent uses)' },
  { value: 'both', label: 'During and after the call' }
]

function settingsFields (kind: Kind, type: string, choices: Choices): Field[] {
  return objectFields(kind.types[type].schema, 'settings.', {
    omit: HAND_DRAWN,
    labels: labelsOf(kind, type),
    hints: { ...HINTS, ...kind.types[type].fieldHints },
    options: { agent_id: choices.agents, knowledge_base_ids: choices.knowledgeBases, when: WHEN_OPTIONS },
    multiline: ['message']
  })
}

const hasHeaders = (kind: Kind, type: string) => kind.types[type].schema.properties.headers !== undefined
/** The calendar tools' opening hours: a textarea of one line per day (opening-hours.ts). */
const hasHours = (kind: Kind, type: string) => kind.types[type].schema.properties.opening_hours !== undefined
const isApiCall = (kind: Kind, type: string) => kind === ACTIONS && type === 'api_call'

/**
 * The knowledge search tool is given in one place, the agent's Knowledge section (agent-knowledge.ts), which adds,
 * changes and removes it as knowledge bases are ticked: these pages neither offer it nor change it.
 */
const isKnowledgeSearch = (kind: Kind, type: string) => kind === TOOLS && type === apiRag.type
const knowledgeSection = (agent: AgentRow) => `/agents/${agent.id}#knowledge`
const KNOWLEDGE_REFUSAL = `The knowledge search tool (${KNOWLEDGE_TOOL_NAME}) is not added or changed here: tick the knowledge bases the agent searches in its Knowledge section.`
/** Where the knowledge search tool would be offered or edited: the way there. */
const knowledgePointer = (agent: AgentRow) => html`<p>Knowledge bases are given to the agent in its <a href="${knowledgeSection(agent)}">Knowledge section</a>, which adds its search tool (${KNOWLEDGE_TOOL_NAME}) and keeps it in step with the knowledge bases ticked there.</p>`

/** A stored (or default) settings object as form text; header values never leave the server. */
function formOf (kind: Kind, type: string, settings: Record<string, unknown>, active: boolean, choices: Choices): FormValues {
  const values: FormValues = { ...fieldValues(settingsFields(kind, type, choices), settings), ...fieldValues(ACTIVE, { is_active: active }) }
  if (hasHeaders(kind, type)) Object.assign(values, pairValues(HEADERS, settings.headers as Record<string, string> | undefined))
  if (hasHours(kind, type)) values['settings.opening_hours'] = hoursText(settings.opening_hours)
  if (isApiCall(kind, type)) {
    const schedule = settings.retry_schedule as number[] | undefined
    Object.assign(values, pairValues(QUERY, settings.query as Record<string, string> | undefined), {
      'settings.body': JSON.stringify(settings.body ?? {}, null, 2),
      'settings.parameters': settings.parameters === undefined ? '' : JSON.stringify(settings.parameters, null, 2),
      retry: schedule === undefined ? 'default' : schedule.length === 0 ? 'none' : 'custom',
      'settings.retry_schedule': schedule?.join(', ') ?? ''
    })
  }
  return values
}

/**
 * Stored settings as someone who may only view them (a workspace `member`) sees them: the URLs and query values masked
 * as the delivery log masks them, since a key in a query parameter is a credential like a header value.
 */
function viewedSettings (kind: Kind, type: string, settings: Record<string, unknown>): Record<string, unknown> {
  if (isApiCall(kind, type)) return viewerApiCallSettings(settings as ApiCallSettings)
  return typeof settings.server_url === 'string' ? { ...settings, server_url: maskUrlTemplate(settings.server_url) } : settings
}

/** Where a JSON value cannot be stored or sent: too deep, or text PostgreSQL refuses. */
export function jsonProblem (value: unknown, depth = 0): string | undefined {
  if (depth > MAX_JSON_DEPTH) return `nests deeper than ${MAX_JSON_DEPTH} levels`
  if (typeof value === 'string') return value.isWellFormed() && !value.includes('\0') ? undefined : 'holds a NUL character or an unpaired surrogate'
  if (value === null || typeof value !== 'object') return undefined
  for (const [key, item] of Object.entries(value)) {
    const problem = jsonProblem(key, depth + 1) ?? jsonProblem(item, depth + 1)
    if (problem !== undefined) return problem
  }
  return undefined
}

/** A JSON object typed in a textarea (the body, the parameters); `empty` is what an empty one means. */
function readJson (form: FormValues, member: 'body' | 'parameters', empty: unknown, example: string): { value?: unknown, problem?: string } {
  const text = form[`settings.${member}`]
  const noun = `The ${member}`
  if (text === undefined) return {}
  if (text.trim() === '') return { value: empty }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    return { problem: `${noun} is not valid JSON: ${(err as Error).message}.` }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { problem: `${noun} must be a JSON object, such as ${example}.` }
  const problem = jsonProblem(value)
  return problem === undefined ? { value } : { problem: `${noun} ${problem}.` }
}

const PARAMETERS_EXAMPLE = '{"type": "object", "properties": {"order_id": {"type": "string", "description": "the order number"}}, "required": ["order_id"]}'

function readRetries (form: FormValues): { value?: number[] | null, problem?: string } {
  const mode = form.retry
  if (mode === undefined) return {}
  if (mode === 'default') return { value: null }
  if (mode === 'none') return { value: [] }
  const parts = (form['settings.retry_schedule'] ?? '').split(/[\s,]+/).filter((part) => part !== '')
  if (parts.length === 0) return { problem: 'Give the pauses, such as 60, 300, 3600; or choose another kind of retries.' }
  if (!parts.every((part) => /^\d+$/.test(part))) return { problem: 'The pauses must be whole numbers of seconds, separated by commas.' }
  const value = parts.map(Number)
  if (validateRetries(value)) return { value }
  const issue = validateRetries.errors![0] as AjvIssue
  return { problem: issue.keyword === 'maxItems' ? `At most ${(RETRY_SCHEDULE as { maxItems?: number }).maxItems ?? 10} retries.` : 'Each pause must be 60 to 604800 seconds.' }
}

/** The API's rule on header names (headerProblem), under each row's name. */
function headerNameProblems (form: FormValues): Problems {
  const problems: Problems = {}
  for (const [field, value] of Object.entries(form)) {
    const name = /^settings\.headers\.\d+\.name$/.test(field) ? value?.trim() ?? '' : ''
    const problem = name === '' ? undefined : headerProblem({ [name]: '' })
    if (problem === undefined) continue
    // Either the name is not a token of HTTP, or it is one Switchboard sets itself.
    problems[field] = problem.includes('invalid header name') ? 'This is not a valid header name.' : `${name} is set by Switchboard and cannot be configured.`
  }
  return problems
}

/**
 * The settings a form sent: each member checked by its schema, null for an emptied optional member (its default),
 * headers with `MASK` for a stored value left empty. The whole object is then checked by addCapability or
 * changeCapability, as the API's are.
 */
function readSettings (kind: Kind, type: string, form: FormValues, choices: Choices): { settings: Record<string, unknown>, active?: boolean, problems: Problems } {
  const { values, problems } = readFields(settingsFields(kind, type, choices), form)
  const active = readFields(ACTIVE, form).values.is_active as boolean | undefined
  if (hasHeaders(kind, type)) {
    const headers = readPairs(HEADERS, form)
    Object.assign(problems, headers.problems, headerNameProblems(form))
    if (headers.value !== undefined) values.headers = headers.value
  }
  const hours = form['settings.opening_hours']
  if (hasHours(kind, type) && hours !== undefined) {
    const read = readHours(hours)
    if (read.problem !== undefined) problems['settings.opening_hours'] = read.problem
    else values.opening_hours = read.value
  }
  if (isApiCall(kind, type)) {
    const query = readPairs(QUERY, form)
    Object.assign(problems, query.problems)
    if (query.value !== undefined) values.query = query.value
    for (const [member, empty, example] of [['body', {}, '{"name": "{{name}}"}'], ['parameters', null, PARAMETERS_EXAMPLE]] as const) {
      const read = readJson(form, member, empty, example)
      if (read.problem !== undefined) problems[`settings.${member}`] = read.problem
      else if (read.value !== undefined) values[member] = read.value
    }
    const retries = readRetries(form)
    if (retries.problem !== undefined) problems['settings.retry_schedule'] = retries.problem
    else if (retries.value !== undefined) values.retry_schedule = retries.value
  }
  return { settings: values, active, problems }
}

/**
 * The API's message about settings as the console shows it: under the field it names ("body.settings.url must
 * be …"), or above the form ("body.settings needs a recipient …", a limit, a missing integration).
 */
function problemsOfError (kind: Kind, type: string, err: HttpError, form: FormValues): Problems {
  // A header's problem goes under its row's value.
  const header = /^body\.settings\.headers\.(\S+) (.*)$/.exec(err.message)
  const row = header === null ? undefined : Object.keys(form).find((field) => /^settings\.headers\.\d+\.name$/.test(field) && form[field]?.trim() === header[1])
  if (header !== null && row !== undefined) return { [row.replace(/name$/, 'value')]: `${header[2].charAt(0).toUpperCase()}${header[2].slice(1)}.` }
  const found = /^body\.settings\.([a-z_]+) (.*)$/.exec(err.message)
  if (found !== null && !found[2].includes('body.settings')) {
    const member = found[1]
    return { [`settings.${member}`]: `${the(labelsOf(kind, type)[member] ?? member.replaceAll('_', ' '))} ${found[2]}.` }
  }
  const text = err.message.replace(/ \(body\.settings\.[^)]*\)/g, '').replace(/^body\.settings /, `This ${kind.noun} `).replaceAll('body.settings.', '')
  return { '': `${text.charAt(0).toUpperCase()}${text.slice(1)}.` }
}
const noSuchAgent = () => new HttpError(404, 'not_found', 'You have no agent with that id.')
const base = (agent: AgentRow, kind: Kind) => `/agents/${agent.id}/${kind.path}`

/** The scope's agent with this id; 404 for another account's, another workspace's or an unknown one. */
export async function agentInScope (db: DB, scope: Scope, id: string): Promise<AgentRow> {
  const agent = ID.test(id) ? await findAgent(db, scope.ownerId, id) : undefined
  if (agent === undefined || !inScope(scope, agent)) throw noSuchAgent()
  return agent
}

async function capabilityOf (db: DB, scope: Scope, kind: Kind, agent: AgentRow, id: string): Promise<CapabilityRow> {
  const row = ID.test(id) ? await findCapability(db, scope.ownerId, kind, agent.id, id) : undefined
  if (row === undefined) throw new HttpError(404, 'not_found', `This agent has no ${kind.noun} with that id.`)
  return row
}

/** What the selects offer: the scope's other agents (transfer targets) and knowledge bases. */
async function choicesOf (db: DB, scope: Scope, agent: AgentRow): Promise<Choices> {
  const [agents, knowledgeBases] = await Promise.all([
    listAgents(db, scope.ownerId, { limit: 1000, workspace_id: scope.workspaceId }),
    listKnowledgeBaseRows(db, scope.ownerId, { limit: 1000, workspace_id: scope.workspaceId })
  ])
  return {
    agents: agents.filter((other) => other.id !== agent.id).map((other) => ({ value: other.id, label: other.agent_name })),
    knowledgeBases: knowledgeBases.map((base) => ({ value: base.id, label: base.name }))
  }
}

/** The types a new one may have: all but the knowledge search tool. */
const offeredTypes = (kind: Kind) => Object.entries(kind.types).filter(([type]) => !isKnowledgeSearch(kind, type))

/** The agent page's section: its actions and tools, and (for those who may change it) forms to add one of a type. */
export async function capabilitySection (db: DB, scope: Scope, agent: AgentRow): Promise<SafeHtml> {
  const lists = await Promise.all(KINDS.map(async (kind) => ({ kind, rows: await listCapabilities(db, scope.ownerId, kind, agent.id) })))
  return html`${lists.map(({ kind, rows }) => html`<section aria-labelledby="${kind.path}-title">
<h2 id="${kind.path}-title">${kind === ACTIONS ? 'Actions' : 'Tools'}</h2>
<p class="hint">${kind === ACTIONS ? 'What the agent sends: during the call (a function it uses) or after it (a delivery).' : 'What the agent may do during a call.'} ${rows.length} of at most ${kind.max}.</p>
${rows.length === 0
  ? html`<p>No ${kind.path} yet.</p>`
  : html`<div class="table"><table>
  <caption>${kind === ACTIONS ? 'Actions' : 'Tools'} of ${agent.agent_name}</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">State</th></tr></thead>
  <tbody>${rows.map((row) => html`<tr><td><a href="${base(agent, kind)}/${row.id}">${String(row.settings.name)}</a></td><td>${typeLabel(kind, row.type)}</td><td>${stateOf(kind, row)}</td></tr>`)}</tbody>
</table></div>`}
${scope.canChange && rows.length < kind.max && html`<form method="get" action="${base(agent, kind)}/new" class="inline">
  <label for="new-${kind.noun}-type">New ${kind.noun} of type</label>
  <select id="new-${kind.noun}-type" name="type">${offeredTypes(kind).map(([type, definition]) => html`<option value="${type}">${definition.label}</option>`)}</select>
  <button type="submit">Add ${kind.noun === 'action' ? 'an action' : 'a tool'}</button>
</form>`}
${kind === TOOLS && knowledgePointer(agent)}
</section>`)}`
}

/** What the Test button got: the outcome and the request as sent, or why none was sent (a URL its variables break). */
type TestResult = { outcome: Outcome, request: SentRequest } | { error: string }

/** The Test button's result: the request as it was sent (secrets masked) and what came back. */
function testOutcome (result: TestResult): SafeHtml {
  if ('error' in result) return html`<p class="notice error">Not sent: ${result.error}</p>`
  const { outcome, request } = result
  return html`<div class="notice ${outcome.ok ? 'success' : 'error'}">
  <h3>${outcome.ok ? 'Delivered' : 'Not delivered'}${outcome.status_code !== undefined && html`: the answer's status is ${outcome.status_code}`}</h3>
  <dl class="facts">
    ${outcome.error !== undefined && html`<dt>Error</dt><dd>${outcome.error}</dd>`}
    <dt>Duration</dt><dd>${outcome.duration_ms} ms</dd>
    ${outcome.response_preview !== undefined && outcome.response_preview !== '' && html`<dt>Start of the answer</dt><dd><pre class="preview">${outcome.response_preview}</pre></dd>`}
  </dl>
  <h3>The request as sent</h3>
  <pre class="preview test-request">${request.method} ${request.url}
${Object.entries(request.headers).map(([name, value]) => `${name}: ${value}\n`).join('')}${request.body !== null && `\n${request.body}`}</pre>
  <p class="hint">Values of the headers you set, the signature and secrets in the address are shown as ${MASK}.</p>
</div>`
}

/**
 * The Test button and, right under it, its result. With JavaScript (static/action-test.js) the request is sent without
 * leaving the page and the result replaces the box's content; without it, the page comes back scrolled to the result.
 */
function testSection (viewer: Viewer, action: string, result: TestResult | undefined): SafeHtml {
  return html`<section aria-labelledby="test-title" id="test">
<h2 id="test-title">Test</h2>
<p>Sends one request with the saved settings, now: the call's variables and the agent's data-retrieval fields get sample values. Nothing is stored or retried.</p>
<form method="post" action="${action}#test-result" data-test-action>${csrfField(viewer.csrfToken)}<button type="submit">Test</button></form>
<div id="test-result" tabindex="-1" role="status" aria-live="polite">${result !== undefined && testOutcome(result)}</div>
<script src="/console/action-test.js" defer></script>
</section>`
}

interface FormPage {
  session: ConsoleSession
  scope: Scope
  kind: Kind
  agent: AgentRow
  type: string
  /** Unset: a new one. */
  row?: CapabilityRow
  form: FormValues
  problems: Problems
  choices: Choices
  saved?: boolean
  test?: TestResult
}

/**
 * A refused form's problems at its top, where its address's `#form-problems` opens: the API's sentence about the whole,
 * or the list of fields to correct (each problem also under its field).
 */
function problemsView (problems: Problems): SafeHtml {
  const { '': general, ...fields } = problems
  if (general === undefined) return errorSummary(fields)
  return html`<div id="form-problems" class="notice error" role="alert" tabindex="-1"><p>${general}</p></div>`
}

function capabilityPage ({ session, scope, kind, agent, type, row, form, problems, choices, saved, test }: FormPage): string {
  const viewer = viewerOf(session)
  const managed = isKnowledgeSearch(kind, type)
  const readOnly = !scope.canChange || managed
  const action = row === undefined ? base(agent, kind) : `${base(agent, kind)}/${row.id}`
  const title = row === undefined ? `New ${kind.noun}: ${typeLabel(kind, type)}` : `${typeLabel(kind, type)}: ${String(row.settings.name)}`
  const fields = settingsFields(kind, type, choices)
  const headers = hasHeaders(kind, type)
  const apiCall = isApiCall(kind, type)
  const body = describe('settings-body', 'A JSON object (sent as the query string for GET and DELETE). A value that is exactly one {{variable}} keeps its type, such as {"people": "{{people}}"}.', problems['settings.body'])
  const parameters = describe('settings-parameters', `What the agent gives when it calls this during a call: an object of text, number or yes/no properties, each a {{variable}} of the request; such as ${PARAMETERS_EXAMPLE}. Empty: none.`, problems['settings.parameters'])
  const hours = describe('settings-opening_hours', HOURS_HINT, problems['settings.opening_hours'])
  const retry = describe('settings-retry_schedule', 'For "My own pauses": seconds, separated by commas, each 60 to 604800, at most 10; such as 60, 300, 3600.', problems['settings.retry_schedule'])
  return layout({
    title,
    viewer,
    current: '/agents',
    body: html`<p><a href="/agents/${agent.id}">Back to ${agent.agent_name}</a></p>
<p class="hint">${kind.types[type].hint}</p>
${saved === true && notice('success', 'Saved.')}
${problemsView(problems)}
${managed ? knowledgePointer(agent) : readOnly && html`<p>You are a member of this workspace: you can see this ${kind.noun}, not change it.</p>`}
${!(managed && row === undefined) && html`<form method="post" action="${action}" class="stack wide">
  ${csrfField(viewer.csrfToken)}
  ${row === undefined && html`<input type="hidden" name="type" value="${type}">`}
  <fieldset class="plain"${readOnly && html` disabled`}>
  <legend class="visually-hidden">${typeLabel(kind, type)} settings</legend>
  ${renderFields(apiCall ? fields.filter((field) => FIRST.includes(field.key)) : fields, form, problems)}
  ${hasHours(kind, type) && html`<label for="settings-opening_hours">Opening hours</label>
  <textarea id="settings-opening_hours" name="settings.opening_hours" rows="7" class="code" spellcheck="false"${hours.attrs}>
${form['settings.opening_hours'] ?? ''}</textarea>
  ${hours.after}`}
  ${headers && html`${renderPairs(HEADERS, form, problems)}
  <p class="hint">A stored value is never shown: leave it empty to keep it, type a new one to replace it, or tick Remove. Save to get more empty rows.
  Stored values go only to the origin (scheme, host and port) of the URL they were given with: a change of origin needs each one typed again or removed.</p>
  ${problems['settings.headers'] !== undefined && html`<p class="field-error">${problems['settings.headers']}</p>`}`}
  ${apiCall && html`${renderPairs(QUERY, form, problems)}
  ${problems['settings.query'] !== undefined && html`<p class="field-error">${problems['settings.query']}</p>`}
  <label for="settings-body">Body (JSON)</label>
  <textarea id="settings-body" name="settings.body" rows="8" class="code"${body.attrs}>
${form['settings.body'] ?? ''}</textarea>
  ${body.after}
  <label for="settings-parameters">Parameters during the call (JSON Schema)</label>
  <textarea id="settings-parameters" name="settings.parameters" rows="6" class="code"${parameters.attrs}>
${form['settings.parameters'] ?? ''}</textarea>
  ${parameters.after}
  ${renderFields(fields.filter((field) => !FIRST.includes(field.key)), form, problems)}
  ${renderField(RETRY_MODE, form, problems)}
  <label for="settings-retry_schedule">${RETRY_LABEL}</label>
  <input id="settings-retry_schedule" name="settings.retry_schedule" value="${form['settings.retry_schedule'] ?? ''}" inputmode="numeric"${retry.attrs}>
  ${retry.after}`}
  ${renderFields(ACTIVE, form, problems)}
  </fieldset>
  ${!readOnly && html`<button type="submit">${row === undefined ? `Add ${kind.noun}` : 'Save'}</button>`}
</form>`}
${row !== undefined && !readOnly && apiCall && testSection(viewer, `${action}/test`, test)}
${row !== undefined && !readOnly && html`<section aria-labelledby="delete-title">
<h2 id="delete-title">Delete</h2>
<form method="post" action="${action}/delete">${csrfField(viewer.csrfToken)}<button type="submit" class="danger">Delete this ${kind.noun}</button></form>
</section>`}`
  })
}

const TEST_SCRIPT = readFileSync(new URL('./static/action-test.js', import.meta.url))

/** The schemas of the pages: an agent's or an item's ids; a refused form's draft (drafts.ts). */
const AGENT = idParams('id')
const ITEM = idParams('id', 'itemId')
const NEW_QUERY = Type.Object({ type: text('The type'), draft: DRAFT_QUERY })
const ITEM_QUERY = Type.Object({ saved: text('The saved notice'), draft: DRAFT_QUERY })

/** What a draft keeps of a form: not the header values typed, which are write-only (never shown again, so never stored aside). */
const draftable = (form: FormValues): FormValues => Object.fromEntries(Object.entries(form).filter(([name]) => !/^settings\.headers\.\d+\.value$/.test(name)))

export async function consoleCapabilityRoutes (app: FastifyInstance, { deliveries }: { deliveries: DeliveryDeps }): Promise<void> {
  const { db } = deliveries

  for (const kind of KINDS) {
    const path = `/agents/:id/${kind.path}`
    const item = `${path}/:itemId`
    const typeOf = (type: string | undefined) => {
      const offered = offeredTypes(kind)
      if (type === undefined || (!offered.some(([name]) => name === type) && !isKnowledgeSearch(kind, type))) {
        throw new HttpError(400, 'bad_request', `Choose one of the ${kind.noun} types: ${offered.map(([, definition]) => definition.label).join(', ')}.`)
      }
      return type
    }
    /** The pages refused forms return to: a new one's (of its type) and an item's. */
    const newPath = (agent: AgentRow, type: string) => `${base(agent, kind)}/new?type=${type}`
    const itemPath = (agent: AgentRow, row: CapabilityRow) => `${base(agent, kind)}/${row.id}`

    /** The API's refusal as the form's problems: its checks, a limit or a missing integration. Any other error goes on. */
    const refusalProblems = (type: string, err: unknown, form: FormValues): Problems => {
      if (!(err instanceof HttpError) || !(err.statusCode === 400 || err.statusCode === 409 || err.statusCode === 422 || (err.statusCode === 404 && err.message.includes('body.settings')))) throw err
      return problemsOfError(kind, type, err, form)
    }

    app.get<{ Params: { id: string }, Querystring: { type?: string, draft?: string } }>(`${path}/new`, page({ params: AGENT, querystring: NEW_QUERY }), async (request, reply) => {
      const viewed = viewScope(request, reply)
      if (viewed === undefined) return reply
      if (!viewed.scope.canChange) return changeScope(request)
      const agent = await agentInScope(db, viewed.scope, request.params.id)
      const type = typeOf(request.query.type)
      const draft = await draftOf(db, viewed.session, newPath(agent, type), request.query.draft)
      // A refused form comes back even at the limit (its problem says so); an empty one is not offered there.
      if (draft === undefined && !isKnowledgeSearch(kind, type) && await countCapabilities(db, viewed.scope.ownerId, kind, agent.id) >= kind.max) {
        throw new HttpError(409, 'conflict', `An agent has at most ${kind.max} ${kind.path}: delete one before adding another.`)
      }
      const choices = await choicesOf(db, viewed.scope, agent)
      const form = draft?.values ?? formOf(kind, type, kind.types[type].defaults, true, choices)
      return sendPage(reply, 200, capabilityPage({ ...viewed, kind, agent, type, form, problems: draft?.problems ?? {}, choices }))
    })

    app.post<{ Params: { id: string }, Body: FormValues }>(path, page({ params: AGENT, body: openFormBody() }, FORM_LIMIT), async (request, reply) => {
      const session = request.consoleSession!
      const scope = changeScope(request)
      const agent = await agentInScope(db, scope, request.params.id)
      const form = request.body
      const type = typeOf(form.type)
      const at = newPath(agent, type)
      if (isKnowledgeSearch(kind, type)) return await refuseForm(db, reply, session, at, draftable(form), { '': KNOWLEDGE_REFUSAL })
      const choices = await choicesOf(db, scope, agent)
      const read = readSettings(kind, type, form, choices)
      if (Object.keys(read.problems).length > 0) return await refuseForm(db, reply, session, at, draftable(form), read.problems)
      // A new one has nothing to return to: an emptied member is simply left out (and takes its default).
      const settings = Object.fromEntries(Object.entries(read.settings).filter(([, value]) => value !== null))
      let row
      try {
        row = await addCapability(db, scope.ownerId, kind, agent, type, settings, read.active ?? true)
      } catch (err) {
        return await refuseForm(db, reply, session, at, draftable(form), refusalProblems(type, err, form))
      }
      await formSaved(db, session, at)
      return reply.redirect(`${itemPath(agent, row)}?saved=1`, 303)
    })

    app.get<{ Params: { id: string, itemId: string }, Querystring: { saved?: string, draft?: string } }>(item, page({ params: ITEM, querystring: ITEM_QUERY }), async (request, reply) => {
      const viewed = viewScope(request, reply)
      if (viewed === undefined) return reply
      const agent = await agentInScope(db, viewed.scope, request.params.id)
      const row = await capabilityOf(db, viewed.scope, kind, agent, request.params.itemId)
      const draft = viewed.scope.canChange ? await draftOf(db, viewed.session, itemPath(agent, row), request.query.draft) : undefined
      const choices = await choicesOf(db, viewed.scope, agent)
      const settings = viewed.scope.canChange ? row.settings : viewedSettings(kind, row.type, row.settings)
      // The knowledge search tool's page shows what is stored, beside why it was not changed.
      const form = draft !== undefined && !isKnowledgeSearch(kind, row.type) ? draft.values : formOf(kind, row.type, settings, row.is_active, choices)
      // The Test button's script fetches its result (connect-src).
      return sendPage(reply.header('content-security-policy', CONNECTING_PAGE_CSP), 200, capabilityPage({
        ...viewed, kind, agent, type: row.type, row, form, problems: draft?.problems ?? {}, choices, saved: request.query.saved !== undefined
      }))
    })

    app.post<{ Params: { id: string, itemId: string }, Body: FormValues }>(item, page({ params: ITEM, body: openFormBody() }, FORM_LIMIT), async (request, reply) => {
      const session = request.consoleSession!
      const scope = changeScope(request)
      const agent = await agentInScope(db, scope, request.params.id)
      const row = await capabilityOf(db, scope, kind, agent, request.params.itemId)
      const form = request.body
      const at = itemPath(agent, row)
      if (isKnowledgeSearch(kind, row.type)) return await refuseForm(db, reply, session, at, {}, { '': KNOWLEDGE_REFUSAL })
      const choices = await choicesOf(db, scope, agent)
      const read = readSettings(kind, row.type, form, choices)
      if (Object.keys(read.problems).length > 0) return await refuseForm(db, reply, session, at, draftable(form), read.problems)
      try {
        await changeCapability(db, scope.ownerId, kind, agent, row.id, { settings: read.settings, is_active: read.active })
      } catch (err) {
        return await refuseForm(db, reply, session, at, draftable(form), refusalProblems(row.type, err, form))
      }
      await formSaved(db, session, at)
      return reply.redirect(`${at}?saved=1`, 303)
    })

    app.post<{ Params: { id: string, itemId: string } }>(`${item}/delete`, page({ params: ITEM, body: formBody({}) }), async (request, reply) => {
      const session = request.consoleSession!
      const scope = changeScope(request)
      const agent = await agentInScope(db, scope, request.params.id)
      const row = await capabilityOf(db, scope, kind, agent, request.params.itemId)
      if (isKnowledgeSearch(kind, row.type)) return await refuseForm(db, reply, session, itemPath(agent, row), {}, { '': KNOWLEDGE_REFUSAL })
      await removeCapability(db, scope.ownerId, kind, agent, row.id)
      // Back to the list the item was removed from, not the top of the agent's long page.
      return reply.redirect(`/agents/${agent.id}#${kind.path}-title`, 303)
    })
  }

  app.get('/console/action-test.js', page(), async (_request, reply) => {
    return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(TEST_SCRIPT)
  })

  // Sends the stored request, which carries the owner's header values: a change, not a view (a member may not).
  app.post<{ Params: { id: string, itemId: string } }>('/agents/:id/actions/:itemId/test', page({ params: ITEM, body: formBody({}) }), async (request, reply) => {
    const session = request.consoleSession!
    const scope = changeScope(request)
    const agent = await agentInScope(db, scope, request.params.id)
    const row = await capabilityOf(db, scope, ACTIONS, agent, request.params.itemId)
    if (row.type !== 'api_call') throw new HttpError(400, 'bad_request', 'Only API call actions send a request to test.')
    let test: TestResult
    try {
      test = await testApiCall(deliveries, agent, row, request.log)
    } catch (err) {
      if (!(err instanceof HttpError) || err.statusCode !== 422) throw err
      test = { error: `${err.message}.` }
    }
    // The button's script asks for the result alone, to show it under the button without a reload.
    if (request.headers['x-console-fragment'] === 'test') return sendPage(reply, 200, testOutcome(test).toString())
    const choices = await choicesOf(db, scope, agent)
    const form = formOf(ACTIONS, row.type, row.settings, row.is_active, choices)
    return sendPage(reply.header('content-security-policy', CONNECTING_PAGE_CSP), 200, capabilityPage({ session, scope, kind: ACTIONS, agent, type: row.type, row, form, problems: {}, choices, test }))
  })
}
