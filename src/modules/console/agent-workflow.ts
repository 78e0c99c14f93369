import type { FastifyInstance, FastifyReply } from 'fastify'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { HttpError, invalidInput, type AjvIssue } from '../../http/errors.ts'
import { E164, ObjectId } from '../../http/schemas.ts'
import { compileBodySchema } from '../../http/validation.ts'
import { listVoices } from '../account/queries.ts'
import { listAgents, listCapabilities, lockAgent, updateAgent, type AgentRow } from '../agents/queries.ts'
import { DataRetrievalItem, Dialling, MASK } from '../agents/settings-parts.ts'
import { changedWorkflow } from '../agents/workflow-check.ts'
import { recordVersion } from '../agents/versions.ts'
import type { ApiCallSettings } from '../capabilities/types/api-call.ts'
import { viewerApiCallSettings } from '../deliveries/render.ts'
import { ApiCallStep, ConversationStep, EndStep, MessageStep, StepId, TransferStep, Workflow, type Transition, type WorkflowStep } from '../agents/workflow.ts'
import {
  fieldValues, objectFields, pairValues, readFields, readPairs, readRows, renderField, renderFields, renderPairs, renderRows, rowValues,
  type Field, type FormValues, type Option, type Pairs, type Problems, type Rows
} from './forms.ts'
import { describe } from './fields.ts'
import { errorSummary } from './components.ts'
import { DRAFT_QUERY, draftOf, formSaved, refuseForm } from './drafts.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, layout, notice, viewerOf } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { changeScope, viewScope, type Scope } from './scope.ts'
import { agentInScope } from './agent-capabilities.ts'
import { formBody, idParams, openFormBody, page, sendPage, text } from './reply.ts'
import { conditionText, typeName, workflowGraph } from './workflow-graph.ts'

// An agent's workflow in the console (docs/workflows.md, "In the console"): a page with the step list and the drawn
// graph, where steps are added, removed, moved and made the start; and a form per step with its type's fields, its
// transitions and variables as rows. Every change goes through the API's rule (changedWorkflow: the graph check, the
// write-only header values) under the agent's row lock, and the API's messages are shown next to the fields they name.

/** Instructions may be 20,000 characters: more than the console's usual 16 KB form, once URL-encoded. */
const FORM_LIMIT = 512 * 1024
const StepParams = Type.Object({ id: ObjectId, stepId: StepId })
/** The pages a refused form returns to (drafts.ts) show its draft; a saved one says so. */
const SAVED = Type.Object({ saved: text('Saved'), draft: DRAFT_QUERY })

type StepType = WorkflowStep['type']
const SCHEMAS = { conversation: ConversationStep, api_call: ApiCallStep, message: MessageStep, transfer: TransferStep, end: EndStep }
const TYPES: Array<{ value: StepType, label: string, hint: string }> = [
  { value: 'conversation', label: 'Conversation', hint: 'The agent talks with the caller following this step\'s instructions, with its tools, and may collect variables.' },
  { value: 'api_call', label: 'API call', hint: 'Calls your API: during the call (its answer mapped into variables, then the workflow goes on) or after the call (a delivery, retried).' },
  { value: 'message', label: 'Message', hint: 'Sends an e-mail, SMS or WhatsApp message, then the workflow goes on.' },
  { value: 'transfer', label: 'Transfer', hint: 'Hands the call to another agent of yours, or puts it through to a phone number.' },
  { value: 'end', label: 'End', hint: 'The agent says its last words and hangs up.' }
]
const isType = (value: string | undefined): value is StepType => TYPES.some((type) => type.value === value)

/** Members drawn by hand (rows, pairs, selects of the account's records) rather than from the schema. */
const HAND_DRAWN = ['id', 'name', 'type', 'transitions', 'global', 'variables', 'tool_ids', 'voice_id', 'headers', 'query', 'body', 'response_variables', 'retry_schedule', 'target']

const COMMON = objectFields(Type.Object({
  id: StepId,
  name: Type.String({ minLength: 1, maxLength: 100 }),
  global: Type.Optional(Type.String({ maxLength: 500 }))
}), '', {
  required: ['id', 'name'],
  labels: { id: 'Step id', name: 'Name', global: 'Reachable from every conversation step when' },
  hints: {
    id: 'Lower-case letters, digits and _, starting with a letter; it names the step in transitions and in {{<id>_status}}.',
    global: 'In plain language, such as "the caller asks for a person". Empty: the step is reached by transitions only.'
  },
  multiline: ['global']
})

const LABELS: Record<string, string> = {
  instructions: 'Instructions', interruption_sensitivity: 'Interruption sensitivity', run: 'When', url: 'URL', method: 'Method',
  timeout_seconds: 'Time limit (seconds)', send_only_custom_fields: 'Send only my fields (the query and the body, without the call)',
  notify: 'Failure e-mails', notify_email: 'Failure e-mail recipient', condition: 'Only for calls where', channel: 'Channel', to: 'Recipient',
  subject: 'Subject', message: 'Message'
}
const HINTS: Record<string, string> = {
  interruption_sensitivity: '0 to 1; empty: the agent\'s.',
  notify_email: 'Empty: the account owner.',
  condition: 'In plain language, judged by the call analysis. Empty: every call.',
  to: 'An e-mail address or phone number, or a {{variable}} such as {{customer_phone}}.',
  run: 'During the call: sent as the call reaches this step; the answer\'s fields become variables and the workflow goes on. After the call: sent once the call is analysed, and retried until it is delivered.',
  timeout_seconds: 'During the call: how long the agent waits for the answer (default 10).',
  send_only_custom_fields: 'After the call: send only the query and the body, without the call\'s data.',
  notify: 'After the call: when to e-mail about failed attempts (default: after the last one).',
  method: 'Default POST.'
}
const RUN_OPTIONS: Option[] = [{ value: 'during_call', label: 'During the call (its answer maps into variables)' }, { value: 'after_call', label: 'After the call (a delivery, retried)' }]

