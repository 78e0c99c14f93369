import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { badRequest, notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, CHECKED_IN_HANDLER, errors, ObjectId, Paging } from '../../http/schemas.ts'
import type { SessionDeps } from '../voice/session.ts'
import { MAX_CHAT_ITEMS, TestChatBody, TestChatReply, testChatTurn, TestConversation } from './chat.ts'
import {
  createScenario, deleteScenario, findRun, findScenario, listRuns, listScenarios, MAX_SCENARIOS, runTests, Scenario, ScenarioInput, ScenarioPatch,
  scenarioFromChat, TestRun, TestRunSummary, updateScenario
} from './tests.ts'

// The test chat and an agent's tests (docs/testing.md). Another account's agent, test or run is a missing one: 404.

const TAGS = ['agent tests']

const AgentParams = Type.Object({ id: ObjectId })
const TestParams = Type.Object({ id: ObjectId, test_id: ObjectId })
const RunParams = Type.Object({ id: ObjectId, run_id: ObjectId })

/** A test chat's body: its transcript is capped (MAX_CHAT_ITEMS) and so is the whole request. */
const CHAT_BODY_LIMIT = 512 * 1024

const CreateBody = Type.Object({
  ...Type.Partial(ScenarioInput).properties,
  from_conversation: Type.Optional({ ...TestConversation, description: 'a test chat\'s conversation to keep as a test (Save as test): its caller lines become the script and what happened the expectations; `name` may be given, the other members are built' }),
  end_reason: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()], { description: 'with from_conversation: the test chat\'s end_reason, so the test expects the same end' }))
}, { [CHECKED_IN_HANDLER]: { oneOf: [{ required: ['name', 'caller', 'expectations'] }, { required: ['from_conversation'] }] } })

export const agentTestRoutes: FastifyPluginAsyncTypebox<SessionDeps> = async (app, deps) => {
  const { db } = deps

  app.post('/agent/:id/test-chat', {
    bodyLimit: CHAT_BODY_LIMIT,
    schema: {
      tags: TAGS,
      summary: 'Talk to an agent by text (one turn)',
      description: 'Typed turns through the agent\'s real model, tools and workflow; no call is recorded. Stateless: send back the `conversation` of the last answer with the next `message` (at most ' +
        `${MAX_CHAT_ITEMS} transcript items, ${CHAT_BODY_LIMIT / 1024} KiB in all). Without a model configured the simulator answers and \`notice\` says so. Tools that are not mocked act for real (docs/testing.md).`,
      params: AgentParams,
      body: TestChatBody,
      response: { 200: TestChatReply, ...errors(...AUTH_ERRORS, 404, 413) }
    }
  }, async (request) => {
    const { message, conversation, agent_version: version } = request.body
    return await testChatTurn(deps, request.userId, request.params.id, { message, conversation, version })
  })

  app.get('/agent/:id/tests', {
    schema: {
      tags: TAGS,
      summary: 'List an agent\'s tests',
      description: `Oldest first; an agent holds at most ${MAX_SCENARIOS}.`,
      params: AgentParams,
      response: { 200: Type.Object({ data: Type.Array(Scenario) }), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => ({ data: await listScenarios(db, request.userId, request.params.id) }))

  app.post('/agent/:id/tests', {
    bodyLimit: CHAT_BODY_LIMIT,
    schema: {
      tags: TAGS,
      summary: 'Create a test (or keep a test chat as one)',
      description: 'Either a scenario (`name`, `caller`, `expectations`, optional `mocks` and `dynamic_context`) or `from_conversation` (Save as test). ' +
        `At most ${MAX_SCENARIOS} per agent (409 test_limit_reached).`,
      params: AgentParams,
      body: CreateBody,
      response: { 201: Scenario, ...errors(...AUTH_ERRORS, 404, 409, 413) }
    }
  }, async (request, reply) => {
    const { from_conversation: conversation, end_reason: endReason, ...input } = request.body
    let scenario: ScenarioInput
    if (conversation !== undefined) {
      scenario = scenarioFromChat(conversation, { name: input.name, endReason })
    } else {
      if (input.name === undefined || input.caller === undefined || input.expectations === undefined) throw badRequest('a test needs name, caller and expectations (or from_conversation)')
      scenario = { ...input, name: input.name, caller: input.caller, expectations: input.expectations }
    }
    return reply.code(201).send(await createScenario(db, request.userId, request.params.id, scenario))
  })

  app.post('/agent/:id/tests/run', {
    schema: {
      tags: TAGS,
      summary: 'Run an agent\'s tests',
      description: 'Runs the tests (default: all of the agent\'s) against a version (default: the latest) and answers the stored run with a result per test. ' +
        'Synchronous: the answer comes when every test has run. 409 test_run_busy while the account has two runs going.',
      params: AgentParams,
      body: Type.Object({
        test_ids: Type.Optional(Type.Array(ObjectId, { minItems: 1, maxItems: MAX_SCENARIOS, description: 'the tests to run, in this order' })),
        agent_version: Type.Optional(Type.Integer({ minimum: 1 }))
      }),
      response: { 200: TestRun, ...errors(...AUTH_ERRORS, 404, 409) }
    }
  }, async (request) => await runTests(deps, request.userId, request.params.id, { testIds: request.body.test_ids, version: request.body.agent_version ?? null }))

  app.get('/agent/:id/tests/runs', {
    schema: {
      tags: TAGS,
      summary: 'List an agent\'s test runs',
      description: 'Finished runs, newest first, without their results.',
      params: AgentParams,
      querystring: Type.Object({ limit: Paging.limit, offset: Paging.skip }),
      response: { 200: Type.Object({ data: Type.Array(TestRunSummary), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() }), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const { limit = 100, offset = 0 } = request.query
    return { ...await listRuns(db, request.userId, request.params.id, { limit, offset }), limit, offset }
  })

  app.get('/agent/:id/tests/runs/:run_id', {
    schema: { tags: TAGS, summary: 'Get a test run with its results', params: RunParams, response: { 200: TestRun, ...errors(...AUTH_ERRORS, 404) } }
  }, async (request) => {
    const run = await findRun(db, request.userId, request.params.id, request.params.run_id)
    if (run === undefined) throw notFound(`test run ${request.params.run_id}`)
    return run
  })

  app.get('/agent/:id/tests/:test_id', {
    schema: { tags: TAGS, summary: 'Get a test', params: TestParams, response: { 200: Scenario, ...errors(...AUTH_ERRORS, 404) } }
  }, async (request) => {
    const scenario = await findScenario(db, request.userId, request.params.id, request.params.test_id)
    if (scenario === undefined) throw notFound(`test ${request.params.test_id}`)
    return scenario
  })

  app.patch('/agent/:id/tests/:test_id', {
    schema: {
      tags: TAGS,
      summary: 'Change a test',
      description: 'The members given replace the test\'s (a list replaces the whole list).',
      params: TestParams,
      body: { ...ScenarioPatch, minProperties: 1 },
      response: { 200: Scenario, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const scenario = await updateScenario(db, request.userId, request.params.id, request.params.test_id, request.body)
    if (scenario === undefined) throw notFound(`test ${request.params.test_id}`)
    return scenario
  })

  app.delete('/agent/:id/tests/:test_id', {
    schema: { tags: TAGS, summary: 'Delete a test', description: 'Its results in earlier runs stay.', params: TestParams, response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404) } }
  }, async (request, reply) => {
    if (!await deleteScenario(db, request.userId, request.params.id, request.params.test_id)) throw notFound(`test ${request.params.test_id}`)
    return reply.code(204).send(null)
  })
}
