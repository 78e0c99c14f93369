import { performance } from 'node:perf_hooks'
import t from 'tap'
import { WebSocket } from 'ws'
import { decodeWav, rms } from '../../src/modules/voice/audio.ts'
import { createAccount, type Account } from '../helpers/app.ts'
import { agentQuiet, poll } from '../helpers/poll.ts'
import { startReceiver } from '../helpers/receiver.ts'
import { sid } from '../helpers/twilio-stand-in.ts'
import { ACCOUNT_SID, AUTH_TOKEN, CALLER, listenWithTwilio, OUR_NUMBER, type PhoneContext, PUBLIC, say } from '../helpers/twilio-phone.ts'
import { finishedCall, speech } from '../helpers/voice-client.ts'

// Phone calls through Twilio, end to end on loopback: the Twilio stand-in places and answers calls, posts
// signed webhooks, follows our TwiML and speaks Media Streams (µ-law 8 kHz); the speech and chat providers are
// the OpenAI-compatible stand-in (cascade engine). PUBLIC_BASE_URL is a public https address that the stand-in
// reaches through a route to the server's loopback port, as Twilio would through a tunnel.

type Ctx = PhoneContext

const listen = listenWithTwilio

async function agentWith (ctx: Ctx, account: Account, body: Record<string, unknown> = {}, llm: Record<string, unknown> = {}) {
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello, this is the clinic.', general_prompt: 'You are the clinic\'s receptionist.', ...llm } })).json()
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: config._id, ...body } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json() as { _id: string }
}

async function addTool (ctx: Ctx, account: Account, agentId: string, type: string, settings: Record<string, unknown>) {
  const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agentId}/tools`, headers: account.headers, payload: { tool_type: type, settings } })
  if (res.statusCode !== 201) throw new Error(res.body)
}

/** Buys OUR_NUMBER for the account with the agent answering it. */
async function buyNumber (ctx: Ctx, account: Account, agentId: string) {
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: OUR_NUMBER, inbound_agent_id: agentId, outbound_agent_id: agentId } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json()
}

/**
 * The caller says something (600 ms of speech, then silence that ends the turn) once the agent has spoken after
 * frame `after` and stopped; answers the number of agent frames before the caller spoke (the answer comes after).
 */
const callsOf = async (ctx: Ctx) => await ctx.db.selectFrom('calls').selectAll().execute()

t.test('an inbound call end to end: webhook, TwiML, stream, begin message heard, caller heard, end_call, analysed, delivered', async (t) => {
  const ctx = await listen(t)
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { webhook_url: receiver.url })
  await addTool(ctx, account, agent._id, 'end_call', { name: 'Hang up' })
  await buyNumber(ctx, account, agent._id)
  const [held] = ctx.twilio.incoming(ACCOUNT_SID)
  t.match(held, { phone_number: OUR_NUMBER, voice_url: `${PUBLIC}/telephony/twilio/voice`, voice_method: 'POST', status_callback: `${PUBLIC}/telephony/twilio/status` }, 'buying points the number at this server')

  ctx.openai.transcripts.push('I would like an appointment on Tuesday.', 'That is all, thanks.')
  ctx.openai.replies.push({ text: 'Tuesday at ten is free. Shall I book it?' }, { toolCalls: [{ name: 'Hang_up', arguments: {} }] }, { text: 'Goodbye!' })

  const { call, webhook } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  t.equal(webhook.status, 200)
  t.match(webhook.body, /<Connect><Stream url="wss:\/\/voice\.example\.test\/telephony\/twilio\/stream"><Parameter name="token" value="mst_[A-Za-z0-9]+"\/><\/Stream><\/Connect>/)
  const stream = await call.waitForStream()
  t.match(stream.customParameters, { token: /^mst_/ })

  await agentQuiet(stream)
  t.ok(rms(stream.audio16k()) > 300, 'the begin message is heard')
  const answered = await say(stream)
  await poll(() => ctx.openai.requests.transcriptions.length, (n) => n === 1, { message: 'the caller\'s turn is recognised' })
  const heard = ctx.openai.requests.transcriptions[0]
  t.ok(heard.rms > 500, `the recogniser got the caller's audio through µ-law (rms ${Math.round(heard.rms)})`)
  await say(stream, answered)

  t.equal(await call.ended, 'completed', 'the stream closed after the goodbye and Twilio hung up')
  t.ok(stream.messages.some((m) => m.event === 'mark'), 'a mark before the close')
  t.ok(stream.echoed.length > 0, 'the goodbye was played before the stream ended')
  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { call_type: 'phone', direction: 'inbound', call_from: CALLER, call_to: OUR_NUMBER, call_status: 'success', disconnection_reason: 'agent_hangup', simulated: false })
  t.same(done.transcription.map((i: { speaker: string }) => i.speaker), ['agent', 'user', 'agent', 'user', 'tool', 'agent'])
  t.match(done.transcription[1], { content: 'I would like an appointment on Tuesday.' })
  t.ok(done.call_credits_details.phone_call_credits > 0, 'phone minutes charged')
  const recording = await ctx.app.inject({ method: 'GET', url: `/v1/call/${done._id as string}/recording`, headers: account.headers })
  t.ok(rms(decodeWav(recording.rawPayload).pcm) > 300, 'recorded')
  const [delivery] = await receiver.waitFor(1)
  t.match(delivery.json, { call_id: done._id, disconnection_reason: 'agent_hangup' })
  t.same(ctx.twilio.errors, [])
})

