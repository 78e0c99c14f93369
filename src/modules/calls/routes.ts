import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { DateRangeQuery, dateRange, optionalDateRange } from '../../http/dates.ts'
import { notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, errors, IdParams, Nullable, ObjectId } from '../../http/schemas.ts'
import { requireOwners } from '../account/owners.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { placePhoneCall } from './phone-calls.ts'
import {
  agentKnown, dailyCallCounts, dailyMetrics, findCallJson, generalMetrics, latencyMetrics, listCallsJson, sentimentCounts
} from './queries.ts'
import { callFilter, CostsQuery, costsBreakdown } from './reports.ts'
import {
  CallDetail, CallListItem, IdempotencyHeaders, LatencyMetrics, ListQuery, MetricsQuery, PhoneCallBody, PhoneCallCreated,
  WebCallBody, WebCallCreated
} from './schemas.ts'
import { callExportRoutes } from './export.ts'
import { recordingRoutes } from './recording-routes.ts'
import { startWebCall, WEB_CALL_TOKEN_TTL_MS } from './web-calls.ts'

const TAGS = ['calls']

/** Seconds with millisecond precision. */
const seconds = (ms: number) => Math.round(ms) / 1000

const Credits = Type.Object({ phone_call: Type.Integer(), web_call: Type.Integer(), text_message: Type.Integer(), call_forwarding: Type.Integer(), total: Type.Integer() })
const Tokens = Type.Object({ input: Type.Integer(), output: Type.Integer(), total: Type.Integer() })

const CostsBreakdown = Type.Object({
  breakdown: Type.Array(Type.Object({
    user_id: Type.Optional(Type.String({ description: 'group_by=user' })),
    agent_id: Type.Optional(Type.String({ description: 'group_by=agent' })),
    agent_name: Type.Optional(Type.String({ description: 'group_by=agent' })),
    workspace_id: Type.Optional(Nullable(Type.String({ description: 'group_by=workspace; null: calls of agents in no workspace' }))),
    workspace_name: Type.Optional(Nullable(Type.String())),
    total_calls: Type.Integer(),
    total_duration_minutes: Type.Number(),
    credits: Credits,
    tokens: Tokens
  })),
  totals: Type.Object({ total_calls: Type.Integer(), total_duration_minutes: Type.Number(), total_credits: Type.Integer(), total_tokens: Type.Integer() }),
  period: Type.Object({ from: Type.Integer({ description: 'epoch ms, start of date_from (UTC)' }), to: Type.Integer({ description: 'epoch ms, last millisecond of date_to (UTC)' }) })
})

// A customer or workspace filter must name one of the account's (404 otherwise). One that calls name exists
// (deleting it is refused while they do), so only an empty answer is checked: a query less per request.

