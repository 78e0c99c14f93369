import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { badRequest, notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, E164, Email, EpochMs, errors, IdParams, Nullable, ObjectId, Paging } from '../../http/schemas.ts'
import { findAgent } from '../agents/queries.ts'
import { findCallRow } from '../calls/queries.ts'
import { findContact } from '../contacts/queries.ts'
import { announce, cancelAppointment, type AppointmentDeps } from './appointments.ts'
import { findAppointment, listAppointments, type AppointmentRow } from './queries.ts'

// The appointments API (docs/appointments.md): what the built-in appointment_booking tool booked, and their
// cancellation. Another account's appointment, like one that does not exist, is 404.

const TAGS = ['appointments']

const Status = Type.Enum(['booked', 'cancelled'], { description: 'booked: it holds its time; cancelled: its time is free again' })

export const Appointment = Type.Object({
  _id: ObjectId,
  agent_id: ObjectId,
  tool_id: ObjectId,
  call_id: Nullable(ObjectId, 'the call it was booked in (null: that call is deleted)'),
  contact_id: Nullable(ObjectId, 'the contact of that call, else of the number or address given (docs/contacts.md)'),
  workspace_id: Nullable(ObjectId, "the agent's workspace"),
  starts_at: EpochMs,
  ends_at: EpochMs,
  time_zone: Type.String({ description: 'the tool\'s IANA time zone when it was booked: the times were spoken in it' }),
  name: Type.String(),
  email: Nullable(Email),
  phone: Nullable(E164),
  notes: Nullable(Type.String()),
  status: Status,
  cancel_reason: Nullable(Type.String()),
  sequence: Type.Integer({ description: 'the iCalendar SEQUENCE of its latest version: one more at every move and at the cancellation' }),
  created_at: EpochMs,
  updated_at: EpochMs,
  cancelled_at: Nullable(EpochMs)
}, { [COMPONENT]: 'Appointment', description: 'An appointment booked during a call by an appointment_booking tool (`tool_id`) of an agent (docs/appointments.md).' })

const ListQuery = Type.Object({
  agent_id: Type.Optional(ObjectId),
  contact_id: Type.Optional(ObjectId),
  call_id: Type.Optional(ObjectId),
  status: Type.Optional(Status),
  from: Type.Optional({ ...EpochMs, minimum: 0, maximum: 8_640_000_000_000_000, description: 'epoch ms: appointments that start at or after it' }),
  to: Type.Optional({ ...EpochMs, minimum: 0, maximum: 8_640_000_000_000_000, description: 'epoch ms: appointments that start before it' }),
  limit: Paging.limit,
  offset: Paging.skip
})

export const toAppointment = (row: AppointmentRow) => ({
  _id: row.id,
  agent_id: row.agent_id,
  tool_id: row.tool_id,
  call_id: row.call_id,
  contact_id: row.contact_id,
  workspace_id: row.workspace_id,
  starts_at: row.starts_at.getTime(),
  ends_at: row.ends_at.getTime(),
  time_zone: row.time_zone,
  name: row.name,
  email: row.email,
  phone: row.phone,
  notes: row.notes,
  status: row.status,
  cancel_reason: row.cancel_reason,
  sequence: row.sequence,
  created_at: row.created_at.getTime(),
  updated_at: row.updated_at.getTime(),
  cancelled_at: row.cancelled_at?.getTime() ?? null
})

export const appointmentRoutes: FastifyPluginAsyncTypebox<AppointmentDeps> = async (app, deps) => {
  const { db } = deps

  app.get('/appointments', {
    schema: {
      tags: TAGS,
      summary: 'List appointments (beyond the specification)',
      description: 'The appointments the account\'s appointment_booking tools booked, by start time, soonest first. `from` and `to` ' +
        '(epoch ms) bound the start; `from` after `to` is 400. An `agent_id`, `contact_id` or `call_id` that is not the account\'s is 404.',
      querystring: ListQuery,
      response: { 200: Type.Object({ data: Type.Array(Appointment), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() }), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const { agent_id: agentId, contact_id: contactId, call_id: callId, status, from, to, limit = 100, offset = 0 } = request.query
    if (from !== undefined && to !== undefined && from > to) throw badRequest('querystring.from must not be after querystring.to')
    const filter = { agentId, contactId, callId, status, from: from === undefined ? undefined : new Date(from), to: to === undefined ? undefined : new Date(to) }
    const { rows, total } = await listAppointments(db, request.userId, filter, { limit, offset })
    if (total === 0) {
      // Only an empty answer needs the check: a record of another account never matches the user_id filter.
      if (agentId !== undefined && await findAgent(db, request.userId, agentId) === undefined) throw notFound(`agent ${agentId}`)
      if (contactId !== undefined && await findContact(db, request.userId, contactId.toLowerCase()) === undefined) throw notFound(`contact ${contactId}`)
      if (callId !== undefined && (await findCallRow(db, callId.toLowerCase()))?.user_id !== request.userId) throw notFound(`call ${callId}`)
    }
    return { data: rows.map(toAppointment), total, limit, offset }
  })

  app.get('/appointments/:id', {
    schema: {
      tags: TAGS,
      summary: 'Get an appointment (beyond the specification)',
      params: IdParams,
      response: { 200: Appointment, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const row = await findAppointment(db, request.userId, request.params.id)
    if (row === undefined) throw notFound(`appointment ${request.params.id}`)
    return toAppointment(row)
  })

  app.post('/appointments/:id/cancel', {
    schema: {
      tags: TAGS,
      summary: 'Cancel an appointment (beyond the specification)',
      description: 'Frees its time and e-mails the tool\'s notify_email and the person booked (when their address is known) an .ics ' +
        'cancellation. Cancelling a cancelled appointment answers it unchanged and sends nothing.',
      params: IdParams,
      body: Type.Object({ reason: Type.Optional(Type.String({ maxLength: 500, description: 'told in the e-mail to notify_email' })) }, { description: 'optional' }),
      response: { 200: Appointment, ...errors(...AUTH_ERRORS, 404) }
    },
    // The body is optional: a bare POST cancels without a reason.
    preValidation: async (request) => { request.body ??= {} }
  }, async (request) => {
    const cancelled = await cancelAppointment(db, request.userId, request.params.id, request.body.reason ?? null)
    if (cancelled === undefined) throw notFound(`appointment ${request.params.id}`)
    if (cancelled.changed) await announce({ ...deps, log: request.log }, cancelled.row, 'cancelled')
    return toAppointment(cancelled.row)
  })
}
