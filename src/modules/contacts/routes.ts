import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { AnyObject } from '../../db/shapes.ts'
import { notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, CallStatus, CallType, COMPONENT, Direction, E164, Email, EpochMs, errors, IdParams, Nullable, ObjectId, Paging } from '../../http/schemas.ts'
import { requireOwners } from '../account/owners.ts'
import { ContactName, MEMORY_MAX_CALLS, MEMORY_MAX_CHARS } from './contacts.ts'
import { contactCalls, countContactCalls, deleteContact, findContact, listContacts, renameContact, type ContactRow } from './queries.ts'

const TAGS = ['contacts']

const contactFields = {
  _id: ObjectId,
  phone_number: Nullable(E164, 'what the contact is known by: a phone number or (web calls) an e-mail address, never both'),
  email: Nullable(Email, 'lower-cased'),
  name: Nullable(ContactName, 'null: not known yet (set by PATCH, or from a call\'s extracted name: docs/contacts.md)'),
  customer_id: Nullable(ObjectId, 'the customer of the agents that talked to the contact'),
  workspace_id: Nullable(ObjectId, 'the workspace of the agents that talked to the contact'),
  call_count: Type.Integer({ description: 'the calls linked to the contact' }),
  created_at: EpochMs,
  updated_at: EpochMs,
  last_call_at: { ...EpochMs, description: 'epoch ms: when the contact\'s latest call started' }
}

export const Contact = Type.Object(contactFields, {
  [COMPONENT]: 'Contact',
  description: 'A person the account\'s agents talk to, known by a phone number or an e-mail address (docs/contacts.md).'
})

export const ContactCall = Type.Object({
  _id: ObjectId,
  call_type: CallType,
  direction: Direction,
  agent_id: ObjectId,
  agent_name: Type.String(),
  call_status: CallStatus,
  start_timestamp: EpochMs,
  end_timestamp: Nullable(EpochMs, 'null while the call runs'),
  call_summary: Nullable(Type.String()),
  custom_analysis_data: Nullable(AnyObject, 'the fields the analysis extracted'),
  collected_data: Nullable(AnyObject, 'the fields collected during the call')
}, { [COMPONENT]: 'ContactCall', description: 'One of a contact\'s calls (GET /v1/call/:id has the whole call).' })

export const ContactDetail = Type.Object({
  ...contactFields,
  calls: Type.Array(ContactCall, { description: 'the contact\'s calls, newest first: `calls_limit` of them from `calls_offset`' })
}, { [COMPONENT]: 'ContactDetail' })

const ListQuery = Type.Object({
  search: Type.Optional(Type.String({ maxLength: 200, description: 'part of the phone number (its digits), e-mail address or name; case-insensitive' })),
  customer_id: Type.Optional(ObjectId),
  workspace_id: Type.Optional(ObjectId),
  limit: Paging.limit,
  offset: Paging.skip
})

const DetailQuery = Type.Object({
  calls_limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
  calls_offset: Paging.skip
})

const toContact = (row: ContactRow, callCount: number) => ({
  _id: row.id,
  phone_number: row.phone_number,
  email: row.email,
  name: row.name,
  customer_id: row.customer_id,
  workspace_id: row.workspace_id,
  call_count: callCount,
  created_at: row.created_at.getTime(),
  updated_at: row.updated_at.getTime(),
  last_call_at: row.last_call_at.getTime()
})

/** The contacts API (docs/contacts.md). Another account's contact is a missing one: 404. */
export const contactRoutes: FastifyPluginAsyncTypebox<{ db: DB }> = async (app, { db }) => {
  const detail = async (userId: string, row: ContactRow, page: { limit: number, offset: number }) => {
    const { rows, total } = await contactCalls(db, userId, row.id, page)
    return {
      ...toContact(row, total),
      calls: rows.map((call) => ({
        _id: call.id,
        call_type: call.call_type,
        direction: call.direction,
        agent_id: call.agent_id,
        agent_name: call.agent_name,
        call_status: call.call_status,
        start_timestamp: call.start_timestamp.getTime(),
        end_timestamp: call.end_timestamp?.getTime() ?? null,
        call_summary: call.call_summary,
        custom_analysis_data: call.custom_analysis_data,
        collected_data: call.collected_data
      }))
    }
  }

  app.get('/contacts', {
    schema: {
      tags: TAGS,
      summary: "List the account's contacts",
      description: 'The contact with the latest call first. `customer_id` and `workspace_id` filter as on GET /v1/call/list (404 for one that is not the account\'s).',
      querystring: ListQuery,
      response: { 200: Type.Object({ data: Type.Array(Contact), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() }), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const { search, customer_id: customerId, workspace_id: workspaceId, limit = 100, offset = 0 } = request.query
    const { rows, total } = await listContacts(db, request.userId, { search, customerId, workspaceId }, { limit, offset })
    if (total === 0) await requireOwners(db, request.userId, request.query)
    return { data: rows.map((row) => toContact(row, row.call_count)), total, limit, offset }
  })

  app.get('/contacts/:id', {
    schema: {
      tags: TAGS,
      summary: 'Get a contact with its calls',
      description: 'The calls are newest first, `calls_limit` (default 100, at most 1000) from `calls_offset`; `call_count` says how many there are.',
      params: IdParams,
      querystring: DetailQuery,
      response: { 200: ContactDetail, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const row = await findContact(db, request.userId, request.params.id)
    if (row === undefined) throw notFound(`contact ${request.params.id}`)
    return await detail(request.userId, row, { limit: request.query.calls_limit ?? 100, offset: request.query.calls_offset ?? 0 })
  })

  app.patch('/contacts/:id', {
    schema: {
      tags: TAGS,
      summary: 'Name a contact',
      description: 'A name set here is kept: a later call\'s extracted name only fills a contact without one. `null` forgets it.',
      params: IdParams,
      body: Type.Object({ name: Nullable(ContactName, 'null forgets the name') }),
      response: { 200: Contact, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const row = await renameContact(db, request.userId, request.params.id, request.body.name?.trim() ?? null)
    if (row === undefined) throw notFound(`contact ${request.params.id}`)
    return toContact(row, await countContactCalls(db, request.userId, row.id))
  })

  app.delete('/contacts/:id', {
    schema: {
      tags: TAGS,
      summary: 'Delete a contact and its memory',
      description: `Erases the contact (its number or address, name and times) and unlinks its calls: they stay in the call list, but no later call finds them, so customer memory (the ${MEMORY_MAX_CALLS} latest calls, about ${MEMORY_MAX_CHARS} characters) starts empty. A later call from the same number makes a new contact. The calls themselves (transcripts, summaries, recordings) are not deleted.`,
      params: IdParams,
      response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    if (!await deleteContact(db, request.userId, request.params.id)) throw notFound(`contact ${request.params.id}`)
    return reply.code(204).send(null)
  })
}
