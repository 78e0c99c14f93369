import type { WebSocket } from 'ws'
import type { EndReason } from './session.ts'

// The socket handling both call streams share (DESIGN.md, "Conversation core"): the admission hand-off and
// the start deadline, pings and the time-out, a reader that stopped reading, messages handed to the transport's
// codec, a fault told to the far end and closed with its code, and the socket's end mapped to the call's end.
// A transport only converts messages and events (transports/browser.ts, transports/twilio.ts).

/** WebSocket close codes a stream's far end sees (docs/voice.md, "How a call closes"). */
export const CLOSE = { normal: 1000, tooLarge: 1009, protocol: 4400, forbidden: 4403, timeout: 4408 } as const

/** Time for the loop, injected so that its tests step it instead of sleeping. */
export interface LoopClock {
  now: () => number
  /** Runs `run` every `ms`; answers the cancel. */
  every: (ms: number, run: () => void) => () => void
  /** Runs `run` once after `ms`; answers the cancel. */
  after: (ms: number, run: () => void) => () => void
}

export const systemClock: LoopClock = {
  now: () => Date.now(),
  every: (ms, run) => {
    const timer = setInterval(run, ms)
    return () => clearInterval(timer)
  },
  after: (ms, run) => {
    const timer = setTimeout(run, ms)
    return () => clearTimeout(timer)
  }
}

/** Why the loop gives a stream up: the call's end reason, and what the far end is told. */
export interface StreamFault { reason: Extract<EndReason, 'protocol_error' | 'stream_timeout'>, problem: string }

/** What a transport gives the loop. */
export interface StreamCodec {
  /** Converts one message and hands it on; answers a problem when it is malformed (the stream fails `protocol_error`). */
  receive: (data: Buffer, isBinary: boolean) => string | undefined
  /** Tells the far end why its stream is refused or fails, where its protocol can (the browser's `error` event). */
  tell?: (code: string, problem: string) => void
  /** Ends the call of an attached stream that failed or closed (a carrier may need more than the session's end). */
  gone: (reason: EndReason) => void
  /** How a socket that closes without a fault ends the call: `user_hangup` for a browser, `stream_dropped` on the phone. */
  dropped: EndReason
}

export interface LoopOptions {
  /** VOICE_STREAM_TIMEOUT_MS: nothing heard for this long (no message, no pong) fails the stream `stream_timeout`. */
  timeoutMs: number
  /** VOICE_STREAM_START_TIMEOUT_MS: a stream not attached to its call by then fails `stream_timeout` (4408). */
  startTimeoutMs: number
  /** The admission's hand-off (StreamAdmission.started): the stream is tied to its call and no longer pending. */
  started: () => void
  /** Told each fault and refusal, for the log. */
  refused?: (problem: string) => void
  clock?: LoopClock
}

/** Agent audio the far end has not read yet past which it counts as gone (a client that stopped reading). */
export const MAX_BUFFERED_BYTES = 1024 * 1024

const CLOSE_OF: Record<StreamFault['reason'], number> = { protocol_error: CLOSE.protocol, stream_timeout: CLOSE.timeout }

/** A close frame's reason holds at most 123 bytes: a longer one makes ws throw. Cut on a character, not a byte. */
function closeReason (problem: string): string {
  let reason = problem.slice(0, 123)
  while (Buffer.byteLength(reason) > 123) reason = reason.slice(0, -1)
  return reason
}

export class SocketLoop {
  readonly #socket: WebSocket
  readonly #codec: StreamCodec
  readonly #options: LoopOptions
  #heard: number
  #attached = false
  #fault: StreamFault | undefined
  #closing = false
  readonly #stopPings: () => void
  readonly #stopStartDeadline: () => void

