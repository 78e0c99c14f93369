import type { Transaction } from 'kysely'
import type { Config, Prices } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { CallRow, Database, TranscriptItem } from '../../db/schema.ts'
import type { Conversation, TransferRecord, TurnTiming, WorkflowState } from '../../db/shapes.ts'
import { QUEUES, sendJob, type JobSender } from '../../jobs/queues.ts'
import { chargeCredits } from '../account/credits.ts'
import { findAgent, type AgentRow } from '../agents/queries.ts'
import { CALL_SETTINGS_DEFAULTS } from '../agents/schemas.ts'
import { currentVersion } from '../agents/versions.ts'
import { cancelCallbacksTo } from './callback-queries.ts'
import { scheduleCallback } from './callbacks.ts'
import { learnContactName, linkContact } from '../contacts/contacts.ts'
import { callLatency } from './latency.ts'
import { insertCall, lockCall, updateCall } from './queries.ts'
import { recordingUrl } from './recordings.ts'

// The call lifecycle (DESIGN.md): started -> pending (ended; analysis running) -> success | failed.
// Every runtime (the runtime API, the simulator, the deadline job, the voice engine) starts calls through
// startCall and ends them through endCall; the analysis job stores its result through finishCall.

type Trx = Transaction<Database>

export interface NewCall {
  call_type: 'phone' | 'web'
  direction: 'inbound' | 'outbound'
  call_from?: string
  call_to?: string
  custom_data?: Record<string, unknown>
  dynamic_context?: Record<string, unknown>
  runtime: 'voice' | 'simulator' | 'external'
  /** A web call's access token (POST /web-call/join and its stream). */
  access_token_hash?: string
  access_token_expires_at?: Date
  /** A phone call's media-stream token (the carrier's stream). */
  stream_token_hash?: string
  stream_token_expires_at?: Date
  /** The carrier that carries a phone call (its number's); none: the voice runtime simulates it. */
  carrier?: 'twilio' | 'telnyx'
  /** The carrier's id of an inbound call. */
  carrier_call_id?: string
  /** How long an outbound call through a carrier rings before it counts as not answered. */
  ring_timeout_seconds?: number
  /** The agent version to run (a number's or widget's pin, or the request's); absent: the agent's current one. */
  agent_version?: number
  /** The campaign placing the call: its end is the campaign's to retry, not callback_settings'. */
  campaign_id?: string
}

/**
 * Stores a new `started` call of the agent and schedules what follows it, in one transaction. An inbound phone call
 * cancels the account's callbacks scheduled to its caller: the person called back.
 */
export async function startCall (trx: Trx, jobs: JobSender, agent: AgentRow, call: NewCall): Promise<CallRow> {
  const start = new Date()
  const row = await insertCall(trx, {
    ...call,
    id: newId(),
    agent_version: call.agent_version ?? await currentVersion(trx, agent.user_id, agent.id),
    // The person on the other end (contacts): found or created with the call, in its transaction.
    contact_id: await linkContact(trx, agent, call, start),
    user_id: agent.user_id,
    agent_id: agent.id,
    agent_name: agent.agent_name,
    customer_id: agent.customer_id,
    workspace_id: agent.workspace_id,
    call_status: 'started',
    start_timestamp: start,
    custom_data: JSON.stringify(call.custom_data ?? {}),
    dynamic_context: JSON.stringify(call.dynamic_context ?? {})
  })
  await scheduleCall(trx, jobs, row, maxDurationMinutes(agent))
  if (call.direction === 'inbound' && call.call_type === 'phone' && call.call_from !== undefined) await cancelCallbacksTo(trx, agent.user_id, call.call_from, 'called_back')
  return row
}

/**
 * A call row that is not stored, for what needs one to run on: an action's test button (a sample call) and a typed
 * test conversation (voice/text-run.ts). `values` over an empty web call.
 */