t.test('outbound: make-phone-call rings the phone through the Calls API; answered, talked, hung up by the person', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, {}, { begin_message: 'Hi {{name}}, this is the clinic calling.' })
  await buyNumber(ctx, account, agent._id)
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: '+14155550123', dynamic_context: { name: 'Ada' } } })
  t.equal(res.statusCode, 201, res.body)
  const callId = res.json()._id as string

  const phone = await ctx.twilio.waitForCall('+14155550123')
  const placed = ctx.twilio.requests.find((r) => r.path === '/Calls.json')!
  t.equal(placed.form.get('From'), OUR_NUMBER)
  t.equal(placed.form.get('StatusCallback'), `${PUBLIC}/telephony/twilio/status?call_id=${callId}`)
  t.same(placed.form.getAll('StatusCallbackEvent'), ['answered', 'completed'], 'the answer is reported too')
  t.equal(placed.form.get('Timeout'), '30', 'rings 30 s by default')
  t.match(placed.form.get('Twiml'), /<Connect><Stream url="wss:\/\/voice\.example\.test\/telephony\/twilio\/stream">/)
  const stream = await phone.waitForStream()
  const answered = await say(stream)
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 1, { message: 'the answer is asked for' })
  t.match(ctx.openai.requests.speech[0].body, { input: 'Hi Ada, this is the clinic calling.' })
  await agentQuiet(stream, answered)
  await stream.hangup()

  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { direction: 'outbound', call_from: OUR_NUMBER, call_to: '+14155550123', call_status: 'success', disconnection_reason: 'user_hangup', simulated: false })
  const row = (await callsOf(ctx))[0]
  t.equal(row.carrier_call_id, phone.sid, 'Twilio\'s CallSid is kept with the call')
  t.ok(row.answered_at !== null && row.answered_at >= row.start_timestamp, 'the answer is recorded')

  const longer = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: '+14155550124', ring_timeout_seconds: 45 } })
  t.equal(longer.statusCode, 201, longer.body)
  await poll(() => ctx.twilio.calls.find((c) => c.to === '+14155550124'), (c) => c !== undefined, { message: 'the second call is placed' })
  t.equal(ctx.twilio.calls.find((c) => c.to === '+14155550124')!.timeout, 45, 'ring_timeout_seconds is sent as Timeout')
  for (const bad of [0, 601, 'soon']) {
    const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: '+14155550125', ring_timeout_seconds: bad } })
    t.match(res.json(), { statusCode: 400, message: /ring_timeout_seconds/ }, `ring_timeout_seconds ${String(bad)}`)
  }
})

