import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, errors } from '../../http/schemas.ts'
import { connectIntegration, deactivateTools, disconnectIntegration, listIntegrations } from './queries.ts'
import { PROVIDERS } from './providers.ts'

const TAGS = ['integrations']

const Provider = Type.Union(PROVIDERS.map((p) => Type.Literal(p)), { [COMPONENT]: 'IntegrationProvider', description: 'the external account behind the tools of the same name' })
const ProviderParams = Type.Object({ provider: Provider })

const Integration = Type.Object({
  provider: Type.String(),
  connected: Type.Boolean(),
  account_label: Type.String({ description: 'a name for the connected account, shown in the app' }),
  connected_at: Type.Union([Type.Integer(), Type.Null()], { description: 'epoch ms' })
}, { [COMPONENT]: 'Integration' })

const connected = (row: { provider: string, account_label: string, connected_at: Date }) =>
  ({ provider: row.provider, connected: true, account_label: row.account_label, connected_at: row.connected_at.getTime() })

/**
 * External accounts (calendars, booking systems, CRM) connected to a Switchboard account. The credentials
 * are handed to the voice runtime when a tool acts and are never returned. `booking_one` and `booking_two`
 * tools can be added only while their integration is connected.
 */
export const integrationRoutes: FastifyPluginAsyncTypebox<{ db: DB }> = async (app, { db }) => {
  app.get('/integrations', {
    schema: { tags: TAGS, summary: 'List the integrations and whether each is connected', response: { 200: Type.Array(Integration), ...errors(...AUTH_ERRORS) } }
  }, async (request) => {
    const rows = new Map((await listIntegrations(db, request.userId)).map((row) => [row.provider, row]))
    return PROVIDERS.map((provider) => {
      const row = rows.get(provider)
      return row === undefined ? { provider, connected: false, account_label: '', connected_at: null } : connected(row)
    })
  })

  app.put('/integrations/:provider', {
    schema: {
      tags: TAGS,
      summary: 'Connect an integration, or replace its credentials',
      params: ProviderParams,
      body: Type.Object({
        api_key: Type.String({ minLength: 1, maxLength: 2000, description: 'the external account\'s API key or access token; write-only' }),
        account_label: Type.Optional(Type.String({ maxLength: 200 }))
      }),
      response: { 200: Integration, ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => {
    const row = await connectIntegration(db, request.userId, request.params.provider, {
      account_label: request.body.account_label ?? '',
      method: 'api_key',
      credentials: { api_key: request.body.api_key }
    })
    return connected(row)
  })

  app.delete('/integrations/:provider', {
    schema: {
      tags: TAGS,
      summary: 'Disconnect an integration',
      description: 'Tools of the same type are switched off (is_active false) and keep their settings.',
      params: ProviderParams,
      response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    const { provider } = request.params
    const removed = await db.transaction().execute(async (trx) => {
      if (!await disconnectIntegration(trx, request.userId, provider)) return false
      await deactivateTools(trx, request.userId, provider)
      return true
    })
    if (!removed) throw notFound(`connected integration ${provider}`)
    return reply.code(204).send(null)
  })
}
