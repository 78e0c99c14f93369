import t from 'tap'
import type { Test } from 'tap'
import { createAccount, type Account } from '../helpers/app.ts'
import { agentQuiet, poll } from '../helpers/poll.ts'
import { listenWithTelnyx, OUR_NUMBER, type TelnyxContext } from '../helpers/telnyx-phone.ts'
import { type Party, type StandinCall } from '../helpers/telnyx-standin.ts'
import { finishedCall } from '../helpers/voice-client.ts'

// Voicemail on outbound Telnyx calls (docs/voice.md, "Voicemail"), end to end on loopback: the Telnyx stand-in dials
// with the answering_machine_detection the server asked for, plays the party who picks up (a person saying hello, a
// machine's greeting and its beep) on the media stream, and posts the call.machine.* webhooks, signed, as Telnyx does
// with `greeting_end`. The same behaviour as Twilio's (test/telephony/voicemail.test.ts).

type Ctx = TelnyxContext

async function listen (t: Test): Promise<Ctx> {
  return await listenWithTelnyx(t)
}

/** An agent with a begin message, its voicemail_settings and call_settings, calling from OUR_NUMBER. */
async function agentWith (ctx: Ctx, account: Account, body: Record<string, unknown>) {
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello {{name}}, this is the clinic.', general_prompt: 'You are the clinic.' } })).json()
  const created = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: llm._id, ...body } })
  if (created.statusCode !== 201) throw new Error(created.body)
  const agent = created.json() as { _id: string }
  const bought = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: OUR_NUMBER, outbound_agent_id: agent._id } })
  if (bought.statusCode !== 201) throw new Error(bought.body)
  return agent
}

/** make-phone-call to `to`, where `party` (or nobody: the test sends the verdicts) picks up; once its stream is open. */
async function callOut (ctx: Ctx, account: Account, agentId: string, to: string, party?: Party) {
  if (party !== undefined) ctx.telnyx.parties.set(to, party)
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agentId, from_number: OUR_NUMBER, to_number: to, dynamic_context: { name: 'Ada' } } })
  if (res.statusCode !== 201) throw new Error(res.body)
  const phone = await poll(() => [...ctx.telnyx.calls.values()].find((c) => c.to === to), (c) => c !== undefined, { message: 'the call was never dialled' })
  return { callId: res.json()._id as string, phone: phone!, stream: await ctx.telnyx.stream(phone!) }
}

/** A machine webhook of the dialled call as Telnyx sends it (signed), or with the payload changed. */
const machineEvent = async (ctx: Ctx, phone: StandinCall, type: string, payload: Record<string, unknown>) => await ctx.telnyx.post(ctx.telnyx.webhookUrl, type, {
  call_control_id: phone.callControlId, call_leg_id: 'leg', call_session_id: 'session', client_state: phone.clientState, connection_id: ctx.telnyx.connectionId, from: phone.from, to: phone.to, ...payload
})

const answeredByOf = async (ctx: Ctx, callId: string) => (await ctx.db.selectFrom('calls').select(['answered_by', 'call_status']).where('id', '=', callId).executeTakeFirstOrThrow())

const DETECT = { detection: true, action: 'leave_message', message: 'Hi {{name}}, the clinic here: please call us back.' }