t.test('an outbound call is timed and charged from the answer: 20 s (or 40 s) of ringing then 30 s of talk is 30 s', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  for (const [i, ringSeconds] of [20, 40].entries()) {
    const to = `+1415555013${i}`
    const answer = Promise.withResolvers<void>()
    ctx.twilio.callee(to, { answer: 'answer', until: answer.promise })
    const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: to } })
    const callId = res.json()._id as string
    await poll(() => ctx.twilio.calls.find((c) => c.to === to), (c) => c?.status === 'ringing', { message: 'the phone rings' })
    // Time as Twilio tells it, without waiting for it: the phone started ringing 50 s (70 s) ago and was answered
    // 30 s ago (the answered callback's Timestamp); the person hangs up now.
    await ctx.db.updateTable('calls').set({ start_timestamp: new Date(Date.now() - (ringSeconds + 30) * 1000) }).where('id', '=', callId).execute()
    ctx.twilio.clock.offsetMs = -30_000
    answer.resolve()
    const phone = await ctx.twilio.waitForCall(to)
    const stream = await phone.waitForStream()
    await agentQuiet(stream)
    await stream.hangup()
    const done = await finishedCall(ctx.app, account.headers, callId)
    // Timestamps are whole seconds (the answer may read up to a second earlier), and the agent's greeting really plays.
    t.ok(done.duration_ms >= 30_000 && done.duration_ms < 40_000, `${ringSeconds} s rung: duration ${done.duration_ms as number} ms is the 30 s talked`)
    t.match(done, { call_status: 'success', call_credits_details: { phone_call_credits: 10 } }, 'one minute charged')
  }
})

t.test('outbound not answered, busy, failed, or refused by Twilio: failed with the reason, nothing charged', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  ctx.twilio.callee('+14155550111', { answer: 'no-answer' })
  ctx.twilio.callee('+14155550112', { answer: 'busy' })
  ctx.twilio.callee('+14155550114', { answer: 'failed' })
  const place = async (to: string) => {
    const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: to } })
    t.equal(res.statusCode, 201, res.body)
    return res.json()._id as string
  }
  for (const [to, reason] of [['+14155550111', 'no_answer'], ['+14155550112', 'busy'], ['+14155550114', 'failed']]) {
    const done = await finishedCall(ctx.app, account.headers, await place(to))
    t.match(done, { call_status: 'failed', disconnection_reason: reason, call_credits_details: { phone_call_credits: 0 } }, reason)
  }
  ctx.twilio.failNext(400, 21211, "The 'To' number +999 is not a valid phone number.")
  const refused = await finishedCall(ctx.app, account.headers, await place('+14155550113'))
  t.match(refused, { call_status: 'failed', disconnection_reason: 'dial_failed' })
  const charged = await ctx.db.selectFrom('calls').select((eb) => eb.fn.sum<number>('phone_call_credits').as('credits')).executeTakeFirstOrThrow()
  t.equal(Number(charged.credits), 0, 'no credits charged for calls never answered')
})

t.test('barge-in on the phone: the caller talks over the agent and Twilio is told to clear its buffer', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { interruption_sensitivity: 1 }, { begin_message: 'Welcome to the clinic, where we have been caring for patients for more than fifty years, in this town and the next.' })
  await buyNumber(ctx, account, agent._id)
  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const stream = await call.waitForStream()
  await poll(() => stream.frames.length, (n) => n > 10, { message: 'the agent is speaking' })
  const spokeAt = performance.now()
  await stream.sendAudio(speech(500, 0))
  const clear = await stream.waitFor('clear')
  // Speech over the agent first pauses it (Twilio plays the little it holds), then the barge-in clears.
  const late = stream.frames.filter((f) => f.at > spokeAt + 200 && f.at < clear.at)
  t.same(late, [], 'no agent audio went out while the caller was interrupting')
  t.ok(clear.at - spokeAt < 1000, `cleared ${Math.round(clear.at - spokeAt)} ms after the caller began`)
  await stream.hangup()
})

