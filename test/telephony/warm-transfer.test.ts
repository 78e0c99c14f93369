import t from 'tap'
import { createAccount, type Account } from '../helpers/app.ts'
import { agentQuiet, poll } from '../helpers/poll.ts'
import { sid, type ConferenceRoom } from '../helpers/twilio-stand-in.ts'
import { ACCOUNT_SID, CALLER, listenWithTwilio, OUR_NUMBER, type PhoneContext, PUBLIC, say } from '../helpers/twilio-phone.ts'
import type { LiveCall } from '../helpers/twilio-voice.ts'
import { finishedCall } from '../helpers/voice-client.ts'

// Warm transfers through Twilio, end to end on loopback (docs/voice.md, "Warm transfer"): the caller is held in a
// conference, the agent calls the person with a summary in a <Gather>, and the person's answer connects both or
// sends the caller back to the agent. The Twilio stand-in runs the conference, the <Gather> and the person's phone.

const PERSON = '+14155550142'
const SUMMARY = 'Ada Lovelace wants to move her Tuesday appointment to Friday.'

type Ctx = PhoneContext

const listen = listenWithTwilio

/** An agent answering OUR_NUMBER with one transfer tool. */
async function agentWithTool (ctx: Ctx, account: Account, type: string, settings: Record<string, unknown>) {
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello, this is the clinic.', general_prompt: 'You are the clinic\'s receptionist.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: config._id } })).json() as { _id: string }
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: type, settings } })
  if (tool.statusCode !== 201) throw new Error(tool.body)
  const number = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: OUR_NUMBER, inbound_agent_id: agent._id } })
  if (number.statusCode !== 201) throw new Error(number.body)
  return agent
}

/** The conference of the call's warm transfer, once `n` participants joined. */
const roomWith = async (ctx: Ctx, n: number): Promise<ConferenceRoom> => await poll(() => ctx.twilio.conferences[0], (room) => room !== undefined && room.participants.length >= n, {
  message: () => `no conference with ${n} participants: ${JSON.stringify(ctx.twilio.conferences)}`
})

/** The person's phone: the call the agent placed to PERSON (any status). */
const personCall = async (ctx: Ctx): Promise<LiveCall> => await poll(() => ctx.twilio.calls.find((c) => c.to === PERSON), (c) => c !== undefined, { message: 'the agent never called the person' }) as LiveCall

const callsOf = async (ctx: Ctx) => await ctx.db.selectFrom('calls').selectAll().execute()

/** The caller asks for a person; the agent calls its transfer tool (named `tool`) with the summary and says one line. */
function scriptTransfer (ctx: Ctx, tool: string, then: string[] = []) {
  ctx.openai.transcripts.push('Can I talk to someone at the front desk?', ...then)
  ctx.openai.replies.push({ toolCalls: [{ name: tool, arguments: { reason: 'asked for a person', summary: SUMMARY } }] }, { text: 'Let me get someone for you.' })
}