const typeFields = (type: StepType): Field[] => objectFields(SCHEMAS[type], '', {
  omit: HAND_DRAWN,
  labels: LABELS,
  hints: HINTS,
  options: { run: RUN_OPTIONS },
  multiline: ['message', 'instructions']
})

const HEADERS: Pairs = { name: 'headers', noun: 'header', caption: 'Headers (values are never shown)', keep: MASK }
const QUERY: Pairs = { name: 'query', noun: 'parameter', caption: 'Query parameters ({{variables}} allowed)' }
const ANSWERS: Pairs = { name: 'response_variables', noun: 'variable', caption: 'Variables from the answer (name, and where in the JSON answer, such as data.slots[0].id)' }

const VARIABLES: Rows = {
  name: 'variables',
  legend: (i) => `Variable ${i + 1}`,
  fields: (i) => objectFields(DataRetrievalItem, `variables.${i}.`, {
    labels: { name: 'Variable', enum_values: 'Allowed values', required: 'Required before the step moves on by default' },
    hints: { name: 'Letters, digits and _; becomes {{name}} and a key of the call\'s collected data.', enum_values: 'One per line; for type enum only.' }
  })
}

const CONDITIONS: Option[] = [
  { value: 'prompt', label: 'When (the model judges, in plain language)' },
  { value: 'expression', label: 'If (a condition on variables)' },
  { value: 'always', label: 'Otherwise (the default, last)' }
]

/** A transition row's fields: the target among `steps`, the kind of condition, its text. */
function transitionFields (i: number, steps: Option[]): Field[] {
  return [
    { name: `transitions.${i}.to`, key: 'to', label: `Transition ${i + 1}: go to`, schema: Type.String(), required: false, options: steps },
    { name: `transitions.${i}.condition`, key: 'condition', label: `Transition ${i + 1}: condition`, schema: Type.String(), required: false, options: CONDITIONS },
    {
      name: `transitions.${i}.text`,
      key: 'text',
      label: `Transition ${i + 1}: when or if`,
      schema: Type.String({ maxLength: 500 }),
      required: false,
      hint: 'When: "the caller has chosen a time". If: party_size > 8, {{insured}} = true, email is set. Empty for Otherwise.'
    }
  ]
}

/** The transfer target as form fields (the API's `target` is one of two objects). */
const TARGET_FIELDS = (agents: Option[]) => objectFields(Type.Object({
  target_type: Type.Union([Type.Literal('agent'), Type.Literal('number')]),
  agent_id: Type.Optional(ObjectId),
  phone_number: Type.Optional(E164),
  ...Dialling
}), 'target.', {
  required: ['target_type'],
  labels: { target_type: 'Transfer to', agent_id: 'Agent', phone_number: 'Phone number', timeout_seconds: 'Ring for (seconds)', show_caller_number: 'Show the caller\'s number' },
  hints: { agent_id: 'For "agent": another agent of yours takes the call over.', phone_number: 'For "number": such as +14155550123.' },
  options: { target_type: [{ value: 'agent', label: 'Another agent' }, { value: 'number', label: 'A phone number' }], agent_id: agents }
})

interface Choices { agents: Option[], tools: Option[], voices: Option[] }

async function choicesOf (db: DB, scope: Scope, agent: AgentRow): Promise<Choices> {
  const [agents, tools, actions, voices] = await Promise.all([
    listAgents(db, scope.ownerId, { limit: 200, workspace_id: scope.workspaceId }),
    listCapabilities(db, scope.ownerId, { table: 'agent_tools', typeColumn: 'tool_type' }, agent.id),
    listCapabilities(db, scope.ownerId, { table: 'agent_actions', typeColumn: 'action_type' }, agent.id),
    listVoices(db, { limit: 1000 })
  ])
  return {
    agents: agents.filter((other) => other.id !== agent.id).map((other) => ({ value: other.id, label: other.agent_name })),
    tools: [
      ...tools.map((row) => ({ value: row.id, label: `${String(row.settings.name)} (tool)` })),
      ...actions.filter((row) => row.settings.when === 'during_call' || row.settings.when === 'both').map((row) => ({ value: row.id, label: `${String(row.settings.name)} (action)` }))
    ],
    voices: voices.map((voice) => ({ value: voice.id, label: `${voice.name} (${voice.provider})` }))
  }
}

const noSuchAgent = () => new HttpError(404, 'not_found', 'You have no agent with that id.')
const workflowOf = (agent: AgentRow) => agent.workflow as unknown as Workflow | null
const noSuchStep = () => new HttpError(404, 'not_found', 'This workflow has no step with that id.')

// Form text <-> a step.

