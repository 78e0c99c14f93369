import t, { type Test } from 'tap'
import { createLogger } from '../../../src/logger.ts'
import { localOf, nextDay, weekdayOf, zonedToUtc } from '../../../src/modules/capabilities/booking/time.ts'
import { connectionOf } from '../../../src/modules/integrations/client.ts'
import { PROVIDER_INFO } from '../../../src/modules/integrations/providers.ts'
import { integrationOf } from '../../../src/modules/integrations/queries.ts'
import { connectThroughApi } from '../../helpers/oauth-connect.ts'
import { createAccount, setup, type Account, type TestContext } from '../../helpers/app.ts'
import { startGraphStandIn, type GraphStandIn } from '../../helpers/graph-standin.ts'
import { startOpenAiHttpStandin, type OpenAiHttpStandin } from '../../helpers/openai-http-standin.ts'
import { startRealtimeStandin } from '../../helpers/realtime-standin.ts'
import { finishedCall, openWebCall, startWebCall, typedTurn } from '../../helpers/voice-client.ts'

// The calendar_two tool (Microsoft Outlook through Microsoft Graph) during calls, through the real protocols: a web
// call over the browser WebSocket, the model (the OpenAI HTTP or Realtime stand-in) calling the tool's functions, the
// adapter talking to the Graph stand-in (test/helpers/graph-standin.ts) with tokens from its OAuth server.

const ZONE = 'America/New_York'
const SETTINGS = { name: 'Outlook', calendar_id: 'primary', time_zone: ZONE, duration_minutes: 30 }

/** A weekday (in the tool's zone) at least three days ahead: inside the default opening hours and notice. */
function bookableDay (): string {
  let day = localOf(new Date(Date.now() + 3 * 86_400_000), ZONE).slice(0, 10)
  while ([0, 6].includes(weekdayOf(zonedToUtc(`${day}T12:00`, ZONE), ZONE))) day = nextDay(day)
  return day
}

const at = (day: string, time: string) => zonedToUtc(`${day}T${time}`, ZONE)

interface Outlook extends TestContext { url: string, graph: GraphStandIn, account: Account, agentId: string, label: string }

/**
 * The app with the Graph stand-in configured, an account connected to it through the API's OAuth flow (the
 * authorization URL, Allow on Microsoft's page, the callback, whose account check is GET /me), and an agent with the
 * calendar_two tool.
 */
async function outlook (t: Test, env: Record<string, string>, llm: Record<string, unknown> = {}): Promise<Outlook> {
  const graph = await startGraphStandIn(t)
  const ctx = await setup(t, { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', VOICE_ENGINE: 'cascade', ...graph.env, ...env }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  await connectThroughApi(ctx.app, account.headers, 'calendar_two')
  const label = (await integrationOf(ctx.db, account.user.id, 'calendar_two'))!.account_label
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello!', general_prompt: 'You book appointments.', ...llm } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Front desk', llm_id: config._id } })).json()
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'calendar_two', settings: SETTINGS } })
  t.equal(tool.statusCode, 201, tool.body)
  return { ...ctx, url, graph, account, agentId: agent._id, label }
}

async function cascade (t: Test, env: Record<string, string> = {}): Promise<Outlook & { standin: OpenAiHttpStandin }> {
  const standin = await startOpenAiHttpStandin(t)
  return { ...await outlook(t, { STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url, ...env }), standin }
}

/** The tool items of a finished call's transcript. */
async function toolItems (ctx: Outlook, callId: string): Promise<Array<{ name: string, type: string, output?: string, error?: string }>> {
  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  return done.transcription.filter((item: { speaker: string }) => item.speaker === 'tool').map((item: { tool: any }) => item.tool)
}

const json = (output: string | undefined) => JSON.parse(output ?? 'null')

t.test('connect: the account check names the Microsoft account (GET /me with the access token)', async (t) => {
  const ctx = await cascade(t)
  t.equal(ctx.label, 'Megan Bowen (MeganB@contoso.com)')
  const me = ctx.graph.requests.find((r) => r.path === '/v1.0/me')
  t.ok(me, 'GET /me was asked')
  t.equal(me?.authorization, `Bearer ${ctx.graph.oauth.accessTokens()[0].token}`)

  ctx.graph.user.mail = null
  ctx.graph.user.userPrincipalName = 'megan@outlook.com'
  const deps = { db: ctx.db, config: ctx.config, log: createLogger(ctx.config) }
  t.equal(await PROVIDER_INFO.calendar_two.account(await connectionOf(deps, ctx.account.user.id, 'calendar_two')), 'Megan Bowen (megan@outlook.com)', 'an account without a mailbox address: its sign-in name')
})

