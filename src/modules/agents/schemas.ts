import { Type, type Static } from 'typebox'
import { CallbackSettings, CallSettings, TemplateLlm, TurnDetection, VoicemailSettings, WidgetSettings } from '../../db/shapes.ts'
import { COMPONENT, Nullable, ObjectId } from '../../http/schemas.ts'
import { DataRetrievalItem } from './settings-parts.ts'
import { Workflow } from './workflow.ts'

export { DataRetrievalItem }

// Agent fields. Defaults live in constants rather than in the schemas: Ajv fills schema defaults in,
// which would turn every PATCH into a reset of the members it does not name.

const Epoch = Type.Integer({ description: 'epoch ms' })

/** An agent version's number (GET /v1/agent/:id/versions), as pins and requests name it. */
export const AgentVersionNumber = Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'an agent version, from 1' })

const LanguageTag = Type.String({ format: 'language-tag', maxLength: 35 })

/** `call_settings` members accepted on create. */
const createCallSettings = {
  language: Type.Optional({ ...LanguageTag, description: 'language the agent speaks, a BCP-47 tag (default en-US)' }),
  sentiment_analysis: Type.Optional(Type.Boolean({ description: 'analyse the caller\'s sentiment after the call (default true)' })),
  call_summary: Type.Optional(Type.Boolean({ description: 'write a summary after the call (default true)' })),
  max_call_duration_minutes: Type.Optional(Type.Number({ minimum: 1, maximum: 15, description: 'the call is ended after this long (default 10)' })),
  reminder_after_seconds: Type.Optional(Type.Integer({ minimum: 5, maximum: 120, description: 'silence of the caller before the agent checks in (default 10)' })),
  reminder_max_count: Type.Optional(Type.Integer({ minimum: 0, maximum: 5, description: 'check-ins before the silence time-out applies; 0 disables reminders (default 1)' })),
  silence_timeout_seconds: Type.Optional(Type.Integer({ minimum: 10, maximum: 600, description: 'silence after the last reminder that ends the call (default 30)' })),
  responsiveness: Type.Optional(Type.Number({
    minimum: 0,
    maximum: 1,
    description: 'how soon the agent answers once the caller falls silent, 0 to 1: higher answers sooner; the silence it waits also depends on the caller\'s last words (docs/voice.md, "Tuning turn-taking"; default 0.5)'
  })),
  wait_for_hello_seconds: Type.Optional(Type.Number({ minimum: 0, maximum: 10, description: 'outbound phone calls: the agent waits for the callee\'s first words (their "hello") before its begin message, at most this long; 0: it speaks at once (docs/voice.md, "Waiting for hello"; default 3)' }))
}

/** The specification allows these members only on update; on create they are dropped like unknown ones. */
const updateOnlyCallSettings = {
  recording_enabled: Type.Optional(Type.Boolean({ description: 'record the call (default true)' })),
  stt_languages: Type.Optional(Type.Array(LanguageTag, { maxItems: 4, uniqueItems: true, description: 'languages the speech recogniser listens for, at most 4; [] : the agent\'s language (default [])' }))
}

export const CALL_SETTINGS_DEFAULTS = {
  language: 'en-US',
  sentiment_analysis: true,
  call_summary: true,
  max_call_duration_minutes: 10,
  reminder_after_seconds: 10,
  reminder_max_count: 1,
  silence_timeout_seconds: 30,
  responsiveness: 0.5,
  recording_enabled: true,
  stt_languages: [] as string[],
  wait_for_hello_seconds: 3
}

export const WIDGET_SETTINGS_DEFAULTS = {
  enabled: false,
  theme: 'light',
  primary_color: '#2563eb',
  position: 'bottom-right',
  greeting: '',
  allowed_origins: [] as string[],
  agent_version: null as number | null
}

export const CALLBACK_SETTINGS_DEFAULTS = {
  enabled: false,
  max_attempts: 2,
  retry_delay_minutes: 30,
  on_outcomes: ['no_answer', 'busy'] as string[]
}

export const VOICEMAIL_SETTINGS_DEFAULTS = {
  detection: false,
  action: 'hang_up' as 'hang_up' | 'leave_message',
  message: '',
  detection_timeout_seconds: 30
}

export const AGENT_DEFAULTS = {
  /** Alloy (OpenAI), the first voice of the catalogue. */
  voice_id: '65a0f0000000000000000001',
  interruption_sensitivity: 0.5
}

/** The columns a new agent takes when nothing else is said (the API's create, and the console's). */
export function newAgentDefaults () {
  return {
    voice_id: AGENT_DEFAULTS.voice_id,
    interruption_sensitivity: AGENT_DEFAULTS.interruption_sensitivity,
    webhook_url: null,
    is_data_collection_active: false,
    widget_settings: WIDGET_SETTINGS_DEFAULTS,
    callback_settings: CALLBACK_SETTINGS_DEFAULTS,
    voicemail_settings: VOICEMAIL_SETTINGS_DEFAULTS
  }
}