t.test('forwarding with <Dial>: answered, the call ends when the person hangs up and the minutes are charged', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await addTool(ctx, account, agent._id, 'call_forwarding', { name: 'Front desk', phone_number: '+14155550142', transfer_message: 'Putting you through to the front desk.', timeout_seconds: 20 })
  await buyNumber(ctx, account, agent._id)
  ctx.twilio.delays.talkMs = 1500
  ctx.openai.transcripts.push('Can I talk to a person?')
  ctx.openai.replies.push({ toolCalls: [{ name: 'Front_desk', arguments: { reason: 'asked for a person' } }] }, { text: 'Putting you through to the front desk.' })

  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const stream = await call.waitForStream()
  await say(stream)
  t.equal(await call.ended, 'completed')
  t.match(call.dials, [{ number: '+14155550142', callerId: OUR_NUMBER, timeout: 20, status: 'completed', duration: 2 }])
  t.ok(stream.echoed.length > 0, 'the transfer message was played before the <Dial>')

  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { call_status: 'success', disconnection_reason: 'call_transfer', call_credits_details: { call_forwarding_credits: 8 } })
  t.match(done.transfer_history, [{ type: 'call_forwarding', from_agent_id: agent._id, to_number: '+14155550142', reason: 'asked for a person', outcome: 'answered', duration_seconds: 2 }])
  t.match(done.transcription.map((i: { speaker: string }) => i.speaker), ['agent', 'user', 'tool', 'agent'])
  t.ok(done.recording_url !== null, 'the recording up to the forwarding is kept')
})

t.test('forwarding not answered: the agent takes the call back on a new stream, says so, and the conversation goes on', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await addTool(ctx, account, agent._id, 'agent_transfer', { name: 'Sales team', phone_number: '+14155550143', show_caller_number: true })
  await buyNumber(ctx, account, agent._id)
  ctx.twilio.callee('+14155550143', { answer: 'no-answer' })
  ctx.openai.transcripts.push('Sales, please.', 'Then I will call back later.')
  ctx.openai.replies.push({ toolCalls: [{ name: 'Sales_team', arguments: {} }] }, { text: 'One moment.' }, { text: 'Of course, goodbye.' })

  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const first = await call.waitForStream()
  await say(first)
  const second = await call.waitForStream(1)
  t.match(call.dials, [{ number: '+14155550143', callerId: CALLER, timeout: 30, status: 'no-answer' }])
  await poll(() => ctx.openai.requests.speech.length, (n) => n >= 3, { message: 'the agent speaks again' })
  t.match(ctx.openai.requests.speech[2].body, { input: /could not reach anyone/ }, 'the agent says nobody answered')
  const answered = await say(second)
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 3, { message: 'the caller is answered after the take-back' })
  t.match(ctx.openai.requests.chat[2].body.messages.map((m: { role: string, content: string | null }) => m.content), [/receptionist/, 'Hello, this is the clinic.', 'Sales, please.', 'One moment.', /could not reach anyone/, 'Then I will call back later.'],
    'the new session knows the conversation so far')
  await agentQuiet(second, answered)
  await second.hangup()

  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup', call_credits_details: { call_forwarding_credits: 0 } })
  t.match(done.transfer_history, [{ type: 'agent_transfer', to_number: '+14155550143', outcome: 'no_answer' }])
  t.notOk('duration_seconds' in done.transfer_history[0])
  t.same(done.transcription.map((i: { speaker: string }) => i.speaker), ['agent', 'user', 'tool', 'agent', 'agent', 'user', 'agent'])
})

