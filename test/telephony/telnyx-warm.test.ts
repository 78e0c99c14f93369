import t from 'tap'
import type { Test } from 'tap'
import { decodeClientState, encodeClientState } from '../../src/modules/telephony/telnyx/commands.ts'
import { announcementVoice } from '../../src/modules/telephony/telnyx/warm.ts'
import { announcement } from '../../src/modules/telephony/warm.ts'
import { decodeWav } from '../../src/modules/voice/audio.ts'
import { createAccount, type Account } from '../helpers/app.ts'
import { agentQuiet, poll } from '../helpers/poll.ts'
import { listenWithTelnyx, OUR_NUMBER, PUBLIC, type TelnyxContext } from '../helpers/telnyx-phone.ts'
import { type StandinCall, type TelnyxStream } from '../helpers/telnyx-standin.ts'
import { finishedCall, speech } from '../helpers/voice-client.ts'

// Warm transfers on Telnyx numbers, end to end on loopback (docs/voice.md, "Warm transfer"): the caller's stream
// stops and hold music plays on their call, the agent dials the person, who hears the announcement and presses a key
// (gather_using_speak); 1 bridges both calls, anything else or no answer takes the caller back on a new stream. The
// Telnyx stand-in runs the person's phone (Callee.keys) and posts its webhooks signed.

const CALLER = '+14155550199'
const PERSON = '+14155550142'
const SUMMARY = 'Ada Lovelace wants to move her Tuesday appointment to Friday.'

type Ctx = TelnyxContext

async function listen (t: Test): Promise<Ctx> {
  return await listenWithTelnyx(t)
}

/** An agent answering OUR_NUMBER with one warm transfer tool to PERSON. */
async function agentWithTool (ctx: Ctx, account: Account, type: string, settings: Record<string, unknown>) {
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello, this is the clinic.', general_prompt: 'You are the clinic\'s receptionist.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: config._id } })).json() as { _id: string }
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: type, settings: { phone_number: PERSON, transfer_mode: 'warm', ...settings } } })
  if (tool.statusCode !== 201) throw new Error(tool.body)
  const number = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: OUR_NUMBER, inbound_agent_id: agent._id } })
  if (number.statusCode !== 201) throw new Error(number.body)
  return agent
}

/** The caller says something once the agent has spoken and stopped. */
async function say (stream: TelnyxStream, after = 0): Promise<void> {
  await agentQuiet(stream, after)
  stream.sendAudio(speech(600, 700))
}

/** The caller asks for a person; the agent calls its transfer tool (named `tool`) with the summary and says one line. */
function scriptTransfer (ctx: Ctx, tool: string, then: string[] = [], summary = SUMMARY) {
  ctx.openai.transcripts.push('Can I talk to someone at the front desk?', ...then)
  ctx.openai.replies.push({ toolCalls: [{ name: tool, arguments: { reason: 'asked for a person', summary } }] }, { text: 'Let me get someone for you.' })
}

/** The person's leg (the n-th call the agent placed to PERSON). */
const personLeg = async (ctx: Ctx, n = 0): Promise<StandinCall> =>
  await poll(() => [...ctx.telnyx.calls.values()].filter((c) => c.to === PERSON)[n], (c) => c !== undefined, { message: 'the agent never called the person' })

const commandsOf = (call: StandinCall) => call.commands.map((c) => c.command)
const callsOf = async (ctx: Ctx) => await ctx.db.selectFrom('calls').selectAll().execute()
const legEvent = async (ctx: Ctx, leg: StandinCall, type: string, extra: Record<string, unknown> = {}) =>
  await ctx.telnyx.post(ctx.telnyx.webhookUrl, type, { call_control_id: leg.callControlId, client_state: leg.clientState, from: leg.from, to: leg.to, direction: 'outgoing', ...extra })

