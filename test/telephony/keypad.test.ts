import t from 'tap'
import type { Test } from 'tap'
import { createAccount, type Account } from '../helpers/app.ts'
import { agentQuiet, poll } from '../helpers/poll.ts'
import { CALLER, listenWithTwilio, OUR_NUMBER, type PhoneContext } from '../helpers/twilio-phone.ts'
import type { MediaStream } from '../helpers/twilio-voice.ts'
import { finishedCall, speech } from '../helpers/voice-client.ts'

// The keypad (DTMF) on the phone, end to end on loopback (docs/voice.md, "Keypad"): the Twilio stand-in's caller
// presses keys (Media Streams `dtmf` messages) and the model (the OpenAI-compatible stand-in, cascade engine) gets
// them as a caller turn; a keypad data_retrieval field is filled by keys ended with `#`; the agent's send_dtmf tool
// reaches Twilio as <Play digits> in a call update, after which a new stream takes the conversation back.

type Ctx = PhoneContext

// A run of keys without `#` ends after this pause (the default 2.5 s, short for the test).
const listen = async (t: Test) => await listenWithTwilio(t, { VOICE_KEYPAD_PAUSE_MS: '200' })

/** An agent (with `tools`) answering OUR_NUMBER. */
async function agentOnNumber (ctx: Ctx, account: Account, body: Record<string, unknown> = {}, tools: Array<[string, Record<string, unknown>]> = []) {
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello, this is the bank.', general_prompt: 'You are the bank\'s assistant.' } })).json()
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Bank', llm_id: config._id, ...body } })
  if (res.statusCode !== 201) throw new Error(res.body)
  const agent = res.json() as { _id: string }
  for (const [type, settings] of tools) {
    const added = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: type, settings } })
    if (added.statusCode !== 201) throw new Error(added.body)
  }
  const bought = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: OUR_NUMBER, inbound_agent_id: agent._id } })
  if (bought.statusCode !== 201) throw new Error(bought.body)
  return agent
}

const press = (stream: MediaStream, keys: string) => { for (const key of keys) stream.sendDtmf(key) }
/** The user messages of the n-th chat request. */
const userMessages = (ctx: Ctx, n: number): string[] => ctx.openai.requests.chat[n].body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: string }) => m.content)
const chats = async (ctx: Ctx, n: number, message: string) => await poll(() => ctx.openai.requests.chat.length, (count) => count >= n, { message })
const callId = async (ctx: Ctx) => (await ctx.db.selectFrom('calls').select('id').executeTakeFirstOrThrow()).id

t.test('the caller presses keys: a run ended with # (or a pause) reaches the model as one caller turn, and the transcript keeps it', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentOnNumber(ctx, account)
  ctx.openai.replies.push({ text: 'Thank you, one moment.' }, { text: 'Got it.' })

  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const stream = await call.waitForStream()
  await agentQuiet(stream)
  const heard = stream.frames.length
  press(stream, '42#')
  await chats(ctx, 1, 'the keys are answered')
  t.same(userMessages(ctx, 0), ['(The caller pressed keys on their phone\'s keypad: 4 2 #.)'], 'the model gets the keys as a caller turn')
  await agentQuiet(stream, heard)

  // No `#`: the run ends after VOICE_KEYPAD_PAUSE_MS.
  press(stream, '78')
  await chats(ctx, 2, 'a run without # ends after the pause')
  t.same(userMessages(ctx, 1).at(-1), '(The caller pressed keys on their phone\'s keypad: 7 8.)')
  await stream.hangup()

  const done = await finishedCall(ctx.app, account.headers, await callId(ctx))
  const keyed = done.transcription.filter((i: { keypad?: string }) => i.keypad !== undefined)
  t.match(keyed, [{ speaker: 'user', content: '[keypad] 4 2 #', keypad: '42#' }, { speaker: 'user', content: '[keypad] 7 8', keypad: '78' }])
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup' })
  t.same(ctx.twilio.errors, [])
})

