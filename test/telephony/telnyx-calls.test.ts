import t from 'tap'
import { WebSocket } from 'ws'
import type { Test } from 'tap'
import { createCarriers } from '../../src/modules/phone-numbers/carriers/index.ts'
import { importNumber } from '../../src/modules/phone-numbers/numbers.ts'
import { createAccount, type Account } from '../helpers/app.ts'
import { agentQuiet, poll } from '../helpers/poll.ts'
import { listenWithTelnyx, OUR_NUMBER, PUBLIC, type TelnyxContext } from '../helpers/telnyx-phone.ts'
import { type StandinCall, type TelnyxStream } from '../helpers/telnyx-standin.ts'
import { finishedCall, speech } from '../helpers/voice-client.ts'

// Phone calls through Telnyx, end to end on loopback: the Telnyx stand-in takes Call Control commands, posts
// webhooks signed with its Ed25519 key and streams media (PCMU 8 kHz); speech and chat are the OpenAI-compatible
// stand-in (cascade engine). PUBLIC_BASE_URL is a public address the stand-in reaches through a route.

const CALLER = '+14155550199'

type Ctx = TelnyxContext

async function listen (t: Test, env: Record<string, string> = {}): Promise<Ctx> {
  return await listenWithTelnyx(t, env)
}

async function agentWith (ctx: Ctx, account: Account, llm: Record<string, unknown> = {}) {
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello, this is the clinic.', general_prompt: 'You are the clinic\'s receptionist.', ...llm } })).json()
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: config._id } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json() as { _id: string }
}

async function buyNumber (ctx: Ctx, account: Account, agentId: string | null) {
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: OUR_NUMBER, inbound_agent_id: agentId, outbound_agent_id: agentId } })
  if (res.statusCode !== 201) throw new Error(res.body)
}

/** The caller says something once the agent has spoken and stopped; answers the agent frames before it. */
async function say (stream: TelnyxStream, after = 0): Promise<number> {
  await agentQuiet(stream, after)
  const heard = stream.frames.length
  stream.sendAudio(speech(600, 700))
  return heard
}

const callsOf = async (ctx: Ctx) => await ctx.db.selectFrom('calls').selectAll().execute()
const commandsOf = (call: StandinCall) => call.commands.map((c) => c.command)

t.test('an inbound call: signed call.initiated, answered and streamed with a one-time token, the conversation held, hung up by the caller', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  ctx.openai.transcripts.push('I would like an appointment on Tuesday.')
  ctx.openai.replies.push({ text: 'Tuesday at ten is free.' })

  const { call, status } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  t.equal(status, 204)
  await poll(() => commandsOf(call), (c) => c.length === 2, { message: () => 'answered and streamed' })
  t.same(commandsOf(call), ['answer', 'streaming_start'])
  t.match(call.commands[1].body, {
    stream_url: 'wss://voice.example.test/telephony/telnyx/stream', stream_auth_token: /^mst_/, stream_track: 'inbound_track', stream_codec: 'PCMU', stream_bidirectional_mode: 'rtp', stream_bidirectional_codec: 'PCMU'
  })
  const stream = await ctx.telnyx.stream(call)
  const heard = await say(stream)
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 1, { message: 'the caller is answered' })
  t.match(ctx.openai.requests.speech[0].body, { input: 'Hello, this is the clinic.' }, 'the begin message was spoken')
  await agentQuiet(stream, heard)
  t.ok(stream.messages.some((m) => m.event === 'media' && typeof m.media?.payload === 'string' && m.stream_id === undefined), 'media frames as the reference shows them')
  await ctx.telnyx.hangup(call)

  const [row] = await callsOf(ctx)
  t.match(row, { carrier: 'telnyx', carrier_call_id: call.callControlId, direction: 'inbound', call_from: CALLER, call_to: OUR_NUMBER })
  const done = await finishedCall(ctx.app, account.headers, row.id)
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup', simulated: false })
  t.match(done.transcription.map((i: { content: string }) => i.content), ['Hello, this is the clinic.', 'I would like an appointment on Tuesday.', 'Tuesday at ten is free.'])

  // The stream token opened its call once: a second stream with it is refused.
  const again = new WebSocket(`${ctx.url.replace('http', 'ws')}/telephony/telnyx/stream`, { headers: { 'x-telnyx-streaming-auth-token': call.commands[1].body.stream_auth_token } })
  again.on('open', () => {
    again.send(JSON.stringify({ event: 'connected', version: '1.0.0' }))
    again.send(JSON.stringify({ event: 'start', stream_id: 'ab-1', start: { call_control_id: call.callControlId, media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 } } }))
  })
  const [code] = await new Promise<[number]>((resolve) => again.on('close', (c) => resolve([c])))
  t.equal(code, 4403, 'a spent token opens nothing')
})

