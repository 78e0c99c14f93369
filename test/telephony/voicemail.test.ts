import t from 'tap'
import { buildApp } from '../../src/app.ts'
import { createLogger } from '../../src/logger.ts'
import { createAccount, type Account } from '../helpers/app.ts'
import { agentQuiet, poll } from '../helpers/poll.ts'
import { sid } from '../helpers/twilio-stand-in.ts'
import { ACCOUNT_SID, listenWithTwilio, OUR_NUMBER, type PhoneContext, PUBLIC } from '../helpers/twilio-phone.ts'
import type { Party } from '../helpers/twilio-voice.ts'
import { finishedCall } from '../helpers/voice-client.ts'

// Voicemail and the wait for hello on outbound Twilio calls (docs/voice.md, "Voicemail", "Waiting for hello"), end to
// end on loopback: the Twilio stand-in places the call with the AMD parameters it was given, plays the party who
// picks up (a person saying hello, a machine's greeting and its beep) on the media stream, and posts AnsweredBy to
// the AsyncAmdStatusCallback, signed, as Twilio does with MachineDetection=DetectMessageEnd.

type Ctx = PhoneContext

const listen = listenWithTwilio

/** An agent with a begin message, its voicemail_settings and call_settings, answering OUR_NUMBER. */
async function agentWith (ctx: Ctx, account: Account, body: Record<string, unknown>) {
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello {{name}}, this is the clinic.', general_prompt: 'You are the clinic.' } })).json()
  const created = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: llm._id, ...body } })
  if (created.statusCode !== 201) throw new Error(created.body)
  const agent = created.json() as { _id: string }
  const bought = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: OUR_NUMBER, outbound_agent_id: agent._id } })
  if (bought.statusCode !== 201) throw new Error(bought.body)
  return agent
}

async function callOut (ctx: Ctx, account: Account, agentId: string, to: string, party: Party) {
  ctx.twilio.callee(to, { answer: 'answer', party })
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agentId, from_number: OUR_NUMBER, to_number: to, dynamic_context: { name: 'Ada' } } })
  if (res.statusCode !== 201) throw new Error(res.body)
  const phone = await ctx.twilio.waitForCall(to)
  return { callId: res.json()._id as string, phone, stream: await phone.waitForStream() }
}

const DETECT = { detection: true, action: 'leave_message', message: 'Hi {{name}}, the clinic here: please call us back.' }

t.test('voicemail_settings: defaults, validation, merged on update, part of the agent\'s versions', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, {})
  const shown = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })).json()
  t.same(shown.voicemail_settings, { detection: false, action: 'hang_up', message: '', detection_timeout_seconds: 30 })
  t.equal(shown.call_settings.wait_for_hello_seconds, 3)
  for (const bad of [{ action: 'record' }, { detection_timeout_seconds: 2 }, { detection_timeout_seconds: 60 }, { detection: 'yes' }]) {
    const res = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { voicemail_settings: bad } })
    t.match(res.json(), { statusCode: 400, message: /voicemail_settings/ }, JSON.stringify(bad))
  }
  const bad = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { call_settings: { wait_for_hello_seconds: 11 } } })
  t.equal(bad.statusCode, 400)
  await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { voicemail_settings: { detection: true } } })
  const patched = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { voicemail_settings: { action: 'leave_message', message: 'Call us back.' } } })
  t.same(patched.json().voicemail_settings, { detection: true, action: 'leave_message', message: 'Call us back.', detection_timeout_seconds: 30 }, 'members merge')
  const versions = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/versions`, headers: account.headers })).json()
  const latest = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/versions/${versions.data?.[0]?.version ?? patched.json().version}`, headers: account.headers })).json()
  t.match(latest.agent?.voicemail_settings, { detection: true, action: 'leave_message' }, 'the version holds them')
})