export function unstoredCall (values: Pick<CallRow, 'id' | 'user_id' | 'agent_id' | 'agent_name' | 'start_timestamp'> & Partial<CallRow>): CallRow {
  return {
    customer_id: null,
    workspace_id: null,
    call_type: 'web',
    direction: 'inbound',
    call_status: 'started',
    call_from: null,
    call_to: null,
    end_timestamp: null,
    duration_ms: null,
    recording_url: null,
    disconnection_reason: null,
    sentiment: null,
    sentiment_explanation: null,
    call_summary: null,
    task_achieved: null,
    transcription: [],
    phone_call_credits: 0,
    web_call_credits: 0,
    text_message_credits: 0,
    call_forwarding_credits: 0,
    token_usage: {},
    input_tokens: 0,
    output_tokens: 0,
    sms_count: 0,
    forwarding_seconds: 0,
    custom_data: {},
    dynamic_context: {},
    custom_analysis_data: null,
    collected_data: null,
    transfer_history: null,
    agent_version: null,
    workflow: null,
    latency: null,
    contact_id: null,
    campaign_id: null,
    runtime: 'external',
    access_token_hash: null,
    access_token_expires_at: null,
    joined_at: null,
    stream_token_hash: null,
    stream_token_expires_at: null,
    answered_at: null,
    ring_timeout_seconds: null,
    carrier: null,
    carrier_call_id: null,
    answered_by: null,
    forwarding: null,
    transfer_answered_at: null,
    speech_recognised_seconds: 0,
    speech_synthesised_seconds: 0,
    outcome: null,
    analysis_status: null,
    analysis_error: null,
    list_json: '', // nothing lists it
    created_at: values.start_timestamp,
    updated_at: values.start_timestamp,
    ...values
  }
}

/** A new phone call as the API answers it (make-phone-call, and the runtime's inbound call). */
export function phoneCallCreated<D extends 'inbound' | 'outbound'> (call: CallRow, direction: D, from: string, to: string) {
  return {
    _id: call.id,
    call_type: 'phone' as const,
    agent_id: call.agent_id,
    call_status: 'started' as const,
    call_from: from,
    call_to: to,
    direction,
    start_timestamp: call.start_timestamp.getTime()
  }
}

/** The agent's limit on a call's length; an agent deleted meanwhile has the default. */
export function maxDurationMinutes (agent: Pick<AgentRow, 'call_settings'> | undefined): number {
  return Number(agent?.call_settings.max_call_duration_minutes ?? CALL_SETTINGS_DEFAULTS.max_call_duration_minutes)
}

/** How far a runtime's clock may run ahead of the server's when it reports an end. */
export const END_CLOCK_SKEW_MS = 5 * 60_000

/** Seconds the deadline waits past the limit for a call the voice engine holds: it ends the call itself, transcript and all. */
const VOICE_DEADLINE_GRACE_SECONDS = 30

/**
 * The call is a conversation simulated through the voice core: every call of the simulator, and phone calls
 * of the voice runtime without a carrier (numbers of the sandbox; a SIP trunk number's calls are Twilio's, or none).
 */
function isSimulated (call: Pick<CallRow, 'runtime' | 'call_type' | 'carrier'>): boolean {
  return call.runtime === 'simulator' || (call.runtime === 'voice' && call.call_type === 'phone' && call.carrier === null)
}

/**
 * Schedules what follows a new call, in the transaction that stores it: the deadline after the agent's
 * maximum duration, for simulated calls the simulator's answer, and for an outbound call through a carrier
 * its placing.
 */
async function scheduleCall (trx: Trx, jobs: JobSender, call: Pick<CallRow, 'id' | 'runtime' | 'call_type' | 'carrier' | 'direction'>, maxMinutes: number): Promise<void> {
  const scale = jobs.config.callTimeScale
  const grace = call.runtime === 'voice' ? VOICE_DEADLINE_GRACE_SECONDS : 0
  await sendJob(jobs.boss, trx, QUEUES.callDeadline, { callId: call.id, maxMs: maxMinutes * 60_000 }, { startAfter: Math.max(0, Math.round(maxMinutes * 60 * scale + grace)) })
  if (isSimulated(call)) {
    await sendJob(jobs.boss, trx, QUEUES.simulateCall, { callId: call.id }, { startAfter: Math.round(jobs.config.simulatorCallSeconds * scale) })
  } else if (call.runtime === 'voice' && call.carrier !== null && call.direction === 'outbound') {
    await sendJob(jobs.boss, trx, QUEUES.placeCall, { callId: call.id })
  }
}