t.test('a person: the dial asks for greeting_end detection with the agent\'s timeout; the agent speaks after their hello and the human verdict; later machine events change nothing', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { voicemail_settings: { ...DETECT, detection_timeout_seconds: 10 }, call_settings: { wait_for_hello_seconds: 8 } })
  const { callId, phone, stream } = await callOut(ctx, account, agent._id, '+14155550123', { kind: 'human', helloMs: 700, detectMs: 300 })
  t.match(phone.commands[0].body, {
    answering_machine_detection: 'greeting_end',
    answering_machine_detection_config: { total_analysis_time_millis: 10_000, greeting_total_analysis_time_millis: 10_000 }
  })

  await poll(() => stream.frames.length, (n) => n > 10, { message: 'the agent speaks' })
  const screening = phone.screening!
  t.same(screening.sent, [{ type: 'call.machine.detection.ended', result: 'human', status: 204 }])
  t.ok(stream.frames[0].at > screening.helloEndedAt!, 'not over the callee\'s hello')
  t.ok(stream.frames[0].at > screening.verdictAt!, 'not before the verdict')
  t.ok(stream.frames[0].at - screening.helloEndedAt! < 8000, 'after the hello, not after the whole wait')
  t.match(ctx.openai.requests.speech[0].body, { input: 'Hello Ada, this is the clinic.' })
  t.equal(ctx.openai.requests.chat.length, 0, 'the hello is no turn the model answers')
  t.equal((await answeredByOf(ctx, callId)).answered_by, 'human')

  // A repeat, and a machine's events after the verdict (out of order, or Telnyx changing its mind): nothing changes.
  t.equal((await machineEvent(ctx, phone, 'call.machine.detection.ended', { result: 'human' })).status, 204)
  t.equal((await machineEvent(ctx, phone, 'call.machine.detection.ended', { result: 'machine' })).status, 204)
  t.equal((await machineEvent(ctx, phone, 'call.machine.greeting.ended', { result: 'beep_detected' })).status, 204)
  await agentQuiet(stream)
  t.match(await answeredByOf(ctx, callId), { answered_by: 'human', call_status: 'started' }, 'the call goes on with the person')
  t.notOk(phone.commands.some((c) => c.command === 'hangup'), 'nobody hung up on the person')
  await ctx.telnyx.hangup(phone)
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup' })
  t.equal(done.transcription.filter((i: { speaker: string }) => i.speaker === 'tool').length, 1, 'one verdict acted on')
  t.match(done.transcription[0], { speaker: 'tool', tool: { name: 'answering_machine_detection', arguments: '{"answered_by":"human"}' } })
  t.match(done.transcription[1], { speaker: 'agent', content: 'Hello Ada, this is the clinic.' })
})

t.test('a machine, hang_up: no word is said; the call ends voicemail, answered, and is called back when on_outcomes has voicemail', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { voicemail_settings: { detection: true, action: 'hang_up' }, call_settings: { wait_for_hello_seconds: 1 } })
  await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { callback_settings: { enabled: true, on_outcomes: ['voicemail'], max_attempts: 1 } } })
  const { callId, phone, stream } = await callOut(ctx, account, agent._id, '+14155550124', { kind: 'machine', greetingMs: 2000 })
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { call_status: 'failed', disconnection_reason: 'voicemail' }, 'no conversation was held')
  await poll(() => phone.commands.map((c) => c.command), (c) => c.includes('hangup'), { message: (c) => `Telnyx was not told to hang up (${c.join(', ')})` })
  t.same(phone.screening!.sent, [{ type: 'call.machine.detection.ended', result: 'machine', status: 204 }, { type: 'call.machine.greeting.ended', result: 'beep_detected', status: 204 }])
  t.equal(stream.frames.length, 0, 'nothing was said to the machine, though its greeting outlasted the wait for hello')
  t.ok(done.duration_ms > 0, 'answered: the minutes run')
  t.match(done.transcription, [{ speaker: 'tool', content: /machine; the agent hangs up/ }])
  t.equal((await answeredByOf(ctx, callId)).answered_by, 'machine_end_beep')
  const [callback] = await ctx.db.selectFrom('call_callbacks').selectAll().where('after_call_id', '=', callId).execute()
  t.match(callback, { status: 'scheduled', attempt: 1 }, 'a callback is scheduled for the voicemail outcome')
})