t.test('warm transfer accepted: hold music, the person hears the summary and presses 1, both calls are bridged; the call ends call_transfer with the leg', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWithTool(ctx, account, 'call_forwarding', { name: 'Front desk', timeout_seconds: 20 })
  ctx.telnyx.callees.set(PERSON, { answer: 'answer', keys: '1', talkMs: 1200 })
  scriptTransfer(ctx, 'Front_desk')

  const { call } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  const stream = await ctx.telnyx.stream(call)
  await say(stream)
  const person = await personLeg(ctx)
  const dial = person.commands[0]
  t.match(dial, { command: 'dial', body: { connection_id: ctx.telnyx.connectionId, from: OUR_NUMBER, to: PERSON, timeout_secs: 20, webhook_url: `${PUBLIC}/telephony/telnyx/webhook` } }, 'the person is dialled from the call\'s number')
  t.notOk('stream_url' in dial.body, 'the person\'s leg is not streamed')
  const [row] = await callsOf(ctx)
  t.same(JSON.parse(Buffer.from(person.clientState!, 'base64').toString()), { call_id: row.id, leg: 'warm' }, 'client_state names our call and the leg')
  await poll(() => person.bridged, (b) => b !== undefined, { message: 'the calls were never bridged' })
  const gather = person.commands.find((c) => c.command === 'gather_using_speak')!
  t.match(gather.body, { payload: new RegExp(`${SUMMARY} To take the call, press 1\\.$`), voice: 'AWS.Polly.Joanna-Neural', maximum_digits: 1, maximum_tries: 1, timeout_millis: 8000 })
  t.notMatch(gather.body.payload, /say yes/, 'Telnyx\'s gather hears keys only')
  const caller = commandsOf(call)
  t.same(caller.slice(caller.indexOf('streaming_stop')), ['streaming_stop', 'playback_start', 'playback_stop', 'bridge'], 'the stream stops, the music plays, stops, and the calls are bridged')
  t.match(call.commands.find((c) => c.command === 'playback_start')!.body, { audio_url: `${PUBLIC}/telephony/telnyx/hold-music.wav`, loop: 'infinity' })
  t.same(call.commands.find((c) => c.command === 'bridge')!.body, { call_control_id: person.callControlId })
  t.ok(stream.frames.length > 0, 'the agent\'s line was played before the hold')

  // The person talks, then hangs up: the bridge hangs up the caller too.
  await poll(() => call.alive, (alive) => !alive, { message: 'the caller\'s call never ended' })
  const done = await finishedCall(ctx.app, account.headers, row.id)
  t.match(done, { call_status: 'success', disconnection_reason: 'call_transfer' })
  t.ok(done.call_credits_details.call_forwarding_credits > 0, 'the person\'s minutes are charged as forwarding')
  const seconds = done.transfer_history[0].duration_seconds
  t.ok(seconds >= 1, 'the person\'s seconds run from their answer')
  t.match(done.transfer_history, [{ type: 'call_forwarding', from_agent_id: agent._id, to_number: PERSON, mode: 'warm', outcome: 'answered', legs: [{ to: PERSON, outcome: 'answered', seconds }] }])

  // The hold music is a WAV Telnyx can play.
  const music = await ctx.app.inject({ method: 'GET', url: '/telephony/telnyx/hold-music.wav' })
  t.equal(music.statusCode, 200)
  t.equal(music.headers['content-type'], 'audio/wav')
  t.equal(decodeWav(music.rawPayload).rate, 8000)
})