t.test('a keypad data_retrieval field is filled by the keys ended with #; keypad is allowed on string fields only', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: {} })).json()
  const refused = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Bank', llm_id: llm._id, data_retrieval: [{ name: 'pin', type: 'number', keypad: true }] } })
  t.equal(refused.statusCode, 400)
  t.match(refused.json(), { message: /data_retrieval\.0\.keypad is allowed only for type string/ })

  const agent = await agentOnNumber(ctx, account, {
    is_data_collection_active: true,
    data_retrieval: [{ name: 'reason', type: 'string' }, { name: 'account_number', type: 'string', keypad: true, required: true, description: 'typed on the keypad' }]
  })
  const stored = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })).json()
  t.match(stored.data_retrieval, [{ name: 'reason' }, { name: 'account_number', keypad: true }])
  t.notOk('keypad' in stored.data_retrieval[0], 'keypad is only kept where it is set')
  ctx.openai.replies.push({ text: 'Thank you.' })

  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const stream = await call.waitForStream()
  await agentQuiet(stream)
  press(stream, '12345678#')
  await chats(ctx, 1, 'the keys are answered')
  t.same(userMessages(ctx, 0), ['(The caller pressed keys on their phone\'s keypad: 1 2 3 4 5 6 7 8 #. They were saved as account_number.)'])
  await stream.hangup()
  const done = await finishedCall(ctx.app, account.headers, await callId(ctx))
  t.same(done.collected_data, { account_number: '12345678' })
})

t.test('send_dtmf: the agent presses keys; Twilio plays them (<Play digits>) and the conversation goes on on a new stream', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentOnNumber(ctx, account, {}, [['send_dtmf', { name: 'Press keys' }]])
  ctx.openai.transcripts.push('For sales, press 1. For support, press 2.', 'Support, how can I help?')
  ctx.openai.replies.push(
    // A key Twilio cannot play: refused, nothing sent, the model hears why.
    { toolCalls: [{ name: 'Press_keys', arguments: { digits: '2x' } }] },
    { toolCalls: [{ name: 'Press_keys', arguments: { digits: 'w2' } }] },
    { text: 'Hello, I am calling about an order.' }
  )

  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const first = await call.waitForStream()
  await agentQuiet(first)
  await first.sendAudio(speech(600, 700))
  const second = await call.waitForStream(1)
  t.same(call.digitsPlayed, ['w2'], 'Twilio played the keys once, the refused ones never')
  t.match(call.twiml.at(-1), /^<\?xml[^>]*><Response><Play digits="w2"\/><Connect><Stream url="wss:\/\/voice\.example\.test\/telephony\/twilio\/stream"><Parameter name="token" value="mst_[A-Za-z0-9]+"\/><\/Stream><\/Connect><\/Response>$/)
  t.match(ctx.openai.requests.chat[1].body.messages.at(-1), { role: 'tool', content: /Error: digits must be 1 to 40 of 0-9, \*, # and w/ })

  // The new stream's agent waits for the other side (no line of its own), hears it, and knows the keys went out.
  // The other side speaks at once, while the new stream's session is still starting: it is heard all the same.
  await second.sendAudio(speech(600, 700))
  await chats(ctx, 3, 'the other side is answered on the new stream')
  const messages = ctx.openai.requests.chat[2].body.messages.map((m: { content: string | null }) => m.content)
  t.match(messages.slice(-3), ['For sales, press 1. For support, press 2.', '(You sent the keys w 2 on the keypad. The other side answers next.)', 'Support, how can I help?'])
  await agentQuiet(second)
  await second.hangup()

  const done = await finishedCall(ctx.app, account.headers, await callId(ctx))
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup' })
  const tools = done.transcription.filter((i: { speaker: string }) => i.speaker === 'tool')
  t.match(tools, [{ tool: { type: 'send_dtmf', error: /digits must be/ } }, { tool: { type: 'send_dtmf', arguments: '{"digits":"w2"}', output: /The keys w 2 were sent/ } }])
  t.ok(done.transcription.some((i: { speaker: string, content: string }) => i.speaker === 'agent' && i.content === 'Hello, I am calling about an order.'), 'the agent talks on after the keys')
  t.ok(done.recording_url !== null, 'recorded across both streams')
  t.same(ctx.twilio.errors, [])
})

t.test('bad keys: 10,000 presses make one bounded turn and the call goes on; a dtmf message with a key that is none ends the stream protocol_error', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentOnNumber(ctx, account)
  ctx.openai.replies.push({ text: 'That was a lot of keys.' })

  const first = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const stream = await first.call.waitForStream()
  await agentQuiet(stream)
  press(stream, '5'.repeat(10_000) + '#')
  await chats(ctx, 1, 'the flood is answered')
  t.same(userMessages(ctx, 0), [`(The caller pressed keys on their phone's keypad: ${Array(32).fill('5').join(' ')}.)`], 'the first 32 keys, the rest dropped')
  await agentQuiet(stream)
  t.equal(ctx.openai.requests.chat.length, 1, 'one turn, not thousands')
  await stream.hangup()
  const done = await finishedCall(ctx.app, account.headers, await callId(ctx))
  t.match(done, { disconnection_reason: 'user_hangup' })
  t.same(done.transcription.filter((i: { keypad?: string }) => i.keypad !== undefined).map((i: { keypad: string }) => i.keypad), ['5'.repeat(32)])

  await ctx.db.deleteFrom('calls').execute()
  const second = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const broken = await second.call.waitForStream()
  await agentQuiet(broken)
  broken.socket.send(JSON.stringify({ event: 'dtmf', streamSid: broken.sid, sequenceNumber: '3', dtmf: { track: 'inbound_track', digit: 'x' } }))
  t.equal((await broken.closed).code, 4400)
  const failed = await finishedCall(ctx.app, account.headers, await callId(ctx))
  t.match(failed, { disconnection_reason: 'protocol_error' })
})

