import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, errors, IdParams, Paging } from '../../http/schemas.ts'
import { toLlm } from './mappers.ts'
import { agentsOfLlm, deleteLlm, findLlm, insertLlm, listLlms, lockAgents, updateLlm } from './queries.ts'
import { LLM_DEFAULTS, LlmConfig, LlmWrite } from './schemas.ts'
import { checkTurnDetection } from './turn-detection.ts'
import { recordVersions } from './versions.ts'

const TAGS = ['llm configurations']

/** The language-model configurations that agents name by `llm_id`. */
export const llmRoutes: FastifyPluginAsyncTypebox<{ db: DB }> = async (app, { db }) => {
  app.get('/llm/list', {
    schema: { tags: TAGS, summary: "List the account's LLM configurations", querystring: Type.Object(Paging), response: { 200: Type.Array(LlmConfig), ...errors(...AUTH_ERRORS) } }
  }, async (request) => (await listLlms(db, request.userId, request.query)).map(toLlm))

  app.get('/llm/:id', {
    schema: { tags: TAGS, summary: 'Get an LLM configuration', params: IdParams, response: { 200: LlmConfig, ...errors(...AUTH_ERRORS, 404) } }
  }, async (request) => {
    const row = await findLlm(db, request.userId, request.params.id)
    if (row === undefined) throw notFound(`LLM configuration ${request.params.id}`)
    return toLlm(row)
  })

  app.post('/llm', {
    schema: {
      tags: TAGS,
      summary: 'Create an LLM configuration',
      description: 'Every field is optional; the defaults are in the field descriptions. A turn_detection of the provider (server_vad, semantic_vad) needs engine realtime: 400 otherwise.',
      body: LlmWrite,
      response: { 201: LlmConfig, ...errors(...AUTH_ERRORS) }
    }
  }, async (request, reply) => {
    checkTurnDetection(request.body)
    const row = await insertLlm(db, request.userId, { ...LLM_DEFAULTS, ...request.body })
    return reply.code(201).send(toLlm(row))
  })

  app.patch('/llm/:id', {
    schema: { tags: TAGS, summary: 'Update an LLM configuration', description: 'Takes effect at once for every agent using it; each of them gets a new version (docs/agents.md, "Versions").', params: IdParams, body: LlmWrite, response: { 200: LlmConfig, ...errors(...AUTH_ERRORS, 404) } }
  }, async (request) => {
    if (request.body.engine !== undefined || request.body.turn_detection !== undefined) {
      // Checked against the stored configuration; a concurrent PATCH that makes the pair wrong meets the table's CHECK.
      const stored = await findLlm(db, request.userId, request.params.id)
      if (stored === undefined) throw notFound(`LLM configuration ${request.params.id}`)
      checkTurnDetection(request.body, stored)
    }
    const row = await db.transaction().execute(async (trx) => {
      // Every agent using it gets a version of the change: locked first (in id order), as each agent's own changes lock it.
      const agentIds = await lockAgents(trx, request.userId, await agentsOfLlm(trx, request.userId, request.params.id))
      const updated = await updateLlm(trx, request.userId, request.params.id, request.body)
      if (updated !== undefined) await recordVersions(trx, request.userId, agentIds.map((agent) => agent.id), 'llm')
      return updated
    })
    if (row === undefined) throw notFound(`LLM configuration ${request.params.id}`)
    return toLlm(row)
  })

  app.delete('/llm/:id', {
    schema: {
      tags: TAGS,
      summary: 'Delete an LLM configuration',
      description: 'A configuration still used by an agent is refused with 409 `llm_in_use`.',
      params: IdParams,
      response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404, 409) }
    }
  }, async (request, reply) => {
    if (!await deleteLlm(db, request.userId, request.params.id)) throw notFound(`LLM configuration ${request.params.id}`)
    return reply.code(204).send(null)
  })
}
