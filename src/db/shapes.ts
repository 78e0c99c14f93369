import { Type, type Static } from 'typebox'

// The shapes of the jsonb columns, as TypeBox schemas: db/schema.ts types the columns with their `Static<>`,
// and the modules' response schemas reuse them, so a stored shape is written once. They live here rather
// than in the modules because db/ sits below modules/ (STYLE.md 13); this file imports nothing of the app.
// A shape is what the column holds, not what a request may send: input limits stay in the modules' schemas.

export const TranscriptItem = Type.Object({
  speaker: Type.Enum(['agent', 'user', 'tool', 'step'], { description: '`tool`: a tool the agent used during the call (the built-in voice engine); `step`: a workflow step the call entered' }),
  content: Type.String(),
  timestamp: Type.Integer({ description: 'epoch ms' }),
  tool: Type.Optional(Type.Object({
    name: Type.String(),
    type: Type.String({ description: 'the tool\'s tool_type' }),
    arguments: Type.String({ description: 'as the model sent them (JSON)' }),
    output: Type.Optional(Type.String({ description: 'what the tool answered the model' })),
    error: Type.Optional(Type.String({ description: 'why it failed; the call went on' }))
  })),
  keypad: Type.Optional(Type.String({ description: 'speaker `user`: the keys the caller pressed on the phone\'s keypad (0-9 * # A-D), in order; `content` shows them spaced' })),
  step: Type.Optional(Type.Object({
    id: Type.String(),
    name: Type.String(),
    type: Type.String({ description: 'conversation, api_call, message, transfer or end' })
  }, { description: 'the workflow step entered (speaker `step`)' }))
})
export type TranscriptItem = Static<typeof TranscriptItem>

/** Language-model tokens of a call, by model name (calls.token_usage). */
export const TokenUsage = Type.Record(Type.String(), Type.Object({ input: Type.Integer(), output: Type.Integer() }))
export type TokenUsage = Static<typeof TokenUsage>

/** One transfer of a call, as its transfer_history lists it (docs/voice.md, "Transfers"). */
/** A call the agent placed during a warm transfer: to the person, and what became of it. */
export const TransferLeg = Type.Object({
  to: Type.String({ description: 'the number called' }),
  outcome: Type.String({ description: 'answered (the person took the call), declined, no_answer, busy, failed, canceled (the caller hung up first)' }),
  seconds: Type.Integer({ description: 'how long the call to the person lasted (Twilio\'s CallDuration; Telnyx: from their answer to the hang-up)' })
})
export type TransferLeg = Static<typeof TransferLeg>

export const TransferRecord = Type.Object({
  type: Type.Enum(['agent_transfer', 'call_forwarding']),
  from_agent_id: Type.String(),
  to_agent_id: Type.Optional(Type.String()),
  to_agent_name: Type.Optional(Type.String()),
  to_number: Type.Optional(Type.String({ description: 'a transfer to a phone number: the number dialled' })),
  reason: Type.Union([Type.String(), Type.Null()]),
  timestamp: Type.Integer({ description: 'epoch ms' }),
  outcome: Type.String({ description: 'transferred (to another agent); dialing, answered, declined (warm: the person did not take the call), no_answer, busy, failed, canceled (to a number)' }),
  duration_seconds: Type.Optional(Type.Integer({ description: 'how long the person at the number talked, for an answered forwarding' })),
  mode: Type.Optional(Type.Enum(['blind', 'warm'], { description: 'a transfer to a number: blind (put through with <Dial>) or warm (the caller held, the person called and told a summary first)' })),
  legs: Type.Optional(Type.Array(TransferLeg, { description: 'a warm transfer: the calls the agent placed to the person' }))
})
export type TransferRecord = Static<typeof TransferRecord>

/** One answered caller turn, timed (ms). Stages a provider does not have are null. */
export const TurnTiming = Type.Object({
  at: Type.Number({ description: 'epoch ms when the caller\'s speech of the turn ended' }),
  end_of_turn_ms: Type.Number({ description: 'speech end → our end-of-turn decision (0 when the provider detects turns itself)' }),
  transcription_ms: Type.Union([Type.Number(), Type.Null()], { description: 'decision → the turn\'s final words (batch transcription, or the streaming recogniser\'s last words); null: the model hears audio (realtime engine)' }),
  llm_ms: Type.Union([Type.Number(), Type.Null()], { description: 'the model\'s request → its first token (realtime: → first response event)' }),
  tts_ms: Type.Union([Type.Number(), Type.Null()], { description: 'first text of the answer → its first audio (null: realtime)' }),
  e2e_ms: Type.Number({ description: 'speech end → the first agent audio sent to the caller: what the caller waits' }),
  interrupted: Type.Optional(Type.Literal(true, { description: 'the caller spoke over this answer and the agent stopped (absent: it was heard out)' }))
})
export type TurnTiming = Static<typeof TurnTiming>