t.test('a call finds free times around busy events (across pages, in the agent\'s zone), books one, finds it, moves it and cancels it', async (t) => {
  const ctx = await cascade(t)
  const day = bookableDay()
  ctx.graph.pageSize = 2
  ctx.graph.busy(at(day, '12:00'), at(day, '12:30'))
  ctx.graph.busy(at(day, '12:30'), at(day, '13:00'), { showAs: 'tentative' })
  ctx.graph.busy(at(day, '14:00'), at(day, '14:30'), { showAs: 'oof' })
  ctx.graph.busy(at(day, '15:00'), at(day, '16:00'), { showAs: 'free', subject: 'Shown as free' })
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Outlook_find_times', arguments: { from: `${day}T12:00`, to: `${day}T17:00` } }] },
    { text: 'I have one o\'clock free.' },
    { toolCalls: [{ name: 'Outlook_book', arguments: { start: `${day}T13:00`, name: 'Jane Doe', email: 'Jane@Example.com', notes: 'First visit' } }] },
    { text: 'You are booked.' }
  )

  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agentId)
  await typedTurn(client, 'Can I come in that afternoon?', /one o'clock/)
  const view = ctx.graph.requests.filter((r) => r.path === '/v1.0/me/calendar/calendarView')
  t.ok(view.length >= 2 && view.some((r) => r.query.has('$skip')), 'the calendar view was read page by page, following @odata.nextLink')
  t.match(view[0].prefer, /outlook\.timezone="UTC"/)
  t.equal(view[0].query.get('startDateTime'), at(day, '12:00').toISOString(), 'the search window is the local afternoon as an instant')

  await typedTurn(client, 'One o\'clock please. Jane Doe, jane@example.com.', /booked/)
  const event = ctx.graph.events.find((e) => e.subject === 'Jane Doe')
  t.ok(event, 'the event is in the calendar')
  t.equal(event?.start.toISOString(), at(day, '13:00').toISOString(), '13:00 in New York')
  t.equal(localOf(event!.start, ZONE), `${day}T13:00`)
  t.not(event?.start.getUTCHours(), 13, 'not 13:00 UTC')
  t.equal(event!.end.getTime() - event!.start.getTime(), 30 * 60_000)
  t.same(event?.attendees, [{ type: 'required', emailAddress: { address: 'Jane@Example.com', name: 'Jane Doe' } }], 'the caller is invited')
  t.match(event?.body.content, /Jane Doe[\s\S]*E-mail: Jane@Example.com[\s\S]*Notes: First visit/)
  t.same([...event!.properties.values()], ['jane@example.com'], 'the caller\'s e-mail kept for finding the booking again')

  // The same caller comes back: finds the booking by e-mail, moves it past the busy 14:00, then cancels it.
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Outlook_find_booking', arguments: { email: 'jane@example.com' } }] },
    { text: 'I see your appointment.' },
    { toolCalls: [{ name: 'Outlook_reschedule', arguments: { booking_id: event!.id, start: `${day}T14:30` } }] },
    { text: 'Moved to half past two.' },
    { toolCalls: [{ name: 'Outlook_cancel', arguments: { booking_id: event!.id, reason: 'ill' } }] },
    { text: 'It is cancelled.' }
  )
  await typedTurn(client, 'Do I have an appointment?', /I see your appointment/)
  await typedTurn(client, 'Move it to 2:30.', /half past two/)
  t.equal(localOf(event!.start, ZONE), `${day}T14:30`, 'the event moved (PATCH)')
  t.equal(event!.end.getTime() - event!.start.getTime(), 30 * 60_000)
  await typedTurn(client, 'Actually cancel it.', /cancelled/)
  t.notOk(ctx.graph.events.includes(event!), 'the event is gone (DELETE)')
  t.ok(ctx.graph.requests.some((r) => r.method === 'DELETE' && r.path === `/v1.0/me/events/${encodeURIComponent(event!.id)}`))
  client.hangup()

  const tools = await toolItems(ctx, callId)
  t.same(tools.map((tool) => tool.name), ['Outlook_find_times', 'Outlook_book', 'Outlook_find_booking', 'Outlook_reschedule', 'Outlook_cancel'])
  t.ok(tools.every((tool) => tool.type === 'calendar_two' && tool.error === undefined), 'every request is a tool event and none failed')
  const times = json(tools[0].output).free_times.map((slot: { start: string }) => slot.start.slice(11))
  t.same(times.slice(0, 6), ['13:00', '13:30', '14:30', '15:00', '15:30', '16:00'], 'busy, tentative and out-of-office block; shown-as-free does not')
  t.match(json(tools[1].output), { booked: { booking_id: event!.id, start: `${day}T13:00` } })
  t.match(json(tools[2].output), { bookings: [{ booking_id: event!.id, start: `${day}T13:00`, title: 'Jane Doe' }] })
  t.match(json(tools[3].output), { rescheduled: { start: `${day}T14:30` } })
  t.match(json(tools[4].output), { cancelled: { booking_id: event!.id } })
})

