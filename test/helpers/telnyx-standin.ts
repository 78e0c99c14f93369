import { generateKeyPairSync, randomBytes, randomUUID, sign, type KeyObject } from 'node:crypto'
import http from 'node:http'
import { performance } from 'node:perf_hooks'
import type { Test } from 'tap'
import { WebSocket } from 'ws'
import { FRAME_MS, mulawDecode, mulawEncode, resample, SAMPLE_RATE } from '../../src/modules/voice/audio.ts'
import { poll } from './poll.ts'
import { beep } from './twilio-voice.ts'
import { speech } from './voice-client.ts'

// Telnyx as the server under test meets it, written from Telnyx's public reference (developers.telnyx.com:
// api-reference for numbers and call commands, callbacks, the media streaming WebSocket): API v2 with a Bearer
// key (numbers, POST /v2/calls, /actions/<command>), Call Control webhooks signed with an Ed25519 key pair made
// here, and a media stream client that plays the caller (PCMU 8 kHz). All on loopback; the public URLs the
// server hands out reach it through `route`, as through a tunnel.

const MEDIA_RATE = 8000
const FRAME_BYTES = MEDIA_RATE * FRAME_MS / 1000

/** How the phone at a number behaves when dialled or transferred to. */
export type Callee = {
  answer: 'answer'
  /** talks this long after answering (a warm transfer's person: after the bridge), then hangs up (a transfer's person); default: until the test ends it */
  talkMs?: number
  /** a warm transfer's person: the key pressed when gather_using_speak asks ('' presses none: the gather times out) */
  keys?: string
  /** a warm transfer's person hangs up as they press the key (the bridge finds their call gone) */
  leaves?: boolean
}
  /** POST /v2/calls refuses the number (422) */
  | { answer: 'invalid' }
  | { answer: 'busy' | 'no-answer' | 'rejected' }
  /** rings until the leg is hung up */
  | { answer: 'rings' }

/** valid: signed now with the account key; none: no signature headers; wrong: another key; stale: signed an hour ago. */
export type Signing = 'valid' | 'none' | 'wrong' | 'stale'

export interface StandinCall {
  callControlId: string
  direction: 'incoming' | 'outgoing'
  from: string
  to: string
  clientState: string | undefined
  webhookUrl: string
  /** The Call Control application the call is on, when not the installation's (a PBX's call to a SIP subdomain). */
  connectionId?: string
  alive: boolean
  streams: TelnyxStream[]
  /** The commands the server sent for this call, in order. */
  commands: Array<{ command: string, body: any }>
  /** What its party did and which machine webhooks went out (answering-machine detection; a dialled leg with a party). */
  screening?: Screening
  answered?: boolean
  /** The audio URL playback_start plays (looped) until playback_stop. */
  playing?: string
  /** The call bridged with this one: either hanging up hangs up the other. */
  bridged?: StandinCall
  /** A call of the second account (the tenant's), on one of its Call Control applications; commands need its API key. */
  account?: { name: 'tenant', connectionId: string }
}

export interface TelnyxStream {
  socket: WebSocket
  token: string | undefined
  /** Agent audio received (16 kHz PCM16 frames), with performance.now() of arrival. */
  frames: Array<{ at: number, pcm: Int16Array }>
  messages: any[]
  closed: Promise<{ code: number, reason: string }>
  sendAudio: (pcm16k: Int16Array) => void
  /** The caller presses keys: one `dtmf` frame a key. */
  pressKeys: (digits: string) => void
  /** Telnyx's `stop` (the call ended or the stream was stopped), then the close. */
  stop: () => void
}

export interface TelnyxStandIn {
  url: string
  apiKey: string
  connectionId: string
  /** The account's public key as the portal shows it (base64 of 32 bytes). */
  publicKey: string
  /** Where a public origin is reached (the server's loopback address). */
  route: (publicOrigin: string, localOrigin: string) => void
  /** The connection's webhook URL (set in the portal: incoming calls' first webhook goes there). */
  webhookUrl: string
  offer: (numbers: Array<{ phone_number: string, rate_center?: string, state?: string }>) => void
  owned: Map<string, { id: string, phone_number: string, connection_id: string | null }>
  calls: Map<string, StandinCall>
  /** How a number behaves when called; default: answers. */
  callees: Map<string, Callee>
  /** Who picks up at a number that answers a dial (a person or a machine; see Party); default: nobody speaks. */
  parties: Map<string, Party>
  /** Posts a signed webhook (with the tenant account's key: `as` 'tenant'); answers the server's status and body. */
  post: (url: string, eventType: string, payload: Record<string, unknown>, signing?: Signing, as?: 'tenant') => Promise<{ status: number, body: string }>
  /** Someone calls `to`: call.initiated (incoming) to the connection's webhook URL. */
  dialIn: (from: string, to: string) => Promise<{ call: StandinCall, status: number }>
  /** The call's n-th media stream, once open. */
  stream: (call: StandinCall, n?: number) => Promise<TelnyxStream>
  /** The caller (or callee) hangs up: the stream stops and call.hangup follows. */
  hangup: (call: StandinCall, cause?: string) => Promise<void>

