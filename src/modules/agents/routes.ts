import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { badRequest, notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, errors, IdParams, OwnerQuery, Paging } from '../../http/schemas.ts'
import { requireOwners } from '../account/owners.ts'
import { voiceExists } from '../account/queries.ts'
import {
  deleteAgent, findAgent, findLlm, findTemplate, insertAgent, listAgents, listTemplates, lockAgent,
  updateAgent, type AgentChanges
} from './queries.ts'
import {
  Agent, AGENT_DEFAULTS, AgentCreate, AgentTemplate, AgentUpdate, CALL_SETTINGS_DEFAULTS, newAgentDefaults, VOICEMAIL_SETTINGS_DEFAULTS
} from './schemas.ts'
import { agentBodies, toAgent } from './mappers.ts'
import { cloneTemplate } from './copies.ts'
import { dataRetrieval } from './data-retrieval.ts'
import { recordVersion, recordVersions } from './versions.ts'
import { changedWorkflow } from './workflow-check.ts'

const TAGS = ['agents']

/** The ids a body names must be the account's (LLM configuration: 404) or the catalogue's (voice: 400). */
async function checkReferences (db: DB, userId: string, body: { llm_id?: string, voice?: { voice_id: string } }): Promise<void> {
  if (body.llm_id !== undefined && await findLlm(db, userId, body.llm_id) === undefined) {
    throw notFound(`LLM configuration ${body.llm_id}`)
  }
  if (body.voice !== undefined && !await voiceExists(db, body.voice.voice_id)) {
    throw badRequest(`body.voice.voice_id ${body.voice.voice_id} is not a voice of GET /v1/voice/list`)
  }
}

const lower = (id: string | undefined) => id?.toLowerCase() ?? null

