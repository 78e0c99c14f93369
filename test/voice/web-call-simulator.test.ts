import t from 'tap'
import { buildApp } from '../../src/app.ts'
import type { Test } from 'tap'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { addAction } from '../helpers/calls.ts'
import { upload } from '../helpers/documents.ts'
import { poll } from '../helpers/poll.ts'
import { startReceiver } from '../helpers/receiver.ts'
import { finishedCall, openWebCall, refusal } from '../helpers/voice-client.ts'

// Web calls over the browser's stream with the simulator engine (no speech providers): typed turns, tools,
// reminders, limits, and every way a stream can go wrong. Spoken calls: web-call-spoken.test.ts.

const OFFLINE = { VOICE_ENGINE: 'simulator', DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIME_SCALE: '0.001' }

async function listen (t: Test, env: Record<string, string> = {}) {
  const ctx = await setup(t, { ...OFFLINE, ...env }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  return { ...ctx, url }
}

async function agentWith (ctx: TestContext, account: Account, body: Record<string, unknown> = {}, llm: Record<string, unknown> = {}) {
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello {{name}}, this is the clinic.', ...llm } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: config._id, ...body } })).json()
  return agent as { _id: string }
}

async function webCall (ctx: TestContext, account: Account, agentId: string) {
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agentId, dynamic_context: { name: 'Ada' } } })
  return res.json() as { _id: string, access_token: string }
}

t.test('a typed web call with the simulator: begin message, turns, a knowledge question, end_call, analysed and delivered', async (t) => {
  const ctx = await listen(t)
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { webhook_url: receiver.url })
  await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'end_call', settings: { name: 'Hang up' } } })
  await addAction(ctx.app, account, agent._id, { url: `${receiver.url}/action`, body: { transcript: '{{call_transcription}}' }, send_only_custom_fields: true })
  const call = await webCall(ctx, account, agent._id)

  const join = (await ctx.app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: call.access_token } })).json()
  t.match(join, { call_id: call._id, mode: 'text', stream_path: '/web-call/stream', begin_message: 'Hello Ada, this is the clinic.' })

  const client = await openWebCall(ctx.url, call.access_token)
  t.match(await client.waitFor('ready'), { call_id: call._id, mode: 'text', engine: 'simulator' })
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'agent'), { content: 'Hello Ada, this is the clinic.' })
  t.match(await refusal(openWebCall(ctx.url, call.access_token)), { statusCode: 403 }, 'the token opens one stream')

  client.sendText('Do you have time next Tuesday?')
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && /Tuesday at 10/.test(e.content))
  client.sendText('Great, goodbye!')
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'tool'), { content: /^Hang_up: /, tool: { name: 'Hang_up', type: 'end_call' } })
  t.match(await client.waitFor('ended'), { reason: 'agent_hangup' })
  t.equal((await client.closed).code, 1000)

  const done = await finishedCall(ctx.app, account.headers, call._id)
  t.match(done, { call_status: 'success', disconnection_reason: 'agent_hangup', call_credits_details: { web_call_credits: 5 } })
  t.same(done.transcription.map((item: { speaker: string }) => item.speaker), ['agent', 'user', 'agent', 'user', 'tool', 'agent'])
  t.ok(done.tokens.by_model.simulator.input > 0, 'usage per model')
  t.equal(done.recording_url, null, 'nothing to record in a typed call')
  const received = await receiver.waitFor(2)
  t.match(received.find((r) => r.url !== '/action')!.json, { call_id: call._id, disconnection_reason: 'agent_hangup', transcription: Array })
  const { transcript } = received.find((r) => r.url === '/action')!.json
  t.match(transcript, /^Agent: Hello Ada, this is the clinic\.\nUser: Do you have time next Tuesday\?\n/)
  t.match(transcript, /\nTool: Hang_up: /, 'a tool event is not the caller\'s words')
})

t.test('silence: a reminder, then the silence time-out ends the call', async (t) => {
  // Timers run at 1/100: 5 s of silence is 50 ms.
  const ctx = await listen(t, { CALL_TIME_SCALE: '0.01' })
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { call_settings: { reminder_after_seconds: 5, reminder_max_count: 1, silence_timeout_seconds: 10 } })
  const call = await webCall(ctx, account, agent._id)
  const client = await openWebCall(ctx.url, call.access_token)
  t.match(await client.waitFor('ended'), { reason: 'inactivity' })
  const said = client.events.filter((e) => e.type === 'transcript').map((e) => e.content)
  t.same(said, ['Hello Ada, this is the clinic.', 'Are you still there?'])
  t.match(await finishedCall(ctx.app, account.headers, call._id), { call_status: 'success', disconnection_reason: 'inactivity' })
})