/** The spread of one stage's times over a call's turns (or a period's), ms: p50 and p90 interpolated between ranks. */
export const LatencyStat = Type.Object({
  p50: Type.Number(),
  p90: Type.Number(),
  min: Type.Number(),
  max: Type.Number(),
  num: Type.Integer({ description: 'turns with a time for the stage' })
})
export type LatencyStat = Static<typeof LatencyStat>

const StageStat = Type.Union([LatencyStat, Type.Null()])

/** A call's turns and their summary (calls.latency; docs/calls.md, "Latency"). A stage no turn has a time for is null. */
export const CallLatency = Type.Object({
  e2e: LatencyStat,
  end_of_turn: LatencyStat,
  transcription: StageStat,
  llm: StageStat,
  tts: StageStat,
  turns: Type.Array(TurnTiming)
})
export type CallLatency = Static<typeof CallLatency>

/** What the agent collected during the call (is_data_collection_active): values of its data_retrieval fields, by name. */
export const CollectedData = Type.Record(Type.String(), Type.Union([Type.String(), Type.Number(), Type.Boolean()]), { description: 'by data_retrieval field name; a Conversation stored before data was collected during calls has none' })
export type CollectedData = Static<typeof CollectedData>

/** A workflow variable's value: what the caller said (collected in a step) or an API call step's answer held. */
export const VariableValue = Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Null()])

/** Where a call is in its agent's workflow, and what it collected (calls.workflow once it ended). */
export const WorkflowState = Type.Object({
  step: Type.String({ description: 'the step the call is in (the last one, once it ended)' }),
  path: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), type: Type.String(), at: Type.Integer({ description: 'epoch ms' }) }), { description: 'the steps entered, in order' }),
  variables: Type.Record(Type.String(), VariableValue, { description: 'collected in conversation steps and mapped from API call steps\' answers, by name' }),
  after: Type.Array(Type.String(), { description: 'ids of the after-call API steps reached: each is a post-call delivery once the call is analysed' })
})
export type WorkflowState = Static<typeof WorkflowState>

/**
 * The record of a call so far (DESIGN.md, "Conversation core"): what the voice session keeps, what
 * calls.forwarding holds while the carrier has the call, and what calls' `toCallEnd()` turns into the call's
 * end. Its members keep the names that rows of calls.forwarding already carry.
 */
export const Conversation = Type.Object({
  agent_id: Type.String({ description: 'the agent that holds the call (after any agent_transfer)' }),
  transcript: Type.Array(TranscriptItem),
  tokens: TokenUsage,
  speech: Type.Object({ recognised: Type.Number(), synthesised: Type.Number() }, { description: 'seconds of speech recognised and synthesised' }),
  transfers: Type.Array(TransferRecord, { description: 'the call\'s transfers; while it is forwarded, the last one is that forwarding' }),
  recording_ms: Type.Integer({ description: 'length of the recording stored so far (0: none)' }),
  turns: Type.Optional(Type.Array(TurnTiming, { description: 'the answered caller turns, timed; absent in rows of calls.forwarding stored before turns were timed' })),
  collected_data: Type.Optional(CollectedData),
  workflow: Type.Optional(WorkflowState),
  agent_version: Type.Optional(Type.Integer({ description: 'the version of agent_id the conversation runs' })),
  warm: Type.Optional(Type.Object({
    call_sid: Type.Union([Type.String(), Type.Null()], { description: 'the carrier\'s id of the call to the person (null until placed)' }),
    accepted_at: Type.Union([Type.Integer(), Type.Null()], { description: 'epoch ms when the person took the call' }),
    announcement: Type.Optional(Type.Object({ text: Type.String(), language: Type.String() }, { description: 'Telnyx: what the person hears once they answer (Twilio has it in the call\'s TwiML)' })),
    hold_music: Type.Optional(Type.Boolean({ description: 'Telnyx: hold music plays on the caller\'s call (stopped when the transfer settles)' }))
  }, { description: 'while a warm transfer runs (calls.forwarding only): the call to the person' })),
  keys_sent: Type.Optional(Type.String({ description: 'held while the carrier plays keypad tones the agent sent (send_dtmf on Twilio): the stream that takes the call back goes on quietly' }))
})
export type Conversation = Static<typeof Conversation>

/** An object of any members: custom_data, dynamic_context, collected data, a customer's metadata. */
export const AnyObject = Type.Record(Type.String(), Type.Unknown())
export type AnyObject = Static<typeof AnyObject>

