import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { Conversation, TranscriptItem } from '../../db/shapes.ts'
import { HttpError, type AjvIssue } from '../../http/errors.ts'
import { compileBodySchema } from '../../http/validation.ts'
import type { AgentRow } from '../agents/queries.ts'
import { testChatTurn, TestChatBody, type TestChatReply } from '../agent-tests/chat.ts'
import {
  createScenario, deleteScenario, Expectation, findRun, findScenario, listRuns, listScenarios, MAX_LINE_CHARS, MAX_PERSONA_TURNS, MAX_SCENARIOS,
  runTests, ScenarioInput, scenarioFromChat, ToolMock, updateScenario,
  type ExpectationResult, type Scenario, type ScenarioResult, type TestRun, type TestRunSummary
} from '../agent-tests/tests.ts'
import type { SessionDeps } from '../voice/session.ts'
import { agentInScope, jsonProblem } from './agent-capabilities.ts'
import { errorSummary } from './components.ts'
import { DRAFT_QUERY, draftOf, formSaved, refuseForm } from './drafts.ts'
import { objectFields, problemOf, readRows, renderField, renderRows, rowCount, rowValues, type Field, type FormValues, type Problems, type Rows } from './forms.ts'
import { describe } from './fields.ts'
import { html, type SafeHtml } from './html.ts'
import { csrfField, layout, notice, viewerOf, when, type Viewer } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { formBody, ID, idParams, openFormBody, page, sendPage, text } from './reply.ts'
import { changeScope, scopeOf, viewScope, type Scope } from './scope.ts'

// An agent's tests in the console (docs/console.md, "Tests of an agent"): the text playground ("Save as test"),
// the scenarios (list, editor, delete), runs of one or all against a version, and their results side by side per
// version. It calls the agent-tests module's functions, as POST /v1/agent/:id/test-chat and /tests do.
//
// The playground works without JavaScript: each turn is a form that posts the message with the conversation so
// far (a hidden field holding its JSON, as the API's test chat takes it back) and answers the page with the new
// state (200, not a redirect: a chat has no resource to redirect to, and nothing is kept on the server). A refused
// turn or save redirects to the playground with a draft (drafts.ts) that holds that conversation, so none is lost.

/** A playground form carries the conversation so far (at most 400 items of up to 2,000 characters, tools' answers). */
const CHAT_FORM_LIMIT = 2 * 1024 * 1024
/** A scenario's form: 30 lines, 20 mocks of up to 10,000 characters, 30 expectations. */
const SCENARIO_FORM_LIMIT = 512 * 1024
/** Runs listed on the tests page, and versions shown side by side there. */
const RUNS_SHOWN = 20
const VERSIONS_SHOWN = 4
/** Empty rows offered after the stored ones. */
const BLANK_ROWS = 2

const TestParams = idParams('id', 'testId')
const RunParams = idParams('id', 'runId')
const VERSION = text('The version')
const CONVERSATION = text('The conversation')
/** The pages a refused form returns to (drafts.ts). */
const DraftQuery = Type.Object({ draft: DRAFT_QUERY })

const checkChat = compileBodySchema(TestChatBody)
const checkScenario = compileBodySchema(ScenarioInput)
const checkExpectation = compileBodySchema(Expectation)

// Words for what the wire calls by enum values.

const END_REASONS: Record<string, string> = {
  agent_hangup: 'the agent ended it',
  user_hangup: 'the caller hung up',
  inactivity: 'nobody spoke for too long',
  max_duration_reached: 'it reached the longest call duration',
  runtime_error: 'an error stopped it',
  protocol_error: 'an error stopped it',
  server_shutdown: 'the server shut down',
  call_transfer: 'it was put through to someone else'
}
const endWords = (reason: string) => END_REASONS[reason] ?? reason.replaceAll('_', ' ')

const STEP_TYPES: Record<string, string> = { conversation: 'conversation', api_call: 'API call', message: 'message', transfer: 'transfer', end: 'end' }
const RESULT_WORDS: Record<string, string> = { passed: 'Passed', failed: 'Failed', error: 'Could not run', not_judged: 'Not judged' }
const ENGINE_WORDS = { text: 'the agent\'s language model', simulator: 'the simulator (no language model is configured)' }

const NO_LLM = 'No language model is configured (LLM_URL or OPENAI_API_KEY), so the built-in simulator answers: it follows a short appointment script instead of the agent\'s prompt. Tools and workflow steps still run.'

// The transcript of a test chat or a scenario's run: caller and agent lines, tool calls with their arguments and
// output, workflow steps entered.

function transcriptItem (item: TranscriptItem): SafeHtml {
  if (item.speaker === 'tool' && item.tool !== undefined) {
    const { tool } = item
    return html`<li class="tool"><strong>Tool <code>${tool.name}</code></strong>
  <dl class="facts"><dt>Arguments</dt><dd><code>${tool.arguments}</code></dd>
  ${tool.output !== undefined && html`<dt>Answer</dt><dd><code class="preview">${tool.output}</code></dd>`}
  ${tool.error !== undefined && html`<dt>Failed</dt><dd>${tool.error}</dd>`}</dl></li>`
  }
  if (item.speaker === 'step') {
    const step = item.step
    return html`<li class="step"><strong>Step</strong> ${step === undefined ? item.content : html`${step.name} (${STEP_TYPES[step.type] ?? step.type})`}</li>`
  }
  return html`<li class="${item.speaker}"><strong>${item.speaker === 'user' ? 'Caller' : 'Agent'}:</strong> ${item.content}</li>`
}

const transcript = (items: TranscriptItem[], id?: string) => items.length === 0
  ? html`<p>Nothing said yet.</p>`
  : html`<ol class="transcript chat"${id !== undefined && html` id="${id}"`}>${items.map(transcriptItem)}</ol>`

// The playground.

interface ChatState {
  conversation: Conversation
  ended: boolean
  endReason: string | null
  engine: TestChatReply['engine']
}

interface PlaygroundPage {
  session: ConsoleSession
  agent: AgentRow
  llmConfigured: boolean
  state?: ChatState
  /** The message typed, kept when it was refused. */
  message?: string
  version?: string
  /** The test's name typed, kept when the save was refused. */
  name?: string
  /** The fields' and, under '', the turn's or the save's own. */
  problems?: Problems
}

