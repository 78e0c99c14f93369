import type { FastifyReply, FastifyRequest } from 'fastify'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { CallRow } from '../../db/schema.ts'
import { HttpError, notFound, PG } from '../../http/errors.ts'
import { giveBackKeyless, KEYLESS } from '../../http/rate-limit.ts'
import { errors, ObjectId } from '../../http/schemas.ts'
import { QUEUES, sendJob } from '../../jobs/queues.ts'
import { findAgent } from '../agents/queries.ts'
import { endCall, settledTransfers, startCall, toCallEnd } from '../calls/lifecycle.ts'
import { findCallRow } from '../calls/queries.ts'
import { findNumberAnywhere, findNumberBySipDomain } from '../phone-numbers/queries.ts'
import type { TwilioAccount } from '../phone-numbers/carriers/twilio.ts'
import type { LiveCalls } from '../voice/live-calls.ts'
import type { StreamAdmission } from '../voice/streams.ts'
import { CALL_SID } from '../voice/transports/twilio.ts'
import { callNumber, numberAccount } from '../phone-numbers/number-accounts.ts'
import { webhookAccount } from './accounts.ts'
import { callTwilio, connectTwiml, FINAL, newStreamToken, sipUser, TELEPHONY_PATHS, UNANSWERED, type TelephonyDeps } from './calls.ts'
import { acceptWarm, findCarrierCall, recordAnswer, recordAnsweredBy, setCarrierCallId, setStreamToken, takeBack, takeBackWarm } from './queries.ts'
import { answeredByOf, signalCall } from '../voice/signals.ts'
import { signatureValid } from './signature.ts'
import { acceptCarrierStream } from './carrier-stream.ts'
import { twilioMedia } from './stream.ts'
import { conferenceTwiml, hangupTwiml, rejectTwiml } from './twiml.ts'
import { accepted, conferenceName, withLeg } from './warm.ts'

// Twilio's webhooks and media stream (docs/voice.md, "Phone calls"). Every request must carry a valid
// X-Twilio-Signature (403 otherwise) before anything is changed: the call or number it is about is looked up
// first, and only that number's account may sign it, so that one account cannot act on another's calls.
// Twilio's retries of a webhook find what the first one did and answer the same.

const TAGS = ['telephony']

/** Twilio's AnsweredBy values (answering-machine detection). */
const ANSWERED_BY = new Set(['human', 'machine_start', 'machine_end_beep', 'machine_end_silence', 'machine_end_other', 'fax', 'unknown'])

/** A <Dial>'s DialCallStatus as a transfer's outcome. */
const DIAL_OUTCOMES: Record<string, string> = { completed: 'answered', answered: 'answered', ...UNANSWERED }

const FORM_LIMIT = 64 * 1024

const forbidden = () => new HttpError(403, 'invalid_signature', 'the request is not signed by the Twilio account it concerns: the account of the call\'s number (X-Twilio-Signature)')

const CallIdQuery = Type.Object({ call_id: Type.Optional(ObjectId) })

/** When a status callback's event happened: its Timestamp (RFC 2822, whole seconds), or now without a readable one. */
function answeredAt (timestamp: string | null): Date {
  const at = timestamp === null ? Number.NaN : Date.parse(timestamp)
  return Number.isNaN(at) ? new Date() : new Date(at)
}

