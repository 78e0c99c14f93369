import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { DeliveryAttempt } from '../../db/shapes.ts'
import { notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, errors, IdParams, ObjectId, Paging } from '../../http/schemas.ts'
import { findAgent, findCapability } from '../agents/queries.ts'
import { ACTIONS, TOOLS } from '../capabilities/catalog.ts'
import { testApiCall } from './action-test.ts'
import { resend, type DeliveryDeps } from './engine.ts'
import { actionSettings, findDelivery, listDeliveries, previousSecretExpiry, type DeliveryRow } from './queries.ts'
import type { ApiCallSettings } from '../capabilities/types/api-call.ts'
import { displayUrl } from './render.ts'
import { currentSecret, ROTATION_OVERLAP_HOURS, rotateSecret, testSecret } from './signing.ts'

const TAGS = ['webhook deliveries']

/** The tool types with post-call work of their own (a CRM's call log). */
const integrationKinds = () => Object.entries(TOOLS.types).filter(([, definition]) => definition.after?.channel === 'integration').map(([type]) => type)

const deliveryFields = {
  id: ObjectId,
  delivery_id: Type.String({ format: 'uuid', description: 'identical on every attempt; also the X-Service-Delivery-Id header' }),
  kind: Type.Unsafe<string>({ type: 'string', enum: ['agent_webhook', ...Object.keys(ACTIONS.types), ...integrationKinds()], description: "the agent's webhook_url, or the type of the action behind it (which tells the channel: api_call HTTP, send_email e-mail, send_sms SMS, send_chat WhatsApp), or of the tool (crm: the call logged in the connected CRM; action_id is then the tool's id)" }),
  name: Type.String({ description: 'the action\'s name; "Agent webhook" for the agent\'s webhook_url' }),
  call_id: ObjectId,
  agent_id: ObjectId,
  status: Type.Enum(['pending', 'delivered', 'failed']),
  attempts_made: Type.Integer(),
  attempts_max: Type.Integer({ description: 'scheduled attempts: 8 with the default schedule' }),
  next_attempt_at: Type.Optional(Type.String({ description: 'ISO 8601; present while pending' })),
  attempts: Type.Array({ ...DeliveryAttempt, [COMPONENT]: 'DeliveryAttempt' }),
  created_at: Type.String({ description: 'ISO 8601' }),
  delivered_at: Type.Optional(Type.String({ description: 'ISO 8601' }))
}

const Delivery = Type.Object(deliveryFields, { [COMPONENT]: 'WebhookDelivery' })
const DeliveryDetail = Type.Object({
  ...deliveryFields,
  request: Type.Union([Type.Object({
    method: Type.String(),
    url: Type.String({ description: 'query values (and a password in the URL) are masked as `********`, but for the call payload\'s fields that a GET or DELETE carries there' }),
    header_names: Type.Array(Type.String(), { description: 'the action\'s headers, by name only: values are never returned' }),
    body: Type.Unknown({ description: 'the JSON body; null for GET and DELETE' })
  }), Type.Null()], { description: `null once the request was deleted (kept ${30} days by default)` })
}, { [COMPONENT]: 'WebhookDeliveryDetail' })

const OutcomeSchema = Type.Object({
  ok: Type.Boolean({ description: 'a 2xx within the time limit' }),
  status_code: Type.Optional(Type.Integer()),
  error: Type.Optional(Type.String()),
  duration_ms: Type.Integer(),
  response_preview: Type.Optional(Type.String())
}, { [COMPONENT]: 'DeliveryOutcome' })

const iso = (date: Date | null) => date?.toISOString()

function toDelivery (row: DeliveryRow) {
  return {
    id: row.id,
    delivery_id: row.delivery_id,
    kind: row.kind,
    name: row.name,
    call_id: row.call_id,
    agent_id: row.agent_id,
    status: row.status,
    attempts_made: row.attempts_made,
    attempts_max: row.attempts_max,
    ...(row.status === 'pending' && row.next_attempt_at !== null ? { next_attempt_at: iso(row.next_attempt_at) } : {}),
    attempts: row.attempts,
    created_at: row.created_at.toISOString(),
    ...(row.delivered_at === null ? {} : { delivered_at: iso(row.delivered_at) })
  }
}

async function toDetail (deps: DeliveryDeps, row: DeliveryRow) {
  // A delivery's action_id names an api_call action (or one deleted since: undefined).
  const settings = (row.action_id === null ? undefined : await actionSettings(deps.db, row.action_id)) as ApiCallSettings | undefined
  return {
    ...toDelivery(row),
    request: row.url === null
      ? null
      : { method: row.method, url: displayUrl(row.url, row.method, settings), header_names: Object.keys(settings?.headers ?? {}), body: row.body }
  }
}