const chatName = () => `Test chat of ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`

function playgroundPage ({ session, agent, llmConfigured, state, message = '', version = '', name = chatName(), problems = {} }: PlaygroundPage): string {
  const viewer = viewerOf(session)
  const canChange = scopeOf(session).canChange
  const action = `/agents/${agent.id}/playground`
  const json = state === undefined ? '' : JSON.stringify(state.conversation)
  const simulated = state === undefined ? !llmConfigured : state.engine === 'simulator'
  const callerLines = state?.conversation.transcript.some((item) => item.speaker === 'user') ?? false
  const versionField = describe('version', `Empty: the latest${agent.version > 0 ? ` (version ${agent.version})` : ''}. The conversation keeps the version it began with.`, problems.version)
  const messageField = describe('message', undefined, problems.message)
  return layout({
    title: `Playground: ${agent.agent_name}`,
    viewer,
    current: '/agents',
    body: html`<p><a href="/agents/${agent.id}">Back to ${agent.agent_name}</a> · <a href="/agents/${agent.id}/tests">Tests of this agent</a></p>
<p>Type what a caller would say and read what the agent answers, with the tools it calls and the workflow steps it enters. Nothing is stored and no call is made.</p>
${simulated && html`<p class="notice info" role="status" id="engine-notice">${NO_LLM}</p>`}
${errorSummary(problems)}
<section aria-labelledby="chat-title">
<h2 id="chat-title">Conversation${state?.conversation.agent_version !== undefined && html` with version ${state.conversation.agent_version}`}</h2>
${state === undefined ? html`<p>Nothing said yet: the agent's begin message comes with your first message.</p>` : transcript(state.conversation.transcript, 'chat')}
${state?.ended === true && html`<p class="notice success" role="status">The conversation has ended: ${endWords(state.endReason ?? 'agent_hangup')}.</p>`}
${state?.ended !== true && html`<form method="post" action="${action}" class="stack wide">
  ${csrfField(viewer.csrfToken)}
  <input type="hidden" name="conversation" value="${json}">
  ${state === undefined && html`<label for="version">Version</label>
  <input id="version" name="version" type="number" min="1" step="1" value="${version}"${versionField.attrs}>
  ${versionField.after}`}
  <label for="message">Your message</label>
  <input id="message" name="message" value="${message}" maxlength="${MAX_LINE_CHARS}" autocomplete="off" autofocus${state !== undefined && html` required`}${messageField.attrs}>
  ${messageField.after}
  <button type="submit">Send</button>
</form>`}
<form method="get" action="${action}" class="inline"><button type="submit">Start over</button></form>
</section>
${state !== undefined && callerLines && canChange && html`<section aria-labelledby="save-title">
<h2 id="save-title">Save as test</h2>
<p>Keeps this conversation as a test: your messages become the caller's script, and what happened (the tools called, the steps entered, how it ended) the expectations, which you can change afterwards.</p>
<form method="post" action="${action}/save" class="stack wide">
  ${csrfField(viewer.csrfToken)}
  <input type="hidden" name="conversation" value="${json}">
  ${state.ended && html`<input type="hidden" name="end_reason" value="${state.endReason ?? ''}">`}
  <label for="test-name">Name of the test</label>
  <input id="test-name" name="name" value="${name}" maxlength="200" required>
  <button type="submit">Save as test</button>
</form>
</section>`}`
  })
}

/** The conversation a playground form sent back, checked as the API checks a test chat's; undefined: none yet. */
function readConversation (text: string | undefined): { conversation: Conversation | undefined } | { problem: string } {
  if (text === undefined || text === '') return { conversation: undefined }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    value = undefined
  }
  const body = { conversation: value }
  if (value === null || typeof value !== 'object' || jsonProblem(value) !== undefined || !checkChat(body)) return { problem: 'The conversation could not be read back. Start over.' }
  return { conversation: body.conversation as Conversation }
}

// The scenario editor: a form of the scenario's members; mocks and expectations as rows.

const CALLER_CHOICES = [
  { value: 'script', label: 'Typed lines, said in turn' },
  { value: 'persona', label: 'A persona the language model plays' }
]
const CALLER_TYPE: Field = { name: 'caller.type', key: 'type', label: 'Kind of caller', schema: Type.String(), required: true, options: CALLER_CHOICES }

const MOCKS: Rows = {
  name: 'mocks',
  legend: (i) => `Mock ${i + 1}`,
  fields: (i) => objectFields(ToolMock, `mocks.${i}.`, {
    labels: { tool: 'Tool', output: 'Its answer' },
    hints: { tool: 'The tool\'s function name, as the model calls it (such as book_appointment), or its id.', output: 'What the agent gets instead of the tool\'s own answer: the tool does not run, no request leaves.' },
    multiline: ['output']
  })
}

/** What an expectation row checks: its type, and for "ended" the reason, in one select. */
const KINDS = [
  { value: 'tool_called', label: 'The agent calls a tool' },
  { value: 'variable', label: 'A variable is collected' },
  { value: 'ended:agent_hangup', label: 'The agent ends the conversation' },
  { value: 'ended:user_hangup', label: 'The caller hangs up' },
  { value: 'ended:inactivity', label: 'The conversation ends for silence' },
  { value: 'ended:max_duration_reached', label: 'The conversation reaches the longest call duration' },
  { value: 'ended:none', label: 'The conversation is still going at the end' },
  { value: 'transcript_contains', label: 'The agent says' },
  { value: 'transcript_excludes', label: 'The agent never says' },
  { value: 'step_path', label: 'The workflow goes through the steps' },
  { value: 'criterion', label: 'A statement judged by the analysis model' }
]

const EXPECTATIONS: Rows = {
  name: 'expectations',
  legend: (i) => `Expectation ${i + 1}`,
  fields: (i) => [
    { name: `expectations.${i}.kind`, key: 'kind', label: 'What to check', schema: Type.String(), required: true, options: KINDS },
    {
      name: `expectations.${i}.name`,
      key: 'name',
      label: 'Tool or variable',
      schema: Type.String({ maxLength: 64 }),
      required: false,
      hint: 'For a tool: its function name. For a variable: its name.'
    },
    {
      name: `expectations.${i}.value`,
      key: 'value',
      label: 'Value',
      schema: Type.String({ maxLength: 4000 }),
      required: false,
      multiline: true,
      hint: 'For a tool: the arguments it must be called with, as a JSON object such as {"people": 4} (other arguments may be there); empty: any. For a variable: its value. For what the agent says or never says: the text. For steps: their names or ids, one per line, in order. For a statement: the statement, such as "The agent confirmed the date before booking".'
    }
  ]
}

/** A variable's value typed in a field: a JSON number, true, false, null or "quoted text" as such, else the text. */
function scalarOf (text: string): string | number | boolean | null {
  try {
    const value: unknown = JSON.parse(text)
    if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) return value as string | number | boolean | null
  } catch {}
  return text
}

/** The inverse of scalarOf: text that reads back as the same value. */
const scalarText = (value: unknown) => typeof value === 'string' && scalarOf(value) === value ? value : JSON.stringify(value)

function expectationRow (expectation: Expectation): Record<string, unknown> {
  switch (expectation.type) {
    case 'tool_called': return { kind: 'tool_called', name: expectation.tool, value: expectation.arguments === undefined ? '' : JSON.stringify(expectation.arguments) }
    case 'variable': return { kind: 'variable', name: expectation.name, value: scalarText(expectation.value) }
    case 'ended': return { kind: `ended:${expectation.reason}` }
    case 'transcript_contains':
    case 'transcript_excludes': return { kind: expectation.type, value: expectation.text }
    case 'step_path': return { kind: 'step_path', value: expectation.steps.join('\n') }
    case 'criterion': return { kind: 'criterion', value: expectation.criterion }
  }
}

/** The form's text for a stored scenario (or a new one), with empty rows to add more. */
function scenarioForm (scenario?: Scenario): FormValues {
  const caller = scenario?.caller
  const expectations = (scenario?.expectations ?? []).map(expectationRow)
  return {
    name: scenario?.name ?? '',
    'caller.type': caller?.type ?? 'script',
    'caller.lines': caller?.type === 'script' ? caller.lines.join('\n') : '',
    'caller.persona': caller?.type === 'persona' ? caller.persona : '',
    'caller.max_turns': caller?.type === 'persona' ? String(caller.max_turns) : '8',
    dynamic_context: scenario === undefined || Object.keys(scenario.dynamic_context).length === 0 ? '' : JSON.stringify(scenario.dynamic_context, null, 2),
    ...rowValues(MOCKS, scenario?.mocks ?? [], BLANK_ROWS),
    ...rowValues(EXPECTATIONS, expectations, BLANK_ROWS)
  }
}

/** One expectation row as the API's Expectation, or the problem under its field. */
function readExpectation (kind: string, name: string, value: string, at: string): { expectation?: Expectation, problems: Problems } {
  const needName = (noun: string) => ({ problems: { [`${at}.name`]: `Give the ${noun}'s name.` } })
  const needValue = (what: string) => ({ problems: { [`${at}.value`]: `Give ${what}.` } })
  let candidate: unknown
  if (kind === 'tool_called') {
    if (name === '') return needName('tool')
    if (value.trim() === '') candidate = { type: kind, tool: name }
    else {
      let args: unknown
      try {
        args = JSON.parse(value)
      } catch {
        return { problems: { [`${at}.value`]: 'The arguments must be a JSON object, such as {"people": 4}.' } }
      }
      if (args === null || typeof args !== 'object' || Array.isArray(args)) return { problems: { [`${at}.value`]: 'The arguments must be a JSON object, such as {"people": 4}.' } }
      const problem = jsonProblem(args)
      if (problem !== undefined) return { problems: { [`${at}.value`]: `The arguments ${problem}.` } }
      candidate = { type: kind, tool: name, arguments: args }
    }
  } else if (kind === 'variable') {
    if (name === '') return needName('variable')
    candidate = { type: kind, name, value: scalarOf(value.trim()) }
  } else if (kind.startsWith('ended:')) candidate = { type: 'ended', reason: kind.slice('ended:'.length) }
  else if (kind === 'step_path') {
    const steps = value.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== '')
    if (steps.length === 0) return needValue('the steps, one per line')
    candidate = { type: kind, steps }
  } else if (kind === 'transcript_contains' || kind === 'transcript_excludes') {
    if (value.trim() === '') return needValue('the text')
    candidate = { type: kind, text: value.trim() }
  } else if (kind === 'criterion') {
    if (value.trim() === '') return needValue('the statement')
    candidate = { type: kind, criterion: value.trim() }
  } else return { problems: { [`${at}.kind`]: 'Choose what to check.' } }
  if (checkExpectation(candidate)) return { expectation: candidate as Expectation, problems: {} }
  const issue = checkExpectation.errors![0] as AjvIssue
  const field = /^\/(tool|name)\b/.test(issue.instancePath) ? 'name' : 'value'
  return { problems: { [`${at}.${field}`]: problemOf(field === 'name' ? 'Tool or variable' : 'Value', { ...issue, instancePath: issue.instancePath.replace(/^\/\w+/, '') }) } }
}

/** The scenario the editor sent, as the API's ScenarioInput, or the problems by field. */
function readScenario (form: FormValues): { input?: ScenarioInput, problems: Problems } {
  const problems: Problems = {}
  const text = (name: string) => (form[name] ?? '').trim()
  const type = text('caller.type')
  let caller: unknown
  if (type === 'script') {
    const lines = (form['caller.lines'] ?? '').split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== '')
    if (lines.length === 0) problems['caller.lines'] = 'Give the caller\'s lines, one per line.'
    caller = { type, lines }
  } else if (type === 'persona') {
    if (text('caller.persona') === '') problems['caller.persona'] = 'Say who the caller is and what they want.'
    const turns = text('caller.max_turns')
    if (!/^\d{1,3}$/.test(turns)) problems['caller.max_turns'] = `The most caller lines must be a whole number from 1 to ${MAX_PERSONA_TURNS}.`
    caller = { type, persona: text('caller.persona'), max_turns: Number(turns) }
  } else problems['caller.type'] = 'Choose one of the listed callers.'

  const mocks = readRows(MOCKS, form)
  Object.assign(problems, mocks.problems)

  const expectations: Expectation[] = []
  for (let i = 0; i < rowCount(EXPECTATIONS.name, form); i++) {
    const at = `expectations.${i}`
    const [kind, name, value] = ['kind', 'name', 'value'].map((part) => form[`${at}.${part}`] ?? '')
    if (form[`${at}.remove`] === 'true' || (kind === '' && name.trim() === '' && value.trim() === '')) continue
    const read = readExpectation(kind, name.trim(), value, at)
    Object.assign(problems, read.problems)
    if (read.expectation !== undefined) expectations.push(read.expectation)
  }
  if (expectations.length === 0 && !Object.keys(problems).some((key) => key.startsWith('expectations.'))) problems.expectations = 'Add at least one expectation: what the test checks.'

  let dynamicContext: unknown = {}
  if (text('dynamic_context') !== '') {
    try {
      dynamicContext = JSON.parse(text('dynamic_context'))
    } catch {}
    const problem = jsonProblem(dynamicContext)
    if (dynamicContext === null || typeof dynamicContext !== 'object' || Array.isArray(dynamicContext)) problems.dynamic_context = 'The variables must be a JSON object, such as {"customer_name": "Ada"}.'
    else if (problem !== undefined) problems.dynamic_context = `The variables ${problem}.`
  }
  if (Object.keys(problems).length > 0) return { problems }

  const input = { name: text('name'), caller, mocks: mocks.rows!.map((row) => row.values), expectations, dynamic_context: dynamicContext }
  if (checkScenario(input)) return { input: input as ScenarioInput, problems }
  // What the member checks above leave to the schema: the name, a line's or the persona's length.
  const issue = checkScenario.errors![0] as AjvIssue
  const path = issue.instancePath
  if (path.startsWith('/name') || path === '') return { problems: { name: problemOf('Name', { ...issue, instancePath: '' }) } }
  if (path.startsWith('/caller/lines')) return { problems: { 'caller.lines': problemOf('Lines', { ...issue, instancePath: path.slice('/caller/lines'.length) }) } }
  if (path.startsWith('/caller/persona')) return { problems: { 'caller.persona': problemOf('Persona', { ...issue, instancePath: '' }) } }
  if (path.startsWith('/caller/max_turns')) return { problems: { 'caller.max_turns': problemOf('Most caller lines', { ...issue, instancePath: '' }) } }
  if (path.startsWith('/mocks')) return { problems: { mocks: problemOf('Mocks', { ...issue, instancePath: '' }) } }
  if (path.startsWith('/expectations')) return { problems: { expectations: problemOf('Expectations', { ...issue, instancePath: '' }) } }
  return { problems: { dynamic_context: problemOf('Variables', { ...issue, instancePath: '' }) } }
}