  // SIP trunks (connect-to-sip on Telnyx; the block at the end of this file)
  /** Call Control applications made through the API (the installation's own, connectionId, is not among them). */
  applications: Map<string, SipApplication>
  credentialConnections: Map<string, CredentialConnection>
  /** The requests to those two resources, in order. */
  sipRequests: Array<{ method: string, path: string, body: any }>
  /** PBXs that Telnyx's calls to sip:<user>@<host[:port]> reach, by host[:port]: the credentials each challenges for. */
  sipEndpoints: Map<string, { username: string, password: string }>
  /** A PBX sends an INVITE for `to` (sip:<user>@<subdomain>.sip.telnyx.com), answering Telnyx's challenge with `credentials`. */
  pbxInvite: (to: string, from: string, credentials: { username: string, password: string } | undefined) => Promise<PbxInvite>
  /** A second account: a tenant's own Telnyx account. */
  tenant: TenantAccount
}

/** A second Telnyx account, with its own API key, key pair, numbers and Call Control applications. */
export interface TenantAccount {
  apiKey: string
  publicKey: string
  owned: Map<string, { id: string, phone_number: string, connection_id: string | null }>
  applications: Map<string, { id: string, application_name: string, webhook_event_url: string }>
  /** Every API request made with this account's key, in order. */
  requests: Array<{ method: string, path: string, body: any }>
  /** Someone calls `to`, a number of this account: call.initiated to its application's webhook URL. */
  dialIn: (from: string, to: string) => Promise<{ call: StandinCall, status: number }>
}

export interface SipApplication { id: string, application_name: string, webhook_event_url: string, webhook_api_version: string, inbound: { sip_subdomain?: string, sip_subdomain_receive_settings?: string } }
export interface CredentialConnection { id: string, connection_name: string, user_name: string, password: string, active: boolean, sip_uri_calling_preference: string, outbound: Record<string, unknown> }
/** Refused by Telnyx (no webhook), or a call whose call.initiated went to the application's webhook. */
export type PbxInvite = { refused: 401 | 403 | 404 } | { refused?: undefined, call: StandinCall, status: number }

const ccid = () => 'v3:' + randomBytes(24).toString('base64url')

// --- Answering-machine detection ---
// https://developers.telnyx.com/docs/voice/programmable-voice/answering-machine-detection: a dial with
// `answering_machine_detection` gets, once answered, call.machine.detection.ended (`human`, `machine`, `not_sure`) and,
// for a machine, call.machine.greeting.ended (`beep_detected`, or `ended` for greeting_end and detect_words; detect_beep
// sends it only for a beep); `premium` sends call.machine.premium.detection.ended (`human_residence`, `machine`, …) and
// call.machine.premium.greeting.ended (`beep_detected`) instead. Payload shapes from team-telnyx/telnyx-node
// src/resources/webhooks.ts. Without detection asked for, the party is heard and no machine webhook goes out.

/** Who picks up a dialled call (heard on its stream from `pickupMs` after it opens, default 300). */
export type Party =
  | { kind: 'human', /** says hello for this long (0: says nothing) */ helloMs?: number, /** the verdict this long after the hello ends (default 0) */ detectMs?: number, pickupMs?: number }
  | { kind: 'machine', /** the recorded greeting's length */ greetingMs: number, /** the beep's length (default 400; 0: no beep) */ beepMs?: number, pickupMs?: number }

/** What the party did and when (performance.now()), the detection the dial asked for, and the machine webhooks sent. */
export interface Screening {
  detection: { mode: string, config: Record<string, unknown> | undefined } | undefined
  helloEndedAt?: number
  beepEndedAt?: number
  /** when the last machine webhook was sent */
  verdictAt?: number
  sent: Array<{ type: string, result: string, status: number }>
}

const MODES = new Set(['premium', 'detect', 'detect_beep', 'detect_words', 'greeting_end', 'disabled'])

/** The detection a dial asks for (undefined: none); a string for a value Telnyx refuses. */
export function detectionOf (body: any): Screening['detection'] | string {
  const mode = body.answering_machine_detection
  if (mode === undefined || mode === 'disabled') return undefined
  if (!MODES.has(mode)) return `invalid answering_machine_detection: ${mode}`
  const config = body.answering_machine_detection_config
  if (config !== undefined && (typeof config !== 'object' || config === null || Object.values(config).some((v) => typeof v !== 'number' && typeof v !== 'string'))) return 'invalid answering_machine_detection_config'
  return { mode, config }
}

/** Plays 16 kHz PCM on a stream in real time, 20 ms a frame. */
async function play (stream: TelnyxStream, pcm: Int16Array): Promise<void> {
  const samples = SAMPLE_RATE * FRAME_MS / 1000
  const start = performance.now()
  for (let offset = 0, n = 0; offset < pcm.length; offset += samples, n++) {
    if (stream.socket.readyState !== WebSocket.OPEN) return
    stream.sendAudio(pcm.subarray(offset, offset + samples))
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + (n + 1) * FRAME_MS - performance.now())))
  }
}

