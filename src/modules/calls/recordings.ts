import { createHmac, timingSafeEqual } from 'node:crypto'
import type { FastifyReply } from 'fastify'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { deriveKey } from '../../db/secrets.ts'
import { HttpError } from '../../http/errors.ts'
import { findLinkedRecordingInfo, findRecordingInfo, recordingBytes, upsertRecording, type RecordingInfo } from './queries.ts'

// A call's recording (recording_enabled): one mono WAV of both sides, kept with the call and deleted with it.
// The API serves it with the account's key, and through signed links that open it without one for a while
// (a player or a colleague), so that the key never has to leave the server that holds it.

/** What a call's `recording_url` says: the keyed route that serves the recording. */
export function recordingUrl (config: Pick<Config, 'publicBaseUrl'>, callId: string): string {
  return `${config.publicBaseUrl}/v1/call/${callId}/recording`
}

/** Stores a call's recording (replacing an earlier one); false when the account has no such call. */
export async function storeRecording (db: DB, recording: { callId: string, userId: string, durationMs: number, wav: Buffer }): Promise<boolean> {
  return await upsertRecording(db, recording.userId, recording.callId, Math.max(0, Math.round(recording.durationMs)), recording.wav)
}

/** A recording of the account's: its size and length, and its bytes on demand. */
export async function findRecording (db: DB, userId: string, callId: string): Promise<StoredRecording | undefined> {
  return withBytes(db, await findRecordingInfo(db, userId, callId))
}

/** The recording a signed link names, whoever asks (verifyRecordingLink checked the link first). */
export async function findLinkedRecording (db: DB, callId: string): Promise<StoredRecording | undefined> {
  return withBytes(db, await findLinkedRecordingInfo(db, callId))
}

export interface StoredRecording extends RecordingInfo {
  /** `length` bytes of the WAV file from `offset`; the whole file without arguments. */
  read: (offset?: number, length?: number) => Promise<Buffer>
}

function withBytes (db: DB, info: RecordingInfo | undefined): StoredRecording | undefined {
  if (info === undefined) return undefined
  return {
    ...info,
    // Deleted in between (its call was deleted): the bytes are gone, which only a race can show.
    read: async (offset = 0, length = info.size - offset) => await recordingBytes(db, info.callId, offset, length) ?? Buffer.alloc(0)
  }
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

/** Answers the recording (the API's routes and the console's), or the part of it that the `Range` header asks for. */
export async function sendRecording (reply: FastifyReply, recording: StoredRecording, range: string | undefined) {
  reply.header('accept-ranges', 'bytes')
  const part = byteRange(range, recording.size)
  if (part === 'unsatisfiable') {
    reply.header('content-range', `bytes */${recording.size}`)
    throw new HttpError(416, 'range_not_satisfiable', `the recording has ${recording.size} bytes; the range ${range} lies past its end`)
  }
  reply.header('content-disposition', `inline; filename="${recording.callId}.wav"`)
  reply.header('cache-control', 'private, no-store')
  reply.type('audio/wav')
  if (part === 'whole') return reply.send(await recording.read() as never) // bytes; the schema documents the WAV they are
  reply.header('content-range', `bytes ${part.start}-${part.end}/${recording.size}`)
  return reply.code(206).send(await recording.read(part.start, part.end - part.start + 1) as never)
}