t.test('data collected before a forwarding nobody answered is kept with the call (calls.forwarding), offered back to the agent that takes it back, and stored with what follows', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, {
    is_data_collection_active: true,
    data_retrieval: [{ name: 'email', type: 'string' }, { name: 'plan', type: 'enum', enum_values: ['basic', 'pro'] }]
  })
  await addTool(ctx, account, agent._id, 'agent_transfer', { name: 'Sales team', phone_number: '+14155550143' })
  await buyNumber(ctx, account, agent._id)
  ctx.twilio.callee('+14155550143', { answer: 'no-answer' })
  ctx.openai.transcripts.push('Sales, please. My e-mail is ada@example.com.', 'The pro plan, then.')
  ctx.openai.replies.push(
    { toolCalls: [{ name: 'save_collected_data', arguments: { email: 'ada@example.com' } }, { name: 'Sales_team', arguments: {} }] }, { text: 'One moment.' },
    { toolCalls: [{ name: 'save_collected_data', arguments: { plan: 'pro' } }] }, { text: 'Noted.' }
  )

  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const first = await call.waitForStream()
  await say(first)
  const second = await call.waitForStream(1)
  const [held] = await callsOf(ctx)
  await poll(() => ctx.openai.requests.speech.length, (n) => n >= 3, { message: 'the agent speaks again' })
  const answered = await say(second)
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 4, { message: 'the caller is answered after the take-back' })
  t.match(ctx.openai.requests.chat[2].body.messages[0].content, /Already saved \(do not ask again unless the caller corrects it\): email: "ada@example.com"/, 'the agent taking the call back knows what was saved')
  await agentQuiet(second, answered)
  await second.hangup()

  const done = await finishedCall(ctx.app, account.headers, held.id)
  t.same(done.collected_data, { email: 'ada@example.com', plan: 'pro' })
  t.same(done.transcription.filter((i: { speaker: string }) => i.speaker === 'tool').map((i: { tool: { type: string } }) => i.tool.type), ['collect_data', 'agent_transfer', 'collect_data'])
})

t.test('a stream that drops mid-call ends the call stream_dropped with its transcript; Twilio is told to hang up', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const stream = await call.waitForStream()
  await agentQuiet(stream)
  await stream.drop()
  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { call_status: 'success', disconnection_reason: 'stream_dropped', transcription: [{ speaker: 'agent', content: 'Hello, this is the clinic.' }] })
  await poll(() => ctx.twilio.requests.find((r) => r.path === `/Calls/${call.sid}.json` && r.form.get('Status') === 'completed'), (r) => r !== undefined, { message: 'Twilio is told to hang up' })
})

t.test('a call whose voice process died: Twilio\'s final status ends it once its session had its time', async (t) => {
  const ctx = await listen(t, { VOICE_STREAM_TIMEOUT_MS: '200' })
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  const params = { AccountSid: ACCOUNT_SID, ApiVersion: '2010-04-01', CallSid: sid('CA'), CallStatus: 'ringing', Direction: 'inbound', From: CALLER, To: OUR_NUMBER }
  t.equal((await ctx.twilio.post(`${PUBLIC}/telephony/twilio/voice`, params)).status, 200)
  // Its stream opened in a process that is gone now: nobody holds the session.
  await ctx.db.updateTable('calls').set({ joined_at: new Date(), stream_token_hash: null }).execute()
  const [call] = await callsOf(ctx)
  t.equal((await ctx.twilio.post(`${PUBLIC}/telephony/twilio/status`, { ...params, CallStatus: 'completed', CallDuration: '40' })).status, 204)
  t.equal((await callsOf(ctx))[0].call_status, 'started', 'the session is given its time first')
  const done = await finishedCall(ctx.app, account.headers, call.id)
  t.match(done, { disconnection_reason: 'stream_dropped' })
})

