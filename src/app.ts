import { randomUUID } from 'node:crypto'
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import websocket from '@fastify/websocket'
import { sql } from 'kysely'
import type { PgBoss } from 'pg-boss'
import type { Logger } from 'pino'
import { Type } from 'typebox'
import type { Config } from './config.ts'
import type { DB } from './db/database.ts'
import { registerAuth } from './modules/users/auth.ts'
import { frameworkError, registerErrorHandler } from './http/errors.ts'
import { registerOpenApi } from './http/openapi.ts'
import { registerKeylessLimit, trustHops } from './http/rate-limit.ts'
import { cachedSerializers, registerValidation, SERIALIZER_FORMATS } from './http/validation.ts'
import { createLogger } from './logger.ts'
import { createMailer, type Mailer } from './mail/mailer.ts'
import { accountRoutes } from './modules/account/routes.ts'
import { ACTIONS, TOOLS } from './modules/capabilities/catalog.ts'
import { capabilityRoutes } from './modules/capabilities/routes.ts'
import { llmRoutes } from './modules/agents/llm-routes.ts'
import { agentRoutes } from './modules/agents/routes.ts'
import { toolsSwitchedOff } from './modules/agents/versions.ts'
import { versionRoutes } from './modules/agents/version-routes.ts'
import { agentTestRoutes } from './modules/agent-tests/routes.ts'
import { iconRoutes } from './modules/console/icons.ts'
import { consoleNotFound, consoleRoutes } from './modules/console/routes.ts'
import { callRoutes } from './modules/calls/routes.ts'
import { campaignRoutes } from './modules/campaigns/routes.ts'
import { appointmentRoutes } from './modules/appointments/routes.ts'
import { contactRoutes } from './modules/contacts/routes.ts'
import { doNotCallRoutes } from './modules/contacts/dnc-routes.ts'
import { recordingLinkRoutes } from './modules/calls/recording-routes.ts'
import { integrationRoutes } from './modules/integrations/routes.ts'
import { knowledgeBaseRoutes } from './modules/knowledge-bases/routes.ts'
import { messagingRoutes } from './modules/messaging/routes.ts'
import { createCarriers, type Carriers } from './modules/phone-numbers/carriers/index.ts'
import { phoneNumberRoutes } from './modules/phone-numbers/routes.ts'
import { guardedAgent } from './net/guard.ts'
import { deliveryRoutes } from './modules/deliveries/routes.ts'
import { runtimeRoutes } from './modules/runtime/routes.ts'
import { LiveCalls } from './modules/voice/live-calls.ts'
import { listenForSignals } from './modules/voice/signals.ts'
import { StreamAdmission, streamSocketError } from './modules/voice/streams.ts'
import { webCallRoutes } from './modules/voice/routes.ts'
import { telephonyRoutes } from './modules/telephony/routes.ts'
import { telnyxRoutes } from './modules/telephony/telnyx/routes.ts'
import { apiKeyRoutes } from './modules/users/routes.ts'
import { widgetKeyRoutes, widgetPublicRoutes } from './modules/widget/routes.ts'

export interface Deps {
  db: DB
  /** Started, with its queues created: routes commit jobs in their transactions. */
  boss: PgBoss
  logger?: Logger
  /** Default: SMTP per config, recording every message in `emails`. */
  mailer?: Mailer
  /** Default: the sandbox, and Twilio per config. */
  carriers?: Carriers
}

const HEALTH_QUERY_TIMEOUT_MS = 2000