interface ScenarioPage {
  session: ConsoleSession
  agent: AgentRow
  scenario?: Scenario
  form: FormValues
  problems: Problems
  saved?: boolean
  /** A refused run of this test (its version typed and problems). */
  run?: RunDraft
}

function scenarioPage ({ session, agent, scenario, form, problems, saved, run }: ScenarioPage): string {
  const viewer = viewerOf(session)
  const readOnly = !scopeOf(session).canChange
  const action = scenario === undefined ? `/agents/${agent.id}/tests` : `/agents/${agent.id}/tests/${scenario._id}`
  const field = (name: string, label: string, hint: string, control: 'text' | 'textarea' | 'number', extra?: SafeHtml) => {
    const id = name.replaceAll('.', '-')
    const { attrs, after } = describe(id, hint, problems[name])
    return html`<label for="${id}">${label}</label>
  ${control === 'textarea'
    ? html`<textarea id="${id}" name="${name}" rows="5"${attrs}${extra}>
${form[name] ?? ''}</textarea>`
    : html`<input id="${id}" name="${name}"${control === 'number' && html` type="number"`} value="${form[name] ?? ''}"${attrs}${extra}>`}
  ${after}`
  }
  return layout({
    title: scenario === undefined ? `New test of ${agent.agent_name}` : `Test: ${scenario.name}`,
    viewer,
    current: '/agents',
    body: html`<p><a href="/agents/${agent.id}/tests">All tests of ${agent.agent_name}</a></p>
${saved === true && notice('success', 'Saved.')}
${errorSummary(problems)}
${readOnly && html`<p>You are a member of this workspace: you can see this test and run it, not change it.</p>`}
<form method="post" action="${action}" class="stack wide">
  ${csrfField(viewer.csrfToken)}
  <fieldset class="plain"${readOnly && html` disabled`}>
  <legend class="visually-hidden">The test</legend>
  ${field('name', 'Name', 'Shown in the list of tests and in results.', 'text', html` maxlength="200" required`)}
  <fieldset class="group"><legend>The caller</legend>
  ${renderField(CALLER_TYPE, form, problems)}
  ${field('caller.lines', 'Lines of the caller', 'For typed lines: one per line, each said after the agent has answered the one before. The test stops after the last line or when the conversation ends.', 'textarea')}
  ${field('caller.persona', 'Persona', 'For a persona: who the caller is and what they want, in plain language, such as "Ada wants a table for four on Friday evening and asks about parking". The language model plays them (LLM_URL).', 'textarea')}
  ${field('caller.max_turns', 'Most caller lines', `For a persona: 1 to ${MAX_PERSONA_TURNS}; the test stops then, or when either side ends the conversation.`, 'number', html` min="1" max="${MAX_PERSONA_TURNS}" step="1"`)}
  </fieldset>
  <fieldset class="group" id="mocks" aria-describedby="mocks-hint"><legend>Tool mocks</legend>
  <p id="mocks-hint" class="hint">Tools that give a fixed answer instead of running, so that a test never touches a real calendar or system. Tools without a mock run for real. Save to get more empty rows.</p>
  ${problems.mocks !== undefined && html`<p class="field-error">${problems.mocks}</p>`}
  ${renderRows(MOCKS, form, problems)}
  </fieldset>
  <fieldset class="group" id="expectations" aria-describedby="expectations-hint${problems.expectations !== undefined ? ' expectations-error' : ''}"><legend>Expectations</legend>
  <p id="expectations-hint" class="hint">What must happen for the test to pass: every expectation is checked. Save to get more empty rows.</p>
  ${problems.expectations !== undefined && html`<p id="expectations-error" class="field-error">${problems.expectations}</p>`}
  ${renderRows(EXPECTATIONS, form, problems)}
  </fieldset>
  ${field('dynamic_context', 'Variables of the conversation', 'Optional: a JSON object of the {{variables}} a call would bring, such as {"customer_name": "Ada"}.', 'textarea', html` class="code"`)}
  </fieldset>
  ${!readOnly && html`<button type="submit">${scenario === undefined ? 'Add test' : 'Save'}</button>`}
</form>
${scenario !== undefined && html`<section aria-labelledby="run-title">
<h2 id="run-title">Run this test</h2>
${run !== undefined && errorSummary(run.problems, 'run-one-')}
${runForm(viewer, agent, scenario._id, run)}
</section>`}
${scenario !== undefined && !readOnly && html`<section aria-labelledby="delete-title">
<h2 id="delete-title">Delete</h2>
<form method="post" action="${action}/delete">${csrfField(viewer.csrfToken)}<button type="submit" class="danger">Delete this test</button></form>
</section>`}`
  })
}

