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
import { TELNYX_WEBHOOKS } from '../phone-numbers/carriers/telnyx.ts'
import { twilioRequester, TWILIO_WEBHOOKS } from '../phone-numbers/carriers/twilio.ts'
import { generateToken, hashToken } from '../users/keys.ts'
import type { ForwardRequest } from '../voice/session.ts'
import { callNumber, numberAccount, sipTrunkOf } from '../phone-numbers/number-accounts.ts'
import { clearForwarding, holdForwarding, setCarrierCallId, setStreamToken, setWarmCallSid } from './queries.ts'
import { callTelnyx, telnyxTarget } from './telnyx/commands.ts'
import { twilioCalls } from './twilio-calls.ts'
import { conferenceTwiml, dialTwiml, gatherTwiml, playDigitsTwiml, streamTwiml } from './twiml.ts'
import { ACCEPT_TIMEOUT_SECONDS, announcement, conferenceName } from './warm.ts'
import type { Conversation } from '../../db/shapes.ts'

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

export const TELEPHONY_PATHS = {
  ...TWILIO_WEBHOOKS,
  stream: '/telephony/twilio/stream',
  dialResult: '/telephony/twilio/dial-result',
  // A warm transfer's call to the person: its <Gather> answer and its status callback.
  transferAnswer: '/telephony/twilio/transfer-answer',
  transferStatus: '/telephony/twilio/transfer-status',
  amd: '/telephony/twilio/amd'
} as const

/** A new one-time token for a call's media stream: the token, and what is stored of it. */
export function newStreamToken (ttlMs = STREAM_TOKEN_TTL_MS) {
  const token = generateToken('mst_')
  return { token, hash: hashToken(token), expires: new Date(Date.now() + ttlMs) }
}

/** Where Telnyx streams a call's media, and the one-time token the stream opens its call with. */
export const telnyxStream = (config: Pick<Config, 'publicBaseUrl'>, token: string) => ({ url: config.publicBaseUrl.replace(/^http/, 'ws') + TELNYX_WEBHOOKS.stream, token })
const streamUrlOf = (config: Pick<Config, 'publicBaseUrl'>) => config.publicBaseUrl.replace(/^http/, 'ws') + TELEPHONY_PATHS.stream

/** The TwiML that connects a call to this server's media stream with a token. */
export function connectTwiml (config: Pick<Config, 'publicBaseUrl'>, token: string): string {
  return streamTwiml(streamUrlOf(config), token)
}

/** Where Twilio posts the end of an outbound call (its call id in the URL: the status may come before Twilio's answer is stored). */
export const statusCallbackOf = (config: Pick<Config, 'publicBaseUrl'>, callId: string) => `${config.publicBaseUrl}${TELEPHONY_PATHS.status}?call_id=${callId}`

/**
 * The SIP URI of `user` (a phone number) at a trunk's termination URI: sip:trunk.example.com:5060;transport=tcp and
 * +15550100 give sip:+15550100@trunk.example.com:5060;transport=tcp. Twilio dials sip: URIs only; a sips: trunk is
 * reached over TLS (its transport parameter; https://www.twilio.com/docs/voice/api/sip-making-calls, "Transport").
 */
export function sipAddress (terminationUri: string, user: string): string {
  const [, scheme = 'sip', rest] = /^(?:(sips?):)?(.*)$/i.exec(terminationUri)!
  const tls = scheme.toLowerCase() === 'sips' && !/;transport=/i.test(rest) ? ';transport=tls' : ''
  return `sip:${user}@${rest}${tls}`
}

