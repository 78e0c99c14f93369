import { readFileSync } from 'node:fs'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Type, type TSchema } from 'typebox'
import type { VoiceConfig } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import type { RetrievalField } from '../../db/schema.ts'
import type { TurnDetection } from '../../db/shapes.ts'
import { HttpError, invalidInput, type AjvIssue } from '../../http/errors.ts'
import { ObjectId } from '../../http/schemas.ts'
import { compileBodySchema } from '../../http/validation.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { listVoices, voiceExists } from '../account/queries.ts'
import { dataRetrieval } from '../agents/data-retrieval.ts'
import { checkTurnDetection, TURN_DETECTION_DEFAULT } from '../agents/turn-detection.ts'
import { recordVersion, recordVersions } from '../agents/versions.ts'
import {
  agentsOfLlm, countAgentsOfLlm, findAgent, findLlm, insertAgent, insertLlm, listAgents, lockAgents, updateAgent, updateLlm, type AgentChanges, type AgentRow, type LlmRow, type LlmValues
} from '../agents/queries.ts'
import {
  AGENT_DEFAULTS, AgentUpdate, CALL_SETTINGS_DEFAULTS, CALLBACK_SETTINGS_DEFAULTS, DataRetrievalItem, LLM_DEFAULTS, LlmWrite, newAgentDefaults, VOICEMAIL_SETTINGS_DEFAULTS, WIDGET_SETTINGS_DEFAULTS
} from '../agents/schemas.ts'
import { startWebCall } from '../calls/web-calls.ts'
import { maskUrlTemplate } from '../deliveries/render.ts'
import { deleteWidgetKey, findWidgetKey, putWidgetKey } from '../widget/queries.ts'
import { keyProblem, newWidgetKey, widgetSettings, widgetSnippet } from '../widget/widget.ts'
import { capabilitySection } from './agent-capabilities.ts'
import { knowledgeData, knowledgeView } from './agent-knowledge.ts'
import { agentLifeData, agentLifeView } from './agent-templates.ts'
import { workflowSection } from './agent-workflow.ts'
import { fieldValues, objectFields, readFields, readRows, renderFields, renderRows, rowCount, rowValues, type Field as FormField, type FormValues, type Rows } from './forms.ts'
import { describe } from './fields.ts'
import { errorSummary } from './components.ts'
import { html, type SafeHtml } from './html.ts'
import { phoneCallSection } from './test-phone-call.ts'
import { DRAFT_QUERY, draftOf, formSaved, refuseForm } from './drafts.ts'
import { engineNeeds, voiceChoices, voicePicker, type VoiceChoices } from './voice-picker.ts'
import { csrfField, layout, notice, viewerOf, when, type Viewer } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { changeScope, inScope, scopeOf, viewScope, type Scope } from './scope.ts'
import { formBody, idParams, openFormBody, page as routeSchema, sendPage, text as optionalText } from './reply.ts'
import { CONNECTING_PAGE_CSP } from './security.ts'

// The console's agents: list, create, edit, and "Talk to this agent" (a web call in the browser). They call the
// agents' and calls' module functions, with the API's validation schemas and the same ownership rule.

const TALK_SCRIPT = readFileSync(new URL('./static/talk.js', import.meta.url))
const UNSAVED_SCRIPT = readFileSync(new URL('./static/unsaved.js', import.meta.url))

/** A prompt may be 50,000 characters (LlmWrite): more than the console's usual 16 KB form, once URL-encoded. */
const AGENT_FORM_LIMIT = 512 * 1024
const LIST_LIMIT = 200

type Field = 'agent_name' | 'begin_message' | 'general_prompt' | 'language' | 'voice_id' | 'webhook_url' | 'status'
/** The form's text by field name: the fields above, and the schema-drawn sections' (forms.ts). */
type AgentForm = FormValues
type Problems = Record<string, string>

/** The voice engines in words; the engine's name leads, as docs/voice.md and the refusals name it. */
const ENGINE_WORDS: Record<VoiceConfig['engine'], string> = {
  realtime: 'Realtime: one speech-to-speech model',
  cascade: 'Cascade: speech-to-text, language model, text-to-speech',
  simulator: 'Simulator: typed turns, no providers'
}