t.test('warm transfer accepted: the caller waits on hold music, the person hears the summary and presses 1, both talk in one conference; the call ends call_transfer with the leg', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWithTool(ctx, account, 'call_forwarding', { name: 'Front desk', phone_number: PERSON, transfer_mode: 'warm', timeout_seconds: 20 })
  ctx.twilio.callee(PERSON, { answer: 'answer', input: { digits: '1' } })
  scriptTransfer(ctx, 'Front_desk')

  const tools = ctx.openai.requests
  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const stream = await call.waitForStream()
  await say(stream)
  const room = await roomWith(ctx, 2)
  const person = await personCall(ctx)
  t.match(tools.chat[0].body.tools.find((tool: { function: { name: string } }) => tool.function.name === 'Front_desk').function.parameters, { required: ['summary'] }, 'the model is asked for a summary')
  t.match(person, { from: OUR_NUMBER, timeout: 20, direction: 'outbound-api' }, 'the agent calls the person from the call\'s number, ringing as long as the tool says')
  const said = person.verbs.filter((verb) => verb.name === 'Say').map((verb) => verb.text)
  t.match(said[0], SUMMARY, 'the person hears the summary')
  t.match(said[0], /press 1 or say yes/)
  t.match(person.verbs.find((verb) => verb.name === 'Say')!.attributes, { language: 'en-US' })
  await poll(() => room.started, (started) => started, { message: 'the conference never started' })
  const caller = room.participants.find((p) => p.callSid === call.sid)
  t.match(caller, { startConferenceOnEnter: false, endConferenceOnExit: true, waited: 'music', left: false }, 'the caller waited on Twilio\'s hold music')
  t.match(room.participants.find((p) => p.callSid === person.sid), { startConferenceOnEnter: true, endConferenceOnExit: true, left: false }, 'the person joined the same conference and started it')
  t.notOk(room.name.includes(CALLER.slice(1)), 'the room is not named after a phone number')
  t.ok(stream.echoed.length > 0, 'the agent\'s line was played before the hold')

  t.equal(await person.hangup(), 'completed', 'the person hangs up')
  t.equal(await call.ended, 'completed', 'and with the conference ending, so does the caller\'s call')

  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { call_status: 'success', disconnection_reason: 'call_transfer' })
  t.ok(done.call_credits_details.call_forwarding_credits > 0, 'the person\'s minutes are charged as forwarding')
  const seconds = person.duration!
  t.match(done.transfer_history, [{ type: 'call_forwarding', from_agent_id: agent._id, to_number: PERSON, mode: 'warm', reason: 'asked for a person', outcome: 'answered', duration_seconds: seconds, legs: [{ to: PERSON, outcome: 'answered', seconds }] }])
  t.same(ctx.twilio.errors, [])
})

t.test('warm transfer accepted by voice; the caller hangs up first: the conference ends, the person\'s call with it, and the call ends call_transfer', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentWithTool(ctx, account, 'call_forwarding', { name: 'Front desk', phone_number: PERSON, transfer_mode: 'warm' })
  ctx.twilio.callee(PERSON, { answer: 'answer', input: { speech: 'Yes, put them through.' } })
  scriptTransfer(ctx, 'Front_desk')

  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  await say(await call.waitForStream())
  const room = await roomWith(ctx, 2)
  await poll(() => room.started, (started) => started, { message: 'the conference never started' })
  const person = await personCall(ctx)
  t.equal(await call.hangup(), 'completed', 'the caller hangs up')
  t.equal(await person.ended, 'completed', 'the person\'s call ends with the conference')
  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { call_status: 'success', disconnection_reason: 'call_transfer' })
  t.match(done.transfer_history, [{ mode: 'warm', outcome: 'answered', duration_seconds: person.duration, legs: [{ outcome: 'answered', seconds: person.duration }] }])
  t.same(ctx.twilio.errors, [])
})