/** A refused run (drafts.ts): the version typed, and the problems (`version`, or '' the run's own). */
interface RunDraft { version: string, problems: Problems }

/** The run form's draft, when the page's draft is one (its values name the form: the test's page has two). */
const runDraft = (draft: { values: FormValues, problems: Problems } | undefined): RunDraft | undefined =>
  draft?.values.form === 'run' ? { version: draft.values.version ?? '', problems: draft.problems } : undefined

/** The form that runs one test (`testId`) or all of them, against the latest or a chosen version. */
function runForm (viewer: Viewer, agent: AgentRow, testId?: string, draft?: RunDraft): SafeHtml {
  const id = testId === undefined ? 'run-version' : 'run-one-version'
  const { attrs, after } = describe(id, `Empty: the latest${agent.version > 0 ? ` (version ${agent.version})` : ''}.`, draft?.problems.version)
  return html`<form method="post" action="/agents/${agent.id}/tests/run" class="inline run">
  ${csrfField(viewer.csrfToken)}
  ${testId !== undefined && html`<input type="hidden" name="test_id" value="${testId}">`}
  <label for="${id}">Version</label>
  <input id="${id}" name="version" type="number" min="1" step="1" value="${draft?.version ?? ''}"${attrs}>
  ${after}
  <button type="submit">${testId === undefined ? 'Run all tests' : 'Run this test'}</button>
</form>`
}

