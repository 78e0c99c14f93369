import type { WebSocket } from 'ws'
import type { CallRow } from '../../db/schema.ts'
import type { Conversation } from '../../db/shapes.ts'
import { hashToken } from '../users/keys.ts'
import type { LiveCalls } from '../voice/live-calls.ts'
import { Session, type ForwardRequest, type Transport } from '../voice/session.ts'
import { CLOSE, SocketLoop } from '../voice/socket-loop.ts'
import type { PlayedTransport } from '../voice/transports/played.ts'
import type { TelephonyDeps } from './calls.ts'
import { setCarrierCallId, takeStreamToken } from './queries.ts'

// One carrier media stream (Twilio's Media Streams, Telnyx's media streaming): a one-time token opens its call at
// `start`, which must name the same carrier call; media goes to the call's session until `stop` (the caller hung up,
// or a forwarding took the call) or until the stream drops. A stream without a valid `start` within
// VOICE_STREAM_START_TIMEOUT_MS is closed: anyone can open one. The socket (admission, pings, faults, close codes) is
// the shared socket loop's (voice/socket-loop.ts); each carrier gives its frames' codec and its call commands.

/** A carrier's frame as the stream reads it. */
export type StreamInput =
  /** Telnyx's first frame may carry the stream's token. */
  | { kind: 'connected', token?: string }
  | { kind: 'start', streamId: string, carrierCallId: string, token: string | undefined }
  | { kind: 'media', pcm: Int16Array }
  | { kind: 'mark', name: string }
  | { kind: 'dtmf', digit: string }
  | { kind: 'ignored' }
  | { kind: 'stop' }
  | { kind: 'invalid', problem: string }

export interface CarrierStream {
  carrier: 'twilio' | 'telnyx'
  parse: (data: Buffer, isBinary: boolean) => StreamInput
  transport: (socket: WebSocket, loop: SocketLoop, streamId: string, actions: Pick<Transport, 'forward' | 'sendDigits'>) => PlayedTransport
  /** Puts the live call through to a number; throws (keeping nothing) when it cannot. */
  forward: (deps: TelephonyDeps, call: CallRow, carrierCallId: string, request: ForwardRequest) => Promise<void>
  /** Plays keypad tones to the other side: by leaving this stream (Twilio's <Play digits>), or on it (Telnyx's send_dtmf). */
  sendKeys?: (deps: TelephonyDeps, call: CallRow, carrierCallId: string, digits: string, state: Conversation) => Promise<void>
  pressKeys?: (deps: TelephonyDeps, call: CallRow, carrierCallId: string, digits: string) => Promise<void>
  /** Ends the carrier's call (its stream dropped, or the session ended a call that outlives its stream). */
  hangup: (deps: TelephonyDeps, call: CallRow, carrierCallId: string) => Promise<void>
  /**
   * The call goes on when its stream closes (Telnyx's media streaming is a fork of the call), so a call the session
   * ends (the agent hung up, a machine answered, a limit) is hung up once the last words were played. Twilio's call
   * ends with its <Connect><Stream>.
   */
  outlivesStream?: boolean
}

