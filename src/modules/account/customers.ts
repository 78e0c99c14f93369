import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Selectable } from 'kysely'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import type { CustomersTable } from '../../db/schema.ts'
import { AUTH_ERRORS, COMPONENT, E164, Email, EpochMs, errors, IdParams, ObjectId, Paging } from '../../http/schemas.ts'
import { createCustomer, deleteCustomer, listCustomers, requireCustomer, updateCustomer } from './customer-queries.ts'

export const CustomerName = Type.String({ minLength: 1, maxLength: 200, description: 'the name an agency knows its client by' })
export const Metadata = Type.Record(Type.String(), Type.Unknown(), { description: 'free-form data of the integrator, returned as given' })

const Customer = Type.Object({
  _id: ObjectId,
  customer_name: CustomerName,
  email: Type.Union([Email, Type.Null()]),
  phone_number: Type.Union([E164, Type.Null()]),
  metadata: Metadata,
  created_at: EpochMs,
  updated_at: EpochMs
}, { [COMPONENT]: 'Customer', description: "An agency's sub-account. Agents, knowledge bases, calls and phone numbers name one through `customer_id`." })

const CustomerCreate = Type.Object({
  customer_name: CustomerName,
  email: Type.Optional(Email),
  phone_number: Type.Optional(E164),
  metadata: Type.Optional(Metadata)
})

const CustomerUpdate = Type.Object({
  customer_name: Type.Optional(CustomerName),
  email: Type.Optional(Type.Union([Email, Type.Null()], { description: 'null clears it' })),
  phone_number: Type.Optional(Type.Union([E164, Type.Null()], { description: 'null clears it' })),
  metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'replaces the stored metadata whole' }))
})

function customerView (row: Selectable<CustomersTable>) {
  return {
    _id: row.id,
    customer_name: row.name,
    email: row.email,
    phone_number: row.phone_number,
    metadata: row.metadata,
    created_at: row.created_at.getTime(),
    updated_at: row.updated_at.getTime()
  }
}

export const customerRoutes: FastifyPluginAsyncTypebox<{ db: DB }> = async (app, { db }) => {
  app.get('/customer/list', {
    schema: {
      tags: ['customers'],
      summary: 'List customers',
      description: 'Oldest first.',
      querystring: Type.Object(Paging),
      response: { 200: Type.Array(Customer), ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => (await listCustomers(db, request.userId, request.query)).map(customerView))

  app.get('/customer/:id', {
    schema: {
      tags: ['customers'],
      summary: 'Get a customer',
      params: IdParams,
      response: { 200: Customer, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => customerView(await requireCustomer(db, request.userId, request.params.id)))

  app.post('/customer', {
    schema: {
      tags: ['customers'],
      summary: 'Create a customer',
      body: CustomerCreate,
      response: { 201: Customer, ...errors(...AUTH_ERRORS) }
    }
  }, async (request, reply) => {
    const { customer_name: name, ...rest } = request.body
    return reply.code(201).send(customerView(await createCustomer(db, request.userId, { name, ...rest })))
  })

  app.patch('/customer/:id', {
    schema: {
      tags: ['customers'],
      summary: 'Update a customer',
      description: 'Only the fields given change.',
      params: IdParams,
      body: CustomerUpdate,
      response: { 200: Customer, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const { customer_name: name, ...rest } = request.body
    return customerView(await updateCustomer(db, request.userId, request.params.id, { name, ...rest }))
  })

  app.delete('/customer/:id', {
    schema: {
      tags: ['customers'],
      summary: 'Delete a customer',
      description: 'Refused with 409 `customer_in_use`, naming them, while records (such as phone numbers) still belong to the customer.',
      params: IdParams,
      response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404, 409) }
    }
  }, async (request, reply) => {
    await deleteCustomer(db, request.userId, request.params.id)
    return reply.code(204).send(null)
  })
}
