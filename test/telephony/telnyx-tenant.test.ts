import { Writable } from 'node:stream'
import pino from 'pino'
import t from 'tap'
import type { Test } from 'tap'
import { createAccount, type Account } from '../helpers/app.ts'
import { agentQuiet, poll } from '../helpers/poll.ts'
import { listenWithTelnyx, PUBLIC, type TelnyxContext } from '../helpers/telnyx-phone.ts'
import { type StandinCall } from '../helpers/telnyx-standin.ts'
import { finishedCall, speech } from '../helpers/voice-client.ts'

// Calls on a number a tenant imported from its own Telnyx account (the stand-in's second account), end to end on
// loopback: the account's webhooks come to its own URL here and are verified with its own public key (never the
// installation's, and the installation's URL never takes the tenant's), and every command goes out with the
// tenant's API key (the stand-in answers a call's commands only for the key of the account holding the call).

const TENANT_NUMBER = '+13125550140'
const CALLER = '+14155550199'

type Ctx = TelnyxContext & { logs: string[] }

async function listen (t: Test): Promise<Ctx> {
  const logs: string[] = []
  const logger = pino({ level: 'trace' }, new Writable({ write (chunk, _encoding, done) { logs.push(String(chunk)); done() } }))
  const ctx = await listenWithTelnyx(t, {}, { logger })
  ctx.telnyx.tenant.owned.set('2293384261075731401', { id: '2293384261075731401', phone_number: TENANT_NUMBER, connection_id: null })
  return { ...ctx, logs }
}

async function agentWith (ctx: Ctx, account: Account) {
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello, this is the clinic.', general_prompt: 'You are the clinic\'s receptionist.' } })).json()
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: config._id } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json() as { _id: string }
}

async function importTenantNumber (ctx: Ctx, account: Account, agentId: string | null, phoneNumber = TENANT_NUMBER) {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/v1/phone-number/import-carrier',
    headers: account.headers,
    payload: { phone_number: phoneNumber, carrier: 'telnyx', api_key: ctx.telnyx.tenant.apiKey, public_key: ctx.telnyx.tenant.publicKey, inbound_agent_id: agentId, outbound_agent_id: agentId }
  })
  if (res.statusCode !== 201) throw new Error(res.body)
  const row = await ctx.db.selectFrom('phone_numbers').selectAll().where('phone_number', '=', phoneNumber).executeTakeFirstOrThrow()
  return { id: res.json()._id as string, webhookUrl: `${PUBLIC}/telephony/telnyx/webhook/accounts/${row.carrier_account_id!}` }
}

const callsOf = async (ctx: Ctx) => await ctx.db.selectFrom('calls').selectAll().execute()
const commandsOf = (call: StandinCall) => call.commands.map((c) => c.command)

t.test('an inbound call on the tenant\'s number: its account\'s webhook, answered and streamed with the tenant\'s key, the agent talks, the caller hangs up', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const { webhookUrl } = await importTenantNumber(ctx, account, agent._id)
  ctx.openai.transcripts.push('I would like an appointment.')
  ctx.openai.replies.push({ text: 'Tuesday at ten is free.' })

  const { call, status } = await ctx.telnyx.tenant.dialIn(CALLER, TENANT_NUMBER)
  t.equal(call.webhookUrl, webhookUrl, 'the call\'s webhooks come to the account\'s own URL')
  t.equal(status, 204)
  await poll(() => commandsOf(call), (c) => c.length === 2, { message: () => 'answered and streamed' })
  t.same(commandsOf(call), ['answer', 'streaming_start'], 'taken by the stand-in only with the tenant\'s key')
  const stream = await ctx.telnyx.stream(call)
  await agentQuiet(stream)
  t.match(ctx.openai.requests.speech[0].body, { input: 'Hello, this is the clinic.' }, 'the agent answered')
  stream.sendAudio(speech(600, 700))
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 1, { message: 'the caller is answered' })
  await ctx.telnyx.hangup(call)

  const [row] = await callsOf(ctx)
  t.match(row, { carrier: 'telnyx', carrier_call_id: call.callControlId, direction: 'inbound', call_from: CALLER, call_to: TENANT_NUMBER })
  const done = await finishedCall(ctx.app, account.headers, row.id)
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup', simulated: false })
  t.equal(ctx.telnyx.owned.size, 0)
  t.notOk(ctx.logs.join('').includes(ctx.telnyx.tenant.apiKey), 'the tenant\'s key is in no log line')
})