/** A stored step (or a new one of `type`) as form text; header values never leave the server. */
function formOfStep (step: Partial<WorkflowStep> & { type: StepType }, steps: Option[]): FormValues {
  const record = step as Record<string, unknown>
  const transitions = step.transitions ?? []
  const values: FormValues = {
    type: step.type,
    ...fieldValues(COMMON, { id: step.id, name: step.name, global: step.global?.prompt }),
    ...fieldValues(typeFields(step.type), record),
    transitions: String(transitions.length + 1)
  }
  transitions.concat([{ to: '', condition: { type: 'prompt', prompt: '' } }]).forEach((transition, i) => {
    const { condition } = transition
    Object.assign(values, fieldValues(transitionFields(i, steps), {
      to: transition.to,
      condition: condition.type,
      text: condition.type === 'prompt' ? condition.prompt : condition.type === 'expression' ? condition.expression : ''
    }))
  })
  if (step.type === 'conversation') {
    const conversation = step as Partial<Extract<WorkflowStep, { type: 'conversation' }>>
    Object.assign(values, rowValues(VARIABLES, (conversation.variables ?? []) as Array<Record<string, unknown>>, 1), {
      voice_id: conversation.voice_id ?? '',
      tools_mode: conversation.tool_ids === undefined ? 'all' : 'chosen',
      tool_ids: ''
    })
    for (const id of conversation.tool_ids ?? []) values[`tool_ids.${id}`] = 'true'
  }
  if (step.type === 'api_call') {
    const call = step as Partial<Extract<WorkflowStep, { type: 'api_call' }>>
    Object.assign(values, pairValues(HEADERS, call.headers), pairValues(QUERY, call.query, 1), pairValues(ANSWERS, call.response_variables, 1), {
      body: JSON.stringify(call.body ?? {}, null, 2),
      retry_schedule: call.retry_schedule?.join(', ') ?? ''
    })
  }
  if (step.type === 'transfer') {
    const target = (step as Partial<Extract<WorkflowStep, { type: 'transfer' }>>).target
    Object.assign(values, fieldValues(TARGET_FIELDS([]), { ...target, target_type: target?.type ?? 'number' }))
  }
  return values
}

/** Members that are null (emptied) are left out: the step's default. */
const present = (values: Record<string, unknown>) => Object.fromEntries(Object.entries(values).filter(([, value]) => value !== null))

/** The step a form describes, or what is wrong with its fields (schema checks; the graph is the API's to check). */
function readStep (type: StepType, form: FormValues, choices: Choices): { step?: WorkflowStep, problems: Problems } {
  const common = readFields(COMMON, form)
  const own = readFields(typeFields(type), form)
  const problems: Problems = { ...common.problems, ...own.problems }
  const step: Record<string, unknown> = { id: common.values.id, name: common.values.name, type, ...present(own.values) }
  if (typeof common.values.global === 'string' && common.values.global.trim() !== '') step.global = { prompt: common.values.global.trim() }
  const transitions: Transition[] = []
  const count = Math.min(20, Number.parseInt(form.transitions ?? '0', 10) || 0)
  for (let i = 0; i < count; i++) {
    const to = form[`transitions.${i}.to`] ?? ''
    if (to === '' || form[`transitions.${i}.remove`] === 'true') continue
    const kind = form[`transitions.${i}.condition`] ?? 'prompt'
    const text = (form[`transitions.${i}.text`] ?? '').trim()
    if (kind !== 'always' && text === '') {
      problems[`transitions.${i}.text`] = kind === 'prompt' ? 'Say when the model should move on, such as "the caller has chosen a time".' : 'Give the condition, such as party_size > 8.'
      continue
    }
    transitions.push({ to, condition: kind === 'always' ? { type: 'always' } : kind === 'expression' ? { type: 'expression', expression: text } : { type: 'prompt', prompt: text } } as Transition)
  }
  if (transitions.length > 0) step.transitions = transitions
  if (type === 'conversation') {
    const rows = readRows(VARIABLES, form)
    Object.assign(problems, rows.problems)
    if (rows.rows !== undefined && rows.rows.length > 0) step.variables = rows.rows.map((row) => present(row.values))
    if (form.tools_mode === 'chosen') step.tool_ids = choices.tools.filter((tool) => form[`tool_ids.${tool.value}`] === 'true').map((tool) => tool.value)
    if ((form.voice_id ?? '') !== '') step.voice_id = form.voice_id
  }
  if (type === 'api_call') {
    for (const pairs of [HEADERS, QUERY, ANSWERS]) {
      const read = readPairs(pairs, form)
      Object.assign(problems, read.problems)
      if (read.value !== undefined && (Object.keys(read.value).length > 0 || pairs === HEADERS)) step[pairs.name] = read.value
    }
    const body = (form.body ?? '').trim()
    if (body !== '') {
      try {
        const value: unknown = JSON.parse(body)
        if (value === null || typeof value !== 'object' || Array.isArray(value)) problems.body = 'The body must be a JSON object, such as {"name": "{{name}}"}.'
        else if (Object.keys(value).length > 0) step.body = value
      } catch (err) {
        problems.body = `The body is not valid JSON: ${(err as Error).message}.`
      }
    }
    const pauses = (form.retry_schedule ?? '').split(/[\s,]+/).filter((part) => part !== '')
    if (pauses.some((part) => !/^\d+$/.test(part))) problems.retry_schedule = 'The pauses must be whole numbers of seconds, separated by commas.'
    else if (pauses.length > 0) step.retry_schedule = pauses.map(Number)
  }
  if (type === 'transfer') {
    const target = readFields(TARGET_FIELDS(choices.agents), form)
    Object.assign(problems, target.problems)
    const { target_type: targetType, agent_id: agentId, phone_number: phone, ...dialling } = present(target.values)
    if (targetType === 'agent') {
      if (agentId === undefined) problems['target.agent_id'] = 'Choose the agent that takes the call over.'
      step.target = { type: 'agent', agent_id: agentId }
    } else {
      if (phone === undefined) problems['target.phone_number'] = 'Give the number to put the call through to, such as +14155550123.'
      step.target = { type: 'number', phone_number: phone, ...dialling }
    }
  }
  return Object.keys(problems).length > 0 ? { problems } : { step: step as WorkflowStep, problems }
}

// The API's messages in the console's words, under the field they name.

const sentence = (text: string) => {
  const trimmed = text.trim().replace(/^[:,]\s*/, '')
  const capital = trimmed.charAt(0).toUpperCase() + trimmed.slice(1)
  return /[.!?]$/.test(capital) ? capital : `${capital}.`
}

