import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { PgBoss } from 'pg-boss'
import t, { type Test } from 'tap'
import { createQueues } from '../../src/jobs/queues.ts'
import { createLogger } from '../../src/logger.ts'
import { createAnalyser } from '../../src/modules/runtime/analysis/analyser.ts'
import { registerRuntimeWorkers } from '../../src/modules/runtime/workers.ts'
import { startWorkers } from '../../src/workers.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { addAction, createAgent } from '../helpers/calls.ts'
import { poll } from '../helpers/poll.ts'
import { startReceiver } from '../helpers/receiver.ts'

/** Polls GET /v1/call/:id until `done` holds (or fails the test after 20 s). */
async function waitForCall (t: Test, ctx: TestContext, account: Account, id: string, done: (call: Record<string, any>) => boolean) {
  const call = await poll(async () => (await ctx.app.inject({ method: 'GET', url: `/v1/call/${id}`, headers: account.headers })).json(), done, { intervalMs: 50 })
  if (!done(call)) t.fail(`call ${id} did not get there: ${JSON.stringify(call)}`)
  return call
}

const balance = async (ctx: TestContext, account: Account) =>
  (await ctx.app.inject({ method: 'GET', url: '/v1/subscription', headers: account.headers })).json().credit_balance as number

/** A bought number whose inbound agent answers calls. */
async function inboundNumber (ctx: TestContext, account: Account, agentId: string | null, phoneNumber = '+14155550123') {
  const bought = (await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: phoneNumber } })).json()
  if (agentId !== null) {
    await ctx.app.inject({ method: 'PATCH', url: `/v1/phone-number/${bought._id}`, headers: account.headers, payload: { inbound_agent_id: agentId } })
  }
  return bought
}

const CONVERSATION = [
  { speaker: 'agent', content: 'Hello, thanks for calling Dr. Smith\'s office. How can I help?', timestamp: 0 },
  { speaker: 'user', content: 'Hi, my name is Ada Lovelace. I would like to book a cleaning appointment.', timestamp: 0 },
  { speaker: 'agent', content: 'Of course. How many people will come?', timestamp: 0 },
  { speaker: 'user', content: 'Two people, my son and me. Tomorrow would be great.', timestamp: 0 },
  { speaker: 'agent', content: 'Tomorrow at 10 works. Are you an existing patient?', timestamp: 0 },
  { speaker: 'user', content: 'Yes, we are. Thank you, that was very helpful!', timestamp: 0 }
]

const FIELDS = [
  { name: 'caller_name', type: 'string', description: 'the caller\'s name', required: true },
  { name: 'people', type: 'number', description: 'how many people will come', required: true },
  { name: 'existing_patient', type: 'boolean', description: 'whether they are an existing patient' },
  { name: 'service', type: 'enum', enum_values: ['cleaning', 'filling', 'checkup'], description: 'the service wanted' },
  { name: 'appointment_date', type: 'date', description: 'the day of the appointment' },
  { name: 'email', type: 'string', description: 'e-mail address' }
]