  constructor (socket: WebSocket, codec: StreamCodec, options: LoopOptions) {
    this.#socket = socket
    this.#codec = codec
    this.#options = options
    const clock = options.clock ?? systemClock
    this.#heard = clock.now()
    const { timeoutMs, startTimeoutMs } = options
    this.#stopPings = clock.every(Math.max(50, Math.floor(timeoutMs / 3)), () => {
      if (clock.now() - this.#heard > timeoutMs) this.fail('stream_timeout', `nothing was heard from the stream for ${timeoutMs} ms`)
      else if (socket.bufferedAmount > MAX_BUFFERED_BYTES) this.fail('stream_timeout', 'the far end stopped reading')
      else if (socket.readyState === socket.OPEN) socket.ping()
    })
    this.#stopStartDeadline = clock.after(startTimeoutMs, () => this.fail('stream_timeout', `no valid start within ${startTimeoutMs} ms`))
    socket.on('pong', () => { this.#heard = clock.now() })
    socket.on('message', (data: Buffer, isBinary: boolean) => {
      this.#heard = clock.now()
      if (this.#fault !== undefined) return
      const problem = codec.receive(data, isBinary)
      if (problem !== undefined) this.fail('protocol_error', problem)
    })
    // ws reports a message over maxPayload (and a broken frame) as an error, then closes (1009 for the size).
    socket.on('error', () => this.fail('protocol_error', 'the message was too large or malformed'))
    socket.on('close', (code: number) => {
      this.#stop()
      if (code === CLOSE.tooLarge) this.fail('protocol_error', 'the message was too large')
      else if (this.#attached && this.#fault === undefined) codec.gone(codec.dropped)
    })
  }

  /** The stream is tied to its call (its session open): no longer pending; its faults and its close now end the call. */
  attach (): void {
    if (this.#attached) return
    this.#attached = true
    this.#stopStartDeadline()
    this.#options.started()
    // A stream that failed or closed while its call was being opened ends that call now.
    if (this.#fault !== undefined) this.#codec.gone(this.#fault.reason)
    else if (this.#socket.readyState !== this.#socket.OPEN) this.#codec.gone(this.#codec.dropped)
  }

  /** Whether a message may still be taken (no fault yet, the socket open). */
  get open (): boolean {
    return this.#fault === undefined && this.#socket.readyState === this.#socket.OPEN
  }

  send (data: string | Buffer): void {
    if (this.#socket.readyState === this.#socket.OPEN) this.#socket.send(data, { binary: typeof data !== 'string' })
  }

  /**
   * The stream fails: the far end is told, the call ends with `reason`, and the socket closes with the reason's
   * code — once the call has ended (the session closes it, after its last events), at once when there is none yet.
   */
  fail (reason: StreamFault['reason'], problem: string): void {
    if (this.#fault !== undefined) return
    this.#fault = { reason, problem }
    this.#options.refused?.(problem)
    this.#codec.tell?.(reason, problem)
    if (this.#attached) this.#codec.gone(reason)
    else this.close()
  }

  /** The stream is refused before it joins a call (its token unknown or spent): told why, closed with `code`. */
  refuse (code: number, errorCode: string, problem: string): void {
    if (this.#closing) return
    this.#options.refused?.(problem)
    this.#codec.tell?.(errorCode, problem)
    this.#closeNow(code, problem)
  }

  /**
   * Closes the socket (the session ended): with the fault's code after a fault; else when `ready` (a carrier's
   * last words played) with 1000.
   */
  close (ready: Promise<void> = Promise.resolve()): void {
    const fault = this.#fault
    if (fault !== undefined) return this.#closeNow(CLOSE_OF[fault.reason], fault.problem)
    void ready.then(() => this.#closeNow(CLOSE.normal, ''))
  }

  #closeNow (code: number, problem: string): void {
    this.#stop()
    const socket = this.#socket
    if (this.#closing || (socket.readyState !== socket.OPEN && socket.readyState !== socket.CONNECTING)) return
    this.#closing = true
    socket.close(code, closeReason(problem))
  }

  #stop (): void {
    this.#stopPings()
    this.#stopStartDeadline()
  }
}