const WidgetSettingsInput = Type.Object({
  enabled: Type.Optional(Type.Boolean({ description: 'show the website widget (/widget.js) and let its widget key start calls (default false)' })),
  theme: Type.Optional(Type.Union([Type.Literal('light'), Type.Literal('dark')])),
  primary_color: Type.Optional(Type.String({ pattern: '^#[0-9a-fA-F]{6}$', description: 'hex colour such as #2563eb' })),
  position: Type.Optional(Type.Union([Type.Literal('bottom-right'), Type.Literal('bottom-left')])),
  greeting: Type.Optional(Type.String({ maxLength: 500 })),
  allowed_origins: Type.Optional(Type.Array(Type.String({ format: 'http-url', maxLength: 500 }), { maxItems: 20, description: 'sites whose pages may hold the agent\'s web calls (the widget, the browser stream); [] : any site for calls started with make-web-call, none for the public widget key' })),
  agent_version: Type.Optional(Nullable(AgentVersionNumber, 'the agent version the widget\'s calls run (one of GET /v1/agent/:id/versions: 404 otherwise); null (default): the latest'))
}, { description: 'the embeddable web-call widget; members merge on update' })

const CallbackSettingsInput = Type.Object({
  enabled: Type.Optional(Type.Boolean({ description: 'call back automatically when an outbound call does not connect (default false)' })),
  max_attempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 5 })),
  retry_delay_minutes: Type.Optional(Type.Integer({ minimum: 5, maximum: 1440 })),
  on_outcomes: Type.Optional(Type.Array(Type.Union([Type.Literal('no_answer'), Type.Literal('busy'), Type.Literal('voicemail'), Type.Literal('failed')]), { uniqueItems: true }))
}, { description: 'automatic call-backs; members merge on update' })

// Twilio's MachineDetectionTimeout takes 3 to 59 seconds (its default 30): https://www.twilio.com/docs/voice/answering-machine-detection
const VoicemailSettingsInput = Type.Object({
  detection: Type.Optional(Type.Boolean({ description: 'detect answering machines on the agent\'s outbound phone calls (default false); web and inbound calls never detect' })),
  action: Type.Optional(Type.Union([Type.Literal('hang_up'), Type.Literal('leave_message')], { description: 'on a machine: hang_up (default), or leave_message: wait for the beep, speak `message`, hang up' })),
  message: Type.Optional(Type.String({ maxLength: 2000, description: 'spoken after the beep; {{variables}} from dynamic_context are filled in (default empty: leave_message then hangs up like hang_up)' })),
  detection_timeout_seconds: Type.Optional(Type.Integer({ minimum: 3, maximum: 59, description: 'how long the carrier listens before it gives up: the call goes on as with a person (default 30)' }))
}, { description: 'answering machines on outbound phone calls (docs/voice.md, "Voicemail"); members merge on update' })

const DataRetrieval = Type.Array(DataRetrievalItem, { maxItems: 50, description: 'fields extracted from each call; names unique' })

const Voice = Type.Object({ voice_id: ObjectId }, { [COMPONENT]: 'AgentVoice', description: 'one of GET /v1/voice/list' })

const createFields = {
  agent_name: Type.String({ minLength: 1, maxLength: 200 }),
  llm_id: ObjectId,
  voice: Type.Optional(Voice),
  interruption_sensitivity: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: '0: never yields to the caller; 1: pauses at the first window of speech and yields soonest, lower values want surer and longer speech (default 0.5; docs/voice.md, "How turns are taken")' })),
  data_retrieval: Type.Optional(DataRetrieval),
  webhook_url: Type.Optional(Nullable(Type.String({ format: 'http-url', maxLength: 2000 }), 'receives the post-call delivery (kind agent_webhook)')),
  is_data_collection_active: Type.Optional(Type.Boolean({ description: 'default false' })),
  workflow: Type.Optional(Nullable(Workflow, 'the conversation as steps (docs/workflows.md), validated as a graph; null (default): the agent talks from its single prompt. API call steps\' header values are write-only: answers show `********`, and sending `********` back keeps the stored value of that step (matched by id)'))
}

export const AgentCreate = Type.Object({
  ...createFields,
  call_settings: Type.Optional(Type.Object(createCallSettings)),
  voicemail_settings: Type.Optional(VoicemailSettingsInput)
})

export const AgentUpdate = Type.Object({
  agent_name: Type.Optional(createFields.agent_name),
  llm_id: Type.Optional(createFields.llm_id),
  voice: createFields.voice,
  interruption_sensitivity: createFields.interruption_sensitivity,
  data_retrieval: createFields.data_retrieval,
  webhook_url: createFields.webhook_url,
  is_data_collection_active: createFields.is_data_collection_active,
  workflow: Type.Optional(Nullable(Workflow, 'replaced as a whole; null removes it (the agent talks from its single prompt again)')),
  call_settings: Type.Optional(Type.Object({ ...createCallSettings, ...updateOnlyCallSettings }, { description: 'members merge: the ones not sent keep their values' })),
  folder: Type.Optional(Nullable(Type.String({ maxLength: 100 }), 'groups agents in the app; null removes it')),
  status: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('inactive')], { description: 'an inactive agent takes no calls' })),
  is_customer_memory_active: Type.Optional(Type.Boolean({ description: 'remember earlier calls with the same customer' })),
  widget_settings: Type.Optional(WidgetSettingsInput),
  callback_settings: Type.Optional(CallbackSettingsInput),
  voicemail_settings: Type.Optional(VoicemailSettingsInput)
})