t.test('send_dtmf refused by Twilio: nothing is held with the call, the model hears why, the transcript says so, and the call goes on on its stream', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await agentOnNumber(ctx, account, {}, [['send_dtmf', { name: 'Press keys' }]])
  ctx.openai.transcripts.push('Press 1 for sales.', 'Are you still there?')
  ctx.openai.replies.push({ toolCalls: [{ name: 'Press_keys', arguments: { digits: '1' } }] }, { text: 'Sorry, I could not press the key.' }, { text: 'Yes, I am here.' })

  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const stream = await call.waitForStream()
  await agentQuiet(stream)
  const heard = stream.frames.length
  ctx.twilio.failNext(500, 20500, 'Internal Server Error')
  await stream.sendAudio(speech(600, 700))
  await chats(ctx, 2, 'the model is answered after the refusal')
  t.match(ctx.openai.requests.chat[1].body.messages.at(-1), { role: 'tool', content: /^Error: the keys could not be sent/ })
  t.same(call.digitsPlayed, [], 'no keys were played')
  t.match(await ctx.db.selectFrom('calls').select(['forwarding', 'call_status']).executeTakeFirstOrThrow(), { forwarding: null, call_status: 'started' })
  await agentQuiet(stream, heard)
  await stream.sendAudio(speech(600, 700))
  await chats(ctx, 3, 'the call goes on on the same stream')
  await agentQuiet(stream, heard)
  await stream.hangup()

  const done = await finishedCall(ctx.app, account.headers, await callId(ctx))
  t.equal(call.streams.length, 1, 'one stream throughout')
  t.match(done.transcription.find((i: { speaker: string }) => i.speaker === 'tool'), { content: /^Press_keys: error: the keys could not be sent/, tool: { type: 'send_dtmf', error: /could not be sent/ } })
  t.notOk('output' in done.transcription.find((i: { speaker: string }) => i.speaker === 'tool').tool)
  t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup' })
})