t.test('warm transfer declined (a key other than 1), on a silent hold: the person\'s leg is hung up and the agent takes the caller back; repeated webhooks change nothing', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentWithTool(ctx, account, 'agent_transfer', { name: 'Sales team', hold_music: 'none' })
  ctx.telnyx.callees.set(PERSON, { answer: 'answer', keys: '2' })
  scriptTransfer(ctx, 'Sales_team', ['Then I will call back later.'])
  ctx.openai.replies.push({ text: 'Of course, goodbye.' })

  const { call } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  const first = await ctx.telnyx.stream(call)
  await say(first)
  const second = await ctx.telnyx.stream(call, 1)
  const person = await personLeg(ctx)
  t.same(commandsOf(person), ['dial', 'gather_using_speak', 'hangup'], 'the person is asked, declines, and is hung up')
  t.notOk(commandsOf(call).some((c) => c.startsWith('playback') || c === 'bridge'), 'no music, no bridge')
  t.not(second.token, first.token, 'the take-back stream has a token of its own')
  await poll(() => ctx.openai.requests.speech.length, (n) => n >= 3, { message: 'the agent speaks again' })
  t.match(ctx.openai.requests.speech[2].body, { input: /could not reach anyone/ }, 'the agent tells the caller')

  // Telnyx repeats the person's webhooks: nothing changes, nobody is taken back twice.
  const before = commandsOf(call).length
  t.equal((await legEvent(ctx, person, 'call.answered')).status, 204)
  t.equal((await legEvent(ctx, person, 'call.gather.ended', { digits: '1', status: 'valid' })).status, 204)
  t.equal((await legEvent(ctx, person, 'call.hangup', { hangup_cause: 'normal_clearing' })).status, 204)
  t.same(commandsOf(call).slice(before), [], 'no command to the caller\'s call')
  t.equal(call.streams.length, 2, 'one take-back')

  await say(second)
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 3, { message: 'the caller is answered after the take-back' })
  t.match(ctx.openai.requests.chat[2].body.messages.map((m: { content: string | null }) => m.content), [/receptionist/, 'Hello, this is the clinic.', 'Can I talk to someone at the front desk?', 'Let me get someone for you.', /could not reach anyone/, 'Then I will call back later.'],
    'the conversation goes on where it was')
  await ctx.telnyx.hangup(call)
  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup', call_credits_details: { call_forwarding_credits: 0 } })
  t.match(done.transfer_history, [{ type: 'agent_transfer', to_number: PERSON, mode: 'warm', outcome: 'declined', legs: [{ to: PERSON, outcome: 'declined' }] }])
  t.notOk('duration_seconds' in done.transfer_history[0])
})

t.test('warm transfer nobody answers, then busy, then no key pressed: the caller is back with the agent each time, each leg recorded', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentWithTool(ctx, account, 'call_forwarding', { name: 'Front desk', timeout_seconds: 15 })
  ctx.telnyx.callees.set(PERSON, { answer: 'no-answer' })
  scriptTransfer(ctx, 'Front_desk', ['Please try once more.', 'And once more.'])
  ctx.openai.replies.push({ toolCalls: [{ name: 'Front_desk', arguments: { summary: SUMMARY } }] }, { text: 'Trying again.' },
    { toolCalls: [{ name: 'Front_desk', arguments: { summary: SUMMARY } }] }, { text: 'Trying again.' })

  const { call } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  const first = await ctx.telnyx.stream(call)
  await say(first)
  const second = await ctx.telnyx.stream(call, 1)
  t.match((await personLeg(ctx)).commands[0].body, { timeout_secs: 15 })
  t.equal(call.playing, undefined, 'the hold music stopped')
  t.same(commandsOf(call).filter((c) => c.startsWith('playback') || c.startsWith('streaming')), ['streaming_start', 'streaming_stop', 'playback_start', 'playback_stop', 'streaming_start'])
  ctx.telnyx.callees.set(PERSON, { answer: 'busy' })
  await say(second)
  const third = await ctx.telnyx.stream(call, 2)
  ctx.telnyx.callees.set(PERSON, { answer: 'answer', keys: '' })
  await say(third)
  const fourth = await ctx.telnyx.stream(call, 3)
  t.same(commandsOf(await personLeg(ctx, 2)), ['dial', 'gather_using_speak', 'hangup'], 'silence after the announcement hangs the person up')
  await agentQuiet(fourth)
  await ctx.telnyx.hangup(call)

  const done = await finishedCall(ctx.app, account.headers, (await callsOf(ctx))[0].id)
  t.match(done, { disconnection_reason: 'user_hangup', call_credits_details: { call_forwarding_credits: 0 } })
  t.match(done.transfer_history, [
    { mode: 'warm', outcome: 'no_answer', legs: [{ to: PERSON, outcome: 'no_answer', seconds: 0 }] },
    { mode: 'warm', outcome: 'busy', legs: [{ to: PERSON, outcome: 'busy', seconds: 0 }] },
    { mode: 'warm', outcome: 'declined', legs: [{ to: PERSON, outcome: 'declined' }] }
  ])
})