export interface CallEnd {
  outcome: 'completed' | 'failed'
  disconnection_reason: string
  end_timestamp?: number
  transcription?: TranscriptItem[]
  recording_url?: string
  usage?: {
    tokens?: Record<string, { input: number, output: number }>
    sms_sent?: number
    forwarding_seconds?: number
    /** Seconds of speech recognised and synthesised (the built-in voice engine). */
    speech?: { recognised_seconds: number, synthesised_seconds: number }
  }
  collected_data?: Record<string, unknown>
  transfer_history?: unknown[]
  /** The answered caller turns, timed (the built-in voice engine): stored with their summary as the call's latency. */
  turns?: TurnTiming[]
  /** Where the agent's workflow went and what it collected (calls.workflow). */
  workflow?: WorkflowState
}

/** The call's transfers with what became of the forwarding (the last one): its outcome, and an answered one's length. */
export function settledTransfers (conversation: Pick<Conversation, 'transfers'>, outcome: string, seconds = 0): TransferRecord[] {
  const { transfers } = conversation
  return transfers.map((transfer, i) => i < transfers.length - 1
    ? transfer
    : { ...transfer, outcome, ...(outcome === 'answered' && { duration_seconds: seconds }) })
}

/**
 * The call's end from the record of its conversation (db/shapes.ts, Conversation): the one conversion for the
 * voice session, the carrier's webhooks and the deadline. The call connected when a word was said or the caller
 * was put through to a number (or `answered`); `forwarding` settles the forwarding that the call ends in (its last transfer).
 */
export function toCallEnd (config: Pick<Config, 'publicBaseUrl'>, callId: string, conversation: Omit<Conversation, 'agent_id'>, end: { reason: string, forwarding?: { outcome: string, seconds: number }, answered?: boolean }): CallEnd {
  const { forwarding } = end
  const transfers = forwarding === undefined ? conversation.transfers : settledTransfers(conversation, forwarding.outcome, forwarding.seconds)
  // `answered`: the carrier connected the call though no word was said (an answering machine hung up on): its minutes count.
  const connected = end.answered === true || conversation.transcript.some((item) => item.speaker === 'user' || item.speaker === 'agent') ||
    transfers.some((transfer) => transfer.to_number !== undefined)
  return {
    outcome: connected ? 'completed' : 'failed',
    disconnection_reason: end.reason,
    transcription: conversation.transcript,
    recording_url: conversation.recording_ms > 0 ? recordingUrl(config, callId) : undefined,
    usage: {
      tokens: conversation.tokens,
      speech: { recognised_seconds: conversation.speech.recognised, synthesised_seconds: conversation.speech.synthesised },
      forwarding_seconds: forwarding?.outcome === 'answered' ? forwarding.seconds : 0
    },
    transfer_history: transfers.length === 0 ? undefined : transfers,
    turns: conversation.turns,
    // Nothing collected (or collection off): the call's collected_data stays null.
    collected_data: Object.keys(conversation.collected_data ?? {}).length === 0 ? undefined : conversation.collected_data,
    workflow: conversation.workflow
  }
}

/** What became of an end: the call ended now, had ended already (a second end, concurrent or later), is not the account's, or the end was refused. */
export type EndOutcome =
  | { outcome: 'ended', call: CallRow }
  | { outcome: 'already_ended', callStatus: CallRow['call_status'] }
  | { outcome: 'not_found' }
  | { outcome: 'invalid_end_timestamp', message: string }

/**
 * Ends a started call and commits its analysis job with it, and the next callback of an outbound phone call that
 * did not connect (callbacks.ts). Only a `started` call ends: a second end,
 * concurrent or later, finds no started row and answers `already_ended` without changing anything. The
 * runtime API turns the outcome into HTTP; the server's own runtimes (sessions, jobs, the carrier's
 * webhooks) need none of it, since a call that another end reached first leaves nothing to do.
 */