t.test('runtime API: an inbound call is answered, ended, analysed, charged', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const account = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front desk', data_retrieval: FIELDS, call_settings: { language: 'en-US' } })
  await inboundNumber(ctx, account, agent._id)
  await inboundNumber(ctx, account, null, '+14155550124')
  const before = await balance(ctx, account)

  const inbound = await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550123', from_number: '+4930123456' } })
  t.equal(inbound.statusCode, 201)
  const call = inbound.json()
  t.match(call, { call_type: 'phone', direction: 'inbound', call_status: 'started', call_from: '+4930123456', call_to: '+14155550123', agent_id: agent._id, agent: { agent_name: 'Front desk' }, llm: { model: 'gpt-4o-mini' } })

  t.equal((await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550124', from_number: '+4930123456' } })).statusCode, 409, 'no inbound agent')
  t.equal((await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550199', from_number: '+4930123456' } })).statusCode, 404, 'not a number of the account')
  t.equal((await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: other.headers, payload: { to_number: '+14155550123', from_number: '+4930123456' } })).statusCode, 404, "another account's number")

  const start = call.start_timestamp
  const transcription = CONVERSATION.map((item, i) => ({ ...item, timestamp: start + i * 5000 }))
  const endBody = {
    outcome: 'completed', disconnection_reason: 'user_hangup', end_timestamp: start + 125_000, transcription,
    recording_url: 'https://rec.example.com/a.mp3', usage: { tokens: { 'gpt-4o-mini': { input: 1200, output: 300 } }, sms_sent: 1, forwarding_seconds: 61 },
    collected_data: { note: 'x' }, transfer_history: []
  }
  t.equal((await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: other.headers, payload: endBody })).statusCode, 404, "another account's call")
  const ended = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: account.headers, payload: endBody })
  t.equal(ended.statusCode, 202)
  t.same(ended.json(), { _id: call._id, call_status: 'pending' })

  const done = await waitForCall(t, ctx, account, call._id, (c) => c.call_status !== 'pending')
  t.match(done, {
    call_status: 'success',
    disconnection_reason: 'user_hangup',
    duration_ms: 125_000,
    end_timestamp: start + 125_000,
    recording_url: 'https://rec.example.com/a.mp3',
    sentiment: { sentiment: 'positive', explanation: /positive/ },
    call_summary: /Caller: /,
    task_achieved: true,
    // 3 started minutes of phone at 10, one SMS at 2, 2 forwarding minutes at 8
    call_credits_details: { phone_call_credits: 30, web_call_credits: 0, text_message_credits: 2, call_forwarding_credits: 16 },
    tokens: { input: 1200, output: 300, total: 1500 },
    collected_data: { note: 'x' },
    simulated: false
  })
  const tomorrow = new Date(start + 86_400_000).toISOString().slice(0, 10)
  t.same(done.custom_analysis_data, { caller_name: 'Ada Lovelace', people: 2, existing_patient: true, service: 'cleaning', appointment_date: tomorrow }, 'typed fields; the e-mail was never said')
  t.equal(await balance(ctx, account), before - 48, 'the credits are charged to the ledger')

  const again = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: account.headers, payload: endBody })
  t.equal(again.statusCode, 409)
  t.equal(again.json().code, 'call_not_started')
})

t.test('ending one call twice at once ends it once; bad end bodies are 400 and change nothing', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await inboundNumber(ctx, account, agent._id)
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550123', from_number: '+4930123456' } })).json()

  for (const [payload, message] of [
    [{ disconnection_reason: 'x' }, /body\.outcome is required/],
    [{ outcome: 'maybe', disconnection_reason: 'x' }, /body\.outcome/],
    [{ outcome: 'completed', disconnection_reason: 'x', end_timestamp: call.start_timestamp - 1 }, /end_timestamp must not be before/],
    [{ outcome: 'completed', disconnection_reason: 'x', transcription: [{ speaker: 'robot', content: 'hi', timestamp: 1 }] }, /body\.transcription\.0\.speaker/],
    [{ outcome: 'completed', disconnection_reason: 'x', usage: { tokens: { m: { input: -1, output: 0 } } } }, /body\.usage\.tokens\.m\.input must be >= 0/]
  ] as const) {
    const res = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: account.headers, payload })
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    t.match(res.json().message, message)
  }
  const ends = await Promise.all([1, 2, 3].map(() => ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup' } })))
  t.same(ends.map((r) => r.statusCode).sort(), [202, 409, 409])
  const jobs = await ctx.db.selectFrom('pgboss.job' as never).select(({ fn }) => fn.countAll<number>().as('n')).where('name' as never, '=', 'call-analyse' as never).executeTakeFirstOrThrow() as { n: number }
  t.equal(Number(jobs.n), 1, 'one analysis job')
})