t.test('forged and replayed webhooks: 403 without a valid signature, one call for Twilio\'s retries, 404 for an unknown call', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)

  for (const signature of ['none', 'wrong'] as const) {
    const { webhook } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER, { signature })
    t.equal(webhook.status, 403, `signature ${signature}`)
    t.match(JSON.parse(webhook.body), { code: 'invalid_signature' })
  }
  const json = await ctx.app.inject({ method: 'POST', url: '/telephony/twilio/voice', payload: { AccountSid: ACCOUNT_SID, CallSid: sid('CA') } })
  t.equal(json.statusCode, 403, 'a JSON body is not a signed form')
  const otherAccount = await ctx.twilio.post(`${PUBLIC}/telephony/twilio/voice`, { AccountSid: sid('AC'), CallSid: sid('CA'), From: CALLER, To: OUR_NUMBER }, { accountSid: sid('AC'), authToken: 'not-ours' })
  t.equal(otherAccount.status, 403, 'an account this server does not know')
  t.equal((await callsOf(ctx)).length, 0, 'no call from a forged webhook')

  // Twilio retries the voice webhook (the same request): before the stream opens, the same call gets a new stream token.
  ctx.twilio.callee(OUR_NUMBER, { answer: 'answer' })
  const params = { AccountSid: ACCOUNT_SID, ApiVersion: '2010-04-01', CallSid: sid('CA'), CallStatus: 'ringing', Direction: 'inbound', From: CALLER, To: OUR_NUMBER }
  const first = await ctx.twilio.post(`${PUBLIC}/telephony/twilio/voice`, params)
  const retry = await ctx.twilio.resend(first)
  t.equal(retry.status, 200)
  t.match(retry.body, /<Stream /)
  t.not(/value="([^"]+)"/.exec(retry.body)![1], /value="([^"]+)"/.exec(first.body)![1], 'a fresh token')
  t.equal((await callsOf(ctx)).length, 1, 'one call for the webhook and its retry')
  const [stored] = await callsOf(ctx)

  // A stream with a spent or unknown token is refused.
  const status = async (extra: Record<string, string>, url = `${PUBLIC}/telephony/twilio/status`) => await ctx.twilio.post(url, { ...params, CallStatus: 'completed', CallDuration: '3', ...extra })
  const unknown = await status({ CallSid: sid('CA') })
  t.equal(unknown.status, 404, 'a status callback for a call that is not here')
  t.equal((await callsOf(ctx))[0].call_status, 'started', 'and nothing changed')
  const forged = await ctx.twilio.post(`${PUBLIC}/telephony/twilio/status`, { ...params, CallStatus: 'completed' }, { signature: 'wrong' })
  t.equal(forged.status, 403)
  t.equal((await callsOf(ctx))[0].call_status, 'started', 'a forged status changes nothing')
  const elsewhere = await status({}, `${PUBLIC}/telephony/twilio/status?call_id=${'0'.repeat(24)}`)
  t.equal(elsewhere.status, 404)

  // The call ends before its stream opened (the caller hung up while it connected).
  const ended = await status({})
  t.equal(ended.status, 204)
  const done = await finishedCall(ctx.app, account.headers, stored.id)
  t.match(done, { call_status: 'failed', disconnection_reason: 'stream_not_connected' })
  const replayed = await ctx.twilio.resend(ended)
  t.equal(replayed.status, 204, 'a replayed status callback is answered and changes nothing')
  const late = await ctx.twilio.resend(first)
  t.match(late.body, /<Hangup\/>/, 'the voice webhook replayed after the call ended hangs up')
  t.equal((await callsOf(ctx)).length, 1)
})

t.test('numbers imported with their own Twilio account: pointed at this server, their calls checked with that account\'s token', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  const own = sid('AC')
  ctx.twilio.addAccount(own, 'customer-token')
  ctx.twilio.hold(own, '+14155550177')
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers: account.headers, payload: { phone_number: '+14155550177', account_sid: own, auth_token: 'customer-token', inbound_agent_id: agent._id } })
  t.equal(res.statusCode, 201, res.body)
  t.match(ctx.twilio.incoming(own)[0], { voice_url: `${PUBLIC}/telephony/twilio/voice`, status_callback: `${PUBLIC}/telephony/twilio/status` })
  const { call, webhook } = await ctx.twilio.dialIn(CALLER, '+14155550177')
  t.equal(webhook.status, 200)
  const stream = await call.waitForStream()
  await agentQuiet(stream)
  await stream.hangup()
  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { call_status: 'success', call_to: '+14155550177', disconnection_reason: 'user_hangup' })
  // Signed with the installation's token for the customer's account: refused.
  const wrong = await ctx.twilio.post(`${PUBLIC}/telephony/twilio/voice`, { AccountSid: own, CallSid: sid('CA'), From: CALLER, To: '+14155550177' }, { accountSid: own, authToken: AUTH_TOKEN })
  t.equal(wrong.status, 403)
})