export const callRoutes: FastifyPluginAsyncTypebox<{ db: DB, jobs: JobSender }> = async (app, { db, jobs }) => {
  app.get('/call/list', {
    schema: {
      tags: TAGS,
      summary: "List the account's calls",
      description: 'Newest first unless `sort_order=asc`. Days are UTC; `date_to` includes its whole day.',
      querystring: ListQuery,
      response: { 200: Type.Array(CallListItem), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    const { query } = request
    const filter = { ...callFilter(query), callbackOf: query.callback_of }
    const range = optionalDateRange(query)
    const body = await listCallsJson(db, request.userId, filter, { ...range, order: query.sort_order ?? 'desc', limit: query.limit ?? 100, skip: query.skip ?? 0 })
    if (body === '[]') await requireOwners(db, request.userId, query)
    return reply.type('application/json; charset=utf-8').send(body as never) // JSON text, built by PostgreSQL (queries.ts)
  })

  app.get('/call/general-metrics', {
    schema: {
      tags: TAGS,
      summary: 'Call count and durations over a range',
      description: 'Durations are in seconds (millisecond precision). `average_duration` averages the calls that have ended. `latency` (beyond the specification): percentiles over every timed caller turn of the calls, in ms.',
      querystring: MetricsQuery,
      response: {
        200: Type.Object({
          total_calls: Type.Integer(),
          total_duration: Type.Number(),
          average_duration: Type.Number(),
          latency: Nullable(LatencyMetrics, 'null: none of the calls has timed turns')
        }),
        ...errors(...AUTH_ERRORS, 404)
      }
    }
  }, async (request) => {
    const range = dateRange(request.query)
    const filter = callFilter(request.query)
    const [sums, latency] = await Promise.all([generalMetrics(db, request.userId, filter, range), latencyMetrics(db, request.userId, filter, range)])
    if (sums.calls === 0) await requireOwners(db, request.userId, request.query)
    return {
      total_calls: sums.calls,
      total_duration: seconds(sums.duration_ms),
      average_duration: sums.ended_calls === 0 ? 0 : seconds(sums.duration_ms / sums.ended_calls),
      latency
    }
  })

  app.get('/call/daily-metrics', {
    schema: {
      tags: TAGS,
      summary: 'Call duration per day',
      description: 'One entry per UTC day of the range, days without calls included with 0. `total_duration` is in seconds.',
      querystring: MetricsQuery,
      response: { 200: Type.Array(Type.Object({ date: Type.String(), total_duration: Type.Number(), total_calls: Type.Integer() })), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const range = dateRange(request.query)
    const filter = callFilter(request.query)
    const rows = await dailyMetrics(db, request.userId, filter, range)
    if (rows.every((row) => row.calls === 0)) await requireOwners(db, request.userId, request.query)
    return rows.map((row) => ({ date: row.date, total_duration: seconds(row.duration_ms), total_calls: row.calls }))
  })

  app.get('/call/sentiment-stats', {
    schema: {
      tags: TAGS,
      summary: 'Calls per sentiment for one agent',
      description: 'Counts the analysed calls of the agent (also after it was deleted) over the range. 404: the account never had the agent.',
      querystring: Type.Object({ agent_id: ObjectId, date_from: MetricsQuery.properties.date_from, date_to: MetricsQuery.properties.date_to }),
      response: { 200: Type.Object({ positive: Type.Integer(), negative: Type.Integer(), neutral: Type.Integer() }), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const range = dateRange(request.query)
    const agentId = request.query.agent_id
    const counts = await sentimentCounts(db, request.userId, { agentIds: [agentId] }, range)
    // Only an empty answer can hide an unknown agent: a query less for every other.
    if (Object.keys(counts).length === 0 && !await agentKnown(db, request.userId, agentId)) throw notFound(`agent ${agentId}`)
    return { positive: counts.positive ?? 0, negative: counts.negative ?? 0, neutral: counts.neutral ?? 0 }
  })

  app.get('/call/costs-breakdown', {
    schema: {
      tags: TAGS,
      summary: 'Credits and tokens per user, agent or workspace',
      description: 'Credits are whole units (1 credit = 1 US cent). Groups are ordered by credits, highest first.',
      querystring: CostsQuery,
      response: { 200: CostsBreakdown, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const range = dateRange(request.query)
    const filter = callFilter(request.query)
    const report = await costsBreakdown(db, request.userId, request.query.group_by ?? 'user', filter, range)
    if (report.breakdown.length === 0) await requireOwners(db, request.userId, request.query)
    return report
  })

  app.get('/call/:id', {
    schema: { tags: TAGS, summary: 'Get a call with its transcript and credits', params: IdParams, response: { 200: CallDetail, ...errors(...AUTH_ERRORS, 404) } }
  }, async (request, reply) => {
    const body = await findCallJson(db, request.userId, request.params.id)
    if (body === undefined) throw notFound(`call ${request.params.id}`)
    return reply.type('application/json; charset=utf-8').send(body as never) // JSON text, built by PostgreSQL (queries.ts)
  })

  app.post('/call/make-phone-call', {
    schema: {
      tags: TAGS,
      summary: 'Place an outbound phone call',
      description: 'The call starts as `started` and is handed to the call runtime. `from_number` must be one of the account\'s numbers; a `to_number` on the account\'s do-not-call list answers `409 do_not_call`. With the built-in voice runtime a Twilio number\'s call is placed through Twilio (a person\'s phone rings); a SIP trunk number\'s call goes through its SIP carrier (Twilio, or Telnyx with SIP_CARRIER=telnyx) to the trunk (docs/sip.md; 409 `sip_not_connected` when this installation carries no SIP calls); a sandbox number\'s call is simulated (docs/voice.md).',
      headers: IdempotencyHeaders,
      body: PhoneCallBody,
      response: { 201: PhoneCallCreated, ...errors(...AUTH_ERRORS, 404, 409, 422) }
    }
  }, async (request, reply) => {
    const response = await placePhoneCall(db, jobs, request.userId, request.body, request.headers['idempotency-key'])
    return reply.code(201).send(response)
  })

  app.post('/call/make-web-call', {
    schema: {
      tags: TAGS,
      summary: 'Start a web call',
      description: `Answers an \`access_token\` that a browser uses to join the call (POST /web-call/join) within ${WEB_CALL_TOKEN_TTL_MS / 60_000} minutes, so the API key never reaches the browser.`,
      headers: IdempotencyHeaders,
      body: WebCallBody,
      response: { 201: WebCallCreated, ...errors(...AUTH_ERRORS, 404, 409, 422) }
    }
  }, async (request, reply) => {
    return reply.code(201).send(await startWebCall(db, jobs, request.userId, request.body, request.headers['idempotency-key']))
  })

  await app.register(callExportRoutes, { db, limits: jobs.config.concurrency })
  await app.register(recordingRoutes, { db, config: jobs.config })

  // An agent's route, answered from its calls (the agents module knows nothing of calls).
  app.get('/agent/:id/call-stats', {
    schema: {
      tags: ['agents'],
      summary: "An agent's calls per day",
      description: 'One entry per UTC day of the range, days without calls included with 0.',
      params: IdParams,
      querystring: Type.Object(DateRangeQuery),
      response: { 200: Type.Array(Type.Object({ date: Type.String({ description: 'YYYY-MM-DD' }), total_calls: Type.Integer() })), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const range = dateRange(request.query)
    const counts = await dailyCallCounts(db, request.userId, request.params.id, range)
    if (counts === undefined) throw notFound(`agent ${request.params.id}`)
    return counts
  })
}
