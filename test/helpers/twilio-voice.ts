import { createHmac, randomBytes, randomUUID } from 'node:crypto'
import http from 'node:http'
import { isIP } from 'node:net'
import { Parser } from 'htmlparser2'
import { WebSocket } from 'ws'
import { FRAME_MS, mulawDecode, mulawEncode, resample, SAMPLE_RATE } from '../../src/modules/voice/audio.ts'
import { poll } from './poll.ts'
import { speech } from './voice-client.ts'

// Twilio's voice side, as the server under test meets it: the Calls REST resource, signed webhooks (voice URL,
// status callbacks, <Dial> actions), TwiML execution and bidirectional Media Streams (<Connect><Stream>), all on
// loopback. The public URLs the server hands out reach it through `route`, as through a tunnel.

export const API_VERSION = '2010-04-01'
/** Media Streams audio: G.711 µ-law, 8 kHz mono; 160 bytes are 20 ms. */
const MEDIA_RATE = 8000
const FRAME_BYTES = MEDIA_RATE * FRAME_MS / 1000
/** Twilio gives up on a webhook after 15 s. */
const WEBHOOK_TIMEOUT_MS = 15_000
const E164 = /^\+[1-9]\d{1,14}$/

export const sid = (prefix: string) => prefix + randomBytes(16).toString('hex')

export interface IncomingNumber {
  sid: string
  account_sid: string
  phone_number: string
  friendly_name: string
  voice_url: string | null
  voice_method: string
  status_callback: string | null
  status_callback_method: string
}

export type CallStatus = 'queued' | 'ringing' | 'in-progress' | 'completed' | 'busy' | 'no-answer' | 'failed' | 'canceled'
const FINAL: ReadonlySet<CallStatus> = new Set(['completed', 'busy', 'no-answer', 'failed', 'canceled'])

/** How the phone at a number behaves when called (by an outbound call or a <Dial>). */
export type Callee =
  | {
    answer: 'answer'
    /** rings this long first (default delays.ringMs) */
    ringMs?: number
    /** an outbound call rings until this settles instead (the test answers the phone) */
    until?: Promise<void>
    /** a dialed party talks this long, then hangs up (default delays.talkMs) */
    talkMs?: number
    /** at a <Gather> of its call: the keys it presses or the words it says (neither: silence until the Gather gives up) */
    input?: { digits?: string, speech?: string }
    /** who picks up an outbound call, as its stream hears them and answering-machine detection tells (Party) */
    party?: Party
    /** the person who answered an outbound call hangs up this long after answering (default: never; the agent ends it) */
    hangUpAfterMs?: number
  }
  | { answer: 'no-answer' | 'busy' | 'failed', /** the outcome comes after this long (default delays.noAnswerMs for no-answer, delays.ringMs otherwise) */ afterMs?: number }

// --- Answering-machine detection (voicemail helper) ---
// https://www.twilio.com/docs/voice/answering-machine-detection: with MachineDetection and AsyncAmd=true the call
// connects at once and AnsweredBy is posted to AsyncAmdStatusCallback: `DetectMessageEnd` posts a person (`human`)
// as soon as it is known and a machine only at the end of its greeting (`machine_end_beep`, `_silence`, `_other`);
// `Enable` posts `machine_start` as soon as a machine is known. No verdict within MachineDetectionTimeout: `unknown`.

/** Who picks up an outbound call (its stream hears them from `pickupMs` after it opens, default 300). */
export type Party =
  | { kind: 'human', /** says hello for this long (0: says nothing) */ helloMs?: number, /** AnsweredBy this long after the hello ends (default 0) */ detectMs?: number, pickupMs?: number }
  | { kind: 'machine', /** the recorded greeting's length */ greetingMs: number, /** the beep's length (default 400) */ beepMs?: number, pickupMs?: number }
  | { kind: 'fax', pickupMs?: number }

/** The AMD parameters of a Calls create, as sent. */
export interface MachineDetectionRequest { mode: string, async: boolean, callback: string | undefined, method: string, timeoutSeconds: number }

/** What the party did and when (performance.now()), and the AnsweredBy values posted. */
export interface Screening { helloEndedAt?: number, beepEndedAt?: number, /** when the last AnsweredBy was sent */ verdictAt?: number, answeredBy: string[] }

/** A 1 kHz beep at half scale, 16 kHz PCM16. */
export const beep = (ms: number) => Int16Array.from({ length: Math.round(ms * 16) }, (_, i) => Math.round(16_000 * Math.sin(2 * Math.PI * 1000 * i / SAMPLE_RATE)))

/** Reads the AMD parameters of a Calls create; a string for a value Twilio refuses. */
function machineDetectionOf (form: URLSearchParams): MachineDetectionRequest | string | undefined {
  const mode = form.get('MachineDetection')
  if (mode === null) return undefined
  if (mode !== 'Enable' && mode !== 'DetectMessageEnd') return `Invalid MachineDetection: ${mode}`
  const timeout = Number(form.get('MachineDetectionTimeout') ?? '30')
  if (!Number.isInteger(timeout) || timeout < 3 || timeout > 59) return `Invalid MachineDetectionTimeout: ${form.get('MachineDetectionTimeout')}`
  const callback = form.get('AsyncAmdStatusCallback') ?? undefined
  return { mode, async: form.get('AsyncAmd') === 'true', callback, method: form.get('AsyncAmdStatusCallbackMethod') ?? 'POST', timeoutSeconds: timeout }
}

/** Plays the party on the call's first stream and posts what detection makes of it. */
async function screen (voice: TwilioVoice, call: Call, stream: Stream, party: Party): Promise<void> {
  const amd = call.machineDetection
  const post = async (answeredBy: string, startedAt: number) => {
    call.screening.answeredBy.push(answeredBy)
    call.screening.verdictAt = performance.now()
    if (amd?.callback === undefined || !amd.async) return
    await voice.send('amd', call, amd.method, amd.callback, [['AccountSid', call.accountSid], ['CallSid', call.sid], ['AnsweredBy', answeredBy],
      ['MachineDetectionDuration', String(Math.round(performance.now() - startedAt))]], 'valid')
  }
  await voice.sleep(party.pickupMs ?? 300)
  const startedAt = performance.now()
  if (party.kind === 'human') {
    const helloMs = party.helloMs ?? 600
    if (helloMs > 0) {
      await stream.sendAudio(speech(helloMs, 0), { realtime: true })
      call.screening.helloEndedAt = performance.now()
      await stream.sendAudio(new Int16Array(16 * 800), { realtime: true })
    }
    await voice.sleep(party.detectMs ?? 0)
    if (amd !== undefined) await post('human', startedAt)
  } else if (party.kind === 'machine') {
    if (amd?.mode === 'Enable') void voice.sleep(Math.min(party.greetingMs, 1500)).then(async () => { await post('machine_start', startedAt) })
    await stream.sendAudio(speech(party.greetingMs, 0), { realtime: true })
    await stream.sendAudio(beep(party.beepMs ?? 400), { realtime: true })
    call.screening.beepEndedAt = performance.now()
    if (amd?.mode === 'DetectMessageEnd') await post('machine_end_beep', startedAt)
  } else if (amd !== undefined) {
    await post('fax', startedAt)
  }
}
// --- end of answering-machine detection ---

