import { Type } from 'typebox'
import { AnyObject, LatencyStat as StoredStat, TranscriptItem, TurnTiming as StoredTurn, WorkflowState } from '../../db/shapes.ts'
import { DateRangeQuery, OptionalDateRangeQuery } from '../../http/dates.ts'
import { AgentVersionNumber } from '../agents/schemas.ts'
import { CallStatus, CallType, COMPONENT, Direction, E164, ListOf, Nullable, ObjectId, Paging } from '../../http/schemas.ts'

const Epoch = Type.Integer({ description: 'epoch ms' })

/** The filters of GET /v1/call/list, which the metrics and the export take too. */
export const callFilters = {
  agent_ids: Type.Optional(ListOf(ObjectId, 'agent ids')),
  agent_id: Type.Optional({ ...ObjectId, description: 'one agent (legacy; prefer agent_ids)' }),
  direction: Type.Optional(ListOf(Direction, 'directions')),
  call_status: Type.Optional(ListOf(CallStatus, 'statuses')),
  call_type: Type.Optional(ListOf(CallType, 'call types')),
  customer_id: Type.Optional(ObjectId),
  workspace_id: Type.Optional(ObjectId)
}

/** Just the filters, for the code that turns them into a CallFilter. */
export const CallFilterQuery = Type.Object(callFilters)

export const ListQuery = Type.Object({
  ...callFilters,
  callback_of: Type.Optional({ ...ObjectId, description: 'the callbacks placed for this call (beyond the specification; the list only)' }),
  ...OptionalDateRangeQuery,
  sort_order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')], { description: 'by start time; default desc (newest first)' })),
  ...Paging
})

export const MetricsQuery = Type.Object({ ...callFilters, ...DateRangeQuery })

const Sentiment = Type.Object({
  sentiment: Type.Enum(['positive', 'negative', 'neutral']),
  explanation: Type.String()
}, { [COMPONENT]: 'CallSentiment' })

const listFields = {
  _id: ObjectId,
  call_type: CallType,
  agent_id: ObjectId,
  agent_name: Type.String(),
  call_status: CallStatus,
  call_from: Nullable(Type.String(), 'null for web calls'),
  call_to: Nullable(Type.String(), 'null for web calls'),
  direction: Direction,
  start_timestamp: Epoch,
  end_timestamp: Nullable(Epoch, 'null while the call runs'),
  recording_url: Nullable(Type.String()),
  disconnection_reason: Nullable(Type.String()),
  sentiment: Nullable(Sentiment, 'null until analysed, or when sentiment analysis is off'),
  call_summary: Nullable(Type.String()),
  task_achieved: Nullable(Type.Boolean()),
  agent_version: Nullable(Type.Integer(), 'the agent version the call ran (GET /v1/agent/:id/versions/:version); null: a call from before versions (beyond the specification)')
}

// A call's latency, modelled on Retell's call object (docs/calls.md, "Latency"): the shapes of calls.latency, named.
export const LatencyStat = Type.Object(StoredStat.properties, {
  [COMPONENT]: 'LatencyStat',
  description: 'the spread of one stage\'s times in whole ms: p50 and p90 interpolated linearly between the closest ranks'
})
export const TurnTiming = Type.Object(StoredTurn.properties, {
  [COMPONENT]: 'TurnTiming',
  description: 'one answered caller turn, timed (ms); stages the call\'s providers do not have are null'
})
const stage = (what: string) => Nullable(LatencyStat, `${what}; null: no turn has this stage (the realtime engine hears audio itself and speaks without a separate voice)`)
export const CallLatency = Type.Object({
  e2e: { ...LatencyStat, description: 'speech end → the first agent audio sent: what the caller waited' },
  end_of_turn: { ...LatencyStat, description: 'speech end → the end-of-turn decision' },
  transcription: stage('the decision → the turn\'s final words'),
  llm: stage('the model\'s request → its first token'),
  tts: stage('the answer\'s first text → its first audio'),
  turns: Type.Array(TurnTiming, { description: 'every answered caller turn, in order' })
}, { [COMPONENT]: 'CallLatency', description: 'the call\'s answered caller turns, timed, with p50 and p90 per stage (docs/calls.md, "Latency")' })
/** What callers of a period's calls waited (GET /v1/call/general-metrics). */
export const LatencyMetrics = Type.Object({
  calls: Type.Integer({ description: 'calls with timed turns' }),
  e2e: { ...LatencyStat, description: 'speech end → the first agent audio sent, over every timed turn of the calls (not an average of the calls\' own percentiles)' }
}, { [COMPONENT]: 'LatencyMetrics', description: 'what callers waited for the agent\'s answer (docs/calls.md, "Latency")' })

/** One automatic callback of an outbound phone call (an agent's callback_settings; docs/calls.md, "Callbacks"). */
export const CallCallback = Type.Object({
  attempt: Type.Integer({ minimum: 1, maximum: 5, description: 'which callback of the first call: 1 for the first' }),
  max_attempts: Type.Integer({ minimum: 1, maximum: 5, description: 'the agent\'s max_attempts when it was scheduled' }),
  status: Type.Enum(['scheduled', 'placed', 'cancelled', 'failed'], { description: 'scheduled: waits for scheduled_at; placed: call_id is its call' }),
  reason: Nullable(Type.String(), 'why it was cancelled (called_back, agent_deleted, agent_inactive, callbacks_disabled, max_attempts_lowered, do_not_call) or failed (number_gone, no_credits, sip_not_connected); null otherwise'),
  scheduled_at: Type.Integer({ description: 'epoch ms: when it is (or was) due' }),
  call_id: Nullable(ObjectId, 'the call placed; null until then')
}, { [COMPONENT]: 'CallCallback' })