t.test('the simulator answers outbound and web calls in the agent\'s language; numbers ending 0000 do not answer', async (t) => {
  const ctx = await setup(t, { CALL_RUNTIME: 'simulator', SIMULATOR_CALL_SECONDS: '0' }, { workers: true })
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Guten Tag {{customer_name}}, hier ist die Praxis.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Praxis', llm_id: llm._id, call_settings: { language: 'de-DE' } } })).json()
  await inboundNumber(ctx, account, agent._id)

  const web = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id, dynamic_context: { customer_name: 'Frau Meier' } } })).json()
  const join = await ctx.app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: web.access_token } })
  t.equal(join.statusCode, 200)
  t.match(join.json(), { call_id: web._id, agent_name: 'Praxis', language: 'de-DE', begin_message: 'Guten Tag Frau Meier, hier ist die Praxis.' })
  t.equal((await ctx.app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: 'wct_nope' } })).statusCode, 403)

  const done = await waitForCall(t, ctx, account, web._id, (c) => c.call_status === 'success' || c.call_status === 'failed')
  t.match(done, { call_status: 'success', simulated: true, disconnection_reason: 'agent_hangup', sentiment: { sentiment: 'positive' }, call_credits_details: { web_call_credits: 5 } })
  t.equal(done.transcription[0].content, 'Guten Tag Frau Meier, hier ist die Praxis.')
  t.match(done.transcription[1].content, /Termin.*für Frau Meier/)
  t.ok(done.tokens.by_model.simulator.input > 0)
  t.equal((await ctx.app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: web.access_token } })).statusCode, 403, 'the token ends with its call')

  const noAnswer = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: '+14155550123', to_number: '+4930120000' } })).json()
  const failed = await waitForCall(t, ctx, account, noAnswer._id, (c) => c.call_status === 'success' || c.call_status === 'failed')
  t.match(failed, { call_status: 'failed', disconnection_reason: 'no_answer', task_achieved: false, sentiment: null, call_summary: null, call_credits_details: { phone_call_credits: 0 } })
})

t.test('a call still started at its agent\'s maximum duration is ended by the server', async (t) => {
  // 1 minute at a time scale of 1/1000 is 60 ms.
  const ctx = await setup(t, { CALL_TIME_SCALE: '0.001' }, { workers: true })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account, { call_settings: { max_call_duration_minutes: 1 } })
  await inboundNumber(ctx, account, agent._id)
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550123', from_number: '+4930123456' } })).json()
  const done = await waitForCall(t, ctx, account, call._id, (c) => c.call_status === 'success' || c.call_status === 'failed')
  t.equal(done.disconnection_reason, 'max_duration_reached')
  t.ok(done.end_timestamp >= call.start_timestamp)
  const late = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup' } })
  t.equal(late.statusCode, 409, 'the runtime\'s late end changes nothing')
})

t.test('a call forwarded to a person at its deadline ends with the conversation kept with the forwarding', async (t) => {
  // 1 minute at a time scale of 1/1000 is 60 ms; workers start once the forwarding is held, as a carrier's would be.
  const ctx = await setup(t, { CALL_TIME_SCALE: '0.001' })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account, { call_settings: { max_call_duration_minutes: 1 } })
  await inboundNumber(ctx, account, agent._id)
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550123', from_number: '+4930123456' } })).json()
  const transfer = { type: 'call_forwarding', from_agent_id: agent._id, to_number: '+14155550142', reason: 'asked for a person', timestamp: call.start_timestamp, outcome: 'answered' }
  const held = {
    agent_id: agent._id,
    transcript: CONVERSATION.slice(0, 2).map((item) => ({ ...item, timestamp: call.start_timestamp })),
    tokens: { 'gpt-4o-mini': { input: 300, output: 40 } },
    speech: { recognised: 3, synthesised: 4 },
    transfers: [transfer],
    recording_ms: 0
  }
  await ctx.db.updateTable('calls').set({ forwarding: JSON.stringify(held) }).where('id', '=', call._id).execute()
  t.teardown(await startWorkers(ctx.boss, { db: ctx.db, config: ctx.config, log: createLogger(ctx.config) }))
  const done = await waitForCall(t, ctx, account, call._id, (c) => c.call_status === 'success' || c.call_status === 'failed')
  t.match(done, { call_status: 'success', disconnection_reason: 'max_duration_reached', speech_seconds: { recognised: 3, synthesised: 4 } })
  t.same(done.transcription, held.transcript)
  t.same(done.transfer_history, [transfer])
  t.match(done.tokens.by_model, { 'gpt-4o-mini': { input: 300, output: 40 } })
})

