import type { KeyObject } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { CallRow } from '../../../db/schema.ts'
import type { Conversation } from '../../../db/shapes.ts'
import { HttpError, PG } from '../../../http/errors.ts'
import { giveBackKeyless, KEYLESS } from '../../../http/rate-limit.ts'
import { errors } from '../../../http/schemas.ts'
import { QUEUES, sendJob } from '../../../jobs/queues.ts'
import { findAgent } from '../../agents/queries.ts'
import { endCall, settledTransfers, startCall, toCallEnd } from '../../calls/lifecycle.ts'
import { findCallRow } from '../../calls/queries.ts'
import { CarrierError } from '../../phone-numbers/carriers/carrier.ts'
import { TELNYX_WEBHOOKS, telnyxRequester, type TelnyxAccount } from '../../phone-numbers/carriers/telnyx.ts'
import { callNumber } from '../../phone-numbers/number-accounts.ts'
import { findNumberAnywhere, findNumberByTelnyxSipApplication, findTelnyxAccountById, type PhoneNumberRow } from '../../phone-numbers/queries.ts'
import type { LiveCalls } from '../../voice/live-calls.ts'
import type { StreamAdmission } from '../../voice/streams.ts'
import { CALL_CONTROL_ID } from '../../voice/transports/telnyx.ts'
import { newStreamToken, sipUser, telnyxStream, UNANSWERED, type TelephonyDeps } from '../calls.ts'
import { acceptWarm, answerWarm, findCarrierCall, recordAnswer, recordTransferAnswer, settleAnsweredBy, takeBack, takeBackWarm } from '../queries.ts'
import { answeredByOf, signalCall } from '../../voice/signals.ts'
import { ACCEPT_TIMEOUT_SECONDS, accepted, announcement, withLeg } from '../warm.ts'
import { announcementVoice, HOLD_MUSIC_PATH, holdMusicWav } from './warm.ts'
import { callTelnyx, decodeClientState, telnyxAccount, telnyxCalls, type ClientState } from './commands.ts'
import { telnyxPublicKey, telnyxSignatureValid } from './signature.ts'
import { acceptCarrierStream } from '../carrier-stream.ts'
import { telnyxMedia } from './stream.ts'

// Telnyx's Call Control webhooks and media stream (docs/voice.md, "Phone calls on Telnyx"). Every webhook must carry
// a valid Ed25519 signature within the tolerance (403 otherwise) before anything is read or changed: of the
// installation's Telnyx account at TELNYX_WEBHOOKS.webhook, of a tenant's own account at the URL naming it
// (/accounts/<our id>, whose stored public key verifies it). A webhook acts only on numbers and calls of its account.
// Events are JSON `{ data: { event_type, occurred_at, payload } }`
// (developers.telnyx.com/docs/voice/programmable-voice/voice-api-webhooks); Telnyx may repeat or reorder them, so
// each is handled from the call's stored state and a repeat changes nothing.

const TAGS = ['telephony']
const BODY_LIMIT = 64 * 1024

/**
 * A hang-up's hangup_cause (developers.telnyx.com/api-reference/callbacks/call-hangup: call_rejected,
 * normal_clearing, originator_cancel, timeout, time_limit, user_busy, not_found, no_answer, unspecified) as the
 * Twilio call status the rest of telephony speaks (calls.ts, UNANSWERED and FINAL). A callee who declines is a
 * busy line to the caller.
 */
const HANGUP_STATUS: Record<string, string> = {
  normal_clearing: 'completed', time_limit: 'completed', user_busy: 'busy', call_rejected: 'busy', timeout: 'no-answer', no_answer: 'no-answer', originator_cancel: 'canceled', not_found: 'failed', unspecified: 'failed'
}

/**
 * The results of Telnyx's answering-machine detection events (developers.telnyx.com/api-reference/callbacks:
 * call-machine-detection-ended, call-machine-greeting-ended and their premium kin; values from team-telnyx/telnyx-node
 * src/resources/webhooks.ts) as Twilio's AnsweredBy, which calls.answered_by keeps and voice/signals.ts answeredByOf
 * reads. A machine is acted on once its greeting ended (`machine_start` until then); a greeting whose end Telnyx is
 * not sure of is over all the same (it sends nothing more). Premium's silence is Twilio's unknown.
 */
