import type { WebSocket } from 'ws'
import { bufferToPcm, pcmToBuffer } from '../audio.ts'
import type { EndReason, Session, SessionEvent, Transport } from '../session.ts'

// The browser's stream (docs/voice.md, "Browser protocol"): binary messages are 16 kHz PCM16 mono audio
// both ways, text messages JSON events. A typed turn that is too long, or comes while the agent still answers
// the last one, is refused with an `error` event and the call goes on; anything malformed ends the session as a
// protocol error.

/** WebSocket close codes the browser sees. */
export const CLOSE = { normal: 1000, protocol: 4400, forbidden: 4403, timeout: 4408 } as const

const REASON_CODES: Partial<Record<EndReason, number>> = { protocol_error: CLOSE.protocol, stream_timeout: CLOSE.timeout }

/** Agent audio the browser has not read yet past which it counts as gone (a client that stopped reading). */
const MAX_BUFFERED_BYTES = 1024 * 1024

const MAX_TEXT_LENGTH = 2000

export function browserTransport (socket: WebSocket): Transport & { reason: EndReason | undefined } {
  return {
    reason: undefined,
    sendAudio (frame) {
      if (socket.readyState === socket.OPEN) socket.send(pcmToBuffer(frame), { binary: true })
    },
    send (event: SessionEvent) {
      if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(event))
    },
    close () {
      if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(REASON_CODES[this.reason ?? 'user_hangup'] ?? CLOSE.normal)
    }
  }
}

/** What one message from the browser asks, or why it is refused. */
type BrowserInput =
  | { kind: 'audio', pcm: Int16Array }
  | { kind: 'text', text: string }
  | { kind: 'hangup' }
  /** Well formed, not taken: the browser is told why, the call goes on. */
  | { kind: 'refused', code: string, problem: string }
  | { kind: 'invalid', problem: string }

// Text the database can store: no NUL, no lone surrogates (DESIGN.md, "Security rules").
// eslint-disable-next-line no-control-regex
const INVALID_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

function parseBrowserMessage (data: Buffer, isBinary: boolean): BrowserInput {
  if (isBinary) {
    if (data.length === 0 || data.length % 2 !== 0) return { kind: 'invalid', problem: 'audio must be whole 16-bit samples' }
    return { kind: 'audio', pcm: bufferToPcm(data) }
  }
  let event: unknown
  try {
    event = JSON.parse(data.toString('utf8'))
  } catch {
    return { kind: 'invalid', problem: 'a text message must be JSON' }
  }
  if (typeof event !== 'object' || event === null || Array.isArray(event)) return { kind: 'invalid', problem: 'an event must be a JSON object' }
  const { type, text } = event as { type?: unknown, text?: unknown }
  if (type === 'hangup') return { kind: 'hangup' }
  if (type === 'text') {
    if (typeof text !== 'string' || text.trim() === '' || INVALID_TEXT.test(text)) {
      return { kind: 'invalid', problem: `text must be 1 to ${MAX_TEXT_LENGTH} characters of valid text` }
    }
    if (text.length > MAX_TEXT_LENGTH) return { kind: 'refused', code: 'text_too_long', problem: `a typed turn has at most ${MAX_TEXT_LENGTH} characters; this one was not taken` }
    return { kind: 'text', text: text.trim() }
  }
  return { kind: 'invalid', problem: `unknown event type ${JSON.stringify(type)}` }
}

/**
 * Feeds a browser's socket into its session until either ends: messages, liveness (a ping every third of
 * the time-out; nothing heard for the whole time-out ends the call), and a reader that stopped reading.
 */
export function connectBrowser (socket: WebSocket, session: Session, transport: ReturnType<typeof browserTransport>, timeoutMs: number): void {
  let heard = Date.now()
  const fail = (reason: EndReason, problem: string) => {
    if (transport.reason !== undefined) return
    transport.reason = reason
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify({ type: 'error', code: reason, message: problem }))
    session.hangup(reason)
  }
  /** A message not taken: the browser is told, the call goes on. */
  const refuse = (code: string, problem: string) => {
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify({ type: 'error', code, message: problem }))
  }
  const alive = setInterval(() => {
    if (Date.now() - heard > timeoutMs) return fail('stream_timeout', `nothing was heard from the browser for ${timeoutMs} ms`)
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES) return fail('stream_timeout', 'the browser stopped reading')
    if (socket.readyState === socket.OPEN) socket.ping()
  }, Math.max(50, Math.floor(timeoutMs / 3)))
  socket.on('pong', () => { heard = Date.now() })
  socket.on('message', (data: Buffer, isBinary: boolean) => {
    heard = Date.now()
    const input = parseBrowserMessage(data, isBinary)
    if (input.kind === 'audio') session.audio(input.pcm)
    else if (input.kind === 'text') {
      if (!session.text(input.text)) refuse('turn_in_progress', 'the agent is still answering the last typed turn; send the next one once it has finished speaking')
    } else if (input.kind === 'hangup') session.hangup('user_hangup')
    else if (input.kind === 'refused') refuse(input.code, input.problem)
    else fail('protocol_error', input.problem)
  })
  // ws closes a socket whose message is over maxPayload with 1009 and reports an error first.
  socket.on('error', () => fail('protocol_error', 'the message was too large or malformed'))
  socket.on('close', (code: number) => {
    clearInterval(alive)
    if (code === 1009) fail('protocol_error', 'the message was too large')
    session.hangup(transport.reason ?? 'user_hangup')
  })
  void session.done.then(() => clearInterval(alive))
}