/** `body.workflow.steps[2]` → `the step "Book"` wherever a message names another step; conditions by the form's names. */
function namedSteps (text: string, workflow: Workflow): string {
  const step = (i: string) => `the step "${workflow.steps[Number(i)]?.name ?? i}"`
  return text
    .replace(/body\.workflow\.steps\[(\d+)\](?: \("[^"]*"\))?(?:\.transitions(?:\[(\d+)\](\.to|\.condition\S*))?|\.([a-z_]+)\S*)?/g,
      (_, i: string, j: string | undefined, member: string | undefined, other: string | undefined) => {
        if (member !== undefined) return `${member === '.to' ? 'transition' : 'the condition of transition'} ${Number(j) + 1} of ${step(i)}`
        if (other !== undefined) return `the ${other.replaceAll('_', ' ')} of ${step(i)}`
        return step(i)
      })
    .replace(/(?<![\w.])steps\[(\d+)\]/g, (_, i: string) => `the step "${workflow.steps[Number(i)]?.name ?? i}"`)
    .replace(/body\.workflow\.start/g, 'The start step')
    .replace(/ is not the id of any step/g, ' is not a step of this workflow')
    // The form's names of the conditions.
    .replace(/"always"/g, '"Otherwise"').replace(/"prompt"/g, '"When"').replace(/"expression"/g, '"If"')
}

/** Where an API refusal of `workflow` goes in the form of the step at `index` (undefined: the workflow page). */
function problemsOf (err: HttpError, workflow: Workflow, index: number | undefined, form: FormValues = {}): Problems {
  const own = index === undefined ? null : new RegExp(`^body\\.workflow\\.steps\\[${index}\\](.*)$`).exec(err.message)
  if (own === null) return { '': sentence(namedSteps(err.message, workflow)) }
  const rest = own[1]
  const place = (field: string, text: string) => ({ [field]: sentence(namedSteps(text, workflow)) })
  let found: RegExpExecArray | null
  if (rest.startsWith(' (')) return { '': 'Nothing leads to this step: add a transition to it from another step, make it reachable from every step, or remove it.' }
  if ((found = /^\.transitions\[(\d+)\]\.(to|condition)\S* (.*)$/.exec(rest)) !== null) return place(`transitions.${found[1]}.${found[2] === 'to' ? 'to' : 'text'}`, found[3])
  if ((found = /^\.transitions (.*)$/.exec(rest)) !== null) return place('transitions', found[1])
  if ((found = /^\.variables\[(\d+)\]\.(\w+) (.*)$/.exec(rest)) !== null) {
    // The API counts the kept rows; the form's row of that variable is found by its name.
    const nth = Number(found[1])
    const rows = Object.keys(form).filter((field) => /^variables\.\d+\.name$/.test(field) && (form[field] ?? '').trim() !== '' && form[field.replace(/name$/, 'remove')] !== 'true')
    const row = rows[nth]?.split('.')[1] ?? String(nth)
    return place(`variables.${row}.${found[2]}`, `The ${found[2] === 'name' ? 'name' : found[2].replaceAll('_', ' ')} ${found[3]}`)
  }
  if ((found = /^\.headers\.(\S+) (.*)$/.exec(rest)) !== null) {
    const row = Object.keys(form).find((field) => /^headers\.\d+\.name$/.test(field) && form[field]?.trim() === found![1])
    return place(row === undefined ? 'headers' : row.replace(/name$/, 'value'), `${found[1]} ${found[2]}`)
  }
  if ((found = /^\.tool_ids\[\d+\]:? ?(.*)$/.exec(rest)) !== null) return place('tool_ids', found[1])
  if ((found = /^\.target\.agent_id:? (.*)$/.exec(rest)) !== null) return place('target.agent_id', found[1])
  if ((found = /^\.(\w+)(?:\.\S+)? (.*)$/.exec(rest)) !== null) {
    const field = ['id', 'name', 'voice_id', 'response_variables', 'to', 'url'].includes(found[1]) ? found[1] : ''
    return place(field, `${LABELS[found[1]] ?? found[1].replaceAll('_', ' ')} ${found[2]}`)
  }
  return { '': sentence(namedSteps(err.message, workflow)) }
}

// Changes: each one builds the whole workflow from the locked row and stores it through the API's rule.

const validateWorkflow = compileBodySchema(Workflow)

/**
 * Stores `change(workflow)` under the agent's row lock; the API's refusal is thrown as it is. The whole workflow is
 * checked by the API's body schema first (the form checks each member; this checks what they make together), its
 * message naming items as the graph check does (`steps[2]`).
 */
async function saveWorkflow (db: DB, scope: Scope, agentId: string, change: (workflow: Workflow | null) => Workflow | null, renamed?: { from: string, to: string }): Promise<Workflow | null> {
  return await db.transaction().execute(async (trx) => {
    const locked = await lockAgent(trx, scope.ownerId, agentId)
    if (locked === undefined) throw noSuchAgent()
    const next = change(structuredClone(workflowOf(locked)))
    // A renamed step keeps its stored header values: they are matched by id, so the stored step is given the new one.
    const stored = workflowOf(locked)
    const current = renamed === undefined || stored === null
      ? locked
      : { ...locked, workflow: { ...stored, steps: stored.steps.map((step) => step.id === renamed.from ? { ...step, id: renamed.to } : step) } as unknown as AgentRow['workflow'] }
    if (next !== null && !validateWorkflow(next)) {
      const { message } = invalidInput('body.workflow', validateWorkflow.errors![0] as AjvIssue)
      throw new HttpError(400, 'validation_error', message.replace(/\.(\d+)(?=[.\s]|$)/g, '[$1]'))
    }
    const checked = await changedWorkflow(trx, current, next)
    await updateAgent(trx, scope.ownerId, current.id, { workflow: checked as unknown as AgentRow['workflow'] })
    await recordVersion(trx, scope.ownerId, current.id, 'workflow')
    return checked
  })
}

/** A step put in place of `original` (a new step when undefined): renaming it renames what leads to it. */
function withStep (workflow: Workflow | null, step: WorkflowStep, original: string | undefined, from?: { id: string, transition: Transition }): Workflow {
  if (workflow === null) return { start: step.id, steps: [step] }
  const steps = workflow.steps.map((other) => {
    if (original === undefined || original === step.id) return other
    const transitions = other.transitions?.map((transition) => transition.to === original ? { ...transition, to: step.id } : transition)
    return transitions === undefined ? other : { ...other, transitions } as WorkflowStep
  })
  const at = original === undefined ? -1 : steps.findIndex((other) => other.id === original)
  if (at === -1) steps.push(step)
  else steps[at] = step
  if (from !== undefined) {
    const source = steps.find((other) => other.id === from.id)
    if (source !== undefined) {
      // Before the source's default, which stays last.
      const transitions = [...source.transitions ?? []]
      const last = transitions.at(-1)?.condition.type === 'always' ? transitions.length - 1 : transitions.length
      transitions.splice(last, 0, from.transition)
      source.transitions = transitions
    }
  }
  return { start: workflow.start === original ? step.id : workflow.start, steps }
}

// Pages.

interface StepPage {
  session: ConsoleSession
  scope: Scope
  agent: AgentRow
  workflow: Workflow | null
  type: StepType
  /** The step's id as stored; undefined: a new step. */
  original?: string
  form: FormValues
  problems: Problems
  choices: Choices
  saved?: boolean
}

/** The new step form's page: its type is in its address, so that a refused form's draft returns to it (drafts.ts). */
const newStepPath = (agentId: string, type: StepType) => `/agents/${agentId}/workflow/steps/new?type=${type}`

const stepOptions = (workflow: Workflow | null, except?: string): Option[] =>
  (workflow?.steps ?? []).filter((step) => step.id !== except).map((step) => ({ value: step.id, label: `${step.name} (${step.id})` }))

function stepPage ({ session, scope, agent, workflow, type, original, form, problems, choices, saved }: StepPage): string {
  const viewer = viewerOf(session)
  const readOnly = !scope.canChange
  const base = `/agents/${agent.id}/workflow`
  const action = original === undefined ? `${base}/steps` : `${base}/steps/${original}`
  const targets = stepOptions(workflow, original)
  const label = TYPES.find((entry) => entry.value === type)!.label
  const count = Math.min(21, Number.parseInt(form.transitions ?? '1', 10) || 1)
  const section = (legend: string, body: SafeHtml | false) => body === false ? '' : html`<fieldset class="group"><legend>${legend}</legend>${body}</fieldset>`
  const problemOf = (field: string) => problems[field] !== undefined && html`<p id="${field}-error" class="field-error">${problems[field]}</p>`
  const body = describe('body', 'A JSON object (the query string for GET and DELETE); a value that is exactly one {{variable}} keeps its type.', problems.body)
  const retry = describe('retry_schedule', 'After the call: pauses in seconds before each retry, separated by commas, such as 60, 300, 3600. Empty: the default schedule.', problems.retry_schedule)
  const tools = describe('tool_ids', undefined, problems.tool_ids)
  return layout({
    title: original === undefined ? `New step: ${label}` : `Step: ${form.name ?? original}`,
    viewer,
    current: '/agents',
    body: html`<p><a href="${base}">Back to the workflow of ${agent.agent_name}</a></p>
<p class="hint">${TYPES.find((entry) => entry.value === type)!.hint}</p>
${saved === true && notice('success', 'Saved.')}
${errorSummary(problems)}
${readOnly && html`<p>You are a member of this workspace: you can see this step, not change it.</p>`}
<form method="post" action="${action}" class="stack wide">
  ${csrfField(viewer.csrfToken)}
  <input type="hidden" name="type" value="${type}">
  <fieldset class="plain"${readOnly && html` disabled`}>
  <legend class="visually-hidden">${label} step</legend>
  ${renderFields(COMMON, form, problems)}
  ${renderFields(typeFields(type), form, problems)}
  ${type === 'conversation' && html`${renderField({ name: 'voice_id', key: 'voice_id', label: 'Voice', schema: Type.String(), required: false, options: choices.voices, hint: 'None: the agent\'s voice (the realtime engine keeps the voice it started with).' }, form, problems)}
  <fieldset class="group" id="tool_ids"${tools.attrs}><legend>Tools</legend>
  ${renderField({ name: 'tools_mode', key: 'tools_mode', label: 'Tools in this step', schema: Type.String(), required: true, options: [{ value: 'all', label: 'All of the agent\'s tools and during-call actions' }, { value: 'chosen', label: 'Only the ones ticked below' }] }, form, problems)}
  ${choices.tools.length === 0
    ? html`<p class="hint">The agent has no tools or during-call actions yet.</p>`
    : html`<input type="hidden" name="tool_ids" value="">${choices.tools.map((tool) => html`<div class="check"><input type="checkbox" id="tool_ids-${tool.value}" name="tool_ids.${tool.value}" value="true"${form[`tool_ids.${tool.value}`] === 'true' && html` checked`}><label for="tool_ids-${tool.value}">${tool.label}</label></div>`)}`}
  ${tools.after}
  </fieldset>
  <fieldset class="group"><legend>Variables to collect</legend>
  <p class="hint">The agent asks for them in this step and saves what the caller says. Save to get another empty row.</p>
  ${renderRows(VARIABLES, form, problems)}
  </fieldset>`}
  ${type === 'api_call' && html`${renderPairs(HEADERS, form, problems)}
  <p class="hint">A stored value is never shown: leave it empty to keep it, type a new one to replace it, or tick Remove. Stored values go only to the origin (scheme, host and port) of the URL they were given with.</p>
  ${problemOf('headers')}
  ${renderPairs(QUERY, form, problems)}
  <label for="body">Body (JSON)</label>
  <textarea id="body" name="body" rows="6" class="code"${body.attrs}>
${form.body ?? ''}</textarea>
  ${body.after}
  ${renderPairs(ANSWERS, form, problems)}
  <p class="hint">During the call only. The answer's HTTP status is {{${form.id !== undefined && form.id !== '' ? form.id : '<step id>'}_status}}.</p>
  ${problemOf('response_variables')}
  <label for="retry_schedule">Pauses before each retry (seconds)</label>
  <input id="retry_schedule" name="retry_schedule" value="${form.retry_schedule ?? ''}" inputmode="numeric"${retry.attrs}>
  ${retry.after}`}
  ${type === 'transfer' && section('Target', renderFields(TARGET_FIELDS(choices.agents), form, problems))}
  ${type !== 'transfer' && type !== 'end' && html`<fieldset class="group" id="transitions" aria-describedby="transitions-hint${problems.transitions !== undefined ? ' transitions-error' : ''}"><legend>Transitions</legend>
  <p id="transitions-hint" class="hint">Checked in order. ${type === 'conversation' ? 'When: the model moves on when it judges the sentence true. If: as soon as the variables make the condition true. Otherwise: once the step\'s required variables are collected.' : 'If: the first condition on variables that holds. Otherwise: the way on in any other case (this step needs one, last).'} Save to get another empty row.</p>
  ${problemOf('transitions')}
  <input type="hidden" name="transitions" value="${count}">
  ${Array.from({ length: count }, (_, i) => html`<fieldset class="row"><legend>Transition ${i + 1}</legend>
  ${renderFields(transitionFields(i, targets).map((field) => ({ ...field, required: false })), form, problems)}
  <div class="check"><input type="checkbox" id="transitions-${i}-remove" name="transitions.${i}.remove" value="true"><label for="transitions-${i}-remove">Remove transition ${i + 1}</label></div>
  </fieldset>`)}
  </fieldset>`}
  ${original === undefined && workflow !== null && html`<fieldset class="group"><legend>How the call gets here</legend>
  ${renderFields(fromFields(stepOptions(workflow)), form, problems)}
  </fieldset>`}
  </fieldset>
  ${!readOnly && html`<button type="submit">${original === undefined ? 'Add step' : 'Save'}</button>`}
</form>`
  })
}

/** A new step's way in: a transition added to an existing step. */
const fromFields = (steps: Option[]): Field[] => [
  { name: 'from', key: 'from', label: 'Comes after', schema: Type.String(), required: false, options: steps, hint: 'Adds a transition from that step to this one. None: the step is global, or you lead a transition to it later.' },
  { name: 'from_condition', key: 'from_condition', label: 'Condition of that transition', schema: Type.String(), required: false, options: CONDITIONS },
  { name: 'from_text', key: 'from_text', label: 'When or if', schema: Type.String({ maxLength: 500 }), required: false, hint: 'As in the transitions: a sentence for When, a condition for If, empty for Otherwise.' }
]

/** The workflow page: the step list with its buttons, the graph, the form that adds a step; `problems` of a refused change. */
function workflowPage (session: ConsoleSession, scope: Scope, agent: AgentRow, options: { problems?: Problems, saved?: boolean } = {}): string {
  const viewer = viewerOf(session)
  const workflow = workflowOf(agent)
  const base = `/agents/${agent.id}/workflow`
  const button = (path: string, label: string, text: string, danger = false) => html`<form method="post" action="${base}/${path}" class="inline">${csrfField(viewer.csrfToken)}<button type="submit" aria-label="${label}"${danger && html` class="danger"`}>${text}</button></form>`
  return layout({
    title: `Workflow of ${agent.agent_name}`,
    viewer,
    current: '/agents',
    body: html`<p><a href="/agents/${agent.id}">Back to ${agent.agent_name}</a></p>
${options.saved === true && notice('success', 'Saved.')}
${errorSummary(options.problems ?? {})}
<p>${workflow === null
  ? 'This agent has no workflow: it talks from its single prompt. Add a first step to start one; the first step is where calls start.'
  : 'Calls move through these steps: each step gives the agent its own instructions and tools, or acts (an API call, a message, a transfer, the end). The agent\'s prompt stays the base of every conversation step.'}</p>
${workflow !== null && html`<section aria-labelledby="steps-title">
<h2 id="steps-title">Steps</h2>
<div class="table"><table>
  <caption>Steps of the workflow, in order</caption>
  <thead><tr><th scope="col">Step</th><th scope="col">Type</th><th scope="col">Transitions</th>${scope.canChange && html`<th scope="col">Change</th>`}</tr></thead>
  <tbody>${workflow.steps.map((step, i) => html`<tr>
    <td><a href="${base}/steps/${step.id}">${step.name}</a> <code>${step.id}</code>${step.id === workflow.start && html` <strong>(start)</strong>`}${step.global !== undefined && html` <em>(global: ${step.global.prompt})</em>`}</td>
    <td>${typeName(step)}</td>
    <td>${(step.transitions ?? []).length === 0
      ? '—'
      : html`<ul class="plain">${(step.transitions ?? []).map((transition) => html`<li>${conditionText(transition.condition)} → ${workflow.steps.find((other) => other.id === transition.to)?.name ?? transition.to}</li>`)}</ul>`}</td>
    ${scope.canChange && html`<td class="actions">
      ${i > 0 && button(`steps/${step.id}/up`, `Up: ${step.name}`, 'Up')}
      ${i < workflow.steps.length - 1 && button(`steps/${step.id}/down`, `Down: ${step.name}`, 'Down')}
      ${step.id !== workflow.start && button(`steps/${step.id}/start`, `Make start: ${step.name}`, 'Make start')}
      ${button(`steps/${step.id}/delete`, `Remove: ${step.name}`, 'Remove', true)}
    </td>`}
  </tr>`)}</tbody>
</table></div>
</section>
<section aria-labelledby="graph-title">
<h2 id="graph-title">Graph</h2>
${workflowGraph(workflow)}
</section>`}
${scope.canChange && html`<section aria-labelledby="add-title">
<h2 id="add-title">Add a step</h2>
<form method="get" action="${base}/steps/new" class="inline">
  <label for="new-step-type">Type of the new step</label>
  <select id="new-step-type" name="type">${TYPES.map((type) => html`<option value="${type.value}">${type.label}</option>`)}</select>
  <button type="submit">Add a step</button>
</form>
</section>`}
${scope.canChange && workflow !== null && html`<section aria-labelledby="remove-title">
<h2 id="remove-title">Remove the workflow</h2>
<p>The agent then talks from its single prompt again.</p>
${button('delete', 'Remove the workflow', 'Remove the workflow', true)}
</section>`}`
  })
}

/** The agent page's section: whether the agent has a workflow, and the link to it. */
export function workflowSection (agent: AgentRow): SafeHtml {
  const workflow = workflowOf(agent)
  return html`<section aria-labelledby="workflow-title">
<h2 id="workflow-title">Workflow</h2>
<p>${workflow === null ? 'None: the agent talks from its single prompt.' : `${workflow.steps.length} step${workflow.steps.length === 1 ? '' : 's'}, starting at "${workflow.steps.find((step) => step.id === workflow.start)?.name ?? workflow.start}".`}
<a href="/agents/${agent.id}/workflow">${workflow === null ? 'Build a workflow' : 'Open the workflow'}</a></p>
</section>`
}

export async function consoleWorkflowRoutes (app: FastifyInstance, { db }: { db: DB }): Promise<void> {
  /** A change the API refuses (a 404 of a reference too: it is the form's): said in words on the form's page. */
  const refused = (err: unknown): err is HttpError => err instanceof HttpError && (err.statusCode === 400 || err.statusCode === 404) && err.message.startsWith('body.workflow')

  app.get<{ Params: { id: string }, Querystring: { saved?: string, draft?: string } }>('/agents/:id/workflow', page({ params: idParams('id'), querystring: SAVED }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const agent = await agentInScope(db, page.scope, request.params.id)
    const draft = await draftOf(db, page.session, `/agents/${agent.id}/workflow`, request.query.draft)
    return sendPage(reply, 200, workflowPage(page.session, page.scope, agent, { saved: request.query.saved !== undefined, problems: draft?.problems }))
  })

  app.get<{ Params: { id: string }, Querystring: { type?: string, draft?: string } }>('/agents/:id/workflow/steps/new', page({ params: idParams('id'), querystring: Type.Object({ type: text('The step type'), draft: DRAFT_QUERY }) }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    if (!page.scope.canChange) return changeScope(request)
    const agent = await agentInScope(db, page.scope, request.params.id)
    const type = request.query.type
    if (!isType(type)) throw new HttpError(400, 'bad_request', `Choose one of the step types: ${TYPES.map((entry) => entry.label).join(', ')}.`)
    const workflow = workflowOf(agent)
    const draft = await draftOf(db, page.session, newStepPath(agent.id, type), request.query.draft)
    const form = draft?.values ?? formOfStep({ type, ...(type === 'api_call' ? { run: 'during_call' } : {}) } as WorkflowStep, stepOptions(workflow))
    return sendPage(reply, 200, stepPage({ ...page, agent, workflow, type, form, problems: draft?.problems ?? {}, choices: await choicesOf(db, page.scope, agent) }))
  })

  app.get<{ Params: { id: string, stepId: string }, Querystring: { saved?: string, draft?: string } }>('/agents/:id/workflow/steps/:stepId', page({ params: StepParams, querystring: SAVED }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const agent = await agentInScope(db, page.scope, request.params.id)
    const workflow = workflowOf(agent)
    const step = workflow?.steps.find((other) => other.id === request.params.stepId)
    if (step === undefined) throw noSuchStep()
    // A member sees what a delivery's URL masks masked here too, as on an API call action's page.
    const shown = step.type === 'api_call' && !page.scope.canChange ? { ...step, ...viewerApiCallSettings(step as unknown as ApiCallSettings) } as WorkflowStep : step
    // A member has no draft: the form is read-only.
    const draft = page.scope.canChange ? await draftOf(db, page.session, `/agents/${agent.id}/workflow/steps/${step.id}`, request.query.draft) : undefined
    const form = draft?.values ?? formOfStep(shown, stepOptions(workflow, step.id))
    const choices = await choicesOf(db, page.scope, agent)
    return sendPage(reply, 200, stepPage({ ...page, agent, workflow, type: step.type, original: step.id, form, problems: draft?.problems ?? {}, choices, saved: request.query.saved !== undefined }))
  })

  /** Saves a step's form (new when `original` is undefined); answers the redirect to the step, or to the form's page with its draft. */
  async function saveStep (reply: FastifyReply, session: ConsoleSession, scope: Scope, agent: AgentRow, original: string | undefined, form: FormValues) {
    const workflow = workflowOf(agent)
    const stored = original === undefined ? undefined : workflow?.steps.find((step) => step.id === original)
    if (original !== undefined && stored === undefined) throw noSuchStep()
    const type = stored?.type ?? form.type
    if (!isType(type)) return await refuseForm(db, reply, session, `/agents/${agent.id}/workflow`, {}, { '': `No step added: choose one of the step types: ${TYPES.map((entry) => entry.label).join(', ')}.` })
    const path = original === undefined ? newStepPath(agent.id, type) : `/agents/${agent.id}/workflow/steps/${original}`
    // Header values are write-only: never kept in a draft (the form never shows them; they are typed anew).
    const kept = Object.fromEntries(Object.entries(form).filter(([name]) => !/^headers\.\d+\.value$/.test(name)))
    const refuse = async (problems: Problems) => await refuseForm(db, reply, session, path, kept, problems)
    const choices = await choicesOf(db, scope, agent)
    const read = readStep(type, form, choices)
    let from: { id: string, transition: Transition } | undefined
    if (original === undefined && (form.from ?? '') !== '' && read.step !== undefined) {
      const kind = form.from_condition ?? 'prompt'
      const text = (form.from_text ?? '').trim()
      if (kind !== 'always' && text === '') read.problems.from_text = 'Say when the call comes here, or choose Otherwise.'
      from = { id: form.from!, transition: { to: read.step.id, condition: kind === 'always' ? { type: 'always' } : kind === 'expression' ? { type: 'expression', expression: text } : { type: 'prompt', prompt: text } } as Transition }
    }
    if (read.step === undefined || Object.keys(read.problems).length > 0) return await refuse(read.problems)
    const step = read.step
    let saved: Workflow | null
    try {
      saved = await saveWorkflow(db, scope, agent.id, (current) => withStep(current, step, original, from), original === undefined ? undefined : { from: original, to: step.id })
    } catch (err) {
      if (!refused(err)) throw err
      const attempted = withStep(structuredClone(workflow), step, original, from)
      const index = attempted.steps.findIndex((other) => other.id === step.id)
      return await refuse(problemsOf(err, attempted, index, form))
    }
    await formSaved(db, session, path)
    return reply.redirect(`/agents/${agent.id}/workflow/steps/${saved!.steps.find((other) => other.id === step.id)!.id}?saved=1`, 303)
  }

  app.post<{ Params: { id: string } }>('/agents/:id/workflow/steps', page({ params: idParams('id'), body: openFormBody() }, { bodyLimit: FORM_LIMIT }), async (request, reply) => {
    const scope = changeScope(request)
    const agent = await agentInScope(db, scope, request.params.id)
    return await saveStep(reply, request.consoleSession!, scope, agent, undefined, request.body as FormValues)
  })

  app.post<{ Params: { id: string, stepId: string } }>('/agents/:id/workflow/steps/:stepId', page({ params: StepParams, body: openFormBody() }, { bodyLimit: FORM_LIMIT }), async (request, reply) => {
    const scope = changeScope(request)
    const agent = await agentInScope(db, scope, request.params.id)
    return await saveStep(reply, request.consoleSession!, scope, agent, request.params.stepId, request.body as FormValues)
  })

  /** A change of the whole workflow from its page (move, start, remove): back to the page, or the page with the problem. */
  const pageChange = (path: string, change: (workflow: Workflow, stepId: string) => Workflow | null) =>
    app.post<{ Params: { id: string, stepId?: string } }>(path, page({ params: path.includes(':stepId') ? StepParams : idParams('id'), body: formBody({}) }), async (request, reply) => {
      const scope = changeScope(request)
      const session = request.consoleSession!
      const agent = await agentInScope(db, scope, request.params.id)
      const workflow = workflowOf(agent)
      const stepId = request.params.stepId
      const base = `/agents/${agent.id}/workflow`
      if (workflow === null || (stepId !== undefined && !workflow.steps.some((step) => step.id === stepId))) throw noSuchStep()
      try {
        await saveWorkflow(db, scope, agent.id, (current) => current === null ? null : change(current, stepId ?? ''))
      } catch (err) {
        if (!refused(err)) throw err
        return await refuseForm(db, reply, session, base, {}, { '': `Not changed: ${problemsOf(err, change(structuredClone(workflow), stepId ?? '') ?? workflow, undefined)['']}` })
      }
      await formSaved(db, session, base)
      return reply.redirect(`${base}?saved=1`, 303)
    })

  const move = (by: number) => (workflow: Workflow, stepId: string): Workflow => {
    const steps = [...workflow.steps]
    const from = steps.findIndex((step) => step.id === stepId)
    const to = Math.max(0, Math.min(steps.length - 1, from + by))
    steps.splice(to, 0, ...steps.splice(from, 1))
    return { ...workflow, steps }
  }
  pageChange('/agents/:id/workflow/steps/:stepId/up', move(-1))
  pageChange('/agents/:id/workflow/steps/:stepId/down', move(1))
  pageChange('/agents/:id/workflow/steps/:stepId/start', (workflow, stepId) => ({ ...workflow, start: stepId }))
  // A removed step takes the transitions that led to it along; the last step's removal removes the workflow.
  pageChange('/agents/:id/workflow/steps/:stepId/delete', (workflow, stepId) => {
    const steps = workflow.steps.filter((step) => step.id !== stepId).map((step) => {
      const transitions = step.transitions?.filter((transition) => transition.to !== stepId)
      if (transitions === undefined) return step
      const { transitions: _, ...rest } = step
      return (transitions.length === 0 ? rest : { ...rest, transitions }) as WorkflowStep
    })
    if (steps.length === 0) return null
    return { start: workflow.start === stepId ? steps[0].id : workflow.start, steps }
  })
  pageChange('/agents/:id/workflow/delete', () => null)
}
