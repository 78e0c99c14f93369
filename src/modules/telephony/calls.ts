import type { Logger } from 'pino'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import type { CallRow } from '../../db/schema.ts'
import type { Mailer } from '../../mail/mailer.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { VOICEMAIL_SETTINGS_DEFAULTS } from '../agents/schemas.ts'
import { loadAgentConfig } from '../agents/versions.ts'
import { endCall } from '../calls/lifecycle.ts'
import { findCallRow } from '../calls/queries.ts'
import { CarrierError } from '../phone-numbers/carriers/carrier.ts'
import { twilioRequester, TWILIO_WEBHOOKS } from '../phone-numbers/carriers/twilio.ts'
import { generateToken, hashToken } from '../users/keys.ts'
import type { ForwardRequest } from '../voice/session.ts'
import { callNumber, numberAccount } from '../phone-numbers/number-accounts.ts'
import { clearForwarding, holdForwarding, setCarrierCallId, setStreamToken } from './queries.ts'
import { twilioCalls } from './twilio-calls.ts'
import { dialTwiml, streamTwiml } from './twiml.ts'

// Phone calls through Twilio: the stream a call connects to, placing outbound calls, and putting a live
// call through to a number with <Dial>.

export interface TelephonyDeps extends JobSender { db: DB, log: Logger, mailer: Mailer }

/** How long a stream token opens its call; an outbound call's token outlasts its ringing by as much again. */
const STREAM_TOKEN_TTL_MS = 5 * 60_000

/** How long an outbound call rings when make-phone-call does not say (ring_timeout_seconds). */
export const DEFAULT_RING_TIMEOUT_SECONDS = 30

/** Twilio's final call statuses, and the disconnection_reason of a call that ended in one before it was answered. */
export const UNANSWERED: Record<string, string> = { busy: 'busy', 'no-answer': 'no_answer', failed: 'failed', canceled: 'canceled' }
export const FINAL = new Set(['completed', ...Object.keys(UNANSWERED)])

export const TELEPHONY_PATHS = { ...TWILIO_WEBHOOKS, stream: '/telephony/twilio/stream', dialResult: '/telephony/twilio/dial-result', amd: '/telephony/twilio/amd' } as const

/** A new one-time token for a call's media stream: the token, and what is stored of it. */
export function newStreamToken (ttlMs = STREAM_TOKEN_TTL_MS) {
  const token = generateToken('mst_')
  return { token, hash: hashToken(token), expires: new Date(Date.now() + ttlMs) }
}

/** The TwiML that connects a call to this server's media stream with a token. */
export function connectTwiml (config: Pick<Config, 'publicBaseUrl'>, token: string): string {
  return streamTwiml(config.publicBaseUrl.replace(/^http/, 'ws') + TELEPHONY_PATHS.stream, token)
}

/** Where Twilio posts the end of an outbound call (its call id in the URL: the status may come before Twilio's answer is stored). */
export const statusCallbackOf = (config: Pick<Config, 'publicBaseUrl'>, callId: string) => `${config.publicBaseUrl}${TELEPHONY_PATHS.status}?call_id=${callId}`

/** A Twilio REST client for the account a call runs through; undefined when its number is gone or has no account. */
export async function callTwilio (deps: TelephonyDeps, call: CallRow) {
  const number = await callNumber(deps.db, call)
  const account = number === undefined ? undefined : numberAccount(deps.config, number)
  return account === undefined ? undefined : { number: number!, calls: twilioCalls(twilioRequester(account)) }
}

/**
 * Places an outbound call (the placeCall job): Twilio rings `call_to` from `call_from` and connects the answered
 * call to our stream. A call Twilio refuses ends `failed` (`dial_failed`), charged nothing.
 */
export async function placeCall (deps: TelephonyDeps, callId: string): Promise<void> {
  const call = await findCallRow(deps.db, callId)
  if (call === undefined || call.call_status !== 'started' || call.carrier_call_id !== null) return
  const fail = async (reason: string) => {
    deps.log.warn({ callId, reason }, 'the outbound call could not be placed')
    await endCall(deps.db, deps, call.user_id, call.id, { outcome: 'failed', disconnection_reason: 'dial_failed' })
  }
  const twilio = await callTwilio(deps, call)
  if (twilio === undefined) return await fail(`the number ${call.call_from} has no Twilio account to call through`)
  const ringSeconds = call.ring_timeout_seconds ?? DEFAULT_RING_TIMEOUT_SECONDS
  const { token, hash, expires } = newStreamToken(Math.max(STREAM_TOKEN_TTL_MS, 2 * ringSeconds * 1000))
  if (!await setStreamToken(deps.db, call.id, hash, expires)) return
  const voicemail = await voicemailSettingsOf(deps.db, call)
  try {
    const placed = await twilio.calls.create({
      to: call.call_to!,
      from: call.call_from!,
      twiml: connectTwiml(deps.config, token),
      statusCallback: statusCallbackOf(deps.config, call.id),
      timeoutSeconds: ringSeconds,
      ...(voicemail.detection && { machineDetection: { callback: `${deps.config.publicBaseUrl}${TELEPHONY_PATHS.amd}?call_id=${call.id}`, timeoutSeconds: voicemail.detection_timeout_seconds } })
    })
    await setCarrierCallId(deps.db, call.id, placed.sid)
  } catch (err) {
    if (!(err instanceof CarrierError)) throw err
    await fail(err.message)
  }
}

/** The voicemail_settings of the agent version a call runs (defaults for members it lacks; no detection when the agent is gone). */
export async function voicemailSettingsOf (db: DB, call: CallRow) {
  const loaded = await loadAgentConfig(db, call.user_id, call.agent_id, call.agent_version)
  return { ...VOICEMAIL_SETTINGS_DEFAULTS, ...loaded?.agent.voicemail_settings }
}

/**
 * Ends a call Twilio reported over whose session never did (the carrierEnded job): its process died with the
 * conversation, so only Twilio's final status is known. A call still started now lost its stream.
 */
export async function endReportedCall (deps: TelephonyDeps, callId: string, status: string): Promise<void> {
  const call = await findCallRow(deps.db, callId)
  if (call === undefined || call.call_status !== 'started') return
  await endCall(deps.db, deps, call.user_id, call.id, {
    outcome: status === 'completed' ? 'completed' : 'failed',
    disconnection_reason: UNANSWERED[status] ?? 'stream_dropped'
  })
}

/**
 * Puts a live call through to a number (call_forwarding, agent_transfer to a number): the conversation is kept
 * with the call, then Twilio is told to <Dial>; how that went comes to the dial-result webhook. Throws (and
 * keeps nothing) when the call cannot be forwarded, so that the agent keeps the caller.
 */
export async function forwardCall (deps: TelephonyDeps, call: CallRow, callSid: string, request: ForwardRequest): Promise<void> {
  const twilio = await callTwilio(deps, call)
  if (twilio === undefined) throw new Error('the call\'s number has no Twilio account to dial through')
  if (!await holdForwarding(deps.db, call.id, request.state)) throw new Error('the call has ended')
  const theirs = call.direction === 'inbound' ? call.call_from : call.call_to
  const callerId = request.showCallerNumber && theirs !== null ? theirs : twilio.number.phone_number
  const action = `${deps.config.publicBaseUrl}${TELEPHONY_PATHS.dialResult}?call_id=${call.id}`
  try {
    await twilio.calls.update(callSid, { Twiml: dialTwiml({ number: request.phoneNumber, callerId, timeoutSeconds: request.timeoutSeconds, action }) })
  } catch (err) {
    await clearForwarding(deps.db, call.id)
    throw err
  }
}
