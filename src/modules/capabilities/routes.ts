import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { badRequest, notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, errors, IdParams, ObjectId } from '../../http/schemas.ts'
import { findAgent, listCapabilities, type CapabilityRow } from '../agents/queries.ts'
import type { Kind } from './catalog.ts'
import { addCapability, changeCapability, removeCapability } from './manage.ts'
import { maskSettings, MASK } from '../agents/settings-parts.ts'

type Settings = Record<string, unknown>

export function capabilityRoutes (kind: Kind): FastifyPluginAsyncTypebox<{ db: DB }> {
  const types = Object.keys(kind.types)
  const Type_ = Type.Union(types.map((type) => Type.Literal(type)))
  const Capability = Type.Object({
    _id: ObjectId,
    agent_id: ObjectId,
    [kind.typeColumn]: Type_,
    settings: Type.Record(Type.String(), Type.Unknown(), { description: `shape depends on ${kind.typeColumn}; header values show as ${MASK}` }),
    is_active: Type.Boolean(),
    created_at: Type.Integer({ description: 'epoch ms' }),
    updated_at: Type.Integer({ description: 'epoch ms' })
  }, { [COMPONENT]: kind.noun === 'action' ? 'AgentAction' : 'AgentTool' })
  const isActive = Type.Optional(Type.Boolean({ description: 'default true' }))
  // A discriminated oneOf: Ajv picks the branch by the type, so the other branches cannot strip its members.
  const CreateBody = Type.Unsafe<{ settings: Settings, is_active?: boolean } & Record<string, unknown>>({
    type: 'object',
    required: [kind.typeColumn, 'settings'],
    discriminator: { propertyName: kind.typeColumn },
    oneOf: types.map((type) => Type.Object({ [kind.typeColumn]: Type.Literal(type), settings: kind.types[type].schema, is_active: isActive }))
  })
  const UpdateBody = Type.Object({
    settings: Type.Optional(Type.Record(Type.String(), Type.Unknown(), {
      description: `members to change, validated against the ${kind.noun}'s type; a null member returns to its default`
    })),
    is_active: Type.Optional(Type.Boolean())
  })
  const AgentParams = IdParams
  const ItemParams = Type.Object({ id: ObjectId, [kind.idParam]: ObjectId })
  const tags = [`agent ${kind.path}`]

  const toBody = (row: CapabilityRow) => ({
    _id: row.id,
    agent_id: row.agent_id,
    [kind.typeColumn]: row.type,
    settings: maskSettings(row.settings),
    is_active: row.is_active,
    created_at: row.created_at.getTime(),
    updated_at: row.updated_at.getTime()
  })

  return async (app, { db }) => {
    const agentOf = async (userId: string, id: string) => {
      const agent = await findAgent(db, userId, id)
      if (agent === undefined) throw notFound(`agent ${id}`)
      return agent
    }

    app.get(`/agent/:id/${kind.path}`, {
      schema: { tags, summary: `List an agent's ${kind.path}`, params: AgentParams, response: { 200: Type.Array(Capability), ...errors(...AUTH_ERRORS, 404) } }
    }, async (request) => {
      const agent = await agentOf(request.userId, request.params.id)
      return (await listCapabilities(db, request.userId, kind, agent.id)).map(toBody)
    })

    app.post(`/agent/:id/${kind.path}`, {
      schema: {
        tags,
        summary: `Add ${kind.noun === 'action' ? 'an' : 'a'} ${kind.noun} to an agent`,
        description: `\`settings\` is validated against the schema of its \`${kind.typeColumn}\` (see docs/agents.md).`,
        params: AgentParams,
        body: CreateBody,
        response: { 201: Capability, ...errors(...AUTH_ERRORS, 404, 409) }
      },
      // Before the schema runs, so that an unknown type gets a message listing the known ones.
      preValidation: async (request) => {
        const type = (request.body as Record<string, unknown> | undefined)?.[kind.typeColumn]
        if (type !== undefined && !types.includes(type as string)) {
          throw badRequest(`body.${kind.typeColumn} must be one of ${types.join(', ')}`, 'validation_error')
        }
      }
    }, async (request, reply) => {
      const agent = await agentOf(request.userId, request.params.id)
      const type = request.body[kind.typeColumn] as string
      const row = await addCapability(db, request.userId, kind, agent, type, request.body.settings, request.body.is_active ?? true)
      return reply.code(201).send(toBody(row))
    })

    app.patch(`/agent/:id/${kind.path}/:${kind.idParam}`, {
      schema: {
        tags,
        summary: `Update ${kind.noun === 'action' ? 'an' : 'a'} ${kind.noun}`,
        description: `\`settings\` members merge with the stored ones; header values sent as \`${MASK}\` keep their stored value. A change that moves the URL (\`url\`, \`server_url\`) to another origin keeps no stored header value: only those it sends.`,
        params: ItemParams,
        body: UpdateBody,
        response: { 200: Capability, ...errors(...AUTH_ERRORS, 404, 409) }
      }
    }, async (request) => {
      const params = request.params as Record<string, string>
      const agent = await agentOf(request.userId, params.id)
      const row = await changeCapability(db, request.userId, kind, agent, params[kind.idParam], request.body)
      return toBody(row)
    })

    app.delete(`/agent/:id/${kind.path}/:${kind.idParam}`, {
      schema: { tags, summary: `Delete ${kind.noun === 'action' ? 'an' : 'a'} ${kind.noun}`, params: ItemParams, response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404) } }
    }, async (request, reply) => {
      const params = request.params as Record<string, string>
      const agent = await agentOf(request.userId, params.id)
      if (!await removeCapability(db, request.userId, kind, agent, params[kind.idParam])) throw notFound(`${kind.noun} ${params[kind.idParam]}`)
      return reply.code(204).send(null)
    })
  }
}
