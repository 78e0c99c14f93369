import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { createLogger } from '../../src/logger.ts'
import { createMailer } from '../../src/mail/mailer.ts'
import { loadAgentLive } from '../helpers/live.ts'
import { UNREACHABLE } from '../../src/net/request.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { addNumber, TWILIO_SID, TWILIO_TOKEN } from '../helpers/messaging.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { poll } from '../helpers/poll.ts'
import { startRealtimeStandin } from '../helpers/realtime-standin.ts'
import { startReceiver } from '../helpers/receiver.ts'
import { startInbox } from '../helpers/smtp.ts'
import { startTwilioStandIn } from '../helpers/twilio-stand-in.ts'
import { finishedCall, startWebCall, typedTurn } from '../helpers/voice-client.ts'

// Actions during the call (issue 28, section 2), through the real protocols: a cascade web call over the browser
// WebSocket, the model (the OpenAI HTTP stand-in) calling the action's function, the action reaching a local
// receiver or the Twilio Messages stand-in, the result read back by the model and kept in the transcript.

const ENV = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIME_SCALE: '0.001' }

async function cascade (t: Test, env: Record<string, string> = {}) {
  const standin = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, { ...ENV, VOICE_ENGINE: 'cascade', STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url, ...env }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  return { ...ctx, url, standin }
}

async function agentOf (ctx: TestContext, account: Account) {
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi!', general_prompt: 'You are the shop.' } })).json()
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Shop', llm_id: llm._id } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json() as { _id: string }
}