t.test('the duration limit: the agent says goodbye and the call ends max_duration_reached', async (t) => {
  // 1 minute at 1/1000 is 60 ms; the reminders (120 s: 120 ms) come later.
  const ctx = await listen(t, { CALL_TIME_SCALE: '0.001' })
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { call_settings: { max_call_duration_minutes: 1, reminder_after_seconds: 120 } })
  const call = await webCall(ctx, account, agent._id)
  const client = await openWebCall(ctx.url, call.access_token)
  t.match(await client.waitFor('ended'), { reason: 'max_duration_reached' })
  t.ok(client.events.some((e) => e.type === 'transcript' && /time limit/.test(e.content)), 'a short goodbye')
  const done = await finishedCall(ctx.app, account.headers, call._id)
  t.match(done, { disconnection_reason: 'max_duration_reached' })
  t.ok(done.duration_ms <= 60_000)
})

t.test('bad input ends that session cleanly and nothing else', async (t) => {
  const ctx = await listen(t, { VOICE_MAX_MESSAGE_BYTES: '1024', VOICE_STREAM_TIMEOUT_MS: '300', CALL_TIME_SCALE: '1' })
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const cases: Array<[string, (client: Awaited<ReturnType<typeof openWebCall>>) => void, string, number[]]> = [
    ['half a sample', (c) => c.socket.send(Buffer.alloc(3)), 'protocol_error', [4400]],
    ['not JSON', (c) => c.socket.send('{nope'), 'protocol_error', [4400]],
    ['an unknown event', (c) => c.socket.send(JSON.stringify({ type: 'dance' })), 'protocol_error', [4400]],
    ['NUL in a typed turn', (c) => c.socket.send(JSON.stringify({ type: 'text', text: 'a\u0000b' })), 'protocol_error', [4400]],
    ['a message over the limit', (c) => c.socket.send(Buffer.alloc(4096)), 'protocol_error', [1009, 4400]]
  ]
  for (const [name, send, reason, codes] of cases) {
    const call = await webCall(ctx, account, agent._id)
    const client = await openWebCall(ctx.url, call.access_token)
    await client.waitFor('ready')
    send(client)
    t.ok(codes.includes((await client.closed).code), `${name}: closed`)
    const done = await finishedCall(ctx.app, account.headers, call._id)
    t.equal(done.disconnection_reason, reason, name)
  }

  // A browser that stops answering (no messages, no pongs) is ended after VOICE_STREAM_TIMEOUT_MS.
  const quiet = await webCall(ctx, account, agent._id)
  const silent = await openWebCall(ctx.url, quiet.access_token, { autoPong: false })
  t.equal((await silent.closed).code, 4408)
  t.match(await finishedCall(ctx.app, account.headers, quiet._id), { disconnection_reason: 'stream_timeout' })

  // Tokens: unknown, expired, of an ended call.
  t.match(await refusal(openWebCall(ctx.url, 'wct_unknown')), { statusCode: 403 })
  const expired = await webCall(ctx, account, agent._id)
  await ctx.db.updateTable('calls').set({ access_token_expires_at: new Date(Date.now() - 1000) }).where('id', '=', expired._id).execute()
  t.match(await refusal(openWebCall(ctx.url, expired.access_token)), { statusCode: 403, body: /invalid_access_token/ })
  t.equal((await ctx.app.inject({ method: 'GET', url: '/health' })).statusCode, 200, 'the server is fine')
})

t.test('the agent\'s allowed origins are enforced on the stream; this server\'s own page is always allowed', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { widget_settings: { allowed_origins: ['https://shop.example.com'] } } })
  const refused = await webCall(ctx, account, agent._id)
  t.match(await refusal(openWebCall(ctx.url, refused.access_token, { origin: 'https://evil.example.com' })), { statusCode: 403, body: /origin_not_allowed/ })
  t.match(await refusal(openWebCall(ctx.url, refused.access_token)), { statusCode: 403 }, 'no Origin when the list is set')
  const shop = await openWebCall(ctx.url, refused.access_token, { origin: 'https://shop.example.com' })
  await shop.waitFor('ready')
  shop.hangup()
  t.match(await shop.waitFor('ended'), { reason: 'user_hangup' })
  const own = await webCall(ctx, account, agent._id)
  const page = await openWebCall(ctx.url, own.access_token, { origin: ctx.url })
  await page.waitFor('ready')
  page.socket.close()
  t.match(await finishedCall(ctx.app, account.headers, own._id), { disconnection_reason: 'user_hangup' })
})