t.test('a caller known by number: the event keeps the number (no attendee without an e-mail), and a later call finds it by the number alone and cancels it', async (t) => {
  const ctx = await cascade(t)
  const day = bookableDay()
  const PHONE = '+14155550123'
  /** A web call whose caller's number is known, as a phone call's is. */
  const callFrom = async () => {
    const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: ctx.account.headers, payload: { agent_id: ctx.agentId, dynamic_context: { customer_phone: PHONE } } })).json()
    const client = await openWebCall(ctx.url, call.access_token)
    await client.waitFor('transcript', (e) => e.speaker === 'agent')
    return { callId: call._id as string, client }
  }
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Outlook_book', arguments: { start: `${day}T10:00`, name: 'Lou Grant' } }] },
    { text: 'See you at ten.' }
  )
  const first = await callFrom()
  await typedTurn(first.client, 'Ten o\'clock, Lou Grant.', /See you at ten/)
  first.client.hangup()
  const event = ctx.graph.events.find((e) => e.subject === 'Lou Grant')
  t.same(event?.attendees, [], 'no e-mail: nobody to invite')
  t.same([...event!.properties.values()], [PHONE])
  t.match(event?.body.content, /Phone: \+14155550123/)

  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Outlook_find_booking', arguments: {} }] },
    { text: 'You are booked at ten.' },
    { toolCalls: [{ name: 'Outlook_cancel', arguments: { booking_id: event!.id } }] },
    { text: 'Cancelled.' }
  )
  const second = await callFrom()
  await typedTurn(second.client, 'When am I booked?', /booked at ten/)
  await typedTurn(second.client, 'Cancel it please.', /Cancelled/)
  second.client.hangup()
  const [found, cancelled] = await toolItems(ctx, second.callId)
  t.match(json(found.output), { bookings: [{ booking_id: event!.id, start: `${day}T10:00` }] })
  const filter = ctx.graph.requests.find((r) => r.path === '/v1.0/me/calendar/events' && r.method === 'GET')?.query.get('$filter')
  t.match(filter, /ep\/value eq '\+14155550123'/, 'found by the number\'s extended property')
  t.match(json(cancelled.output), { cancelled: { booking_id: event!.id } })
  t.same(ctx.graph.events, [], 'the event is gone')
})