/** Where a call went through its agent's workflow (docs/workflows.md, "How a call runs a workflow"). */
export const CallWorkflow = Type.Object({
  path: WorkflowState.properties.path,
  variables: WorkflowState.properties.variables
}, { [COMPONENT]: 'CallWorkflow' })

export const CallListItem = Type.Object(listFields, { [COMPONENT]: 'CallListItem' })

export const CallDetail = Type.Object({
  ...listFields,
  customer_id: Nullable(ObjectId),
  workspace_id: Nullable(ObjectId),
  contact_id: Nullable(ObjectId, 'the person on the other end (GET /v1/contacts/:id); null: none known, or the contact was deleted'),
  duration_ms: Nullable(Type.Integer(), 'from answer to hang-up; null while the call runs'),
  transcription: Type.Array(TranscriptItem),
  call_credits_details: Type.Object({
    phone_call_credits: Type.Number(),
    web_call_credits: Type.Number(),
    text_message_credits: Type.Number(),
    call_forwarding_credits: Type.Number()
  }, { description: 'credits charged for the call (1 credit = 1 US cent)' }),
  tokens: Type.Object({
    input: Type.Integer(),
    output: Type.Integer(),
    total: Type.Integer(),
    by_model: Type.Record(Type.String(), Type.Object({ input: Type.Integer(), output: Type.Integer(), total: Type.Integer() }))
  }, { description: 'language-model tokens used by the call, also per model' }),
  custom_data: AnyObject,
  dynamic_context: AnyObject,
  custom_analysis_data: Nullable(AnyObject, 'the agent\'s data_retrieval fields found in the call'),
  collected_data: Nullable(AnyObject),
  transfer_history: Nullable(Type.Array(Type.Unknown())),
  workflow: Nullable(CallWorkflow, 'the agent\'s workflow in this call; null: the agent had none'),
  latency: Nullable(CallLatency, 'null: the call has no timed turns (not the built-in voice engine, never answered, or ended before turns were timed)'),
  speech_seconds: Type.Object({
    recognised: Type.Number({ description: 'the caller\'s speech recognised' }),
    synthesised: Type.Number({ description: 'the agent\'s speech synthesised' })
  }, { description: 'speech-provider usage of the call (the built-in voice engine)' }),
  simulated: Type.Boolean({ description: 'placed by the built-in simulator, not by telephony' }),
  callback_of: Nullable(ObjectId, 'a callback\'s call: the first call it calls back (beyond the specification); null for every other call'),
  callback_attempt: Nullable(Type.Integer({ minimum: 1, maximum: 5 }), 'which callback of callback_of this call is, from 1; null for every other call'),
  callbacks: Type.Array(CallCallback, { description: 'the callbacks of the first call of this call\'s chain (this call, or its callback_of), in order; [] when it has none' })
}, { [COMPONENT]: 'CallDetail' })

const callInput = {
  agent_id: ObjectId,
  agent_version: Type.Optional({ ...AgentVersionNumber, description: 'the agent version the call runs (GET /v1/agent/:id/versions; 404 when it has no such version); default: what the number pins (phone calls from its outbound agent), else the latest (beyond the specification)' }),
  custom_data: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'arbitrary data kept with the call' })),
  dynamic_context: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'values for {{variables}} in the agent\'s prompt and begin message, e.g. the customer\'s name' }))
}

export const PhoneCallBody = Type.Object({
  ...callInput,
  from_number: { ...E164, description: 'caller id: one of the account\'s numbers (GET /v1/phone-number/list)' },
  to_number: { ...E164, description: 'number to call' },
  ring_timeout_seconds: Type.Optional(Type.Integer({
    minimum: 1,
    maximum: 600,
    description: 'seconds the phone rings before the call ends `failed` with `no_answer` (default 30; beyond the specification). Applies to calls placed through a carrier (Twilio\'s Timeout).'
  }))
})

export const WebCallBody = Type.Object(callInput)

export const PhoneCallCreated = Type.Object({
  _id: ObjectId,
  call_type: Type.Literal('phone'),
  agent_id: ObjectId,
  call_status: Type.Literal('started'),
  call_from: Type.String(),
  call_to: Type.String(),
  direction: Type.Literal('outbound'),
  start_timestamp: Epoch
}, { [COMPONENT]: 'PhoneCallCreated' })

export const WebCallCreated = Type.Object({
  _id: ObjectId,
  call_type: Type.Literal('web'),
  agent_id: ObjectId,
  call_status: Type.Literal('started'),
  start_timestamp: Epoch,
  access_token: Type.String({ description: 'lets a browser join this call (POST /web-call/join); give it to the browser instead of the API key' }),
  access_token_expires_at: Type.Integer({ description: 'epoch ms; the token must be used before then' })
}, { [COMPONENT]: 'WebCallCreated' })

export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(Type.String({
    minLength: 1,
    maxLength: 255,
    description: 'a retried request with the same key and body answers the first call instead of placing another; kept 24 hours'
  }))
})
