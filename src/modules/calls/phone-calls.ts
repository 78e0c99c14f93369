import type { Selectable, Transaction } from 'kysely'
import type { Static } from 'typebox'
import type { DB } from '../../db/database.ts'
import type { CallRow, Database, PhoneNumbersTable } from '../../db/schema.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { conflict, HttpError, notFound } from '../../http/errors.ts'
import { getSubscription } from '../account/credits.ts'
import { findAgent, type AgentRow } from '../agents/queries.ts'
import { doNotCallForCall } from '../contacts/dnc.ts'
import { findPhoneNumber, findPhoneNumberByE164 } from '../phone-numbers/queries.ts'
import { findCallback, lockScheduledCallback, settleCallback, type CallbackRow } from './callback-queries.ts'
import { callbackSettings } from './callbacks.ts'
import { idempotent } from './idempotency.ts'
import { phoneCallCreated, startCall } from './lifecycle.ts'
import { findCallRow } from './queries.ts'
import type { PhoneCallBody, PhoneCallCreated } from './schemas.ts'
import { callingAgent, checkPin } from './web-calls.ts'

// Outbound phone calls: the one way they are placed, for POST /v1/call/make-phone-call (and the console's "Place a
// test phone call", with the same rules and refusals) and for the callbacks that an agent's callback_settings
// schedule (callbacks.ts).

type Trx = Transaction<Database>

export interface PhoneCallRequest {
  from_number: string
  to_number: string
  custom_data?: Record<string, unknown>
  dynamic_context?: Record<string, unknown>
  ring_timeout_seconds?: number
  /** The agent version the call runs; absent: the number's pin when the agent is its outbound agent, else the latest. */
  agent_version?: number
  /** The campaign placing the call (campaigns module). */
  campaign_id?: string
}

/**
 * Places a phone call as POST /v1/call/make-phone-call asks: the account's active agent (404, 409 `agent_inactive`),
 * one of its numbers (404), a version the agent has (404), a `to_number` not on its do-not-call list (409
 * `do_not_call`), a number whose calls this installation carries (409 `sip_not_connected`).
 */
export async function placePhoneCall (db: DB, jobs: JobSender, userId: string, body: Static<typeof PhoneCallBody>, idempotencyKey?: string): Promise<Static<typeof PhoneCallCreated>> {
  const agent = await callingAgent(db, userId, body.agent_id)
  const number = await findPhoneNumberByE164(db, userId, body.from_number)
  if (number === undefined) throw notFound(`phone number ${body.from_number} (body.from_number) of this account`)
  await checkPin(db, userId, agent.id, body.agent_version)
  return await idempotent(db, userId, idempotencyKey, 'make-phone-call', body, async (trx) => {
    if (await doNotCallForCall(trx, userId, body.to_number)) {
      throw new HttpError(409, 'do_not_call', `${body.to_number} (body.to_number) is on the account's do-not-call list; DELETE /v1/dnc/${body.to_number} takes it off`)
    }
    const call = await startPhoneCall(trx, jobs, agent, number, body)
    return { callId: call.id, response: phoneCallCreated(call, 'outbound', body.from_number, body.to_number) }
  })
}

/**
 * Starts an outbound phone call of the agent from one of the account's numbers, in the caller's transaction: with
 * the configured runtime, through the number's carrier (CALL_RUNTIME=voice places a Twilio number's call at Twilio).
 */
export async function startPhoneCall (trx: Trx, jobs: JobSender, agent: AgentRow, number: Pick<Selectable<PhoneNumbersTable>, 'carrier' | 'outbound_agent_id' | 'outbound_agent_version' | 'sip_domain_sid' | 'sip_carrier'>,
  request: PhoneCallRequest): Promise<CallRow> {
  // A SIP number's calls are carried by Twilio or Telnyx once connect-to-sip set it up there (docs/sip.md); never simulated.
  const sipProblem = sipNotConnected(number)
  if (sipProblem !== undefined) throw conflict(sipProblem, 'sip_not_connected')
  const pinned = number.outbound_agent_id === agent.id ? number.outbound_agent_version ?? undefined : undefined
  return await startCall(trx, jobs, agent, {
    agent_version: request.agent_version ?? pinned,
    call_type: 'phone',
    direction: 'outbound',
    call_from: request.from_number,
    call_to: request.to_number,
    custom_data: request.custom_data,
    dynamic_context: request.dynamic_context,
    runtime: jobs.config.callRuntime,
    ring_timeout_seconds: request.ring_timeout_seconds,
    campaign_id: request.campaign_id,
    // A SIP trunk's number is carried by the installation's Twilio or Telnyx account (sip_carrier; docs/sip.md).
    ...(number.carrier === 'telnyx' || (number.carrier === 'sip' && number.sip_carrier === 'telnyx')
      ? { carrier: 'telnyx' as const }
      : (number.carrier === 'twilio' || number.carrier === 'sip') && { carrier: 'twilio' as const })
  })
}

/** The caller of a simulated inbound call: a fictional number (555-0100 to 555-0199), so that no real person is named. */
export const SIMULATED_CALLER = '+12025550142'