t.test('a person: the AMD parameters go with the Calls create; the agent waits for their hello and the human verdict, then speaks', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { voicemail_settings: { ...DETECT, detection_timeout_seconds: 10 }, call_settings: { wait_for_hello_seconds: 8 } })
  const { callId, phone, stream } = await callOut(ctx, account, agent._id, '+14155550123', { kind: 'human', helloMs: 700, detectMs: 300 })
  const placed = ctx.twilio.requests.find((r) => r.path === '/Calls.json')!
  t.equal(placed.form.get('MachineDetection'), 'DetectMessageEnd')
  t.equal(placed.form.get('AsyncAmd'), 'true')
  t.equal(placed.form.get('AsyncAmdStatusCallback'), `${PUBLIC}/telephony/twilio/amd?call_id=${callId}`)
  t.equal(placed.form.get('MachineDetectionTimeout'), '10')

  await poll(() => stream.frames.length, (n) => n > 10, { message: 'the agent speaks' })
  const amd = ctx.twilio.webhooks.find((w) => w.kind === 'amd')!
  t.match(amd, { status: 204, params: { AnsweredBy: 'human' } })
  t.ok(stream.frames[0].at > phone.screening.helloEndedAt!, 'not over the callee\'s hello')
  t.ok(stream.frames[0].at > phone.screening.verdictAt!, 'not before the verdict')
  t.ok(stream.frames[0].at - phone.screening.helloEndedAt! < 8000, 'after the hello, not after the whole wait')
  t.match(ctx.openai.requests.speech[0].body, { input: 'Hello Ada, this is the clinic.' })
  t.equal(ctx.openai.requests.chat.length, 0, 'the hello is no turn the model answers')
  await agentQuiet(stream)
  await stream.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup' })
  t.match(done.transcription[0], { speaker: 'tool', tool: { name: 'answering_machine_detection', arguments: '{"answered_by":"human"}' } })
  t.match(done.transcription[1], { speaker: 'agent', content: 'Hello Ada, this is the clinic.' })
  t.same(ctx.twilio.errors, [])
})

t.test('a machine, hang_up: no word is said; the call ends voicemail, charged as Twilio charges it, and is called back when on_outcomes has voicemail', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, {
    voicemail_settings: { detection: true, action: 'hang_up' },
    call_settings: { wait_for_hello_seconds: 1 }
  })
  await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { callback_settings: { enabled: true, on_outcomes: ['voicemail'], max_attempts: 1 } } })
  const { callId, phone, stream } = await callOut(ctx, account, agent._id, '+14155550124', { kind: 'machine', greetingMs: 2000 })
  t.equal(await phone.ended, 'completed', 'the agent hung up')
  t.same(phone.screening.answeredBy, ['machine_end_beep'])
  t.equal(stream.frames.length, 0, 'nothing was said to the machine, though its greeting outlasted the wait for hello')
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { call_status: 'failed', disconnection_reason: 'voicemail' }, 'no conversation was held')
  t.ok(done.duration_ms > 0, 'answered: the minutes run')
  t.match(done.call_credits_details, { phone_call_credits: 10 }, 'one minute charged, as Twilio charges the answered call')
  t.match(done.transcription, [{ speaker: 'tool', content: /machine; the agent hangs up/ }])
  const [callback] = await ctx.db.selectFrom('call_callbacks').selectAll().where('after_call_id', '=', callId).execute()
  t.match(callback, { status: 'scheduled', attempt: 1 }, 'a callback is scheduled for the voicemail outcome')
  t.equal((await ctx.db.selectFrom('calls').select('answered_by').where('id', '=', callId).executeTakeFirstOrThrow()).answered_by, 'machine_end_beep')
})

t.test('a machine, leave_message: the message is spoken after the beep, then the call ends voicemail', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { voicemail_settings: DETECT, call_settings: { wait_for_hello_seconds: 1 } })
  const { callId, phone, stream } = await callOut(ctx, account, agent._id, '+14155550125', { kind: 'machine', greetingMs: 1500 })
  t.equal(await phone.ended, 'completed')
  t.ok(stream.frames.length > 10, 'the message was sent')
  t.ok(stream.frames[0].at > phone.screening.beepEndedAt!, 'after the beep')
  t.same(ctx.openai.requests.speech.map((r) => r.body.input), ['Hi Ada, the clinic here: please call us back.'], 'only the message, its variables filled: no begin message')
  t.ok(stream.echoed.length > 0, 'played to its end before the hang-up')
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { call_status: 'success', disconnection_reason: 'voicemail' })
  t.match(done.transcription, [{ speaker: 'tool', content: /machine; the agent leaves the message/ }, { speaker: 'agent', content: 'Hi Ada, the clinic here: please call us back.' }])
})

t.test('a callee who never says hello hears the agent once wait_for_hello_seconds have passed; detection off sends no AMD parameters', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { call_settings: { wait_for_hello_seconds: 1.5 } })
  const { callId, phone, stream } = await callOut(ctx, account, agent._id, '+14155550126', { kind: 'human', helloMs: 0 })
  const placed = ctx.twilio.requests.find((r) => r.path === '/Calls.json')!
  t.equal(placed.form.get('MachineDetection'), null)
  t.equal(phone.machineDetection, undefined)
  await poll(() => stream.frames.length, (n) => n > 10, { message: 'the agent speaks' })
  t.ok(stream.frames[0].at - phone.answeredAt! >= 1500, 'not before the wait is over')
  await stream.hangup()
  t.match(await finishedCall(ctx.app, account.headers, callId), { call_status: 'success', disconnection_reason: 'user_hangup' })
})