export async function endCall (db: DB, jobs: JobSender, userId: string, callId: string, end: CallEnd): Promise<EndOutcome> {
  return await db.transaction().execute(async (trx): Promise<EndOutcome> => {
    const current = await lockCall(trx, userId, callId)
    if (current === undefined) return { outcome: 'not_found' }
    if (current.call_status !== 'started') return { outcome: 'already_ended', callStatus: current.call_status }
    const endedAt = await endTime(trx, userId, current, end.end_timestamp)
    if (typeof endedAt === 'string') return { outcome: 'invalid_end_timestamp', message: endedAt }
    const tokens = end.usage?.tokens ?? {}
    const latency = callLatency(end.turns)
    const row = await updateCall(trx, current.id, {
      call_status: 'pending',
      analysis_status: 'pending',
      outcome: end.outcome,
      end_timestamp: endedAt,
      // A call that never connected held no conversation; one the carrier placed counts from the answer, not the ringing.
      duration_ms: end.outcome === 'completed' ? Math.max(0, endedAt.getTime() - (current.answered_at ?? current.start_timestamp).getTime()) : 0,
      disconnection_reason: end.disconnection_reason,
      transcription: JSON.stringify(end.transcription ?? []),
      recording_url: end.recording_url ?? null,
      token_usage: JSON.stringify(tokens),
      input_tokens: Object.values(tokens).reduce((n, t) => n + t.input, 0),
      output_tokens: Object.values(tokens).reduce((n, t) => n + t.output, 0),
      // Added to the text messages the server sent for the call while it ran (countCallMessage).
      sms_count: current.sms_count + (end.usage?.sms_sent ?? 0),
      forwarding_seconds: end.usage?.forwarding_seconds ?? 0,
      speech_recognised_seconds: end.usage?.speech?.recognised_seconds ?? 0,
      speech_synthesised_seconds: end.usage?.speech?.synthesised_seconds ?? 0,
      collected_data: end.collected_data === undefined ? null : JSON.stringify(end.collected_data),
      transfer_history: end.transfer_history === undefined ? null : JSON.stringify(end.transfer_history),
      workflow: end.workflow === undefined ? null : JSON.stringify(end.workflow),
      latency: latency === null ? null : JSON.stringify(latency),
      access_token_hash: null,
      stream_token_hash: null
    })
    await sendJob(jobs.boss, trx, QUEUES.analyseCall, { callId: row.id })
    await scheduleCallback(trx, jobs, row)
    return { outcome: 'ended', call: row }
  })
}

/**
 * When the call ended: the runtime's end_timestamp (default now), between the call's start and now (give
 * or take END_CLOCK_SKEW_MS), and no later than the agent's maximum duration allows: the server would
 * have ended the call there (the deadline job), so a later end is clamped to it and never charged beyond.
 * An end_timestamp outside that answers why, as a message.
 */
async function endTime (trx: Trx, userId: string, call: { agent_id: string, start_timestamp: Date }, requested: number | undefined): Promise<Date | string> {
  const now = Date.now()
  const at = requested ?? now
  if (at < call.start_timestamp.getTime()) return 'end_timestamp must not be before the call\'s start_timestamp'
  if (at > now + END_CLOCK_SKEW_MS) return `end_timestamp must not be later than now (${END_CLOCK_SKEW_MS / 60_000} minutes of clock skew allowed)`
  const maxMs = maxDurationMinutes(await findAgent(trx, userId, call.agent_id)) * 60_000
  return new Date(Math.min(at, call.start_timestamp.getTime() + maxMs))
}

/** Credits of a call from the price table: per started minute by call type, per SMS, per forwarding minute. */
export function creditsOf (call: Pick<CallRow, 'call_type' | 'outcome' | 'duration_ms' | 'sms_count' | 'forwarding_seconds'>, prices: Prices) {
  const minutes = call.outcome === 'completed' ? Math.ceil((call.duration_ms ?? 0) / 60_000) : 0
  return {
    phone_call_credits: call.call_type === 'phone' ? minutes * prices.phoneMinute : 0,
    web_call_credits: call.call_type === 'web' ? minutes * prices.webMinute : 0,
    text_message_credits: call.sms_count * prices.sms,
    call_forwarding_credits: Math.ceil(call.forwarding_seconds / 60) * prices.forwardingMinute
  }
}