t.test('signatures: the tenant\'s URL takes only the tenant\'s key, the installation\'s URL only the installation\'s; an unknown account is 403', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const { webhookUrl } = await importTenantNumber(ctx, account, agent._id)
  const payload = { call_control_id: 'v3:forged-call', from: CALLER, to: TENANT_NUMBER, direction: 'incoming' }

  const byInstallation = await ctx.telnyx.post(webhookUrl, 'call.initiated', payload)
  t.equal(byInstallation.status, 403, 'the installation\'s key does not verify the tenant\'s URL')
  t.equal(JSON.parse(byInstallation.body).code, 'invalid_signature')
  for (const signing of ['none', 'wrong', 'stale'] as const) t.equal((await ctx.telnyx.post(webhookUrl, 'call.initiated', payload, signing, 'tenant')).status, 403, signing)
  t.equal((await ctx.telnyx.post(ctx.telnyx.webhookUrl, 'call.initiated', payload, 'valid', 'tenant')).status, 403, 'the tenant\'s key does not verify the installation\'s URL')
  for (const unknown of ['6b0a4090f070773cfba937aa', 'nothing', '..%2F..']) {
    t.equal((await ctx.telnyx.post(`${PUBLIC}/telephony/telnyx/webhook/accounts/${unknown}`, 'call.initiated', payload, 'valid', 'tenant')).status, 403, `account ${unknown}`)
  }
  t.equal((await callsOf(ctx)).length, 0, 'no call was stored')
  t.equal([...ctx.telnyx.calls.values()].filter((c) => c.commands.length > 0).length, 0, 'nothing was sent to Telnyx')

  // A rotated public key: the old one no longer verifies the account's webhooks.
  const rotated = await ctx.app.inject({ method: 'PATCH', url: '/v1/phone-number/telnyx-credentials', headers: account.headers, payload: { phone_number: TENANT_NUMBER, public_key: Buffer.alloc(32, 7).toString('base64') } })
  t.equal(rotated.statusCode, 200)
  t.equal((await ctx.telnyx.post(webhookUrl, 'call.hangup', { call_control_id: 'v3:nobody', hangup_cause: 'normal_clearing' }, 'valid', 'tenant')).status, 403)
})

t.test('a webhook acts on its own account\'s numbers only: the installation\'s URL and another account\'s URL reject a call to the tenant\'s number', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await importTenantNumber(ctx, account, agent._id)
  // Another account here imports a number of the same Telnyx account: an account (and URL) of its own.
  ctx.telnyx.tenant.owned.set('2293384261075731402', { id: '2293384261075731402', phone_number: '+13125550141', connection_id: null })
  const other = await createAccount(ctx.db)
  const otherAgent = await agentWith(ctx, other)
  const theirs = await importTenantNumber(ctx, other, otherAgent._id, '+13125550141')
  t.equal(ctx.telnyx.tenant.applications.size, 2, 'one application per account here')

  const misrouted: StandinCall = { callControlId: 'v3:' + 'a'.repeat(32), direction: 'incoming', from: CALLER, to: TENANT_NUMBER, clientState: undefined, webhookUrl: theirs.webhookUrl, alive: true, streams: [], commands: [], account: { name: 'tenant', connectionId: [...ctx.telnyx.tenant.applications.keys()][1] } }
  ctx.telnyx.calls.set(misrouted.callControlId, misrouted)
  const res = await ctx.telnyx.post(theirs.webhookUrl, 'call.initiated', { call_control_id: misrouted.callControlId, from: CALLER, to: TENANT_NUMBER, direction: 'incoming' }, 'valid', 'tenant')
  t.equal(res.status, 204)
  t.same(commandsOf(misrouted), ['reject'], 'another account\'s number is not answered')

  const installationCall = await ctx.telnyx.dialIn(CALLER, TENANT_NUMBER)
  t.same(commandsOf(installationCall.call), ['reject'], 'the installation\'s account does not answer the tenant\'s number')
  t.equal((await callsOf(ctx)).length, 0)
})

