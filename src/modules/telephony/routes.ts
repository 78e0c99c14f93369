import type { FastifyReply, FastifyRequest } from 'fastify'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { HttpError, notFound, PG } from '../../http/errors.ts'
import { errors, ObjectId } from '../../http/schemas.ts'
import { QUEUES, sendJob } from '../../jobs/queues.ts'
import { findAgent } from '../agents/queries.ts'
import { endCall, startCall } from '../calls/lifecycle.ts'
import { findCallRow, type CallRow } from '../calls/queries.ts'
import { ignoreEnded } from '../calls/workers.ts'
import { findNumberAnywhere } from '../phone-numbers/queries.ts'
import type { TwilioAccount } from '../phone-numbers/carriers/twilio.ts'
import type { LiveCalls } from '../voice/live-calls.ts'
import type { StreamAdmission } from '../voice/streams.ts'
import { forwardedCallEnd, settledTransfers, type Forwarding } from '../voice/session.ts'
import { CALL_SID } from '../voice/transports/twilio.ts'
import { webhookAccount } from './accounts.ts'
import { connectTwiml, FINAL, newStreamToken, TELEPHONY_PATHS, UNANSWERED, type TelephonyDeps } from './calls.ts'
import { findCarrierCall, setCarrierCallId, setStreamToken, takeBack } from './queries.ts'
import { signatureValid } from './signature.ts'
import { acceptTwilioStream } from './stream.ts'
import { hangupTwiml, rejectTwiml } from './twiml.ts'

// Twilio's webhooks and media stream (docs/voice.md, "Phone calls"). Every request must carry a valid
// X-Twilio-Signature of the account it names (403 otherwise) before anything is read or changed; Twilio's
// retries of a webhook find what the first one did and answer the same.

const TAGS = ['telephony']

/** A <Dial>'s DialCallStatus as a transfer's outcome. */
const DIAL_OUTCOMES: Record<string, string> = { completed: 'answered', answered: 'answered', ...UNANSWERED }

const FORM_LIMIT = 64 * 1024

const forbidden = () => new HttpError(403, 'invalid_signature', 'the request is not signed by Twilio for the account it names (X-Twilio-Signature)')

const CallIdQuery = Type.Object({ call_id: Type.Optional(ObjectId) })