t.test('a slot taken meanwhile: the book re-checks, creates nothing and offers other times', async (t) => {
  const ctx = await cascade(t)
  const day = bookableDay()
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Outlook_find_times', arguments: { from: `${day}T09:00`, to: `${day}T11:00` } }] },
    { text: 'Nine is free.' },
    { toolCalls: [{ name: 'Outlook_book', arguments: { start: `${day}T09:00`, name: 'Sam Roe', email: 'sam@example.com' } }] },
    { text: 'Sorry, nine has just gone.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agentId)
  await typedTurn(client, 'Morning please.', /Nine is free/)
  ctx.graph.busy(at(day, '09:00'), at(day, '09:30'), { subject: 'Booked by a colleague' })
  await typedTurn(client, 'Nine then. Sam Roe, sam@example.com.', /just gone/)
  client.hangup()
  t.same(ctx.graph.events.map((e) => e.subject), ['Booked by a colleague'], 'no second event at 09:00')
  t.notOk(ctx.graph.requests.some((r) => r.method === 'POST'), 'nothing was created')
  const [, book] = await toolItems(ctx, callId)
  t.match(json(book.output), { booked: null, problem: /taken by someone else meanwhile/ })
  t.same(json(book.output).free_times.map((slot: { start: string }) => slot.start.slice(11)).slice(0, 2), ['09:30', '10:00'], 'the same day\'s other times offered')
})

t.test('buffer_minutes keeps time clear around events, in the offered times and in the check before booking', async (t) => {
  const ctx = await cascade(t)
  const day = bookableDay()
  const tools = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${ctx.agentId}/tools`, headers: ctx.account.headers })).json()
  const id = (Array.isArray(tools) ? tools : tools.data)[0]._id
  t.equal((await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${ctx.agentId}/tools/${id}`, headers: ctx.account.headers, payload: { settings: { ...SETTINGS, buffer_minutes: 15 } } })).statusCode, 200)
  ctx.graph.busy(at(day, '10:00'), at(day, '10:30'))
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Outlook_find_times', arguments: { from: `${day}T09:00`, to: `${day}T12:00` } }] },
    { text: 'Nine or eleven.' },
    { toolCalls: [{ name: 'Outlook_book', arguments: { start: `${day}T11:00`, name: 'Max Mo', email: 'max@example.com' } }] },
    { text: 'Eleven has gone.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agentId)
  await typedTurn(client, 'Morning?', /Nine or eleven/)
  // An event that ends a quarter of an hour after 11:00's slot would: inside its buffer.
  ctx.graph.busy(at(day, '11:40'), at(day, '12:00'))
  await typedTurn(client, 'Eleven.', /Eleven has gone/)
  client.hangup()
  const [found, book] = await toolItems(ctx, callId)
  t.same(json(found.output).free_times.map((slot: { start: string }) => slot.start.slice(11)), ['09:00', '11:00', '11:30'], '15 minutes kept clear before and after 10:00–10:30')
  t.match(json(book.output), { booked: null, problem: /taken by someone else meanwhile/ })
  t.equal(ctx.graph.events.length, 2, 'nothing booked')
})