/** Builds the HTTP application; it never listens (main.ts does). */
export async function buildApp (config: Config, deps: Deps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: (deps.logger ?? createLogger(config)) as FastifyBaseLogger,
    genReqId: () => randomUUID(),
    requestIdHeader: 'x-request-id',
    // Keeps "/v1/voice/list/" and "/v1/voice/list" the same route.
    routerOptions: { ignoreTrailingSlash: true },
    bodyLimit: 1024 * 1024,
    // A client that trickles its request (a slow upload) or holds an idle connection is cut off (config.ts).
    requestTimeout: config.http.requestTimeoutMs,
    connectionTimeout: config.http.connectionTimeoutMs,
    // `__proto__` and `constructor.prototype` are dropped like any unknown property, not refused as invalid JSON.
    onProtoPoisoning: 'remove',
    onConstructorPoisoning: 'remove',
    serializerOpts: { ajv: { formats: SERIALIZER_FORMATS } },
    schemaController: { compilersFactory: { buildSerializer: cachedSerializers } },
    frameworkErrors: frameworkError,
    // request.ip: the client's address behind the proxies TRUST_PROXY names (config.ts); a hop count trusts any peer.
    trustProxy: typeof config.trustProxy === 'number' ? trustHops(config.trustProxy) : config.trustProxy
  }).withTypeProvider<TypeBoxTypeProvider>()
  // Bodies are JSON (or multipart where a route registers it): a text/plain body answers 415, not a 400 about its type.
  app.removeContentTypeParser('text/plain')

  const mailer = deps.mailer ?? createMailer(deps.db, config, app.log)
  app.addHook('onClose', async () => mailer.close())
  const carriers = deps.carriers ?? createCarriers(deps.db, config)
  const jobs = { boss: deps.boss, config }
  // Resends and action tests send from the API process, through the same guarded agent as the workers.
  const agent = guardedAgent(config.delivery)
  app.addHook('onClose', async () => agent.close())
  // The API's resend and the console's Send again share them.
  const deliveries = { db: deps.db, boss: deps.boss, config, log: app.log as Logger, agent, mailer }

  // Live calls end properly on shutdown: this hook runs before the WebSocket plugin closes their sockets.
  const live = new LiveCalls()
  // The call streams of both routes share the process's caps on pending and open sockets.
  const streams = new StreamAdmission(config.voice)
  app.addHook('preClose', async () => { await live.endAll() })
  if (config.role !== 'worker' && config.callRuntime === 'voice') {
    // Signals to this process's calls from webhooks that landed on any process (voice/signals.ts).
    const signals = listenForSignals(deps.db, app.log as Logger, (callId, signal) => { live.signal(callId, signal) })
    app.addHook('onReady', async () => { await signals.ready })
    app.addHook('onClose', async () => { await signals.stop() })
  }
  // Closing waits for open connections, and closes idle keep-alive ones only once: a request that was being
  // answered then (a Twilio webhook, a load balancer's) would hold the shutdown for the keep-alive time-out.
  let idleSweep: NodeJS.Timeout | undefined
  app.addHook('preClose', async () => { idleSweep = setInterval(() => app.server.closeIdleConnections(), 100) })
  app.addHook('onClose', async () => { clearInterval(idleSweep) })
  // Before every route, so that an upgrade to a route without a WebSocket handler is refused.
  await app.register(websocket, { options: { maxPayload: config.voice.maxMessageBytes }, errorHandler: streamSocketError })
  registerValidation(app)
  registerErrorHandler(app, config.role === 'all' || config.role === 'api' ? consoleNotFound(deps.db) : undefined)
  registerKeylessLimit(app, config.rateLimit)
  await registerOpenApi(app)
  app.addHook('onSend', async (request, reply) => { reply.header('x-request-id', request.id) })

  app.get('/health', {
    schema: {
      tags: ['health'],
      summary: 'Readiness: the process and its database',
      security: [],
      response: {
        200: Type.Object({ status: Type.Literal('ok'), database: Type.Literal('up') }),
        503: Type.Object({ status: Type.Literal('degraded'), database: Type.Literal('down') })
      }
    }
  }, async (_request, reply) => {
    const up = await Promise.race([
      sql`select 1`.execute(deps.db).then(() => true, () => false),
      new Promise<boolean>((resolve) => setTimeout(resolve, HEALTH_QUERY_TIMEOUT_MS, false).unref())
    ])
    return up ? { status: 'ok' as const, database: 'up' as const } : reply.code(503).send({ status: 'degraded', database: 'down' })
  })

  await app.register(iconRoutes)

  // Liveness for container health checks: a short database outage must not get the container killed.
  app.get('/health/live', {
    schema: { tags: ['health'], summary: 'Liveness: the process answers', security: [], response: { 200: Type.Object({ status: Type.Literal('ok') }) } }
  }, async () => ({ status: 'ok' as const }))

  if (config.role === 'all' || config.role === 'api') {
    await app.register(async (v1) => {
      await registerAuth(v1, deps.db, config.rateLimit)
      await v1.register(apiKeyRoutes, { db: deps.db })
      await v1.register(llmRoutes, { db: deps.db })
      await v1.register(agentRoutes, { db: deps.db })
      await v1.register(versionRoutes, { db: deps.db })
      await v1.register(capabilityRoutes(ACTIONS), { db: deps.db })
      await v1.register(capabilityRoutes(TOOLS), { db: deps.db })
      await v1.register(integrationRoutes, { db: deps.db, config, log: app.log as Logger, switchedOff: toolsSwitchedOff })
      await v1.register(accountRoutes, { db: deps.db, mailer, publicBaseUrl: config.publicBaseUrl })
      await v1.register(phoneNumberRoutes, { db: deps.db, carriers })
      await v1.register(callRoutes, { db: deps.db, jobs })
      await v1.register(contactRoutes, { db: deps.db })
      await v1.register(doNotCallRoutes, { db: deps.db })
      await v1.register(appointmentRoutes, { db: deps.db, config, log: app.log, mailer })
      await v1.register(runtimeRoutes, { db: deps.db, jobs })
      await v1.register(deliveryRoutes, deliveries)
      await v1.register(knowledgeBaseRoutes, { db: deps.db, jobs })
      await v1.register(messagingRoutes, { db: deps.db, config })
      await v1.register(widgetKeyRoutes, { db: deps.db, publicBaseUrl: config.publicBaseUrl })
      await v1.register(agentTestRoutes, { db: deps.db, ...jobs, log: app.log as Logger, mailer })
      await v1.register(campaignRoutes, { db: deps.db, jobs })
    }, { prefix: '/v1' })
    // The website widget's script and what it reaches from other sites' pages: no API key (docs/widget.md).
    await app.register(widgetPublicRoutes, { db: deps.db, jobs })
    // The web console: its own sessions instead of API keys, HTML pages, not in the OpenAPI document.
    await app.register(consoleRoutes, { db: deps.db, publicBaseUrl: config.publicBaseUrl, jobs, mailer, carriers, deliveries })
  }
  if (config.role !== 'worker') {
    await app.register(webCallRoutes, { db: deps.db, jobs, log: app.log as Logger, mailer, live, streams })
    await app.register(recordingLinkRoutes, { db: deps.db, limits: config.concurrency })
    await app.register(telephonyRoutes, { db: deps.db, ...jobs, log: app.log as Logger, mailer, live, streams })
    await app.register(telnyxRoutes, { db: deps.db, ...jobs, log: app.log as Logger, mailer, live, streams })
  }

  return app
}