async function addAction (ctx: TestContext, account: Account, agentId: string, type: string, settings: Record<string, unknown>) {
  return await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agentId}/actions`, headers: account.headers, payload: { action_type: type, settings } })
}

const webCall = async (ctx: TestContext & { url: string }, account: Account, agentId: string) => await startWebCall(ctx.app, ctx.url, account.headers, agentId)

const turn = typedTurn

const ORDER_PARAMETERS = { type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'] }

t.test('api_call during the call: the model calls it, the receiver gets the arguments, the answer goes back to the model and into the transcript; a 500 is an error text and the call goes on', async (t) => {
  const ctx = await cascade(t)
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const agent = await agentOf(ctx, account)
  const added = await addAction(ctx, account, agent._id, 'api_call', { name: 'Order status', when: 'during_call', url: `${receiver.url}/orders`, method: 'POST', parameters: ORDER_PARAMETERS })
  t.equal(added.statusCode, 201, added.body)
  receiver.answers.push({ status: 200, body: '{"status":"shipped"}', headers: { 'content-type': 'application/json' } }, { status: 500, body: 'database down' })
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Order_status', arguments: { order_id: 'A17' } }] },
    { text: 'Your order has shipped.' },
    { toolCalls: [{ name: 'Order_status', arguments: { order_id: 'B2' } }] },
    { text: 'I cannot look that up right now.' }
  )

  const { callId, client } = await webCall(ctx, account, agent._id)
  await turn(client, 'Where is my order A17?', /has shipped/)
  const [request] = await receiver.waitFor(1)
  t.equal(request.method, 'POST')
  t.equal(request.url, '/orders')
  t.same(request.json, { order_id: 'A17' }, 'the receiver got the model\'s arguments')
  const first = ctx.standin.requests.chat[0].body
  t.match(first.tools, [{ type: 'function', function: { name: 'Order_status', parameters: ORDER_PARAMETERS } }], 'offered with its declared parameters')
  t.match(ctx.standin.requests.chat[1].body.messages.at(-1), { role: 'tool', content: '{"status":"shipped"}' }, 'the next model request carries the answer')

  await turn(client, 'And order B2?', /cannot look that up/)
  await receiver.waitFor(2)
  t.match(ctx.standin.requests.chat[3].body.messages.at(-1), { role: 'tool', content: /^Error: .*HTTP 500/ }, 'a 500 reaches the model as an error text')
  client.hangup()

  const done = await finishedCall(ctx.app, account.headers, callId)
  const tools = done.transcription.filter((item: { speaker: string }) => item.speaker === 'tool')
  t.equal(tools.length, 2)
  t.match(tools[0], { tool: { name: 'Order_status', type: 'api_call', output: '{"status":"shipped"}' } }, 'the run is a tool item with its output')
  t.match(tools[1], { tool: { name: 'Order_status', type: 'api_call', error: /HTTP 500/ } })
  t.equal(done.transcription.at(-1).speaker, 'agent', 'the call went on after the failure')
})

const NUMBER = '+14155550100'

/** A cascade call's app with the Twilio stand-in (TWILIO_API_URL) and an account owning a Twilio number. */
async function smsSetup (t: Test, env: Record<string, string> = {}) {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(TWILIO_SID, TWILIO_TOKEN)
  const ctx = await cascade(t, { TWILIO_API_URL: twilio.url, ...env })
  const account = await createAccount(ctx.db)
  await addNumber(ctx.db, account.user.id, NUMBER, 'twilio', twilio)
  const agent = await agentOf(ctx, account)
  return { ...ctx, twilio, account, agent }
}

const SMS_SETTINGS = { name: 'Send code', when: 'during_call', message: 'Your code is {{code}}', send_to_customer: false, direct_recipients: ['+15551230000'] }

t.test('send_sms during the call: the model fills {{code}}, Twilio gets the SMS from the account\'s number, the message log lists it with the call', async (t) => {
  const ctx = await smsSetup(t)
  const added = await addAction(ctx, ctx.account, ctx.agent._id, 'send_sms', SMS_SETTINGS)
  t.equal(added.statusCode, 201, added.body)
  ctx.standin.replies.push({ toolCalls: [{ name: 'Send_code', arguments: { code: '4411' } }] }, { text: 'I have sent you the code.' })

  const { callId, client } = await webCall(ctx, ctx.account, ctx.agent._id)
  await turn(client, 'Please text me the code.', /sent you the code/)
  t.match(ctx.standin.requests.chat[0].body.tools, [{ function: { name: 'Send_code', parameters: { type: 'object', properties: { code: { type: 'string' } }, required: ['code'] } } }])
  t.equal(ctx.twilio.messages.length, 1)
  t.match(ctx.twilio.messages[0], { from: NUMBER, to: '+15551230000', body: 'Your code is 4411', channel: 'sms' })
  t.match(ctx.standin.requests.chat[1].body.messages.at(-1), { role: 'tool', content: 'The SMS was sent to +15551230000.' })
  client.hangup()

  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  t.match(done.transcription.find((item: { speaker: string }) => item.speaker === 'tool'), { tool: { type: 'send_sms', output: /sent to \+15551230000/ } })
  const list = (await ctx.app.inject({ method: 'GET', url: `/v1/messages?call_id=${callId}`, headers: ctx.account.headers })).json()
  t.equal(list.data.length, 1)
  t.match(list.data[0], { call_id: callId, origin: 'live', channel: 'sms', sender: NUMBER, recipient: '+15551230000', body: 'Your code is 4411', status: 'sent', action_id: added.json()._id })
})

t.test('send_sms during the call: a model asking for 15 sends gets MESSAGES_PER_CALL_MAX of them, the rest refused', async (t) => {
  const ctx = await smsSetup(t, { MESSAGES_PER_CALL_MAX: '3' })
  t.equal((await addAction(ctx, ctx.account, ctx.agent._id, 'send_sms', SMS_SETTINGS)).statusCode, 201)
  ctx.standin.replies.push(
    { toolCalls: Array.from({ length: 15 }, (_, i) => ({ name: 'Send_code', arguments: { code: String(1000 + i) } })) },
    { text: 'Done sending.' }
  )
  const { callId, client } = await webCall(ctx, ctx.account, ctx.agent._id)
  await turn(client, 'Send me fifteen codes.', /Done sending/)
  t.equal(ctx.twilio.messages.length, 3, 'only the per-call limit went out')
  const results = ctx.standin.requests.chat[1].body.messages.filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => m.content)
  t.equal(results.length, 15, 'every call of the function is answered')
  t.equal(results.filter((r: string) => /^The SMS was sent/.test(r)).length, 3)
  t.equal(results.filter((r: string) => /^Error: the SMS could not be sent/.test(r)).length, 12, 'the rest are answered as refused')
  client.hangup()
  await finishedCall(ctx.app, ctx.account.headers, callId)
  const list = (await ctx.app.inject({ method: 'GET', url: `/v1/messages?call_id=${callId}`, headers: ctx.account.headers })).json()
  t.equal(list.data.filter((m: { status: string }) => m.status === 'sent').length, 3)
  t.equal(list.data.filter((m: { status: string }) => m.status === 'refused').length, 12, 'the refused ones are logged too')
})

t.test('bad input: a parameter named like a call variable, a sender the account lacks, a type that cannot act', async (t) => {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(TWILIO_SID, TWILIO_TOKEN)
  const ctx = await setup(t, { TWILIO_API_URL: twilio.url })
  const account = await createAccount(ctx.db)
  const agent = await agentOf(ctx, account)
  const error = (res: { statusCode: number, json: () => any }) => ({ statusCode: res.statusCode, ...res.json() })

  const shadowing = await addAction(ctx, account, agent._id, 'api_call', {
    name: 'Lookup', when: 'during_call', url: 'http://127.0.0.1:9/x', parameters: { type: 'object', properties: { call_id: { type: 'string' } } }
  })
  t.match(error(shadowing), { statusCode: 400, error: 'Bad Request', message: /"call_id" is a built-in call variable/ })

  // Without a sender named, one is chosen when the message goes: an action may be set up before a number is bought.
  t.equal((await addAction(ctx, account, agent._id, 'send_sms', SMS_SETTINGS)).statusCode, 201, 'no number yet: accepted')
  const noNumber = await addAction(ctx, account, agent._id, 'send_sms', { ...SMS_SETTINGS, from_number: NUMBER })
  t.match(error(noNumber), { statusCode: 409, code: 'sender_not_available' }, 'a sender named that the account does not hold')

  await addNumber(ctx.db, account.user.id, NUMBER, 'twilio', twilio)
  const notOurs = await addAction(ctx, account, agent._id, 'send_sms', { ...SMS_SETTINGS, from_number: '+14155550199' })
  t.match(error(notOurs), { statusCode: 409, code: 'sender_not_available', message: /\+14155550199 is not one of your phone numbers/ })
  t.equal((await addAction(ctx, account, agent._id, 'send_sms', { ...SMS_SETTINGS, from_number: NUMBER })).statusCode, 201, 'the account\'s own number is accepted')

  const crm = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'crm', settings: { name: 'CRM', operations: ['log_call'] } } })
  t.match(error(crm), { statusCode: 409, code: 'integration_not_connected' }, 'a CRM tool needs HubSpot connected')
  const actions = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/actions`, headers: account.headers })).json()
  t.equal((Array.isArray(actions) ? actions : actions.data).length, 2, 'nothing refused was stored')
})

