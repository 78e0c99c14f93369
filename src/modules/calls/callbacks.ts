import type { Transaction } from 'kysely'
import { newId } from '../../db/ids.ts'
import type { CallRow, Database } from '../../db/schema.ts'
import { QUEUES, sendJob, type JobSender } from '../../jobs/queues.ts'
import { findAgent, type AgentRow } from '../agents/queries.ts'
import { CALLBACK_SETTINGS_DEFAULTS } from '../agents/schemas.ts'
import { findCallbackOfCall, insertCallback } from './callback-queries.ts'

// Automatic callbacks (an agent's callback_settings; docs/calls.md, "Callbacks"). The end of an outbound phone call
// schedules the next callback in endCall's transaction; an inbound call from the person cancels what is scheduled in
// startCall's (callback-queries.ts, cancelCallbacksTo). Placing one at its time is phone-calls.ts's placeCallback: it
// starts a call, which this file, imported by the lifecycle, must not.

type Trx = Transaction<Database>

export type CallbackOutcome = 'no_answer' | 'busy' | 'voicemail' | 'failed'

/**
 * disconnection_reasons that name an outcome. `voicemail`: an answering machine answered (the voice session's
 * detection, or an outside runtime's report, or Retell's `voicemail_reached`), whether a message was left or not.
 */
const OUTCOME_OF_REASON: Record<string, CallbackOutcome> = { no_answer: 'no_answer', busy: 'busy', voicemail: 'voicemail', voicemail_reached: 'voicemail' }

/**
 * Which of callback_settings.on_outcomes an ended call had: its reason's, else `failed` for any other call that
 * never connected (Twilio's failed, dial_failed, not_connected, an outside runtime's invalid_number, …); undefined
 * for a conversation held.
 */
export function callbackOutcome (call: Pick<CallRow, 'outcome' | 'disconnection_reason'>): CallbackOutcome | undefined {
  return OUTCOME_OF_REASON[call.disconnection_reason ?? ''] ?? (call.outcome === 'failed' ? 'failed' : undefined)
}

/** The agent's callback_settings with the defaults of the members it lacks. */
export function callbackSettings (agent: Pick<AgentRow, 'callback_settings'>) {
  return { ...CALLBACK_SETTINGS_DEFAULTS, ...agent.callback_settings }
}

/**
 * Schedules the next callback of an outbound phone call that just ended (in endCall's transaction, so that the end
 * and the callback commit together): when its agent has callbacks on, the call's outcome is one of on_outcomes and
 * the chain has had fewer than max_attempts callbacks. The callback is placed after retry_delay_minutes (times
 * CALL_TIME_SCALE) by the placeCallback job sent with it.
 */
export async function scheduleCallback (trx: Trx, jobs: JobSender, call: CallRow): Promise<void> {
  if (call.call_type !== 'phone' || call.direction !== 'outbound' || call.call_from === null || call.call_to === null) return
  // A campaign retries its contacts itself, within its calling hours and caps.
  if (call.campaign_id !== null) return
  const outcome = callbackOutcome(call)
  if (outcome === undefined) return
  const agent = await findAgent(trx, call.user_id, call.agent_id)
  if (agent === undefined) return
  const settings = callbackSettings(agent)
  if (!settings.enabled || !settings.on_outcomes.includes(outcome)) return
  const placedFor = await findCallbackOfCall(trx, call.id)
  const attempt = (placedFor?.attempt ?? 0) + 1
  if (attempt > settings.max_attempts) return
  const dueAt = new Date(Date.now() + Math.round(settings.retry_delay_minutes * 60_000 * jobs.config.callTimeScale))
  const id = await insertCallback(trx, {
    id: newId(),
    user_id: call.user_id,
    callback_of: placedFor?.callback_of ?? call.id,
    after_call_id: call.id,
    attempt,
    max_attempts: settings.max_attempts,
    to_number: call.call_to,
    due_at: dueAt
  })
  if (id !== undefined) await sendJob(jobs.boss, trx, QUEUES.placeCallback, { callbackId: id }, { startAfter: dueAt })
}