t.test('another account\'s Twilio credentials cannot sign webhooks about a call: /voice, /status and /dial-result answer 403 and change nothing', async (t) => {
  const ctx = await listen(t)
  const victim = await createAccount(ctx.db)
  const agent = await agentWith(ctx, victim)
  await buyNumber(ctx, victim, agent._id)
  // The other account imports a number of its own Twilio account, so this server knows that account's token.
  const attacker = await createAccount(ctx.db)
  const evil = sid('AC')
  ctx.twilio.addAccount(evil, 'attacker-token')
  ctx.twilio.hold(evil, '+14155550177')
  const imported = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers: attacker.headers, payload: { phone_number: '+14155550177', account_sid: evil, auth_token: 'attacker-token' } })
  t.equal(imported.statusCode, 201, imported.body)

  // The victim's inbound call, its stream not open yet.
  const params = { AccountSid: ACCOUNT_SID, ApiVersion: '2010-04-01', CallSid: sid('CA'), CallStatus: 'ringing', Direction: 'inbound', From: CALLER, To: OUR_NUMBER }
  const first = await ctx.twilio.post(`${PUBLIC}/telephony/twilio/voice`, params)
  t.match(first.body, /<Stream /)
  const [call] = await callsOf(ctx)
  const token = call.stream_token_hash
  const asAttacker = { AccountSid: evil }
  const signedByAttacker = { accountSid: evil, authToken: 'attacker-token' }

  const voice = await ctx.twilio.post(`${PUBLIC}/telephony/twilio/voice`, { ...params, ...asAttacker }, signedByAttacker)
  t.equal(voice.status, 403, '/voice naming the call')
  t.notMatch(voice.body, /mst_/, 'no stream token for the attacker')
  const newCall = await ctx.twilio.post(`${PUBLIC}/telephony/twilio/voice`, { ...params, ...asAttacker, CallSid: sid('CA') }, signedByAttacker)
  t.equal(newCall.status, 403, '/voice for the victim\'s number')
  // Naming the victim's account in the form, signed with the attacker's token.
  const named = await ctx.twilio.post(`${PUBLIC}/telephony/twilio/voice`, params, signedByAttacker)
  t.equal(named.status, 403)

  for (const url of [`${PUBLIC}/telephony/twilio/status`, `${PUBLIC}/telephony/twilio/status?call_id=${call.id}`]) {
    const status = await ctx.twilio.post(url, { ...params, ...asAttacker, CallStatus: 'completed', CallDuration: '3' }, signedByAttacker)
    t.equal(status.status, 403, url)
  }
  const dial = await ctx.twilio.post(`${PUBLIC}/telephony/twilio/dial-result?call_id=${call.id}`, { ...params, ...asAttacker, CallStatus: 'in-progress', DialCallStatus: 'completed', DialCallDuration: '3600' }, signedByAttacker)
  t.equal(dial.status, 403, '/dial-result')

  const after = (await callsOf(ctx))[0]
  t.match(after, { call_status: 'started', stream_token_hash: token, forwarding_seconds: 0 }, 'the call goes on untouched')
  // The call's own account still may.
  t.equal((await ctx.twilio.post(`${PUBLIC}/telephony/twilio/status?call_id=${call.id}`, { ...params, CallStatus: 'completed' })).status, 204)
  t.match(await finishedCall(ctx.app, victim.headers, call.id), { call_status: 'failed', disconnection_reason: 'stream_not_connected' })
})