/**
 * A simulated call to one of the sandbox's numbers (the console's "Simulate a call to this number"): no carrier
 * brings it, so the sandbox's inbound call is made as the carriers' webhooks make theirs (the number's active inbound
 * agent, its version pin) and held by the simulator's scripted caller, like a sandbox number's outbound call
 * (docs/voice.md, "Simulated calls"). 404 for a number not the account's; 409 for a number of a real carrier (its
 * calls come from phones), without an inbound agent (`no_inbound_agent`) or with an inactive one (`agent_inactive`).
 */
export async function simulateInboundCall (db: DB, jobs: JobSender, userId: string, numberId: string): Promise<CallRow> {
  const number = await findPhoneNumber(db, userId, numberId)
  if (number === undefined) throw notFound(`phone number ${numberId}`)
  if (number.carrier !== 'sandbox') throw conflict(`${number.phone_number} is a ${number.carrier} number: its calls come from real phones, so call it from one`)
  if (number.inbound_agent_id === null) throw conflict(`${number.phone_number} has no inbound agent to answer it`, 'no_inbound_agent')
  const agent = await callingAgent(db, userId, number.inbound_agent_id)
  return await db.transaction().execute(async (trx) => await startCall(trx, jobs, agent, {
    agent_version: number.inbound_agent_version ?? undefined,
    call_type: 'phone',
    direction: 'inbound',
    call_from: SIMULATED_CALLER,
    call_to: number.phone_number,
    // The voice runtime simulates a phone call without a carrier; under any other, the simulator holds it.
    runtime: jobs.config.callRuntime === 'voice' ? 'voice' : 'simulator'
  }))
}

/** Why a SIP number places no call: the installation carries no SIP calls (no Twilio account, or the sandbox). */
function sipNotConnected (number: Pick<Selectable<PhoneNumbersTable>, 'carrier' | 'sip_domain_sid'>): string | undefined {
  if (number.carrier !== 'sip' || number.sip_domain_sid !== null) return undefined
  return 'the number is connected to a SIP trunk that this installation does not carry (it has no account at its SIP carrier, SIP_CARRIER, or runs PHONE_CARRIER=sandbox): set one up, then connect the number again with PATCH /v1/phone-number/connect-to-sip (docs/sip.md)'
}

type Settled = { status: 'cancelled' | 'failed', reason: string }

/**
 * Places a scheduled callback at its time (the placeCallback job): a new call with the first call's agent, numbers,
 * custom_data, dynamic_context and ring time, linked to it. Checked now rather than when it was scheduled: a callback
 * is `cancelled` when the person's number was put on the do-not-call list (`do_not_call`), or the agent was deleted,
 * made inactive or had callbacks turned off (or fewer attempts allowed) meanwhile, and `failed` when the account no longer has the number or has no credits left (and no auto top-up).
 * The callback leaves `scheduled` under its row lock in the transaction that stores the call, so a job delivered
 * twice, or at once on two workers, places one call.
 */
export async function placeCallback (deps: JobSender & { db: DB }, callbackId: string): Promise<void> {
  const scheduled = await findCallback(deps.db, callbackId)
  if (scheduled?.status !== 'scheduled') return
  // Read before the transaction (the subscription is made on first use in a transaction of its own); a balance read
  // a moment early decides as well.
  const subscription = await getSubscription(deps.db, scheduled.user_id)
  const noCredits = subscription.creditBalance <= 0 && !subscription.autoTopUpEnabled
  await deps.db.transaction().execute(async (trx) => {
    const callback = await lockScheduledCallback(trx, callbackId)
    if (callback === undefined) return
    const ready = await placeable(trx, callback, noCredits)
    if ('status' in ready) {
      await settleCallback(trx, callback.id, ready)
      return
    }
    const { agent, number, first } = ready
    const call = await startPhoneCall(trx, deps, agent, number, {
      from_number: number.phone_number,
      to_number: callback.to_number,
      custom_data: first.custom_data,
      dynamic_context: first.dynamic_context,
      ring_timeout_seconds: first.ring_timeout_seconds ?? undefined
    })
    await settleCallback(trx, callback.id, { status: 'placed', callId: call.id })
  })
}

/** The first call, agent and number a callback is placed with, or why it is not placed. */
async function placeable (trx: Trx, callback: CallbackRow, noCredits: boolean) {
  const not = (status: Settled['status'], reason: string): Settled => ({ status, reason })
  const first = await findCallRow(trx, callback.callback_of)
  // Never missing: a call's callbacks are deleted with it (ON DELETE CASCADE).
  if (first === undefined) throw new Error(`callback ${callback.id}: its call ${callback.callback_of} is missing`)
  // In the transaction that stores the call: a number listed meanwhile is seen, or listed once the call is stored.
  if (await doNotCallForCall(trx, callback.user_id, callback.to_number)) return not('cancelled', 'do_not_call')
  const agent = await findAgent(trx, callback.user_id, first.agent_id)
  if (agent === undefined) return not('cancelled', 'agent_deleted')
  const settings = callbackSettings(agent)
  if (!settings.enabled) return not('cancelled', 'callbacks_disabled')
  if (callback.attempt > settings.max_attempts) return not('cancelled', 'max_attempts_lowered')
  if (agent.status !== 'active') return not('cancelled', 'agent_inactive')
  const number = await findPhoneNumberByE164(trx, callback.user_id, first.call_from ?? '')
  if (number === undefined) return not('failed', 'number_gone')
  if (sipNotConnected(number) !== undefined) return not('failed', 'sip_not_connected')
  if (noCredits) return not('failed', 'no_credits')
  return { first, agent, number }
}