// The other settings, drawn from the API's schemas. A field missing from a form keeps its value (or default).
// Values that are not plain words get words (`values`); the engine's empty choice names the installation's engine
// when the form is drawn (agentForm).
const LLM_FIELDS = objectFields(LlmWrite, 'llm.', {
  omit: ['begin_message', 'general_prompt', 'turn_detection'],
  required: ['model', 'temperature'],
  labels: { model: 'Model', max_tokens: 'Most tokens per reply', engine: 'Engine' },
  hints: { max_tokens: 'Empty: the model\'s own limit.', engine: 'How its calls listen and speak (docs/voice.md). The installation\'s default is the engine VOICE_ENGINE names.' },
  values: { engine: ENGINE_WORDS }
})
const TURN_WORDS: Record<TurnDetection['type'], string> = {
  switchboard: 'Switchboard', server_vad: 'Voice activity (the realtime provider\'s)', semantic_vad: 'Meaning of the words (the realtime provider\'s)'
}
const TURN_FIELDS = objectFields(LlmWrite.properties.turn_detection, 'llm.turn_detection.', {
  required: ['type'],
  labels: { type: 'Who detects the end of a turn', silence_duration_ms: 'Silence that ends the turn (ms)', prefix_padding_ms: 'Audio kept before speech (ms)' },
  hints: {
    type: 'Switchboard: ours, the same on every engine. Voice activity and Meaning of the words: the realtime provider\'s (Realtime engine only); it then decides when the caller talks over the agent.',
    eagerness: 'Meaning of the words only: how soon the provider answers; Low waits longest.'
  },
  values: {
    type: TURN_WORDS,
    eagerness: { auto: 'Auto (as Medium)' }
  },
  empty: { eagerness: 'The default (Auto)' }
})
const CALL_FIELDS = objectFields(AgentUpdate.properties.call_settings, 'call_settings.', {
  omit: ['language'],
  required: 'all',
  labels: {
    sentiment_analysis: 'Analyse sentiment', call_summary: 'Write a summary', max_call_duration_minutes: 'Longest call (minutes)',
    reminder_after_seconds: 'Check in after silence of (seconds)', reminder_max_count: 'Check-ins', silence_timeout_seconds: 'End the call after silence of (seconds)',
    responsiveness: 'Responsiveness', recording_enabled: 'Record calls', stt_languages: 'Languages the speech recogniser listens for',
    wait_for_hello_seconds: 'Wait for the callee\'s hello (seconds)'
  },
  hints: {
    responsiveness: '0 to 1: how soon the agent answers once the caller falls silent; higher answers sooner. 0.5: about 0.2 s after a finished sentence, 1.2 s after "and", "um" or half a phone number.',
    stt_languages: 'One BCP-47 tag per line, at most 4; none: the agent\'s language.',
    wait_for_hello_seconds: 'Outbound phone calls: the begin message waits for the person who picked up to speak first, this long at most. 0: it is said at once.'
  }
})
const BEHAVIOUR_FIELDS = objectFields(AgentUpdate, '', {
  only: ['interruption_sensitivity', 'is_data_collection_active', 'is_customer_memory_active', 'folder'],
  required: ['interruption_sensitivity'],
  labels: { is_data_collection_active: 'Collect data during calls', is_customer_memory_active: 'Remember earlier calls with the same customer' },
  hints: { folder: 'Groups agents; empty: none.', is_data_collection_active: 'The agent asks for the data retrieval fields during the call and saves the answers as the call\'s collected data (beside what analysis extracts afterwards).' }
})
const WIDGET_FIELDS = objectFields(AgentUpdate.properties.widget_settings, 'widget_settings.', {
  // The version pin is chosen on the agent's Versions page.
  omit: ['agent_version'],
  required: ['enabled', 'theme', 'primary_color', 'position'],
  labels: { enabled: 'Offer the web-call widget', primary_color: 'Primary colour', allowed_origins: 'Sites that may embed it' },
  values: { position: { 'bottom-right': 'Bottom right', 'bottom-left': 'Bottom left' } },
  hints: { allowed_origins: 'One origin per line, such as https://www.example.com. None: any site may hold the calls your backend starts, and the widget key works on no site.' }
})
const CALLBACK_FIELDS = objectFields(AgentUpdate.properties.callback_settings, 'callback_settings.', {
  required: 'all',
  labels: { enabled: 'Call back automatically', max_attempts: 'Most call-backs', retry_delay_minutes: 'Pause before a call-back (minutes)', on_outcomes: 'Call back after' },
  values: { on_outcomes: { no_answer: 'No answer', busy: 'Busy', voicemail: 'An answering machine', failed: 'The call failed' } }
})
const VOICEMAIL_FIELDS = objectFields(AgentUpdate.properties.voicemail_settings, 'voicemail_settings.', {
  required: ['detection', 'action', 'detection_timeout_seconds'],
  labels: { detection: 'Detect answering machines on outbound calls', action: 'On an answering machine', message: 'Message left after the beep', detection_timeout_seconds: 'Listen for a machine for up to (seconds)' },
  hints: {
    detection: 'Twilio, Telnyx and SIP numbers; web and inbound calls do not detect.',
    action: 'Hang up: end the call at once. Leave message: wait for the beep, say the message below, then hang up.',
    message: 'Said after the beep with Leave message; {{variables}} are filled in. Empty: the agent hangs up.',
    detection_timeout_seconds: 'How long the carrier listens before it gives up; the call then goes on as with a person.'
  }
})
const SECTIONS: Array<{ legend: string, fields: FormField[] }> = [
  { legend: 'Language model', fields: LLM_FIELDS },
  { legend: 'Turn detection', fields: TURN_FIELDS },
  { legend: 'Calls', fields: CALL_FIELDS },
  { legend: 'Behaviour', fields: BEHAVIOUR_FIELDS },
  { legend: 'Web-call widget', fields: WIDGET_FIELDS },
  { legend: 'Call-backs', fields: CALLBACK_FIELDS },
  { legend: 'Voicemail', fields: VOICEMAIL_FIELDS }
]
/** The data-retrieval section's "Add a field" button: the form comes back (as a draft) with one more empty row. */
const ADD_FIELD = 'data_retrieval_add'
const MAX_RETRIEVAL_FIELDS = (AgentUpdate.properties.data_retrieval as { maxItems?: number }).maxItems ?? 50
const RETRIEVAL: Rows = {
  name: 'data_retrieval',
  legend: (i) => `Field ${i + 1}`,
  fields: (i) => objectFields(DataRetrievalItem, `data_retrieval.${i}.`, {
    labels: { name: 'Variable', enum_values: 'Allowed values', required: 'Required for the task to count as achieved', keypad: 'Typed on the phone keypad' },
    hints: { name: 'Its name: letters, digits and _; becomes {{name}} in actions.', enum_values: 'One per line; for the type One of the allowed values only.', keypad: 'Text fields only: keys the caller presses, ended with #, fill it.' },
    values: { type: { string: 'Text', number: 'Number', boolean: 'Yes or no', enum: 'One of the allowed values', date: 'Date' } }
  })
}