t.test('a live request slower than a second: the agent says a filler line while it waits, then the answer', async (t) => {
  const ctx = await cascade(t, { CALL_TIME_SCALE: '0.05' })
  const account = await createAccount(ctx.db)
  const agent = await agentOf(ctx, account)
  // A receiver that answers only once the test has heard the filler: no timing is assumed.
  let answer: (() => void) | undefined
  const server = http.createServer((_req, res) => { answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"shipped"}') })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`
  t.equal((await addAction(ctx, account, agent._id, 'api_call', { name: 'Order status', when: 'during_call', url, parameters: ORDER_PARAMETERS })).statusCode, 201)
  ctx.standin.replies.push({ toolCalls: [{ name: 'Order_status', arguments: { order_id: 'A17' } }] }, { text: 'Your order has shipped.' })

  const { callId, client } = await webCall(ctx, account, agent._id)
  await client.waitFor('agent_speaking', (e) => !e.speaking, client.events.findLastIndex((e) => e.type === 'agent_speaking' && e.speaking))
  const from = client.events.length
  client.sendText('Where is my order A17?')
  await client.waitFor('agent_text', (e) => /One moment, please\./.test(String(e.delta)), from)
  t.notOk(client.events.slice(from).some((e) => e.type === 'agent_text' && /shipped/.test(String(e.delta))), 'the filler comes while the request runs')
  // The text goes out as the speech request starts: the request is awaited, not assumed.
  await poll(() => ctx.standin.requests.speech, (all) => all.some((r) => /One moment, please\./.test(String(r.body.input))), { message: () => 'the filler was never synthesised' })
  await poll(() => answer, (ready) => ready !== undefined)
  answer!()
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && /shipped/.test(String(e.content)), from)
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done.transcription.at(-1), { speaker: 'agent', content: 'One moment, please. Your order has shipped.' })
})