t.test('warm transfer declined by voice, on a silent hold: the agent takes the caller back on a new stream, says so, and the conversation goes on', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentWithTool(ctx, account, 'agent_transfer', { name: 'Sales team', phone_number: PERSON, transfer_mode: 'warm', hold_music: 'none' })
  ctx.twilio.callee(PERSON, { answer: 'answer', input: { speech: 'No, I am in a meeting.' } })
  scriptTransfer(ctx, 'Sales_team', ['Then I will call back later.'])
  ctx.openai.replies.push({ text: 'Of course, goodbye.' })

  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const first = await call.waitForStream()
  await say(first)
  const second = await call.waitForStream(1)
  const person = await personCall(ctx)
  t.equal(await person.ended, 'completed', 'the person\'s call is hung up')
  const [room] = ctx.twilio.conferences
  // The caller leaves the conference when the take-back's redirect reaches the stand-in, which may come just after.
  await poll(() => room.participants[0]?.left, (left) => left === true)
  t.match(room.participants, [{ callSid: call.sid, waited: 'silence', left: true }], 'the caller waited in silence, alone, and left')
  await poll(() => ctx.openai.requests.speech.length, (n) => n >= 3, { message: 'the agent speaks again' })
  t.match(ctx.openai.requests.speech[2].body, { input: /could not reach anyone/ }, 'the agent tells the caller')
  const answered = await say(second)
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 3, { message: 'the caller is answered after the take-back' })
  t.match(ctx.openai.requests.chat[2].body.messages.map((m: { content: string | null }) => m.content), [/receptionist/, 'Hello, this is the clinic.', 'Can I talk to someone at the front desk?', 'Let me get someone for you.', /could not reach anyone/, 'Then I will call back later.'],
    'the conversation goes on where it was')
  await agentQuiet(second, answered)
  // Twilio retries the person's final status callback: the caller is not taken back twice.
  const final = ctx.twilio.webhooks.find((w) => w.url.includes('/transfer-status') && w.params.CallStatus === 'completed')!
  t.equal((await ctx.twilio.resend(final)).status, 204)
  await second.hangup()
  t.equal(call.streams.length, 2, 'one take-back')

  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup', call_credits_details: { call_forwarding_credits: 0 } })
  t.match(done.transfer_history, [{ type: 'agent_transfer', to_number: PERSON, mode: 'warm', outcome: 'declined', legs: [{ to: PERSON, outcome: 'declined', seconds: person.duration }] }])
  t.notOk('duration_seconds' in done.transfer_history[0])
  t.same(ctx.twilio.errors, [])
})

t.test('warm transfer nobody answers, or busy: the caller is back with the agent, each leg recorded', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentWithTool(ctx, account, 'call_forwarding', { name: 'Front desk', phone_number: PERSON, transfer_mode: 'warm', timeout_seconds: 15 })
  ctx.twilio.callee(PERSON, { answer: 'no-answer' })
  scriptTransfer(ctx, 'Front_desk', ['Please try once more.'])
  ctx.openai.replies.push({ toolCalls: [{ name: 'Front_desk', arguments: { summary: SUMMARY } }] }, { text: 'Trying again.' })

  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const first = await call.waitForStream()
  await say(first)
  const second = await call.waitForStream(1)
  t.match(ctx.twilio.calls.filter((c) => c.to === PERSON), [{ status: 'no-answer', timeout: 15 }])
  // The caller asks again; this time the line is busy.
  ctx.twilio.callee(PERSON, { answer: 'busy' })
  await say(second)
  const third = await call.waitForStream(2)
  await agentQuiet(third)
  await third.hangup()

  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { disconnection_reason: 'user_hangup', call_credits_details: { call_forwarding_credits: 0 } })
  t.match(done.transfer_history, [
    { mode: 'warm', outcome: 'no_answer', legs: [{ to: PERSON, outcome: 'no_answer', seconds: 0 }] },
    { mode: 'warm', outcome: 'busy', legs: [{ to: PERSON, outcome: 'busy', seconds: 0 }] }
  ])
  t.same(ctx.twilio.errors, [])
})

