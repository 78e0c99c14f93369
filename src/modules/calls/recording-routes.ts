import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { ConcurrencyLimits, Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { notFound } from '../../http/errors.ts'
import { KEYLESS } from '../../http/rate-limit.ts'
import { AUTH_ERRORS, errors, errorSchema, IdParams, ObjectId } from '../../http/schemas.ts'
import { findLinkedRecording, findRecording, sendRecording, signRecordingLink, verifyRecordingLink } from './recordings.ts'

const TAGS = ['calls']

const WavFile = Type.String({
  format: 'binary',
  description: 'PCM16 WAV, 16 kHz: mono, both sides of the call mixed; with `channels=2`, stereo, the caller left and the agent right'
})

const ChannelsQuery = {
  channels: Type.Optional(Type.Integer({
    minimum: 1,
    maximum: 2,
    description: '1 (the default): a mono WAV, both sides mixed. 2: a stereo WAV of the two tracks, the caller left and the agent right ' +
      '(calls recorded since two-track recording; 409 `recording_not_stereo` for an older, mono recording)'
  }))
}

const RANGE_NOTE = 'A single `Range: bytes=a-b` (also `a-` and `-n`) answers 206 with that part, as audio players ask; ' +
  'several ranges or a malformed header get the whole file, a range past its end 416. The file is streamed from the database; ' +
  'RECORDING_DOWNLOADS_PER_ACCOUNT downloads of one account run at once (default 4; one more: 429) and RECORDING_DOWNLOADS_MAX in all (503), both with Retry-After. ' +
  'During a call the recording so far is served.'

const recordingAnswers = {
  200: WavFile,
  206: { ...WavFile, description: 'the part the `Range` header asked for' },
  409: { ...errorSchema(409), description: '`recording_not_stereo`: `channels=2` for a recording made before two tracks were recorded' },
  416: { ...errorSchema(416), description: 'the range starts past the end of the file (`Content-Range: bytes */<size>`)' },
  503: { ...errorSchema(503), description: '`downloads_busy`: the process streams RECORDING_DOWNLOADS_MAX recordings already' }
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
      querystring: Type.Object(ChannelsQuery),
      produces: ['audio/wav'],
      response: { ...recordingAnswers, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    const recording = await findRecording(db, request.userId, request.params.id, request.query.channels === 2 ? 2 : 1)
    if (recording === undefined) throw notFound(`recording of call ${request.params.id}`)
    return await sendRecording(reply, recording, request.headers.range, config.concurrency)
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
          url: Type.String({ description: 'GET it without a key: the WAV file (ranges and `&channels=2` work as on GET /v1/call/:id/recording)' }),
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

/** The route a signed recording link points to: no API key, the signature is the credential (KEYLESS: limited per address). */
export const recordingLinkRoutes: FastifyPluginAsyncTypebox<{ db: DB, limits: ConcurrencyLimits }> = async (app, { db, limits }) => {
  app.get('/v1/recordings/:id.wav', {
    config: KEYLESS,
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
        signature: Type.String({ maxLength: 100, description: 'as the link gives it' }),
        ...ChannelsQuery
      }),
      produces: ['audio/wav'],
      response: { ...recordingAnswers, ...errors(400, 403, 404, 429) }
    }
  }, async (request, reply) => {
    const { id } = request.params
    verifyRecordingLink(id, request.query.expires, request.query.signature)
    const recording = await findLinkedRecording(db, id, request.query.channels === 2 ? 2 : 1)
    if (recording === undefined) throw notFound(`recording of call ${id}`)
    return await sendRecording(reply, recording, request.headers.range, limits)
  })
}