export const telephonyRoutes: FastifyPluginAsyncTypebox<TelephonyDeps & { live: LiveCalls, streams: StreamAdmission }> = async (app, { live, streams, ...deps }) => {
  const { db, config, log } = deps

  // Twilio posts forms. Any other body is read as nothing, so that it fails the signature check (403), not the parser.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT }, (_request, body, done) => {
    done(null, new URLSearchParams(body as string))
  })
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: FORM_LIMIT }, (_request, _body, done) => { done(null, undefined) })

  /** The signed form of a webhook and the account that signed it; 403 for anything else. */
  async function signed (request: FastifyRequest): Promise<{ form: URLSearchParams, account: TwilioAccount, callSid: string }> {
    const form = request.body instanceof URLSearchParams ? request.body : undefined
    const account = form === undefined ? undefined : await webhookAccount(db, config, form.get('AccountSid') ?? '')
    // The URL Twilio requested: this server's public address and the path and query as they arrived.
    const url = config.publicBaseUrl + request.url
    const signature = request.headers['x-twilio-signature']
    if (form === undefined || account === undefined || !signatureValid(account.authToken, url, form, typeof signature === 'string' ? signature : undefined)) {
      throw forbidden()
    }
    const callSid = form.get('CallSid') ?? ''
    if (!CALL_SID.test(callSid)) throw new HttpError(400, 'bad_request', 'CallSid must be a Twilio call sid')
    return { form, account, callSid }
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
    schema: {
      ...webhook,
      summary: "Twilio's voice webhook of a number",
      description: 'Set on every Twilio number bought or imported here. Answers TwiML that connects the call to the number\'s inbound agent through a media stream; a number without an active inbound agent is rejected.',
      response: { ...errors(400, 403) }
    }
  }, async (request, reply) => {
    const { form, account, callSid } = await signed(request)
    const existing = await findCarrierCall(db, callSid)
    if (existing !== undefined) return await streamAgain(reply, existing)
    const to = form.get('To') ?? ''
    const from = form.get('From') ?? ''
    const number = await findNumberAnywhere(db, to)
    if (number === undefined || number.carrier !== 'twilio' || number.carrier_account_id !== account.accountSid) {
      log.warn({ to, accountSid: account.accountSid }, 'a Twilio call to a number that is not here was rejected')
      return twiml(reply, rejectTwiml())
    }
    const agent = number.inbound_agent_id === null ? undefined : await findAgent(db, number.user_id, number.inbound_agent_id)
    if (config.callRuntime !== 'voice' || agent === undefined || agent.status !== 'active') {
      log.warn({ to, runtime: config.callRuntime, agent: agent?.id ?? null }, 'a Twilio call was rejected: the number has no active inbound agent, or the voice runtime is off')
      return twiml(reply, rejectTwiml())
    }
    const { token, hash, expires } = newStreamToken()
    try {
      await db.transaction().execute(async (trx) => await startCall(trx, deps, agent, {
        call_type: 'phone',
        direction: 'inbound',
        call_from: from,
        call_to: to,
        runtime: 'voice',
        carrier: 'twilio',
        carrier_call_id: callSid,
        access_token_hash: hash,
        access_token_expires_at: expires
      }))
    } catch (err) {
      // Twilio's retry of this webhook, arriving while the first was answered.
      if ((err as { code?: string }).code !== PG.UNIQUE_VIOLATION) throw err
      return await streamAgain(reply, (await findCarrierCall(db, callSid))!)
    }
    return twiml(reply, connectTwiml(config, token))
  })

  /** The call a webhook is about: by the call id in its URL (outbound calls, dial results) or by Twilio's CallSid. */
  async function callOf (callId: string | undefined, callSid: string): Promise<CallRow> {
    const call = callId === undefined ? await findCarrierCall(db, callSid) : await findCallRow(db, callId)
    if (call === undefined || call.carrier !== 'twilio' || (call.carrier_call_id !== null && call.carrier_call_id !== callSid)) throw notFound('call')
    return call
  }

  app.post(TELEPHONY_PATHS.status, {
    schema: {
      ...webhook,
      summary: "Twilio's status callback of a call",
      description: 'A call that ends before it was answered (busy, no-answer, failed, canceled) ends `failed` with that reason and is charged nothing. Answers 404 for a call that is not here, without changing anything.',
      querystring: CallIdQuery,
      response: { 204: Type.Null(), ...errors(400, 403, 404) }
    }
  }, async (request, reply) => {
    const { form, callSid } = await signed(request)
    const call = await callOf(request.query.call_id, callSid)
    const status = form.get('CallStatus') ?? ''
    if (call.call_status !== 'started' || !FINAL.has(status)) return reply.code(204).send(null)
    if (call.carrier_call_id === null) await setCarrierCallId(db, call.id, callSid)
    if (call.forwarding !== null) {
      // The caller hung up while their call was being put through.
      const state = call.forwarding as unknown as Forwarding
      const last = state.transfers.at(-1)
      const outcome = last === undefined || last.outcome === 'dialing' ? 'canceled' : last.outcome
      await endCall(db, deps, call.user_id, call.id, forwardedCallEnd(config, call.id, state, { reason: 'user_hangup', outcome, seconds: 0 })).catch(ignoreEnded)
    } else if (call.joined_at === null) {
      // Never connected to a stream: not answered, or answered and gone before the stream opened.
      await endCall(db, deps, call.user_id, call.id, { outcome: 'failed', disconnection_reason: UNANSWERED[status] ?? 'stream_not_connected' }).catch(ignoreEnded)
    } else {
      // A call with a live stream is ended by its session (the stream's stop or drop at once, a silent stream
      // after the stream time-out); should its process have died, this job ends it once the session had its time.
      const after = new Date(Date.now() + 2 * config.voice.streamTimeoutMs)
      await sendJob(deps.boss, undefined, QUEUES.carrierEnded, { callId: call.id, status }, { startAfter: after })
    }
    return reply.code(204).send(null)
  })

  app.post(TELEPHONY_PATHS.dialResult, {
    schema: {
      ...webhook,
      summary: "How a forwarding's <Dial> went",
      description: 'Answered: the call ends when the person hangs up, with the forwarding minutes charged. Not answered: the agent takes the call back on a new stream and says so.',
      querystring: Type.Object({ call_id: ObjectId }),
      response: { ...errors(400, 403, 404) }
    }
  }, async (request, reply) => {
    const { form, callSid } = await signed(request)
    const call = await callOf(request.query.call_id, callSid)
    if (call.call_status !== 'started' || call.forwarding === null) return twiml(reply, hangupTwiml())
    const state = call.forwarding as unknown as Forwarding
    const outcome = DIAL_OUTCOMES[form.get('DialCallStatus') ?? ''] ?? 'failed'
    const seconds = Math.max(0, Number.parseInt(form.get('DialCallDuration') ?? '0', 10) || 0)
    const callerGone = FINAL.has(form.get('CallStatus') ?? '')
    if (outcome === 'answered' || callerGone) {
      const reason = outcome === 'answered' ? 'call_transfer' : 'user_hangup'
      await endCall(db, deps, call.user_id, call.id, forwardedCallEnd(config, call.id, state, { reason, outcome, seconds })).catch(ignoreEnded)
      return twiml(reply, hangupTwiml())
    }
    const transfers = settledTransfers(state, outcome)
    const { token, hash, expires } = newStreamToken()
    if (!await takeBack(db, call.id, { ...state, transfers }, hash, expires)) return twiml(reply, hangupTwiml())
    return twiml(reply, connectTwiml(config, token))
  })

  // Anyone may open the stream: its place is taken before the upgrade, and it must `start` with a valid token in time.
  app.get(TELEPHONY_PATHS.stream, { websocket: true, onRequest: streams.admit, schema: { hide: true } }, (socket, request) => {
    acceptTwilioStream(socket, deps, live, () => { streams.started(request) })
  })
}
