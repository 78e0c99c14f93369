import { createHmac, timingSafeEqual } from 'node:crypto'
import { Readable } from 'node:stream'
import type { FastifyReply } from 'fastify'
import type { ConcurrencyLimits, Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { deriveKey } from '../../db/secrets.ts'
import { sharedSlots } from '../../http/concurrency.ts'
import { HttpError } from '../../http/errors.ts'
import { appendRecording, findLinkedRecordingInfo, findRecordingInfo, recordingBytes, type RecordingInfo } from './queries.ts'
import { WAV_HEADER_BYTES, wavHeader } from './wav.ts'

// A call's recording (recording_enabled): two tracks, the caller left and the agent right (interleaved stereo), kept
// with the call and deleted with it; recordings made before two tracks have one track, both sides mixed. The voice
// session stores it a few seconds at a time while the call runs; it is read back a window at a time. The API serves
// it as a mono WAV of both sides mixed (what `recording_url` has always given, mixed while it streams) or, on request,
// as the stereo WAV of the two tracks; with the account's key, and through signed links that open it without one for
// a while (a player or a colleague), so that the key never has to leave the server that holds it.

/** The recording's samples: PCM16 at 16 kHz. */
export const RECORDING_RATE = 16_000
/** Bytes read from the database at a time while a recording is sent: what one download holds at most. */
const READ_WINDOW_BYTES = 256 * 1024

/** What a call's `recording_url` says: the keyed route that serves the recording. */
export function recordingUrl (config: Pick<Config, 'publicBaseUrl'>, callId: string): string {
  return `${config.publicBaseUrl}/v1/call/${callId}/recording`
}

/**
 * Appends samples (PCM16 bytes; `channels` 2: interleaved, caller left) to a call's recording; false when the
 * account has no such call, or its recording has another count of channels. `channels` defaults to 1 (mono).
 */
export async function storeRecordingPart (db: DB, part: { callId: string, userId: string, pcm: Buffer, channels?: 1 | 2 }): Promise<boolean> {
  return part.pcm.length === 0 || await appendRecording(db, part.userId, part.callId, part.pcm, part.channels ?? 1)
}

/**
 * A recording of the account's: its length and size, and its bytes on demand, as a WAV file of `channels` channels:
 * 1, both sides mixed; 2, the two tracks (409 for a recording made with one).
 */
export async function findRecording (db: DB, userId: string, callId: string, channels: 1 | 2 = 1): Promise<StoredRecording | undefined> {
  return withBytes(db, await findRecordingInfo(db, userId, callId), channels)
}

/** The recording a signed link names, whoever asks (verifyRecordingLink checked the link first). */
export async function findLinkedRecording (db: DB, callId: string, channels: 1 | 2 = 1): Promise<StoredRecording | undefined> {
  return withBytes(db, await findLinkedRecordingInfo(db, callId), channels)
}

export interface StoredRecording extends RecordingInfo {
  /** Channels of the WAV file served (`channels` is the stored recording's). */
  fileChannels: 1 | 2
  /** Bytes of the WAV file (header and samples stored when it was found). */
  size: number
  /** The WAV file's bytes from `start` up to `end` (exclusive), read a window at a time as the reader takes them. */
  stream: (start?: number, end?: number) => Readable
}

function withBytes (db: DB, found: RecordingInfo | undefined, fileChannels: 1 | 2): StoredRecording | undefined {
  if (found === undefined) return undefined
  const info = found
  if (fileChannels > info.channels) {
    throw new HttpError(409, 'recording_not_stereo', `the recording of call ${info.callId} was made before calls were recorded in two tracks: it has one track, both sides mixed; download it without channels=2`)
  }
  // The mono mix of two tracks: each sample of the file is a frame of the stored samples (4 bytes) mixed.
  const mixed = fileChannels < info.channels
  const pcmBytes = mixed ? info.pcmBytes / 2 : info.pcmBytes
  const size = WAV_HEADER_BYTES + pcmBytes

  /** The stored samples from byte `start` up to `end`, a window at a time. */
  async function * stored (start: number, end: number): AsyncGenerator<Buffer> {
    for (let at = start; at < end;) {
      const parts = await recordingBytes(db, info.callId, at, Math.min(end, at + READ_WINDOW_BYTES))
      // Deleted in between (its call was deleted): the bytes are gone, which only a race can show.
      if (parts.length === 0 || parts[0].offset !== at) throw new Error(`the recording of call ${info.callId} is gone`)
      for (const part of parts) {
        yield part.bytes
        at += part.bytes.length
      }
    }
  }

  /** The mono mix of the two tracks' samples, from byte `start` up to `end` of the mix: whole frames read, cut to the bytes asked. */
  async function * mix (start: number, end: number): AsyncGenerator<Buffer> {
    const first = Math.floor(start / 2)
    let skip = start - first * 2
    let left = end - start
    let carry: Buffer = Buffer.alloc(0)
    for await (const part of stored(first * 4, Math.ceil(end / 2) * 4)) {
      const bytes = carry.length === 0 ? part : Buffer.concat([carry, part])
      const whole = bytes.length - bytes.length % 4
      carry = bytes.subarray(whole)
      if (whole === 0) continue
      const out = mixFrames(bytes.subarray(0, whole)).subarray(skip, skip + left)
      skip = 0
      left -= out.length
      yield out
    }
  }

  async function * bytes (start: number, end: number): AsyncGenerator<Buffer> {
    let at = start
    if (at < WAV_HEADER_BYTES) {
      // The header of the samples stored when the recording was found: a live call's grows on.
      const header = wavHeader(pcmBytes, RECORDING_RATE, fileChannels).subarray(at, Math.min(end, WAV_HEADER_BYTES))
      yield header
      at += header.length
    }
    if (at < end) yield * (mixed ? mix : stored)(at - WAV_HEADER_BYTES, end - WAV_HEADER_BYTES)
  }
  // Byte mode with a small buffer: the next window is read only when the client has taken the last one.
  return { ...info, fileChannels, size, stream: (start = 0, end = size) => Readable.from(bytes(start, end), { objectMode: false, highWaterMark: 64 * 1024 }) }
}

/** Interleaved stereo PCM16 frames mixed down to mono: the two samples of each summed, clipped (as the recorder mixed before two tracks). */
function mixFrames (stereo: Buffer): Buffer {
  const mono = Buffer.allocUnsafe(stereo.length / 2)
  for (let i = 0, j = 0; j < stereo.length; i += 2, j += 4) {
    const sum = stereo.readInt16LE(j) + stereo.readInt16LE(j + 2)
    mono.writeInt16LE(sum > 32767 ? 32767 : sum < -32768 ? -32768 : sum, i)
  }
  return mono
}

// Links are signed with a key derived from the installation's secrets key: nothing to configure, and rotating
// the secrets key (`npm run cli -- secrets rotate`) ends every link given out before.
const LINK_KEY_LABEL = 'recording-links'

const signatureOf = (callId: string, expires: number) =>
  createHmac('sha256', deriveKey(LINK_KEY_LABEL)).update(`recording:${callId}:${expires}`).digest('base64url')

/** A link that opens the recording without an API key until `expires_at` (epoch ms). */
export function signRecordingLink (config: Pick<Config, 'publicBaseUrl' | 'voice'>, callId: string, now = Date.now()): { url: string, expires_at: number } {
  const expires = now + config.voice.recordingLinkSeconds * 1000
  const query = new URLSearchParams({ expires: String(expires), signature: signatureOf(callId, expires) })
  return { url: `${config.publicBaseUrl}/v1/recordings/${callId}.wav?${query.toString()}`, expires_at: expires }
}

/** Throws 403 unless the link's signature is the server's for this call and expiry, and the expiry is ahead. */
export function verifyRecordingLink (callId: string, expires: string, signature: string, now = Date.now()): void {
  const expected = Buffer.from(signatureOf(callId, Number(expires)))
  const given = Buffer.from(signature)
  // Only a decimal expiry was ever signed: "1e13" or " 5" would otherwise reach Number() as the same value.
  if (!/^[0-9]{1,16}$/.test(expires) || given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new HttpError(403, 'invalid_recording_link', 'the recording link is not valid: its signature does not match (altered, or from before the secrets key changed)')
  }
  if (Number(expires) <= now) {
    throw new HttpError(403, 'recording_link_expired', `the recording link expired at ${new Date(Number(expires)).toISOString()}; ask for a new one (POST /v1/call/${callId}/recording-link)`)
  }
}

/** A single byte range of a file of `size` bytes: 'whole' for no (or an unusable) range, 'unsatisfiable' past the end. */
function byteRange (header: string | undefined, size: number): { start: number, end: number } | 'whole' | 'unsatisfiable' {
  const match = header === undefined ? null : /^bytes=(\d{0,15})-(\d{0,15})$/.exec(header.trim())
  if (match === null || (match[1] === '' && match[2] === '')) return 'whole'
  if (match[1] === '') {
    // `-n`: the last n bytes.
    const suffix = Number(match[2])
    return suffix === 0 || size === 0 ? 'unsatisfiable' : { start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(match[1])
  const end = match[2] === '' ? Infinity : Number(match[2])
  if (end < start) return 'whole' // invalid: RFC 9110 says to ignore it
  if (start >= size) return 'unsatisfiable'
  return { start, end: Math.min(end, size - 1) }
}

/**
 * Answers the recording (the API's routes and the console's), or the part of it that the `Range` header asks for,
 * streamed from the database while it holds one of the owner's download slots (429 or 503 when none is free).
 */
export async function sendRecording (reply: FastifyReply, recording: StoredRecording, range: string | undefined, limits: ConcurrencyLimits) {
  reply.header('accept-ranges', 'bytes')
  const part = byteRange(range, recording.size)
  if (part === 'unsatisfiable') {
    reply.header('content-range', `bytes */${recording.size}`)
    throw new HttpError(416, 'range_not_satisfiable', `the recording has ${recording.size} bytes; the range ${range} lies past its end`)
  }
  const { start, end } = part === 'whole' ? { start: 0, end: recording.size - 1 } : part
  let body: Readable
  if (reply.request.method === 'HEAD') {
    // Fastify reads a HEAD's stream to its end: none is read from the database.
    body = Readable.from([])
  } else {
    const release = sharedSlots('downloads', limits).take(recording.userId, reply)
    body = recording.stream(start, end + 1)
    // Ended, failed or abandoned by the client: the stream closes, and the slot is free again.
    body.once('close', release)
  }
  reply.header('content-disposition', `inline; filename="${recording.callId}${recording.fileChannels === 2 ? '-stereo' : ''}.wav"`)
  reply.header('cache-control', 'private, no-store')
  reply.header('content-length', String(end - start + 1))
  reply.type('audio/wav')
  if (part !== 'whole') reply.code(206).header('content-range', `bytes ${start}-${end}/${recording.size}`)
  return reply.send(body as never) // bytes; the schema documents the WAV they are
}