/** Each field is checked by the schema the API checks it with; '' means null where the API allows null. */
const CHECKS: Array<{ field: Field, label: string, schema: TSchema, empty?: null, message?: string }> = [
  { field: 'agent_name', label: 'The name', schema: AgentUpdate.properties.agent_name },
  { field: 'begin_message', label: 'The begin message', schema: LlmWrite.properties.begin_message, empty: null },
  { field: 'general_prompt', label: 'The prompt', schema: LlmWrite.properties.general_prompt },
  { field: 'language', label: 'The language', schema: AgentUpdate.properties.call_settings.properties.language },
  { field: 'voice_id', label: 'The voice', schema: ObjectId, message: 'Choose one of the listed voices.' },
  { field: 'webhook_url', label: 'The webhook URL', schema: AgentUpdate.properties.webhook_url, empty: null },
  { field: 'status', label: 'The status', schema: AgentUpdate.properties.status, message: 'Choose active or inactive.' }
]

interface Checked {
  agent_name: string
  begin_message: string | null
  general_prompt: string
  language: string
  voice_id: string
  webhook_url: string | null
  status: 'active' | 'inactive'
  /** The sections' members the form held. */
  llm: Partial<LlmValues>
  agent: Pick<AgentChanges, 'interruption_sensitivity' | 'is_data_collection_active' | 'is_customer_memory_active' | 'folder' | 'data_retrieval'>
  call_settings: Record<string, unknown>
  widget_settings: Record<string, unknown>
  callback_settings: Record<string, unknown>
  voicemail_settings: Record<string, unknown>
}

const noSuchAgent = () => new HttpError(404, 'not_found', 'You have no agent with that id.')

function formOf (request: FastifyRequest): AgentForm {
  return { ...request.body as AgentForm }
}

/** A basic field's text: '' when the form did not hold it. */
const text = (form: AgentForm, field: Field) => form[field] ?? ''

/** The stored agent as form text. */
function formFromRows (agent: AgentRow, llm: Pick<LlmRow, 'begin_message' | 'general_prompt' | 'model' | 'temperature' | 'max_tokens'> & Partial<Pick<LlmRow, 'engine' | 'turn_detection'>>): AgentForm {
  return {
    agent_name: agent.agent_name,
    begin_message: llm.begin_message ?? '',
    general_prompt: llm.general_prompt,
    language: agent.call_settings.language ?? CALL_SETTINGS_DEFAULTS.language,
    voice_id: agent.voice_id,
    webhook_url: agent.webhook_url ?? '',
    status: agent.status,
    ...fieldValues(LLM_FIELDS, llm),
    ...fieldValues(TURN_FIELDS, llm.turn_detection ?? TURN_DETECTION_DEFAULT),
    ...fieldValues(CALL_FIELDS, { ...CALL_SETTINGS_DEFAULTS, ...agent.call_settings }),
    ...fieldValues(BEHAVIOUR_FIELDS, agent),
    ...fieldValues(WIDGET_FIELDS, { ...WIDGET_SETTINGS_DEFAULTS, ...agent.widget_settings }),
    ...fieldValues(CALLBACK_FIELDS, { ...CALLBACK_SETTINGS_DEFAULTS, ...agent.callback_settings }),
    ...fieldValues(VOICEMAIL_FIELDS, { ...VOICEMAIL_SETTINGS_DEFAULTS, ...agent.voicemail_settings }),
    ...rowValues(RETRIEVAL, agent.data_retrieval as unknown as Array<Record<string, unknown>>, 0)
  }
}

const NEW_AGENT: AgentForm = formFromRows({
  ...newAgentDefaults(),
  agent_name: '',
  call_settings: CALL_SETTINGS_DEFAULTS,
  data_retrieval: [],
  status: 'active',
  folder: null,
  is_customer_memory_active: false
} as unknown as AgentRow, LLM_DEFAULTS)

/** The form with one more empty data-retrieval row (the "Add a field" button), nothing saved. */
function withRow (form: AgentForm): AgentForm {
  const count = rowCount(RETRIEVAL.name, form)
  const { [ADD_FIELD]: _added, ...rest } = form
  return count >= MAX_RETRIEVAL_FIELDS ? rest : { ...rest, ...fieldValues(RETRIEVAL.fields(count), {}), [RETRIEVAL.name]: String(count + 1) }
}