t.test('outbound: make-phone-call from the tenant\'s number dials with its key on its application, its events at its URL; the person hangs up', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const { webhookUrl } = await importTenantNumber(ctx, account, agent._id)
  const [application] = ctx.telnyx.tenant.applications.values()
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: TENANT_NUMBER, to_number: '+14155550123' } })
  t.equal(res.statusCode, 201, res.body)
  const callId = res.json()._id as string
  const phone = await poll(() => [...ctx.telnyx.calls.values()].find((c) => c.to === '+14155550123'), (c) => c !== undefined, { message: () => 'the call was dialled' })
  t.match(phone!.account, { name: 'tenant', connectionId: application.id }, 'dialled with the tenant\'s key')
  t.match(phone!.commands[0].body, { connection_id: application.id, from: TENANT_NUMBER, webhook_url: webhookUrl })
  t.ok(ctx.telnyx.tenant.requests.some((r) => r.method === 'POST' && r.path === '/v2/calls'))
  const stream = await ctx.telnyx.stream(phone!)
  await agentQuiet(stream)
  await ctx.telnyx.hangup(phone!)
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { direction: 'outbound', call_status: 'success', disconnection_reason: 'user_hangup' })
  t.ok((await callsOf(ctx))[0].answered_at !== null, 'the answer, signed by the tenant\'s account, was recorded')
})

t.test('a call whose stream drops is hung up with the tenant\'s key', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await importTenantNumber(ctx, account, agent._id)
  const { call } = await ctx.telnyx.tenant.dialIn(CALLER, TENANT_NUMBER)
  const stream = await ctx.telnyx.stream(call)
  await agentQuiet(stream)
  stream.socket.terminate()
  await poll(() => commandsOf(call), (c) => c.includes('hangup'), { message: (c) => `hung up: ${c.join(', ')}` })
  const [row] = await callsOf(ctx)
  t.match(await finishedCall(ctx.app, account.headers, row.id), { disconnection_reason: 'stream_dropped' })
})

t.test('forwarding: transfer with the tenant\'s key; the new leg\'s events come to the account\'s URL and end the call call_transfer', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'call_forwarding', settings: { name: 'Front desk', phone_number: '+14155550142', timeout_seconds: 20 } } })
  t.equal(tool.statusCode, 201, tool.body)
  const { webhookUrl } = await importTenantNumber(ctx, account, agent._id)
  ctx.telnyx.callees.set('+14155550142', { answer: 'answer', talkMs: 1200 })
  ctx.openai.transcripts.push('Can I talk to a person?')
  ctx.openai.replies.push({ toolCalls: [{ name: 'Front_desk', arguments: { reason: 'asked for a person' } }] }, { text: 'One moment.' })

  const { call } = await ctx.telnyx.tenant.dialIn(CALLER, TENANT_NUMBER)
  const stream = await ctx.telnyx.stream(call)
  await agentQuiet(stream)
  stream.sendAudio(speech(600, 700))
  const done = await finishedCall(ctx.app, account.headers, (await poll(() => callsOf(ctx), (rows) => rows.length === 1))[0].id)
  t.match(call.commands.find((c) => c.command === 'transfer')?.body, { to: '+14155550142', from: TENANT_NUMBER }, 'transferred with the tenant\'s key')
  const leg = [...ctx.telnyx.calls.values()].find((c) => c.to === '+14155550142')
  t.equal(leg?.webhookUrl, webhookUrl, 'the person\'s leg reports to the account\'s URL')
  t.match(done, { call_status: 'success', disconnection_reason: 'call_transfer' })
  t.match(done.transfer_history, [{ type: 'call_forwarding', to_number: '+14155550142', outcome: 'answered' }])
})

t.test('send_dtmf on the tenant\'s number goes out with the tenant\'s key', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'send_dtmf', settings: { name: 'Press keys' } } })
  t.equal(tool.statusCode, 201, tool.body)
  await importTenantNumber(ctx, account, agent._id)
  ctx.openai.transcripts.push('For billing, press 2.')
  ctx.openai.replies.push({ toolCalls: [{ name: 'Press_keys', arguments: { digits: 'w2' } }] }, { text: 'I pressed two.' })

  const { call } = await ctx.telnyx.tenant.dialIn(CALLER, TENANT_NUMBER)
  const stream = await ctx.telnyx.stream(call)
  await agentQuiet(stream)
  stream.sendAudio(speech(600, 700))
  const sent = await poll(() => call.commands.filter((c) => c.command === 'send_dtmf'), (c) => c.length === 1, { message: 'no send_dtmf command' })
  t.same(sent[0].body, { digits: 'w2' }, 'taken by the stand-in only with the tenant\'s key')
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 2, { message: 'the model heard the keys went out' })
  await ctx.telnyx.hangup(call)
  const [row] = await callsOf(ctx)
  t.match(await finishedCall(ctx.app, account.headers, row.id), { disconnection_reason: 'user_hangup' })
})