/** Plays the party on the dialled call's stream and sends what detection makes of it (`send`: a signed webhook of the call). */
async function screen (call: StandinCall, stream: TelnyxStream, party: Party, send: (type: string, result: string) => Promise<number>): Promise<void> {
  const screening = call.screening!
  const mode = screening.detection?.mode
  const verdict = async (type: string, result: string) => {
    if (mode === undefined || !call.alive) return
    screening.verdictAt = performance.now()
    screening.sent.push({ type, result, status: await send(type, result) })
  }
  const premium = mode === 'premium' ? '.premium' : ''
  if (stream.socket.readyState === WebSocket.CONNECTING) await new Promise((resolve) => stream.socket.once('open', resolve))
  await new Promise((resolve) => setTimeout(resolve, party.pickupMs ?? 300))
  if (party.kind === 'human') {
    const helloMs = party.helloMs ?? 600
    if (helloMs > 0) {
      await play(stream, speech(helloMs, 0))
      screening.helloEndedAt = performance.now()
      await play(stream, new Int16Array(16 * 800))
    }
    await new Promise((resolve) => setTimeout(resolve, party.detectMs ?? 0))
    await verdict(`call.machine${premium}.detection.ended`, premium === '' ? 'human' : 'human_residence')
    return
  }
  // A machine is known while its greeting plays; the greeting's end is known at the beep.
  const known = new Promise((resolve) => setTimeout(resolve, Math.min(party.greetingMs, 1000))).then(async () => { await verdict(`call.machine${premium}.detection.ended`, 'machine') })
  await play(stream, speech(party.greetingMs, 0))
  const beepMs = party.beepMs ?? 400
  if (beepMs > 0) await play(stream, beep(beepMs))
  screening.beepEndedAt = performance.now()
  await known
  if (mode === 'detect' || (beepMs === 0 && (mode === 'detect_beep' || mode === 'premium'))) return
  await verdict(`call.machine${premium}.greeting.ended`, beepMs > 0 ? 'beep_detected' : 'ended')
}
// --- end of answering-machine detection ---