/** The data-retrieval rows as the API's rule makes them, or the problems under the rows' fields. */
function retrievalOf (form: AgentForm): { fields?: RetrievalField[], problems: Problems } {
  const { rows, problems } = readRows(RETRIEVAL, form)
  if (rows === undefined || Object.keys(problems).length > 0) return { problems }
  if (rows.length > MAX_RETRIEVAL_FIELDS) return { problems: { data_retrieval: `An agent extracts at most ${MAX_RETRIEVAL_FIELDS} fields.` } }
  // An emptied description or list of values is the member left out.
  const items = rows.map(({ values }) => Object.fromEntries(Object.entries(values).filter(([, value]) => value !== null))) as Parameters<typeof dataRetrieval>[0]
  try {
    return { fields: dataRetrieval(items), problems }
  } catch (err) {
    // "body.data_retrieval.<i>.<member> <text>": under that member of the row the form showed as <i>.
    const found = err instanceof HttpError ? /^body\.data_retrieval\.(\d+)\.(\w+) (.*)$/.exec(err.message) : null
    if (found === null) throw err
    const index = rows[Number(found[1])].index
    const text = found[2] === 'name'
      ? `The name ${found[3]}.`
      : found[2] === 'keypad'
        ? 'Only a Text field can be typed on the keypad: untick it or choose Text.'
        : found[3].startsWith('is required') ? 'The type One of the allowed values needs its allowed values, one per line.' : 'Only the type One of the allowed values has allowed values: remove them or choose that type.'
    return { problems: { [`data_retrieval.${index}.${found[2]}`]: text } }
  }
}

/**
 * The API's turn-detection rule (agents/turn-detection.ts), as a problem in the form's words under the field it
 * names: "body.engine …", "body.turn_detection.type …", "body.turn_detection.eagerness is allowed only with type …".
 */
function turnDetectionProblems (llm: Partial<LlmValues>, stored?: LlmRow): Problems {
  try {
    checkTurnDetection(llm, stored)
    return {}
  } catch (err) {
    const found = err instanceof HttpError ? /^body\.(engine|turn_detection\.\w+) (.*)$/.exec(err.message) : null
    if (found === null) throw err
    const type = (llm.turn_detection ?? stored?.turn_detection ?? TURN_DETECTION_DEFAULT).type
    const engine = llm.engine !== undefined ? llm.engine : stored?.engine ?? null
    const engineWords = engine === null ? 'the installation\'s default' : `${engine.charAt(0).toUpperCase()}${engine.slice(1)}`
    const owner = /allowed only with type (\w+)/.exec(found[2])?.[1] as keyof typeof TURN_WORDS | undefined
    const text = found[1] === 'engine'
      ? `The engine ${engineWords} cannot use the stored turn detection, ${TURN_WORDS[type]}: choose Switchboard under Turn detection as well.`
      : found[1] === 'turn_detection.type'
        ? `${TURN_WORDS[type]} needs the Realtime engine, and the engine is ${engineWords}.`
        : `This setting is only for ${owner === undefined ? 'another type' : TURN_WORDS[owner]}, not ${TURN_WORDS[type]}.`
    return { [`llm.${found[1]}`]: text }
  }
}

