import t, { type Test } from 'tap'
import { localOf } from '../../../src/modules/capabilities/booking/time.ts'
import { createAccount, setup, type Account, type TestContext } from '../../helpers/app.ts'
import { calendarPart } from '../../helpers/calendar-mail.ts'
import { startOpenAiHttpStandin } from '../../helpers/openai-http-standin.ts'
import { startRealtimeStandin } from '../../helpers/realtime-standin.ts'
import { startInbox, type Inbox } from '../../helpers/smtp.ts'
import { finishedCall, openWebCall, typedTurn } from '../../helpers/voice-client.ts'

// A web call in which the model finds a free time and books it with the built-in appointment_booking tool, on both
// engines (the cascade's chat completions and the realtime session), through the real WebSocket: the appointment
// is stored with the call and its contact, the transcript holds the tool events, the e-mails carry the .ics.

const DAY = 86_400_000
const ENV = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true' }
const ZONE = 'Europe/Berlin'

async function bookingAgent (ctx: TestContext, account: Account, engine?: 'realtime') {
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello, dental practice.', general_prompt: 'You book appointments.', ...(engine === undefined ? {} : { engine }) } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Front desk', llm_id: llm._id } })).json()
  const every = [{ from: '09:00', to: '17:00' }]
  const tool = await ctx.app.inject({
    method: 'POST',
    url: `/v1/agent/${agent._id}/tools`,
    headers: account.headers,
    payload: { tool_type: 'appointment_booking', settings: { name: 'dentist', time_zone: ZONE, duration_minutes: 30, notify_email: 'desk@example.com', opening_hours: Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((day) => [day, every])) } }
  })
  if (tool.statusCode !== 201) throw new Error(tool.body)
  return agent._id as string
}

/** A day three days ahead in the tool's zone: always bookable, whatever day the test runs. */
const dayAhead = () => localOf(new Date(Date.now() + 3 * DAY), ZONE).slice(0, 10)

async function callWith (ctx: TestContext & { url: string }, account: Account, agentId: string) {
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agentId, dynamic_context: { customer_phone: '+4930123456' } } })).json()
  const client = await openWebCall(ctx.url, call.access_token)
  await client.waitFor('transcript', (e) => e.speaker === 'agent')
  return { callId: call._id as string, client }
}

