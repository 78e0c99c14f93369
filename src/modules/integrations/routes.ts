import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, EpochMs, errors, Nullable } from '../../http/schemas.ts'
import type { IntegrationDeps } from './client.ts'
import { connectWithKey, disconnect, integrationStates, startAuthorization, type IntegrationState, type ToolsSwitchedOff } from './connect.ts'
import { PROVIDERS } from './providers.ts'

const TAGS = ['integrations']

const Provider = Type.Union(PROVIDERS.map((p) => Type.Literal(p)), { [COMPONENT]: 'IntegrationProvider', description: 'the external account behind the tools of the same name (docs/integrations.md maps each to its service)' })
const ProviderParams = Type.Object({ provider: Provider })
const Method = Type.Union([Type.Literal('oauth'), Type.Literal('api_key')])

const Integration = Type.Object({
  provider: Type.String(),
  service: Type.String({ description: 'the service behind the provider: Google Calendar, Microsoft Outlook, Cal.com, Calendly, HubSpot' }),
  methods: Type.Array(Method, { description: 'how an account connects to it, in order of preference' }),
  oauth_configured: Type.Boolean({ description: 'whether this installation has an OAuth client for it (POST …/authorizations works)' }),
  connected: Type.Boolean({ description: 'true when its tools can use it (status connected)' }),
  status: Type.Union([Type.Literal('not_connected'), Type.Literal('connected'), Type.Literal('revoked')], { description: 'revoked: the service refused the credentials for good; connect again' }),
  status_reason: Nullable(Type.String(), 'why it was revoked, as the service said'),
  method: Nullable(Method, 'how it was connected'),
  account_label: Type.String({ description: 'the connected account\'s name (from the account check on connect, unless given), shown in the app' }),
  connected_at: Nullable(EpochMs),
  expires_at: Nullable(EpochMs, 'when the current OAuth access token expires (it is refreshed before); null for an API key'),
  active_tools: Type.Integer({ description: 'the account\'s active tools of this type: what a disconnect switches off' })
}, { [COMPONENT]: 'Integration' })

const shown = (state: IntegrationState) => ({
  provider: state.provider,
  service: state.service,
  methods: state.methods,
  oauth_configured: state.oauthConfigured,
  connected: state.status === 'connected',
  status: state.status,
  status_reason: state.statusReason,
  method: state.method,
  account_label: state.accountLabel,
  connected_at: state.connectedAt?.getTime() ?? null,
  expires_at: state.expiresAt?.getTime() ?? null,
  active_tools: state.activeTools
})

/**
 * External accounts (calendars, booking systems, CRM) connected to a Switchboard account (docs/integrations.md):
 * listed without their credentials, connected with an API key (checked at the service first) or through OAuth 2.0
 * (an authorization URL for the person whose account it is), disconnected with the tools that use them switched off.
 */
/** `switchedOff`: the agents module's versions of the agents whose tools a disconnect switches off. */
export const integrationRoutes: FastifyPluginAsyncTypebox<IntegrationDeps & { switchedOff: ToolsSwitchedOff }> = async (app, deps) => {
  app.get('/integrations', {
    schema: { tags: TAGS, summary: 'List the integrations, how each connects and whether it is connected', response: { 200: Type.Array(Integration), ...errors(...AUTH_ERRORS) } }
  }, async (request) => (await integrationStates(deps, request.userId)).map(shown))

  const one = async (userId: string, provider: string) => shown((await integrationStates(deps, userId)).find((state) => state.provider === provider)!)

  app.post('/integrations/:provider/authorizations', {
    schema: {
      tags: TAGS,
      summary: 'Start connecting an integration through OAuth 2.0',
      description: 'Answers the provider\'s authorization URL for the person whose account is to be connected. It works once, for 10 minutes; ' +
        'after they allow access the provider sends their browser to PUBLIC_BASE_URL/integrations/oauth/callback, which connects the account ' +
        'to this API key\'s account and shows a page saying so. 409 integration_not_configured: the installation has no OAuth client for the provider.',
      params: ProviderParams,
      response: {
        201: Type.Object({ authorization_url: Type.String({ format: 'uri' }), expires_at: EpochMs }, { [COMPONENT]: 'IntegrationAuthorization' }),
        ...errors(...AUTH_ERRORS, 409, 422)
      }
    }
  }, async (request, reply) => {
    const started = await startAuthorization(deps, { userId: request.userId, sessionIdHash: null }, request.params.provider)
    return reply.code(201).send({ authorization_url: started.authorizationUrl, expires_at: started.expiresAt.getTime() })
  })

  app.put('/integrations/:provider', {
    schema: {
      tags: TAGS,
      summary: 'Connect an integration with an API key or token, or replace it',
      description: 'The key is checked once with a cheap request to the service, which also names the account (account_label unless given). ' +
        'Refused by the service: 422 integration_rejected; the service cannot be reached, fails or is busy: 503 integration_unavailable. Nothing is stored then.',
      params: ProviderParams,
      body: Type.Object({
        api_key: Type.String({ minLength: 1, maxLength: 2000, description: 'the external account\'s API key or access token; write-only' }),
        account_label: Type.Optional(Type.String({ maxLength: 200 }))
      }),
      response: { 200: Integration, ...errors(...AUTH_ERRORS, 422, 503) }
    }
  }, async (request) => {
    await connectWithKey(deps, request.userId, request.params.provider, { apiKey: request.body.api_key, accountLabel: request.body.account_label })
    return await one(request.userId, request.params.provider)
  })

  app.delete('/integrations/:provider', {
    schema: {
      tags: TAGS,
      summary: 'Disconnect an integration',
      description: 'Revokes an OAuth grant at the provider where it has a revocation endpoint (best effort), deletes the credentials and switches ' +
        'the account\'s tools of the same type off (is_active false; they keep their settings). The answer says how many.',
      params: ProviderParams,
      response: {
        200: Type.Object({ provider: Type.String(), connected: Type.Literal(false), tools_switched_off: Type.Integer() }, { [COMPONENT]: 'IntegrationDisconnected' }),
        ...errors(...AUTH_ERRORS, 404)
      }
    }
  }, async (request) => {
    const { provider } = request.params
    const outcome = await disconnect(deps, request.userId, provider, deps.switchedOff)
    if (outcome === undefined) throw notFound(`connected integration ${provider}`)
    return { provider, connected: false as const, tools_switched_off: outcome.toolsSwitchedOff }
  })
}