export const deliveryRoutes: FastifyPluginAsyncTypebox<DeliveryDeps> = async (app, deps) => {
  const { db } = deps

  app.get('/webhook-deliveries', {
    schema: {
      tags: TAGS,
      summary: "The account's post-call deliveries, newest first",
      querystring: Type.Object({
        status: Type.Optional(Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')])),
        agent_id: Type.Optional(ObjectId),
        call_id: Type.Optional(ObjectId),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
        offset: Paging.skip
      }),
      response: { 200: Type.Object({ data: Type.Array(Delivery), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() }), ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => {
    const { status, agent_id: agentId, call_id: callId, limit = 100, offset = 0 } = request.query
    const { rows, total } = await listDeliveries(db, request.userId, { status, agentId, callId }, { limit, offset })
    return { data: rows.map(toDelivery), total, limit, offset }
  })

  app.get('/webhook-deliveries/:id', {
    schema: { tags: TAGS, summary: 'One delivery with every attempt and its request', params: IdParams, response: { 200: DeliveryDetail, ...errors(...AUTH_ERRORS, 404) } }
  }, async (request) => {
    const row = await findDelivery(db, request.userId, request.params.id)
    if (row === undefined) throw notFound(`webhook delivery ${request.params.id}`)
    return await toDetail(deps, row)
  })

  app.post('/webhook-deliveries/:id/resend', {
    schema: {
      tags: TAGS,
      summary: 'Send a delivery again now',
      description: 'The same request with the same delivery id. Success makes it `delivered` (also after an earlier success); a failure leaves its status as it was. No failure e-mail is sent. 409 once the request was deleted by the retention.',
      params: IdParams,
      response: { 200: Type.Object({ outcome: OutcomeSchema, delivery: DeliveryDetail }), ...errors(...AUTH_ERRORS, 404, 409) }
    }
  }, async (request) => {
    const { outcome, row } = await resend(deps, request.userId, request.params.id)
    return { outcome, delivery: await toDetail(deps, row) }
  })

  const Secret = Type.Object({
    secret: Type.String({ description: 'whsec_ and the base64 key: give it to your receiver to verify webhook-signature' }),
    created_at: Type.Integer({ description: 'epoch ms' }),
    previous_expires_at: Type.Optional(Type.Integer({ description: 'epoch ms: the previous secret signs too until then' })),
    test_secret: Type.String({ description: 'whsec_…: signs only the requests of an action\'s Test (POST /v1/agent/:id/actions/:agentActionId/test), never a delivery; not rotated' })
  }, { [COMPONENT]: 'WebhookSecret' })

  app.get('/webhook-secret', {
    schema: {
      tags: TAGS,
      summary: 'The secret that signs the account\'s deliveries',
      description: 'Every delivery carries Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature) signed with it.',
      response: { 200: Secret, ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => {
    const current = await currentSecret(db, request.userId)
    const previous = await previousSecretExpiry(db, request.userId)
    return {
      secret: current.secret,
      created_at: current.created_at.getTime(),
      ...(previous === undefined ? {} : { previous_expires_at: previous.getTime() }),
      test_secret: await testSecret(db, request.userId)
    }
  })

  app.post('/webhook-secret/rotate', {
    schema: {
      tags: TAGS,
      summary: 'Replace the signing secret',
      description: `Answers the new secret. For ${ROTATION_OVERLAP_HOURS} hours requests carry a signature with the new and one with the previous secret, so receivers can switch without losing a request.`,
      response: { 200: Secret, ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => {
    const rotated = await rotateSecret(db, request.userId)
    return { secret: rotated.secret, created_at: rotated.created_at.getTime(), previous_expires_at: rotated.previous_expires_at.getTime(), test_secret: await testSecret(db, request.userId) }
  })

  app.post('/agent/:id/actions/:agentActionId/test', {
    schema: {
      tags: ['agent actions'],
      summary: 'Send a sample request of an api_call action',
      description: 'Renders the action with a sample call (its data_retrieval fields filled with sample values) and sends it once, now; nothing is stored or retried. Signed with the account\'s `test_secret` (GET /v1/webhook-secret), never its delivery secret.',
      params: Type.Object({ id: ObjectId, agentActionId: ObjectId }),
      response: { 200: Type.Object({ outcome: OutcomeSchema, request: Type.Object({ method: Type.String(), url: Type.String({ description: 'query values masked as in a delivery\'s request' }) }) }), ...errors(...AUTH_ERRORS, 404, 422) }
    }
  }, async (request) => {
    const agent = await findAgent(db, request.userId, request.params.id)
    if (agent === undefined) throw notFound(`agent ${request.params.id}`)
    const action = await findCapability(db, request.userId, ACTIONS, agent.id, request.params.agentActionId)
    if (action === undefined) throw notFound(`action ${request.params.agentActionId}`)
    return await testApiCall(deps, agent, action, request.log)
  })
}