t.test('tokens open only their kind of call: a phone stream token joins no web call, a web-call token opens no Twilio stream', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  const params = { AccountSid: ACCOUNT_SID, ApiVersion: '2010-04-01', CallSid: sid('CA'), CallStatus: 'ringing', Direction: 'inbound', From: CALLER, To: OUR_NUMBER }
  const phoneToken = /value="(mst_[^"]+)"/.exec((await ctx.twilio.post(`${PUBLIC}/telephony/twilio/voice`, params)).body)![1]
  const join = await ctx.app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: phoneToken } })
  t.match(join.json(), { statusCode: 403, code: 'invalid_access_token' }, 'the web-call join refuses a phone stream token')
  const upgrade = await ctx.app.inject({ method: 'GET', url: `/web-call/stream?access_token=${phoneToken}`, headers: { connection: 'upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } })
  t.equal(upgrade.statusCode, 403, 'and so does its stream')

  const web = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id } })
  const webToken = web.json().access_token as string
  const socket = new WebSocket(`${ctx.url.replace('http', 'ws')}/telephony/twilio/stream`)
  await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject) })
  const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)))
  socket.send(JSON.stringify({ event: 'start', sequenceNumber: '1', start: { accountSid: ACCOUNT_SID, streamSid: sid('MZ'), callSid: params.CallSid, tracks: ['inbound'], mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 }, customParameters: { token: webToken } }, streamSid: 'MZ' }))
  t.equal(await closed, 4403, 'the Twilio stream refuses a web-call token')
  t.equal((await ctx.app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: webToken } })).statusCode, 200, 'which still joins its web call')
  const phone = await ctx.db.selectFrom('calls').select(['joined_at', 'stream_token_hash']).where('call_type', '=', 'phone').executeTakeFirstOrThrow()
  t.match(phone, { joined_at: null }, 'the phone call was not joined')
  t.not(phone.stream_token_hash, null, 'its token is unspent')
})

t.test('CALL_RUNTIME=external: Twilio is left to the runtime outside the server', async (t) => {
  const ctx = await listen(t, { CALL_RUNTIME: 'external' })
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  const { webhook } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  t.match(webhook.body, /<Reject\/>/, 'calls reaching the webhook are rejected')
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: '+14155550123' } })
  t.equal(res.statusCode, 201)
  const end = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${res.json()._id as string}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup' } })
  t.equal(end.statusCode, 202, 'the runtime API ends it as before')
  t.notOk(ctx.twilio.requests.some((r) => r.path === '/Calls.json'), 'nothing is placed through Twilio')
})

t.test('the media stream: an unknown or spent token is refused; a broken message ends the call protocol_error; a number without an agent rejects its calls', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account)
  await buyNumber(ctx, account, agent._id)
  const open = async () => {
    const socket = new WebSocket(`${ctx.url.replace('http', 'ws')}/telephony/twilio/stream`)
    await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject) })
    const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)))
    return { socket, closed, send: (message: unknown) => socket.send(typeof message === 'string' ? message : JSON.stringify(message)) }
  }
  const start = (token: string, callSid = sid('CA')) => ({ event: 'start', sequenceNumber: '1', start: { accountSid: ACCOUNT_SID, streamSid: sid('MZ'), callSid, tracks: ['inbound'], mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 }, customParameters: { token } }, streamSid: 'MZ' })

  const bogus = await open()
  bogus.send({ event: 'connected', protocol: 'Call', version: '1.0.0' })
  bogus.send(start('mst_not-a-token'))
  t.equal(await bogus.closed, 4403, 'an unknown token')

  const { call, webhook } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const stream = await call.waitForStream()
  await agentQuiet(stream)
  const token = /value="([^"]+)"/.exec(webhook.body)![1]
  const again = await open()
  again.send(start(token, call.sid))
  t.equal(await again.closed, 4403, 'a spent token')

  stream.socket.send('{"event": "media", "media": {"payload": "%%%"}}')
  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { disconnection_reason: 'protocol_error' })
  t.equal((await stream.closed).code, 4400)

  const garbage = await open()
  garbage.send('not json')
  t.equal(await garbage.closed, 4400, 'garbage before any start')

  await ctx.app.inject({ method: 'PATCH', url: `/v1/phone-number/${(await ctx.db.selectFrom('phone_numbers').select('id').executeTakeFirstOrThrow()).id}`, headers: account.headers, payload: { inbound_agent_id: null } })
  const rejected = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  t.match(rejected.webhook.body, /<Reject\/>/)
  t.equal((await callsOf(ctx)).length, 1, 'no call for a number without an inbound agent')
})
