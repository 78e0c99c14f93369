import t from 'tap'
import type { Test } from 'tap'
import { decodeWav, rms } from '../../src/modules/voice/audio.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { startMcpServer } from '../helpers/mcp-server.ts'
import { startOpenAiHttpStandin, type OpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { poll } from '../helpers/poll.ts'
import { startReceiver } from '../helpers/receiver.ts'
import { finishedCall, openWebCall, say, speech, type WebCallClient } from '../helpers/voice-client.ts'

// Spoken web calls on the cascade engine, against stand-ins of the OpenAI-compatible speech and chat APIs
// on loopback, through the browser's stream. The realtime engine: web-call-realtime.test.ts.

async function listen (t: Test, env: Record<string, string> = {}) {
  const standin = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, {
    VOICE_ENGINE: 'cascade',
    STT_URL: standin.url,
    LLM_URL: standin.url,
    TTS_URL: standin.url,
    DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true',
    DELIVERY_TIME_SCALE: '0.001',
    ...env
  }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  return { ...ctx, url, standin }
}

type Ctx = TestContext & { standin: OpenAiHttpStandin }

async function agentWith (ctx: Ctx, account: Account, body: Record<string, unknown> = {}, llm: Record<string, unknown> = {}) {
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi {{name}}!', general_prompt: 'You are the clinic\'s receptionist.', ...llm } })).json()
  return (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: config._id, ...body } })).json() as { _id: string }
}

async function addTool (ctx: Ctx, account: Account, agentId: string, type: string, settings: Record<string, unknown>) {
  const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agentId}/tools`, headers: account.headers, payload: { tool_type: type, settings } })
  if (res.statusCode !== 201) throw new Error(res.body)
}

async function start (ctx: Ctx, account: Account, agentId: string): Promise<{ callId: string, client: WebCallClient }> {
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agentId, dynamic_context: { name: 'Ada' } } })).json()
  const client = await openWebCall(ctx.url, call.access_token)
  return { callId: call._id, client }
}

/** The caller says something after the agent has finished speaking (silence after it ends the turn). */
t.test('a spoken call end to end: begin message heard, caller audio recognised, answered aloud, end_call, recorded, analysed, delivered', async (t) => {
  const ctx = await listen(t)
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { webhook_url: receiver.url })
  await addTool(ctx, account, agent._id, 'end_call', { name: 'Hang up' })
  ctx.standin.transcripts.push('I would like an appointment on Tuesday.', 'That is all, thanks.')
  ctx.standin.replies.push({ text: 'Tuesday at ten is free. Shall I book it?' }, { toolCalls: [{ name: 'Hang_up', arguments: {} }] }, { text: 'Goodbye!' })

  const { callId, client } = await start(ctx, account, agent._id)
  t.match(await client.waitFor('ready'), { mode: 'voice', engine: 'cascade' })
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'agent'), { content: 'Hi Ada!' })
  await poll(() => client.loudFrames(), (n) => n > 10, { message: 'the begin message is heard' })

  await say(client)
  await client.waitFor('user_speaking', (e) => !e.speaking)
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'user'), { content: 'I would like an appointment on Tuesday.' })
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'agent' && /Tuesday at ten/.test(e.content)), {})
  const heard = ctx.standin.requests.transcriptions[0]
  t.equal(heard.rate, 16_000)
  t.ok(heard.rms > 500, `the recogniser got the caller's audio (rms ${Math.round(heard.rms)})`)
  t.equal(heard.language, 'en')
  const chat = ctx.standin.requests.chat[0].body
  t.match(chat.messages[0], { role: 'system', content: /receptionist/ })
  t.match(chat.tools, [{ type: 'function', function: { name: 'Hang_up' } }])

  await say(client)
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'tool'), { tool: { name: 'Hang_up', type: 'end_call' } })
  t.match(await client.waitFor('ended'), { reason: 'agent_hangup' })
  const ended = client.events.find((e) => e.type === 'ended')!
  t.ok(ended.frames_sent > 50)

  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { call_status: 'success', disconnection_reason: 'agent_hangup' })
  t.ok(done.sentiment !== null, 'analysed')
  t.same(done.transcription.map((i: { speaker: string }) => i.speaker), ['agent', 'user', 'agent', 'user', 'tool', 'agent'])
  t.ok(done.tokens.by_model['gpt-4o-mini'].input > 0, 'tokens per model')
  t.ok(done.speech_seconds.recognised > 1 && done.speech_seconds.synthesised > 1, 'seconds of speech')
  // Both turns were answered and timed, each stage of the cascade with its share.
  t.equal(done.latency.turns.length, 2, 'each answered turn timed')
  for (const turn of done.latency.turns) {
    t.ok(turn.end_of_turn_ms >= 400 && turn.end_of_turn_ms <= 700, `silence alone ends the turn (batch recogniser: no words): ${turn.end_of_turn_ms} ms`)
    t.ok(turn.transcription_ms >= 0 && turn.llm_ms >= 0 && turn.tts_ms >= 0, 'recognition, model and speech timed')
    t.ok(turn.e2e_ms >= turn.end_of_turn_ms, `the caller waited ${turn.e2e_ms} ms`)
  }
  t.match(done.latency.e2e, { num: 2, p50: Number, p90: Number })
  t.equal(done.recording_url, `${ctx.config.publicBaseUrl}/v1/call/${callId}/recording`)
  const recording = await ctx.app.inject({ method: 'GET', url: `/v1/call/${callId}/recording`, headers: account.headers })
  t.equal(recording.statusCode, 200)
  const wav = decodeWav(recording.rawPayload)
  t.ok(wav.pcm.length > 16_000 && rms(wav.pcm) > 300, 'both sides recorded')
  const [delivery] = await receiver.waitFor(1)
  t.match(delivery.json, { call_id: callId, disconnection_reason: 'agent_hangup', transcription: Array })
})

