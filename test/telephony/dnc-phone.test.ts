import t from 'tap'
import { createAccount } from '../helpers/app.ts'
import { poll } from '../helpers/poll.ts'
import { CALLER, listenWithTwilio, OUR_NUMBER, say } from '../helpers/twilio-phone.ts'
import { finishedCall } from '../helpers/voice-client.ts'

// The do_not_call tool on a phone call (docs/contacts.md, "Do not call"), end to end on loopback as
// twilio-calls.test.ts does it: a person calls the account's Twilio number, asks not to be called again, the model
// (the OpenAI-compatible stand-in) calls the tool, the caller's number is listed with the call, and a later
// make-phone-call to it is refused.

const listen = listenWithTwilio

t.test('a caller asks not to be called again: their number is listed with the call, and make-phone-call to it answers 409 do_not_call', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello, this is the clinic.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: llm._id } })).json()
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id as string}/tools`, headers: account.headers, payload: { tool_type: 'do_not_call', settings: { name: 'Do not call' } } })
  t.equal(tool.statusCode, 201, tool.body)
  const bought = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: OUR_NUMBER, inbound_agent_id: agent._id, outbound_agent_id: agent._id } })
  t.equal(bought.statusCode, 201, bought.body)

  ctx.openai.transcripts.push('Please never call me again.')
  ctx.openai.replies.push({ toolCalls: [{ name: 'Do_not_call', arguments: {} }] }, { text: 'Done, we will not call you again.' })
  const { call } = await ctx.twilio.dialIn(CALLER, OUR_NUMBER)
  const stream = await call.waitForStream()
  await say(stream)
  const listed = await poll(async () => (await ctx.app.inject({ method: 'GET', url: '/v1/dnc', headers: account.headers })).json(), (body) => body.data.length === 1, { message: 'the caller was not listed' })
  const [stored] = await ctx.db.selectFrom('calls').select('id').execute()
  t.match(listed.data, [{ phone_number: CALLER, source: 'call', call_id: stored.id }], 'the caller\'s number, with the call')
  t.match(ctx.openai.requests.chat[1].body.messages.at(-1), { role: 'tool', content: /\+14155550199 is on the do-not-call list/ })
  await stream.hangup()
  await finishedCall(ctx.app, account.headers, stored.id)

  const refused = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: CALLER } })
  t.equal(refused.statusCode, 409)
  t.equal(refused.json().code, 'do_not_call')
  t.equal(ctx.twilio.calls.filter((c) => c.direction === 'outbound-api').length, 0, 'Twilio was not asked to call them')
})
