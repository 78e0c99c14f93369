import type { KeyObject } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { CallRow } from '../../../db/schema.ts'
import { HttpError, PG } from '../../../http/errors.ts'
import { giveBackKeyless, KEYLESS } from '../../../http/rate-limit.ts'
import { errors } from '../../../http/schemas.ts'
import { QUEUES, sendJob } from '../../../jobs/queues.ts'
import { findAgent } from '../../agents/queries.ts'
import { endCall, settledTransfers, startCall, toCallEnd } from '../../calls/lifecycle.ts'
import { findCallRow } from '../../calls/queries.ts'
import { CarrierError } from '../../phone-numbers/carriers/carrier.ts'
import { TELNYX_WEBHOOKS, telnyxRequester } from '../../phone-numbers/carriers/telnyx.ts'
import { callNumber } from '../../phone-numbers/number-accounts.ts'
import { findNumberAnywhere, findNumberByTelnyxSipApplication, findTelnyxAccountById, type PhoneNumberRow } from '../../phone-numbers/queries.ts'
import type { LiveCalls } from '../../voice/live-calls.ts'
import type { StreamAdmission } from '../../voice/streams.ts'
import { CALL_CONTROL_ID } from '../../voice/transports/telnyx.ts'
import { newStreamToken, sipUser, telnyxStream, UNANSWERED, type TelephonyDeps } from '../calls.ts'
import { findCarrierCall, recordAnswer, recordTransferAnswer, takeBack } from '../queries.ts'
import { HOLD_MUSIC_PATH, holdMusicWav } from './warm.ts'
import { HANGUP_STATUS, seconds, type TelnyxEvent, type Via } from './events.ts'
import { isMachineEvent, machineDetected } from './machine.ts'
import { warmLegs } from './warm-legs.ts'
import { callTelnyx, decodeClientState, telnyxAccount, telnyxCalls } from './commands.ts'
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

const E164 = /^\+[1-9]\d{1,14}$/
const PRINTABLE = /^[\x20-\x7e]{1,256}$/

const forbidden = () => new HttpError(403, 'invalid_signature', 'the request is not signed by the Telnyx account of this webhook URL (telnyx-signature-ed25519 and telnyx-timestamp)')

const TENANT_WEBHOOK = `${TELNYX_WEBHOOKS.webhook}/accounts/:account`
const TENANT_WEBHOOK_SCHEMA = {
  summary: "Telnyx's Call Control webhook for a tenant's own Telnyx account",
  description: "The webhook URL of the Call Control application made in a tenant's Telnyx account when its numbers were imported (POST /v1/phone-number/import-carrier with api_key and public_key); `account` is this server's id for that account. Signed with that account's key, the public key given at import (403 otherwise, for an unknown account, or for any other account's signature, the installation's included). Events are handled as at the installation's webhook, for that account's numbers and calls only, with that account's API key.",
  params: Type.Object({ account: Type.String({ maxLength: 64 }) })
}

/** The account a number's calls come through: null for the installation's, else our id for the tenant's Telnyx account. */
const accountIdOf = (number: Pick<PhoneNumberRow, 'carrier_public_key' | 'carrier_account_id'>): string | null => number.carrier_public_key === null ? null : number.carrier_account_id

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

  const { warmLeg, warmCallerGone } = warmLegs(deps, ofAccount)

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
      } else if (isMachineEvent(event.type)) {
        await machineDetected(db, event, callOf)
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