t.test('barge-in: the caller talks over the agent, playback is cleared and the agent listens', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { interruption_sensitivity: 1 }, { begin_message: 'Welcome to the clinic, where we have been caring for patients for more than fifty years.' })
  const { client } = await start(ctx, account, agent._id)
  await poll(() => client.loudFrames(), (n) => n > 10, { message: 'the agent is speaking' })
  await client.sendAudio(speech(500, 0))
  const cleared = await client.waitFor('clear')
  await client.waitFor('agent_speaking', (e) => !e.speaking)
  // Frames already on the wire may arrive; none follow long after the clear.
  const before = client.frames.length
  await client.sendAudio(speech(0, 700))
  await client.waitFor('transcript', (e) => e.speaker === 'user')
  const late = client.frames.slice(before).filter((f) => f.at - cleared.at > 200 && f.at < (client.events.find((e) => e.type === 'transcript' && e.speaker === 'user')?.at ?? 0))
  t.equal(late.length, 0, 'no agent audio after the clear until the next answer')
  t.ok(client.frames.length * 20 < 3000, 'the long welcome was not played out')
  client.hangup()
  await client.closed
})

t.test('an answer the caller talks over is marked interrupted in the call\'s turns; the next, heard out, is not', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { interruption_sensitivity: 1 })
  ctx.standin.transcripts.push('Tell me about the clinic.', 'Thanks.')
  ctx.standin.replies.push({ text: 'The clinic was founded more than fifty years ago and has cared for patients of every age ever since, in three buildings.' }, { text: 'You are welcome.' })
  const { callId, client } = await start(ctx, account, agent._id)
  await client.waitFor('transcript', (e) => e.speaker === 'agent')
  await say(client)
  const answering = client.events.length
  await client.waitFor('agent_speaking', (e) => e.speaking, answering)
  const heard = client.frames.length
  await poll(() => client.frames.length - heard, (n) => n > 10, { message: 'the answer is playing' })
  await client.sendAudio(speech(500, 0))
  await client.waitFor('clear', undefined, answering)
  // The caller stops: the words over it are the next turn, answered and heard out.
  await client.sendAudio(speech(0, 700))
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && e.content === 'You are welcome.')
  await client.waitFor('agent_speaking', (e) => !e.speaking, client.events.findLastIndex((e) => e.type === 'agent_speaking' && e.speaking))
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.same(done.latency.turns.map((turn: { interrupted?: boolean }) => turn.interrupted ?? false), [true, false])
})

t.test('a provider that fails mid-call ends the call runtime_error; nothing is left started', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const { callId, client } = await start(ctx, account, agent._id)
  await client.waitFor('transcript', (e) => e.speaker === 'agent')
  ctx.standin.failNext('chat', 500)
  await say(client)
  t.match(await client.waitFor('ended'), { reason: 'runtime_error' })
  t.match(await finishedCall(ctx.app, account.headers, callId), { call_status: 'success', disconnection_reason: 'runtime_error' })
})