/**
 * One text message (SMS or WhatsApp) the server sent for a call, counted in its `sms_count` in the caller's
 * transaction. Until the call is charged (finishCall, once analysed) the count is charged with the call; a message
 * sent after that (an after-call message) is charged at once: its credits are added to the call's
 * `text_message_credits` and taken from the balance, so the call's credits always match its count. A call
 * that is not the account's counts nothing.
 */
export async function countCallMessage (trx: Trx, userId: string, callId: string, prices: Prices): Promise<void> {
  const call = await lockCall(trx, userId, callId)
  if (call === undefined) return
  const charged = call.call_status === 'success' || call.call_status === 'failed'
  if (!charged || prices.sms === 0) {
    await updateCall(trx, call.id, { sms_count: call.sms_count + 1 })
    return
  }
  await updateCall(trx, call.id, { sms_count: call.sms_count + 1, text_message_credits: call.text_message_credits + prices.sms })
  await chargeCredits(trx, userId, { amount: prices.sms, callId, description: `text message of call ${callId}` })
}

/** What the analysis of an ended call found, as the call keeps it. */
export interface CallAnalysis {
  /** A conversation was held: the call succeeds (otherwise it failed, and nothing was analysed). */
  held: boolean
  /** Why the analysis failed on its last attempt; the call is finalised without it. */
  error?: string
  summary: string | null
  sentiment: { sentiment: 'positive' | 'negative' | 'neutral', explanation: string } | null
  /** The data_retrieval values found; undefined when no analysis ran. */
  data?: Record<string, string | number | boolean>
  taskAchieved: boolean
  /** Tokens the analysis itself used, by model: added to the call's. */
  usage: Record<string, { input: number, output: number }>
}

/**
 * Finalises an analysed call in the caller's transaction: status, analysis, credits (charged to the
 * ledger). Answers the updated call, or undefined when another worker finalised it first.
 */
export async function finishCall (trx: Trx, call: CallRow, analysis: CallAnalysis, prices: Prices): Promise<CallRow | undefined> {
  const locked = await lockCall(trx, call.user_id, call.id)
  if (locked?.analysis_status !== 'pending') return undefined
  // The count as it is now: a message sent while the analysis ran is charged with the call.
  // Before the call's update, whose rollup rows a new call of the contact takes after the contact (no cycle).
  await learnContactName(trx, call, analysis.data)
  const credits = creditsOf({ ...call, sms_count: locked.sms_count }, prices)
  const tokens = { ...call.token_usage }
  for (const [model, usage] of Object.entries(analysis.usage)) {
    tokens[model] = { input: (tokens[model]?.input ?? 0) + usage.input, output: (tokens[model]?.output ?? 0) + usage.output }
  }
  const updated = await updateCall(trx, call.id, {
    call_status: analysis.held ? 'success' : 'failed',
    analysis_status: analysis.error === undefined ? 'completed' : 'failed',
    analysis_error: analysis.error ?? null,
    call_summary: analysis.summary,
    sentiment: analysis.sentiment?.sentiment ?? null,
    sentiment_explanation: analysis.sentiment?.explanation ?? null,
    task_achieved: analysis.taskAchieved,
    custom_analysis_data: analysis.data === undefined ? null : JSON.stringify(analysis.data),
    ...credits,
    token_usage: JSON.stringify(tokens),
    input_tokens: Object.values(tokens).reduce((n, t) => n + t.input, 0),
    output_tokens: Object.values(tokens).reduce((n, t) => n + t.output, 0)
  })
  const total = credits.phone_call_credits + credits.web_call_credits + credits.text_message_credits + credits.call_forwarding_credits
  if (total > 0) await chargeCredits(trx, call.user_id, { amount: total, callId: call.id, description: `${call.call_type} call ${call.id}` })
  return updated
}