// The tests page and a run's results.

const duration = (ms: number) => ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`

function describeExpectation (expectation: Expectation): SafeHtml {
  switch (expectation.type) {
    case 'tool_called': return html`The agent calls <code>${expectation.tool}</code>${expectation.arguments !== undefined && html` with <code>${JSON.stringify(expectation.arguments)}</code>`}`
    case 'variable': return html`The variable <code>${expectation.name}</code> is <code>${JSON.stringify(expectation.value)}</code>`
    case 'ended': return expectation.reason === 'none' ? html`The conversation is still going at the end` : html`The conversation ends: ${endWords(expectation.reason)}`
    case 'transcript_contains': return html`The agent says “${expectation.text}”`
    case 'transcript_excludes': return html`The agent never says “${expectation.text}”`
    case 'step_path': return html`The workflow goes through ${expectation.steps.join(' → ')}`
    case 'criterion': return html`${expectation.criterion} (judged by the analysis model)`
  }
}

const resultBadge = (status: string) => html`<span class="result ${status}">${RESULT_WORDS[status] ?? status}</span>`

function expectationResult (result: ExpectationResult): SafeHtml {
  return html`<li>${resultBadge(result.status)} ${describeExpectation(result.expectation)}${result.reason !== '' && html`<br><span class="hint">${result.reason}</span>`}</li>`
}

/** One scenario's result in a run: pass or fail per expectation with its detail, the timings, the transcript. */
function scenarioResult (result: ScenarioResult, run: TestRunSummary): SafeHtml {
  const id = `result-${run._id}-${result.scenario_id}`
  return html`<article class="test-result" aria-labelledby="${id}">
<h3 id="${id}">${result.scenario_name}: ${resultBadge(result.status)} <span class="hint">version ${run.agent_version}</span></h3>
${result.error !== null && notice('error', `It could not run: ${result.error}`)}
<ul class="expectations">${result.expectations.map(expectationResult)}</ul>
<dl class="facts">
  <dt>Ended</dt><dd>${result.end_reason === null ? 'no: the caller stopped first' : endWords(result.end_reason)}</dd>
  <dt>Caller lines</dt><dd>${result.caller_turns}</dd>
  <dt>Answer times</dt><dd>${result.answer_ms.length === 0 ? '—' : result.answer_ms.map(duration).join(', ')}</dd>
  <dt>Whole test</dt><dd>${duration(result.duration_ms)}</dd>
</dl>
<details><summary>Transcript of ${result.scenario_name} on version ${run.agent_version}</summary>
${transcript(result.transcript)}
</details>
</article>`
}

function runPage (session: ConsoleSession, agent: AgentRow, run: TestRun, other: TestRun | undefined, runs: TestRunSummary[]): string {
  const viewer = viewerOf(session)
  const runs2 = other === undefined ? [run] : [run, other]
  const ids = [...new Set(runs2.flatMap((r) => r.results.map((result) => result.scenario_id)))]
  const choices = runs.filter((r) => r._id !== run._id)
  return layout({
    title: `Test run on version ${run.agent_version}`,
    viewer,
    current: '/agents',
    body: html`<p><a href="/agents/${agent.id}/tests">All tests of ${agent.agent_name}</a></p>
