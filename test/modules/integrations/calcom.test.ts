import t, { type Test } from 'tap'
import { createLogger } from '../../../src/logger.ts'
import { createMailer } from '../../../src/mail/mailer.ts'
import { localOf, zonedToUtc } from '../../../src/modules/capabilities/booking/time.ts'
import { loadAgentLive } from '../../helpers/live.ts'
import { connectionOf } from '../../../src/modules/integrations/client.ts'
import { PROVIDER_INFO } from '../../../src/modules/integrations/providers.ts'
import { connectIntegration, integrationOf } from '../../../src/modules/integrations/queries.ts'
import { createAccount, setup, type Account, type TestContext } from '../../helpers/app.ts'
import { ConsoleClient, createConsoleUser, csrfOf, PASSWORD } from '../../helpers/console-client.ts'
import { BOOKINGS_VERSION, SLOTS_VERSION, startCalcomStandIn, type CalcomStandIn } from '../../helpers/calcom-standin.ts'
import { startOpenAiHttpStandin, type OpenAiHttpStandin } from '../../helpers/openai-http-standin.ts'
import { startRealtimeStandin } from '../../helpers/realtime-standin.ts'
import { finishedCall, startWebCall, typedTurn } from '../../helpers/voice-client.ts'

// booking_one against Cal.com's API v2, through the real protocols: the API connects the account with an API key,
// a cascade (or realtime) web call's model calls the tool's functions, the tool reaches the Cal.com stand-in, and
// the answers go back to the model and into the transcript.

const ENV = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIME_SCALE: '0.001' }
const KEY = 'cal_live_5b0d3c0ffee'
const ZONE = 'Europe/Berlin'
const TYPE = 101
const DAY = 86_400_000

/** Three days ahead, 09:00, 09:30 and 10:00 in Berlin: the event type's open times. */
function openings (): Date[] {
  const day = new Date(Date.now() + 3 * DAY).toISOString().slice(0, 10)
  return ['09:00', '09:30', '10:00'].map((hm) => zonedToUtc(`${day}T${hm}`, ZONE))
}

interface Booked extends TestContext { url: string, standin: OpenAiHttpStandin, cal: CalcomStandIn, account: Account, agent: { _id: string }, slots: Date[], fn: (what: string) => string }

