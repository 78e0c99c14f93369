import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { badRequest, notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, E164, EpochMs, errors, Nullable, ObjectId, Paging } from '../../http/schemas.ts'
import { addDoNotCallNumbers, DNC_MAX_BULK, DNC_MAX_NUMBERS, DNC_NOTE_MAX_LENGTH } from './dnc.ts'
import { deleteDoNotCall, findDoNotCall, listDoNotCall, type DoNotCallRow } from './dnc-queries.ts'

const TAGS = ['do-not-call']

const Source = Type.Union([Type.Literal('api'), Type.Literal('console'), Type.Literal('call'), Type.Literal('campaign')], {
  [COMPONENT]: 'DoNotCallSource',
  description: 'who listed the number: api, console, call (the caller asked during a call, through the do_not_call tool), campaign'
})

const Note = Type.String({ maxLength: DNC_NOTE_MAX_LENGTH, description: 'why the number is listed (free text)' })

export const DoNotCallEntry = Type.Object({
  phone_number: E164,
  source: Source,
  call_id: Nullable(ObjectId, 'source call: the call in which the caller asked (null once that call is deleted)'),
  note: Nullable(Note),
  created_at: EpochMs
}, { [COMPONENT]: 'DoNotCallEntry', description: 'A number the account\'s agents must not call (docs/contacts.md, "Do not call").' })

const DoNotCallBulkResult = Type.Object({
  added: Type.Array(E164, { description: 'the numbers listed by this request' }),
  already_listed: Type.Array(E164, { description: 'the numbers that were listed before (left as they were)' })
}, { [COMPONENT]: 'DoNotCallBulkResult' })

const AddBody = Type.Object({
  phone_number: Type.Optional(E164),
  phone_numbers: Type.Optional(Type.Array(E164, { minItems: 1, maxItems: DNC_MAX_BULK, description: `several numbers at once (at most ${DNC_MAX_BULK}); instead of phone_number` })),
  note: Type.Optional(Note)
}, { [COMPONENT]: 'DoNotCallAdd' })

const NumberParams = Type.Object({ phone_number: E164 })

const ListQuery = Type.Object({
  phone_number: Type.Optional(E164),
  limit: Paging.limit,
  offset: Paging.skip
})

const toEntry = (row: DoNotCallRow) => ({
  phone_number: row.phone_number,
  source: row.source,
  call_id: row.call_id,
  note: row.note,
  created_at: row.created_at.getTime()
})

/** The do-not-call list's API (docs/contacts.md, "Do not call"): one list per account. */
export const doNotCallRoutes: FastifyPluginAsyncTypebox<{ db: DB }> = async (app, { db }) => {
  app.post('/dnc', {
    schema: {
      tags: TAGS,
      summary: 'Add numbers to the do-not-call list',
      description: `\`phone_number\` (answers the entry) or \`phone_numbers\` (at most ${DNC_MAX_BULK}; answers which were added): 201 when a number was added, 200 when all were listed already (kept as they were). No outbound call reaches a listed number: make-phone-call answers \`409 do_not_call\`, a scheduled callback is cancelled. At most ${DNC_MAX_NUMBERS} numbers per account (\`409 dnc_limit_reached\`).`,
      body: AddBody,
      response: { 200: Type.Union([DoNotCallEntry, DoNotCallBulkResult]), 201: Type.Union([DoNotCallEntry, DoNotCallBulkResult]), ...errors(...AUTH_ERRORS, 409) }
    }
  }, async (request, reply) => {
    const { phone_number: one, phone_numbers: many, note } = request.body
    if ((one === undefined) === (many === undefined)) throw badRequest('send either phone_number or phone_numbers', 'validation_error')
    const numbers = [...new Set(many ?? [one!])]
    const added = await addDoNotCallNumbers(db, request.userId, numbers.map((number) => ({ phone_number: number, source: 'api', note })))
    reply.code(added.length > 0 ? 201 : 200)
    if (many === undefined) {
      const row = await findDoNotCall(db, request.userId, one!)
      // Taken off again between the insert and this read: the add happened, so answer what was added.
      return row === undefined ? { phone_number: one!, source: 'api' as const, call_id: null, note: note ?? null, created_at: Date.now() } : toEntry(row)
    }
    const fresh = new Set(added)
    return { added, already_listed: numbers.filter((number) => !fresh.has(number)) }
  })

  app.get('/dnc', {
    schema: {
      tags: TAGS,
      summary: 'List the do-not-call list',
      description: 'The newest entry first; `phone_number` finds one number.',
      querystring: ListQuery,
      response: { 200: Type.Object({ data: Type.Array(DoNotCallEntry), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() }), ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => {
    const { phone_number: phoneNumber, limit = 100, offset = 0 } = request.query
    const { rows, total } = await listDoNotCall(db, request.userId, { phoneNumber }, { limit, offset })
    return { data: rows.map(toEntry), total, limit, offset }
  })

  app.delete('/dnc/:phone_number', {
    schema: {
      tags: TAGS,
      summary: 'Take a number off the do-not-call list',
      description: 'The number may be called again. Callbacks cancelled while it was listed stay cancelled.',
      params: NumberParams,
      response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    if (!await deleteDoNotCall(db, request.userId, request.params.phone_number)) throw notFound(`phone number ${request.params.phone_number} on the do-not-call list`)
    return reply.code(204).send(null)
  })
}