export const telephonyRoutes: FastifyPluginAsyncTypebox<TelephonyDeps & { live: LiveCalls, streams: StreamAdmission }> = async (app, { live, streams, ...deps }) => {
  const { db, config, log } = deps

  // Twilio posts forms. Any other body is read as nothing, so that it fails the signature check (403), not the parser.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT }, (_request, body, done) => {
    done(null, new URLSearchParams(body as string))
  })
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: FORM_LIMIT }, (_request, _body, done) => { done(null, undefined) })

  /** A webhook's form; a body that is not one cannot carry a valid signature (403). */
  function formOf (request: FastifyRequest): URLSearchParams {
    if (!(request.body instanceof URLSearchParams)) throw forbidden()
    return request.body
  }

  /** 403 unless `account` signed the request (X-Twilio-Signature over the URL Twilio requested and the form) and the form names it. */
  function verify (request: FastifyRequest, form: URLSearchParams, account: TwilioAccount | undefined): void {
    // The URL Twilio requested: this server's public address and the path and query as they arrived.
    const url = config.publicBaseUrl + request.url
    const signature = request.headers['x-twilio-signature']
    if (account === undefined || form.get('AccountSid') !== account.accountSid ||
      !signatureValid(account.authToken, url, form, typeof signature === 'string' ? signature : undefined)) {
      throw forbidden()
    }
    giveBackKeyless(request)
  }

  /** A webhook about nothing held here: it must still be signed by an account this server knows, the one it names. */
  async function verifyNamed (request: FastifyRequest, form: URLSearchParams): Promise<void> {
    verify(request, form, await webhookAccount(db, config, form.get('AccountSid') ?? ''))
  }

  /** The account of a call's number (the number called, or calling): the only one that may sign webhooks about the call. */
  async function callAccount (call: CallRow): Promise<TwilioAccount | undefined> {
    const number = await callNumber(db, call)
    return number === undefined ? undefined : numberAccount(config, number)
  }

  function callSidOf (form: URLSearchParams): string {
    const callSid = form.get('CallSid') ?? ''
    if (!CALL_SID.test(callSid)) throw new HttpError(400, 'bad_request', 'CallSid must be a Twilio call sid')
    return callSid
  }

  const twiml = (reply: FastifyReply, body: string) => reply.type('text/xml; charset=utf-8').send(body)

  /** A stream (again) for a call that has not connected one yet; a call already streaming or ended is hung up. */
  async function streamAgain (reply: FastifyReply, call: CallRow) {
    const { token, hash, expires } = newStreamToken()
    if (call.joined_at !== null || !await setStreamToken(db, call.id, hash, expires)) return twiml(reply, hangupTwiml())
    return twiml(reply, connectTwiml(config, token))
  }

  const webhook = { tags: TAGS, security: [], consumes: ['application/x-www-form-urlencoded'] }

  app.post(TELEPHONY_PATHS.voice, {
    config: KEYLESS,
    schema: {
      ...webhook,
      summary: "Twilio's voice webhook of a number",
      description: 'Set on every Twilio number bought or imported here. Answers TwiML that connects the call to the number\'s inbound agent through a media stream; a number without an active inbound agent is rejected.',
      response: { ...errors(400, 403) }
    }
  }, async (request, reply) => {
    const form = formOf(request)
    // The call (a retry of this webhook) or else the number called is looked up first: its account alone may sign.
    const existing = CALL_SID.test(form.get('CallSid') ?? '') ? await findCarrierCall(db, form.get('CallSid')!) : undefined
    if (existing !== undefined) {
      verify(request, form, await callAccount(existing))
      return await streamAgain(reply, existing)
    }
    // A PBX's call to a SIP number arrives through the number's SIP Domain (docs/sip.md): To and From are SIP URIs,
    // SipDomainSid names the domain, hence the number (https://www.twilio.com/docs/voice/api/sip-twiml).
    const sipDomain = form.get('SipDomainSid')
    const number = sipDomain === null ? await findNumberAnywhere(db, form.get('To') ?? '') : await findNumberBySipDomain(db, sipDomain)
    const account = number?.carrier === (sipDomain === null ? 'twilio' : 'sip') ? numberAccount(config, number!) : undefined
    const to = number?.phone_number ?? form.get('To') ?? ''
    const from = sipUser(form.get('From') ?? '')
    if (number === undefined || account === undefined) {
      await verifyNamed(request, form)
      callSidOf(form)
      log.warn({ to, accountSid: form.get('AccountSid') }, 'a Twilio call to a number that is not here was rejected')
      return twiml(reply, rejectTwiml())
    }
    verify(request, form, account)
    const callSid = callSidOf(form)
    const agent = number.inbound_agent_id === null ? undefined : await findAgent(db, number.user_id, number.inbound_agent_id)
    if (config.callRuntime !== 'voice' || agent === undefined || agent.status !== 'active') {
      log.warn({ to, runtime: config.callRuntime, agent: agent?.id ?? null }, 'a Twilio call was rejected: the number has no active inbound agent, or the voice runtime is off')
      return twiml(reply, rejectTwiml())
    }
    const { token, hash, expires } = newStreamToken()
    try {
      await db.transaction().execute(async (trx) => await startCall(trx, deps, agent, {
        agent_version: number.inbound_agent_version ?? undefined,
        call_type: 'phone',
        direction: 'inbound',
        call_from: from,
        call_to: to,
        runtime: 'voice',
        carrier: 'twilio',
        carrier_call_id: callSid,
        stream_token_hash: hash,
        stream_token_expires_at: expires
      }))
    } catch (err) {
      // Twilio's retry of this webhook, arriving while the first was answered.
      if ((err as { code?: string }).code !== PG.UNIQUE_VIOLATION) throw err
      return await streamAgain(reply, (await findCarrierCall(db, callSid))!)
    }
    return twiml(reply, connectTwiml(config, token))
  })

  /**
   * The call a webhook is about, by the call id in its URL (outbound calls, dial results) or by Twilio's CallSid,
   * with the signed form: only the account of the call's number may sign it (403). A webhook about no call here
   * answers 404 when the account it names signed it, 403 otherwise.
   */
  async function signedCall (request: FastifyRequest, callId: string | undefined): Promise<{ form: URLSearchParams, call: CallRow, callSid: string }> {
    const form = formOf(request)
    const given = form.get('CallSid') ?? ''
    const found = callId !== undefined ? await findCallRow(db, callId) : CALL_SID.test(given) ? await findCarrierCall(db, given) : undefined
    const call = found?.carrier === 'twilio' && (found.carrier_call_id === null || found.carrier_call_id === given) ? found : undefined
    if (call === undefined) {
      await verifyNamed(request, form)
      callSidOf(form)
      throw notFound('call')
    }
    verify(request, form, await callAccount(call))
    return { form, call, callSid: callSidOf(form) }
  }

  app.post(TELEPHONY_PATHS.status, {
    config: KEYLESS,
    schema: {
      ...webhook,
      summary: "Twilio's status callback of a call",
      description: 'An `in-progress` callback (the `answered` event of an outbound call) records when the person answered: the call\'s duration and minutes run from then. A call that ends before it was answered (busy, no-answer, failed, canceled) ends `failed` with that reason and is charged nothing. Answers 404 for a call that is not here, without changing anything.',
      querystring: CallIdQuery,
      response: { 204: Type.Null(), ...errors(400, 403, 404) }
    }
  }, async (request, reply) => {
    const { form, call, callSid } = await signedCall(request, request.query.call_id)
    const status = form.get('CallStatus') ?? ''
    // The person answered an outbound call (StatusCallbackEvent answered): its minutes run from Twilio's Timestamp.
    if (status === 'in-progress' && call.call_status === 'started') await recordAnswer(db, call.id, answeredAt(form.get('Timestamp')))
    if (call.call_status !== 'started' || !FINAL.has(status)) return reply.code(204).send(null)
    if (call.carrier_call_id === null) await setCarrierCallId(db, call.id, callSid)
    if (call.forwarding !== null) {
      // The caller hung up while their call was being put through.
      const last = call.forwarding.transfers.at(-1)
      const outcome = last === undefined || last.outcome === 'dialing' ? 'canceled' : last.outcome
      // Warm: once the person took the call, the end of their call settles it; before, it is cancelled.
      const warm = call.forwarding.warm
      if (warm !== undefined && warm.accepted_at !== null) return reply.code(204).send(null)
      const state = warm === undefined ? call.forwarding : withLeg(call.forwarding, { to: last?.to_number ?? '', outcome: 'canceled', seconds: 0 })
      if (warm?.call_sid != null) await cancelLeg(call, warm.call_sid)
      await endCall(db, deps, call.user_id, call.id, toCallEnd(config, call.id, state, { reason: 'user_hangup', forwarding: { outcome, seconds: 0 } }))
    } else if (call.joined_at === null) {
      // Never connected to a stream: not answered, or answered and gone before the stream opened.
      await endCall(db, deps, call.user_id, call.id, { outcome: 'failed', disconnection_reason: UNANSWERED[status] ?? 'stream_not_connected' })
    } else {
      // A call with a live stream is ended by its session (the stream's stop or drop at once, a silent stream
      // after the stream time-out); should its process have died, this job ends it once the session had its time.
      const after = new Date(Date.now() + 2 * config.voice.streamTimeoutMs)
      await sendJob(deps.boss, undefined, QUEUES.carrierEnded, { callId: call.id, status }, { startAfter: after })
    }
    return reply.code(204).send(null)
  })

  app.post(TELEPHONY_PATHS.dialResult, {
    config: KEYLESS,
    schema: {
      ...webhook,
      summary: "How a forwarding's <Dial> went",
      description: 'Answered: the call ends when the person hangs up, with the forwarding minutes charged. Not answered: the agent takes the call back on a new stream and says so.',
      querystring: Type.Object({ call_id: ObjectId }),
      response: { ...errors(400, 403, 404) }
    }
  }, async (request, reply) => {
    const { form, call } = await signedCall(request, request.query.call_id)
    if (call.call_status !== 'started' || call.forwarding === null) return twiml(reply, hangupTwiml())
    const state = call.forwarding
    const outcome = DIAL_OUTCOMES[form.get('DialCallStatus') ?? ''] ?? 'failed'
    const seconds = Math.max(0, Number.parseInt(form.get('DialCallDuration') ?? '0', 10) || 0)
    const callerGone = FINAL.has(form.get('CallStatus') ?? '')
    if (outcome === 'answered' || callerGone) {
      const reason = outcome === 'answered' ? 'call_transfer' : 'user_hangup'
      await endCall(db, deps, call.user_id, call.id, toCallEnd(config, call.id, state, { reason, forwarding: { outcome, seconds } }))
      return twiml(reply, hangupTwiml())
    }
    const transfers = settledTransfers(state, outcome)
    const { token, hash, expires } = newStreamToken()
    if (!await takeBack(db, call.id, { ...state, transfers }, hash, expires)) return twiml(reply, hangupTwiml())
    return twiml(reply, connectTwiml(config, token))
  })

  // Warm transfers (telephony/warm.ts): the call to the person. Its webhooks name the call in their URL; only the
  // account of the call's number may sign them, and they must be about the call placed to the person.

  /** The call of a webhook about the call to the person, with its conversation while that transfer still runs. */
  async function signedLeg (request: FastifyRequest, callId: string) {
    const form = formOf(request)
    const found = await findCallRow(db, callId)
    if (found?.carrier !== 'twilio') {
      await verifyNamed(request, form)
      callSidOf(form)
      throw notFound('call')
    }
    verify(request, form, await callAccount(found))
    const legSid = callSidOf(form)
    const warm = found.call_status === 'started' ? found.forwarding?.warm : undefined
    const state = warm !== undefined && (warm.call_sid === null || warm.call_sid === legSid) ? found.forwarding! : undefined
    return { form, call: found, legSid, state }
  }

  /** Hangs up the call to the person (a ringing one is cancelled). */
  async function cancelLeg (call: CallRow, legSid: string): Promise<void> {
    try {
      const twilio = await callTwilio(deps, call)
      await twilio?.calls.update(legSid, { Status: 'completed' })
    } catch (err) {
      log.warn({ err, callId: call.id }, 'the call to the person of a warm transfer could not be ended')
    }
  }

  const legQuery = Type.Object({ call_id: ObjectId })

  app.post(TELEPHONY_PATHS.transferAnswer, {
    config: KEYLESS,
    schema: {
      ...webhook,
      summary: "A warm transfer: the person's answer to the summary (<Gather>)",
      description: 'Digits 1 or a spoken yes: the person joins the call\'s conference and is connected to the caller. Anything else hangs up their call, and the agent takes the caller back.',
      querystring: legQuery,
      response: { ...errors(400, 403, 404) }
    }
  }, async (request, reply) => {
    const { form, call, legSid, state } = await signedLeg(request, request.query.call_id)
    if (state === undefined || !accepted(form.get('Digits'), form.get('SpeechResult'))) return twiml(reply, hangupTwiml())
    if (!await acceptWarm(db, call.id, legSid)) return twiml(reply, hangupTwiml())
    return twiml(reply, conferenceTwiml({ name: conferenceName(call.id), starts: true }))
  })

  app.post(TELEPHONY_PATHS.transferStatus, {
    config: KEYLESS,
    schema: {
      ...webhook,
      summary: 'A warm transfer: the status callback of the call to the person',
      description: 'Its end settles the transfer: taken, the call ends `call_transfer` with its minutes charged as forwarding; declined, not answered, busy or failed, the agent takes the caller back on a new stream and says so. The leg is recorded in the transfer\'s `legs`.',
      querystring: legQuery,
      response: { 204: Type.Null(), ...errors(400, 403, 404) }
    }
  }, async (request, reply) => {
    const { form, call, legSid, state } = await signedLeg(request, request.query.call_id)
    const status = form.get('CallStatus') ?? ''
    if (state?.warm === undefined || !FINAL.has(status)) return reply.code(204).send(null)
    const to = state.transfers.at(-1)?.to_number ?? ''
    const seconds = Math.max(0, Number.parseInt(form.get('CallDuration') ?? '0', 10) || 0)
    if (state.warm.accepted_at !== null) {
      const ended = withLeg(state, { to, outcome: 'answered', seconds })
      await endCall(db, deps, call.user_id, call.id, toCallEnd(config, call.id, ended, { reason: 'call_transfer', forwarding: { outcome: 'answered', seconds } }))
      return reply.code(204).send(null)
    }
    const outcome = status === 'completed' ? 'declined' : DIAL_OUTCOMES[status] ?? 'failed'
    const back = withLeg(state, { to, outcome, seconds })
    const { token, hash, expires } = newStreamToken()
    if (!await takeBackWarm(db, call.id, legSid, { ...back, transfers: settledTransfers(back, outcome) }, hash, expires)) return reply.code(204).send(null)
    try {
      // The caller leaves the conference for a new stream: the agent takes them back (the caller's own status callback ends a call gone meanwhile).
      const twilio = await callTwilio(deps, call)
      await twilio?.calls.update(call.carrier_call_id!, { Twiml: connectTwiml(config, token) })
    } catch (err) {
      log.warn({ err, callId: call.id }, 'the caller of a warm transfer nobody took could not be taken back')
    }
    return reply.code(204).send(null)
  })

  // Answering-machine detection (docs/voice.md, "Voicemail"): Twilio's AsyncAmdStatusCallback of an outbound call
  // placed with MachineDetection=DetectMessageEnd. The verdict is kept with the call and signalled to its session on
  // whichever process holds the stream. https://www.twilio.com/docs/voice/answering-machine-detection
  app.post(TELEPHONY_PATHS.amd, {
    config: KEYLESS,
    schema: {
      ...webhook,
      summary: "Twilio's answering-machine detection result of an outbound call",
      description: 'AnsweredBy `human`, `machine_end_beep`, `machine_end_silence`, `machine_end_other`, `fax` or `unknown` (`machine_start` is kept, and acted on only once the greeting ends). The call\'s session acts on it: a person (or unknown) hears the agent once they said hello; on a machine the agent hangs up or leaves its message after the beep (the agent\'s voicemail_settings). Answers 404 for a call that is not here.',
      querystring: Type.Object({ call_id: ObjectId }),
      response: { 204: Type.Null(), ...errors(400, 403, 404) }
    }
  }, async (request, reply) => {
    const { form, call } = await signedCall(request, request.query.call_id)
    const given = form.get('AnsweredBy') ?? ''
    if (!ANSWERED_BY.has(given)) throw new HttpError(400, 'bad_request', `AnsweredBy must be one of ${[...ANSWERED_BY].join(', ')}`)
    if (call.direction === 'outbound' && await recordAnsweredBy(db, call.id, given)) {
      const answeredBy = answeredByOf(given)
      if (answeredBy !== undefined) await signalCall(db, call.id, { type: 'answered_by', answered_by: answeredBy })
    }
    return reply.code(204).send(null)
  })

  // Anyone may open the stream: its place is taken before the upgrade, and it must `start` with a valid token in time.
  app.get(TELEPHONY_PATHS.stream, { websocket: true, onRequest: streams.admit, schema: { hide: true } }, (socket, request) => {
    acceptCarrierStream(socket, twilioMedia, deps, live, () => { streams.started(request) })
  })
}