t.test('an access token expired mid-call is refreshed (the rotated refresh token kept); a 429 is retried once, a second one told to the model', async (t) => {
  // Retry-After is waited times CALL_TIME_SCALE.
  const ctx = await cascade(t, { CALL_TIME_SCALE: '0.05' })
  const day = bookableDay()
  const first = await integrationOf(ctx.db, ctx.account.user.id, 'calendar_two')
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Outlook_find_times', arguments: { from: `${day}T09:00`, to: `${day}T10:00` } }] },
    { text: 'Nine or half past.' },
    { toolCalls: [{ name: 'Outlook_book', arguments: { start: `${day}T09:30`, name: 'Ann Lee', email: 'ann@example.com' } }] },
    { text: 'Booked for half past nine.' },
    { toolCalls: [{ name: 'Outlook_find_times', arguments: { from: `${day}T10:00`, to: `${day}T11:00` } }] },
    { text: 'The calendar is not answering right now.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agentId)
  ctx.graph.oauth.expire()
  await typedTurn(client, 'Anything at nine?', /Nine or half past/)
  const refreshes = ctx.graph.oauth.tokenRequests.filter((form) => form.get('grant_type') === 'refresh_token')
  t.equal(refreshes.length, 1, 'one refresh')
  t.equal(refreshes[0].get('refresh_token'), first?.credentials.refresh_token)
  t.equal(refreshes[0].get('client_id'), ctx.graph.env.MICROSOFT_CLIENT_ID)
  const stored = await integrationOf(ctx.db, ctx.account.user.id, 'calendar_two')
  t.not(stored?.credentials.access_token, first?.credentials.access_token, 'the new access token is stored')
  t.not(stored?.credentials.refresh_token, first?.credentials.refresh_token, 'and Microsoft\'s new refresh token with it')
  t.equal(stored?.status, 'connected')
  const view = ctx.graph.requests.filter((r) => r.path.endsWith('/calendarView')).map((r) => r.authorization)
  t.same(view, [`Bearer ${first?.credentials.access_token}`, `Bearer ${stored?.credentials.access_token}`], 'refused with the expired token (401), then asked again with the new one')

  ctx.graph.failNext(429, { retryAfter: 2 })
  const before = ctx.graph.requests.length
  await typedTurn(client, 'Half past nine, Ann Lee, ann@example.com.', /Booked for half past nine/)
  t.equal(ctx.graph.events.length, 1, 'booked once, after the retry')
  t.same(ctx.graph.requests.slice(before).map((r) => `${r.method} ${r.path.replace(/^\/v1\.0/, '')}`), ['GET /me/calendar/calendarView', 'GET /me/calendar/calendarView', 'POST /me/calendar/events'],
    'the check before booking answered 429 and was asked once more, then the event was created')
  t.equal(localOf(ctx.graph.events[0].start, ZONE), `${day}T09:30`)

  ctx.graph.failNext(429)
  ctx.graph.failNext(429)
  const asked = ctx.graph.requests.length
  await typedTurn(client, 'And something at ten for my friend?', /not answering/)
  client.hangup()
  t.equal(ctx.graph.requests.length - asked, 2, 'two 429s: one retry, no third try')
  const tools = await toolItems(ctx, callId)
  t.ok(tools.slice(0, 2).every((tool) => tool.error === undefined), 'the refresh and the one retry were not failures')
  t.match(tools[2], { name: 'Outlook_find_times', error: /Microsoft Outlook is busy \(HTTP 429\)[\s\S]*not answering right now/ }, 'after the retry the model is told, and the call goes on')
})

t.test('a connection revoked mid-call: the model is told, the integration is marked revoked, the next call\'s functions say so without asking Graph', async (t) => {
  const ctx = await cascade(t)
  const day = bookableDay()
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Outlook_find_times', arguments: { from: `${day}T09:00`, to: `${day}T12:00` } }] },
    { text: 'I cannot reach the calendar, may I take your number?' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agentId)
  ctx.graph.oauth.revokeAll()
  await typedTurn(client, 'Any time on that day?', /take your number/)
  client.hangup()
  const [tool] = await toolItems(ctx, callId)
  t.match(tool, { name: 'Outlook_find_times', type: 'calendar_two', error: /Microsoft Outlook refused this account's connection[\s\S]*invalid_grant/ })
  const row = await integrationOf(ctx.db, ctx.account.user.id, 'calendar_two')
  t.equal(row?.status, 'revoked')
  t.match(row?.status_reason, /invalid_grant/)

  const graphRequests = ctx.graph.requests.length
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Outlook_find_times', arguments: { from: `${day}T09:00`, to: `${day}T12:00` } }] },
    { text: 'I cannot book right now.' }
  )
  const next = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agentId)
  await typedTurn(next.client, 'Any time on that day?', /cannot book right now/)
  next.client.hangup()
  const [told] = await toolItems(ctx, next.callId)
  t.match(told, { name: 'Outlook_find_times', error: /Microsoft Outlook refused this account's connection \(.*invalid_grant.*\); it must be connected again\. Tell the caller you cannot book right now/ }, 'the model can tell the caller instead of having no booking function')
  t.equal(ctx.graph.requests.length, graphRequests, 'nothing was sent to Graph')
})

t.test('another calendar than the default: its own calendar view and events; an unknown one is a told error', async (t) => {
  const ctx = await cascade(t)
  const day = bookableDay()
  ctx.graph.addCalendar('AAMkCal-Team')
  ctx.graph.busy(at(day, '09:00'), at(day, '10:00'), { calendarId: 'AAMkCal-Team' })
  const tools = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${ctx.agentId}/tools`, headers: ctx.account.headers })).json()
  const list = Array.isArray(tools) ? tools : tools.data
  const patched = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${ctx.agentId}/tools/${list[0]._id}`, headers: ctx.account.headers, payload: { settings: { ...SETTINGS, calendar_id: 'AAMkCal-Team' } } })
  t.equal(patched.statusCode, 200, patched.body)
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Outlook_find_times', arguments: { from: `${day}T09:00`, to: `${day}T11:00` } }] },
    { text: 'Ten is the first.' },
    { toolCalls: [{ name: 'Outlook_book', arguments: { start: `${day}T10:00`, name: 'Bo Chen', email: 'bo@example.com' } }] },
    { text: 'Booked at ten.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agentId)
  await typedTurn(client, 'Morning?', /Ten is the first/)
  await typedTurn(client, 'Ten. Bo Chen, bo@example.com.', /Booked at ten/)
  client.hangup()
  t.ok(ctx.graph.requests.some((r) => r.path === '/v1.0/me/calendars/AAMkCal-Team/calendarView'))
  t.match(ctx.graph.events.find((e) => e.subject === 'Bo Chen'), { calendarId: 'AAMkCal-Team' })
  const [found] = await toolItems(ctx, callId)
  t.equal(json(found.output).free_times[0].start, `${day}T10:00`)

  const again = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${ctx.agentId}/tools/${list[0]._id}`, headers: ctx.account.headers, payload: { settings: { ...SETTINGS, calendar_id: 'no-such-calendar' } } })
  t.equal(again.statusCode, 200)
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'Outlook_find_times', arguments: { from: `${day}T09:00`, to: `${day}T11:00` } }] },
    { text: 'The calendar is not set up right.' }
  )
  const second = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agentId)
  await typedTurn(second.client, 'Morning?', /not set up right/)
  second.client.hangup()
  const [failed] = await toolItems(ctx, second.callId)
  t.match(failed.error, /Microsoft Outlook refused the request \(HTTP 404: The specified object was not found in the store\.\)/)
})

t.test('settings: opening hours that overlap are refused with a clear 400; the type is offered (not unavailable)', async (t) => {
  const ctx = await cascade(t)
  const bad = await ctx.app.inject({
    method: 'POST',
    url: `/v1/agent/${ctx.agentId}/tools`,
    headers: ctx.account.headers,
    payload: { tool_type: 'calendar_two', settings: { ...SETTINGS, name: 'Second', opening_hours: { mon: [{ from: '09:00', to: '13:00' }, { from: '12:00', to: '17:00' }] } } }
  })
  t.match({ statusCode: bad.statusCode, ...bad.json() }, { statusCode: 400, message: /opening_hours\.mon: 09:00–13:00 and 12:00–17:00 overlap/ })
  const empty = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${ctx.agentId}/tools`, headers: ctx.account.headers, payload: { tool_type: 'calendar_two', settings: { ...SETTINGS, name: 'Default calendar', calendar_id: '' } } })
  t.equal(empty.statusCode, 201, 'an empty calendar id is the default calendar')
})

