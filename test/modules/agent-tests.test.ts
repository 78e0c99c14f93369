import t from 'tap'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { startReceiver } from '../helpers/receiver.ts'

// Tests of an agent (docs/testing.md): the test chat, scenarios and their runs, through the API.

const ENV = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true' }

async function api (ctx: TestContext, account: Account, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) {
  const res = await ctx.app.inject({ method, url, headers: account.headers, ...(payload === undefined ? {} : { payload: payload as object }) })
  return { status: res.statusCode, body: res.body === '' ? undefined : res.json(), raw: res.body }
}

async function agentWithPrompt (ctx: TestContext, account: Account, prompt = 'You book tables.', begin = 'Hello, how can I help?') {
  const agent = await createAgent(ctx.app, account)
  const llmId = (await api(ctx, account, 'GET', `/v1/agent/${agent._id}`)).body.llm_id
  await api(ctx, account, 'PATCH', `/v1/llm/${llmId}`, { general_prompt: prompt, begin_message: begin })
  return agent
}

t.test('test chat: turn by turn through the model, stateless; save as test, then run it', async (t) => {
  const llm = await startOpenAiHttpStandin(t)
  const receiver = await startReceiver(t)
  const ctx = await setup(t, { ...ENV, LLM_URL: llm.url })
  const account = await createAccount(ctx.db)
  const agent = await agentWithPrompt(ctx, account)
  const lookup = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/actions`, { action_type: 'api_call', settings: { name: 'lookup', when: 'during_call', url: `${receiver.url}/lookup`, description: 'find the booking' } })
  t.equal(lookup.status, 201, lookup.raw)

  const opened = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/test-chat`, {})
  t.equal(opened.status, 200, opened.raw)
  t.equal(opened.body.engine, 'text')
  t.equal(opened.body.notice, null)
  t.same(opened.body.items.map((item: any) => [item.speaker, item.content]), [['agent', 'Hello, how can I help?']])

  llm.replies.push({ toolCalls: [{ name: 'lookup', arguments: { ref: 'A1' } }] }, { text: 'Your table for four is booked.' })
  const turn = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/test-chat`, { message: 'Is my table booked?', conversation: opened.body.conversation })
  t.equal(turn.status, 200, turn.raw)
  t.same(turn.body.items.map((item: any) => item.speaker), ['user', 'tool', 'agent'])
  t.equal(turn.body.items[1].tool.name, 'lookup')
  t.equal(receiver.received.length, 1, 'an unmocked tool acts for real in the test chat')
  t.equal(turn.body.conversation.transcript.length, 4)
  t.equal(turn.body.ended, false)
  const calls = await ctx.db.selectFrom('calls').select('id').execute()
  t.same(calls, [], 'no call record')

  const saved = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests`, { from_conversation: turn.body.conversation, name: 'Booked table' })
  t.equal(saved.status, 201, saved.raw)
  t.same(saved.body.caller, { type: 'script', lines: ['Is my table booked?'] })
  t.same(saved.body.expectations, [{ type: 'tool_called', tool: 'lookup' }])
  t.equal(saved.body.name, 'Booked table')

  // The agent's model calls the tool again: the test passes. Mocked, the receiver hears nothing.
  await api(ctx, account, 'PATCH', `/v1/agent/${agent._id}/tests/${saved.body._id}`, { mocks: [{ tool: 'lookup', output: '{"ref":"A1"}' }] })
  llm.replies.push({ toolCalls: [{ name: 'lookup', arguments: { ref: 'A1' } }] }, { text: 'Yes, booked.' })
  const run = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests/run`, {})
  t.equal(run.status, 200, run.raw)
  t.equal(run.body.status, 'passed', JSON.stringify(run.body.results))
  t.equal(run.body.results[0].expectations[0].status, 'passed')
  t.equal(run.body.results[0].transcript.find((item: any) => item.speaker === 'tool').tool.output, '{"ref":"A1"}', 'the mock answered')
  t.equal(receiver.received.length, 1, 'a mocked tool is not run')

  // The agent changed: it answers without the tool; the test fails for that reason.
  llm.replies.push({ text: 'I cannot look that up.' })
  const failing = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests/run`, { test_ids: [saved.body._id] })
  t.equal(failing.body.status, 'failed')
  t.equal(failing.body.results[0].status, 'failed')
  t.match(failing.body.results[0].expectations[0], { status: 'failed', reason: /lookup was not called/ })

  const runs = await api(ctx, account, 'GET', `/v1/agent/${agent._id}/tests/runs`)
  t.same(runs.body.data.map((r: any) => r.status), ['failed', 'passed'], 'newest first')
  const version = runs.body.data[0].agent_version
  t.equal((await api(ctx, account, 'GET', `/v1/agent/${agent._id}/tests/runs?agent_version=${version}`)).body.total, 2, 'the runs of one version')
  t.equal((await api(ctx, account, 'GET', `/v1/agent/${agent._id}/tests/runs?agent_version=${version + 1}`)).body.total, 0)
  const one = await api(ctx, account, 'GET', `/v1/agent/${agent._id}/tests/runs/${failing.body._id}`)
  t.same(one.body, failing.body, 'the stored run is the one answered')
})

t.test('test chat with the simulator, turn by turn to the end; kept as a test with its end, it passes on a run', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  t.equal((await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tools`, { tool_type: 'end_call', settings: { name: 'end' } })).status, 201)
  const chat = (payload: object) => api(ctx, account, 'POST', `/v1/agent/${agent._id}/test-chat`, payload)

  let turn = await chat({})
  t.equal(turn.body.engine, 'simulator')
  t.match(turn.body.notice, /simulator answered/)
  // The simulator's script goes on from the saved conversation: an offer, then the booking.
  for (const [message, answer] of [['I need an appointment', /Tuesday at 10/], ['Yes, that works', /booked/]] as const) {
    turn = await chat({ message, conversation: turn.body.conversation })
    t.equal(turn.status, 200, turn.raw)
    t.match(turn.body.items.at(-1), { speaker: 'agent', content: answer })
    t.equal(turn.body.ended, false)
  }
  turn = await chat({ message: 'Thanks, goodbye', conversation: turn.body.conversation })
  t.equal(turn.body.ended, true)
  t.equal(turn.body.end_reason, 'agent_hangup')
  t.same(turn.body.conversation.transcript.filter((item: any) => item.speaker === 'user').length, 3, 'the whole conversation came back each turn')

  const saved = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests`, { from_conversation: turn.body.conversation, end_reason: turn.body.end_reason })
  t.equal(saved.status, 201, saved.raw)
  t.same(saved.body.caller.lines, ['I need an appointment', 'Yes, that works', 'Thanks, goodbye'])
  t.same(saved.body.expectations, [{ type: 'tool_called', tool: 'end' }, { type: 'ended', reason: 'agent_hangup' }])
  t.equal(saved.body.name, 'Chat: I need an appointment')
  const run = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests/run`, {})
  t.equal(run.body.status, 'passed', JSON.stringify(run.body.results[0].expectations))
  t.equal(run.body.results[0].end_reason, 'agent_hangup')
})