const MACHINE_RESULTS: Record<string, Record<string, string>> = {
  'call.machine.detection.ended': { human: 'human', machine: 'machine_start', not_sure: 'unknown' },
  'call.machine.greeting.ended': { beep_detected: 'machine_end_beep', ended: 'machine_end_other', not_sure: 'machine_end_other' },
  'call.machine.premium.detection.ended': { human_residence: 'human', human_business: 'human', machine: 'machine_start', silence: 'unknown', fax_detected: 'fax', not_sure: 'unknown' },
  'call.machine.premium.greeting.ended': { beep_detected: 'machine_end_beep', no_beep_detected: 'machine_end_other' }
}

const E164 = /^\+[1-9]\d{1,14}$/
const PRINTABLE = /^[\x20-\x7e]{1,256}$/

const forbidden = () => new HttpError(403, 'invalid_signature', 'the request is not signed by the Telnyx account of this webhook URL (telnyx-signature-ed25519 and telnyx-timestamp)')

/** The Telnyx account a webhook came from: the installation's (id null) or a tenant's own (our id for it), with its API access. */
interface Via { id: string | null, account: TelnyxAccount | undefined }

const TENANT_WEBHOOK = `${TELNYX_WEBHOOKS.webhook}/accounts/:account`
const TENANT_WEBHOOK_SCHEMA = {
  summary: "Telnyx's Call Control webhook for a tenant's own Telnyx account",
  description: "The webhook URL of the Call Control application made in a tenant's Telnyx account when its numbers were imported (POST /v1/phone-number/import-carrier with api_key and public_key); `account` is this server's id for that account. Signed with that account's key, the public key given at import (403 otherwise, for an unknown account, or for any other account's signature, the installation's included). Events are handled as at the installation's webhook, for that account's numbers and calls only, with that account's API key.",
  params: Type.Object({ account: Type.String({ maxLength: 64 }) })
}

interface TelnyxEvent { type: string, at: Date, payload: Record<string, unknown>, callControlId: string, state: ClientState | undefined, via: Via }

/** The account a number's calls come through: null for the installation's, else our id for the tenant's Telnyx account. */
const accountIdOf = (number: Pick<PhoneNumberRow, 'carrier_public_key' | 'carrier_account_id'>): string | null => number.carrier_public_key === null ? null : number.carrier_account_id

const seconds = (from: Date, to: Date) => Math.max(0, Math.round((to.getTime() - from.getTime()) / 1000))