export async function startTelnyxStandIn (t: Test): Promise<TelnyxStandIn> {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  const other = generateKeyPairSync('ed25519').privateKey
  const apiKey = 'KEY' + randomBytes(16).toString('hex')
  const connectionId = String(Date.now())
  const routes = new Map<string, string>()
  const offered = new Map<string, { phone_number: string, rate_center?: string, state?: string }>()
  const owned: TelnyxStandIn['owned'] = new Map()
  const calls = new Map<string, StandinCall>()
  const callees = new Map<string, Callee>()
  const parties = new Map<string, Party>()
  const pending = new Set<Promise<unknown>>()
  let webhookUrl = ''

  const local = (url: string): string => {
    const asked = new URL(url)
    const origin = routes.get(asked.origin.replace(/^ws/, 'http'))
    if (origin === undefined) throw new Error(`no route to ${asked.origin}`)
    return origin.replace(/^http/, asked.protocol.startsWith('ws') ? 'ws' : 'http') + asked.pathname + asked.search
  }

  async function post (url: string, eventType: string, payload: Record<string, unknown>, signing: Signing = 'valid', as?: 'tenant') {
    const body = JSON.stringify({ data: { record_type: 'event', event_type: eventType, id: randomUUID(), occurred_at: new Date().toISOString(), payload }, meta: { attempt: 1, delivered_to: url } })
    const timestamp = String(Math.floor(Date.now() / 1000) - (signing === 'stale' ? 3600 : 0))
    const key: KeyObject = signing === 'wrong' ? other : as === 'tenant' ? tenantKeys.privateKey : privateKey
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    if (signing !== 'none') {
      headers['telnyx-timestamp'] = timestamp
      headers['telnyx-signature-ed25519'] = sign(null, Buffer.from(`${timestamp}|${body}`), key).toString('base64')
    }
    const res = await fetch(local(url), { method: 'POST', headers, body })
    return { status: res.status, body: await res.text() }
  }

  /** Events go out after the command's answer, as Telnyx's do. */
  const later = (work: () => Promise<unknown>) => {
    const run = new Promise((resolve) => setImmediate(resolve)).then(work).catch((err: unknown) => { t.fail(`the stand-in failed: ${(err as Error).stack}`) })
    pending.add(run)
    void run.finally(() => pending.delete(run))
  }

  const event = (call: StandinCall, type: string, extra: Record<string, unknown> = {}) => post(call.webhookUrl, type, {
    call_control_id: call.callControlId, connection_id: call.account?.connectionId ?? call.connectionId ?? connectionId, call_leg_id: randomUUID(), call_session_id: randomUUID(),
    client_state: call.clientState, from: call.from, to: call.to, direction: call.direction, state: type.slice(5), ...extra
  }, 'valid', call.account?.name)

  function openStream (call: StandinCall, body: any) {
    const token: string | undefined = body.stream_auth_token
    const socket = new WebSocket(local(body.stream_url), { headers: token === undefined ? {} : { 'x-telnyx-streaming-auth-token': token } })
    const streamId = randomUUID()
    let sequence = 0
    let chunk = 0
    const send = (message: Record<string, unknown>) => { if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ ...message, sequence_number: String(++sequence) })) }
    const stream: TelnyxStream = {
      socket,
      token,
      frames: [],
      messages: [],
      closed: new Promise((resolve) => socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() }))),
      sendAudio (pcm16k) {
        const bytes = mulawEncode(resample(pcm16k, SAMPLE_RATE, MEDIA_RATE))
        for (let offset = 0; offset < bytes.length; offset += FRAME_BYTES) {
          const frame = Buffer.alloc(FRAME_BYTES, 0xff)
          bytes.copy(frame, 0, offset, offset + FRAME_BYTES)
          send({ event: 'media', stream_id: streamId, media: { track: 'inbound', chunk: String(++chunk), timestamp: String(chunk * FRAME_MS), payload: frame.toString('base64') } })
        }
      },
      pressKeys (digits) {
        for (const digit of digits) send({ event: 'dtmf', stream_id: streamId, occurred_at: new Date().toISOString(), dtmf: { digit } })
      },
      stop () {
        send({ event: 'stop', stream_id: streamId, stop: { call_control_id: call.callControlId } })
        socket.close(1000)
      }
    }
    socket.on('open', () => {
      send({ event: 'connected', version: '1.0.0', ...(token !== undefined && { connected: { 'x-telnyx-streaming-auth-token': token } }) })
      send({ event: 'start', stream_id: streamId, start: { call_control_id: call.callControlId, client_state: call.clientState, from: call.from, to: call.to, media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 } } })
    })
    socket.on('message', (data) => {
      const message = JSON.parse(data.toString())
      stream.messages.push(message)
      if (message.event === 'media') stream.frames.push({ at: performance.now(), pcm: resample(mulawDecode(Buffer.from(message.media.payload, 'base64')), MEDIA_RATE, SAMPLE_RATE) })
      // Played at once: the mark comes back (the reference: at once when nothing is queued).
      if (message.event === 'mark') send({ event: 'mark', stream_id: streamId, mark: { name: message.mark.name } })
    })
    socket.on('error', () => {})
    call.streams.push(stream)
  }

  async function hangup (call: StandinCall, cause = 'normal_clearing') {
    if (!call.alive) return
    call.alive = false
    call.playing = undefined
    for (const stream of call.streams) if (stream.socket.readyState === WebSocket.OPEN) stream.stop()
    await event(call, 'call.hangup', { hangup_cause: cause, hangup_source: 'caller', sip_hangup_cause: '200' })
    // A bridge hangs up the other leg (bridge's default when park_after_unbridge is not set).
    if (call.bridged !== undefined) await hangup(call.bridged)
  }

  /** A new outgoing leg (a dial or a transfer) rings `to` and does what its callee does. */
  function ring (call: StandinCall, body: any) {
    calls.set(call.callControlId, call)
    later(async () => {
      await event(call, 'call.initiated')
      if (await sip.refusedDial(call)) return
      const callee = callees.get(call.to) ?? { answer: 'answer' }
      if (callee.answer === 'rings' || callee.answer === 'invalid') return
      if (callee.answer !== 'answer') {
        call.alive = false
        const cause = { busy: 'user_busy', 'no-answer': 'timeout', rejected: 'call_rejected' }[callee.answer]
        await event(call, 'call.hangup', { hangup_cause: cause, hangup_source: 'callee' })
        return
      }
      call.answered = true
      await event(call, 'call.answered')
      if (body.stream_url !== undefined) openStream(call, body)
      const party = parties.get(call.to)
      if (party !== undefined && call.screening !== undefined && call.streams.length > 0) {
        await screen(call, call.streams.at(-1)!, party, async (type, result) => (await post(call.webhookUrl, type, {
          call_control_id: call.callControlId, call_leg_id: randomUUID(), call_session_id: randomUUID(), client_state: call.clientState, connection_id: connectionId, from: call.from, to: call.to, result
        })).status)
      }
      if (callee.talkMs !== undefined && callee.keys === undefined) {
        await new Promise((resolve) => setTimeout(resolve, callee.talkMs))
        await hangup(call)
      }
    })
  }

  // Warm transfers: hold music, the announcement with its one key (the person's Callee.keys), the bridge. From
  // developers.telnyx.com/api-reference/call-commands (play-audio-url, stop-audio-playback, gather-using-speak,
  // bridge-calls) and the callbacks call.playback.started, call.gather.ended (digits, status), call.bridged.
  /** Acts a warm transfer's command; false when it answered an error itself. */
  function warmCommand (call: StandinCall, command: string, body: any, res: http.ServerResponse): boolean {
    if (command === 'playback_start') {
      if (typeof body.audio_url !== 'string') {
        error(res, 422, '90061', 'audio_url or media_name is required'); return false
      }
      call.playing = body.audio_url
      later(async () => await event(call, 'call.playback.started', { media_url: body.audio_url, overlay: false }))
    } else if (command === 'playback_stop') {
      call.playing = undefined
    } else if (command === 'gather_using_speak') {
      if (typeof body.payload !== 'string' || typeof body.voice !== 'string' || body.payload.length > 3000) { error(res, 422, '90061', 'payload (at most 3,000 characters) and voice are required'); return false }
      const callee = callees.get(call.to)
      const keys = callee?.answer === 'answer' ? callee.keys : undefined
      // A person without keys never ends the gather.
      if (keys !== undefined) {
        const status = keys === '' ? 'timeout' : String(body.valid_digits ?? '0123456789*#').includes(keys) ? 'valid' : 'invalid'
        later(async () => {
          if (callee?.answer === 'answer' && callee.leaves === true) call.alive = false
          await event(call, 'call.gather.ended', { digits: keys, status })
          if (!call.alive) await event(call, 'call.hangup', { hangup_cause: 'normal_clearing', hangup_source: 'callee' })
        })
      }
    } else if (command === 'bridge') {
      const other = calls.get(body.call_control_id)
      if (other === undefined || !other.alive) { error(res, 422, '90018', 'the call to bridge with has ended'); return false }
      call.bridged = other
      other.bridged = call
      later(async () => {
        await event(call, 'call.bridged')
        await event(other, 'call.bridged')
        // The person talks, then hangs up.
        for (const leg of [call, other]) {
          const callee = callees.get(leg.to)
          if (leg.direction === 'outgoing' && callee?.answer === 'answer' && callee.talkMs !== undefined) {
            await new Promise((resolve) => setTimeout(resolve, callee.talkMs))
            await hangup(leg)
          }
        }
      })
    }
    return true
  }

  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
  }
  const error = (res: http.ServerResponse, status: number, code: string, detail: string) => json(res, status, { errors: [{ code, title: detail, detail }] })

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://standin')
      const body = chunks.length === 0 ? {} : JSON.parse(Buffer.concat(chunks).toString())
      const q = (name: string) => url.searchParams.get(name) ?? undefined
      const path = url.pathname
      const byTenant = req.headers.authorization === `Bearer ${tenantApiKey}`
      if (byTenant && tenantRequest(req.method ?? '', path, q, body, res)) return
      if (!byTenant && req.headers.authorization !== `Bearer ${apiKey}`) return error(res, 401, '10009', 'Authentication failed')
      if (req.method === 'GET' && path === '/v2/available_phone_numbers') {
        const found = [...offered.values()].filter((n) => (q('filter[national_destination_code]') === undefined || n.phone_number.slice(2, 5) === q('filter[national_destination_code]')) &&
          (q('filter[phone_number][contains]') === undefined || n.phone_number.includes(q('filter[phone_number][contains]')!)))
        return json(res, 200, {
          data: found.slice(0, Number(q('filter[limit]') ?? 20)).map((n) => ({
            record_type: 'available_phone_number', phone_number: n.phone_number, region_information: [{ region_type: 'rate_center', region_name: n.rate_center }, { region_type: 'state', region_name: n.state }]
          }))
        })
      }
      if (req.method === 'POST' && path === '/v2/number_orders') {
        const wanted: string = body.phone_numbers?.[0]?.phone_number
        if (!offered.has(wanted)) return error(res, 422, '85001', `${wanted} is not available`)
        offered.delete(wanted)
        const id = String(BigInt(Date.now()) * 1000n + BigInt(owned.size))
        owned.set(id, { id, phone_number: wanted, connection_id: body.connection_id ?? null })
        return json(res, 200, { data: { id: randomUUID(), status: 'success', connection_id: body.connection_id, phone_numbers: [{ id: randomUUID(), phone_number: wanted, status: 'success' }] } })
      }
      if (req.method === 'GET' && path === '/v2/phone_numbers') {
        const digits = q('filter[phone_number]') ?? ''
        return json(res, 200, { data: [...owned.values()].filter((n) => n.phone_number.replace(/\D/g, '').includes(digits)) })
      }
      const number = /^\/v2\/phone_numbers\/([^/]+)$/.exec(path)
      if (number !== null) {
        const held = owned.get(decodeURIComponent(number[1]))
        if (held === undefined) return error(res, 404, '10005', 'Resource not found')
        if (req.method === 'PATCH') {
          if ('connection_id' in body) held.connection_id = body.connection_id
          return json(res, 200, { data: held })
        }
        if (req.method === 'DELETE') {
          owned.delete(held.id)
          return json(res, 200, { data: { ...held, status: 'deleted' } })
        }
      }
      if (req.method === 'POST' && path === '/v2/calls') {
        if (body.connection_id !== connectionId) return error(res, 422, '90015', 'invalid connection_id')
        const detection = detectionOf(body)
        if (typeof detection === 'string') return error(res, 422, '90015', detection)
        if (callees.get(body.to)?.answer === 'invalid') return error(res, 422, '10016', 'Phone number must be in +E.164 format')
        const call: StandinCall = { callControlId: ccid(), direction: 'outgoing', from: body.from, to: body.to, clientState: body.client_state, webhookUrl: body.webhook_url ?? webhookUrl, alive: true, streams: [], commands: [{ command: 'dial', body }], screening: { detection, sent: [] } }
        ring(call, body)
        return json(res, 200, { data: { call_control_id: call.callControlId, call_leg_id: randomUUID(), call_session_id: randomUUID(), is_alive: false, record_type: 'call' } })
      }
      const action = /^\/v2\/calls\/([^/]+)\/actions\/([a-z_]+)$/.exec(path)
      if (req.method === 'POST' && action !== null) {
        const call = calls.get(decodeURIComponent(action[1]))
        // Each account acts on its own calls only.
        if (call === undefined || (call.account !== undefined) !== byTenant) return error(res, 404, '90015', 'call not found')
        if (!call.alive) return error(res, 422, '90018', 'Call has already ended')
        const command = action[2]
        call.commands.push({ command, body })
        if (command === 'answer') {
          if (body.client_state !== undefined) call.clientState = body.client_state
          later(async () => await event(call, 'call.answered'))
        } else if (command === 'streaming_start') {
          later(async () => { openStream(call, body) })
        } else if (command === 'streaming_stop') {
          for (const stream of call.streams) if (stream.socket.readyState === WebSocket.OPEN) stream.stop()
        } else if (command === 'hangup') {
          // A leg still ringing is cancelled.
          later(async () => await hangup(call, call.direction === 'outgoing' && call.answered !== true ? 'originator_cancel' : 'normal_clearing'))
        } else if (command === 'reject') {
          call.alive = false
          later(async () => await event(call, 'call.hangup', { hangup_cause: 'call_rejected' }))
        } else if (command === 'transfer') {
          // The new leg's events go to the webhook URL of the call's application.
          const legWebhook = call.account === undefined ? webhookUrl : tenantWebhook(call.account.connectionId)!
          ring({ callControlId: ccid(), direction: 'outgoing', from: body.from, to: body.to, clientState: body.target_leg_client_state, webhookUrl: legWebhook, alive: true, streams: [], commands: [{ command: 'transfer', body }], account: call.account }, {})
        } else if (!warmCommand(call, command, body, res)) {
          return
        }
        return json(res, 200, { data: { result: 'ok' } })
      }
      if (sip.rest(req.method ?? '', path, body, res)) return
      return error(res, 404, '10005', `no route ${req.method} ${path}`)
    })
  })
  const sip = sipTrunks({ json, error, event, calls })
  // ---- A second account: a tenant's own Telnyx account (its own API key, key pair, numbers, Call Control applications) ----
  const tenantKeys = generateKeyPairSync('ed25519')
  const tenantApiKey = 'KEY' + randomBytes(16).toString('hex')
  const tenantOwned: TenantAccount['owned'] = new Map()
  const applications: TenantAccount['applications'] = new Map()
  const tenantRequests: TenantAccount['requests'] = []
  const tenantWebhook = (id: string | null | undefined) => applications.get(id ?? '')?.webhook_event_url

  /** The tenant account's own API (numbers, applications, dial); false for a call command, which the shared code serves. */
  function tenantRequest (method: string, path: string, q: (name: string) => string | undefined, body: any, res: http.ServerResponse): boolean {
    if (/^\/v2\/calls\/[^/]+\/actions\//.test(path)) return false
    tenantRequests.push({ method, path, body })
    if (method === 'GET' && path === '/v2/phone_numbers') {
      const digits = q('filter[phone_number]') ?? ''
      json(res, 200, { data: [...tenantOwned.values()].filter((n) => n.phone_number.replace(/\D/g, '').includes(digits)) })
      return true
    }
    const number = /^\/v2\/phone_numbers\/([^/]+)$/.exec(path)
    if (number !== null && method === 'PATCH') {
      const held = tenantOwned.get(decodeURIComponent(number[1]))
      if (held === undefined) error(res, 404, '10005', 'Resource not found')
      else if (body.connection_id !== null && !applications.has(body.connection_id)) error(res, 422, '10015', 'invalid connection_id')
      else {
        held.connection_id = body.connection_id
        json(res, 200, { data: held })
      }
      return true
    }
    if (method === 'POST' && path === '/v2/call_control_applications') {
      if (typeof body.application_name !== 'string' || typeof body.webhook_event_url !== 'string') error(res, 422, '10015', 'application_name and webhook_event_url are required')
      else {
        const id = String(BigInt(Date.now()) * 1000n + BigInt(applications.size))
        applications.set(id, { id, application_name: body.application_name, webhook_event_url: body.webhook_event_url })
        json(res, 201, { data: { record_type: 'call_control_application', active: true, ...applications.get(id) } })
      }
      return true
    }
    const application = /^\/v2\/call_control_applications\/([^/]+)$/.exec(path)
    if (application !== null && method === 'DELETE') {
      const found = applications.get(decodeURIComponent(application[1]))
      if (found === undefined) error(res, 404, '10005', 'Resource not found')
      else {
        applications.delete(found.id)
        for (const n of tenantOwned.values()) if (n.connection_id === found.id) n.connection_id = null
        json(res, 200, { data: { record_type: 'call_control_application', ...found } })
      }
      return true
    }
    if (method === 'POST' && path === '/v2/calls') {
      if (!applications.has(body.connection_id)) error(res, 422, '90015', 'invalid connection_id')
      else {
        const call: StandinCall = {
          callControlId: ccid(), direction: 'outgoing', from: body.from, to: body.to, clientState: body.client_state, webhookUrl: body.webhook_url ?? tenantWebhook(body.connection_id), alive: true, streams: [], commands: [{ command: 'dial', body }], account: { name: 'tenant', connectionId: body.connection_id }
        }
        ring(call, body)
        json(res, 200, { data: { call_control_id: call.callControlId, call_leg_id: randomUUID(), call_session_id: randomUUID(), is_alive: false, record_type: 'call' } })
      }
      return true
    }
    error(res, 404, '10005', `no route ${method} ${path} for this account`)
    return true
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    for (const call of calls.values()) for (const stream of call.streams) stream.socket.terminate()
    await Promise.allSettled([...pending])
    await new Promise((resolve) => server.close(resolve))
  })
  const address = server.address() as { port: number }
  const jwk = publicKey.export({ format: 'jwk' })

  return {
    url: `http://127.0.0.1:${address.port}`,
    apiKey,
    connectionId,
    publicKey: Buffer.from(jwk.x!, 'base64url').toString('base64'),
    route (publicOrigin, localOrigin) {
      routes.set(new URL(publicOrigin).origin, localOrigin)
      webhookUrl = `${publicOrigin}/telephony/telnyx/webhook`
    },
    get webhookUrl () { return webhookUrl },
    offer (numbers) { for (const n of numbers) offered.set(n.phone_number, n) },
    owned,
    calls,
    callees,
    parties,
    post,
    async dialIn (from, to) {
      const call: StandinCall = { callControlId: ccid(), direction: 'incoming', from, to, clientState: undefined, webhookUrl, alive: true, streams: [], commands: [] }
      calls.set(call.callControlId, call)
      const { status } = await event(call, 'call.initiated')
      return { call, status }
    },
    async stream (call, n = 0) {
      const stream = await poll(() => call.streams[n], (s) => s !== undefined, { message: () => `stream ${n} of the call never opened` })
      if (stream.socket.readyState === WebSocket.CONNECTING) await new Promise((resolve) => stream.socket.once('open', resolve))
      return stream
    },
    hangup,
    applications: sip.applications,
    credentialConnections: sip.credentialConnections,
    sipRequests: sip.requests,
    sipEndpoints: sip.endpoints,
    pbxInvite: sip.invite,
    tenant: {
      apiKey: tenantApiKey,
      publicKey: Buffer.from(tenantKeys.publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64'),
      owned: tenantOwned,
      applications,
      requests: tenantRequests,
      async dialIn (from, to) {
        const number = [...tenantOwned.values()].find((n) => n.phone_number === to)
        const connectionId = number?.connection_id
        if (connectionId == null) throw new Error(`${to} is on no application of the tenant account`)
        const call: StandinCall = { callControlId: ccid(), direction: 'incoming', from, to, clientState: undefined, webhookUrl: tenantWebhook(connectionId)!, alive: true, streams: [], commands: [], account: { name: 'tenant', connectionId } }
        calls.set(call.callControlId, call)
        const { status } = await event(call, 'call.initiated')
        return { call, status }
      }
    }
  }
}