t.test('the caller hangs up on hold: the person\'s ringing leg is hung up and the call ends user_hangup; repeats change nothing', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentWithTool(ctx, account, 'call_forwarding', { name: 'Front desk' })
  ctx.telnyx.callees.set(PERSON, { answer: 'rings' })
  scriptTransfer(ctx, 'Front_desk')

  const { call } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  await say(await ctx.telnyx.stream(call))
  const person = await personLeg(ctx)
  await poll(() => call.playing, (playing) => playing !== undefined, { message: 'no hold music' })
  const [held] = await callsOf(ctx)
  await poll(async () => (await callsOf(ctx))[0].forwarding, (f) => f?.warm?.call_sid === person.callControlId, { message: 'the person\'s leg is recorded' })

  await ctx.telnyx.hangup(call)
  await poll(() => person.alive, (alive) => !alive, { message: 'the person\'s ringing phone never stopped' })
  t.same(commandsOf(person), ['dial', 'hangup'])
  const done = await finishedCall(ctx.app, account.headers, held.id)
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup', call_credits_details: { call_forwarding_credits: 0 } })
  t.match(done.transfer_history, [{ mode: 'warm', outcome: 'canceled', legs: [{ to: PERSON, outcome: 'canceled', seconds: 0 }] }])

  // The same webhooks again, and a person who answers after all: the ended call does not change.
  t.equal((await legEvent(ctx, person, 'call.hangup', { hangup_cause: 'originator_cancel' })).status, 204)
  t.equal((await ctx.telnyx.post(ctx.telnyx.webhookUrl, 'call.hangup', { call_control_id: call.callControlId, client_state: call.clientState, hangup_cause: 'normal_clearing' })).status, 204)
  t.equal((await legEvent(ctx, person, 'call.gather.ended', { digits: '1', status: 'valid' })).status, 204)
  const after = await finishedCall(ctx.app, account.headers, held.id)
  t.same(after.transfer_history, done.transfer_history)
  t.equal(after.disconnection_reason, 'user_hangup')
})

t.test('bad, unknown and forged webhooks about a warm leg: 4xx or ignored, never a 500, and nothing changes', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentWithTool(ctx, account, 'call_forwarding', { name: 'Front desk' })
  ctx.telnyx.callees.set(PERSON, { answer: 'answer' })
  // A summary longer than Telnyx says at once (3,000 characters) is cut.
  scriptTransfer(ctx, 'Front_desk', [], SUMMARY.repeat(60))

  const { call } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  await say(await ctx.telnyx.stream(call))
  const person = await personLeg(ctx)
  // The person answered and was asked; no key yet.
  await poll(() => commandsOf(person), (c) => c.includes('gather_using_speak'), { message: 'the person was never asked' })
  const asked = person.commands.find((c) => c.command === 'gather_using_speak')!.body.payload as string
  t.ok(asked.length <= 3000 && asked.includes(SUMMARY) && asked.endsWith('press 1.'), 'a long summary is cut, the question kept')
  const [held] = await callsOf(ctx)
  const warm = (callId: string) => Buffer.from(JSON.stringify({ call_id: callId, leg: 'warm' })).toString('base64')

  for (const signing of ['none', 'wrong', 'stale'] as const) {
    t.equal((await ctx.telnyx.post(ctx.telnyx.webhookUrl, 'call.gather.ended', { call_control_id: person.callControlId, client_state: person.clientState, digits: '1', status: 'valid' }, signing)).status, 403, signing)
  }
  const cases: Array<[string, Record<string, unknown>, number]> = [
    ['call.gather.ended', { call_control_id: 'not-an-id', client_state: person.clientState, digits: '1' }, 400],
    ['call.gather.ended', { client_state: person.clientState, digits: '1' }, 400],
    ['call.gather.ended', { call_control_id: 'v3:another-leg', client_state: person.clientState, digits: '1', status: 'valid' }, 204],
    ['call.gather.ended', { call_control_id: person.callControlId, client_state: warm('0'.repeat(24)), digits: '1', status: 'valid' }, 204],
    ['call.gather.ended', { call_control_id: person.callControlId, client_state: 'bm90IGpzb24=', digits: '1', status: 'valid' }, 204],
    ['call.gather.ended', { call_control_id: person.callControlId, client_state: person.clientState, digits: { one: 1 }, status: 'valid' }, 400],
    ['call.gather.ended', { call_control_id: person.callControlId, client_state: person.clientState, digits: '1', status: 'call_hangup' }, 204],
    ['call.hangup', { call_control_id: 'v3:another-leg', client_state: person.clientState, hangup_cause: 'timeout' }, 204],
    ['call.speak.started', { call_control_id: person.callControlId, client_state: person.clientState }, 204]
  ]
  for (const [type, payload, status] of cases) {
    const res = await ctx.telnyx.post(ctx.telnyx.webhookUrl, type, payload)
    t.equal(res.status, status, `${type} ${JSON.stringify(payload).slice(0, 80)}`)
  }
  const untouched = (await callsOf(ctx))[0]
  t.match(untouched, { call_status: 'started', forwarding: { warm: { call_sid: person.callControlId, accepted_at: null } } }, 'nothing changed')
  t.notOk(commandsOf(call).includes('bridge'), 'nobody was bridged')
  t.ok(person.alive, 'the person is still asked')
  t.equal(held.id, untouched.id)

  // The answer that counts.
  t.equal((await legEvent(ctx, person, 'call.gather.ended', { digits: '1', status: 'valid' })).status, 204)
  await poll(() => commandsOf(call), (c) => c.includes('bridge'), { message: 'no bridge' })
  await ctx.telnyx.hangup(call)
  const done = await finishedCall(ctx.app, account.headers, held.id)
  t.match(done, { disconnection_reason: 'call_transfer', transfer_history: [{ outcome: 'answered', legs: [{ outcome: 'answered' }] }] })
  t.notOk(person.alive, 'the bridged person\'s call ended with the caller\'s')
})