t.test('a machine, leave_message: the message is spoken after the beep, then the call ends voicemail', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { voicemail_settings: DETECT, call_settings: { wait_for_hello_seconds: 1 } })
  const { callId, phone, stream } = await callOut(ctx, account, agent._id, '+14155550125', { kind: 'machine', greetingMs: 1500 })
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { call_status: 'success', disconnection_reason: 'voicemail' })
  t.ok(stream.frames.length > 10, 'the message was sent')
  t.ok(stream.frames[0].at > phone.screening!.beepEndedAt!, 'after the beep')
  t.same(ctx.openai.requests.speech.map((r) => r.body.input), ['Hi Ada, the clinic here: please call us back.'], 'only the message, its variables filled: no begin message')
  const marks = stream.messages.filter((m) => m.event === 'mark')
  t.ok(marks.length > 0, 'a mark followed the message: it was played before the hang-up')
  await poll(() => phone.commands.map((c) => c.command), (c) => c.includes('hangup'), { message: (c) => `Telnyx was not told to hang up (${c.join(', ')})` })
  t.match(done.transcription, [{ speaker: 'tool', content: /machine; the agent leaves the message/ }, { speaker: 'agent', content: 'Hi Ada, the clinic here: please call us back.' }])
})

t.test('detection off: the dial asks for no detection, no machine webhook comes, and the agent speaks once the wait for hello is over', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { call_settings: { wait_for_hello_seconds: 1.5 } })
  const { callId, phone, stream } = await callOut(ctx, account, agent._id, '+14155550126', { kind: 'machine', greetingMs: 500 })
  t.notOk('answering_machine_detection' in phone.commands[0].body)
  t.notOk('answering_machine_detection_config' in phone.commands[0].body)
  await poll(() => stream.frames.length, (n) => n > 10, { message: 'the agent speaks' })
  t.same(phone.screening!.sent, [], 'Telnyx detects nothing it was not asked to')
  await ctx.telnyx.hangup(phone)
  t.match(await finishedCall(ctx.app, account.headers, callId), { call_status: 'success', disconnection_reason: 'user_hangup' })
  t.equal((await answeredByOf(ctx, callId)).answered_by, null)
})

t.test('machine webhooks that are not this call\'s or not Telnyx\'s: 403 unsigned, 400 for a bad payload, ignored for a call not here; nothing changes until the real verdict', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { voicemail_settings: { detection: true, action: 'hang_up' }, call_settings: { wait_for_hello_seconds: 1 } })
  // Nobody speaks and the stand-in sends no verdict: this test sends them.
  const { callId, phone, stream } = await callOut(ctx, account, agent._id, '+14155550127')
  const url = ctx.telnyx.webhookUrl
  const valid = { call_control_id: phone.callControlId, client_state: phone.clientState, result: 'machine' }
  const foreign = Buffer.from(JSON.stringify({ call_id: '650000000000000000000000' })).toString('base64')
  const answers = [
    [(await ctx.telnyx.post(url, 'call.machine.greeting.ended', { ...valid, result: 'beep_detected' }, 'none')).status, 403, 'unsigned'],
    [(await ctx.telnyx.post(url, 'call.machine.greeting.ended', { ...valid, result: 'beep_detected' }, 'wrong')).status, 403, 'another account\'s key'],
    [(await ctx.telnyx.post(url, 'call.machine.greeting.ended', { ...valid, result: 'beep_detected' }, 'stale')).status, 403, 'an hour old'],
    [(await machineEvent(ctx, phone, 'call.machine.detection.ended', { result: 'robot' })).status, 400, 'a result Telnyx does not send'],
    [(await machineEvent(ctx, phone, 'call.machine.greeting.ended', { result: 'human' })).status, 400, 'a result of another event'],
    [(await machineEvent(ctx, phone, 'call.machine.detection.ended', { result: undefined })).status, 400, 'no result'],
    [(await machineEvent(ctx, phone, 'call.machine.premium.detection.ended', { result: ['machine'] })).status, 400, 'a result that is no string'],
    [(await machineEvent(ctx, phone, 'call.machine.detection.ended', { call_control_id: 'nope', client_state: undefined })).status, 400, 'a call_control_id that is none'],
    [(await machineEvent(ctx, phone, 'call.machine.greeting.ended', { call_control_id: 'v3:another-installation', client_state: foreign, result: 'beep_detected' })).status, 204, 'a call not here'],
    [(await machineEvent(ctx, phone, 'call.machine.greeting.ended', { call_control_id: 'v3:another-installation', result: 'beep_detected' })).status, 204, 'our call named by another call\'s id'],
    [(await machineEvent(ctx, phone, 'call.machine.greeting.ended', { call_control_id: 'v3:another-installation', client_state: undefined, result: 'beep_detected' })).status, 204, 'an unknown call']
  ] as const
  for (const [status, expected, what] of answers) t.equal(status, expected, what)
  t.match(await answeredByOf(ctx, callId), { answered_by: null, call_status: 'started' }, 'the call goes on untouched')
  t.equal(stream.frames.length, 0, 'the agent still waits for the verdict')

  // The real verdict: a person (premium's words), and the agent talks.
  t.equal((await machineEvent(ctx, phone, 'call.machine.premium.detection.ended', { result: 'human_business' })).status, 204)
  await poll(() => stream.frames.length, (n) => n > 10, { message: 'the agent talks to the person' })
  t.equal((await answeredByOf(ctx, callId)).answered_by, 'human')
  await ctx.telnyx.hangup(phone)
  t.match(await finishedCall(ctx.app, account.headers, callId), { disconnection_reason: 'user_hangup' })
})

