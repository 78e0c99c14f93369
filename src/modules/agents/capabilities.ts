import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { ValidateFunction } from 'ajv'
import { Type, type TObject } from 'typebox'
import type { DB } from '../../db/database.ts'
import { badRequest, HttpError, invalidInput, notFound, type AjvIssue } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, errors, IdParams, ObjectId } from '../../http/schemas.ts'
import { compileBodySchema } from '../../http/validation.ts'
import { isConnected } from '../integrations/queries.ts'
import { findKnowledgeBase } from '../knowledge-bases/queries.ts'
import {
  countCapabilities, deleteCapability, findAgent, findCapability, insertCapability, listCapabilities, lockAgent, updateCapability,
  type AgentRow, type CapabilityRow, type CapabilityTable
} from './queries.ts'
import {
  ACTION_SETTINGS, forgetStoredCredentials, headerProblem, maskSettings, MASK, movesOrigin, NEEDS_INTEGRATION, TOOL_SETTINGS, unmaskSettings
} from './settings.ts'

// Actions and tools are the same resource twice: a typed `settings` object under an agent. One set of
// routes serves both, told apart by a descriptor.

type Settings = Record<string, unknown>

export interface Kind extends CapabilityTable {
  path: 'actions' | 'tools'
  idParam: 'agentActionId' | 'agentToolId'
  noun: 'action' | 'tool'
  /** Most an agent may have: each action is a delivery per call, each tool a prompt and a round trip per turn. */
  max: number
  schemas: Record<string, TObject>
  /** Members filled in when a new settings object leaves them out. */
  defaults: Record<string, Settings>
  /** What a schema cannot check: references, recipients, connected integrations. */
  check: (db: DB, agent: AgentRow, type: string, settings: Settings, active: boolean) => Promise<void>
}

const messageDefaults = { send_to_customer: true, direct_recipients: [] }

async function checkActionSettings (_db: DB, _agent: AgentRow, type: string, settings: Settings): Promise<void> {
  if (type === 'api_call') {
    const problem = headerProblem(settings.headers as Record<string, string>)
    if (problem !== undefined) throw badRequest(problem)
  }
  if ((type === 'send_sms' || type === 'send_chat') && settings.send_to_customer === false && (settings.direct_recipients as string[]).length === 0) {
    throw badRequest('body.settings needs a recipient: send_to_customer true or at least one direct_recipients number')
  }
}

async function checkToolSettings (db: DB, agent: AgentRow, type: string, settings: Settings, active: boolean): Promise<void> {
  if (type === 'mcp') {
    const problem = headerProblem(settings.headers as Record<string, string>)
    if (problem !== undefined) throw badRequest(problem)
  }
  if (type === 'api_rag') {
    const ids = (settings.knowledge_base_ids as string[]).map((id) => id.toLowerCase())
    settings.knowledge_base_ids = ids
    for (const id of ids) {
      if (await findKnowledgeBase(db, agent.user_id, id) === undefined) throw notFound(`knowledge base ${id} (body.settings.knowledge_base_ids)`)
    }
  }
  if (type === 'agent_transfer' && (settings.agent_id === undefined) === (settings.phone_number === undefined)) {
    throw badRequest('body.settings needs one of agent_id (another agent here) and phone_number (a number to put the call through to), not both')
  }
  if (type === 'agent_transfer' && settings.agent_id !== undefined) {
    const target = String(settings.agent_id).toLowerCase()
    settings.agent_id = target
    if (target === agent.id) throw badRequest('body.settings.agent_id must name another agent than the one the tool belongs to')
    if (await findAgent(db, agent.user_id, target) === undefined) throw notFound(`agent ${target} (body.settings.agent_id)`)
  }
  if (active && NEEDS_INTEGRATION.has(type) && !await isConnected(db, agent.user_id, type)) {
    throw new HttpError(409, 'integration_not_connected',
      `${type} tools need the ${type} integration connected first: PUT /v1/integrations/${type}`)
  }
}

export const ACTIONS: Kind = {
  table: 'agent_actions',
  typeColumn: 'action_type',
  path: 'actions',
  idParam: 'agentActionId',
  noun: 'action',
  max: 20,
  schemas: ACTION_SETTINGS,
  defaults: {
    send_sms: messageDefaults,
    send_chat: messageDefaults,
    api_call: { method: 'POST', headers: {}, query: {}, body: {}, send_only_custom_fields: false, notify: 'last_attempt', notify_email: null, condition: null }
  },
  check: checkActionSettings
}