t.test('realtime engine: the model finds a time and books it in Outlook', async (t) => {
  const realtime = await startRealtimeStandin(t)
  const ctx = await outlook(t, { REALTIME_URL: realtime.url, REALTIME_API_KEY: 'sk-realtime-test' }, { engine: 'realtime' })
  const day = bookableDay()
  ctx.graph.busy(at(day, '09:00'), at(day, '11:00'))
  realtime.replies.push(
    { calls: [{ name: 'Outlook_find_times', arguments: JSON.stringify({ from: `${day}T09:00`, to: `${day}T12:00` }) }] },
    { text: 'Eleven is free.' },
    { calls: [{ name: 'Outlook_book', arguments: JSON.stringify({ start: `${day}T11:00`, name: 'Kim Park', email: 'kim@example.com' }) }] },
    { text: 'Booked at eleven.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agentId)
  const update = realtime.events.find((e) => e.type === 'session.update') as any
  t.match(update.session.tools.map((tool: { name: string }) => tool.name), ['Outlook_find_times', 'Outlook_book', 'Outlook_find_booking', 'Outlook_reschedule', 'Outlook_cancel'])
  t.match(update.session.instructions, /Microsoft Outlook \(the Outlook_… functions\) books appointments\. Now it is .* in America\/New_York/)
  await typedTurn(client, 'Morning?', /Eleven is free/)
  await typedTurn(client, 'Eleven. Kim Park, kim@example.com.', /Booked at eleven/)
  client.hangup()
  t.equal(localOf(ctx.graph.events.find((e) => e.subject === 'Kim Park')!.start, ZONE), `${day}T11:00`)
  const outputs = realtime.events.filter((e: any) => e.type === 'conversation.item.create' && e.item?.type === 'function_call_output').map((e: any) => JSON.parse(e.item.output))
  t.equal(outputs[0].free_times[0].start, `${day}T11:00`)
  t.match(outputs[1], { booked: { start: `${day}T11:00` } })
  const tools = await toolItems(ctx, callId)
  t.same(tools.map((tool) => [tool.name, tool.type]), [['Outlook_find_times', 'calendar_two'], ['Outlook_book', 'calendar_two']])
})
