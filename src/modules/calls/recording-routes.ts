import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { Type } from 'typebox'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { HttpError, notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, errors, errorSchema, IdParams, ObjectId } from '../../http/schemas.ts'
import { findLinkedRecording, findRecording, signRecordingLink, verifyRecordingLink, type StoredRecording } from './recordings.ts'

const TAGS = ['calls']

const WavFile = Type.String({ format: 'binary', description: 'mono PCM16 WAV, 16 kHz, both sides of the call mixed' })

const RANGE_NOTE = 'A single `Range: bytes=a-b` (also `a-` and `-n`) answers 206 with that part, as audio players ask; ' +
  'several ranges or a malformed header get the whole file, a range past its end 416.'

const recordingAnswers = {
  200: WavFile,
  206: { ...WavFile, description: 'the part the `Range` header asked for' },
  416: { ...errorSchema(416), description: 'the range starts past the end of the file (`Content-Range: bytes */<size>`)' }
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

/** Answers the recording, or the part of it that the `Range` header asks for. */
async function sendRecording (reply: FastifyReply, recording: StoredRecording, range: string | undefined) {
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

/** The recording routes of the API (x-api-key), registered by the calls routes. */
export const recordingRoutes: FastifyPluginAsyncTypebox<{ db: DB, config: Config }> = async (app, { db, config }) => {
  app.get('/call/:id/recording', {
    schema: {
      tags: TAGS,
      summary: "Download a call's recording",
      description: 'The call\'s `recording_url` (agents with `recording_enabled` on the built-in voice engine). ' + RANGE_NOTE +
        ' 404 when the account has no such call or the call has no recording.',
      params: IdParams,
      produces: ['audio/wav'],
      response: { ...recordingAnswers, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    const recording = await findRecording(db, request.userId, request.params.id)
    if (recording === undefined) throw notFound(`recording of call ${request.params.id}`)
    return await sendRecording(reply, recording, request.headers.range)
  })

  app.post('/call/:id/recording-link', {
    schema: {
      tags: TAGS,
      summary: "A link that opens a call's recording without an API key",
      description: `The link works for RECORDING_LINK_SECONDS (now ${config.voice.recordingLinkSeconds} s) for whoever holds it, ` +
        'so hand it on as you would the recording itself. It cannot be revoked, but stops working when the secrets key is rotated.',
      params: IdParams,
      response: {
        200: Type.Object({
          url: Type.String({ description: 'GET it without a key: the WAV file (ranges work as on GET /v1/call/:id/recording)' }),
          expires_at: Type.Integer({ description: 'epoch ms: the link works until then' })
        }),
        ...errors(...AUTH_ERRORS, 404)
      }
    }
  }, async (request) => {
    const recording = await findRecording(db, request.userId, request.params.id)
    if (recording === undefined) throw notFound(`recording of call ${request.params.id}`)
    return signRecordingLink(config, recording.callId)
  })
}

/**
 * The route a signed recording link points to: no API key, the signature is the credential. app.ts registers
 * it beside the other keyless routes, rate-limited per address.
 */
export const recordingLinkRoutes: FastifyPluginAsyncTypebox<{ db: DB }> = async (app, { db }) => {
  app.get('/v1/recordings/:id.wav', {
    schema: {
      tags: TAGS,
      summary: 'Open a recording through a signed link',
      operationId: 'getRecordingBySignedLink', // the derived name would carry the `.wav`
      description: 'No API key: the link from POST /v1/call/:id/recording-link, as it was given. ' + RANGE_NOTE +
        ' 403 `invalid_recording_link` for a signature that does not match, `recording_link_expired` after its time.',
      security: [],
      params: Type.Object({ id: ObjectId }),
      querystring: Type.Object({
        expires: Type.String({ maxLength: 20, description: 'epoch ms, as the link gives it' }),
        signature: Type.String({ maxLength: 100, description: 'as the link gives it' })
      }),
      produces: ['audio/wav'],
      response: { ...recordingAnswers, ...errors(400, 403, 404, 429) }
    }
  }, async (request, reply) => {
    const { id } = request.params
    verifyRecordingLink(id, request.query.expires, request.query.signature)
    const recording = await findLinkedRecording(db, id)
    if (recording === undefined) throw notFound(`recording of call ${id}`)
    return await sendRecording(reply, recording, request.headers.range)
  })
}
