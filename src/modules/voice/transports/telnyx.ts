import type { WebSocket } from 'ws'
import { mulawDecode, mulawEncodeHalved, resample } from '../audio.ts'
import { KEY } from '../keypad.ts'
import type { SessionEvent, Transport } from '../session.ts'
import type { SocketLoop } from '../socket-loop.ts'
import { playedMarks, type PlayedTransport } from './played.ts'

// Telnyx's Media Streaming over WebSocket (developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket):
// JSON text frames. In: connected (with the stream's auth token when one was set), start (stream_id, the call's
// call_control_id, media_format), media (base64 RTP payload, no headers, of the track asked for), mark (a mark we
// sent was played), dtmf, error, stop. Out (bidirectional RTP mode): media, mark, clear. Audio is PCMU at 8 kHz,
// as the commands ask (stream_codec and stream_bidirectional_codec PCMU), converted here to and from the core's
// 16 kHz PCM16. The socket itself is the shared socket loop's; the call around it is the telephony module's.

export type TelnyxInput =
  | { kind: 'connected', token: string | undefined }
  | { kind: 'start', streamId: string, callControlId: string }
  | { kind: 'media', pcm: Int16Array }
  | { kind: 'mark', name: string }
  | { kind: 'dtmf', digit: string }
  /** Error reports and the other track: not part of the conversation. */
  | { kind: 'ignored' }
  | { kind: 'stop' }
  | { kind: 'invalid', problem: string }

// 20 ms of 8 kHz µ-law is 160 bytes; more than a second in one frame is not a live call.
const MAX_MEDIA_BYTES = 8000
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/
// Telnyx's ids as its reference shows them: a stream's UUID, a call_control_id such as `v3:MdI91X4lWF…`.
const STREAM_ID = /^[0-9A-Za-z-]{1,64}$/
export const CALL_CONTROL_ID = /^v[0-9]:[A-Za-z0-9_-]{1,200}$/

const str = (value: unknown): value is string => typeof value === 'string' && value !== ''

export function parseTelnyxMessage (data: Buffer, isBinary: boolean): TelnyxInput {
  if (isBinary) return { kind: 'invalid', problem: 'Telnyx media streaming frames are text' }
  let message: any
  try {
    message = JSON.parse(data.toString('utf8'))
  } catch {
    return { kind: 'invalid', problem: 'a frame must be JSON' }
  }
  if (typeof message !== 'object' || message === null) return { kind: 'invalid', problem: 'a frame must be a JSON object' }
  switch (message.event) {
    case 'connected': {
      const token = message.connected?.['x-telnyx-streaming-auth-token']
      return { kind: 'connected', token: str(token) ? token : undefined }
    }
    case 'start': {
      const start = message.start
      if (!str(message.stream_id) || !STREAM_ID.test(message.stream_id) || typeof start !== 'object' || start === null || !str(start.call_control_id) || !CALL_CONTROL_ID.test(start.call_control_id)) {
        return { kind: 'invalid', problem: 'start needs stream_id and start.call_control_id' }
      }
      const format = start.media_format
      if (format !== undefined && (format?.encoding !== 'PCMU' || Number(format?.sample_rate) !== 8000)) {
        return { kind: 'invalid', problem: 'the stream must carry PCMU at 8000 Hz (stream_codec PCMU)' }
      }
      return { kind: 'start', streamId: message.stream_id, callControlId: start.call_control_id }
    }
    case 'media': {
      const payload = message.media?.payload
      // Only the caller's side is asked for (stream_track inbound_track); another track is not ours to hear.
      if (message.media?.track !== undefined && message.media.track !== 'inbound') return { kind: 'ignored' }
      if (typeof payload !== 'string' || payload.length > MAX_MEDIA_BYTES * 4 / 3 + 4 || !BASE64.test(payload)) {
        return { kind: 'invalid', problem: 'media.payload must be base64 PCMU audio of at most one second' }
      }
      return { kind: 'media', pcm: resample(mulawDecode(Buffer.from(payload, 'base64')), 8000, 16_000) }
    }
    case 'mark': return str(message.mark?.name) ? { kind: 'mark', name: message.mark.name } : { kind: 'invalid', problem: 'mark needs mark.name' }
    case 'dtmf': {
      // One key a frame: { event: 'dtmf', dtmf: { digit: '1' } } (the shape pipecat's Telnyx serializer reads).
      const digit = message.dtmf?.digit
      return typeof digit === 'string' && KEY.test(digit) ? { kind: 'dtmf', digit } : { kind: 'invalid', problem: 'dtmf.digit must be one key: 0-9, *, #, A-D' }
    }
    case 'error': return { kind: 'ignored' }
    case 'stop': return { kind: 'stop' }
    default: return { kind: 'invalid', problem: `unknown event ${JSON.stringify(message.event)}` }
  }
}

export type TelnyxTransport = PlayedTransport

/**
 * The transport of one Telnyx stream. Telnyx returns a mark once the audio before it is played (at once when
 * nothing is queued, and on a clear): a close waits for the last one so that a goodbye is not cut off.
 */
export function telnyxTransport (socket: WebSocket, loop: SocketLoop, forward?: Transport['forward'], sendDigits?: Transport['sendDigits']): TelnyxTransport {
  const played = playedMarks(socket, loop, (name) => loop.send(JSON.stringify({ event: 'mark', mark: { name } })))
  return {
    forward,
    // Tones go out through Call Control (send_dtmf), the call staying on this stream.
    sendDigits,
    sendAudio (frame) {
      played.audioSent()
      loop.send(`{"event":"media","media":{"payload":"${mulawEncodeHalved(frame).toString('base64')}"}}`)
    },
    send (event: SessionEvent) {
      if (event.type === 'clear') loop.send('{"event":"clear"}')
    },
    marked: played.marked,
    drain: played.drain,
    close: played.close
  }
}