t.test('a web call of another runtime has no stream', async (t) => {
  const external = await listen(t, { CALL_RUNTIME: 'external' })
  const account = await createAccount(external.db)
  const agent = await agentWith(external, account)
  const call = await webCall(external, account, agent._id)
  t.match(await refusal(openWebCall(external.url, call.access_token)), { statusCode: 409, body: /not_a_voice_call/ })
})

t.test('CALL_RUNTIME=voice simulates the phone calls no carrier places, through the same session', async (t) => {
  const ctx = await listen(t, { SIMULATOR_CALL_SECONDS: '0' })
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: '+14155550123' } })
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: '+14155550123', to_number: '+4930123456', dynamic_context: { name: 'Ada', customer_name: 'Ada' } } })).json()
  const done = await finishedCall(ctx.app, account.headers, call._id)
  t.match(done, { call_status: 'success', simulated: true, disconnection_reason: 'agent_hangup' })
  t.same(done.transcription.map((item: { content: string }) => item.content), [
    'Hello Ada, this is the clinic.',
    'Hi, I am calling about an appointment for Ada. Do you have time next Tuesday?',
    'Yes, Tuesday at 10 a.m. is free. Shall I book it for you?',
    'Yes, that works for me. Thank you, that was very helpful!',
    'You are welcome. Your appointment is booked. Goodbye!'
  ])
})

t.test('stopping the server ends its live calls with their transcript, before the database goes', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const call = await webCall(ctx, account, agent._id)
  const client = await openWebCall(ctx.url, call.access_token)
  await client.waitFor('ready')
  client.sendText('Do you have time next Tuesday?')
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && /Tuesday at 10/.test(e.content))
  await ctx.app.close()
  t.match(await client.waitFor('ended'), { reason: 'server_shutdown' })
  const row = await ctx.db.selectFrom('calls').select(['call_status', 'disconnection_reason', 'transcription']).where('id', '=', call._id).executeTakeFirstOrThrow()
  t.not(row.call_status, 'started')
  t.equal(row.disconnection_reason, 'server_shutdown')
  t.equal(row.transcription.length, 3, 'the transcript is kept')
})

t.test('a knowledge question in a typed call: the agent searches its knowledge base (api_rag) and answers from it', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const res = await upload(ctx.app, '/v1/knowledge-base', account.headers, { name: 'hours', description: 'opening hours' }, [{ name: 'hours.txt', content: 'The clinic is open from eight to six on weekdays.', type: 'text/plain' }])
  t.equal(res.statusCode, 200, res.body)
  const kb = res.json()._id as string
  await poll(async () => (await ctx.app.inject({ method: 'GET', url: `/v1/knowledge-base/${kb}`, headers: account.headers })).json(),
    (body) => body.files.every((file: { status: string }) => file.status === 'ready'), { message: 'the file is processed' })
  await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'api_rag', settings: { name: 'Clinic facts', knowledge_base_ids: [kb] } } })
  const call = await webCall(ctx, account, agent._id)
  const client = await openWebCall(ctx.url, call.access_token)
  await client.waitFor('ready')
  client.sendText('When is the clinic open?')
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'tool'), { tool: { name: 'Clinic_facts', type: 'api_rag', output: /eight to six/ } })
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'agent' && /found/.test(e.content)), { content: /open from eight to six/ })
  client.hangup()
  t.match(await finishedCall(ctx.app, account.headers, call._id), { call_status: 'success', disconnection_reason: 'user_hangup' })
})

t.test('ROLE=voice serves the call streams and web-call routes alone, beside a process that serves the API', async (t) => {
  const ctx = await listen(t)
  const voice = await buildApp({ ...ctx.config, role: 'voice' }, { db: ctx.db, boss: ctx.boss })
  t.teardown(() => voice.close())
  const voiceUrl = await voice.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  t.equal((await voice.inject({ method: 'GET', url: '/v1/voice/list', headers: account.headers })).statusCode, 404, 'no API there')
  t.equal((await voice.inject({ method: 'GET', url: '/web-call' })).statusCode, 200)
  const agent = await agentWith(ctx, account)
  const call = await webCall(ctx, account, agent._id)
  const client = await openWebCall(voiceUrl, call.access_token)
  await client.waitFor('ready')
  client.sendText('Do you have time next Tuesday?')
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && /Tuesday at 10/.test(e.content))
  client.hangup()
  t.match(await finishedCall(ctx.app, account.headers, call._id), { call_status: 'success', disconnection_reason: 'user_hangup' })
})