t.test('live requests: at most 20 per call, and the account\'s hourly budget holds under 150 concurrent runs across calls', async (t) => {
  const ctx = await setup(t, { ...ENV, LIVE_REQUESTS_PER_ACCOUNT_HOUR: '7' })
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const agent = await agentOf(ctx, account)
  t.equal((await addAction(ctx, account, agent._id, 'api_call', { name: 'Ping', when: 'during_call', url: `${receiver.url}/ping` })).statusCode, 201)
  const log = createLogger(ctx.config)
  const mailer = createMailer(ctx.db, ctx.config, log)
  const calls = await Promise.all(Array.from({ length: 10 }, async (_, i) => {
    const loaded = await loadAgentLive({ db: ctx.db, config: ctx.config, log, mailer, userId: account.user.id, callId: `call-${i}`, signal: new AbortController().signal, variables: () => ({}), customer: { phone: null, email: null }, language: 'en' }, agent._id)
    t.teardown(loaded.close)
    return loaded.tools[0]
  }))
  const runs = await Promise.allSettled(Array.from({ length: 150 }, async (_, i) => await calls[i % 10].run({}, { db: ctx.db, config: ctx.config, log, mailer, userId: account.user.id, callId: `call-${i % 10}`, signal: new AbortController().signal, variables: () => ({}), customer: { phone: null, email: null }, language: 'en' })))
  t.equal(runs.filter((run) => run.status === 'fulfilled').length, 7, 'exactly the budget got through')
  t.equal(receiver.received.length, 7, 'and only those reached the receiver')
  t.ok(runs.filter((run) => run.status === 'rejected').every((run) => /as many live requests as it may this hour/.test(String((run as PromiseRejectedResult).reason))))

  // The per-call cap: one call's function sends 20, then refuses, whatever the account's budget.
  await ctx.db.deleteFrom('hourly_budgets').execute()
  const roomy = { ...ctx.config, liveRequestsPerAccountHour: 1000 }
  const loaded = await loadAgentLive({ db: ctx.db, config: roomy, log, mailer, userId: account.user.id, callId: 'one', signal: new AbortController().signal, variables: () => ({}), customer: { phone: null, email: null }, language: 'en' }, agent._id)
  t.teardown(loaded.close)
  const context = { db: ctx.db, config: roomy, log, mailer, userId: account.user.id, callId: 'one', signal: new AbortController().signal, variables: () => ({}), customer: { phone: null, email: null }, language: 'en' }
  for (let i = 0; i < 20; i++) await loaded.tools[0].run({}, context)
  await t.rejects(loaded.tools[0].run({}, context), /this call has sent 20 requests through Ping already/)
})

t.test('realtime engine: a live api_call offered in session.update, its slow answer bridged by the filler, then read back as the function output', async (t) => {
  const standin = await startRealtimeStandin(t)
  const ctx = await setup(t, { ...ENV, VOICE_ENGINE: 'cascade', REALTIME_URL: standin.url, REALTIME_API_KEY: 'sk-realtime-test', CALL_TIME_SCALE: '0.05' }, { workers: true })
  const listening = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi!', general_prompt: 'You are the shop.', engine: 'realtime' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Shop', llm_id: llm._id } })).json()
  let answer: (() => void) | undefined
  const server = http.createServer((_req, res) => { answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"shipped"}') })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`
  t.equal((await addAction(ctx, account, agent._id, 'api_call', { name: 'Order status', when: 'both', url, parameters: ORDER_PARAMETERS })).statusCode, 201)
  standin.replies.push({ calls: [{ name: 'Order_status', arguments: '{"order_id":"A17"}' }] }, { text: 'Your order has shipped.' })

  const { callId, client } = await webCall({ ...ctx, url: listening }, account, agent._id)
  const update = standin.events.find((e) => e.type === 'session.update') as any
  t.match(update.session.tools, [{ type: 'function', name: 'Order_status', parameters: ORDER_PARAMETERS }])
  await client.waitFor('agent_speaking', (e) => !e.speaking, client.events.findLastIndex((e) => e.type === 'agent_speaking' && e.speaking))
  const from = client.events.length
  client.sendText('Where is my order A17?')
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && /One moment, please\./.test(String(e.content)), from)
  await poll(() => answer, (ready) => ready !== undefined)
  answer!()
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && /shipped/.test(String(e.content)), from)
  const outputs = standin.events.filter((e: any) => e.type === 'conversation.item.create' && e.item?.type === 'function_call_output').map((e: any) => e.item.output)
  t.same(outputs, ['{"status":"shipped"}'])
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  const agentLines = done.transcription.filter((item: { speaker: string }) => item.speaker === 'agent').map((item: { content: string }) => item.content)
  t.same(agentLines.slice(-2), ['One moment, please.', 'Your order has shipped.'], 'the filler and the answer, each once')
})