t.test('the caller hangs up on hold: the call to the person is cancelled and the call ends user_hangup; forged webhooks about the person\'s call are refused', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentWithTool(ctx, account, 'call_forwarding', { name: 'Front desk', phone_number: PERSON, transfer_mode: 'warm' })
  // The person's phone rings and rings.
  ctx.twilio.callee(PERSON, { answer: 'answer', until: new Promise(() => {}) })
  scriptTransfer(ctx, 'Front_desk')

  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  await say(await call.waitForStream())
  const room = await roomWith(ctx, 1)
  t.match(room.participants, [{ callSid: call.sid, waited: 'music' }], 'the caller waits on Twilio\'s hold music')
  const person = await personCall(ctx)
  await poll(() => person.status, (status) => status === 'ringing', { message: 'the person\'s phone never rang' })
  const [held] = await callsOf(ctx)
  t.match(held.forwarding, { warm: { call_sid: person.sid, accepted_at: null } })

  // Webhooks about the person's call: only the account of the call's number, about that call.
  const leg = { AccountSid: ACCOUNT_SID, ApiVersion: '2010-04-01', CallSid: person.sid, CallStatus: 'in-progress', Direction: 'outbound-api', From: OUR_NUMBER, To: PERSON }
  const answer = `${PUBLIC}/telephony/twilio/transfer-answer?call_id=${held.id}`
  const status = `${PUBLIC}/telephony/twilio/transfer-status?call_id=${held.id}`
  for (const signature of ['none', 'wrong'] as const) {
    t.equal((await ctx.twilio.post(answer, { ...leg, Digits: '1' }, { signature })).status, 403, `answer, signature ${signature}`)
    t.equal((await ctx.twilio.post(status, { ...leg, CallStatus: 'completed', CallDuration: '600' }, { signature })).status, 403, `status, signature ${signature}`)
  }
  const stranger = sid('AC')
  ctx.twilio.addAccount(stranger, 'stranger-token')
  t.equal((await ctx.twilio.post(answer, { ...leg, AccountSid: stranger, Digits: '1' }, { accountSid: stranger, authToken: 'stranger-token' })).status, 403, 'another Twilio account')
  t.equal((await ctx.twilio.post(`${PUBLIC}/telephony/twilio/transfer-answer?call_id=${'0'.repeat(24)}`, { ...leg, Digits: '1' })).status, 404, 'a call that is not here')
  const otherLeg = await ctx.twilio.post(answer, { ...leg, CallSid: sid('CA'), Digits: '1' })
  t.match(otherLeg.body, /<Hangup\/>/, 'an answer from another call than the person\'s joins nothing')
  t.equal((await ctx.twilio.post(status, { ...leg, CallSid: sid('CA'), CallStatus: 'busy' })).status, 204)
  const untouched = (await callsOf(ctx))[0]
  t.match(untouched, { call_status: 'started', forwarding: { warm: { call_sid: person.sid, accepted_at: null } } }, 'nothing changed')

  t.equal(await call.hangup(), 'completed', 'the caller hangs up on hold')
  t.equal(await person.ended, 'canceled', 'the person\'s ringing phone stops')
  const done = await finishedCall(ctx.app, account.headers, held.id)
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup', call_credits_details: { call_forwarding_credits: 0 } })
  t.match(done.transfer_history, [{ mode: 'warm', outcome: 'canceled', legs: [{ to: PERSON, outcome: 'canceled', seconds: 0 }] }])
  t.same(ctx.twilio.errors, [])
})

t.test('the warm mode is validated: only for a number, only blind or warm, hold music or none', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWithTool(ctx, account, 'call_forwarding', { name: 'Front desk', phone_number: PERSON })
  const other = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Other', llm_id: (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: {} })).json()._id } })).json()
  const add = async (type: string, settings: Record<string, unknown>) => await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: type, settings } })
  const toAgent = await add('agent_transfer', { name: 'Other', agent_id: other._id, transfer_mode: 'warm' })
  t.equal(toAgent.statusCode, 400)
  t.match(toAgent.json(), { code: 'bad_request', message: /transfer_mode warm needs a phone_number/ })
  t.equal((await add('call_forwarding', { name: 'X', phone_number: PERSON, transfer_mode: 'lukewarm' })).statusCode, 400)
  t.equal((await add('call_forwarding', { name: 'X', phone_number: PERSON, transfer_mode: 'warm', hold_music: 'jazz' })).statusCode, 400)
  const ok = await add('agent_transfer', { name: 'Desk', phone_number: PERSON, transfer_mode: 'warm', hold_music: 'none' })
  t.equal(ok.statusCode, 201, ok.body)
  t.match(ok.json().settings, { transfer_mode: 'warm', hold_music: 'none' })
})
