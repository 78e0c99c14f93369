import type { WebSocket } from 'ws'
import { bufferToPcm, pcmToBuffer } from '../audio.ts'
import { KEYS, MAX_KEYPAD_RUN } from '../keypad.ts'
import type { Session, Transport } from '../session.ts'
import { SocketLoop, type LoopOptions } from '../socket-loop.ts'

// The browser's stream (docs/voice.md, "Browser protocol"): binary messages are 16 kHz PCM16 mono audio
// both ways, text messages JSON events. A typed turn that is too long, or comes while the agent still answers
// the last one, is refused with an `error` event and the call goes on; anything malformed ends the session as a
// protocol error (the socket loop tells the browser with an `error` event and closes 4400).

const MAX_TEXT_LENGTH = 2000

/** What one message from the browser asks, or why it is refused. */
type BrowserInput =
  | { kind: 'audio', pcm: Int16Array }
  | { kind: 'text', text: string }
  | { kind: 'dtmf', digits: string }
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
  const { type, text, digits } = event as { type?: unknown, text?: unknown, digits?: unknown }
  if (type === 'hangup') return { kind: 'hangup' }
  if (type === 'dtmf') {
    if (typeof digits !== 'string' || !KEYS.test(digits)) return { kind: 'invalid', problem: 'digits must be keys: 0-9, *, #, A-D' }
    if (digits.length > MAX_KEYPAD_RUN) return { kind: 'refused', code: 'digits_too_long', problem: `a dtmf message has at most ${MAX_KEYPAD_RUN} keys; these were not taken` }
    return { kind: 'dtmf', digits }
  }
  if (type === 'text') {
    if (typeof text !== 'string' || text.trim() === '' || INVALID_TEXT.test(text)) {
      return { kind: 'invalid', problem: `text must be 1 to ${MAX_TEXT_LENGTH} characters of valid text` }
    }
    if (text.length > MAX_TEXT_LENGTH) return { kind: 'refused', code: 'text_too_long', problem: `a typed turn has at most ${MAX_TEXT_LENGTH} characters; this one was not taken` }
    return { kind: 'text', text: text.trim() }
  }
  return { kind: 'invalid', problem: `unknown event type ${JSON.stringify(type)}` }
}

export interface BrowserStream {
  loop: SocketLoop
  transport: Transport
  /** The stream's session is open: its messages go to it from now on. */
  attach: (session: Session) => void
}

/** The codec of a browser's stream over the shared socket loop: its messages in, the session's frames and events out. */
export function browserStream (socket: WebSocket, options: LoopOptions): BrowserStream {
  let session: Session | undefined
  const sendEvent = (event: object) => loop.send(JSON.stringify(event))
  const loop = new SocketLoop(socket, {
    receive (data, isBinary) {
      const input = parseBrowserMessage(data, isBinary)
      if (input.kind === 'invalid') return input.problem
      // Before its session is open a browser's turns have nothing to go to (it is told `ready` once there is).
      if (input.kind === 'refused') sendEvent({ type: 'error', code: input.code, message: input.problem })
      else if (session === undefined) return undefined
      else if (input.kind === 'audio') session.audio(input.pcm)
      else if (input.kind === 'hangup') session.hangup('user_hangup')
      else if (input.kind === 'dtmf') session.keypad(input.digits)
      else if (!session.text(input.text)) {
        sendEvent({ type: 'error', code: 'turn_in_progress', message: 'the agent is still answering the last typed turn; send the next one once it has finished speaking' })
      }
    },
    tell: (code, message) => sendEvent({ type: 'error', code, message }),
    gone: (reason) => session?.hangup(reason),
    dropped: 'user_hangup'
  }, options)
  return {
    loop,
    transport: {
      sendAudio: (frame) => loop.send(pcmToBuffer(frame)),
      send: sendEvent,
      // The agent pressed keys (send_dtmf): the page shows them (and may play their tones).
      sendDigits: async (digits) => sendEvent({ type: 'dtmf', digits }),
      close: () => loop.close()
    },
    attach (opened) {
      session = opened
      loop.attach()
    }
  }
}