async function checkBooked (t: Test, ctx: TestContext, account: Account, inbox: Inbox, callId: string, day: string) {
  const done = await finishedCall(ctx.app, account.headers, callId)
  const tools = done.transcription.filter((item: { speaker: string }) => item.speaker === 'tool')
  t.match(tools.map((item: { tool: object }) => item.tool), [
    { name: 'dentist_find_times', type: 'appointment_booking', output: /"start":"[^"]+T10:00"/ },
    { name: 'dentist_book', type: 'appointment_booking', output: /"booked":\{"booking_id":"[0-9a-f]{24}","start":"[^"]+T10:00"/ }
  ], 'each function run is a tool event of the transcript')
  const list = (await ctx.app.inject({ method: 'GET', url: `/v1/appointments?call_id=${callId}`, headers: account.headers })).json()
  t.equal(list.total, 1)
  t.match(list.data[0], { call_id: callId, contact_id: done.contact_id, name: 'Ada Lovelace', email: 'ada@example.com', phone: '+4930123456', time_zone: ZONE, status: 'booked' }, 'stored with the call and its contact')
  t.equal(localOf(new Date(list.data[0].starts_at), ZONE), `${day}T10:00`)
  const mails = await inbox.waitFor(2)
  t.same(mails.map((mail) => mail.to[0]).sort(), ['ada@example.com', 'desk@example.com'])
  t.ok(mails.every((mail) => calendarPart(mail).props.UID === `${list.data[0]._id}@switchboard`), 'each with the .ics')
}

t.test('cascade engine: the model finds a free time, books it, and says so', async (t) => {
  const standin = await startOpenAiHttpStandin(t)
  const inbox = await startInbox(t)
  const ctx = await setup(t, { ...ENV, VOICE_ENGINE: 'cascade', STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url, SMTP_URL: inbox.url }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const agentId = await bookingAgent(ctx, account)
  const day = dayAhead()
  standin.replies.push(
    { toolCalls: [{ name: 'dentist_find_times', arguments: { from: `${day}T09:00`, to: `${day}T12:00` } }] },
    { text: 'I have 10 in the morning free.' },
    { toolCalls: [{ name: 'dentist_book', arguments: { start: `${day}T10:00`, name: 'Ada Lovelace', email: 'ada@example.com' } }] },
    { text: 'You are booked.' }
  )
  const { callId, client } = await callWith({ ...ctx, url }, account, agentId)
  await typedTurn(client, 'Do you have time in the morning?', /10 in the morning/)
  const first = standin.requests.chat[0].body
  t.match(first.messages[0], { role: 'system', content: /Now it is .* in Europe\/Berlin/ }, 'the prompt tells the model today in the tool\'s zone')
  t.same(first.tools.map((tool: { function: { name: string } }) => tool.function.name), ['dentist_find_times', 'dentist_book', 'dentist_find_booking', 'dentist_reschedule', 'dentist_cancel'])
  const answer = JSON.parse(standin.requests.chat[1].body.messages.at(-1).content)
  t.match(answer, { time_zone: ZONE, free_times: [{ start: `${day}T09:00` }, { start: `${day}T09:30` }, { start: `${day}T10:00` }] }, 'the model reads the free times in local time')
  t.match(answer.free_times[2].spoken, /10:00 AM$/)
  await typedTurn(client, 'Ten please, I am Ada Lovelace, ada@example.com.', /You are booked/)
  client.hangup()
  await checkBooked(t, ctx, account, inbox, callId, day)
})

t.test('realtime engine: the same booking through the realtime session', async (t) => {
  const standin = await startRealtimeStandin(t)
  const inbox = await startInbox(t)
  const ctx = await setup(t, { ...ENV, VOICE_ENGINE: 'cascade', REALTIME_URL: standin.url, REALTIME_API_KEY: 'sk-realtime-test', SMTP_URL: inbox.url }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const agentId = await bookingAgent(ctx, account, 'realtime')
  const day = dayAhead()
  standin.replies.push(
    { calls: [{ name: 'dentist_find_times', arguments: JSON.stringify({ from: `${day}T09:00`, to: `${day}T12:00` }) }] },
    { text: 'I have 10 in the morning free.' },
    { calls: [{ name: 'dentist_book', arguments: JSON.stringify({ start: `${day}T10:00`, name: 'Ada Lovelace', email: 'ada@example.com' }) }] },
    { text: 'You are booked.' }
  )
  const { callId, client } = await callWith({ ...ctx, url }, account, agentId)
  const update = standin.events.find((e) => e.type === 'session.update') as any
  t.match(update.session.instructions, /Now it is .* in Europe\/Berlin/)
  t.same(update.session.tools.map((tool: { name: string }) => tool.name), ['dentist_find_times', 'dentist_book', 'dentist_find_booking', 'dentist_reschedule', 'dentist_cancel'])
  await typedTurn(client, 'Do you have time in the morning?', /10 in the morning/)
  await typedTurn(client, 'Ten please, I am Ada Lovelace, ada@example.com.', /You are booked/)
  const outputs = standin.events.filter((e: any) => e.type === 'conversation.item.create' && e.item?.type === 'function_call_output').map((e: any) => JSON.parse(e.item.output))
  t.match(outputs, [{ free_times: [{ start: `${day}T09:00` }] }, { booked: { start: `${day}T10:00` } }], 'the answers went back as function outputs')
  client.hangup()
  await checkBooked(t, ctx, account, inbox, callId, day)
})