t.test('a crash between the end and the analysis: the job runs when a worker comes back', async (t) => {
  const ctx = await setup(t) // no workers: the process "died" after committing the end
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await inboundNumber(ctx, account, agent._id)
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550123', from_number: '+4930123456' } })).json()
  await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup', transcription: [{ speaker: 'user', content: 'Thanks, great service.', timestamp: call.start_timestamp }] } })
  t.equal((await ctx.app.inject({ method: 'GET', url: `/v1/call/${call._id}`, headers: account.headers })).json().call_status, 'pending')

  const restarted = new PgBoss({ connectionString: ctx.url, useListenNotify: true, supervise: false, schedule: false, max: 2 })
  await restarted.start()
  await createQueues(restarted, ctx.config)
  await registerRuntimeWorkers({ db: ctx.db, boss: restarted, config: ctx.config, log: createLogger(ctx.config), analyser: createAnalyser(ctx.config.analyser) })
  t.teardown(() => restarted.stop({ graceful: false }))
  const done = await waitForCall(t, ctx, account, call._id, (c) => c.call_status !== 'pending')
  t.match(done, { call_status: 'success', sentiment: { sentiment: 'positive' } })
})

/** A local stand-in for an OpenAI-compatible chat-completions API. */
async function openaiStandIn (t: Test, answer: (body: any) => { status: number, body: unknown }) {
  const requests: any[] = []
  const server = http.createServer((req, res) => {
    let raw = ''
    req.on('data', (chunk) => { raw += chunk })
    req.on('end', () => {
      const body = JSON.parse(raw)
      requests.push({ url: req.url, headers: req.headers, body })
      const { status, body: out } = answer(body)
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(out))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, requests }
}

t.test('ANALYSER=openai: structured output fills the analysis and adds its tokens', async (t) => {
  const standIn = await openaiStandIn(t, () => ({
    status: 200,
    body: {
      model: 'gpt-4o-mini-2024',
      choices: [{ message: { content: JSON.stringify({ summary: 'Ada booked a cleaning.', sentiment: 'positive', explanation: 'She thanked the agent.', data: { caller_name: 'Ada', people: '2', existing_patient: true, service: 'whitening', appointment_date: '2026-12-01', email: null } }) } }],
      usage: { prompt_tokens: 700, completion_tokens: 60 }
    }
  }))
  const ctx = await setup(t, { ANALYSER: 'openai', ANALYSER_BASE_URL: standIn.url, ANALYSER_API_KEY: 'sk-test', ANALYSER_MODEL: 'gpt-4o-mini' }, { workers: true })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account, { data_retrieval: FIELDS })
  await inboundNumber(ctx, account, agent._id)
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550123', from_number: '+4930123456' } })).json()
  await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup', transcription: CONVERSATION.map((c) => ({ ...c, timestamp: call.start_timestamp })) } })
  const done = await waitForCall(t, ctx, account, call._id, (c) => c.call_status !== 'pending')
  t.match(done, { call_status: 'success', call_summary: 'Ada booked a cleaning.', sentiment: { sentiment: 'positive', explanation: 'She thanked the agent.' } })
  t.same(done.custom_analysis_data, { caller_name: 'Ada', existing_patient: true, appointment_date: '2026-12-01' }, 'values of the wrong type or outside the enum are dropped')
  t.same(done.tokens.by_model['gpt-4o-mini-2024'], { input: 700, output: 60, total: 760 })
  t.equal(standIn.requests.length, 1)
  const request = standIn.requests[0]
  t.equal(request.url, '/v1/chat/completions')
  t.equal(request.headers.authorization, 'Bearer sk-test')
  t.match(request.body, { model: 'gpt-4o-mini', response_format: { type: 'json_schema', json_schema: { strict: true, schema: { properties: { data: { required: FIELDS.map((f) => f.name) } } } } } })
  t.match(request.body.messages[1].content, /Caller: Hi, my name is Ada Lovelace/)
  t.notOk('conditions' in request.body.response_format.json_schema.schema.properties, 'no action has a condition: none is asked')
})

t.test('an analyser that keeps failing is retried, then the call is finalised without analysis', async (t) => {
  const standIn = await openaiStandIn(t, () => ({ status: 503, body: { error: { message: 'overloaded' } } }))
  const ctx = await setup(t, { ANALYSER: 'openai', ANALYSER_BASE_URL: standIn.url, ANALYSER_API_KEY: 'sk-test', CALL_TIME_SCALE: '0.001' }, { workers: true })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await inboundNumber(ctx, account, agent._id)
  const before = await balance(ctx, account)
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550123', from_number: '+4930123456' } })).json()
  await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup', end_timestamp: call.start_timestamp + 30_000, transcription: [{ speaker: 'user', content: 'hello', timestamp: call.start_timestamp }] } })
  const done = await waitForCall(t, ctx, account, call._id, (c) => c.call_status !== 'pending')
  t.match(done, { call_status: 'success', call_summary: null, sentiment: null, custom_analysis_data: null, call_credits_details: { phone_call_credits: 10 } })
  t.equal(standIn.requests.length, 7, 'the first attempt and 6 retries')
  const row = await ctx.db.selectFrom('calls').select(['analysis_status', 'analysis_error']).where('id', '=', call._id).executeTakeFirstOrThrow()
  t.match(row, { analysis_status: 'failed', analysis_error: /503/ })
  t.equal(await balance(ctx, account), before - 10, 'still charged')
})

const DELIVER_LOCALLY = { DELIVERY_TIME_SCALE: '0.001', DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIMEOUT_MS: '2000' }

/** An inbound call of the agent that holds CONVERSATION, ended and analysed. */
async function conversation (t: Test, ctx: TestContext, account: Account, agentId: string) {
  await inboundNumber(ctx, account, agentId)
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550123', from_number: '+4930123456' } })).json()
  await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup', transcription: CONVERSATION.map((c) => ({ ...c, timestamp: call.start_timestamp })) } })
  return await waitForCall(t, ctx, account, call._id, (c) => c.call_status !== 'pending')
}

const deliveryNames = async (ctx: TestContext, callId: string) =>
  (await ctx.db.selectFrom('webhook_deliveries').select('name').where('call_id', '=', callId).orderBy('name').execute()).map((r) => r.name)

t.test('ANALYSER=openai: an action whose condition the call does not meet is not delivered', async (t) => {
  const standIn = await openaiStandIn(t, (body) => {
    // Judges each condition by its text, as the model would: the caller booked, and asked for no refund.
    const asked = body.response_format.json_schema.schema.properties.conditions.properties as Record<string, { description: string }>
    const conditions = Object.fromEntries(Object.entries(asked).map(([key, { description }]) => [key, description.includes('appointment')]))
    return { status: 200, body: { choices: [{ message: { content: JSON.stringify({ summary: 'Booked.', sentiment: 'positive', explanation: 'Thanks.', data: {}, conditions }) } }] } }
  })
  const ctx = await setup(t, { ANALYSER: 'openai', ANALYSER_BASE_URL: standIn.url, ANALYSER_API_KEY: 'sk-test', ...DELIVER_LOCALLY }, { workers: true })
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await addAction(ctx.app, account, agent._id, { name: 'Booked', url: `${receiver.url}/booked`, condition: 'The caller booked an appointment.' })
  await addAction(ctx.app, account, agent._id, { name: 'Refund', url: `${receiver.url}/refund`, condition: 'The caller asked for a refund.' })
  await addAction(ctx.app, account, agent._id, { name: 'Every call', url: `${receiver.url}/every` })
  const call = await conversation(t, ctx, account, agent._id)
  t.equal(call.call_status, 'success')
  t.same(await deliveryNames(ctx, call._id), ['Booked', 'Every call'], 'the refund action has no delivery')
  await receiver.waitFor(2)
  t.same(receiver.received.map((r) => r.url).sort(), ['/booked', '/every'])
  const schema = standIn.requests[0].body.response_format.json_schema.schema
  t.same(schema.properties.conditions.required, ['c1', 'c2'], 'only the actions that have a condition are asked about')
  t.same(Object.values(schema.properties.conditions.properties).map((p: any) => p.description), ['The caller booked an appointment.', 'The caller asked for a refund.'])
})

t.test('a condition the analysis cannot judge (built-in analyser, or no answer) delivers the action', async (t) => {
  const standIn = await openaiStandIn(t, () => ({
    status: 200,
    // The model leaves the condition out: undecided.
    body: { choices: [{ message: { content: JSON.stringify({ summary: 'Booked.', sentiment: 'positive', explanation: 'Thanks.', data: {}, conditions: {} }) } }] }
  }))
  for (const env of [{}, { ANALYSER: 'openai', ANALYSER_BASE_URL: standIn.url, ANALYSER_API_KEY: 'sk-test' }] as Array<Record<string, string>>) {
    const ctx = await setup(t, { ...env, ...DELIVER_LOCALLY }, { workers: true })
    const receiver = await startReceiver(t)
    const account = await createAccount(ctx.db)
    const agent = await createAgent(ctx.app, account)
    await addAction(ctx.app, account, agent._id, { name: 'Refund', url: `${receiver.url}/refund`, condition: 'The caller asked for a refund.' })
    const call = await conversation(t, ctx, account, agent._id)
    t.same(await deliveryNames(ctx, call._id), ['Refund'], `${'ANALYSER' in env ? 'openai without an answer' : 'builtin'}: delivered`)
    t.same((await receiver.waitFor(1)).map((r) => r.url), ['/refund'])
  }
  t.equal(standIn.requests.length, 1)
})

t.test('an end is between the call\'s start and now, and within the agent\'s limit; usage is bounded', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await inboundNumber(ctx, account, agent._id)
  const before = await balance(ctx, account)
  const inbound = async () => (await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550123', from_number: '+4930123456' } })).json()
  const call = await inbound()
  const end = (payload: Record<string, unknown>) => ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup', ...payload } })
  const century = call.start_timestamp + 100 * 365 * 86_400_000
  for (const [payload, message] of [
    [{ end_timestamp: century }, /^body\.end_timestamp must not be later than now \(5 minutes of clock skew allowed\)/],
    [{ end_timestamp: Date.now() + 6 * 60_000 }, /^body\.end_timestamp must not be later than now/],
    [{ end_timestamp: 1e16 }, /^body\.end_timestamp must be <=/],
    [{ usage: { tokens: { m: { input: 1e300, output: 0 } } } }, /^body\.usage\.tokens\.m\.input must be <=/],
    [{ transcription: [{ speaker: 'user', content: 'hi', timestamp: 1e300 }] }, /^body\.transcription\.0\.timestamp must be <=/],
    [{ usage: { tokens: { m: { input: 0, output: 9_007_199_254_740_991 } } } }, /^body\.usage\.tokens\.m\.output must be <=/]
  ] as const) {
    const res = await end(payload)
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    t.match(res.json().message, message)
  }
  t.equal((await end({ end_timestamp: Date.now() + 60_000 })).statusCode, 202, 'a runtime clock a minute ahead is fine')

  // A call whose runtime reports an end past the agent's 10 minutes is charged the 10 minutes.
  const long = await inbound()
  await ctx.db.updateTable('calls').set({ start_timestamp: new Date(Date.now() - 3 * 3_600_000) }).where('id', '=', long._id).execute()
  const res = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${long._id}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup', transcription: [{ speaker: 'user', content: 'hello', timestamp: Date.now() }] } })
  t.equal(res.statusCode, 202)
  const done = await waitForCall(t, ctx, account, long._id, (c) => c.call_status !== 'pending')
  t.match(done, { call_status: 'success', duration_ms: 600_000, call_credits_details: { phone_call_credits: 100 } })
  t.equal(done.end_timestamp, done.start_timestamp + 600_000)
  const first = await waitForCall(t, ctx, account, call._id, (c) => c.call_status !== 'pending')
  t.equal(await balance(ctx, account), before - 100 - first.call_credits_details.phone_call_credits, 'the limit, nothing more')
})

t.test('CALL_RUNTIME=external: an outbound call no runtime picked up fails at its deadline as not_connected, free', async (t) => {
  // 1 minute at a time scale of 1/1000 is 60 ms.
  const ctx = await setup(t, { CALL_RUNTIME: 'external', CALL_TIME_SCALE: '0.001' }, { workers: true })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account, { call_settings: { max_call_duration_minutes: 1 } })
  await inboundNumber(ctx, account, agent._id)
  const before = await balance(ctx, account)
  const phone = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: '+14155550123', to_number: '+4930123456' } })).json()
  const web = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id } })).json()
  for (const id of [phone._id, web._id]) {
    const done = await waitForCall(t, ctx, account, id, (c) => c.call_status === 'success' || c.call_status === 'failed')
    t.match(done, { call_status: 'failed', disconnection_reason: 'not_connected', duration_ms: 0, call_credits_details: { phone_call_credits: 0, web_call_credits: 0 } })
  }
  t.equal(await balance(ctx, account), before, 'nothing charged')
})