async function booked (t: Test, env: Record<string, string> = {}): Promise<Booked> {
  const cal = await startCalcomStandIn(t)
  cal.apiKeys.add(KEY)
  const slots = openings()
  cal.addEventType({ id: TYPE, slug: 'consultation', title: 'Consultation', lengthInMinutes: 30, openings: slots })
  const standin = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, { ...ENV, VOICE_ENGINE: 'cascade', STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url, CALCOM_API_URL: cal.apiUrl, ...env }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const connected = await ctx.app.inject({ method: 'PUT', url: '/v1/integrations/booking_one', headers: account.headers, payload: { api_key: KEY } })
  t.equal(connected.statusCode, 200, connected.body)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi!', general_prompt: 'You are the clinic.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: llm._id } })).json()
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id as string}/tools`, headers: account.headers, payload: { tool_type: 'booking_one', settings: { name: 'Cal', event_type_id: String(TYPE), time_zone: ZONE } } })
  t.equal(tool.statusCode, 201, tool.body)
  return { ...ctx, url, standin, cal, account, agent, slots, fn: (what) => `Cal_${what}` }
}

const local = (date: Date) => localOf(date, ZONE)
const toolMessages = (standin: OpenAiHttpStandin) => standin.requests.chat.flatMap((r) => r.body.messages).filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => m.content)
const lastToolMessage = (standin: OpenAiHttpStandin) => toolMessages(standin).at(-1) ?? ''

t.test('connecting: the account check (GET /v2/me) names the account; a key Cal.com refuses is revoked; an active tool needs the connection', async (t) => {
  const ctx = await booked(t)
  const log = createLogger(ctx.config)
  // PUT /v1/integrations/booking_one checked the key once (GET /v2/me) and named the account after it.
  const listed = (await ctx.app.inject({ method: 'GET', url: '/v1/integrations', headers: ctx.account.headers })).json()
  t.match(listed.find((i: { provider: string }) => i.provider === 'booking_one'), { connected: true, status: 'connected', account_label: 'Ada Clinic' })
  const me = ctx.cal.requests.filter((r) => r.path === '/v2/me')
  t.equal(me.length, 1)
  t.equal(me[0].headers.authorization, `Bearer ${KEY}`)

  ctx.cal.apiKeys.delete(KEY)
  const refused = await PROVIDER_INFO.booking_one.account(await connectionOf({ db: ctx.db, config: ctx.config, log }, ctx.account.user.id, 'booking_one')).catch((err: unknown) => err)
  t.match(refused, { reason: 'revoked', message: /Cal.com refused/ }, 'a refused key is a revoked connection')
  const list = (await ctx.app.inject({ method: 'GET', url: '/v1/integrations', headers: ctx.account.headers })).json()
  t.match(list.find((i: { provider: string }) => i.provider === 'booking_one'), { connected: false, status: 'revoked', status_reason: /Cal.com answered 401/ }, 'and listed so')

  const other = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: other.headers, payload: {} })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: other.headers, payload: { agent_name: 'Other', llm_id: llm._id } })).json()
  const notConnected = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id as string}/tools`, headers: other.headers, payload: { tool_type: 'booking_one', settings: { name: 'Cal', event_type_id: String(TYPE), time_zone: ZONE } } })
  t.match({ statusCode: notConnected.statusCode, ...notConnected.json() }, { statusCode: 409, code: 'integration_not_connected' })
  const badId = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${ctx.agent._id}/tools`, headers: ctx.account.headers, payload: { tool_type: 'booking_one', settings: { name: 'Cal2', event_type_id: 'consultation', time_zone: ZONE } } })
  t.match({ statusCode: badId.statusCode, ...badId.json() }, { statusCode: 400, message: /event_type_id/ }, 'Cal.com\'s event type id is a number')
})

t.test('a call: the model finds free times in Cal.com\'s own availability and books one; Cal.com gets the attendee and the call', async (t) => {
  const ctx = await booked(t)
  const [first, second] = ctx.slots
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('find_times'), arguments: { from: local(new Date(first.getTime() - 3_600_000)), to: local(new Date(first.getTime() + 4 * 3_600_000)) } }] },
    { text: 'I have three times that morning.' },
    { toolCalls: [{ name: ctx.fn('book'), arguments: { start: local(second), name: 'Grace Hopper', email: 'grace@example.com' } }] },
    { text: 'You are booked.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'When can I come in?', /three times/)
  const slotsRequest = ctx.cal.requests.find((r) => r.path === '/v2/slots')!
  t.equal(slotsRequest.headers['cal-api-version'], SLOTS_VERSION)
  t.equal(slotsRequest.query.get('eventTypeId'), String(TYPE))
  t.equal(slotsRequest.query.get('timeZone'), ZONE)
  t.equal(slotsRequest.headers.authorization, `Bearer ${KEY}`)
  const found = JSON.parse(lastToolMessage(ctx.standin))
  t.same(found.free_times.map((f: { start: string }) => f.start), ctx.slots.map(local), 'Cal.com\'s open times, in Berlin wall-clock time')
  t.equal(found.time_zone, ZONE)

  await typedTurn(client, 'The second one, please. Grace Hopper, grace@example.com.', /booked/)
  const create = ctx.cal.requests.find((r) => r.method === 'POST' && r.path === '/v2/bookings')!
  t.equal(create.headers['cal-api-version'], BOOKINGS_VERSION)
  t.match(create.body, { start: second.toISOString(), eventTypeId: TYPE, attendee: { name: 'Grace Hopper', email: 'grace@example.com', timeZone: ZONE }, metadata: { switchboard_call_id: callId } })
  t.equal(ctx.cal.bookings.length, 1)
  t.match(ctx.cal.bookings[0], { status: 'accepted', start: second.toISOString(), attendees: [{ email: 'grace@example.com' }] })
  t.match(JSON.parse(lastToolMessage(ctx.standin)), { booked: { booking_id: ctx.cal.bookings[0].uid, start: local(second) } }, 'the model gets the booking')
  client.hangup()

  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  const tools = done.transcription.filter((item: { speaker: string }) => item.speaker === 'tool')
  t.equal(tools.length, 2, 'each request a tool item')
  t.match(tools[1], { tool: { name: ctx.fn('book'), type: 'booking_one' } })
})

t.test('a call: the caller\'s booking found by e-mail, moved to another time, then cancelled', async (t) => {
  const ctx = await booked(t)
  const [first, , third] = ctx.slots
  const existing = ctx.cal.book(TYPE, first, { name: 'Grace Hopper', email: 'grace@example.com', timeZone: ZONE })
  ctx.cal.book(TYPE, new Date(first.getTime() + 30 * 60_000), { name: 'Someone Else', email: 'else@example.com', timeZone: ZONE })
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('find_booking'), arguments: { email: 'grace@example.com' } }] },
    { text: 'I found your booking.' },
    { toolCalls: [{ name: ctx.fn('reschedule'), arguments: { booking_id: existing.uid, start: local(third) } }] },
    { text: 'It is moved.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'I have a booking, grace@example.com.', /found your booking/)
  const list = ctx.cal.requests.find((r) => r.method === 'GET' && r.path === '/v2/bookings')!
  t.equal(list.query.get('attendeeEmail'), 'grace@example.com')
  t.equal(list.query.get('status'), 'upcoming')
  t.match(lastToolMessage(ctx.standin), existing.uid, 'the model gets the booking id')
  t.notMatch(lastToolMessage(ctx.standin), /Someone Else/)

  await typedTurn(client, 'Move it to ten, please.', /moved/)
  const moved = ctx.cal.bookings.find((b) => b.rescheduledFromUid === existing.uid)
  t.ok(moved, 'Cal.com made the new booking')
  t.equal(moved?.start, third.toISOString())
  t.equal(existing.status, 'cancelled')
  t.equal(existing.rescheduledToUid, moved?.uid)

  ctx.standin.replies.push({ toolCalls: [{ name: ctx.fn('cancel'), arguments: { booking_id: moved!.uid, reason: 'Feeling better' } }] }, { text: 'It is cancelled.' })
  await typedTurn(client, 'Actually, cancel it.', /cancelled/)
  t.equal(moved?.status, 'cancelled')
  t.equal(moved?.cancellationReason, 'Feeling better')
  client.hangup()
  await finishedCall(ctx.app, ctx.account.headers, callId)
})

t.test('a slot taken meanwhile: the model hears it is taken, nothing is booked for the caller, the call goes on', async (t) => {
  const ctx = await booked(t)
  ctx.cal.takeNextSlot = true
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('book'), arguments: { start: local(ctx.slots[0]), name: 'Grace Hopper', email: 'grace@example.com' } }] },
    { text: 'Sorry, that time was just taken.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'Book nine for me.', /just taken/)
  t.match(JSON.parse(lastToolMessage(ctx.standin)), { booked: null, problem: /taken/, free_times: [{ start: local(ctx.slots[1]) }, { start: local(ctx.slots[2]) }] }, 'told it was taken, offered the others')
  t.same(ctx.cal.bookings.map((b) => b.attendees[0].email), ['other@example.org'], 'only the other caller holds the slot')
  t.ok(ctx.cal.requests.some((r) => r.method === 'POST' && r.path === '/v2/bookings'), 'Cal.com was asked and answered its error')
  client.hangup()
  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  t.equal(done.transcription.at(-1).speaker, 'agent', 'the call went on')
})

t.test('a revoked key: reported to the model, the integration marked, the call goes on', async (t) => {
  const ctx = await booked(t)
  ctx.cal.apiKeys.delete(KEY)
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('find_times'), arguments: { from: local(ctx.slots[0]), to: local(ctx.slots[2]) } }] },
    { text: 'I cannot reach the calendar right now.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'When are you free?', /cannot reach/)
  t.match(lastToolMessage(ctx.standin), /^Error: Cal.com refused this account's connection .*connected again/)
  t.match(await integrationOf(ctx.db, ctx.account.user.id, 'booking_one'), { status: 'revoked' }, 'the integration is marked')
  client.hangup()
  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  t.equal(done.transcription.at(-1).speaker, 'agent', 'the call went on')
  t.match(done.transcription.find((item: { speaker: string }) => item.speaker === 'tool'), { tool: { type: 'booking_one', error: /./ } })
})

t.test('a 429 is retried once after Retry-After; two in a row reach the model as a rate limit', async (t) => {
  const ctx = await booked(t)
  const tooMany = { status: 429, headers: { 'retry-after': '0' }, body: { status: 'error', timestamp: new Date().toISOString(), path: '/v2/slots', error: { code: 'ThrottlerException', message: 'ThrottlerException: Too Many Requests' } } }
  ctx.cal.queued.push(tooMany)
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('find_times'), arguments: { from: local(ctx.slots[0]), to: local(ctx.slots[2]) } }] },
    { text: 'Here are the times.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'When are you free?', /Here are the times/)
  t.equal(ctx.cal.requests.filter((r) => r.path === '/v2/slots').length, 2, 'asked twice')
  t.notMatch(lastToolMessage(ctx.standin), /^Error/, 'the retry answered')

  ctx.cal.queued.push(tooMany, tooMany)
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('find_times'), arguments: { from: local(ctx.slots[0]), to: local(ctx.slots[2]) } }] },
    { text: 'The calendar is busy, one moment.' }
  )
  await typedTurn(client, 'And again?', /calendar is busy/)
  t.equal(ctx.cal.requests.filter((r) => r.path === '/v2/slots').length, 4, 'one retry, no more')
  t.match(lastToolMessage(ctx.standin), /^Error: Cal.com is busy .*not answering right now/)
  client.hangup()
  await finishedCall(ctx.app, ctx.account.headers, callId)
})

t.test('without the caller\'s e-mail address the booking is not attempted: the model is told to ask for it', async (t) => {
  const ctx = await booked(t)
  const log = createLogger(ctx.config)
  const context = { db: ctx.db, config: ctx.config, log, mailer: createMailer(ctx.db, ctx.config, log), userId: ctx.account.user.id, callId: 'c1', signal: new AbortController().signal, variables: () => ({}), language: 'en-US', customer: { phone: '+4915112345678', email: null } }
  const loaded = await loadAgentLive(context, ctx.agent._id)
  t.teardown(loaded.close)
  const book = loaded.tools.find((tool) => tool.spec.name === ctx.fn('book'))!
  await t.rejects(book.run({ start: local(ctx.slots[0]), name: 'Grace Hopper' }, context), /e-mail/)
  t.notOk(ctx.cal.requests.some((r) => r.method === 'POST' && r.path === '/v2/bookings'), 'nothing sent to Cal.com')
})

t.test('a caller known only by phone: their bookings are found by the number Cal.com stored, across pages', async (t) => {
  const ctx = await booked(t)
  const start = ctx.slots[0].getTime()
  // 130 bookings of others (pages of 100), one of the caller's on the second page.
  const type = ctx.cal.eventTypes.get(TYPE)!
  for (let i = 0; i < 131; i++) type.openings.push(new Date(start + (i + 3) * 30 * 60_000))
  for (let i = 0; i < 130; i++) ctx.cal.book(TYPE, new Date(start + (i + 3) * 30 * 60_000), { name: `Other ${i}`, email: `other${i}@example.com`, timeZone: ZONE, phoneNumber: `+49151000${String(i).padStart(4, '0')}` })
  const mine = ctx.cal.book(TYPE, new Date(start + 133 * 30 * 60_000), { name: 'Grace Hopper', email: 'grace@example.com', timeZone: ZONE, phoneNumber: '+4915112345678' })
  const log = createLogger(ctx.config)
  const context = { db: ctx.db, config: ctx.config, log, mailer: createMailer(ctx.db, ctx.config, log), userId: ctx.account.user.id, callId: 'c2', signal: new AbortController().signal, variables: () => ({}), language: 'en-US', customer: { phone: '+49 151 12345678', email: null } }
  const loaded = await loadAgentLive(context, ctx.agent._id)
  t.teardown(loaded.close)
  const find = loaded.tools.find((tool) => tool.spec.name === ctx.fn('find_booking'))!
  const outcome = await find.run({}, context)
  t.match(outcome.output, mine.uid)
  t.notMatch(outcome.output, /Other/)
  const lists = ctx.cal.requests.filter((r) => r.method === 'GET' && r.path === '/v2/bookings')
  t.same(lists.map((r) => r.query.get('skip')), ['0', '100'], 'two pages read')
  t.notOk(lists.some((r) => r.query.has('attendeeEmail')), 'no e-mail filter without an address')
})

t.test('realtime engine: the booking functions in session.update, the model books, Cal.com gets it', async (t) => {
  const cal = await startCalcomStandIn(t)
  cal.apiKeys.add(KEY)
  const slots = openings()
  cal.addEventType({ id: TYPE, slug: 'consultation', title: 'Consultation', lengthInMinutes: 30, openings: slots })
  const standin = await startRealtimeStandin(t)
  const ctx = await setup(t, { ...ENV, VOICE_ENGINE: 'cascade', REALTIME_URL: standin.url, REALTIME_API_KEY: 'sk-realtime-test', CALCOM_API_URL: cal.apiUrl }, { workers: true })
  const listening = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  t.equal((await ctx.app.inject({ method: 'PUT', url: '/v1/integrations/booking_one', headers: account.headers, payload: { api_key: KEY } })).statusCode, 200)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi!', engine: 'realtime' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: llm._id } })).json()
  t.equal((await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id as string}/tools`, headers: account.headers, payload: { tool_type: 'booking_one', settings: { name: 'Cal', event_type_id: String(TYPE), time_zone: ZONE } } })).statusCode, 201)
  standin.replies.push({ calls: [{ name: 'Cal_book', arguments: JSON.stringify({ start: local(slots[1]), name: 'Grace Hopper', email: 'grace@example.com' }) }] }, { text: 'You are booked.' })

  const { callId, client } = await startWebCall(ctx.app, listening, account.headers, agent._id)
  const update = standin.events.find((e) => e.type === 'session.update') as any
  t.match(update.session.tools.map((tool: { name: string }) => tool.name), ['Cal_find_times', 'Cal_book', 'Cal_find_booking', 'Cal_reschedule', 'Cal_cancel'])
  await typedTurn(client, 'Book me at nine thirty, Grace Hopper, grace@example.com.', /booked/)
  t.equal(cal.bookings.length, 1)
  t.match(cal.bookings[0], { start: slots[1].toISOString(), attendees: [{ email: 'grace@example.com', name: 'Grace Hopper' }] })
  const outputs = standin.events.filter((e: any) => e.type === 'conversation.item.create' && e.item?.type === 'function_call_output').map((e: any) => String(e.item.output))
  t.equal(outputs.length, 1)
  t.notMatch(outputs[0], /^Error/)
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done.transcription.find((item: { speaker: string }) => item.speaker === 'tool'), { tool: { type: 'booking_one' } })
})