export const TOOLS: Kind = {
  table: 'agent_tools',
  typeColumn: 'tool_type',
  path: 'tools',
  idParam: 'agentToolId',
  noun: 'tool',
  max: 30,
  schemas: TOOL_SETTINGS,
  defaults: { api_rag: { top_k: 3 }, mcp: { allowed_tools: [], headers: {} }, appointment_booking: { notify_email: null } },
  check: checkToolSettings
}

/** A null member of a PATCH removes the member, which then takes its default. */
function withoutNulls (settings: Settings): Settings {
  return Object.fromEntries(Object.entries(settings).filter(([, value]) => value !== null))
}

const validators = new Map<TObject, ValidateFunction>()

function validateSettings (schema: TObject, settings: Settings): void {
  let validate = validators.get(schema)
  if (validate === undefined) {
    validate = compileBodySchema(schema)
    validators.set(schema, validate)
  }
  if (!validate(settings)) throw invalidInput('body.settings', validate.errors![0] as AjvIssue)
}

/**
 * Adds an action or tool to an agent (the API's and the console's rule): the settings with the type's defaults
 * filled in, validated against its schema, checked, and counted against the limit under the agent's row lock,
 * so that concurrent requests cannot pass the cap together.
 */
export async function addCapability (db: DB, userId: string, kind: Kind, agent: AgentRow, type: string, input: Settings, active: boolean): Promise<CapabilityRow> {
  const settings = { ...kind.defaults[type], ...input }
  const masked = unmaskSettings(settings, undefined)
  if (masked !== undefined) throw badRequest(`body.settings.headers.${masked} must be the header's value, not the mask`)
  validateSettings(kind.schemas[type], settings)
  await kind.check(db, agent, type, settings, active)
  return await db.transaction().execute(async (trx) => {
    if (await lockAgent(trx, userId, agent.id) === undefined) throw notFound(`agent ${agent.id}`)
    if (await countCapabilities(trx, userId, kind, agent.id) >= kind.max) {
      throw new HttpError(409, `${kind.noun}_limit_reached`, `an agent has at most ${kind.max} ${kind.path}; delete one before adding another`)
    }
    return await insertCapability(trx, userId, kind, { agent_id: agent.id, type, settings, is_active: active })
  })
}

/**
 * Changes an action or tool: `settings` members merge with the stored ones (a null member returns to its
 * default; a header value sent as the mask keeps its stored value) and are validated against the type's schema.
 * A change that moves the URL to another origin keeps no stored header value: only those it sends itself.
 */
export async function changeCapability (db: DB, userId: string, kind: Kind, agent: AgentRow, id: string, changes: { settings?: Settings, is_active?: boolean }): Promise<CapabilityRow> {
  return await db.transaction().execute(async (trx) => {
    const current = await findCapability(trx, userId, kind, agent.id, id, true)
    if (current === undefined) throw notFound(`${kind.noun} ${id}`)
    const active = changes.is_active ?? current.is_active
    let settings = current.settings
    if (changes.settings !== undefined) {
      settings = { ...kind.defaults[current.type], ...withoutNulls({ ...current.settings, ...changes.settings }) }
      if (movesOrigin(current.type, current.settings, settings)) {
        const kept = forgetStoredCredentials(settings, changes.settings)
        if (kept !== undefined) {
          throw badRequest(`body.settings.headers.${kept} cannot keep its stored value: stored header values go only to the origin they were given for, and the URL now points to another (scheme, host or port); send the value itself`)
        }
      }
      const masked = unmaskSettings(settings, current.settings)
      if (masked !== undefined) throw badRequest(`body.settings.headers.${masked} has no stored value to keep; send the value itself`)
      validateSettings(kind.schemas[current.type], settings)
    }
    await kind.check(db, agent, current.type, settings, active)
    return await updateCapability(trx, userId, kind, current.id, { settings, is_active: active })
  })
}

export function capabilityRoutes (kind: Kind): FastifyPluginAsyncTypebox<{ db: DB }> {
  const types = Object.keys(kind.schemas)
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
    oneOf: types.map((type) => Type.Object({ [kind.typeColumn]: Type.Literal(type), settings: kind.schemas[type], is_active: isActive }))
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
      if (!await deleteCapability(db, request.userId, kind, agent.id, params[kind.idParam])) throw notFound(`${kind.noun} ${params[kind.idParam]}`)
      return reply.code(204).send(null)
    })
  }
}