export async function consoleAgentRoutes (app: FastifyInstance, { db, jobs }: { db: DB, jobs: JobSender }): Promise<void> {
  const validators = new Map(CHECKS.map(({ field, schema }) => [field, compileBodySchema(schema)]))

  /** The form's values as the API would store them, or what is wrong with each bad field. */
  async function check (form: AgentForm): Promise<{ values: Checked } | { problems: Problems }> {
    const problems: Problems = {}
    const values: Record<string, unknown> = {}
    for (const { field, label, empty, message } of CHECKS) {
      const value = text(form, field) === '' && empty !== undefined ? empty : text(form, field)
      const validate = validators.get(field)!
      if (validate(value)) values[field] = value
      else problems[field] = message ?? (text(form, field) === '' ? `${label} is required.` : `${invalidInput(label, validate.errors![0] as AjvIssue).message}.`)
    }
    if (problems.voice_id === undefined && !await voiceExists(db, text(form, 'voice_id'))) problems.voice_id = 'Choose one of the listed voices.'
    const [llm, turns, calls, behaviour, widget, callback, voicemail] = SECTIONS.map(({ fields }) => readFields(fields, form))
    const retrieval = retrievalOf(form)
    for (const section of [llm, turns, calls, behaviour, widget, callback, voicemail, retrieval]) Object.assign(problems, section.problems)
    if (Object.keys(problems).length > 0) return { problems }
    // An emptied setting is the provider's default: left out.
    if (turns.values.type !== undefined) llm.values.turn_detection = Object.fromEntries(Object.entries(turns.values).filter(([, value]) => value !== null))
    // An emptied greeting is no greeting (the other emptied members are null where the API allows it).
    if (widget.values.greeting === null) widget.values.greeting = ''
    return {
      values: {
        ...values,
        voice_id: text(form, 'voice_id').toLowerCase(),
        llm: llm.values,
        agent: { ...behaviour.values, data_retrieval: retrieval.fields },
        call_settings: calls.values,
        widget_settings: widget.values,
        callback_settings: callback.values,
        // An emptied message is no message (leave_message then hangs up).
        voicemail_settings: { ...voicemail.values, ...(voicemail.values.message === null && { message: '' }) }
      } as Checked
    }
  }

  const voices = async () => voiceChoices(jobs.config.voice, await listVoices(db, { limit: 1000 }))

  /** `id`: checked by the route's schema (idParams). */
  async function agentInScope (scope: Scope, id: string) {
    const agent = await findAgent(db, scope.ownerId, id)
    if (agent === undefined || !inScope(scope, agent)) throw noSuchAgent()
    return agent
  }

  /** The agent's page: its form, its actions and tools, and the button that starts a web call. */
  async function agentPage (session: ConsoleSession, agent: AgentRow, options: { form?: AgentForm, problems?: Problems, saved?: boolean, knowledgeSaved?: boolean }) {
    const scope = scopeOf(session)
    const llm = await findLlm(db, scope.ownerId, agent.llm_id)
    const sharedWith = await countAgentsOfLlm(db, scope.ownerId, agent.llm_id) - 1
    const viewer = viewerOf(session)
    return layout({
      title: agent.agent_name,
      viewer,
      current: '/agents',
      body: html`
<p><a href="/agents">All agents</a></p>
${options.saved === true && notice('success', 'Saved.')}
${agentLifeView(viewer, scope, agent, await agentLifeData(db, scope))}
<section aria-labelledby="talk-title" id="talk">
  <h2 id="talk-title">Talk to this agent</h2>
  <p>A call in this browser: your microphone when speech providers are configured, typed turns otherwise. The call is recorded from the moment you press the button.</p>
  <div id="talk-call" class="web-call" data-action="/agents/${agent.id}/talk" data-csrf="${viewer.csrfToken}"></div>
  <noscript><p>Talking to the agent needs JavaScript.</p></noscript>
  <link rel="stylesheet" href="/web-call/panel.css">
  <script type="module" src="/console/talk.js"></script>
  <p><a href="/agents/${agent.id}/playground">Type to it in the playground</a> (its replies, tool calls and workflow steps, turn by turn) · <a href="/agents/${agent.id}/tests">Tests of this agent</a></p>
</section>
${await phoneCallSection(db, viewer, scope, agent)}
${workflowSection(agent)}
${knowledgeView(viewer, scope, agent, await knowledgeData(db, scope, agent), options.knowledgeSaved === true)}
${await capabilitySection(db, scope, agent)}
<section aria-labelledby="versions-title">
  <h2 id="versions-title">Versions</h2>
  <p>${agent.version === 0 ? 'No version yet.' : `Version ${agent.version}.`} Every change of its settings, language model, tools and actions is a new version: <a href="/agents/${agent.id}/versions">see the history, compare and restore</a>.</p>
</section>
${await widgetSection(viewer, scope.canChange, agent)}
<h2>Settings</h2>
${sharedWith > 0 && html`<p class="hint">Its begin message, prompt and language model belong to an LLM configuration that ${sharedWith} other agent${sharedWith === 1 ? '' : 's'} use${sharedWith === 1 ? 's' : ''} too: changing them here changes theirs.</p>`}
${!scope.canChange && html`<p>You are a member of this workspace: you can see this agent and talk to it, not change it.</p>`}
${agentForm({ viewer, action: `/agents/${agent.id}`, submit: scope.canChange ? 'Save' : undefined, form: options.form ?? formFromRows({ ...agent, webhook_url: scope.canChange || agent.webhook_url === null ? agent.webhook_url : maskUrlTemplate(agent.webhook_url) }, llm ?? LLM_DEFAULTS), problems: options.problems ?? {}, voices: await voices(), engine: jobs.config.voice.engine })}
${engineNeeds(jobs.config.voice)}
<p class="hint">Agent id <code>${agent.id}</code>. Its LLM configuration and phone numbers are in the API (<a href="/docs">API reference</a>).</p>`
    })
  }

  /** The website widget: whether it is on, the tag to paste (with the key when there is one), the key's buttons, a preview. */
  async function widgetSection (viewer: Viewer, canChange: boolean, agent: AgentRow): Promise<SafeHtml> {
    const key = await findWidgetKey(db, agent.user_id, agent.id)
    const settings = widgetSettings(agent)
    const problem = key === undefined ? undefined : keyProblem(agent)
    const action = (path: string, label: string) => html`<form method="post" action="/agents/${agent.id}/${path}" class="inline">${csrfField(viewer.csrfToken)}<button type="submit">${label}</button></form>`
    const look = { agent_name: agent.agent_name, theme: settings.theme, primary_color: settings.primary_color, position: settings.position, greeting: settings.greeting }
    return html`<section aria-labelledby="widget-title" id="widget">
  <h2 id="widget-title">Website widget</h2>
  <p>${settings.enabled ? 'The widget is on.' : 'The widget is off: no site shows it.'} Paste this tag into your site's pages to show a call button (<a href="/docs">API reference</a>; docs/widget.md says more):</p>
  ${problem !== undefined && notice('error', problem)}
  <pre class="preview"><code>${widgetSnippet(jobs.config.publicBaseUrl, agent.id, key?.key)}</code></pre>
  <p class="hint">${key === undefined
    ? 'Without a widget key your site\'s backend calls POST /v1/call/make-web-call with your API key and answers the page { access_token } at data-token-url. Sites without a backend use a public widget key instead.'
    : html`The widget key is public: it starts calls with this agent only, only from the sites listed below, at most ${jobs.config.widgetCallsPerAddressHour} an hour from one address. Made ${when(key.created_at)}.`}</p>
  ${canChange && html`<div class="actions">${action('widget-key', key === undefined ? 'Create a widget key' : 'Rotate the widget key')}${key !== undefined && action('widget-key/delete', 'Delete the widget key')}</div>`}
  ${settings.enabled && html`<script src="/widget.js" data-agent-id="${agent.id}" data-preview="${JSON.stringify(look)}" defer></script>`}
</section>`
  }

  // The agent form's fields are named by its sections and rows (openFormBody), and it may be longer than the
  // console's other forms (the prompt).
  const FORM_BODY = { bodyLimit: AGENT_FORM_LIMIT }
  const AGENT = idParams('id')
  // The pages a refused form returns to (drafts.ts).
  const draft = DRAFT_QUERY
  // A button that posts nothing but its CSRF token.
  const BUTTON = routeSchema({ params: AGENT, body: formBody({}) })

  app.get<{ Querystring: { deleted?: string } }>('/agents', routeSchema({ querystring: Type.Object({ deleted: optionalText('The notice of a deletion', { maxLength: 10 }) }) }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const { session, scope } = page
    const [agents, catalogue] = await Promise.all([listAgents(db, scope.ownerId, { limit: LIST_LIMIT, workspace_id: scope.workspaceId }), voices()])
    const voiceNames = new Map(catalogue.voices.map((voice) => [voice.id, voice.name]))
    return sendPage(reply, 200, layout({
      title: 'Agents',
      viewer: viewerOf(session),
      current: '/agents',
      body: html`
${request.query.deleted !== undefined && notice('success', 'The agent is deleted.')}
${scope.canChange && html`<p><a href="/agents/start">New agent</a></p>`}
${agents.length === 0
  ? html`<p>No agents yet.</p>`
  : html`<div class="table"><table>
  <caption>Your agents${agents.length === LIST_LIMIT && html` (the first ${LIST_LIMIT})`}</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">Status</th><th scope="col">Language</th><th scope="col">Voice</th><th scope="col">Updated</th></tr></thead>
  <tbody>${agents.map((agent) => html`<tr>
    <td><a href="/agents/${agent.id}">${agent.agent_name}</a></td><td>${agent.status}</td><td>${agent.call_settings.language ?? CALL_SETTINGS_DEFAULTS.language}</td><td>${voiceNames.get(agent.voice_id) ?? agent.voice_id}</td><td>${when(agent.updated_at)}</td>
  </tr>`)}</tbody>
</table></div>`}`
    }))
  })

  const newPage = async (session: ConsoleSession, form: AgentForm, problems: Problems) => layout({
    title: 'New agent',
    viewer: viewerOf(session),
    current: '/agents',
    body: html`<p><a href="/agents">All agents</a></p>
${agentForm({ viewer: viewerOf(session), action: '/agents', submit: 'Create agent', form, problems, voices: await voices(), engine: jobs.config.voice.engine })}`
  })

  app.get<{ Querystring: { draft?: string } }>('/agents/new', routeSchema({ querystring: Type.Object({ draft }) }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    if (!page.scope.canChange) return changeScope(request)
    const draft = await draftOf(db, page.session, '/agents/new', request.query.draft)
    return sendPage(reply, 200, await newPage(page.session, draft?.values ?? NEW_AGENT, draft?.problems ?? {}))
  })

  app.post('/agents', routeSchema({ body: openFormBody() }, FORM_BODY), async (request, reply) => {
    const session = request.consoleSession!
    const scope = changeScope(request)
    const form = formOf(request)
    if (form[ADD_FIELD] !== undefined) return await refuseForm(db, reply, session, '/agents/new', withRow(form), {}, 'section-data')
    const checked = await check(form)
    const problems = 'problems' in checked ? checked.problems : turnDetectionProblems(checked.values.llm)
    if ('problems' in checked || Object.keys(problems).length > 0) return await refuseForm(db, reply, session, '/agents/new', form, problems)
    const { values } = checked
    const agent = await db.transaction().execute(async (trx) => {
      const llm = await insertLlm(trx, scope.ownerId, { ...LLM_DEFAULTS, ...values.llm, begin_message: values.begin_message, general_prompt: values.general_prompt })
      const row = await insertAgent(trx, scope.ownerId, {
        ...newAgentDefaults(),
        customer_id: null,
        workspace_id: scope.workspaceId ?? null,
        agent_name: values.agent_name,
        llm_id: llm.id,
        voice_id: values.voice_id,
        interruption_sensitivity: values.agent.interruption_sensitivity ?? AGENT_DEFAULTS.interruption_sensitivity,
        is_data_collection_active: values.agent.is_data_collection_active ?? false,
        call_settings: { ...CALL_SETTINGS_DEFAULTS, ...values.call_settings, language: values.language },
        widget_settings: { ...WIDGET_SETTINGS_DEFAULTS, ...values.widget_settings },
        callback_settings: { ...CALLBACK_SETTINGS_DEFAULTS, ...values.callback_settings },
        voicemail_settings: { ...VOICEMAIL_SETTINGS_DEFAULTS, ...values.voicemail_settings },
        data_retrieval: values.agent.data_retrieval ?? [],
        webhook_url: values.webhook_url
      })
      // What the API's create does not take (it is active, in no folder): its PATCH sets them.
      const { folder, is_customer_memory_active: memory } = values.agent
      if (values.status !== 'active' || folder != null || memory === true) await updateAgent(trx, scope.ownerId, row.id, { status: values.status, folder, is_customer_memory_active: memory })
      await recordVersion(trx, scope.ownerId, row.id, 'created')
      return row
    })
    await formSaved(db, session, '/agents/new')
    return reply.redirect(`/agents/${agent.id}?saved=1`, 303)
  })

  app.get<{ Params: { id: string }, Querystring: { saved?: string, draft?: string, knowledge?: string } }>('/agents/:id', routeSchema({
    params: AGENT,
    querystring: Type.Object({ saved: optionalText('The notice of a save', { maxLength: 10 }), knowledge: optionalText('The notice of a knowledge change', { maxLength: 10 }), draft })
  }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const agent = await agentInScope(page.scope, request.params.id)
    const draft = page.scope.canChange ? await draftOf(db, page.session, `/agents/${agent.id}`, request.query.draft) : undefined
    return sendPage(reply.header('content-security-policy', CONNECTING_PAGE_CSP), 200, await agentPage(page.session, agent, { saved: request.query.saved !== undefined, form: draft?.values, problems: draft?.problems, knowledgeSaved: request.query.knowledge !== undefined }))
  })

  app.post<{ Params: { id: string } }>('/agents/:id', routeSchema({ params: AGENT, body: openFormBody() }, FORM_BODY), async (request, reply) => {
    const session = request.consoleSession!
    const scope = changeScope(request)
    const agent = await agentInScope(scope, request.params.id)
    const form = formOf(request)
    if (form[ADD_FIELD] !== undefined) return await refuseForm(db, reply, session, `/agents/${agent.id}`, withRow(form), {}, 'section-data')
    const checked = await check(form)
    const problems = 'problems' in checked ? checked.problems : turnDetectionProblems(checked.values.llm, await findLlm(db, scope.ownerId, agent.llm_id))
    if ('problems' in checked || Object.keys(problems).length > 0) return await refuseForm(db, reply, session, `/agents/${agent.id}`, form, problems)
    const { values } = checked
    await db.transaction().execute(async (trx) => {
      // Locked as the API's PATCH does, so that call_settings merge with a concurrent change; with the other agents of
      // its LLM configuration (the form changes that too: each gets a version), in id order as every such change locks.
      const sharing = await agentsOfLlm(trx, scope.ownerId, agent.llm_id)
      const current = (await lockAgents(trx, scope.ownerId, [agent.id, ...sharing])).find((row) => row.id === agent.id)
      if (current === undefined) throw noSuchAgent()
      await updateLlm(trx, scope.ownerId, current.llm_id, { ...values.llm, begin_message: values.begin_message, general_prompt: values.general_prompt })
      await updateAgent(trx, scope.ownerId, current.id, {
        ...values.agent,
        agent_name: values.agent_name,
        voice_id: values.voice_id,
        webhook_url: values.webhook_url,
        status: values.status,
        call_settings: { ...current.call_settings, ...values.call_settings, language: values.language },
        widget_settings: { ...current.widget_settings, ...values.widget_settings },
        callback_settings: { ...current.callback_settings, ...values.callback_settings },
        voicemail_settings: { ...current.voicemail_settings, ...values.voicemail_settings }
      })
      await recordVersions(trx, scope.ownerId, [current.id, ...sharing], 'agent')
    })
    await formSaved(db, session, `/agents/${agent.id}`)
    return reply.redirect(`/agents/${agent.id}?saved=1`, 303)
  })

  app.post<{ Params: { id: string } }>('/agents/:id/widget-key', BUTTON, async (request, reply) => {
    const scope = changeScope(request)
    const agent = await agentInScope(scope, request.params.id)
    await putWidgetKey(db, scope.ownerId, agent.id, newWidgetKey())
    return reply.redirect(`/agents/${agent.id}#widget`, 303)
  })

  app.post<{ Params: { id: string } }>('/agents/:id/widget-key/delete', BUTTON, async (request, reply) => {
    const scope = changeScope(request)
    const agent = await agentInScope(scope, request.params.id)
    await deleteWidgetKey(db, scope.ownerId, agent.id)
    return reply.redirect(`/agents/${agent.id}#widget`, 303)
  })

  app.post<{ Params: { id: string } }>('/agents/:id/talk', BUTTON, async (request, reply) => {
    // A member may talk to the workspace's agents: a call changes no setting (its credits are the owner's).
    // The Talk button's script posts here when it is pressed, so the call's record starts with the call.
    const scope = scopeOf(request.consoleSession!)
    const agent = await agentInScope(scope, request.params.id)
    try {
      const started = await startWebCall(db, jobs, scope.ownerId, { agent_id: agent.id })
      return await reply.code(201).send({ call_id: started._id, access_token: started.access_token })
    } catch (err) {
      if (err instanceof HttpError && err.statusCode === 409) return await reply.code(409).send({ message: `No call: ${err.message}.` })
      throw err
    }
  })

  // Asks before leaving the agent form with changes not saved (static/unsaved.js).
  app.get('/console/unsaved.js', routeSchema(), async (_request, reply) => {
    return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(UNSAVED_SCRIPT)
  })

  app.get('/console/talk.js', routeSchema(), async (_request, reply) => {
    return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(TALK_SCRIPT)
  })
}