/** The caller of a SIP call as the call records it: the user part of its SIP URI (sip:+15550100@pbx → +15550100). */
export function sipUser (from: string): string {
  const match = /^sips?:([^@;]+)@/i.exec(from)
  return match === null ? from : match[1]
}

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
  const ringSeconds = call.ring_timeout_seconds ?? DEFAULT_RING_TIMEOUT_SECONDS
  const { token, hash, expires } = newStreamToken(Math.max(STREAM_TOKEN_TTL_MS, 2 * ringSeconds * 1000))
  if (call.carrier === 'telnyx') {
    // Telnyx: one dial (POST /v2/calls) rings the callee and streams the answered call to us; its events come to our webhook.
    const telnyx = await callTelnyx(deps, call)
    if (telnyx === undefined) return await fail(`the number ${call.call_from} has no Telnyx account to call through`)
    if (!await setStreamToken(deps.db, call.id, hash, expires)) return
    const voicemail = await voicemailSettingsOf(deps.db, call)
    try {
      // A SIP number's call goes to its PBX at the termination URI, with the trunk's credentials (docs/sip.md).
      const id = await telnyx.calls.dial({
        connectionId: telnyx.connectionId, ...telnyxTarget(telnyx.trunk, call.call_to!), from: call.call_from!, timeoutSeconds: ringSeconds,
        webhookUrl: telnyx.webhookUrl, clientState: { call_id: call.id }, stream: telnyxStream(deps.config, token),
        // Its verdicts come to the webhook as call.machine.* events (telnyx/machine.ts).
        ...(voicemail.detection && { machineDetection: { timeoutSeconds: voicemail.detection_timeout_seconds } })
      })
      await setCarrierCallId(deps.db, call.id, id)
    } catch (err) {
      if (!(err instanceof CarrierError)) throw err
      await fail(err.message)
    }
    return
  }
  const twilio = await callTwilio(deps, call)
  if (twilio === undefined) return await fail(`the number ${call.call_from} has no Twilio account to call through`)
  if (!await setStreamToken(deps.db, call.id, hash, expires)) return
  // A SIP number's call goes to its trunk's termination URI, with the trunk's credentials.
  const trunk = sipTrunkOf(twilio.number)
  const voicemail = await voicemailSettingsOf(deps.db, call)
  try {
    const placed = await twilio.calls.create({
      to: trunk === undefined ? call.call_to! : sipAddress(trunk.terminationUri, call.call_to!),
      from: call.call_from!,
      twiml: connectTwiml(deps.config, token),
      statusCallback: statusCallbackOf(deps.config, call.id),
      timeoutSeconds: ringSeconds,
      sipAuth: trunk?.auth,
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
  if (request.warm !== undefined) return await warmTransfer(deps, call, callSid, request, request.warm, twilio)
  if (!await holdForwarding(deps.db, call.id, request.state)) throw new Error('the call has ended')
  const theirs = call.direction === 'inbound' ? call.call_from : call.call_to
  const callerId = request.showCallerNumber && theirs !== null ? theirs : twilio.number.phone_number
  const action = `${deps.config.publicBaseUrl}${TELEPHONY_PATHS.dialResult}?call_id=${call.id}`
  try {
    const trunk = sipTrunkOf(twilio.number)
    const sip = trunk === undefined ? undefined : { uri: sipAddress(trunk.terminationUri, request.phoneNumber), ...trunk.auth }
    await twilio.calls.update(callSid, { Twiml: dialTwiml({ number: request.phoneNumber, callerId, timeoutSeconds: request.timeoutSeconds, action, sip }) })
  } catch (err) {
    await clearForwarding(deps.db, call.id)
    throw err
  }
}

/**
 * A warm transfer (telephony/warm.ts): the agent calls the person from the call's number with the summary, then
 * puts the caller on hold in the call's conference. Throws (and keeps nothing, the person's call cancelled) when
 * either step fails, so that the agent keeps the caller.
 */
async function warmTransfer (deps: TelephonyDeps, call: CallRow, callSid: string, request: ForwardRequest, warm: NonNullable<ForwardRequest['warm']>,
  twilio: NonNullable<Awaited<ReturnType<typeof callTwilio>>>): Promise<void> {
  const { summary, holdMusic, language } = warm
  if (!await holdForwarding(deps.db, call.id, { ...request.state, warm: { call_sid: null, accepted_at: null } })) throw new Error('the call has ended')
  const leg = (path: string) => `${deps.config.publicBaseUrl}${path}?call_id=${call.id}`
  let placed: string | undefined
  // A SIP number's person is called through its trunk, as its outbound calls are.
  const trunk = sipTrunkOf(twilio.number)
  try {
    placed = (await twilio.calls.create({
      to: trunk === undefined ? request.phoneNumber : sipAddress(trunk.terminationUri, request.phoneNumber),
      sipAuth: trunk?.auth,
      from: twilio.number.phone_number,
      twiml: gatherTwiml({ text: announcement(language, summary), language, action: leg(TELEPHONY_PATHS.transferAnswer), timeoutSeconds: ACCEPT_TIMEOUT_SECONDS }),
      statusCallback: leg(TELEPHONY_PATHS.transferStatus),
      timeoutSeconds: request.timeoutSeconds
    })).sid
    await setWarmCallSid(deps.db, call.id, placed)
    await twilio.calls.update(callSid, { Twiml: conferenceTwiml({ name: conferenceName(call.id), starts: false, holdMusic }) })
  } catch (err) {
    await clearForwarding(deps.db, call.id)
    if (placed !== undefined) {
      await twilio.calls.update(placed, { Status: 'completed' }).catch((cancel: unknown) => deps.log.warn({ err: cancel, callId: call.id }, 'the call to the person could not be cancelled'))
    }
    throw err
  }
}

/**
 * The agent sends keypad tones (send_dtmf): Twilio's Media Streams take none from us, so the call is updated to
 * <Play digits> and then connect a new stream, which takes the conversation kept with the call (as a forwarding
 * nobody answered is taken back). Throws (and keeps nothing) when Twilio refuses, so that the agent keeps the call.
 */
export async function sendKeys (deps: TelephonyDeps, call: CallRow, callSid: string, digits: string, state: Conversation): Promise<void> {
  const twilio = await callTwilio(deps, call)
  if (twilio === undefined) throw new Error('the call\'s number has no Twilio account to send keys through')
  const { token, hash, expires } = newStreamToken()
  if (!await holdForwarding(deps.db, call.id, state) || !await setStreamToken(deps.db, call.id, hash, expires)) throw new Error('the call has ended')
  try {
    await twilio.calls.update(callSid, { Twiml: playDigitsTwiml(digits, streamUrlOf(deps.config), token) })
  } catch (err) {
    await clearForwarding(deps.db, call.id)
    throw err
  }
}