t.test('out of order and repeated: the greeting\'s end before the machine verdict ends the call voicemail; the late verdict and repeats change nothing', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { voicemail_settings: { detection: true, action: 'hang_up' }, call_settings: { wait_for_hello_seconds: 1 } })
  const { callId, phone, stream } = await callOut(ctx, account, agent._id, '+14155550128')
  t.equal((await machineEvent(ctx, phone, 'call.machine.greeting.ended', { result: 'beep_detected' })).status, 204)
  t.equal((await machineEvent(ctx, phone, 'call.machine.greeting.ended', { result: 'beep_detected' })).status, 204)
  t.equal((await machineEvent(ctx, phone, 'call.machine.detection.ended', { result: 'machine' })).status, 204)
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { call_status: 'failed', disconnection_reason: 'voicemail' })
  t.equal(done.transcription.filter((i: { speaker: string }) => i.speaker === 'tool').length, 1, 'one verdict acted on')
  t.equal(stream.frames.length, 0)
  t.equal((await answeredByOf(ctx, callId)).answered_by, 'machine_end_beep', 'the machine_start that came late did not replace the verdict')
  t.equal((await machineEvent(ctx, phone, 'call.machine.detection.ended', { result: 'human' })).status, 204, 'after the end: acknowledged')
  t.equal((await answeredByOf(ctx, callId)).answered_by, 'machine_end_beep')
})

t.test('Telnyx not sure: the agent talks as with a person (unknown); premium fax_detected ends the call fax_detected', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { voicemail_settings: { detection: true, action: 'hang_up' }, call_settings: { wait_for_hello_seconds: 1 } })
  const unsure = await callOut(ctx, account, agent._id, '+14155550129')
  t.equal((await machineEvent(ctx, unsure.phone, 'call.machine.detection.ended', { result: 'not_sure' })).status, 204)
  await poll(() => unsure.stream.frames.length, (n) => n > 10, { message: 'the agent talks' })
  t.equal((await answeredByOf(ctx, unsure.callId)).answered_by, 'unknown')
  await ctx.telnyx.hangup(unsure.phone)
  const talked = await finishedCall(ctx.app, account.headers, unsure.callId)
  t.match(talked, { disconnection_reason: 'user_hangup' })
  t.match(talked.transcription[0], { speaker: 'tool', tool: { arguments: '{"answered_by":"unknown"}' } })

  const fax = await callOut(ctx, account, agent._id, '+14155550130')
  t.equal((await machineEvent(ctx, fax.phone, 'call.machine.premium.detection.ended', { result: 'fax_detected' })).status, 204)
  t.match(await finishedCall(ctx.app, account.headers, fax.callId), { disconnection_reason: 'fax_detected' })
  t.equal((await answeredByOf(ctx, fax.callId)).answered_by, 'fax')
  t.equal(fax.stream.frames.length, 0, 'nothing was said to the fax machine')
  await poll(() => fax.phone.commands.map((c) => c.command), (c) => c.includes('hangup'), { message: (c) => `Telnyx was not told to hang up (${c.join(', ')})` })
})