t.test('keypad: the caller\'s keys (Telnyx dtmf frames) reach the model as one caller turn, and the transcript keeps them', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  ctx.openai.replies.push({ text: 'Thank you, one moment.' })

  const { call } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  const stream = await ctx.telnyx.stream(call)
  await agentQuiet(stream)
  stream.pressKeys('42#')
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 1, { message: 'the keys are answered' })
  const said = ctx.openai.requests.chat[0].body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: string }) => m.content)
  t.same(said, ['(The caller pressed keys on their phone\'s keypad: 4 2 #.)'])
  await ctx.telnyx.hangup(call)
  const [row] = await callsOf(ctx)
  const done = await finishedCall(ctx.app, account.headers, row.id)
  t.match(done.transcription.filter((i: { keypad?: string }) => i.keypad !== undefined), [{ speaker: 'user', keypad: '42#' }])
})

t.test('send_dtmf: the agent\'s keys go out with the send_dtmf command, and the call stays on its stream', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'send_dtmf', settings: { name: 'Press keys' } } })
  t.equal(tool.statusCode, 201, tool.body)
  await buyNumber(ctx, account, agent._id)
  ctx.openai.transcripts.push('For billing, press 2.')
  ctx.openai.replies.push({ toolCalls: [{ name: 'Press_keys', arguments: { digits: 'w2' } }] }, { text: 'I pressed two.' })

  const { call } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  const stream = await ctx.telnyx.stream(call)
  await say(stream)
  const sent = await poll(() => call.commands.filter((c) => c.command === 'send_dtmf'), (c) => c.length === 1, { message: 'no send_dtmf command' })
  t.same(sent[0].body, { digits: 'w2' })
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 2, { message: 'the model heard the keys went out' })
  t.notOk(call.commands.some((c) => c.command === 'streaming_stop'), 'the stream stayed')
  await ctx.telnyx.hangup(call)
  const [row] = await callsOf(ctx)
  const done = await finishedCall(ctx.app, account.headers, row.id)
  t.match(done.transcription.find((i: { speaker: string }) => i.speaker === 'tool'), { tool: { type: 'send_dtmf', arguments: '{"digits":"w2"}', output: /w 2/ } })
})

t.test('forged, unsigned, stale and another account\'s webhooks are refused (403) and change nothing', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  const payload = { call_control_id: 'v3:forged-call', from: CALLER, to: OUR_NUMBER, direction: 'incoming', connection_id: ctx.telnyx.connectionId }
  for (const signing of ['none', 'wrong', 'stale'] as const) {
    const res = await ctx.telnyx.post(ctx.telnyx.webhookUrl, 'call.initiated', payload, signing)
    t.equal(res.status, 403, signing)
    t.equal(JSON.parse(res.body).code, 'invalid_signature')
  }
  // A signature over another body (the payload changed after signing) fails too.
  const tampered = await ctx.app.inject({ method: 'POST', url: '/telephony/telnyx/webhook', headers: { 'content-type': 'application/json', 'telnyx-timestamp': String(Math.floor(Date.now() / 1000)), 'telnyx-signature-ed25519': Buffer.alloc(64).toString('base64') }, payload: JSON.stringify({ data: { event_type: 'call.initiated', payload } }) })
  t.equal(tampered.statusCode, 403)
  const form = await ctx.app.inject({ method: 'POST', url: '/telephony/telnyx/webhook', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'a=b' })
  t.equal(form.statusCode, 403, 'a body that is not JSON cannot be signed')
  t.equal((await callsOf(ctx)).length, 0, 'no call was stored')

  // A signed hang-up of a call nobody holds: acknowledged, nothing changes.
  t.equal((await ctx.telnyx.post(ctx.telnyx.webhookUrl, 'call.hangup', { call_control_id: 'v3:nobody', hangup_cause: 'normal_clearing' })).status, 204)
  t.equal((await ctx.telnyx.post(ctx.telnyx.webhookUrl, 'call.hangup', { call_control_id: 'not-an-id' })).status, 400)
})

