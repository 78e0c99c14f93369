import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { forgetApiKeys } from './auth.ts'
import { notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, errors, IdParams, ObjectId } from '../../http/schemas.ts'
import { createApiKey, listApiKeys, MAX_ACTIVE_KEYS, revokeKeyOfUser } from './queries.ts'

const ApiKey = Type.Object({
  _id: ObjectId,
  name: Type.String(),
  prefix: Type.String({ description: 'the first characters of the key, to tell keys apart' }),
  created_at: Type.Integer({ description: 'epoch ms' }),
  last_used_at: Type.Union([Type.Integer(), Type.Null()], { description: 'epoch ms, to the minute' }),
  revoked_at: Type.Union([Type.Integer(), Type.Null()], { description: 'epoch ms' })
}, { [COMPONENT]: 'ApiKey' })

const ms = (date: Date | null) => date?.getTime() ?? null

export const apiKeyRoutes: FastifyPluginAsyncTypebox<{ db: DB }> = async (app, { db }) => {
  app.get('/api-keys', {
    schema: {
      tags: ['api keys'],
      summary: "List the account's API keys",
      description: 'Keys are stored as hashes only: a key is shown once, when it is created.',
      response: { 200: Type.Array(ApiKey), ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => {
    const keys = await listApiKeys(db, request.userId)
    return keys.map((k) => ({ _id: k.id, name: k.name, prefix: k.prefix, created_at: k.created_at.getTime(), last_used_at: ms(k.last_used_at), revoked_at: ms(k.revoked_at) }))
  })

  app.post('/api-keys', {
    schema: {
      tags: ['api keys'],
      summary: 'Create an API key',
      description: `At most ${MAX_ACTIVE_KEYS} keys are active at once; a further one is refused with 409 \`key_limit_reached\`.`,
      body: Type.Object({ name: Type.Optional(Type.String({ maxLength: 100, description: 'a label such as "crm integration"' })) }),
      response: {
        201: Type.Object({ _id: ObjectId, name: Type.String(), prefix: Type.String(), key: Type.String({ description: 'the key itself, shown only in this answer' }), created_at: Type.Integer() }),
        ...errors(...AUTH_ERRORS, 409)
      }
    }
  }, async (request, reply) => {
    const name = request.body.name ?? ''
    const key = await createApiKey(db, request.userId, { name })
    return reply.code(201).send({ _id: key.id, name, prefix: key.prefix, key: key.key, created_at: key.created_at.getTime() })
  })

  app.delete('/api-keys/:id', {
    schema: {
      tags: ['api keys'],
      summary: 'Revoke an API key',
      description: 'The key stops working at once. Revoking the key that makes the request is allowed.',
      params: IdParams,
      response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    if (!await revokeKeyOfUser(db, request.userId, request.params.id)) throw notFound('API key')
    forgetApiKeys()
    return reply.code(204).send(null)
  })
}