${notice(run.status === 'passed' ? 'success' : 'error', `${run.status === 'passed' ? 'Every test passed' : 'Some tests failed'}: ${run.passed} passed, ${run.failed} failed.`)}
<dl class="facts">
  <dt>Agent version</dt><dd>${run.agent_version}</dd>
  <dt>Answered by</dt><dd>${ENGINE_WORDS[run.engine]}</dd>
  <dt>Started</dt><dd>${when(new Date(run.started_at))}</dd>
  <dt>Took</dt><dd>${duration(run.duration_ms)}</dd>
</dl>
${choices.length > 0 && html`<form method="get" action="/agents/${agent.id}/tests/runs/${run._id}" class="inline">
  <label for="with">Side by side with</label>
  <select id="with" name="with">
    ${choices.map((r) => html`<option value="${r._id}"${r._id === other?._id && html` selected`} data-datetime="${new Date(r.started_at).toISOString()}">version ${r.agent_version}, ${new Date(r.started_at).toISOString().slice(0, 16).replace('T', ' ')} UTC: ${r.passed} passed, ${r.failed} failed</option>`)}
  </select>
  <button type="submit">Compare</button>
</form>`}
${ids.map((scenarioId) => {
  const name = runs2.flatMap((r) => r.results).find((result) => result.scenario_id === scenarioId)!.scenario_name
  return html`<section aria-label="${name}" class="${other === undefined ? '' : 'side-by-side'}">
${runs2.map((r) => {
  const result = r.results.find((item) => item.scenario_id === scenarioId)
  return result === undefined ? html`<p>${name} did not run on version ${r.agent_version}.</p>` : scenarioResult(result, r)
})}
</section>`
})}`
  })
}

interface TestsPage {
  session: ConsoleSession
  agent: AgentRow
  scenarios: Scenario[]
  runs: TestRunSummary[]
  /** The newest run of each of the newest versions run, newest first. */
  byVersion: TestRun[]
  run?: RunDraft
}

const callerWords = (scenario: Scenario) => scenario.caller.type === 'script'
  ? `${scenario.caller.lines.length} typed line${scenario.caller.lines.length === 1 ? '' : 's'}`
  : 'a persona'

function testsPage ({ session, agent, scenarios, runs, byVersion, run }: TestsPage): string {
  const viewer = viewerOf(session)
  const canChange = scopeOf(session).canChange
  return layout({
    title: `Tests of ${agent.agent_name}`,
    viewer,
    current: '/agents',
    body: html`<p><a href="/agents/${agent.id}">Back to ${agent.agent_name}</a> · <a href="/agents/${agent.id}/playground">Playground</a></p>