t.test('a call to a number without an active inbound agent is rejected before it is answered', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await buyNumber(ctx, account, null)
  const { call } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  t.same(commandsOf(call), ['reject'])
  const unknown = await ctx.telnyx.dialIn(CALLER, '+14155550177')
  t.same(commandsOf(unknown.call), ['reject'], 'a number that is not here')
  t.equal((await callsOf(ctx)).length, 0)
})

t.test('outbound: make-phone-call dials from our application with the stream; answered, talked, hung up by the person', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { begin_message: 'Hi {{name}}, this is the clinic calling.' })
  await buyNumber(ctx, account, agent._id)
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: '+14155550123', dynamic_context: { name: 'Ada' }, ring_timeout_seconds: 25 } })
  t.equal(res.statusCode, 201, res.body)
  const callId = res.json()._id as string
  const phone = await poll(() => [...ctx.telnyx.calls.values()].find((c) => c.to === '+14155550123'), (c) => c !== undefined, { message: () => 'the call was dialled' })
  t.match(phone!.commands[0].body, {
    connection_id: ctx.telnyx.connectionId, from: OUR_NUMBER, to: '+14155550123', timeout_secs: 25, webhook_url: `${PUBLIC}/telephony/telnyx/webhook`,
    stream_url: 'wss://voice.example.test/telephony/telnyx/stream', stream_auth_token: /^mst_/, stream_bidirectional_mode: 'rtp'
  })
  t.same(JSON.parse(Buffer.from(phone!.clientState!, 'base64').toString()), { call_id: callId }, 'client_state names our call')
  const stream = await ctx.telnyx.stream(phone!)
  const heard = await say(stream)
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 1, { message: 'the answer is asked for' })
  t.match(ctx.openai.requests.speech[0].body, { input: 'Hi Ada, this is the clinic calling.' })
  await agentQuiet(stream, heard)
  await ctx.telnyx.hangup(phone!)

  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { direction: 'outbound', call_status: 'success', disconnection_reason: 'user_hangup' })
  const [row] = await callsOf(ctx)
  t.equal(row.carrier_call_id, phone!.callControlId)
  t.ok(row.answered_at !== null, 'the answer was recorded')
})

t.test('outbound busy, not answered or declined: failed with the reason, charged nothing', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  ctx.telnyx.callees.set('+14155550111', { answer: 'no-answer' })
  ctx.telnyx.callees.set('+14155550112', { answer: 'busy' })
  ctx.telnyx.callees.set('+14155550113', { answer: 'rejected' })
  const expected: Record<string, string> = { '+14155550111': 'no_answer', '+14155550112': 'busy', '+14155550113': 'busy' }
  for (const [to, reason] of Object.entries(expected)) {
    const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: to } })
    const done = await finishedCall(ctx.app, account.headers, res.json()._id)
    t.match(done, { call_status: 'failed', disconnection_reason: reason }, to)
    t.equal(done.call_credits_details?.total_credits ?? 0, 0)
  }
})

t.test('forwarding with the transfer command: not answered, the agent takes the call back on a new stream; answered, the call ends when the person hangs up', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'call_forwarding', settings: { name: 'Front desk', phone_number: '+14155550142', timeout_seconds: 20 } } })
  t.equal(tool.statusCode, 201, tool.body)
  await buyNumber(ctx, account, agent._id)
  ctx.telnyx.callees.set('+14155550142', { answer: 'no-answer' })
  ctx.openai.transcripts.push('Can I talk to a person?', 'Please try again.')
  ctx.openai.replies.push({ toolCalls: [{ name: 'Front_desk', arguments: { reason: 'asked for a person' } }] }, { text: 'One moment.' },
    { toolCalls: [{ name: 'Front_desk', arguments: { reason: 'again' } }] }, { text: 'Trying again.' })

  const { call } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  const first = await ctx.telnyx.stream(call)
  await say(first)
  const second = await ctx.telnyx.stream(call, 1)
  const transfer = call.commands.find((c) => c.command === 'transfer')!
  t.match(transfer.body, { to: '+14155550142', from: OUR_NUMBER, timeout_secs: 20 })
  t.ok(commandsOf(call).includes('streaming_stop'), 'the first stream was stopped')
  t.equal(second.token !== first.token, true, 'the take-back stream has a token of its own')

  // The second try is answered; the person talks, then hangs up: the call ends call_transfer.
  ctx.telnyx.callees.set('+14155550142', { answer: 'answer', talkMs: 1200 })
  await say(second)
  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { call_status: 'success', disconnection_reason: 'call_transfer' })
  t.match(done.transfer_history, [{ type: 'call_forwarding', to_number: '+14155550142', outcome: 'no_answer' }, { type: 'call_forwarding', to_number: '+14155550142', outcome: 'answered' }])
  t.ok(done.transfer_history[1].duration_seconds >= 1, 'the forwarding minutes run from the person\'s answer')
})