t.test('realtime engine: the model sends an e-mail to the address the caller gave, an SMS and a WhatsApp message during the call', async (t) => {
  const standin = await startRealtimeStandin(t)
  const inbox = await startInbox(t)
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(TWILIO_SID, TWILIO_TOKEN)
  const ctx = await setup(t, { ...ENV, VOICE_ENGINE: 'cascade', REALTIME_URL: standin.url, REALTIME_API_KEY: 'sk-realtime-test', SMTP_URL: inbox.url, TWILIO_API_URL: twilio.url }, { workers: true })
  const listening = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  await addNumber(ctx.db, account.user.id, NUMBER, 'twilio', twilio)
  twilio.enableWhatsApp(TWILIO_SID, NUMBER)
  t.equal((await ctx.app.inject({ method: 'PATCH', url: '/v1/messaging-settings', headers: account.headers, payload: { whatsapp_sender: NUMBER } })).statusCode, 200)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi!', engine: 'realtime' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Shop', llm_id: llm._id } })).json()
  for (const [type, settings] of [
    ['send_email', { name: 'Mail booking', when: 'during_call', subject: 'Your booking', message: 'Booked for {{day}}.', send_to_customer: true }],
    ['send_sms', { name: 'Text code', when: 'during_call', message: 'Code {{code}}', send_to_customer: false, direct_recipients: ['+15551230000'] }],
    ['send_chat', { name: 'WhatsApp note', when: 'during_call', message: 'See you {{day}}!', send_to_customer: false, direct_recipients: ['+15551230001'] }]
  ] as const) t.equal((await addAction(ctx, account, agent._id, type, settings)).statusCode, 201, type)
  standin.replies.push({
    calls: [
      { name: 'Mail_booking', arguments: '{"day":"Friday","email":"ada@example.com"}' },
      { name: 'Text_code', arguments: '{"code":"77"}' },
      { name: 'WhatsApp_note', arguments: '{"day":"Friday"}' }
    ]
  }, { text: 'All sent.' })

  const { callId, client } = await webCall({ ...ctx, url: listening }, account, agent._id)
  const update = standin.events.find((e) => e.type === 'session.update') as any
  t.match(update.session.tools, [
    { name: 'Mail_booking', parameters: { properties: { day: { type: 'string' }, email: { type: 'string' } }, required: ['day'] } },
    { name: 'Text_code', parameters: { properties: { code: { type: 'string' } }, required: ['code'] } },
    { name: 'WhatsApp_note', parameters: { properties: { day: { type: 'string' } }, required: ['day'] } }
  ], 'a web call knows no address: the e-mail asks the model for the one the caller gave')
  await turn(client, 'Send me everything, my address is ada@example.com.', /All sent/)
  const [mail] = await inbox.waitFor(1)
  t.same(mail.to, ['ada@example.com'])
  t.match(mail.raw, /Subject: Your booking/)
  t.match(mail.raw, /Booked for Friday\./)
  // The three run at once: their order at Twilio is not theirs in the response.
  t.match([...twilio.messages].sort((a, b) => a.channel.localeCompare(b.channel)), [
    { from: NUMBER, to: '+15551230000', body: 'Code 77', channel: 'sms' },
    { from: `whatsapp:${NUMBER}`, to: 'whatsapp:+15551230001', body: 'See you Friday!', channel: 'whatsapp' }
  ])
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.same(done.transcription.filter((item: { speaker: string }) => item.speaker === 'tool').map((item: { tool: { type: string } }) => item.tool.type).sort(), ['send_chat', 'send_email', 'send_sms'], 'each a tool item (in the order they finished)')
  const logged = (await ctx.app.inject({ method: 'GET', url: `/v1/messages?call_id=${callId}`, headers: account.headers })).json()
  t.same(logged.data.map((m: { channel: string, status: string, origin: string }) => [m.channel, m.status, m.origin]).sort(), [['chat', 'sent', 'live'], ['email', 'sent', 'live'], ['sms', 'sent', 'live']])
})

t.test('a live api_call follows the deliveries\' address rules: a private address is refused before any connection', async (t) => {
  const ctx = await setup(t, {})
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const agent = await agentOf(ctx, account)
  t.equal((await addAction(ctx, account, agent._id, 'api_call', { name: 'Ping', when: 'during_call', url: `${receiver.url}/ping` })).statusCode, 201)
  const log = createLogger(ctx.config)
  const context = { db: ctx.db, config: ctx.config, log, mailer: createMailer(ctx.db, ctx.config, log), userId: account.user.id, callId: 'c', signal: new AbortController().signal, variables: () => ({}), customer: { phone: null, email: null }, language: 'en' }
  const loaded = await loadAgentLive(context, agent._id)
  t.teardown(loaded.close)
  await t.rejects(loaded.tools[0].run({}, context), new RegExp(UNREACHABLE))
  t.equal(receiver.received.length, 0, 'nothing reached the loopback receiver')
})