/** An agent's call_settings with every member; stored rows may lack newer members (read with the defaults). */
export const CallSettings = Type.Object({
  language: Type.String(),
  sentiment_analysis: Type.Boolean(),
  call_summary: Type.Boolean(),
  max_call_duration_minutes: Type.Number(),
  reminder_after_seconds: Type.Integer(),
  reminder_max_count: Type.Integer(),
  silence_timeout_seconds: Type.Integer(),
  responsiveness: Type.Number(),
  recording_enabled: Type.Boolean(),
  stt_languages: Type.Array(Type.String()),
  wait_for_hello_seconds: Type.Number({ description: 'outbound phone calls: how long the agent waits for the callee\'s first words before its begin message (docs/voice.md, "Waiting for hello")' })
})

export const WidgetSettings = Type.Object({
  enabled: Type.Boolean(),
  theme: Type.String(),
  primary_color: Type.String(),
  position: Type.String(),
  greeting: Type.String(),
  allowed_origins: Type.Array(Type.String()),
  agent_version: Type.Union([Type.Integer(), Type.Null()], { description: 'the agent version the widget\'s calls run; null: the latest' })
})

/** What an agent does about answering machines on its outbound phone calls (docs/voice.md, "Voicemail"). */
export const VoicemailSettings = Type.Object({
  detection: Type.Boolean({ description: 'detect answering machines on outbound phone calls (Twilio\'s asynchronous AMD); web and inbound calls never detect' }),
  action: Type.Enum(['hang_up', 'leave_message'], { description: 'on a machine: hang up, or wait for the beep and speak `message`' }),
  message: Type.String({ description: 'spoken after the beep (action leave_message); {{variables}} from dynamic_context are filled in' }),
  detection_timeout_seconds: Type.Integer({ description: 'how long the carrier listens before it gives up (AnsweredBy unknown: the call goes on as with a person)' })
})

export const CallbackSettings = Type.Object({
  enabled: Type.Boolean(),
  max_attempts: Type.Integer(),
  retry_delay_minutes: Type.Integer(),
  on_outcomes: Type.Array(Type.String())
})

/**
 * Who decides that the caller's turn has ended, and that the caller talks over the agent, on the realtime engine
 * (an LLM configuration's turn_detection; docs/voice.md, "Turn detection"): `switchboard`, ours (the default, the
 * same on both engines), or the provider's own `server_vad` or `semantic_vad` with their settings.
 */
export const TurnDetection = Type.Object({
  type: Type.Enum(['switchboard', 'server_vad', 'semantic_vad'], { description: 'switchboard (default): our own turn detection, on both engines; server_vad or semantic_vad: the realtime provider\'s (engine realtime only)' }),
  eagerness: Type.Optional(Type.Enum(['low', 'medium', 'high', 'auto'], { description: 'semantic_vad only: how soon the provider answers; low waits longest. Default auto (as medium)' })),
  threshold: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: 'server_vad only: how loud speech must be, 0 to 1; default 0.5' })),
  silence_duration_ms: Type.Optional(Type.Integer({ minimum: 100, maximum: 10_000, description: 'server_vad only: silence that ends the turn, ms; default 500' })),
  prefix_padding_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 2000, description: 'server_vad only: audio kept before the detected speech, ms; default 300' }))
})
export type TurnDetection = Static<typeof TurnDetection>

export const RetrievalType = Type.Union([Type.Literal('string'), Type.Literal('number'), Type.Literal('boolean'), Type.Literal('enum'), Type.Literal('date')])

/** A data_retrieval field as stored with an agent: the routes fill in description and required. */
export const RetrievalField = Type.Object({
  name: Type.String(),
  type: RetrievalType,
  description: Type.String(),
  enum_values: Type.Optional(Type.Array(Type.String())),
  required: Type.Boolean(),
  /** A string field the caller may type on the phone's keypad, ended with `#` (voice/keypad.ts). */
  keypad: Type.Optional(Type.Boolean())
})
export type RetrievalField = Static<typeof RetrievalField>

/** agent_templates.agent: what a clone starts from (its fields are checked and completed as a request's). */
export const TemplateAgent = Type.Object({
  agent_name: Type.String(),
  call_settings: Type.Partial(CallSettings),
  data_retrieval: Type.Array(RetrievalField)
})

/** agent_templates.llm. */
export const TemplateLlm = Type.Object({
  model: Type.String(),
  begin_message: Type.String(),
  general_prompt: Type.String(),
  temperature: Type.Number()
})

/** One entry of a delivery's attempt log (webhook_deliveries.attempts). */
export const DeliveryAttempt = Type.Object({
  n: Type.Integer({ description: 'from 1' }),
  at: Type.String({ description: 'ISO 8601' }),
  duration_ms: Type.Integer(),
  status_code: Type.Optional(Type.Integer()),
  error: Type.Optional(Type.String()),
  response_preview: Type.Optional(Type.String({ description: 'the start (1 KiB) of the receiver\'s answer' })),
  manual: Type.Optional(Type.Boolean({ description: 'a resend through the API, outside the schedule' }))
})
export type DeliveryAttempt = Static<typeof DeliveryAttempt>
