import { randomUUID } from 'node:crypto'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { DeliveryAttempt } from '../../db/shapes.ts'
import { badRequest, notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, errors, IdParams, ObjectId, Paging } from '../../http/schemas.ts'
import { findAgent, findCapability } from '../agents/queries.ts'
import { ACTIONS } from '../agents/capabilities.ts'
import type { CallRow } from '../calls/queries.ts'
import { attemptRequest, resend, type DeliveryDeps } from './engine.ts'
import { actionSettings, findDelivery, listDeliveries, previousSecretExpiry, type DeliveryRow } from './queries.ts'
import { actionRequest, callVariables, displayUrl, renderHeaders, type ApiCallSettings } from './render.ts'
import { send } from './send.ts'
import { currentSecret, ROTATION_OVERLAP_HOURS, rotateSecret, signingSecrets } from './signing.ts'

const TAGS = ['webhook deliveries']

const deliveryFields = {
  id: ObjectId,
  delivery_id: Type.String({ format: 'uuid', description: 'identical on every attempt; also the X-Service-Delivery-Id header' }),
  kind: Type.Enum(['agent_webhook', 'api_call'], { description: "the agent's webhook_url or an api_call action" }),
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

/** A call as the test button sends it: every field filled with a sample value, data_retrieval fields too. */
function sampleCall (userId: string, agentId: string, fields: Array<{ name: string, type: string, enum_values?: string[] }>): CallRow {
  const now = Date.now()
  const samples: Record<string, unknown> = { string: 'sample', number: 42, boolean: true, date: new Date(now).toISOString().slice(0, 10) }
  const start = new Date(now - 95_000)
  return {
    id: '000000000000000000000000',
    user_id: userId,
    agent_id: agentId,
    agent_name: 'Sample',
    customer_id: null,
    workspace_id: null,
    call_type: 'phone',
    direction: 'inbound',
    call_status: 'success',
    call_from: '+14155550100',
    call_to: '+14155550199',
    start_timestamp: start,
    end_timestamp: new Date(now),
    duration_ms: 95_000,
    recording_url: 'https://example.com/sample-recording.mp3',
    disconnection_reason: 'user_hangup',
    sentiment: 'positive',
    sentiment_explanation: 'This is a sample call sent by the test button.',
    call_summary: 'A sample call: the caller booked an appointment.',
    task_achieved: true,
    transcription: [
      { speaker: 'agent', content: 'Hello, how can I help?', timestamp: start.getTime() + 1000 },
      { speaker: 'user', content: 'I would like to book an appointment.', timestamp: start.getTime() + 4000 }
    ],
    phone_call_credits: 20,
    web_call_credits: 0,
    text_message_credits: 0,
    call_forwarding_credits: 0,
    token_usage: {},
    input_tokens: 0,
    output_tokens: 0,
    sms_count: 0,
    forwarding_seconds: 0,
    custom_data: {},
    dynamic_context: { customer_email: 'customer@example.com' },
    custom_analysis_data: Object.fromEntries(fields.map((f) => [f.name, f.type === 'enum' ? f.enum_values?.[0] ?? '' : samples[f.type]])),
    collected_data: {},
    transfer_history: [],
    runtime: 'external',
    access_token_hash: null,
    access_token_expires_at: null,
    joined_at: null,
    carrier: null,
    carrier_call_id: null,
    forwarding: null,
    speech_recognised_seconds: 0,
    speech_synthesised_seconds: 0,
    outcome: 'completed',
    analysis_status: 'completed',
    analysis_error: null,
    list_json: '', // no delivery sends it
    created_at: new Date(now),
    updated_at: new Date(now)
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
    previous_expires_at: Type.Optional(Type.Integer({ description: 'epoch ms: the previous secret signs too until then' }))
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
    return { secret: current.secret, created_at: current.created_at.getTime(), ...(previous === undefined ? {} : { previous_expires_at: previous.getTime() }) }
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
    return { secret: rotated.secret, created_at: rotated.created_at.getTime(), previous_expires_at: rotated.previous_expires_at.getTime() }
  })

  app.post('/agent/:id/actions/:agentActionId/test', {
    schema: {
      tags: ['agent actions'],
      summary: 'Send a sample request of an api_call action',
      description: 'Renders the action with a sample call (its data_retrieval fields filled with sample values) and sends it once, now; nothing is stored or retried.',
      params: Type.Object({ id: ObjectId, agentActionId: ObjectId }),
      response: { 200: Type.Object({ outcome: OutcomeSchema, request: Type.Object({ method: Type.String(), url: Type.String({ description: 'query values masked as in a delivery\'s request' }) }) }), ...errors(...AUTH_ERRORS, 404, 422) }
    }
  }, async (request) => {
    const agent = await findAgent(db, request.userId, request.params.id)
    if (agent === undefined) throw notFound(`agent ${request.params.id}`)
    const action = await findCapability(db, request.userId, ACTIONS, agent.id, request.params.agentActionId)
    if (action === undefined) throw notFound(`action ${request.params.agentActionId}`)
    if (action.type !== 'api_call') throw badRequest(`only api_call actions send requests; this one is ${action.type}`)
    const call = sampleCall(request.userId, agent.id, agent.data_retrieval)
    const settings = action.settings as ApiCallSettings // checked just above
    const variables = callVariables(call)
    const shaped = actionRequest(settings, call, variables)
    const secrets = (await signingSecrets(db, [request.userId])).get(request.userId) ?? []
    const outgoing = attemptRequest({ deliveryId: randomUUID(), correlationId: randomUUID(), method: shaped.method, url: shaped.url, body: shaped.body === null ? null : JSON.stringify(shaped.body) },
      renderHeaders(settings.headers, variables), secrets, 1)
    const outcome = await send(deps.agent, outgoing, deps.config.delivery.timeoutMs, request.log)
    return { outcome, request: { method: shaped.method, url: displayUrl(shaped.url, shaped.method, settings) } }
  })
}