/** valid: signed with the account's token; none: no X-Twilio-Signature; wrong: signed with another token. */
export type Signing = 'valid' | 'none' | 'wrong'

export interface Webhook {
  /** voice: a number's VoiceUrl; url: a call's Url (create or redirect); status: a status callback; action: a <Dial>/<Connect> action; post: `post()`; amd: an AsyncAmdStatusCallback. */
  kind: 'voice' | 'url' | 'status' | 'action' | 'post' | 'amd'
  callSid: string | undefined
  method: 'GET' | 'POST'
  /** The public URL, as signed (for GET with the parameters in its query). */
  url: string
  params: Record<string, string>
  /** Twilio's headers as sent (signature, idempotency token); a replay sends the same. */
  headers: Record<string, string>
  /** The server's answer; 0 when it was not reached (see `error`). */
  status: number
  body: string
  error?: string
  replay: boolean
  at: number
}

export interface TwimlNode { name: string, attributes: Record<string, string>, children: TwimlNode[], text: string }

export interface DialRecord {
  number: string
  callerId: string | undefined
  timeout: number
  action: string | undefined
  method: string
  dialCallSid: string
  /** The DialCallStatus, once the dialed party answered and hung up, or did not answer. */
  status: 'completed' | 'busy' | 'no-answer' | 'failed' | undefined
  /** DialCallDuration in seconds, when answered. */
  duration: number | undefined
  /** <Dial><Sip username password>: the credentials given to the SIP endpoint. */
  sipAuth?: SipCredentials
}

// --- SIP (issue 31, sip helper): SIP endpoints that challenge Twilio's INVITEs, and calls a PBX sends to a SIP Domain.
/** Digest credentials. */
export interface SipCredentials { username: string, password: string }
/** The host part of a SIP URI (sip:+15550100@pbx.example.com:5060;transport=tcp → pbx.example.com:5060). */
export const sipHost = (uri: string) => /^sips?:(?:[^@]*@)?([^;?]+)/i.exec(uri)?.[1] ?? ''
/** A SIP call out is answered only with the credentials its endpoint wants (407 otherwise: the call fails). */
const sipRefuses = (required: SipCredentials | undefined, given: SipCredentials | undefined) =>
  required !== undefined && (given?.username !== required.username || given.password !== required.password)
// --- end SIP

/** A message from the server on a media stream, parsed, with `at` (performance.now() of arrival). */
export type StreamMessage = { event: string, [key: string]: any } & { at: number }

/** Agent audio: one `media` message, decoded to 8 kHz PCM16, with its arrival and its place on the playback clock. */
export interface AgentFrame { at: number, pcm: Int16Array, playAt: number, /** a `clear` dropped it (or its end) before it was played */ dropped: boolean }

export interface MediaStream {
  sid: string
  callSid: string
  /** The public wss:// URL of the <Stream>. */
  url: string
  customParameters: Record<string, string>
  socket: WebSocket
  messages: StreamMessage[]
  frames: AgentFrame[]
  /** Marks echoed back, in order, with when. */
  echoed: Array<{ name: string, at: number }>
  /** All agent audio received, resampled to 16 kHz. */
  audio16k: () => Int16Array
  /** Agent audio received but not played yet, in ms. */
  bufferedMs: () => number
  /** Caller audio (16 kHz PCM16) as 20 ms µ-law `media` messages, all at once or paced in real time. */
  sendAudio: (pcm16k: Int16Array, options?: { realtime?: boolean }) => Promise<void>
  /** The caller presses a key. */
  sendDtmf: (digit: string) => void
  /** The first message of `event` (and `where`) after the first `after`; fails after 30 s. */
  waitFor: (event: string, where?: (message: StreamMessage) => boolean, after?: number) => Promise<StreamMessage>
  /** The caller hangs up: `stop`, close, the call completes. Resolves once the final status callback was answered. */
  hangup: () => Promise<CallStatus>
  /** The connection is cut (no `stop`): the call completes. */
  drop: () => Promise<CallStatus>
  closed: Promise<{ code: number, reason: string }>
}

export interface LiveCall {
  sid: string
  accountSid: string
  direction: 'inbound' | 'outbound-api'
  from: string
  to: string
  status: CallStatus
  /** performance.now() of the answer and of the end. */
  answeredAt: number | undefined
  endedAt: number | undefined
  /** Seconds, once ended (CallDuration). */
  duration: number | undefined
  /** Seconds an outbound call rings before it is not answered (Timeout; Twilio's default 60). */
  timeout: number
  /** SipAuthUsername and SipAuthPassword of a call to a SIP URI. */
  sipAuth?: SipCredentials
  /** TwiML documents executed, in order. */
  twiml: string[]
  /** Verbs executed, in order (<Say> and the like only recorded). */
  verbs: TwimlNode[]
  dials: DialRecord[]
  // Keypad (DTMF) sent by the server: the digits of each <Play digits> executed, in order.
  digitsPlayed: string[]
  streams: MediaStream[]
  /** The n-th stream (0-based) of the call, once started; fails after 30 s. */
  waitForStream: (n?: number) => Promise<MediaStream>
  /** The caller hangs up. */
  hangup: () => Promise<CallStatus>
  /** The final status, once its status callback (if any) was answered. */
  ended: Promise<CallStatus>
  /** Answering-machine detection as the Calls create asked for it, and what the party did. */
  machineDetection: MachineDetectionRequest | undefined
  screening: Screening
}

// Conferences (warm transfers): https://www.twilio.com/docs/voice/twiml/conference. A room is named per account;
// it starts when a participant with startConferenceOnEnter (default true) is in it; until then the others wait,
// hearing the waitUrl (absent: Twilio's hold music; '': silence). A participant with endConferenceOnExit leaving
// ends it for everyone, whose <Dial> then goes on to its next verb.

export interface ConferenceParticipant {
  callSid: string
  startConferenceOnEnter: boolean
  endConferenceOnExit: boolean
  /** What it heard while the conference had not started: `music` (Twilio's), `silence` (waitUrl ''), the waitUrl, or undefined (it never waited). */
  waited: string | undefined
  /** It left (its call ended or took new TwiML, or the conference ended). */
  left: boolean
}

export interface ConferenceRoom {
  accountSid: string
  name: string
  started: boolean
  ended: boolean
  /** Everyone who joined, in order. */
  participants: ConferenceParticipant[]
}