export type AgentUpdateBody = Static<typeof AgentUpdate>

export const Agent = Type.Object({
  _id: ObjectId,
  agent_name: Type.String(),
  llm_id: ObjectId,
  voice: Voice,
  interruption_sensitivity: Type.Number(),
  call_settings: CallSettings,
  data_retrieval: Type.Array(DataRetrievalItem),
  webhook_url: Nullable(Type.String(), 'receives the post-call delivery'),
  is_data_collection_active: Type.Boolean(),
  status: Type.Enum(['active', 'inactive']),
  workspace_id: Nullable(ObjectId, 'workspace the agent belongs to'),
  customer_id: Nullable(ObjectId, 'customer (agency sub-account) the agent belongs to'),
  knowledge_base: Type.Array(ObjectId, { description: 'ids of the knowledge bases the agent searches' }),
  folder: Nullable(Type.String(), 'folder in the app'),
  is_customer_memory_active: Type.Boolean(),
  widget_settings: WidgetSettings,
  callback_settings: CallbackSettings,
  voicemail_settings: VoicemailSettings,
  version: Type.Integer({ minimum: 0, description: 'its latest version (GET /v1/agent/:id/versions; beyond the specification): every change of what its calls run on writes one' }),
  workflow: Nullable(Workflow, 'the conversation as steps; null: the agent talks from its single prompt. Header values of API call steps show as `********`'),
  created_at: Epoch,
  updated_at: Epoch
}, { [COMPONENT]: 'Agent' })

export type AgentBody = Static<typeof Agent>

const TurnDetectionSchema = Type.Object(TurnDetection.properties, {
  [COMPONENT]: 'TurnDetection',
  description: 'who decides that the caller\'s turn has ended and that the caller talks over the agent (docs/voice.md, "Turn detection"); default { "type": "switchboard" }'
})

export const LlmConfig = Type.Object({
  _id: ObjectId,
  model: Type.String(),
  begin_message: Nullable(Type.String(), 'what the agent says first; null: it waits for the other party'),
  general_prompt: Type.String(),
  temperature: Type.Number(),
  max_tokens: Nullable(Type.Integer(), 'cap on each reply; null: the model\'s own'),
  engine: Nullable(Type.Enum(['realtime', 'cascade', 'simulator']), 'the voice engine of its calls; null: the installation\'s VOICE_ENGINE'),
  turn_detection: TurnDetectionSchema,
  created_at: Epoch,
  updated_at: Epoch
}, { [COMPONENT]: 'LlmConfig' })

const llmFields = {
  model: Type.String({ minLength: 1, maxLength: 100, description: 'model name the runtime asks for, e.g. gpt-4o-mini (default)' }),
  begin_message: Nullable(Type.String({ maxLength: 2000 }), 'what the agent says first; null (default): it waits for the other party. {{variables}} from dynamic_context are filled in'),
  general_prompt: Type.String({ maxLength: 50_000, description: 'the system prompt (default empty)' }),
  temperature: Type.Number({ minimum: 0, maximum: 2, description: 'default 0.7' }),
  max_tokens: Nullable(Type.Integer({ minimum: 1, maximum: 32_000 }), 'cap on each reply; null (default): the model\'s own'),
  engine: Nullable(Type.Union([Type.Literal('realtime'), Type.Literal('cascade'), Type.Literal('simulator')]), 'the voice engine of its calls (docs/voice.md): realtime (speech-to-speech model), cascade (speech-to-text, language model, text-to-speech) or simulator (typed turns, no providers); null (default): the installation\'s VOICE_ENGINE')
}

export const LLM_DEFAULTS = { model: 'gpt-4o-mini', begin_message: null, general_prompt: '', temperature: 0.7, max_tokens: null }

export const LlmWrite = Type.Object({
  model: Type.Optional(llmFields.model),
  begin_message: Type.Optional(llmFields.begin_message),
  general_prompt: Type.Optional(llmFields.general_prompt),
  temperature: Type.Optional(llmFields.temperature),
  max_tokens: Type.Optional(llmFields.max_tokens),
  engine: Type.Optional(llmFields.engine),
  turn_detection: Type.Optional(TurnDetectionSchema)
}, { [COMPONENT]: 'LlmConfigWrite' })

export const AgentTemplate = Type.Object({
  _id: ObjectId,
  icon_url: Type.String(),
  description: Type.String(),
  agent: Type.Object({
    agent_name: Type.String(),
    call_settings: Type.Record(Type.String(), Type.Unknown()),
    data_retrieval: Type.Array(DataRetrievalItem)
  }),
  llm: TemplateLlm
}, { [COMPONENT]: 'AgentTemplate' })