${run !== undefined && errorSummary(run.problems, 'run-')}
<p>A test plays a caller against the agent through its workflow and tools, then checks what happened. Save a conversation of the playground as a test, or write one.</p>
${canChange && scenarios.length < MAX_SCENARIOS && html`<p><a href="/agents/${agent.id}/tests/new">New test</a></p>`}
${scenarios.length === 0
  ? html`<p>No tests yet.</p>`
  : html`<div class="table"><table>
  <caption>Tests${byVersion.length > 0 && ', with the latest result on each version'}</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">Caller</th><th scope="col">Expectations</th>${byVersion.map((run) => html`<th scope="col"><a href="/agents/${agent.id}/tests/runs/${run._id}">Version ${run.agent_version}</a></th>`)}</tr></thead>
  <tbody>${scenarios.map((scenario) => html`<tr>
    <td><a href="/agents/${agent.id}/tests/${scenario._id}">${scenario.name}</a></td><td>${callerWords(scenario)}</td><td>${scenario.expectations.length}</td>
    ${byVersion.map((run) => {
      const result = run.results.find((item) => item.scenario_id === scenario._id)
      return html`<td>${result === undefined ? '—' : html`<a href="/agents/${agent.id}/tests/runs/${run._id}#result-${run._id}-${scenario._id}">${resultBadge(result.status)}</a>`}</td>`
    })}
  </tr>`)}</tbody>
</table></div>
${runForm(viewer, agent, undefined, run)}`}
<h2>Runs</h2>
${runs.length === 0
  ? html`<p>No runs yet.</p>`
  : html`<div class="table"><table>
  <caption>The latest runs</caption>
  <thead><tr><th scope="col">Started</th><th scope="col">Version</th><th scope="col">Result</th><th scope="col" class="number">Passed</th><th scope="col" class="number">Failed</th><th scope="col">Took</th></tr></thead>
  <tbody>${runs.map((run) => html`<tr>
    <td><a href="/agents/${agent.id}/tests/runs/${run._id}">${when(new Date(run.started_at))}</a></td><td>${run.agent_version}</td><td>${resultBadge(run.status)}</td>
    <td class="number">${run.passed}</td><td class="number">${run.failed}</td><td>${duration(run.duration_ms)}</td>
  </tr>`)}</tbody>
</table></div>`}`
  })
}

/** A version typed in a form: undefined when empty (the latest), else a whole number from 1, or the problem. */
function versionOf (text: string | undefined): { version: number | null } | { problem: string } {
  const value = (text ?? '').trim()
  if (value === '') return { version: null }
  return /^\d{1,9}$/.test(value) && Number(value) >= 1 ? { version: Number(value) } : { problem: 'The version must be a whole number from 1.' }
}

/** A 4xx of the tests module as a sentence to show; anything else is thrown on. */
function refusal (err: unknown): string {
  if (err instanceof HttpError && err.statusCode < 500) return `${err.message.charAt(0).toUpperCase()}${err.message.slice(1)}${/[.!?]$/.test(err.message) ? '' : '.'}`
  throw err
}

export async function consoleAgentTestRoutes (app: FastifyInstance, { deps }: { deps: SessionDeps }): Promise<void> {
  const { db } = deps
  const llmConfigured = deps.config.voice.llm.configured

  async function scenarioOf (scope: Scope, agent: AgentRow, id: string): Promise<Scenario> {
    const scenario = ID.test(id) ? await findScenario(db, scope.ownerId, agent.id, id) : undefined
    if (scenario === undefined) throw new HttpError(404, 'not_found', 'This agent has no test with that id.')
    return scenario
  }

  /** The tests page's data: the agent's tests, its recent runs, and the newest run of each of its latest versions. */
  async function testsOf (session: ConsoleSession, agent: AgentRow): Promise<TestsPage> {
    const scope = scopeOf(session)
    const [scenarios, runs] = await Promise.all([listScenarios(db, scope.ownerId, agent.id), listRuns(db, scope.ownerId, agent.id, { limit: RUNS_SHOWN, offset: 0 })])
    const newest = new Map<number, TestRunSummary>()
    for (const run of runs.data) if (!newest.has(run.agent_version)) newest.set(run.agent_version, run)
    const shown = [...newest.values()].sort((a, b) => b.agent_version - a.agent_version).slice(0, VERSIONS_SHOWN)
    const byVersion = (await Promise.all(shown.map(async (run) => await findRun(db, scope.ownerId, agent.id, run._id)))).filter((run) => run !== undefined)
    return { session, agent, scenarios, runs: runs.data, byVersion }
  }

  // The playground: a member may use it too (it changes nothing, as talking to an agent does not).

  /** The state of the conversation a refused form carried (its draft), so that the playground goes on with it. */
  const chatState = (conversation: Conversation | undefined, endReason = ''): ChatState | undefined => conversation === undefined
    ? undefined
    : { conversation, ended: endReason !== '', endReason: endReason === '' ? null : endReason, engine: llmConfigured ? 'text' : 'simulator' }

  app.get<{ Params: { id: string }, Querystring: { draft?: string } }>('/agents/:id/playground', page({ params: idParams('id'), querystring: DraftQuery }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const agent = await agentInScope(db, page.scope, request.params.id)
    const draft = await draftOf(db, page.session, `/agents/${agent.id}/playground`, request.query.draft)
    if (draft === undefined) return sendPage(reply, 200, playgroundPage({ session: page.session, agent, llmConfigured }))
    const { values, problems } = draft
    // Only a conversation that was read is kept in a draft.
    const read = readConversation(values.conversation)
    const state = chatState('conversation' in read ? read.conversation : undefined, values.end_reason)
    return sendPage(reply, 200, playgroundPage({ session: page.session, agent, llmConfigured, state, message: values.message, version: values.version, name: values.name, problems }))
  })

  app.post<{ Params: { id: string } }>('/agents/:id/playground', page({ params: idParams('id'), body: formBody({ conversation: CONVERSATION, message: text('The message'), version: VERSION }) }, { bodyLimit: CHAT_FORM_LIMIT }), async (request, reply) => {
    const session = request.consoleSession!
    const scope = scopeOf(session)
    const agent = await agentInScope(db, scope, request.params.id)
    const form = request.body as FormValues
    const conversation = readConversation(form.conversation)
    const message = (form.message ?? '').trim()
    const version = versionOf(form.version)
    // The draft keeps the conversation so far (as sent, once read), so that the page it returns to goes on with it.
    const refuse = async (problems: Problems) => await refuseForm(db, reply, session, `/agents/${agent.id}/playground`,
      { conversation: 'problem' in conversation ? undefined : form.conversation, message: form.message, version: form.version }, problems)
    if ('problem' in conversation) return await refuse({ '': conversation.problem })
    if (conversation.conversation !== undefined && message === '') return await refuse({ message: 'Type a message first.' })
    if ('problem' in version) return await refuse({ version: version.problem })
    if (message.length > MAX_LINE_CHARS) return await refuse({ message: `A message may be at most ${MAX_LINE_CHARS} characters long.` })
    let turn: TestChatReply
    try {
      turn = await testChatTurn(deps, scope.ownerId, agent.id, { message: message === '' ? undefined : message, conversation: conversation.conversation, version: version.version })
    } catch (err) {
      return await refuse({ '': refusal(err) })
    }
    const state = { conversation: turn.conversation, ended: turn.ended, endReason: turn.end_reason, engine: turn.engine }
    return sendPage(reply, 200, playgroundPage({ session, agent, llmConfigured, state }))
  })

  app.post<{ Params: { id: string } }>('/agents/:id/playground/save', page({ params: idParams('id'), body: formBody({ conversation: CONVERSATION, name: text('The name'), end_reason: text('How it ended') }) }, { bodyLimit: CHAT_FORM_LIMIT }), async (request, reply) => {
    const session = request.consoleSession!
    const scope = changeScope(request)
    const agent = await agentInScope(db, scope, request.params.id)
    const form = request.body as FormValues
    const conversation = readConversation(form.conversation)
    const path = `/agents/${agent.id}/playground`
    if ('problem' in conversation) return await refuseForm(db, reply, session, path, { name: form.name }, { '': conversation.problem })
    if (conversation.conversation === undefined) return await refuseForm(db, reply, session, path, { name: form.name }, { '': 'There is no conversation to save: type to the agent first.' })
    let scenario: Scenario
    try {
      // How it ended, as the last turn answered it (an expectation of the test).
      const endReason = (form.end_reason ?? '') === '' ? null : form.end_reason
      const input = scenarioFromChat(conversation.conversation, { name: (form.name ?? '').trim() || chatName(), endReason })
      scenario = await createScenario(db, scope.ownerId, agent.id, input)
    } catch (err) {
      return await refuseForm(db, reply, session, path, { conversation: form.conversation, end_reason: form.end_reason, name: form.name }, { '': `Not saved: ${refusal(err)}` })
    }
    await formSaved(db, session, path)
    return reply.redirect(`/agents/${agent.id}/tests/${scenario._id}?saved=1`, 303)
  })

  // The tests.

  app.get<{ Params: { id: string }, Querystring: { draft?: string } }>('/agents/:id/tests', page({ params: idParams('id'), querystring: DraftQuery }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const agent = await agentInScope(db, page.scope, request.params.id)
    const run = runDraft(await draftOf(db, page.session, `/agents/${agent.id}/tests`, request.query.draft))
    return sendPage(reply, 200, testsPage({ ...await testsOf(page.session, agent), run }))
  })

  app.get<{ Params: { id: string }, Querystring: { draft?: string } }>('/agents/:id/tests/new', page({ params: idParams('id'), querystring: DraftQuery }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    if (!page.scope.canChange) return changeScope(request)
    const agent = await agentInScope(db, page.scope, request.params.id)
    const draft = await draftOf(db, page.session, `/agents/${agent.id}/tests/new`, request.query.draft)
    return sendPage(reply, 200, scenarioPage({ session: page.session, agent, form: draft?.values ?? scenarioForm(), problems: draft?.problems ?? {} }))
  })

  app.post<{ Params: { id: string } }>('/agents/:id/tests', page({ params: idParams('id'), body: openFormBody() }, { bodyLimit: SCENARIO_FORM_LIMIT }), async (request, reply) => {
    const session = request.consoleSession!
    const scope = changeScope(request)
    const agent = await agentInScope(db, scope, request.params.id)
    const form = request.body as FormValues
    const path = `/agents/${agent.id}/tests/new`
    const read = readScenario(form)
    if (read.input === undefined) return await refuseForm(db, reply, session, path, form, read.problems)
    let scenario: Scenario
    try {
      scenario = await createScenario(db, scope.ownerId, agent.id, read.input)
    } catch (err) {
      return await refuseForm(db, reply, session, path, form, { '': refusal(err) })
    }
    await formSaved(db, session, path)
    return reply.redirect(`/agents/${agent.id}/tests/${scenario._id}?saved=1`, 303)
  })

  app.post<{ Params: { id: string } }>('/agents/:id/tests/run', page({ params: idParams('id'), body: formBody({ test_id: text('The test'), version: VERSION }) }), async (request, reply) => {
    // A member may run the tests: a run changes no setting (as a call does not).
    const session = request.consoleSession!
    const scope = scopeOf(session)
    const agent = await agentInScope(db, scope, request.params.id)
    const form = request.body as FormValues
    const version = versionOf(form.version)
    const testId = form.test_id ?? ''
    const scenario = testId === '' ? undefined : await scenarioOf(scope, agent, testId)
    // Back to the page of the form: the test's, or the tests' (run all).
    const refuse = async (problems: Problems) => await refuseForm(db, reply, session, `/agents/${agent.id}/tests${scenario === undefined ? '' : `/${scenario._id}`}`, { form: 'run', version: form.version }, problems)
    if ('problem' in version) return await refuse({ version: version.problem })
    let run: TestRun
    try {
      run = await runTests(deps, scope.ownerId, agent.id, { testIds: scenario === undefined ? undefined : [scenario._id], version: version.version })
    } catch (err) {
      return await refuse({ '': `Not run: ${refusal(err)}` })
    }
    return reply.redirect(`/agents/${agent.id}/tests/runs/${run._id}`, 303)
  })

  app.get<{ Params: { id: string, runId: string }, Querystring: { with?: string } }>('/agents/:id/tests/runs/:runId', page({ params: RunParams, querystring: Type.Object({ with: text('The run to compare with') }) }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const { scope } = page
    const agent = await agentInScope(db, scope, request.params.id)
    const runOf = async (id: string) => {
      const run = ID.test(id) ? await findRun(db, scope.ownerId, agent.id, id) : undefined
      if (run === undefined) throw new HttpError(404, 'not_found', 'This agent has no test run with that id.')
      return run
    }
    const run = await runOf(request.params.runId)
    const other = typeof request.query.with === 'string' && request.query.with !== '' ? await runOf(request.query.with) : undefined
    const runs = await listRuns(db, scope.ownerId, agent.id, { limit: RUNS_SHOWN, offset: 0 })
    return sendPage(reply, 200, runPage(page.session, agent, run, other, runs.data))
  })

  app.get<{ Params: { id: string, testId: string }, Querystring: { saved?: string, draft?: string } }>('/agents/:id/tests/:testId', page({ params: TestParams, querystring: Type.Object({ saved: text('Saved'), draft: DRAFT_QUERY }) }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const agent = await agentInScope(db, page.scope, request.params.id)
    const scenario = await scenarioOf(page.scope, agent, request.params.testId)
    // The page's draft is of its editor (a member has none: the editor is read-only) or of its run form.
    const draft = await draftOf(db, page.session, `/agents/${agent.id}/tests/${scenario._id}`, request.query.draft)
    const run = runDraft(draft)
    const edited = run === undefined && page.scope.canChange ? draft : undefined
    return sendPage(reply, 200, scenarioPage({ session: page.session, agent, scenario, form: edited?.values ?? scenarioForm(scenario), problems: edited?.problems ?? {}, saved: request.query.saved !== undefined, run }))
  })

  app.post<{ Params: { id: string, testId: string } }>('/agents/:id/tests/:testId', page({ params: TestParams, body: openFormBody() }, { bodyLimit: SCENARIO_FORM_LIMIT }), async (request, reply) => {
    const session = request.consoleSession!
    const scope = changeScope(request)
    const agent = await agentInScope(db, scope, request.params.id)
    const scenario = await scenarioOf(scope, agent, request.params.testId)
    const form = request.body as FormValues
    const path = `/agents/${agent.id}/tests/${scenario._id}`
    const read = readScenario(form)
    if (read.input === undefined) return await refuseForm(db, reply, session, path, form, read.problems)
    let updated: Scenario | undefined
    try {
      updated = await updateScenario(db, scope.ownerId, agent.id, scenario._id, { mocks: [], dynamic_context: {}, ...read.input })
    } catch (err) {
      return await refuseForm(db, reply, session, path, form, { '': refusal(err) })
    }
    if (updated === undefined) throw new HttpError(404, 'not_found', 'This agent has no test with that id.')
    await formSaved(db, session, path)
    return reply.redirect(`${path}?saved=1`, 303)
  })

  app.post<{ Params: { id: string, testId: string } }>('/agents/:id/tests/:testId/delete', page({ params: TestParams, body: formBody({}) }), async (request, reply) => {
    const scope = changeScope(request)
    const agent = await agentInScope(db, scope, request.params.id)
    const scenario = await scenarioOf(scope, agent, request.params.testId)
    await deleteScenario(db, scope.ownerId, agent.id, scenario._id)
    return reply.redirect(`/agents/${agent.id}/tests`, 303)
  })
}