t.test('the media stream: no token, a wrong token, or no start in time is closed', async (t) => {
  const ctx = await listen(t, { VOICE_STREAM_START_TIMEOUT_MS: '300' })
  const open = async (headers: Record<string, string>, frames: unknown[]) => {
    const socket = new WebSocket(`${ctx.url.replace('http', 'ws')}/telephony/telnyx/stream`, { headers })
    socket.on('open', () => { for (const frame of frames) socket.send(JSON.stringify(frame)) })
    socket.on('error', () => {})
    return await new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)))
  }
  const start = { event: 'start', stream_id: 'ab-1', start: { call_control_id: 'v3:abc', media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 } } }
  t.equal(await open({}, [{ event: 'connected', version: '1.0.0' }, start]), 4403, 'no token')
  t.equal(await open({ 'x-telnyx-streaming-auth-token': 'mst_wrong' }, [start]), 4403, 'an unknown token')
  t.equal(await open({ 'x-telnyx-streaming-auth-token': 'mst_wrong' }, [{ event: 'connected', version: '1.0.0' }]), 4408, 'no start in time')
  t.equal(await open({}, [{ event: 'start', stream_id: 'ab-1', start: { call_control_id: 'v3:abc', media_format: { encoding: 'OPUS', sample_rate: 48000 } } }]), 4400, 'a codec other than PCMU')
})

t.test('a stream that drops without stop ends the call stream_dropped, and Telnyx is told to hang up', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  const { call } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  const stream = await ctx.telnyx.stream(call)
  await agentQuiet(stream)
  stream.socket.terminate()
  await poll(() => commandsOf(call), (c) => c.includes('hangup'), { message: (c) => `Telnyx was not told to hang up (${c.join(', ')})` })
  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { disconnection_reason: 'stream_dropped' })
  t.match(done.transcription.map((i: { content: string }) => i.content), ['Hello, this is the clinic.'], 'the transcript so far is kept')
})

t.test('one installation, numbers of two carriers: each call goes through its own number\'s carrier', async (t) => {
  // Numbers are bought from the sandbox here (PHONE_CARRIER); a Telnyx number is given by the operator.
  const ctx = await listen(t, { PHONE_CARRIER: 'sandbox' })
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const sandbox = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { area_code: '415', outbound_agent_id: agent._id } })
  t.equal(sandbox.statusCode, 201, sandbox.body)
  ctx.telnyx.owned.set('1293384261075731499', { id: '1293384261075731499', phone_number: '+13125550100', connection_id: null })
  await importNumber(ctx.db, createCarriers(ctx.db, ctx.config), account.user.id, { phone_number: '+13125550100', carrier: 'telnyx', outbound_agent_id: agent._id }, 'operator')
  const listed = (await ctx.app.inject({ method: 'GET', url: '/v1/phone-number/list', headers: account.headers })).json()
  t.same(listed.map((n: { carrier: string }) => n.carrier).sort(), ['sandbox', 'telnyx'])

  const viaTelnyx = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: '+13125550100', to_number: '+14155550123' } })
  t.equal(viaTelnyx.statusCode, 201, viaTelnyx.body)
  const phone = await poll(() => [...ctx.telnyx.calls.values()].find((c) => c.from === '+13125550100'), (c) => c !== undefined, { message: () => 'the Telnyx number\'s call was dialled at Telnyx' })
  await ctx.telnyx.hangup(phone!)
  const viaSandbox = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: sandbox.json().phone_number, to_number: '+14155550124' } })
  t.equal(viaSandbox.statusCode, 201, viaSandbox.body)
  const rows = await callsOf(ctx)
  t.same(Object.fromEntries(rows.map((r) => [r.call_from, r.carrier])), { '+13125550100': 'telnyx', [sandbox.json().phone_number]: null }, 'the sandbox number\'s call has no carrier (simulated)')
  t.equal([...ctx.telnyx.calls.values()].length, 1, 'only the Telnyx number\'s call reached Telnyx')
})