t.test('the AMD webhook lands on another server process than the one holding the call: the signal reaches the session', async (t) => {
  const ctx = await listen(t)
  const other = await buildApp(ctx.config, { db: ctx.db, boss: ctx.boss, logger: createLogger(ctx.config) })
  t.teardown(async () => { await other.close() })
  const otherUrl = await other.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { voicemail_settings: { detection: true, action: 'hang_up' }, call_settings: { wait_for_hello_seconds: 1 } })
  const answer = Promise.withResolvers<void>()
  ctx.twilio.callee('+14155550127', { answer: 'answer', until: answer.promise })
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: '+14155550127' } })
  const callId = res.json()._id as string
  answer.resolve()
  const phone = await ctx.twilio.waitForCall('+14155550127')
  await phone.waitForStream()
  // From now on Twilio's requests reach the other process; the stream stays with the first.
  ctx.twilio.route(PUBLIC, otherUrl)
  const amd = await ctx.twilio.post(`${PUBLIC}/telephony/twilio/amd?call_id=${callId}`, { AccountSid: ACCOUNT_SID, CallSid: phone.sid, AnsweredBy: 'machine_end_silence' })
  t.equal(amd.status, 204)
  t.equal(await phone.ended, 'completed', 'the session on the first process hung up')
  t.match(await finishedCall(ctx.app, account.headers, callId), { disconnection_reason: 'voicemail' })
})

t.test('forged AMD callbacks: 403 without the signature of the call\'s account (another account\'s token included), 400 for an unknown AnsweredBy, 404 for no such call; nothing changes', async (t) => {
  const ctx = await listen(t)
  const victim = await createAccount(ctx.db)
  const agent = await agentWith(ctx, victim, { voicemail_settings: { detection: true, action: 'hang_up' }, call_settings: { wait_for_hello_seconds: 1 } })
  const attacker = await createAccount(ctx.db)
  const evil = sid('AC')
  ctx.twilio.addAccount(evil, 'attacker-token')
  ctx.twilio.hold(evil, '+14155550177')
  const imported = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers: attacker.headers, payload: { phone_number: '+14155550177', account_sid: evil, auth_token: 'attacker-token' } })
  t.equal(imported.statusCode, 201, imported.body)

  const { callId, phone, stream } = await callOut(ctx, victim, agent._id, '+14155550128', { kind: 'human', helloMs: 0 })
  const url = `${PUBLIC}/telephony/twilio/amd?call_id=${callId}`
  const params = { AccountSid: ACCOUNT_SID, CallSid: phone.sid, AnsweredBy: 'machine_end_beep' }
  t.equal((await ctx.twilio.post(url, params, { signature: 'none' })).status, 403, 'unsigned')
  t.equal((await ctx.twilio.post(url, params, { signature: 'wrong' })).status, 403, 'signed with another token')
  t.equal((await ctx.twilio.post(url, { ...params, AccountSid: evil }, { accountSid: evil, authToken: 'attacker-token' })).status, 403, 'another account, signed by it')
  t.equal((await ctx.twilio.post(url, params, { accountSid: evil, authToken: 'attacker-token' })).status, 403, 'naming the victim\'s account, signed by another')
  t.equal((await ctx.twilio.post(`${PUBLIC}/telephony/twilio/amd`, params)).status, 400, 'no call_id')
  t.equal((await ctx.twilio.post(url, { ...params, AnsweredBy: 'robot' })).status, 400, 'an AnsweredBy Twilio does not send')
  t.equal((await ctx.twilio.post(`${PUBLIC}/telephony/twilio/amd?call_id=650000000000000000000000`, params)).status, 404)
  const row = await ctx.db.selectFrom('calls').selectAll().where('id', '=', callId).executeTakeFirstOrThrow()
  t.match(row, { call_status: 'started', answered_by: null }, 'the call goes on untouched')
  await poll(() => stream.frames.length, (n) => n > 10, { message: 'the agent still talks to the person' })
  await stream.hangup()
  t.match(await finishedCall(ctx.app, victim.headers, callId), { disconnection_reason: 'user_hangup' })
})