t.test('Telnyx refuses to dial the person: the agent keeps the caller on the same stream and says so; the person leaves as they press 1: the caller is taken back', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentWithTool(ctx, account, 'call_forwarding', { name: 'Front desk' })
  ctx.telnyx.callees.set(PERSON, { answer: 'invalid' })
  scriptTransfer(ctx, 'Front_desk', ['Please try again.'])
  ctx.openai.replies.push({ toolCalls: [{ name: 'Front_desk', arguments: { summary: SUMMARY } }] }, { text: 'Trying again.' })

  const { call } = await ctx.telnyx.dialIn(CALLER, OUR_NUMBER)
  const stream = await ctx.telnyx.stream(call)
  await say(stream)
  const before = stream.frames.length
  await poll(() => ctx.openai.requests.speech.length, (n) => n >= 3, { message: 'the agent speaks again' })
  t.match(ctx.openai.requests.speech[2].body, { input: /could not reach anyone/ }, 'the agent tells the caller')
  t.notOk(commandsOf(call).includes('streaming_stop'), 'the caller stays on the stream')
  const [held] = await callsOf(ctx)
  t.equal(held.forwarding, null, 'nothing is kept')

  // The second try: the person presses 1 and hangs up at once; the bridge finds their call gone.
  ctx.telnyx.callees.set(PERSON, { answer: 'answer', keys: '1', leaves: true })
  await say(stream, before)
  const second = await ctx.telnyx.stream(call, 1)
  t.same(commandsOf(call).slice(-5), ['playback_start', 'playback_stop', 'bridge', 'playback_stop', 'streaming_start'], 'the music stops, the bridge fails, and the caller is taken back')
  await agentQuiet(second)
  await ctx.telnyx.hangup(call)
  const done = await finishedCall(ctx.app, account.headers, held.id)
  t.match(done, { disconnection_reason: 'user_hangup', call_credits_details: { call_forwarding_credits: 0 } })
  t.match(done.transfer_history, [{ mode: 'warm', outcome: 'failed' }, { mode: 'warm', outcome: 'failed', legs: [{ to: PERSON, outcome: 'failed' }] }])
  t.notOk('legs' in done.transfer_history[0], 'a person never dialled has no leg')
})

t.test('the pieces: the announcement asks for a key only; client_state names the warm leg', async (t) => {
  t.match(announcement('en-US', SUMMARY, true), /^Hello, .* To take the call, press 1\.$/)
  t.match(announcement('de-DE', '', true), /drücken Sie die 1\.$/)
  t.equal(announcementVoice('de-DE'), 'AWS.Polly.Vicki-Neural')
  t.equal(announcementVoice('fr-FR'), 'AWS.Polly.Joanna-Neural', 'the English lines in an English voice')
  const id = 'a'.repeat(24)
  t.same(decodeClientState(encodeClientState({ call_id: id, leg: 'warm' })), { call_id: id, leg: 'warm' })
  t.same(decodeClientState(Buffer.from(JSON.stringify({ call_id: id, leg: 'other' })).toString('base64')), { call_id: id }, 'an unknown leg is our call\'s own')
})