t.test('agent transfer: the call goes on with the other agent\'s prompt and tools, recorded in transfer_history', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const billing = await agentWith(ctx, account, {}, { general_prompt: 'You are the billing desk.', begin_message: 'Billing here.' })
  const front = await agentWith(ctx, account)
  await addTool(ctx, account, front._id, 'agent_transfer', { name: 'To billing', agent_id: billing._id })
  ctx.standin.transcripts.push('I have a question about my bill.')
  ctx.standin.replies.push({ toolCalls: [{ name: 'To_billing', arguments: { reason: 'billing question' } }] }, { text: 'Billing here, how can I help?' })
  const { callId, client } = await start(ctx, account, front._id)
  await client.waitFor('transcript', (e) => e.speaker === 'agent')
  await say(client)
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'tool'), { tool: { type: 'agent_transfer', output: /now with Clinic/ } })
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && /Billing here, how/.test(e.content))
  const after = ctx.standin.requests.chat.at(-1)!.body
  t.match(after.messages[0], { role: 'system', content: /billing desk/ })
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done.transfer_history, [{ type: 'agent_transfer', from_agent_id: front._id, to_agent_id: billing._id, reason: 'billing question', outcome: 'transferred' }])
})

t.test('an MCP tool: the server\'s allowed tools are offered, called with the configured headers, the answer spoken', async (t) => {
  const ctx = await listen(t)
  const mcp = await startMcpServer(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await addTool(ctx, account, agent._id, 'mcp', { name: 'Orders', server_url: mcp.url, allowed_tools: ['lookup_order'], headers: { authorization: 'Bearer mcp-secret' } })
  ctx.standin.transcripts.push('Where is my order 42?')
  ctx.standin.replies.push({ toolCalls: [{ name: 'lookup_order', arguments: { order_id: '42' } }] }, { text: 'Your order ships tomorrow.' })
  const { callId, client } = await start(ctx, account, agent._id)
  await client.waitFor('transcript', (e) => e.speaker === 'agent')
  t.same(ctx.standin.requests.chat.length, 0)
  await say(client)
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'tool'), { tool: { name: 'lookup_order', type: 'mcp', output: /Order 42 ships tomorrow/ } })
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && /ships tomorrow/.test(e.content))
  const first = ctx.standin.requests.chat[0].body
  t.same(first.tools.map((tool: { function: { name: string } }) => tool.function.name), ['lookup_order'])
  t.match(ctx.standin.requests.chat[1].body.messages.at(-1), { role: 'tool', content: /Order 42 ships tomorrow/ })
  t.ok(mcp.requests.every((r) => r.headers.authorization === 'Bearer mcp-secret'))
  client.hangup()
  t.match(await finishedCall(ctx.app, account.headers, callId), { call_status: 'success' })
})

t.test('call forwarding in a browser call: the model hears that it is not available, and the call goes on', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await addTool(ctx, account, agent._id, 'call_forwarding', { name: 'Forward', phone_number: '+14155550199' })
  ctx.standin.transcripts.push('Put me through to a person.')
  ctx.standin.replies.push({ toolCalls: [{ name: 'Forward', arguments: {} }] }, { text: 'I cannot forward this call, but I can help.' })
  const { callId, client } = await start(ctx, account, agent._id)
  await client.waitFor('transcript', (e) => e.speaker === 'agent')
  await say(client)
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'tool'), { tool: { type: 'call_forwarding', output: /not available/ } })
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && /cannot forward/.test(e.content))
  t.match(ctx.standin.requests.chat[1].body.messages.at(-1), { role: 'tool', content: /not available/ })
  client.hangup()
  t.match(await finishedCall(ctx.app, account.headers, callId), { call_status: 'success', disconnection_reason: 'user_hangup' })
})

t.test('interruption_sensitivity 0: the agent never yields to the caller', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { interruption_sensitivity: 0 }, { begin_message: 'Welcome to the clinic, where we have been caring for patients for many years.' })
  const { client } = await start(ctx, account, agent._id)
  await poll(() => client.loudFrames(), (n) => n > 10, { message: 'the agent is speaking' })
  await client.sendAudio(speech(600, 0))
  await client.waitFor('agent_speaking', (e) => !e.speaking)
  t.notOk(client.events.some((e) => e.type === 'clear'), 'no barge-in')
  t.ok(client.frames.length * 20 >= 3000, 'the whole welcome was played')
  client.hangup()
  await client.closed
})