// SIP trunks on Telnyx, as connect-to-sip meets them (written from Telnyx's API v2 reference; shapes from
// team-telnyx/telnyx-node src/resources/call-control-applications.ts and credential-connections): Call Control
// applications whose inbound.sip_subdomain takes calls to sip:<user>@<subdomain>.sip.telnyx.com from "only my
// connections" (or from anyone), credential connections (user_name 4-32 letters and digits, unique at Telnyx; a
// password of 8 to 128 characters) a PBX authenticates with, and dials or transfers to sip: URIs answered by a PBX
// that challenges for sip_auth_username / sip_auth_password (refused: call.hangup, hangup_cause unspecified).

interface SipDeps {
  json: (res: http.ServerResponse, status: number, body: unknown) => void
  error: (res: http.ServerResponse, status: number, code: string, detail: string) => void
  event: (call: StandinCall, type: string, extra?: Record<string, unknown>) => Promise<{ status: number, body: string }>
  calls: Map<string, StandinCall>
}

function sipTrunks ({ json, error, event, calls }: SipDeps) {
  const applications = new Map<string, SipApplication>()
  const credentialConnections = new Map<string, CredentialConnection>()
  const requests: Array<{ method: string, path: string, body: any }> = []
  const endpoints = new Map<string, { username: string, password: string }>()
  let next = 0
  const newId = () => String(2000000000000000000n + BigInt(Date.now()) * 1000n + BigInt(++next))
  const invalid = (res: http.ServerResponse, detail: string) => { error(res, 422, '10015', detail) }

  function credentialProblem (body: any, except?: string): string | undefined {
    if (typeof body.user_name !== 'string' || !/^[A-Za-z0-9]{4,32}$/.test(body.user_name)) return 'user_name must be 4-32 characters long and alphanumeric values only'
    if (typeof body.password !== 'string' || body.password.length < 8 || body.password.length > 128) return 'password must be 8 to 128 characters long'
    if ([...credentialConnections.values()].some((c) => c.user_name === body.user_name && c.id !== except)) return `user_name ${body.user_name as string} has already been taken`
    return undefined
  }
  function applicationProblem (body: any, except?: string): string | undefined {
    if (typeof body.application_name !== 'string' || body.application_name === '') return 'application_name is required'
    if (typeof body.webhook_event_url !== 'string' || !/^https?:\/\//.test(body.webhook_event_url)) return 'webhook_event_url must include a scheme'
    const subdomain = body.inbound?.sip_subdomain
    if (subdomain !== undefined && [...applications.values()].some((a) => a.inbound.sip_subdomain === subdomain && a.id !== except)) return `sip_subdomain ${subdomain as string} is already in use`
    return undefined
  }

  /** Answers the SIP resources' requests; false for other paths. */
  function rest (method: string, path: string, body: any, res: http.ServerResponse): boolean {
    const resource = /^\/v2\/(call_control_applications|credential_connections)(?:\/([^/]+))?$/.exec(path)
    if (resource === null) return false
    requests.push({ method, path, body })
    const [, kind, id] = resource
    if (kind === 'call_control_applications') {
      if (id === undefined && method === 'POST') {
        const problem = applicationProblem(body)
        if (problem !== undefined) { invalid(res, problem); return true }
        const app: SipApplication = { id: newId(), application_name: body.application_name, webhook_event_url: body.webhook_event_url, webhook_api_version: body.webhook_api_version ?? '1', inbound: { ...body.inbound } }
        applications.set(app.id, app)
        json(res, 201, { data: { record_type: 'call_control_application', ...app } })
        return true
      }
      const app = id === undefined ? undefined : applications.get(decodeURIComponent(id))
      if (app === undefined) { error(res, 404, '10005', 'Resource not found'); return true }
      if (method === 'PATCH') {
        const problem = applicationProblem(body, app.id)
        if (problem !== undefined) { invalid(res, problem); return true }
        Object.assign(app, { application_name: body.application_name, webhook_event_url: body.webhook_event_url, ...(body.webhook_api_version !== undefined && { webhook_api_version: body.webhook_api_version }) })
        if (body.inbound !== undefined) app.inbound = { ...app.inbound, ...body.inbound }
        json(res, 200, { data: { record_type: 'call_control_application', ...app } })
        return true
      }
      if (method === 'DELETE') { applications.delete(app.id); json(res, 200, { data: { record_type: 'call_control_application', ...app } }); return true }
      if (method === 'GET') { json(res, 200, { data: { record_type: 'call_control_application', ...app } }); return true }
      return false
    }
    if (id === undefined && method === 'POST') {
      const problem = credentialProblem(body)
      if (problem !== undefined) { invalid(res, problem); return true }
      const connection: CredentialConnection = { id: newId(), connection_name: body.connection_name, user_name: body.user_name, password: body.password, active: body.active ?? true, sip_uri_calling_preference: body.sip_uri_calling_preference ?? 'disabled', outbound: { ...body.outbound } }
      credentialConnections.set(connection.id, connection)
      const { password: _password, ...shown } = connection
      json(res, 201, { data: { record_type: 'credential_connection', ...shown } })
      return true
    }
    const connection = id === undefined ? undefined : credentialConnections.get(decodeURIComponent(id))
    if (connection === undefined) { error(res, 404, '10005', 'Resource not found'); return true }
    if (method === 'PATCH') {
      const problem = credentialProblem({ user_name: connection.user_name, password: connection.password, ...body }, connection.id)
      if (problem !== undefined) { invalid(res, problem); return true }
      for (const field of ['connection_name', 'user_name', 'password', 'active', 'sip_uri_calling_preference'] as const) if (body[field] !== undefined) (connection as any)[field] = body[field]
      const { password: _password, ...shown } = connection
      json(res, 200, { data: { record_type: 'credential_connection', ...shown } })
      return true
    }
    if (method === 'DELETE') { credentialConnections.delete(connection.id); json(res, 200, { data: { record_type: 'credential_connection', id: connection.id } }); return true }
    return false
  }

  /** A PBX's INVITE: authenticated as one of the account's credential connections, to an application's subdomain. */
  async function invite (to: string, from: string, credentials: { username: string, password: string } | undefined): Promise<PbxInvite> {
    const host = /^sip:[^@]+@([^;:?]+)/i.exec(to)?.[1] ?? ''
    const label = host.endsWith('.sip.telnyx.com') ? host.slice(0, -'.sip.telnyx.com'.length) : undefined
    const app = [...applications.values()].find((a) => label !== undefined && a.inbound.sip_subdomain === label)
    if (app === undefined) return { refused: 404 }
    const known = credentials === undefined ? undefined : [...credentialConnections.values()].find((c) => c.active && c.user_name === credentials.username)
    if (credentials !== undefined && (known === undefined || known.password !== credentials.password)) return { refused: 401 }
    // only_my_connections: the caller must be one of the account's connections (here: a credential connection).
    if (known === undefined && app.inbound.sip_subdomain_receive_settings !== 'from_anyone') return { refused: 403 }
    const call: StandinCall = { callControlId: ccid(), direction: 'incoming', from, to, clientState: undefined, webhookUrl: app.webhook_event_url, connectionId: app.id, alive: true, streams: [], commands: [] }
    calls.set(call.callControlId, call)
    const { status } = await event(call, 'call.initiated')
    return { call, status }
  }

  /** Telnyx's dial or transfer to sip:<user>@<host>: a PBX that is not there, or refuses the credentials, ends the call. */
  async function refusedDial (call: StandinCall): Promise<boolean> {
    const target = /^sip:[^@]+@([^;]+)/i.exec(call.to)
    if (target === null) return false
    const wanted = endpoints.get(target[1])
    const body = call.commands[0]?.body ?? {}
    const cause = wanted === undefined ? '404' : body.sip_auth_username !== wanted.username || body.sip_auth_password !== wanted.password ? '403' : undefined
    if (cause === undefined) return false
    call.alive = false
    await event(call, 'call.hangup', { hangup_cause: 'unspecified', sip_hangup_cause: cause, hangup_source: 'callee' })
    return true
  }

  return { applications, credentialConnections, requests, endpoints, rest, invite, refusedDial }
}
