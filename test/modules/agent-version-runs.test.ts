import pino from 'pino'
import t from 'tap'
import { createMailer } from '../../src/mail/mailer.ts'
import type { SessionDeps } from '../../src/modules/voice/session.ts'
import { TextConversation } from '../../src/modules/voice/text-run.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { finishedCall, openWebCall } from '../helpers/voice-client.ts'

// A call pinned to an old version runs it: that version's prompt, begin message and tools reach the model, though
// the agent has changed since.

const depsOf = (ctx: TestContext): SessionDeps => {
  const log = pino({ level: 'silent' })
  return { db: ctx.db, boss: ctx.boss, config: ctx.config, log, mailer: createMailer(ctx.db, ctx.config, log) }
}

/** Version 1: "Old prompt." with an end_call tool named old_goodbye; the latest: "New prompt.", the tool deleted, another added. */
async function changedAgent (ctx: TestContext, account: Account) {
  const call = async (method: 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
    await ctx.app.inject({ method, url, headers: account.headers, ...(payload !== undefined && { payload }) })
  const llm = (await call('POST', '/v1/llm', { general_prompt: 'Old prompt.', begin_message: 'Hello from the old version.' })).json()._id as string
  const agent = (await call('POST', '/v1/agent', { agent_name: 'Ada', llm_id: llm })).json()._id as string
  const tool = (await call('POST', `/v1/agent/${agent}/tools`, { tool_type: 'end_call', settings: { name: 'old_goodbye' } })).json()._id as string
  await call('PATCH', `/v1/llm/${llm}`, { general_prompt: 'New prompt.', begin_message: 'Hello from the new version.' })
  await call('DELETE', `/v1/agent/${agent}/tools/${tool}`)
  await call('POST', `/v1/agent/${agent}/tools`, { tool_type: 'end_call', settings: { name: 'new_goodbye' } })
  return agent
}

t.test('a conversation pinned to an old version: its prompt and tools reach the model; unpinned, the latest\'s do', async (t) => {
  const llm = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, { LLM_URL: llm.url })
  const account = await createAccount(ctx.db)
  const agent = await changedAgent(ctx, account)
  const deps = depsOf(ctx)

  llm.replies.push({ text: 'Old answer.' })
  const old = await TextConversation.open(deps, { userId: account.user.id, agentId: agent, version: 2 })
  t.equal(old.version, 2)
  t.same(old.conversation().transcript.map((item) => item.content), ['Hello from the old version.'])
  await old.say('Hi')
  const [first] = llm.requests.chat
  t.match(first.body.messages[0], { role: 'system', content: /Old prompt\./ }, 'the old prompt reached the model')
  t.notMatch(first.body.messages[0].content, /New prompt/)
  t.same(first.body.tools.map((tool: { function: { name: string } }) => tool.function.name), ['old_goodbye'], 'and the old tools')
  await old.close()

  llm.replies.push({ text: 'New answer.' })
  const latest = await TextConversation.open(deps, { userId: account.user.id, agentId: agent })
  t.equal(latest.version, 5)
  await latest.say('Hi')
  const last = llm.requests.chat.at(-1)!
  t.match(last.body.messages[0], { content: /New prompt\./ })
  t.same(last.body.tools.map((tool: { function: { name: string } }) => tool.function.name), ['new_goodbye'])
  await latest.close()
})

t.test('a web call pinned to an old version runs it and records it', async (t) => {
  const ctx = await setup(t, { VOICE_ENGINE: 'simulator' }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const agent = await changedAgent(ctx, account)
  const made = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent, agent_version: 2 } })).json()
  const client = await openWebCall(url, made.access_token)
  await client.waitFor('ready')
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'agent'), { content: 'Hello from the old version.' })
  client.sendText('Thanks, goodbye!')
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'tool'), { tool: { name: 'old_goodbye', type: 'end_call' } }, 'the old version\'s tool')
  await client.waitFor('ended')
  const done = await finishedCall(ctx.app, account.headers, made._id)
  t.equal(done.agent_version, 2)
})