export interface VoiceStandIn {
  /** Every call, inbound and outbound, in order of creation. */
  calls: LiveCall[]
  /** Every conference room (<Dial><Conference>), in order of creation. */
  conferences: ConferenceRoom[]
  /** Every webhook sent, in order of answer. */
  webhooks: Webhook[]
  /** What went wrong on Twilio's side (unroutable URL, refused stream, bad TwiML or stream message), in order. */
  errors: string[]
  /** Stand-ins for times Twilio spends in seconds or minutes. */
  delays: { ringMs: number, noAnswerMs: number, talkMs: number }
  /** Twilio's clock, as the Timestamp of status callbacks tells it: this far from this machine's. */
  clock: { offsetMs: number }
  /** Requests for `publicOrigin` (https/wss) go to `localOrigin` (http://127.x.x.x:port), as through a tunnel. */
  route: (publicOrigin: string, localOrigin: string) => void
  callee: (phoneNumber: string, behaviour: Callee) => void
  /** A call from `from` to a number an account holds: its voice webhook is posted and the TwiML followed. */
  dialIn: (from: string, to: string, options?: { signature?: Signing, params?: Record<string, string> }) => Promise<{ call: LiveCall, webhook: Webhook }>
  /** The n-th outbound call to `to`, once answered (fails if it ended unanswered, or after 30 s). */
  waitForCall: (to: string, nth?: number) => Promise<LiveCall>
  /** A POST (or GET) to any URL of the server, signed with the token of the account it names (AccountSid) unless told otherwise. */
  post: (url: string, params: Record<string, string> | Array<[string, string]>, options?: { accountSid?: string, authToken?: string, signature?: Signing, method?: 'GET' | 'POST' }) => Promise<Webhook>
  /** The very same request again (Twilio retrying a webhook): same URL, parameters and headers. */
  resend: (webhook: Webhook) => Promise<Webhook>
}

/** The accounts and numbers the REST side keeps. */
export interface Directory {
  token: (accountSid: string) => string | undefined
  numbers: () => IncomingNumber[]
}

export interface RestAnswer { status: number, body: unknown, /** runs once the answer was sent */ afterAnswer?: () => void }

const compare = (a: string, b: string) => a < b ? -1 : a > b ? 1 : 0

/**
 * X-Twilio-Signature: base64 HMAC-SHA1 with the auth token of the full URL (query included) followed by every POST
 * parameter as name and value, sorted by name (case-sensitive), repeated names by value.
 */
export function twilioSignature (authToken: string, url: string, params: URLSearchParams | Array<[string, string]> | Record<string, string> = []): string {
  const pairs = params instanceof URLSearchParams || Array.isArray(params) ? [...params] : Object.entries(params)
  pairs.sort(([ka, va], [kb, vb]) => compare(ka, kb) || compare(va, vb))
  return createHmac('sha1', authToken).update(url + pairs.map(([k, v]) => k + v).join('')).digest('base64')
}

/** The <Response> of a TwiML document; throws when there is none. */
export function parseTwiml (xml: string): TwimlNode {
  const root: TwimlNode = { name: '', attributes: {}, children: [], text: '' }
  const open = [root]
  const parser = new Parser({
    onopentag (name, attributes) {
      const node = { name, attributes, children: [], text: '' }
      open.at(-1)!.children.push(node)
      open.push(node)
    },
    ontext (text) { open.at(-1)!.text += text },
    onclosetag () { if (open.length > 1) open.pop() }
  }, { xmlMode: true })
  parser.end(xml)
  const [response] = root.children
  if (root.children.length !== 1 || response.name !== 'Response') throw new Error(`not TwiML (12100 Document parse failure): ${xml.slice(0, 200)}`)
  return response
}

export const isLoopback = (hostname: string) => {
  const host = hostname.replace(/^\[(.*)\]$/, '$1')
  return (isIP(host) === 4 && host.startsWith('127.')) || host === '::1'
}

/** Twilio's dates: RFC 2822 in UTC. */
const rfc2822 = (date: Date) => date.toUTCString().replace('GMT', '+0000')
const countryOf = (number: string) => number.startsWith('+1') ? 'US' : ''

export const errorBody = (status: number, code: number, message: string) => ({ code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status })
const fail = (status: number, code: number, message: string): RestAnswer => ({ status, body: errorBody(status, code, message) })

class Stream implements MediaStream {
  readonly sid = sid('MZ')
  readonly callSid: string
  readonly url: string
  readonly customParameters: Record<string, string>
  readonly socket: WebSocket
  readonly messages: StreamMessage[] = []
  readonly frames: AgentFrame[] = []
  readonly echoed: Array<{ name: string, at: number }> = []
  readonly closed: Promise<{ code: number, reason: string }>
  readonly #call: Call
  readonly #report: (message: string) => void
  readonly #startedAt = performance.now()
  #sequence = 0
  #chunk = 0
  #timestamp = -FRAME_MS
  /** When the agent audio received so far will have been played (performance.now()). */
  #playEnd = 0
  #marks: Array<{ name: string, due: number }> = []
  #timer: NodeJS.Timeout | undefined