t.test('the console: a Cal.com booking tool is offered, added through its form once Cal.com is connected, refused before', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const created = await browser.submit('/agents/new', '/agents', { agent_name: 'Clinic', begin_message: '', general_prompt: 'Be kind.', language: 'en-US', voice_id: '65a0f0000000000000000001', webhook_url: '', status: 'active' })
  const agentId = /^\/agents\/([0-9a-f]{24})/.exec(String(created.headers.location))![1]
  t.match((await browser.get(`/agents/${agentId}`)).body, '<option value="booking_one">', 'offered')
  const add = async () => {
    const page = await browser.get(`/agents/${agentId}/tools/new?type=booking_one`)
    t.equal(page.statusCode, 200, 'a form')
    return await browser.post(`/agents/${agentId}/tools`, { csrf_token: csrfOf(page.body), type: 'booking_one', 'settings.name': 'Cal', 'settings.event_type_id': String(TYPE), 'settings.time_zone': ZONE, is_active: 'true' })
  }
  const sent = await add()
  t.equal(sent.statusCode, 303, 'refused: back to the form (Post/Redirect/Get)')
  const refused = await browser.get(String(sent.headers.location).replace(/#.*$/, ''))
  t.match(refused.body, 'connect it first')
  await connectIntegration(ctx.db, user.id, 'booking_one', { account_label: 'Ada Clinic', method: 'api_key', credentials: { api_key: KEY } })
  t.equal((await add()).statusCode, 303, 'added')
  t.match(await ctx.db.selectFrom('agent_tools').select(['tool_type', 'settings']).where('agent_id', '=', agentId).execute(), [{ tool_type: 'booking_one', settings: { name: 'Cal', event_type_id: String(TYPE), time_zone: ZONE } }])
})
