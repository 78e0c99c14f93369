import type { WebSocket } from 'ws'
import { mulawDecode, mulawEncodeHalved, resample } from '../audio.ts'
import { KEY } from '../keypad.ts'
import type { SessionEvent, Transport } from '../session.ts'
import type { SocketLoop } from '../socket-loop.ts'
import { playedMarks, type PlayedTransport } from './played.ts'

// Twilio's Media Streams (bidirectional, <Connect><Stream>): JSON text messages; audio is base64 µ-law at
// 8 kHz, converted here to and from the core's 16 kHz PCM16. In: connected, start, media, mark, dtmf (a key), stop.
// Out: media, mark, clear. The socket itself (pings, faults, close codes) is the shared socket loop's; the
// signalling around it (tokens, the call, forwarding) is the telephony module's.

/** What one message from Twilio says, or why it is refused. */
export type TwilioInput =
  | { kind: 'connected' }
  | { kind: 'start', streamSid: string, callSid: string, accountSid: string, parameters: Record<string, string> }
  | { kind: 'media', pcm: Int16Array }
  | { kind: 'mark', name: string }
  /** The caller pressed a key. */
  | { kind: 'dtmf', digit: string }
  /** Tracks not asked for: not part of the conversation. */
  | { kind: 'ignored' }
  | { kind: 'stop' }
  | { kind: 'invalid', problem: string }

// 20 ms of 8 kHz µ-law is 160 bytes; Twilio sends one frame a message. More than a second in one is not Twilio.
const MAX_MEDIA_BYTES = 8000
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

const str = (value: unknown): value is string => typeof value === 'string' && value !== ''
// Twilio's sids: two letters and 32 hex digits. The stream's is written into every message out as it is.
const STREAM_SID = /^MZ[0-9a-fA-F]{32}$/
export const CALL_SID = /^CA[0-9a-fA-F]{32}$/
const ACCOUNT_SID = /^AC[0-9a-fA-F]{32}$/

export function parseTwilioMessage (data: Buffer, isBinary: boolean): TwilioInput {
  if (isBinary) return { kind: 'invalid', problem: 'Media Streams messages are text' }
  let message: any
  try {
    message = JSON.parse(data.toString('utf8'))
  } catch {
    return { kind: 'invalid', problem: 'a message must be JSON' }
  }
  if (typeof message !== 'object' || message === null) return { kind: 'invalid', problem: 'a message must be a JSON object' }
  switch (message.event) {
    case 'connected': return { kind: 'connected' }
    case 'start': {
      const start = message.start
      if (typeof start !== 'object' || start === null || !STREAM_SID.test(start.streamSid) || !CALL_SID.test(start.callSid) || !ACCOUNT_SID.test(start.accountSid)) {
        return { kind: 'invalid', problem: 'start needs Twilio sids in start.streamSid (MZ…), start.callSid (CA…) and start.accountSid (AC…)' }
      }
      const custom = typeof start.customParameters === 'object' && start.customParameters !== null ? start.customParameters as Record<string, unknown> : {}
      const parameters = Object.fromEntries(Object.entries(custom).filter((entry): entry is [string, string] => typeof entry[1] === 'string'))
      return { kind: 'start', streamSid: start.streamSid, callSid: start.callSid, accountSid: start.accountSid, parameters }
    }
    case 'media': {
      const payload = message.media?.payload
      // Only the caller's side is asked for (tracks: inbound); another track is not ours to hear.
      if (message.media?.track !== undefined && message.media.track !== 'inbound') return { kind: 'ignored' }
      if (typeof payload !== 'string' || payload.length > MAX_MEDIA_BYTES * 4 / 3 + 4 || !BASE64.test(payload)) {
        return { kind: 'invalid', problem: 'media.payload must be base64 µ-law audio of at most one second' }
      }
      const bytes = Buffer.from(payload, 'base64')
      return { kind: 'media', pcm: resample(mulawDecode(bytes), 8000, 16_000) }
    }
    case 'mark': return str(message.mark?.name) ? { kind: 'mark', name: message.mark.name } : { kind: 'invalid', problem: 'mark needs mark.name' }
    case 'dtmf': {
      // One key a message: { event: 'dtmf', streamSid, sequenceNumber, dtmf: { track: 'inbound_track', digit: '1' } }
      // (https://www.twilio.com/docs/voice/media-streams/websocket-messages, "DTMF message").
      const dtmf = message.dtmf
      if (dtmf?.track !== undefined && dtmf.track !== 'inbound_track') return { kind: 'ignored' }
      return typeof dtmf?.digit === 'string' && KEY.test(dtmf.digit) ? { kind: 'dtmf', digit: dtmf.digit } : { kind: 'invalid', problem: 'dtmf.digit must be one key: 0-9, *, #, A-D' }
    }
    case 'stop': return { kind: 'stop' }
    default: return { kind: 'invalid', problem: `unknown event ${JSON.stringify(message.event)}` }
  }
}

export type TwilioTransport = PlayedTransport

/**
 * The transport of one Media Stream. Marks tell when Twilio has played the audio: a close waits for the last
 * one, so that a goodbye is not cut off when the stream (and with it the call) ends.
 */
export function twilioTransport (socket: WebSocket, loop: SocketLoop, streamSid: string, forward?: Transport['forward'], sendDigits?: Transport['sendDigits']): TwilioTransport {
  const send = (message: unknown) => loop.send(JSON.stringify(message))
  const played = playedMarks(socket, loop, (name) => send({ event: 'mark', streamSid, mark: { name } }))
  return {
    forward,
    // Media Streams take no tones from us (messages to Twilio: media, mark, clear): <Play digits> through a call
    // update does, and ends this stream (telephony/calls.ts sendKeys).
    sendDigits,
    keysLeaveStream: true,
    sendAudio (frame) {
      played.audioSent()
      // Fifty of these a second for every call: written as text (the sid and base64 need no escaping).
      loop.send(`{"event":"media","streamSid":"${streamSid}","media":{"payload":"${mulawEncodeHalved(frame).toString('base64')}"}}`)
    },
    send (event: SessionEvent) {
      if (event.type === 'clear') send({ event: 'clear', streamSid })
    },
    marked: played.marked,
    drain: played.drain,
    close: played.close
  }
}
