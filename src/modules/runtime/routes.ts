import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { badRequest, HttpError, notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, E164, errors, IdParams, MAX_EPOCH_MS, ObjectId } from '../../http/schemas.ts'
import { findAgent } from '../agents/queries.ts'
import { loadAgentConfig } from '../agents/versions.ts'
import { agentBodies, toLlm } from '../agents/mappers.ts'
import { Agent, LlmConfig } from '../agents/schemas.ts'
import { PhoneCallCreated } from '../calls/schemas.ts'
import { findPhoneNumberByE164 } from '../phone-numbers/queries.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { END_CLOCK_SKEW_MS, endCall, phoneCallCreated, startCall } from '../calls/lifecycle.ts'
import { memoryOf } from '../contacts/contacts.ts'

const TAGS = ['runtime']

const Transcript = Type.Array(Type.Object({
  speaker: Type.Union([Type.Literal('agent'), Type.Literal('user')]),
  content: Type.String({ maxLength: 20_000 }),
  timestamp: Type.Integer({ minimum: 0, maximum: MAX_EPOCH_MS, description: 'epoch ms' })
}), { maxItems: 5000 })

// A billion tokens per model and call is far beyond any real call, and 20 models of it still add up exactly.
const TokenCount = Type.Integer({ minimum: 0, maximum: 1_000_000_000 })

const Tokens = Type.Record(Type.String({ minLength: 1, maxLength: 100 }), Type.Object({
  input: TokenCount,
  output: TokenCount
}), { description: 'language-model tokens by model name', maxProperties: 20 })

const EndBody = Type.Object({
  outcome: Type.Union([Type.Literal('completed'), Type.Literal('failed')], { description: 'completed: a conversation took place; failed: the call never connected' }),
  disconnection_reason: Type.String({ minLength: 1, maxLength: 100, description: 'e.g. user_hangup, agent_hangup, no_answer, busy, invalid_number, runtime_error' }),
  end_timestamp: Type.Optional(Type.Integer({
    minimum: 0,
    // The handler narrows it to the call's start .. now.
    maximum: MAX_EPOCH_MS,
    description: `epoch ms; default: now. Not before the call's start, not later than now (${END_CLOCK_SKEW_MS / 60_000} minutes of clock skew allowed); past the agent's max_call_duration_minutes it is clamped to the limit`
  })),
  transcription: Type.Optional(Transcript),
  recording_url: Type.Optional(Type.String({ format: 'http-url', maxLength: 2000 })),
  usage: Type.Optional(Type.Object({
    tokens: Type.Optional(Tokens),
    sms_sent: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    forwarding_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400 }))
  })),
  collected_data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  transfer_history: Type.Optional(Type.Array(Type.Unknown(), { maxItems: 100 }))
})

const StartedCall = Type.Object({
  ...PhoneCallCreated.properties,
  direction: Type.Literal('inbound'),
  agent: Agent,
  llm: LlmConfig,
  customer_memory: Type.String({ description: 'what the agent knows of the caller from earlier calls (docs/contacts.md, "Memory"): add it to the instructions; empty when the agent\'s is_customer_memory_active is off or nothing is known' })
}, { [COMPONENT]: 'StartedCall', description: 'the new call, with the agent and LLM configuration the runtime runs it with' })

/**
 * The API a voice runtime (telephony, speech, language model) reports calls through, with the account's
 * API key (DESIGN.md, "Call lifecycle").
 */
export const runtimeRoutes: FastifyPluginAsyncTypebox<{ db: DB, jobs: JobSender }> = async (app, { db, jobs }) => {
  app.post('/runtime/calls/inbound', {
    schema: {
      tags: TAGS,
      summary: 'An inbound call reached one of the account\'s numbers',
      description: 'Creates the `started` inbound call with the number\'s inbound agent and answers what the runtime needs to hold it. 404: not a number of this account; 409: the number has no (active) inbound agent.',
      body: Type.Object({
        to_number: { ...E164, description: 'the number called: one of the account\'s' },
        from_number: { ...E164, description: 'the caller' },
        custom_data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
        dynamic_context: Type.Optional(Type.Record(Type.String(), Type.Unknown()))
      }),
      response: { 201: StartedCall, ...errors(...AUTH_ERRORS, 404, 409) }
    }
  }, async (request, reply) => {
    const { body, userId } = request
    const number = await findPhoneNumberByE164(db, userId, body.to_number)
    if (number === undefined) throw notFound(`phone number ${body.to_number} of this account`)
    const agent = number.inbound_agent_id === null ? undefined : await findAgent(db, userId, number.inbound_agent_id)
    if (agent === undefined) throw new HttpError(409, 'no_inbound_agent', `phone number ${body.to_number} has no inbound agent; set one with PATCH /v1/phone-number/${number.id}`)
    if (agent.status !== 'active') throw new HttpError(409, 'agent_inactive', `the inbound agent ${agent.id} of ${body.to_number} is inactive`)
    // The agent and LLM values of the version the number pins (else the latest): what the runtime runs the call on.
    const config = (await loadAgentConfig(db, userId, agent.id, number.inbound_agent_version))!
    const call = await db.transaction().execute(async (trx) => await startCall(trx, jobs, agent, {
      agent_version: number.inbound_agent_version ?? undefined,
      call_type: 'phone',
      direction: 'inbound',
      call_from: body.from_number,
      call_to: body.to_number,
      custom_data: body.custom_data,
      dynamic_context: body.dynamic_context,
      runtime: 'external'
    }))
    return reply.code(201).send({
      ...phoneCallCreated(call, 'inbound', body.from_number, body.to_number),
      agent: (await agentBodies(db, userId, [config.agent]))[0],
      llm: toLlm(config.llm),
      customer_memory: await memoryOf(db, call, agent)
    })
  })

  app.post('/runtime/calls/:id/end', {
    schema: {
      tags: TAGS,
      summary: 'The call ended',
      description: 'The call becomes `pending` and its analysis is queued in the same transaction; the analysis then makes it `success` or `failed`, charges its credits and starts its deliveries. 409 when the call is not `started` (it ended already).',
      params: IdParams,
      body: EndBody,
      response: { 202: Type.Object({ _id: ObjectId, call_status: Type.Literal('pending') }), ...errors(...AUTH_ERRORS, 404, 409) }
    }
  }, async (request, reply) => {
    const { id } = request.params
    const ended = await endCall(db, jobs, request.userId, id, request.body)
    if (ended.outcome === 'not_found') throw notFound(`call ${id}`)
    if (ended.outcome === 'invalid_end_timestamp') throw badRequest(`body.${ended.message}`)
    if (ended.outcome === 'already_ended') throw new HttpError(409, 'call_not_started', `call ${id} is ${ended.callStatus}, not started; it ended already`)
    return reply.code(202).send({ _id: ended.call.id, call_status: 'pending' as const })
  })
}