interface FormOptions {
  viewer: Viewer
  action: string
  /** undefined: the form is shown read-only */
  submit: string | undefined
  form: AgentForm
  problems: Problems
  voices: VoiceChoices
  /** VOICE_ENGINE: what the engine's empty choice stands for. */
  engine: VoiceConfig['engine']
}

const HINTS: Partial<Record<Field, string>> = {
  begin_message: 'What the agent says first. Empty: it waits for the other party to speak.',
  general_prompt: 'Who the agent is and what it should do (the system prompt).',
  language: 'A BCP-47 language tag such as en-US or de-DE.',
  webhook_url: 'Optional: receives each call\'s result when the call has ended.',
  status: 'An inactive agent takes no calls.'
}

/**
 * The agent's fields; a bad one carries its message, tied to the input by aria-describedby. A textarea's text
 * starts after a line break, which the HTML parser drops, so that text starting with one keeps it.
 */
function agentForm ({ viewer, action, submit, form, problems, voices, engine }: FormOptions): SafeHtml {
  const named = (field: FormField) => field.name === 'llm.engine' ? { ...field, empty: `The installation's default (${engine.charAt(0).toUpperCase()}${engine.slice(1)})` } : field
  const described = (field: Field) => describe(field, HINTS[field], problems[field]).attrs
  const after = (field: Field) => describe(field, HINTS[field], problems[field]).after
  const section = (id: string, legend: string, body: SafeHtml) => html`<fieldset class="group" id="${id}"><legend>${legend}</legend>
  ${body}
  </fieldset>`
  const sections = [{ id: 'section-basics', legend: 'Basics' }, ...SECTIONS.map(({ legend }, i) => ({ id: `section-${i + 1}`, legend })), { id: 'section-data', legend: 'Data retrieval' }]
  return html`${errorSummary(problems)}
<nav class="section-menu" aria-label="Sections of the settings"><ul>${sections.map(({ id, legend }) => html`<li><a href="#${id}">${legend}</a></li>`)}</ul></nav>
${submit !== undefined && html`<script src="/console/unsaved.js" defer></script>`}
<form method="post" action="${action}" class="stack wide agent-form"${submit !== undefined && html` data-dirty-warning`}>
  ${csrfField(viewer.csrfToken)}
  <fieldset class="plain"${submit === undefined && html` disabled`}>
  <legend class="visually-hidden">Agent settings</legend>
  ${section('section-basics', 'Basics', html`<label for="agent_name">Name</label>
  <input id="agent_name" name="agent_name" value="${text(form, 'agent_name')}" maxlength="200" required${described('agent_name')}>
  ${after('agent_name')}
  <label for="begin_message">Begin message</label>
  <textarea id="begin_message" name="begin_message" rows="2" maxlength="2000"${described('begin_message')}>
${text(form, 'begin_message')}</textarea>
  ${after('begin_message')}
  <label for="general_prompt">Prompt</label>
  <textarea id="general_prompt" name="general_prompt" rows="10" maxlength="50000"${described('general_prompt')}>
${text(form, 'general_prompt')}</textarea>
  ${after('general_prompt')}
  <label for="language">Language</label>
  <input id="language" name="language" value="${text(form, 'language')}" maxlength="35" required autocomplete="off"${described('language')}>
  ${after('language')}
  ${voicePicker({ ...voices, chosen: text(form, 'voice_id'), problem: problems.voice_id })}
  <label for="webhook_url">Webhook URL</label>
  <input id="webhook_url" name="webhook_url" type="url" value="${text(form, 'webhook_url')}" maxlength="2000" inputmode="url"${described('webhook_url')}>
  ${after('webhook_url')}
  <label for="status">Status</label>
  <select id="status" name="status"${described('status')}>
    ${(['active', 'inactive'] as const).map((status) => html`<option value="${status}"${status === text(form, 'status') && html` selected`}>${status === 'active' ? 'Active' : 'Inactive'}</option>`)}
  </select>
  ${after('status')}`)}
  ${SECTIONS.map(({ legend, fields }, i) => section(`section-${i + 1}`, legend, renderFields(fields.map(named), form, problems)))}
  <fieldset class="group" id="section-data" aria-describedby="data_retrieval-hint${problems.data_retrieval !== undefined ? ' data_retrieval-error' : ''}"><legend>Data retrieval</legend>
  <p id="data_retrieval-hint" class="hint">Fields extracted from each call after it ends: in the call's results and, as {{name}}, in actions.</p>
  ${problems.data_retrieval !== undefined && html`<div id="data_retrieval" tabindex="-1"><p id="data_retrieval-error" class="field-error">${problems.data_retrieval}</p></div>`}
  ${renderRows(RETRIEVAL, form, problems)}
  ${submit !== undefined && html`<button type="submit" name="${ADD_FIELD}" value="true" class="secondary" formnovalidate>Add a field</button>`}
  </fieldset>
  </fieldset>
  ${submit !== undefined && html`<div class="save-bar"><button type="submit">${submit}</button></div>`}
</form>`
}