export const telnyxRoutes: FastifyPluginAsyncTypebox<TelephonyDeps & { live: LiveCalls, streams: StreamAdmission }> = async (app, { live, streams, ...deps }) => {
  const { db, config, log } = deps
  const key = config.telnyx.publicKey === undefined ? undefined : telnyxPublicKey(config.telnyx.publicKey)

  // The signature is over the raw body: it is kept as it came. Any other type is read as nothing, so it fails the signature (403).
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (_request, body, done) => { done(null, body) })
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_request, _body, done) => { done(null, undefined) })

  // ---- A tenant's own Telnyx account: its webhooks come to a URL naming it, verified with its own public key ----

  /** The key that must have signed a webhook, and its account: the installation's, or the tenant's that the URL names (none when unknown: 403). */
  async function signer (request: FastifyRequest): Promise<{ key: KeyObject | undefined, via: Via }> {
    const id = (request.params as { account?: string }).account
    if (id === undefined) return { key, via: { id: null, account: telnyxAccount(config) } }
    const found = /^[0-9a-f]{24}$/.test(id) ? await findTelnyxAccountById(db, id) : undefined
    if (found === undefined) return { key: undefined, via: { id, account: undefined } }
    return { key: telnyxPublicKey(found.publicKey), via: { id, account: { apiUrl: config.telnyx.apiUrl, apiKey: found.apiKey, connectionId: found.connectionId } } }
  }

  const header = (request: FastifyRequest, name: string) => {
    const value = request.headers[name]
    return typeof value === 'string' ? value : undefined
  }

  /** 403 unless the account that the URL names signed the body within the tolerance; then the event it carries. */
  async function verified (request: FastifyRequest): Promise<TelnyxEvent> {
    const { key, via } = await signer(request)
    const body = typeof request.body === 'string' ? request.body : undefined
    if (key === undefined || body === undefined || !telnyxSignatureValid(key, {
      signature: header(request, 'telnyx-signature-ed25519'), timestamp: header(request, 'telnyx-timestamp'), body
    }, config.telnyx.signatureToleranceSeconds)) throw forbidden()
    giveBackKeyless(request)
    let event: any
    try {
      event = JSON.parse(body)
    } catch {
      throw new HttpError(400, 'bad_request', 'the webhook body must be JSON')
    }
    const data = event?.data
    const payload = data?.payload
    if (typeof data?.event_type !== 'string' || typeof payload !== 'object' || payload === null) throw new HttpError(400, 'bad_request', 'the webhook must have data.event_type and data.payload')
    const callControlId = typeof payload.call_control_id === 'string' ? payload.call_control_id : ''
    const at = typeof data.occurred_at === 'string' ? new Date(Date.parse(data.occurred_at)) : new Date(Number.NaN)
    return { type: data.event_type, at: Number.isNaN(at.getTime()) ? new Date() : at, payload, callControlId, state: decodeClientState(payload.client_state), via }
  }

  /**
   * Whether a call is one of the account the event came from: another account may name our call in client_state (its
   * own commands set it), and must change nothing. A call whose number is gone is taken from any signed account.
   */
  async function ofAccount (call: CallRow, event: TelnyxEvent): Promise<boolean> {
    const number = await callNumber(db, call)
    return number === undefined || accountIdOf(number) === event.via.id
  }

  /** Our call an event of one of its own legs is about: named by client_state (before Telnyx's id is stored) or by call_control_id. */
  async function callOf (event: TelnyxEvent): Promise<CallRow | undefined> {
    const found = event.state !== undefined ? await findCallRow(db, event.state.call_id) : await findCarrierCall(db, event.callControlId, 'telnyx')
    return found?.carrier === 'telnyx' && (found.carrier_call_id === null || found.carrier_call_id === event.callControlId) && await ofAccount(found, event) ? found : undefined
  }

  /** An incoming call to one of our numbers: the call is stored with a stream token, answered, and its media streamed here. */
  async function incoming (event: TelnyxEvent): Promise<void> {
    const { callControlId } = event
    // Telnyx's repeat of this webhook: the first one did it all.
    if (await findCarrierCall(db, callControlId, 'telnyx') !== undefined) return
    const { account } = event.via
    if (account === undefined) return
    const calls = telnyxCalls(event.via.id === null ? telnyxRequester(account) : telnyxRequester(account, 'the Telnyx API key kept with the number'))
    // A PBX's call to a SIP number arrives through the number's own Call Control application in the installation's
    // account (its SIP subdomain; docs/sip.md): connection_id names the application, hence the number; `to` and
    // `from` are SIP URIs then.
    const connection = typeof event.payload.connection_id === 'string' ? event.payload.connection_id : ''
    const sipNumber = event.via.id === null && connection !== '' && connection !== account.connectionId ? await findNumberByTelnyxSipApplication(db, connection) : undefined
    // Only a number of ours can be called; the caller is stored as given when it is printable (a number, or a SIP URI's user part).
    const to = sipNumber?.phone_number ?? (typeof event.payload.to === 'string' && E164.test(event.payload.to) ? event.payload.to : '')
    const given = typeof event.payload.from === 'string' ? sipUser(event.payload.from) : ''
    const from = PRINTABLE.test(given) ? given : ''
    // A number of another account (the installation's, or another tenant's) is not this account's to answer.
    const found = sipNumber ?? (to === '' ? undefined : await findNumberAnywhere(db, to))
    const number = sipNumber ?? (found?.carrier === 'telnyx' && accountIdOf(found) === event.via.id ? found : undefined)
    const agent = number === undefined || number.inbound_agent_id === null ? undefined : await findAgent(db, number.user_id, number.inbound_agent_id)
    if (number === undefined || config.callRuntime !== 'voice' || agent === undefined || agent.status !== 'active') {
      log.warn({ to, runtime: config.callRuntime, agent: agent?.id ?? null }, 'a Telnyx call was rejected: the number is not here, has no active inbound agent, or the voice runtime is off')
      await calls.reject(callControlId).catch((err: unknown) => { log.warn({ err }, 'Telnyx could not be told to reject the call') })
      return
    }
    const { token, hash, expires } = newStreamToken()
    let call: CallRow
    try {
      call = await db.transaction().execute(async (trx) => await startCall(trx, deps, agent, {
        agent_version: number.inbound_agent_version ?? undefined,
        call_type: 'phone',
        direction: 'inbound',
        call_from: from,
        call_to: to,
        runtime: 'voice',
        carrier: 'telnyx',
        carrier_call_id: callControlId,
        stream_token_hash: hash,
        stream_token_expires_at: expires
      }))
    } catch (err) {
      // A repeat arriving while the first was handled.
      if ((err as { code?: string }).code === PG.UNIQUE_VIOLATION) return
      throw err
    }
    try {
      await calls.answer(callControlId, { call_id: call.id })
      await calls.streamingStart(callControlId, telnyxStream(config, token))
    } catch (err) {
      if (!(err instanceof CarrierError)) throw err
      log.warn({ err, callId: call.id }, 'Telnyx could not answer the call or stream it')
      await endCall(db, deps, call.user_id, call.id, { outcome: 'failed', disconnection_reason: 'stream_not_connected' })
    }
  }

  /** Our call's own leg hung up: how it ends depends on whether it was answered, streaming or being forwarded. */
  async function hungUp (call: CallRow, event: TelnyxEvent): Promise<void> {
    if (call.call_status !== 'started') return
    const status = HANGUP_STATUS[String(event.payload.hangup_cause)] ?? 'failed'
    if (call.forwarding?.warm !== undefined) return await warmCallerGone(call, call.forwarding, call.forwarding.warm, event)
    if (call.forwarding !== null) {
      // The caller's leg ended while the call was put through: the person hung up after talking (the bridge ends
      // both legs), or the caller hung up first.
      if (call.transfer_answered_at !== null) {
        await endCall(db, deps, call.user_id, call.id, toCallEnd(config, call.id, call.forwarding, { reason: 'call_transfer', forwarding: { outcome: 'answered', seconds: seconds(call.transfer_answered_at, event.at) } }))
        return
      }
      const last = call.forwarding.transfers.at(-1)
      const outcome = last === undefined || last.outcome === 'dialing' ? 'canceled' : last.outcome
      await endCall(db, deps, call.user_id, call.id, toCallEnd(config, call.id, call.forwarding, { reason: 'user_hangup', forwarding: { outcome, seconds: 0 } }))
      return
    }
    if (call.joined_at === null) {
      // Never connected to a stream: not answered, or answered and gone before the stream opened.
      await endCall(db, deps, call.user_id, call.id, { outcome: 'failed', disconnection_reason: UNANSWERED[status] ?? 'stream_not_connected' })
      return
    }
    // A call with a live stream is ended by its session (the stream's stop or drop); should its process have died,
    // this job ends it once the session had its time.
    await sendJob(deps.boss, undefined, QUEUES.carrierEnded, { callId: call.id, status }, { startAfter: new Date(Date.now() + 2 * config.voice.streamTimeoutMs) })
  }

  /** An event of the leg a forwarding dialled: answered (the minutes run), or hung up (the end, or the take-back). */
  async function transferLeg (event: TelnyxEvent): Promise<void> {
    const call = await findCallRow(db, event.state!.call_id)
    if (call?.carrier !== 'telnyx' || call.call_status !== 'started' || call.forwarding === null || !await ofAccount(call, event)) return
    if (event.type === 'call.answered') return await recordTransferAnswer(db, call.id, event.at)
    if (event.type !== 'call.hangup') return
    if (call.transfer_answered_at !== null) {
      await endCall(db, deps, call.user_id, call.id, toCallEnd(config, call.id, call.forwarding, { reason: 'call_transfer', forwarding: { outcome: 'answered', seconds: seconds(call.transfer_answered_at, event.at) } }))
      return
    }
    // Nobody took it: the caller's leg is still there (transfer-call), and the agent takes it back on a new stream.
    const status = HANGUP_STATUS[String(event.payload.hangup_cause)] ?? 'failed'
    const outcome = UNANSWERED[status] ?? 'failed'
    const { token, hash, expires } = newStreamToken()
    if (call.carrier_call_id === null || !await takeBack(db, call.id, { ...call.forwarding, transfers: settledTransfers(call.forwarding, outcome) }, hash, expires)) return
    const telnyx = await callTelnyx(deps, call)
    await telnyx?.calls.streamingStart(call.carrier_call_id, telnyxStream(config, token)).catch((err: unknown) => {
      log.warn({ err, callId: call.id }, 'Telnyx could not stream a call taken back; its hang-up ends it')
    })
  }

  // --- Answering-machine detection (docs/voice.md, "Voicemail") ---

  /**
   * A call.machine.* event of an outbound call placed with detection (telnyx/commands.ts): its verdict is kept with
   * the call in Twilio's words (MACHINE_RESULTS) and signalled to the call's session, as Twilio's /telephony/twilio/amd
   * does. Only the first decisive verdict counts (settleAnsweredBy): a repeat or a late event changes nothing.
   */
  async function machineDetected (event: TelnyxEvent): Promise<void> {
    if (!CALL_CONTROL_ID.test(event.callControlId)) throw new HttpError(400, 'bad_request', 'data.payload.call_control_id must be a Telnyx call control id')
    const results = MACHINE_RESULTS[event.type]
    const result = event.payload.result
    const kept = typeof result === 'string' && Object.hasOwn(results, result) ? results[result] : undefined
    if (kept === undefined) throw new HttpError(400, 'bad_request', `data.payload.result of ${event.type} must be one of ${Object.keys(results).join(', ')}`)
    // A call of another installation on the same account, or no longer here: nothing to do.
    const call = await callOf(event)
    if (call?.direction !== 'outbound' || !await settleAnsweredBy(db, call.id, kept)) return
    const answeredBy = answeredByOf(kept)
    if (answeredBy !== undefined) await signalCall(db, call.id, { type: 'answered_by', answered_by: answeredBy })
  }

  // --- end of answering-machine detection ---

  // Warm transfers (telnyx/warm.ts): the events of the call to the person (client_state leg 'warm'), and the caller
  // hanging up meanwhile. Each is decided from the call's stored state (answerWarm, acceptWarm, takeBackWarm change it
  // once), so that Telnyx's repeats change nothing.

  /** Hangs up the call to the person (a ringing one is cancelled); its call.hangup settles the transfer. `gone`: it may have ended already. */
  async function hangUpLeg (call: CallRow, leg: string, gone = false): Promise<void> {
    const telnyx = await callTelnyx(deps, call)
    await telnyx?.calls.hangup(leg).catch((err: unknown) => { log[gone ? 'debug' : 'warn']({ err, callId: call.id }, 'the call to the person of a warm transfer could not be hung up') })
  }

  /** The person took the call and a hang-up ended it: the call ends call_transfer with the seconds from their answer. */
  async function endTransferred (call: CallRow, state: Conversation, at: Date): Promise<void> {
    const talked = call.transfer_answered_at === null ? 0 : seconds(call.transfer_answered_at, at)
    const ended = withLeg(state, { to: state.transfers.at(-1)?.to_number ?? '', outcome: 'answered', seconds: talked })
    await endCall(db, deps, call.user_id, call.id, toCallEnd(config, call.id, ended, { reason: 'call_transfer', forwarding: { outcome: 'answered', seconds: talked } }))
  }

  /** The caller hung up during a warm transfer: taken, the call was theirs and the person's; before, the person's call is hung up. */
  async function warmCallerGone (call: CallRow, state: Conversation, warm: NonNullable<Conversation['warm']>, event: TelnyxEvent): Promise<void> {
    // Bridged calls end together; the person's is hung up should it still be there.
    if (warm.call_sid !== null) await hangUpLeg(call, warm.call_sid, warm.accepted_at !== null)
    if (warm.accepted_at !== null) return await endTransferred(call, state, event.at)
    const canceled = withLeg(state, { to: state.transfers.at(-1)?.to_number ?? '', outcome: 'canceled', seconds: 0 })
    await endCall(db, deps, call.user_id, call.id, toCallEnd(config, call.id, canceled, { reason: 'user_hangup', forwarding: { outcome: 'canceled', seconds: 0 } }))
  }

  /** An event of the call to the person: answered (the announcement and its one key), the key, or its end. */
  async function warmLeg (event: TelnyxEvent): Promise<void> {
    const leg = event.callControlId
    if (!CALL_CONTROL_ID.test(leg)) throw new HttpError(400, 'bad_request', 'data.payload.call_control_id must be a Telnyx call control id')
    const found = await findCallRow(db, event.state!.call_id)
    if (found?.carrier !== 'telnyx' || !await ofAccount(found, event)) return
    const call = found
    const state = call.call_status === 'started' ? call.forwarding : null
    const warm = state?.warm
    // The event is about the person's call of the warm transfer that runs (its id is recorded once dialled or answered).
    const ours = warm !== undefined && (warm.call_sid === null || warm.call_sid === leg)
    if (event.type === 'call.answered') {
      // A person answering for a caller who is gone (or for an earlier transfer) is hung up at once.
      if (!ours) return await hangUpLeg(call, leg)
      if (!await answerWarm(db, call.id, leg, event.at)) return
      const said = warm.announcement ?? { text: announcement('en', '', true), language: 'en' }
      const telnyx = await callTelnyx(deps, call)
      try {
        await telnyx?.calls.gatherUsingSpeak(leg, { text: said.text, voice: announcementVoice(said.language), timeoutMs: ACCEPT_TIMEOUT_SECONDS * 1000 })
      } catch (err) {
        log.warn({ err, callId: call.id }, 'Telnyx could not announce the call to the person; their call is hung up and the agent takes the caller back')
        await hangUpLeg(call, leg)
      }
      return
    }
    if (!ours) return
    if (event.type === 'call.gather.ended') {
      // The person hung up while it was said: their call.hangup follows and settles it.
      if (event.payload.status === 'call_hangup' || warm.accepted_at !== null) return
      const { digits = '' } = event.payload
      if (typeof digits !== 'string') throw new HttpError(400, 'bad_request', 'data.payload.digits must be a string')
      if (!accepted(digits, null)) return await hangUpLeg(call, leg)
      if (!await acceptWarm(db, call.id, leg) || call.carrier_call_id === null) return
      const telnyx = await callTelnyx(deps, call)
      if (warm.hold_music === true) await telnyx?.calls.playbackStop(call.carrier_call_id).catch((err: unknown) => { log.warn({ err, callId: call.id }, 'Telnyx could not stop the hold music') })
      try {
        await telnyx?.calls.bridge(call.carrier_call_id, leg)
      } catch (err) {
        // The person's call is gone (or Telnyx refused): the caller is not left in silence, the agent takes them back.
        log.warn({ err, callId: call.id }, 'Telnyx could not bridge the caller to the person who took the call; the agent takes the caller back')
        await hangUpLeg(call, leg, true)
        await takeCallerBack(call, state!, leg, 'failed', new Date())
      }
      return
    }
    if (event.type !== 'call.hangup') return
    if (warm.accepted_at !== null) return await endTransferred(call, state!, event.at)
    // Nobody took it: declined once answered, else what the hang-up says.
    const outcome = call.transfer_answered_at !== null ? 'declined' : UNANSWERED[HANGUP_STATUS[String(event.payload.hangup_cause)] ?? 'failed'] ?? 'failed'
    await takeCallerBack(call, state!, leg, outcome, event.at)
  }

  /** The warm transfer did not connect: the person's leg is recorded, and the agent takes the caller back on a new stream (once). */
  async function takeCallerBack (call: CallRow, state: Conversation, leg: string, outcome: string, at: Date): Promise<void> {
    const talked = call.transfer_answered_at === null ? 0 : seconds(call.transfer_answered_at, at)
    const back = withLeg(state, { to: state.transfers.at(-1)?.to_number ?? '', outcome, seconds: talked })
    const { token, hash, expires } = newStreamToken()
    if (call.carrier_call_id === null || !await takeBackWarm(db, call.id, leg, { ...back, transfers: settledTransfers(back, outcome) }, hash, expires)) return
    const telnyx = await callTelnyx(deps, call)
    if (state.warm?.hold_music === true) await telnyx?.calls.playbackStop(call.carrier_call_id).catch((err: unknown) => { log.warn({ err, callId: call.id }, 'Telnyx could not stop the hold music') })
    await telnyx?.calls.streamingStart(call.carrier_call_id, telnyxStream(config, token)).catch((err: unknown) => {
      log.warn({ err, callId: call.id }, 'Telnyx could not stream a call taken back; its hang-up ends it')
    })
  }

  app.get(HOLD_MUSIC_PATH, { schema: { tags: TAGS, security: [], operationId: 'getTelnyxHoldMusic', summary: 'Hold music of warm transfers on Telnyx numbers', description: 'A short WAV tune that Telnyx plays, looped, to a caller on hold while the person is called (playback_start).', produces: ['audio/wav'], response: { 200: Type.Unsafe<Buffer>({ type: 'string', format: 'binary', description: 'PCM16 WAV, mono' }) } } }, async (_request, reply) => {
    return await reply.type('audio/wav').header('cache-control', 'public, max-age=86400').send(holdMusicWav())
  })

  // The installation's account's URL, and a tenant's own account's (TENANT_WEBHOOK): one handler, each URL its own key.
  for (const url of [TELNYX_WEBHOOKS.webhook, TENANT_WEBHOOK]) {
    app.post(url, {
      config: KEYLESS,
      schema: {
        tags: TAGS,
        security: [],
        consumes: ['application/json'],
        summary: "Telnyx's Call Control webhook",
        description: "The webhook URL of the installation's Call Control application (and of the calls placed here). Signed with the account's Ed25519 key (403 otherwise, or outside TELNYX_SIGNATURE_TOLERANCE_SECONDS). call.initiated of an incoming call answers it and streams it to the number's inbound agent (a number without an active inbound agent is rejected); call.answered records when an outbound call was answered; call.hangup ends the call (`busy`, `no_answer`, … before an answer). Events of a forwarding's leg settle the forwarding; those of a warm transfer's call to the person (client_state leg `warm`) announce the call to them (call.answered), connect both or hang them up (call.gather.ended: key 1 bridges) and settle the transfer (call.hangup). call.machine.detection.ended, call.machine.greeting.ended and their premium kin (answering-machine detection of an outbound call) are signalled to the call's session: a person hears the agent, a machine gets its message or a hang-up (the agent's voicemail_settings); a `result` Telnyx does not send answers 400. Other events are acknowledged and ignored.",
        response: { 204: Type.Null(), ...errors(400, 403) },
        ...(url === TENANT_WEBHOOK && TENANT_WEBHOOK_SCHEMA)
      }
    }, async (request, reply) => {
      const event = await verified(request)
      if (event.state?.leg === 'warm') {
        await warmLeg(event)
      } else if (event.state?.leg === 'transfer') {
        await transferLeg(event)
      } else if (Object.hasOwn(MACHINE_RESULTS, event.type)) {
        await machineDetected(event)
      } else if (event.type === 'call.initiated' || event.type === 'call.answered' || event.type === 'call.hangup') {
        if (!CALL_CONTROL_ID.test(event.callControlId)) throw new HttpError(400, 'bad_request', 'data.payload.call_control_id must be a Telnyx call control id')
        if (event.type === 'call.initiated') {
        // An outgoing leg's call.initiated (ours, or a transfer's) needs nothing.
          if (event.payload.direction === 'incoming') await incoming(event)
        } else {
          const call = await callOf(event)
          if (call !== undefined && event.type === 'call.answered') await recordAnswer(db, call.id, event.at)
          if (call !== undefined && event.type === 'call.hangup') await hungUp(call, event)
        }
      }
      return reply.code(204).send(null)
    })
  }

  // Anyone may open the stream: its place is taken before the upgrade, and it must `start` with a valid token in time.
  app.get(TELNYX_WEBHOOKS.stream, { websocket: true, onRequest: streams.admit, schema: { hide: true } }, (socket, request) => {
    acceptCarrierStream(socket, telnyxMedia, deps, live, () => { streams.started(request) }, header(request, 'x-telnyx-streaming-auth-token'))
  })
}
