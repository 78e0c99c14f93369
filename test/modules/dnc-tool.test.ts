import t, { type Test } from 'tap'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { finishedCall, openWebCall, typedTurn } from '../helpers/voice-client.ts'

// The do_not_call tool (docs/contacts.md, "Do not call") in a live call, through the real protocols: a cascade web
// call over the browser WebSocket, the model (the OpenAI HTTP stand-in) calling the tool when the caller asks not to be
// called again, the number on the list with the call's id, the answer read back by the model. A web call knows the
// caller's number from dynamic_context.customer_phone (as a phone call knows its other party: voice/session.ts).

async function cascade (t: Test) {
  const standin = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, { VOICE_ENGINE: 'cascade', STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi!', general_prompt: 'You are the shop.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Shop', llm_id: llm._id } })).json()
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id as string}/tools`, headers: account.headers, payload: { tool_type: 'do_not_call', settings: { name: 'Do not call' } } })
  t.equal(tool.statusCode, 201, tool.body)
  return { ...ctx, url, standin, account, agentId: agent._id as string }
}

async function webCall (ctx: TestContext & { url: string }, account: Account, agentId: string, dynamicContext: Record<string, unknown>) {
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agentId, dynamic_context: dynamicContext } })).json()
  const client = await openWebCall(ctx.url, call.access_token)
  await client.waitFor('transcript', (e) => e.speaker === 'agent')
  return { callId: call._id as string, client }
}

const listed = async (ctx: TestContext, account: Account) => (await ctx.app.inject({ method: 'GET', url: '/v1/dnc', headers: account.headers })).json()

t.test('the caller asks not to be called again: the model calls do_not_call, the number is listed with the call, the model confirms', async (t) => {
  const ctx = await cascade(t)
  ctx.standin.replies.push({ toolCalls: [{ name: 'Do_not_call', arguments: {} }] }, { text: 'Done: we will not call you again.' })
  const { callId, client } = await webCall(ctx, ctx.account, ctx.agentId, { customer_phone: '+14155550111' })
  await typedTurn(client, 'Please never call me again.', /will not call you again/)

  const offered = ctx.standin.requests.chat[0].body.tools
  t.match(offered, [{ type: 'function', function: { name: 'Do_not_call', description: /do-not-call list when they ask not to be called/ } }], 'offered to the model')
  t.match(ctx.standin.requests.chat[1].body.messages.at(-1), { role: 'tool', content: /\+14155550111 is on the do-not-call list.*Confirm that to the caller/ })
  t.match(await listed(ctx, ctx.account), { total: 1, data: [{ phone_number: '+14155550111', source: 'call', call_id: callId, note: null }] })
  client.hangup()
  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  t.match(done.transcription.find((item: { speaker: string }) => item.speaker === 'tool'), { tool: { name: 'Do_not_call', type: 'do_not_call', output: /on the do-not-call list/ } })

  // Asked again in a later call: still one entry, the first call's.
  ctx.standin.replies.push({ toolCalls: [{ name: 'Do_not_call', arguments: {} }] }, { text: 'You are already off our list, we will not call you again.' })
  const again = await webCall(ctx, ctx.account, ctx.agentId, { customer_phone: '+14155550111' })
  await typedTurn(again.client, 'Stop calling me!', /will not call you again/)
  again.client.hangup()
  t.match(await listed(ctx, ctx.account), { total: 1, data: [{ call_id: callId }] })
})

t.test('a web call without a phone number: the model is told there is none, nothing is listed', async (t) => {
  const ctx = await cascade(t)
  ctx.standin.replies.push({ toolCalls: [{ name: 'Do_not_call', arguments: {} }] }, { text: 'I cannot see your number.' })
  const { client } = await webCall(ctx, ctx.account, ctx.agentId, { customer_phone: 'call me maybe' })
  await typedTurn(client, 'Do not call me again.', /cannot see your number/)
  t.match(ctx.standin.requests.chat[1].body.messages.at(-1), { role: 'tool', content: /There is no phone number for this caller/ })
  client.hangup()
  t.match(await listed(ctx, ctx.account), { total: 0 })
})
