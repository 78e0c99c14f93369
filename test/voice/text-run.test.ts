import pino from 'pino'
import t from 'tap'
import { createMailer } from '../../src/mail/mailer.ts'
import { TextConversation } from '../../src/modules/voice/text-run.ts'
import type { SessionDeps } from '../../src/modules/voice/session.ts'
import { createAccount, setup, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { startReceiver } from '../helpers/receiver.ts'

// Typed conversations through the conversation core (voice/text-run.ts): the chat model without speech, tools and
// mocks, going on from a saved conversation; no call record.

const depsOf = (ctx: TestContext): SessionDeps => {
  const log = pino({ level: 'silent' })
  return { db: ctx.db, boss: ctx.boss, config: ctx.config, log, mailer: createMailer(ctx.db, ctx.config, log) }
}

t.test('the text engine answers typed lines through the chat model, runs tools, takes mocks and goes on from a saved conversation', async (t) => {
  const llm = await startOpenAiHttpStandin(t)
  const receiver = await startReceiver(t)
  const ctx = await setup(t, { LLM_URL: llm.url, DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true' })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const llmId = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })).json().llm_id
  await ctx.app.inject({ method: 'PATCH', url: `/v1/llm/${llmId}`, headers: account.headers, payload: { general_prompt: 'You book tables.', begin_message: 'Hello, {{name}}!' } })
  const lookup = await ctx.app.inject({
    method: 'POST',
    url: `/v1/agent/${agent._id}/actions`,
    headers: account.headers,
    payload: { action_type: 'api_call', settings: { name: 'lookup', when: 'during_call', url: `${receiver.url}/lookup`, description: 'find the booking' } }
  })
  t.equal(lookup.statusCode, 201, lookup.body)
  const deps = depsOf(ctx)

  llm.replies.push({ toolCalls: [{ name: 'lookup', arguments: { ref: 'A1' } }] }, { text: 'Your table is booked.' })
  const run = await TextConversation.open(deps, { userId: account.user.id, agentId: agent._id, dynamicContext: { name: 'Ada' } })
  t.equal(run.engine, 'text')
  t.same(run.conversation().transcript.map((item) => [item.speaker, item.content]), [['agent', 'Hello, Ada!']], 'the begin message, its variable filled')
  const turn = await run.say('Is my table booked?')
  t.same(turn.items.map((item) => item.speaker), ['user', 'tool', 'agent'])
  t.equal(turn.items[1].tool?.name, 'lookup')
  t.equal(turn.items[2].content, 'Your table is booked.')
  t.equal(receiver.received.length, 1, 'the unmocked tool acted for real')
  t.match(llm.requests.chat[0].body.messages[0].content, /You book tables\./, 'the prompt of the agent reached the model')
  t.equal(turn.ended, false)
  t.equal(run.answerTimes.length, 1)
  const saved = run.conversation()
  await run.close()

  // The next turn goes on from the saved conversation, with the tool mocked: its receiver hears nothing more.
  llm.replies.push({ toolCalls: [{ name: 'lookup', arguments: {} }] }, { text: 'Found it.' })
  const next = await TextConversation.open(deps, { userId: account.user.id, agentId: agent._id, conversation: saved, mocks: { lookup: '{"ref":"A1","time":"19:00"}' } })
  t.same(next.conversation().transcript.length, saved.transcript.length, 'no second greeting')
  const again = await next.say('And the time?')
  t.equal(again.items[1].tool?.output, '{"ref":"A1","time":"19:00"}', 'the mock answered')
  t.equal(receiver.received.length, 1, 'a mocked tool is not run')
  const history = llm.requests.chat.at(-2)!.body.messages as Array<{ role: string, content: string }>
  t.ok(history.some((m) => m.role === 'assistant' && m.content === 'Your table is booked.'), 'the model hears the saved conversation')
  await next.close()
  const calls = await ctx.db.selectFrom('calls').select('id').execute()
  t.same(calls, [], 'no call record')
})

t.test('without a model the simulator answers; end_call ends the conversation; another account\'s agent is not found', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'end_call', settings: { name: 'end' } } })
  const deps = depsOf(ctx)
  const run = await TextConversation.open(deps, { userId: account.user.id, agentId: agent._id })
  t.equal(run.engine, 'simulator')
  const first = await run.say('Do you have a table?')
  t.equal(first.ended, false)
  t.equal(first.items.at(-1)?.speaker, 'agent')
  const bye = await run.say('Thanks, goodbye')
  t.equal(bye.ended, true)
  t.equal(bye.endReason, 'agent_hangup')
  t.equal(bye.items.find((item) => item.speaker === 'tool')?.tool?.type, 'end_call')
  t.equal((await run.say('Hello?')).items.length, 0, 'an ended conversation takes no more lines')
  await run.close()
  await t.rejects(TextConversation.open(deps, { userId: other.user.id, agentId: agent._id }), { statusCode: 404, message: /agent/ })
})