export const agentRoutes: FastifyPluginAsyncTypebox<{ db: DB }> = async (app, { db }) => {
  app.get('/agent/list', {
    schema: {
      tags: TAGS,
      summary: "List the account's agents",
      querystring: Type.Object({ ...OwnerQuery.properties, ...Paging }),
      response: { 200: Type.Array(Agent), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    await requireOwners(db, request.userId, request.query)
    return await agentBodies(db, request.userId, await listAgents(db, request.userId, request.query))
  })

  app.get('/agent/agent_template/list', {
    schema: {
      tags: TAGS,
      summary: 'List the agent templates',
      description: 'A read-only catalogue; POST /v1/agent/agent_template/:id/clone makes an agent of one.',
      response: { 200: Type.Array(AgentTemplate), ...errors(...AUTH_ERRORS) }
    }
  }, async () => (await listTemplates(db)).map((t) => ({ _id: t.id, icon_url: t.icon_url, description: t.description, agent: t.agent, llm: t.llm })))

  app.post('/agent/agent_template/:id/clone', {
    schema: {
      tags: TAGS,
      summary: 'Create an agent from a template',
      description: 'Creates an LLM configuration from the template\'s `llm` and an agent from its `agent`, with the defaults for everything else.',
      params: IdParams,
      querystring: OwnerQuery,
      body: Type.Object({ agent_name: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'default: the template\'s name' })) }, { description: 'optional' }),
      response: { 201: Agent, ...errors(...AUTH_ERRORS, 404) }
    },
    // The body is optional: a bare POST clones with the template's name.
    preValidation: async (request) => { request.body ??= {} }
  }, async (request, reply) => {
    const template = await findTemplate(db, request.params.id)
    if (template === undefined) throw notFound(`agent template ${request.params.id}`)
    await requireOwners(db, request.userId, request.query)
    const row = await db.transaction().execute(async (trx) => await cloneTemplate(trx, request.userId, template, {
      customer_id: lower(request.query.customer_id), workspace_id: lower(request.query.workspace_id), agent_name: request.body.agent_name
    }))
    return reply.code(201).send(toAgent(row, []))
  })

  app.get('/agent/:id', {
    schema: { tags: TAGS, summary: 'Get an agent', params: IdParams, response: { 200: Agent, ...errors(...AUTH_ERRORS, 404) } }
  }, async (request) => {
    const row = await findAgent(db, request.userId, request.params.id)
    if (row === undefined) throw notFound(`agent ${request.params.id}`)
    return (await agentBodies(db, request.userId, [row]))[0]
  })

  app.post('/agent', {
    schema: {
      tags: TAGS,
      summary: 'Create an agent',
      description: 'Omitted fields take the defaults shown in the schema descriptions; `llm_id` must be one of GET /v1/llm/list.',
      querystring: OwnerQuery,
      body: AgentCreate,
      response: { 201: Agent, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    const { body } = request
    await requireOwners(db, request.userId, request.query)
    await checkReferences(db, request.userId, body)
    const retrieval = dataRetrieval(body.data_retrieval ?? [])
    const workflow = await changedWorkflow(db, { user_id: request.userId, workflow: null, data_retrieval: [] }, body.workflow ?? null, retrieval)
    const row = await db.transaction().execute(async (trx) => {
      const created = await insertAgent(trx, request.userId, {
        ...newAgentDefaults(),
        customer_id: lower(request.query.customer_id),
        workspace_id: lower(request.query.workspace_id),
        agent_name: body.agent_name,
        llm_id: body.llm_id.toLowerCase(),
        voice_id: (body.voice?.voice_id ?? AGENT_DEFAULTS.voice_id).toLowerCase(),
        interruption_sensitivity: body.interruption_sensitivity ?? AGENT_DEFAULTS.interruption_sensitivity,
        call_settings: { ...CALL_SETTINGS_DEFAULTS, ...body.call_settings },
        data_retrieval: retrieval,
        webhook_url: body.webhook_url ?? null,
        is_data_collection_active: body.is_data_collection_active ?? false,
        voicemail_settings: { ...VOICEMAIL_SETTINGS_DEFAULTS, ...body.voicemail_settings },
        workflow
      })
      return { ...created, version: await recordVersion(trx, request.userId, created.id, 'created') }
    })
    return reply.code(201).send(toAgent(row, []))
  })

  app.patch('/agent/:id', {
    schema: {
      tags: TAGS,
      summary: 'Update an agent',
      description: 'Only the fields sent change. `call_settings`, `widget_settings`, `callback_settings` and `voicemail_settings` merge member by member; `data_retrieval` and `workflow` are replaced as a whole.',
      params: IdParams,
      body: AgentUpdate,
      response: { 200: Agent, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const { body } = request
    await checkReferences(db, request.userId, body)
    const changes: AgentChanges = {
      agent_name: body.agent_name,
      llm_id: body.llm_id?.toLowerCase(),
      voice_id: body.voice?.voice_id.toLowerCase(),
      interruption_sensitivity: body.interruption_sensitivity,
      data_retrieval: body.data_retrieval === undefined ? undefined : dataRetrieval(body.data_retrieval),
      webhook_url: body.webhook_url,
      is_data_collection_active: body.is_data_collection_active,
      folder: body.folder,
      status: body.status,
      is_customer_memory_active: body.is_customer_memory_active
    }
    const row = await db.transaction().execute(async (trx) => {
      // Locked so that two PATCHes of different members of one settings object both survive.
      const current = await lockAgent(trx, request.userId, request.params.id)
      if (current === undefined) throw notFound(`agent ${request.params.id}`)
      if (body.call_settings !== undefined) changes.call_settings = { ...current.call_settings, ...body.call_settings }
      if (body.widget_settings !== undefined) changes.widget_settings = { ...current.widget_settings, ...body.widget_settings }
      if (body.callback_settings !== undefined) changes.callback_settings = { ...current.callback_settings, ...body.callback_settings }
      if (body.voicemail_settings !== undefined) changes.voicemail_settings = { ...current.voicemail_settings, ...body.voicemail_settings }
      if (body.workflow !== undefined) changes.workflow = await changedWorkflow(trx, current, body.workflow, changes.data_retrieval)
      const updated = await updateAgent(trx, request.userId, current.id, changes)
      // A change of what calls run on is a new version; folder, status and widget_settings alone make none.
      const version = await recordVersion(trx, request.userId, current.id, 'agent')
      // The widget's pin names one of the agent's versions (checked after this PATCH's own version is written).
      const pin = body.widget_settings?.agent_version
      if (pin != null && pin > version) throw notFound(`version ${pin} of agent ${current.id} (body.widget_settings.agent_version)`)
      return { ...updated, version }
    })
    return (await agentBodies(db, request.userId, [row]))[0]
  })

  app.delete('/agent/:id', {
    schema: {
      tags: TAGS,
      summary: 'Delete an agent',
      description: 'Deletes its actions and tools; its calls stay. Transfer tools of other agents that pointed at it are switched off.',
      params: IdParams,
      response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    const deleted = await db.transaction().execute(async (trx) => {
      const switchedOff = await deleteAgent(trx, request.userId, request.params.id)
      if (switchedOff !== undefined) await recordVersions(trx, request.userId, switchedOff, 'tools')
      return switchedOff !== undefined
    })
    if (!deleted) throw notFound(`agent ${request.params.id}`)
    return reply.code(204).send(null)
  })
}