/** `started`: the stream is tied to its call (its token taken), so it no longer counts as pending (StreamAdmission). */
export function acceptCarrierStream (socket: WebSocket, carrier: CarrierStream, deps: TelephonyDeps, live: LiveCalls, started: () => void, headerToken?: string): void {
  const { log } = deps
  const { streamTimeoutMs: timeoutMs, streamStartTimeoutMs: startTimeoutMs } = deps.config.voice
  let token = headerToken
  let session: Session | undefined
  let transport: PlayedTransport | undefined
  let carrierCallId: string | undefined
  let starting = false
  let stopped = false
  /** A forwarding (or keys sent) is taking the call: the stream ending now is not the call ending. */
  let forwarding = false
  /** Media that came while the call was being opened: the session keeps what it can use (Session.audio). */
  let opening: Int16Array[] = []

  const loop = new SocketLoop(socket, {
    receive (data, isBinary) {
      const input = carrier.parse(data, isBinary)
      switch (input.kind) {
        case 'connected':
          token ??= input.token
          return
        case 'start':
          if (starting) return 'a second start'
          starting = true
          open(input).catch((err: unknown) => {
            log.error({ err }, 'the media stream could not open its call')
            loop.fail('protocol_error', 'the call could not be opened')
          })
          return
        case 'media':
          // Two seconds of 20 ms frames at most: a start whose call takes longer to open loses the earliest.
          if (session === undefined && starting && opening.push(input.pcm) > 100) opening.shift()
          session?.audio(input.pcm)
          return
        case 'mark':
          transport?.marked(input.name)
          return
        case 'dtmf':
          session?.keypad(input.digit)
          return
        case 'stop':
          stopped = true
          session?.hangup('user_hangup')
          return
        case 'ignored': return
        case 'invalid': return input.problem
      }
    },
    gone (reason) {
      if (session === undefined || stopped) return
      if (session.finished) {
        if (carrier.outlivesStream !== true || forwarding) return
        stopped = true
        const ended = session
        void carrier.hangup(deps, ended.call, carrierCallId!)
          .catch((err: unknown) => log.warn({ err, callId: ended.call.id, carrier: carrier.carrier }, 'the carrier could not be told to hang up a call the agent ended'))
        return
      }
      if (reason === 'protocol_error') {
        stopped = true
        return session.hangup(reason)
      }
      if (forwarding) return
      // The stream is gone without the carrier's `stop`: the call ends, and the carrier is told so that no caller waits in silence.
      stopped = true
      const held = session
      log.warn({ callId: held.call.id, reason }, 'the media stream dropped; the call ends')
      held.hangup(reason)
      void carrier.hangup(deps, held.call, carrierCallId!)
        .catch((err: unknown) => log.warn({ err, callId: held.call.id, carrier: carrier.carrier }, 'the carrier could not be told to hang up a dropped call'))
    },
    dropped: 'stream_dropped'
  }, { timeoutMs, startTimeoutMs, started, refused: (problem) => log.warn({ problem, carrier: carrier.carrier }, 'media stream refused') })

  const open = async (start: Extract<StreamInput, { kind: 'start' }>) => {
    const given = start.token ?? token
    const opened = given === undefined || given === '' ? undefined : await takeStreamToken(deps.db, hashToken(given), carrier.carrier)
    if (opened === undefined) return loop.refuse(CLOSE.forbidden, 'invalid_stream_token', 'the stream token is unknown, spent or expired, or its call has ended')
    const { call, resume } = opened
    // The token is the call's: its stream belongs to the same carrier call (an outbound call's id may not be stored yet).
    if (call.carrier_call_id !== start.carrierCallId && !await setCarrierCallId(deps.db, call.id, start.carrierCallId)) {
      return loop.refuse(CLOSE.forbidden, 'invalid_stream_token', 'the stream token belongs to another call')
    }
    carrierCallId = start.carrierCallId
    // The agent's last words are played before the stream stops; a failure leaves the call on this stream.
    const leaving = async (leave: () => Promise<void>) => {
      await transport!.drain()
      forwarding = true
      try {
        await leave()
      } catch (err) {
        forwarding = false
        throw err
      }
    }
    const { sendKeys, pressKeys } = carrier
    transport = carrier.transport(socket, loop, start.streamId, {
      forward: async (request) => { await leaving(async () => { await carrier.forward(deps, call, start.carrierCallId, request) }) },
      sendDigits: sendKeys !== undefined
        ? async (digits, state) => { await leaving(async () => { await sendKeys(deps, call, start.carrierCallId, digits, state) }) }
        : pressKeys === undefined ? undefined : async (digits) => { await pressKeys(deps, call, start.carrierCallId, digits) }
    })
    session = Session.open(deps, call, transport, { resume })
    for (const pcm of opening) session.audio(pcm)
    opening = []
    live.add(session)
    loop.attach()
  }
}