  constructor (call: Call, socket: WebSocket, url: string, customParameters: Record<string, string>, report: (message: string) => void) {
    this.#call = call
    this.callSid = call.sid
    this.socket = socket
    this.url = url
    this.customParameters = customParameters
    this.#report = (message) => report(`${call.sid} stream ${this.sid}: ${message}`)
    socket.on('message', (data: Buffer, isBinary: boolean) => this.#receive(data, isBinary))
    this.closed = new Promise((resolve) => socket.once('close', (code, reason) => {
      clearTimeout(this.#timer)
      this.#marks = []
      resolve({ code, reason: reason.toString() })
    }))
    this.#send({ event: 'connected', protocol: 'Call', version: '1.0.0' })
    this.#send({
      event: 'start',
      sequenceNumber: this.#next(),
      start: {
        accountSid: call.accountSid,
        streamSid: this.sid,
        callSid: call.sid,
        tracks: ['inbound'],
        mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: MEDIA_RATE, channels: 1 },
        customParameters
      },
      streamSid: this.sid
    })
  }

  get open () { return this.socket.readyState === WebSocket.OPEN }

  #next () { return String(++this.#sequence) }

  #send (message: object) {
    if (this.open) this.socket.send(JSON.stringify(message))
  }

  #receive (data: Buffer, isBinary: boolean) {
    const at = performance.now()
    let message: { event?: unknown, streamSid?: unknown, media?: { payload?: unknown }, mark?: { name?: unknown } }
    try {
      if (isBinary) throw new Error('binary frame')
      message = JSON.parse(data.toString('utf8'))
    } catch (err) {
      return this.#report(`unreadable message (${(err as Error).message})`)
    }
    if (typeof message.event !== 'string') return this.#report(`message without event: ${data.toString('utf8').slice(0, 200)}`)
    this.messages.push({ ...message, event: message.event, at })
    if (['media', 'mark', 'clear'].includes(message.event) && message.streamSid !== this.sid) {
      return this.#report(`${message.event} for streamSid ${String(message.streamSid)}`)
    }
    if (message.event === 'media') {
      if (typeof message.media?.payload !== 'string') return this.#report('media without payload')
      const pcm = mulawDecode(Buffer.from(message.media.payload, 'base64'))
      const playAt = Math.max(at, this.#playEnd)
      this.#playEnd = playAt + pcm.length * 1000 / MEDIA_RATE
      this.frames.push({ at, pcm, playAt, dropped: false })
    } else if (message.event === 'mark') {
      if (typeof message.mark?.name !== 'string') return this.#report('mark without name')
      this.#marks.push({ name: message.mark.name, due: Math.max(at, this.#playEnd) })
      this.#schedule()
    } else if (message.event === 'clear') {
      // Audio not played yet is dropped, and every mark waiting for it comes back at once.
      for (const frame of this.frames) if (frame.playAt + frame.pcm.length * 1000 / MEDIA_RATE > at) frame.dropped = true
      this.#playEnd = at
      clearTimeout(this.#timer)
      for (const mark of this.#marks.splice(0)) this.#echo(mark.name)
    }
  }

  /** One timer for the earliest pending mark, so that marks come back in the order they were sent. */
  #schedule () {
    clearTimeout(this.#timer)
    if (this.#marks.length === 0) return
    this.#timer = setTimeout(() => {
      const now = performance.now()
      while (this.#marks.length > 0 && this.#marks[0].due <= now + 1) this.#echo(this.#marks.shift()!.name)
      this.#schedule()
    }, Math.max(0, this.#marks[0].due - performance.now()))
  }

  #echo (name: string) {
    this.echoed.push({ name, at: performance.now() })
    this.#send({ event: 'mark', sequenceNumber: this.#next(), streamSid: this.sid, mark: { name } })
  }

  audio16k () {
    const all = new Int16Array(this.frames.reduce((n, f) => n + f.pcm.length, 0))
    let offset = 0
    for (const frame of this.frames) { all.set(frame.pcm, offset); offset += frame.pcm.length }
    return resample(all, MEDIA_RATE, SAMPLE_RATE)
  }

  bufferedMs () { return Math.max(0, this.#playEnd - performance.now()) }

  async sendAudio (pcm16k: Int16Array, { realtime = false } = {}) {
    const bytes = mulawEncode(resample(pcm16k, SAMPLE_RATE, MEDIA_RATE))
    const start = performance.now()
    for (let offset = 0, n = 0; offset < bytes.length; offset += FRAME_BYTES, n++) {
      if (!this.open) return
      const chunk = Buffer.alloc(FRAME_BYTES, 0xff) // µ-law silence pads the last frame
      bytes.copy(chunk, 0, offset, offset + FRAME_BYTES)
      this.#timestamp = Math.max(Math.round(performance.now() - this.#startedAt), this.#timestamp + FRAME_MS)
      this.#send({
        event: 'media',
        sequenceNumber: this.#next(),
        media: { track: 'inbound', chunk: String(++this.#chunk), timestamp: String(this.#timestamp), payload: chunk.toString('base64') },
        streamSid: this.sid
      })
      if (realtime) await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + (n + 1) * FRAME_MS - performance.now())))
    }
  }

  sendDtmf (digit: string) {
    this.#send({ event: 'dtmf', streamSid: this.sid, sequenceNumber: this.#next(), dtmf: { track: 'inbound_track', digit } })
  }

  async waitFor (event: string, where: (message: StreamMessage) => boolean = () => true, after = 0) {
    const found = await poll(() => this.messages.slice(after).find((m) => m.event === event && where(m)), (m) => m !== undefined, {
      timeoutMs: 30_000,
      message: () => `stream ${this.sid}: no ${event} message; got ${JSON.stringify(this.messages.map((m) => m.event))}`
    })
    return found!
  }

  hangup () { return this.#call.hangup() }
  drop () { return this.#call.drop() }

  /** Twilio ends the stream: `stop`, then it closes the socket. */
  stop () {
    if (!this.open) return
    this.#send({ event: 'stop', sequenceNumber: this.#next(), streamSid: this.sid, stop: { accountSid: this.#call.accountSid, callSid: this.#call.sid } })
    this.socket.close(1000)
  }
}

interface StatusCallback { url: string, method: string, events: ReadonlySet<string> }

class Call implements LiveCall {
  readonly sid = sid('CA')
  readonly accountSid: string
  readonly direction: 'inbound' | 'outbound-api'
  readonly from: string
  readonly to: string
  status: CallStatus
  answeredAt: number | undefined
  endedAt: number | undefined
  duration: number | undefined
  readonly timeout: number
  sipAuth: SipCredentials | undefined
  readonly twiml: string[] = []
  readonly verbs: TwimlNode[] = []
  readonly dials: DialRecord[] = []
  readonly digitsPlayed: string[] = []
  readonly streams: Stream[] = []
  readonly ended: Promise<CallStatus>
  machineDetection: MachineDetectionRequest | undefined
  readonly screening: Screening = { answeredBy: [] }
  party: Party | undefined
  readonly created = new Date()
  #updated = new Date()
  #started: Date | undefined
  #resolveEnded: (status: CallStatus) => void
  readonly #voice: TwilioVoice
  readonly #callback: StatusCallback | undefined
  #callbackSequence = 0
  #callbacks: Promise<unknown> = Promise.resolve()
  #run = new AbortController()

  constructor (voice: TwilioVoice, call: { accountSid: string, direction: 'inbound' | 'outbound-api', from: string, to: string, status: CallStatus, callback: StatusCallback | undefined, timeout?: number }) {
    this.#voice = voice
    this.timeout = call.timeout ?? 60
    this.accountSid = call.accountSid
    this.direction = call.direction
    this.from = call.from
    this.to = call.to
    this.status = call.status
    this.#callback = call.callback
    const { promise, resolve } = Promise.withResolvers<CallStatus>()
    this.ended = promise
    this.#resolveEnded = resolve
  }

  get final () { return FINAL.has(this.status) }

  /** The parameters Twilio sends with every request about the call. */
  params (callStatus: string): Array<[string, string]> {
    return [['AccountSid', this.accountSid], ['ApiVersion', API_VERSION], ['CallSid', this.sid], ['CallStatus', callStatus], ['Called', this.to],
      ['Caller', this.from], ['Direction', this.direction], ['From', this.from], ['To', this.to]]
  }

  resource () {
    const base = `/${API_VERSION}/Accounts/${this.accountSid}/Calls/${this.sid}`
    return {
      sid: this.sid, account_sid: this.accountSid, annotation: null, answered_by: this.screening.answeredBy.at(-1) ?? null, api_version: API_VERSION, caller_name: null,
      date_created: rfc2822(this.created), date_updated: rfc2822(this.#updated), start_time: this.#started === undefined ? null : rfc2822(this.#started),
      end_time: this.final ? rfc2822(this.#updated) : null, direction: this.direction, duration: this.duration === undefined ? null : String(this.duration),
      forwarded_from: null, from: this.from, from_formatted: this.from, group_sid: null, parent_call_sid: null, phone_number_sid: null, price: null,
      price_unit: 'USD', queue_time: '0', status: this.status, to: this.to, to_formatted: this.to, trunk_sid: null, uri: `${base}.json`,
      subresource_uris: { notifications: `${base}/Notifications.json`, recordings: `${base}/Recordings.json`, streams: `${base}/Streams.json` }
    }
  }

  /** A call-progress event to the status callback, in order; the final one is always sent. */
  progress (event: 'initiated' | 'ringing' | 'answered' | 'completed', callStatus: string): void {
    this.#updated = new Date()
    const callback = this.#callback
    if (callback === undefined || (event !== 'completed' && !callback.events.has(event))) return
    const params: Array<[string, string]> = [...this.params(callStatus), ['CallbackSource', 'call-progress-events'],
      ['SequenceNumber', String(this.#callbackSequence++)], ['Timestamp', rfc2822(new Date(Date.now() + this.#voice.clock.offsetMs))]]
    if (event === 'completed') params.push(['CallDuration', String(this.duration)], ['Duration', String(Math.ceil(this.duration! / 60))])
    this.#callbacks = this.#callbacks
      .then(() => this.#voice.send('status', this, callback.method, callback.url, params, 'valid'))
      .catch((err: unknown) => this.#voice.error(`${this.sid}: status callback ${callback.url}: ${(err as Error).message}`))
  }

  ring () {
    this.status = 'ringing'
    this.progress('ringing', 'ringing')
  }

  answer () {
    if (this.status !== 'queued' && this.status !== 'ringing') return
    this.status = 'in-progress'
    this.answeredAt = performance.now()
    this.#started = new Date()
    this.progress('answered', 'in-progress')
  }

  /** Runs TwiML (given, or fetched) instead of whatever runs now; an open stream gets `stop` first. */
  start (source: string | ((signal: AbortSignal) => Promise<Webhook>)): void {
    this.#run.abort()
    for (const stream of this.streams) stream.stop()
    const run = new AbortController()
    this.#run = run
    void this.#start(source, run.signal).catch((err: unknown) => {
      this.#voice.error(`${this.sid}: ${(err as Error).message}`)
      void this.complete('completed')
    })
  }

  async #start (source: string | ((signal: AbortSignal) => Promise<Webhook>), signal: AbortSignal) {
    let twiml = source
    if (typeof twiml !== 'string') {
      const webhook = await twiml(signal)
      if (signal.aborted) return
      if (webhook.status < 200 || webhook.status > 299) throw new Error(`${webhook.kind} ${webhook.url} answered ${webhook.status} ${webhook.error ?? ''} (11200 HTTP retrieval failure)`)
      twiml = webhook.body
    }
    this.twiml.push(twiml)
    const response = parseTwiml(twiml)
    for (const verb of response.children) {
      this.verbs.push(verb)
      if (verb.name === 'Reject') return this.complete(verb.attributes.reason === 'busy' ? 'busy' : 'failed')
      this.answer()
      if (verb.name === 'Say' || verb.name === 'Pause') continue
      // Keypad: <Play digits> plays tones (0-9 * # and w, half a second of pause; https://www.twilio.com/docs/voice/twiml/play).
      if (verb.name === 'Play' && verb.attributes.digits !== undefined) {
        if (!/^[0-9*#w]+$/.test(verb.attributes.digits)) throw new Error(`<Play digits="${verb.attributes.digits}">: only 0-9, *, # and w`)
        this.digitsPlayed.push(verb.attributes.digits)
        continue
      }
      if (verb.name === 'Hangup') return this.complete('completed')
      if (verb.name === 'Gather') {
        const gathered = await this.#gather(verb, signal)
        if (signal.aborted) return
        if (gathered !== undefined) return this.start(gathered)
        continue
      }
      if (verb.name !== 'Connect' && verb.name !== 'Dial') throw new Error(`<${verb.name}> is not emulated`)
      const action = verb.name === 'Connect' ? await this.#connect(verb, signal) : await this.#dial(verb, signal)
      if (signal.aborted) return
      if (action !== undefined) return this.start(action)
    }
    return this.complete('completed')
  }

  /** <Connect><Stream>: until the server closes the stream; then the Connect's action, if any, gives the next TwiML. */
  async #connect (verb: TwimlNode, signal: AbortSignal) {
    const stream = verb.children.find((n) => n.name === 'Stream')
    if (stream?.attributes.url === undefined) throw new Error('<Connect> without <Stream url>')
    const url = new URL(stream.attributes.url)
    if (url.search !== '') {
      // Twilio's docs: the url takes no query string; custom parameters are the way to pass values.
      this.#voice.error(`${this.sid}: <Stream url="${url.href}">: query strings are not supported; connecting without it`)
      url.search = ''
    }
    const parameters = Object.fromEntries(stream.children.filter((n) => n.name === 'Parameter').map((n) => [n.attributes.name, n.attributes.value ?? '']))
    const opened = await this.#voice.connect(this, url.href, parameters)
    if (opened !== undefined) {
      if (signal.aborted || this.final) opened.stop()
      else this.streams.push(opened)
      if (this.streams.length === 1 && this.streams[0] === opened && this.party !== undefined) {
        void screen(this.#voice, this, opened, this.party).catch((err: unknown) => this.#voice.error(`${this.sid}: ${(err as Error).message}`))
      }
      await opened.closed
    }
    const { action, method = 'POST' } = verb.attributes
    if (action === undefined || signal.aborted) return undefined
    return (s: AbortSignal) => this.#voice.send('action', this, method, action, this.params('in-progress'), 'valid', s)
  }

  /** <Dial><Number>: the dialed party's behaviour decides what the action URL hears. */
  async #dial (verb: TwimlNode, signal: AbortSignal) {
    const room = verb.children.find((n) => n.name === 'Conference')
    if (room !== undefined) return await this.#conference(verb, room, signal)
    const sip = verb.children.find((n) => n.name === 'Sip')
    const number = ((sip ?? verb.children.find((n) => n.name === 'Number'))?.text ?? verb.text).trim()
    if (number === '') throw new Error('<Dial> without a number')
    const { action, method = 'POST', callerId, timeout = '30' } = verb.attributes
    const dial: DialRecord = { number, callerId, timeout: Number(timeout), action, method, dialCallSid: sid('CA'), status: undefined, duration: undefined }
    if (sip?.attributes.username !== undefined) dial.sipAuth = { username: sip.attributes.username, password: sip.attributes.password ?? '' }
    this.dials.push(dial)
    const callee = sip !== undefined && sipRefuses(this.#voice.sipEndpoints.get(sipHost(number)), dial.sipAuth) ? { answer: 'failed' as const } : this.#voice.calleeOf(number)
    if (callee.answer === 'answer') {
      await this.#voice.sleep(callee.ringMs ?? this.#voice.delays.ringMs)
      const talkMs = callee.talkMs ?? this.#voice.delays.talkMs
      await this.#voice.sleep(talkMs)
      dial.duration = Math.max(1, Math.round(talkMs / 1000))
      dial.status = 'completed'
    } else {
      await this.#voice.sleep(callee.afterMs ?? (callee.answer === 'no-answer' ? this.#voice.delays.noAnswerMs : this.#voice.delays.ringMs))
      dial.status = callee.answer
    }
    if (action === undefined || signal.aborted) return undefined
    const params: Array<[string, string]> = [...this.params('in-progress'), ['DialCallSid', dial.dialCallSid], ['DialCallStatus', dial.status]]
    if (dial.duration !== undefined) params.push(['DialCallDuration', String(dial.duration)])
    return (s: AbortSignal) => this.#voice.send('action', this, method, action, params, 'valid', s)
  }

  /**
   * <Gather> (https://www.twilio.com/docs/voice/twiml/gather): its nested <Say>s are recorded as verbs; the phone's
   * input (the callee's `input`) is posted to the action as Digits or SpeechResult; without input the next verb runs.
   */
  async #gather (verb: TwimlNode, signal: AbortSignal) {
    for (const nested of verb.children) {
      if (nested.name !== 'Say' && nested.name !== 'Play' && nested.name !== 'Pause') throw new Error(`<${nested.name}> inside <Gather> is not allowed`)
      this.verbs.push(nested)
    }
    const callee = this.direction === 'outbound-api' ? this.#voice.calleeOf(this.to) : undefined
    const input = callee?.answer === 'answer' ? callee.input : undefined
    const inputs = (verb.attributes.input ?? 'dtmf').split(/\s+/)
    await this.#voice.sleep(this.#voice.delays.ringMs)
    if (signal.aborted) return undefined
    const params: Array<[string, string]> = [...this.params('in-progress')]
    if (input?.digits !== undefined && inputs.includes('dtmf')) params.push(['Digits', input.digits])
    else if (input?.speech !== undefined && inputs.includes('speech')) params.push(['SpeechResult', input.speech], ['Confidence', '0.9'])
    else return undefined
    const { action, method = 'POST' } = verb.attributes
    if (action === undefined) throw new Error('<Gather> without action (this stand-in does not re-request the document)')
    return (s: AbortSignal) => this.#voice.send('action', this, method, action, params, 'valid', s)
  }

  /** <Dial><Conference>: in the room until this call leaves it or the room ends; then the Dial's action, if any. */
  async #conference (verb: TwimlNode, node: TwimlNode, signal: AbortSignal) {
    const room = this.#voice.room(this.accountSid, node.text.trim())
    const bool = (value: string | undefined, fallback: boolean) => value === undefined ? fallback : value === 'true'
    const participant: ConferenceParticipant = {
      callSid: this.sid,
      startConferenceOnEnter: bool(node.attributes.startConferenceOnEnter, true),
      endConferenceOnExit: bool(node.attributes.endConferenceOnExit, false),
      waited: undefined,
      left: false
    }
    room.participants.push(participant)
    if (participant.startConferenceOnEnter) room.started = true
    else if (!room.started) participant.waited = node.attributes.waitUrl === undefined ? 'music' : node.attributes.waitUrl === '' ? 'silence' : node.attributes.waitUrl
    await poll(() => room.ended || signal.aborted || this.final, (done) => done, { timeoutMs: 10 * 60_000, intervalMs: 5, message: () => `conference ${room.name} never ended` })
    participant.left = true
    if (participant.endConferenceOnExit || room.participants.every((p) => p.left)) room.ended = true
    const { action, method = 'POST' } = verb.attributes
    if (action === undefined || signal.aborted) return undefined
    return (s: AbortSignal) => this.#voice.send('action', this, method, action, this.params('in-progress'), 'valid', s)
  }

  /** Ends the call with `status` (once): streams get `stop`, then the final status callback. */
  complete (status: CallStatus): Promise<CallStatus> {
    if (this.final) return this.ended
    this.#run.abort()
    for (const stream of this.streams) stream.stop()
    this.status = status
    this.endedAt = performance.now()
    this.duration = this.answeredAt === undefined ? 0 : Math.ceil((this.endedAt - this.answeredAt) / 1000)
    this.progress('completed', status)
    void this.#callbacks.then(() => this.#resolveEnded(status))
    return this.ended
  }

  /** A request that did not come from Twilio is not a call: it ends with nothing more sent. */
  forget () {
    this.status = 'failed'
    this.#resolveEnded('failed')
  }

  hangup () { return this.complete('completed') }

  drop () {
    for (const stream of this.streams) stream.socket.terminate()
    return this.complete('completed')
  }

  /** The stand-in closes: nothing more is sent. */
  abandon () {
    this.#run.abort()
    for (const stream of this.streams) stream.socket.terminate()
  }

  async waitForStream (n = 0) {
    const found = await poll(() => this.streams[n], (s) => s !== undefined, {
      timeoutMs: 30_000,
      message: () => `call ${this.sid} (${this.status}): no stream #${n}; ${this.streams.length} so far; errors: ${JSON.stringify(this.#voice.errors)}`
    })
    return found
  }
}

export class TwilioVoice implements VoiceStandIn {
  readonly calls: Call[] = []
  readonly conferences: ConferenceRoom[] = []
  readonly webhooks: Webhook[] = []
  readonly errors: string[] = []
  readonly delays = { ringMs: 20, noAnswerMs: 50, talkMs: 100 }
  readonly clock = { offsetMs: 0 }
  readonly #directory: Directory
  readonly #routes = new Map<string, URL>()
  readonly #callees = new Map<string, Callee>()
  /** SIP endpoints (by host[:port]) and the credentials they challenge Twilio for. */
  readonly sipEndpoints = new Map<string, SipCredentials>()
  readonly #timers = new Set<NodeJS.Timeout>()
  readonly #agent = new http.Agent({ keepAlive: true })
  #closed = false

  constructor (directory: Directory) {
    this.#directory = directory
  }

  error (message: string) { this.errors.push(message) }

  route (publicOrigin: string, localOrigin: string) {
    const local = new URL(localOrigin)
    if (local.protocol !== 'http:' || !isLoopback(local.hostname)) throw new Error(`route to ${localOrigin}: only http:// on loopback`)
    this.#routes.set(new URL(publicOrigin).host, local)
  }

  /** Where a public URL is reached; throws for one without a route, and never yields a non-loopback address. */
  target (url: string): URL {
    const asked = new URL(url)
    const local = this.#routes.get(asked.host)
    let target: URL
    if (local !== undefined) {
      target = new URL(asked.pathname + asked.search, local)
      if (asked.protocol === 'wss:' || asked.protocol === 'ws:') target.protocol = 'ws:'
    } else if (isLoopback(asked.hostname) && (asked.protocol === 'http:' || asked.protocol === 'ws:')) {
      target = asked
    } else {
      throw new Error(`no route to ${asked.origin} (${url})`)
    }
    if (!isLoopback(target.hostname)) throw new Error(`${url} would go to ${target.hostname}, not loopback`)
    return target
  }

  /** What a tunnel adds: the public host, and that the request came in over TLS. */
  #tunnel (url: string) {
    const asked = new URL(url)
    return { host: asked.host, 'x-forwarded-proto': asked.protocol === 'https:' || asked.protocol === 'wss:' ? 'https' : 'http' }
  }

  callee (phoneNumber: string, behaviour: Callee) { this.#callees.set(phoneNumber, behaviour) }

  /** The account's live conference room of that name, made when the first participant joins. */
  room (accountSid: string, name: string): ConferenceRoom {
    const live = this.conferences.find((room) => room.accountSid === accountSid && room.name === name && !room.ended)
    if (live !== undefined) return live
    const room: ConferenceRoom = { accountSid, name, started: false, ended: false, participants: [] }
    this.conferences.push(room)
    return room
  }

  calleeOf (phoneNumber: string): Callee { return this.#callees.get(phoneNumber) ?? { answer: 'answer' } }

  /** A timer that `close` clears, so that a benchmark process can end. */
  sleep (ms: number) {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => { this.#timers.delete(timer); resolve() }, ms)
      this.#timers.add(timer)
    })
  }

  async send (kind: Webhook['kind'], call: Call | undefined, method: string, url: string, params: Array<[string, string]>, signing: Signing, signal?: AbortSignal, token?: string): Promise<Webhook> {
    const get = method.toUpperCase() === 'GET'
    let signed = url
    if (get) {
      const withQuery = new URL(url)
      for (const [key, value] of params) withQuery.searchParams.append(key, value)
      signed = withQuery.toString()
    }
    const headers: Record<string, string> = { accept: '*/*', 'user-agent': 'TwilioProxy/1.1', 'i-twilio-idempotency-token': randomUUID() }
    if (!get) headers['content-type'] = 'application/x-www-form-urlencoded'
    const authToken = token ?? (call === undefined ? undefined : this.#directory.token(call.accountSid))
    if (signing !== 'none') {
      if (authToken === undefined) throw new Error(`no auth token to sign ${url} with`)
      headers['x-twilio-signature'] = twilioSignature(signing === 'valid' ? authToken : `${authToken}-forged`, signed, get ? [] : params)
    }
    const webhook = { kind, callSid: call?.sid, method: get ? 'GET' : 'POST', url: signed, params: Object.fromEntries(params), headers, replay: false } as const
    if (signal?.aborted === true) return { ...webhook, status: 0, body: '', error: 'aborted', at: performance.now() }
    return this.#deliver(webhook)
  }

  resend (webhook: Webhook) {
    const { status: _status, body: _body, error: _error, at: _at, ...request } = webhook
    return this.#deliver({ ...request, replay: true })
  }

  async #deliver (request: Omit<Webhook, 'status' | 'body' | 'error' | 'at'>): Promise<Webhook> {
    let answer: { status: number, body: string, error?: string }
    try {
      if (this.#closed) throw new Error('the stand-in is closed')
      const target = this.target(request.url)
      const body = request.method === 'GET' ? '' : new URLSearchParams(request.params).toString()
      answer = await new Promise((resolve, reject) => {
        const req = http.request(target, { method: request.method, agent: this.#agent, timeout: WEBHOOK_TIMEOUT_MS, headers: { ...request.headers, ...this.#tunnel(request.url), 'content-length': Buffer.byteLength(body) } }, (res) => {
          const chunks: Buffer[] = []
          res.on('data', (c: Buffer) => chunks.push(c))
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }))
          res.on('error', reject)
        })
        req.on('timeout', () => req.destroy(new Error(`no answer within ${WEBHOOK_TIMEOUT_MS} ms (11205)`)))
        req.on('error', reject)
        req.end(body)
      })
    } catch (err) {
      answer = { status: 0, body: '', error: (err as Error).message }
      this.error(`${request.callSid ?? 'post'}: ${request.kind} ${request.url}: ${answer.error}`)
    }
    const webhook = { ...request, ...answer, at: performance.now() }
    if (!this.#closed) this.webhooks.push(webhook)
    return webhook
  }

  post (url: string, params: Record<string, string> | Array<[string, string]>, options: { accountSid?: string, authToken?: string, signature?: Signing, method?: 'GET' | 'POST' } = {}) {
    const pairs = Array.isArray(params) ? params : Object.entries(params)
    // Signed by the account the request names, as Twilio does, unless another is given.
    const accountSid = options.accountSid ?? pairs.find(([name]) => name === 'AccountSid')?.[1]
    const token = options.authToken ?? (accountSid === undefined ? undefined : this.#directory.token(accountSid))
    return this.send('post', undefined, options.method ?? 'POST', url, pairs, options.signature ?? (token === undefined ? 'none' : 'valid'), undefined, token)
  }

  /** Opens a <Stream>; undefined (and an error recorded) when it cannot be reached or refuses. */
  async connect (call: Call, url: string, customParameters: Record<string, string>): Promise<Stream | undefined> {
    let target: URL
    try {
      if (this.#closed) throw new Error('the stand-in is closed')
      target = this.target(url)
    } catch (err) {
      this.error(`${call.sid}: stream ${url}: ${(err as Error).message}`)
      return undefined
    }
    const token = this.#directory.token(call.accountSid) ?? ''
    // Twilio signs the handshake too: the URL alone, no parameters.
    const socket = new WebSocket(target, { headers: { ...this.#tunnel(url), 'user-agent': 'Twilio.TmeWs/1.0', 'x-twilio-signature': twilioSignature(token, url) } })
    let state: 'connecting' | 'open' | 'failed' = 'connecting'
    const failure = await new Promise<string | undefined>((resolve) => {
      socket.once('open', () => { state = 'open'; resolve(undefined) })
      socket.once('unexpected-response', (_req, res) => {
        state = 'failed'
        res.resume()
        socket.terminate()
        resolve(`refused with ${res.statusCode} (31920 handshake error)`)
      })
      socket.on('error', (err) => {
        if (state === 'open') this.error(`${call.sid}: stream ${url}: ${err.message}`)
        else if (state === 'connecting') { state = 'failed'; resolve(err.message) }
      })
    })
    if (failure !== undefined) {
      this.error(`${call.sid}: stream ${url}: ${failure}`)
      return undefined
    }
    return new Stream(call, socket, url, customParameters, (message) => this.error(message))
  }

  async dialIn (from: string, to: string, options: { signature?: Signing, params?: Record<string, string> } = {}) {
    const number = this.#directory.numbers().find((n) => n.phone_number === to)
    if (number === undefined) throw new Error(`no account holds ${to}`)
    if (!number.voice_url) throw new Error(`${to} has no VoiceUrl`)
    const params: Array<[string, string]> = [['CalledCountry', countryOf(to)], ['CallerCountry', countryOf(from)], ['FromCountry', countryOf(from)], ['ToCountry', countryOf(to)]]
    return await this.inbound(number.account_sid, from, to, { url: number.voice_url, method: number.voice_method, statusCallback: number.status_callback }, [...params, ...Object.entries(options.params ?? {})], options.signature)
  }

  /** A call arriving at an account (a number's, or a SIP Domain's): its voice URL is posted and the TwiML followed. */
  async inbound (accountSid: string, from: string, to: string, hook: { url: string, method: string, statusCallback: string | null }, extra: Array<[string, string]>, signing: Signing = 'valid') {
    const call = new Call(this, {
      accountSid,
      direction: 'inbound',
      from,
      to,
      status: 'ringing',
      callback: hook.statusCallback ? { url: hook.statusCallback, method: 'POST', events: new Set(['completed']) } : undefined
    })
    if (signing === 'valid') this.calls.push(call)
    const webhook = await this.send('voice', call, hook.method, hook.url, [...call.params('ringing'), ...extra], signing)
    if (signing !== 'valid') call.forget()
    else call.start(async () => webhook)
    return { call: call as LiveCall, webhook }
  }

  async waitForCall (to: string, nth = 0) {
    const call = await poll(() => this.calls.filter((c) => c.direction === 'outbound-api' && c.to === to)[nth], (c) => c !== undefined && (c.answeredAt !== undefined || c.final), {
      timeoutMs: 30_000,
      message: () => `no outbound call #${nth} to ${to} answered; calls: ${JSON.stringify(this.calls.map((c) => `${c.to} ${c.status}`))}`
    })
    if (call.answeredAt === undefined) throw new Error(`the call to ${to} ended ${call.status}, unanswered`)
    return call
  }

  /** The Calls resource: create, fetch, update. Undefined for paths that are not about calls. */
  rest (method: string, accountSid: string, path: string, form: URLSearchParams): RestAnswer | undefined {
    if (path === '/Calls.json' && method === 'POST') return this.#create(accountSid, form)
    const one = /^\/Calls\/(CA[0-9a-f]{32})\.json$/.exec(path)
    if (one === null) return undefined
    const call = this.calls.find((c) => c.sid === one[1] && c.accountSid === accountSid)
    if (call === undefined) return fail(404, 20404, `The requested resource /${API_VERSION}/Accounts/${accountSid}/Calls/${one[1]}.json was not found`)
    if (method === 'GET') return { status: 200, body: call.resource() }
    if (method !== 'POST') return undefined
    const status = form.get('Status')
    const twiml = form.get('Twiml')
    const url = form.get('Url')
    if (status !== null) {
      if (status !== 'completed' && status !== 'canceled') return fail(400, 21218, `Invalid value '${status}' for Status`)
      // Canceling concerns calls not answered yet; completing an unanswered call cancels it.
      if (call.status === 'queued' || call.status === 'ringing') void call.complete('canceled')
      else if (status === 'completed' && call.status === 'in-progress') void call.complete('completed')
    } else if (twiml !== null || url !== null) {
      if (call.status !== 'in-progress') return fail(400, 21220, 'Call is not in-progress. Cannot redirect.')
      if (twiml !== null) call.start(twiml)
      else call.start((signal) => this.send('url', call, form.get('Method') ?? 'POST', url!, call.params('in-progress'), 'valid', signal))
    }
    return { status: 200, body: call.resource() }
  }

  #create (accountSid: string, form: URLSearchParams): RestAnswer {
    const to = form.get('To') ?? ''
    const from = form.get('From') ?? ''
    const twiml = form.get('Twiml')
    const url = form.get('Url')
    // A SIP URI in To: From is only the user of the INVITE's From header (https://www.twilio.com/docs/voice/api/sip-making-calls).
    const toSip = /^sip:[^@\s]+@[^\s]+$/i.test(to)
    const sipUser = form.get('SipAuthUsername')
    const sipPassword = form.get('SipAuthPassword')
    if (sipUser !== null && sipPassword === null) return fail(400, 21225, 'SipAuthPassword is required when providing SipAuthUsername')
    if (!toSip && !E164.test(to)) return fail(400, 21211, `Invalid 'To' Phone Number: ${to}`)
    if (!toSip && !this.#directory.numbers().some((n) => n.account_sid === accountSid && n.phone_number === from)) {
      return fail(400, 21210, `The source phone number provided, ${from}, is not yet verified for your account. You may only make calls from phone numbers that you've verified or purchased from Twilio.`)
    }
    if (twiml === null && url === null) return fail(400, 21205, 'Url parameter is required.')
    const timeout = form.get('Timeout')
    if (timeout !== null && !/^[1-9]\d*$/.test(timeout)) return fail(400, 21208, 'Invalid Timeout')
    const machineDetection = machineDetectionOf(form)
    if (typeof machineDetection === 'string') return fail(400, 21235, machineDetection)
    const callbackUrl = form.get('StatusCallback')
    const events = new Set(form.getAll('StatusCallbackEvent').flatMap((e) => e.split(/\s+/)).filter((e) => e !== ''))
    const call = new Call(this, {
      accountSid,
      direction: 'outbound-api',
      from,
      to,
      status: 'queued',
      callback: callbackUrl === null ? undefined : { url: callbackUrl, method: form.get('StatusCallbackMethod') ?? 'POST', events },
      // Twilio takes at most 600 seconds.
      timeout: timeout === null ? undefined : Math.min(600, Number(timeout))
    })
    if (sipUser !== null) call.sipAuth = { username: sipUser, password: sipPassword! }
    call.machineDetection = machineDetection
    this.calls.push(call)
    const source = twiml ?? ((signal: AbortSignal) => this.send('url', call, form.get('Method') ?? 'POST', url!, call.params('in-progress'), 'valid', signal))
    return { status: 201, body: call.resource(), afterAnswer: () => { void this.#place(call, source) } }
  }

  /** The callee's phone decides: it answers (the TwiML runs), or the call ends busy, no-answer or failed. */
  async #place (call: Call, source: string | ((signal: AbortSignal) => Promise<Webhook>)) {
    call.progress('initiated', 'initiated')
    const callee: Callee = call.to.startsWith('sip:') && sipRefuses(this.sipEndpoints.get(sipHost(call.to)), call.sipAuth) ? { answer: 'failed' } : this.calleeOf(call.to)
    if (callee.answer === 'busy' || callee.answer === 'failed') {
      await this.sleep(callee.afterMs ?? this.delays.ringMs)
      if (!call.final) void call.complete(callee.answer)
      return
    }
    call.ring()
    if (callee.answer === 'answer' && callee.until !== undefined) await callee.until
    else await this.sleep(callee.answer === 'answer' ? callee.ringMs ?? this.delays.ringMs : callee.afterMs ?? this.delays.noAnswerMs)
    if (call.final) return
    if (callee.answer === 'no-answer') {
      void call.complete('no-answer')
      return
    }
    call.party = callee.answer === 'answer' ? callee.party : undefined
    call.answer()
    call.start(source)
    if (callee.answer === 'answer' && callee.hangUpAfterMs !== undefined) {
      await this.sleep(callee.hangUpAfterMs)
      if (!call.final) void call.complete('completed')
    }
  }

  close () {
    this.#closed = true
    for (const timer of this.#timers) clearTimeout(timer)
    for (const call of this.calls) call.abandon()
    this.#agent.destroy()
  }
}
