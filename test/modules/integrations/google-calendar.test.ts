import t, { type Test } from 'tap'
import { BookingProblem, SlotTaken } from '../../../src/modules/capabilities/booking/backend.ts'
import { zonedToUtc, localOf, weekdayOf } from '../../../src/modules/capabilities/booking/time.ts'
import { googleBackend } from '../../../src/modules/capabilities/types/calendar-one.ts'
import { connectionOf } from '../../../src/modules/integrations/client.ts'
import { PROVIDER_INFO } from '../../../src/modules/integrations/providers.ts'
import { connectIntegration, integrationOf, markRevoked } from '../../../src/modules/integrations/queries.ts'
import { createLogger } from '../../../src/logger.ts'
import { createAccount, setup, type Account, type TestContext } from '../../helpers/app.ts'
import { startGoogle } from '../../helpers/google-calendar-standin.ts'
import { startOpenAiHttpStandin, type OpenAiHttpStandin } from '../../helpers/openai-http-standin.ts'
import { startRealtimeStandin } from '../../helpers/realtime-standin.ts'
import { finishedCall, startWebCall, typedTurn } from '../../helpers/voice-client.ts'

// calendar_one (Google Calendar) during calls, through the real protocols: a web call over the browser WebSocket,
// the model (the OpenAI stand-ins, on both engines) calling the tool's functions, the tool reaching the Google
// Calendar stand-in (test/helpers/google-calendar-standin.ts) with the connection's OAuth tokens, which the OAuth
// server on the same stand-in issues, refreshes and revokes.

const ZONE = 'Europe/Berlin'
const ENV = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', CALL_TIME_SCALE: '0.05' }
const SETTINGS = { name: 'Calendar', calendar_id: 'primary', time_zone: ZONE, duration_minutes: 30 }

/** A weekday (Monday to Friday, open by default) at least two days ahead, as 'YYYY-MM-DD' in the tool's zone. */
function openDay (): string {
  for (let days = 2; ; days++) {
    const at = new Date(Date.now() + days * 86_400_000)
    const weekday = weekdayOf(at, ZONE)
    if (weekday >= 1 && weekday <= 5) return localOf(at, ZONE).slice(0, 10)
  }
}

const at = (day: string, time: string) => zonedToUtc(`${day}T${time}`, ZONE)

interface Google extends Awaited<ReturnType<typeof startGoogle>> {}

/** The app with the calendar_one tool on an agent, its account connected to the stand-in's Google account. */
async function calendarCall (t: Test, engine: 'pipeline' | 'realtime' = 'pipeline', env: Record<string, string> = {}) {
  const google = await startGoogle(t, { owner: 'ada.owner@example.com', timeZone: ZONE })
  const model = engine === 'pipeline' ? await startOpenAiHttpStandin(t) : undefined
  const realtime = engine === 'realtime' ? await startRealtimeStandin(t) : undefined
  const engineEnv: Record<string, string> = model !== undefined
    ? { VOICE_ENGINE: 'cascade', STT_URL: model.url, LLM_URL: model.url, TTS_URL: model.url }
    : { VOICE_ENGINE: 'cascade', REALTIME_URL: realtime!.url, REALTIME_API_KEY: 'sk-realtime-test' }
  const ctx = await setup(t, { ...ENV, ...engineEnv, ...google.env, ...env }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const label = await connect(ctx, account, google)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello!', general_prompt: 'You book appointments.', ...(engine === 'realtime' ? { engine: 'realtime' } : {}) } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Front desk', llm_id: llm._id } })).json()
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'calendar_one', settings: SETTINGS } })
  t.equal(tool.statusCode, 201, tool.body)
  return { ...ctx, url, google, model, realtime, account, agent, label, tool: tool.json() }
}

/**
 * Connects the account as the OAuth flow's callback does once Google has answered the code: the tokens stored (the
 * OAuth server issues them), then the provider's cheap check names the account. (The connect endpoints are the
 * `oauth` helper's; they were not in main when this was written.)
 */
async function connect (ctx: TestContext, account: Account, google: Google): Promise<string> {
  const tokens = google.oauth.issue()
  const deps = { db: ctx.db, config: ctx.config, log: createLogger(ctx.config) }
  await connectIntegration(ctx.db, account.user.id, 'calendar_one', { account_label: '', method: 'oauth', credentials: tokens, expires_at: new Date(Date.now() + tokens.expires_in * 1000) })
  const label = await PROVIDER_INFO.calendar_one.account(await connectionOf(deps, account.user.id, 'calendar_one'))
  await connectIntegration(ctx.db, account.user.id, 'calendar_one', { account_label: label, method: 'oauth', credentials: tokens, expires_at: new Date(Date.now() + tokens.expires_in * 1000) })
  return label
}

type Ctx = Awaited<ReturnType<typeof calendarCall>>

/** The tool results the model was given in the pipeline's chat requests, in order. */
const toolResults = (model: OpenAiHttpStandin) => {
  const last = model.requests.chat.at(-1)?.body.messages ?? []
  return (last as Array<{ role: string, content: string }>).filter((m) => m.role === 'tool').map((m) => m.content)
}

const toolItems = async (ctx: Ctx, callId: string) => {
  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  return { done, tools: done.transcription.filter((item: { speaker: string }) => item.speaker === 'tool') }
}

t.test('connect: the cheap check names the account by its primary calendar (with only the scopes calendar_one asks for)', async (t) => {
  const ctx = await calendarCall(t)
  t.equal(ctx.label, 'ada.owner@example.com')
  t.same(PROVIDER_INFO.calendar_one.scopes, ['https://www.googleapis.com/auth/calendar.events', 'https://www.googleapis.com/auth/calendar.freebusy'])
  t.match(PROVIDER_INFO.calendar_one.authorizeParams, { access_type: 'offline', prompt: 'consent' })
  t.match(ctx.google.calendar.requests[0], { method: 'GET', path: '/calendars/primary/events' }, 'events.list, which calendar.events covers')
  const listed = (await ctx.app.inject({ method: 'GET', url: '/v1/integrations', headers: ctx.account.headers })).json()
  t.match(listed.find((i: { provider: string }) => i.provider === 'calendar_one'), { connected: true, account_label: 'ada.owner@example.com' })

  // calendars.get would need a broader scope: Google refuses it, as the stand-in does.
  const answer = await fetch(`${ctx.google.calendar.url}/calendars/primary`, { headers: { authorization: `Bearer ${ctx.google.oauth.accessTokens()[0].token}` } })
  t.equal(answer.status, 403)
  t.match(await answer.json(), { error: { code: 403, errors: [{ reason: 'insufficientPermissions' }], status: 'PERMISSION_DENIED' } })
})

t.test('a call books a free slot: the model finds times (busy ones left out) and books one; the event is in the agent\'s time zone with the caller as attendee', async (t) => {
  const ctx = await calendarCall(t)
  const day = openDay()
  ctx.google.calendar.busy(at(day, '09:00'), at(day, '10:00'), { summary: 'Dentist' })
  ctx.model!.replies.push(
    { toolCalls: [{ name: 'Calendar_find_times', arguments: { from: `${day}T09:00`, to: `${day}T12:00` } }] },
    { text: 'I have ten o\'clock free.' },
    { toolCalls: [{ name: 'Calendar_book', arguments: { start: `${day}T10:00`, name: 'Ada Lovelace', email: 'Ada@Example.com', phone: '+49 30 1234567', notes: 'First visit' } }] },
    { text: 'You are booked for ten.' }
  )

  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'Do you have something on that morning?', /ten o'clock/)
  t.match(ctx.model!.requests.chat[0].body.messages[0].content, /Now it is .* in Europe\/Berlin/, 'the prompt tells the model today\'s date in the tool\'s zone')
  const found = JSON.parse(toolResults(ctx.model!)[0])
  t.equal(found.time_zone, ZONE)
  t.same(found.free_times.slice(0, 3).map((s: { start: string }) => s.start), [`${day}T10:00`, `${day}T10:30`, `${day}T11:00`], '09:00–10:00 is busy')
  t.match(found.free_times[0].spoken, /10:00/)

  await typedTurn(client, 'Ten is fine. Ada Lovelace, ada@example.com.', /booked for ten/)
  client.hangup()
  const booked = JSON.parse(toolResults(ctx.model!).at(-1)!)
  t.match(booked, { booked: { start: `${day}T10:00`, title: 'Calendar: Ada Lovelace' } })

  const events = ctx.google.calendar.events()
  t.equal(events.length, 2)
  const event = events.find((e) => e.summary === 'Calendar: Ada Lovelace')!
  t.same(event.start, { dateTime: `${day}T10:00:00`, timeZone: ZONE }, 'sent as wall-clock time in the agent\'s zone')
  t.equal(event.from.getTime(), at(day, '10:00').getTime())
  t.equal(event.to.getTime(), at(day, '10:30').getTime())
  t.match(event.attendees, [{ email: 'ada@example.com', displayName: 'Ada Lovelace' }])
  t.same(event.extendedProperties, { private: { switchboard: 'true', switchboard_phone: '+49301234567', switchboard_email: 'ada@example.com' } })
  t.match(event.description, /Name: Ada Lovelace\nPhone: \+49 30 1234567\nE-mail: ada@example.com\nNotes: First visit/)
  t.equal(event.sendUpdates, 'all', 'Google e-mails the caller the invitation')
  t.same(ctx.google.calendar.requests.slice(1).map((r) => `${r.method} ${r.path}`), ['POST /freeBusy', 'POST /freeBusy', 'POST /calendars/primary/events'], 'free/busy asked again right before the insert')
  t.ok(ctx.google.calendar.requests.slice(1).every((r) => r.token === ctx.google.oauth.accessTokens()[0].token), 'with the connection\'s access token')

  const { tools } = await toolItems(ctx, callId)
  t.same(tools.map((item: { tool: { name: string, type: string } }) => [item.tool.name, item.tool.type]), [['Calendar_find_times', 'calendar_one'], ['Calendar_book', 'calendar_one']])
})

t.test('realtime engine: the same booking through session.update and function outputs', async (t) => {
  const ctx = await calendarCall(t, 'realtime')
  const day = openDay()
  ctx.realtime!.replies.push(
    { calls: [{ name: 'Calendar_find_times', arguments: JSON.stringify({ from: `${day}T14:00`, to: `${day}T15:00` }) }] },
    { text: 'Two o\'clock is free.' },
    { calls: [{ name: 'Calendar_book', arguments: JSON.stringify({ start: `${day}T14:00`, name: 'Grace Hopper', email: 'grace@example.com' }) }] },
    { text: 'Booked for two.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  const update = ctx.realtime!.events.find((e) => e.type === 'session.update') as any
  t.same(update.session.tools.map((tool: { name: string }) => tool.name), ['Calendar_find_times', 'Calendar_book', 'Calendar_find_booking', 'Calendar_reschedule', 'Calendar_cancel'])
  t.match(update.session.instructions, /Now it is .* in Europe\/Berlin/)
  await typedTurn(client, 'Anything at two?', /Two o'clock is free/)
  await typedTurn(client, 'Book it, Grace Hopper, grace@example.com.', /Booked for two/)
  client.hangup()
  const outputs = ctx.realtime!.events.filter((e: any) => e.type === 'conversation.item.create' && e.item?.type === 'function_call_output').map((e: any) => JSON.parse(e.item.output))
  t.same(outputs[0].free_times.map((s: { start: string }) => s.start), [`${day}T14:00`, `${day}T14:30`])
  t.match(outputs[1], { booked: { start: `${day}T14:00` } })
  const [event] = ctx.google.calendar.events()
  t.same(event.start, { dateTime: `${day}T14:00:00`, timeZone: ZONE })
  t.match(event.attendees, [{ email: 'grace@example.com' }])
  const { tools } = await toolItems(ctx, callId)
  t.equal(tools.length, 2)
})

t.test('reschedule and cancel: the caller\'s bookings are found across pages of events.list, one is moved and one cancelled', async (t) => {
  const ctx = await calendarCall(t)
  ctx.google.calendar.pageSize = 2
  const day = openDay()
  const mine = { private: { switchboard: 'true', switchboard_email: 'ada@example.com' } }
  // Five of the caller's bookings on five mornings (three pages of two), and someone else's.
  const bookings = [0, 1, 2, 3, 4].map((n) => {
    const start = new Date(at(day, '09:00').getTime() + n * 86_400_000)
    return ctx.google.calendar.busy(start, new Date(start.getTime() + 30 * 60_000), { summary: `Calendar: Ada ${n}`, extendedProperties: mine })
  })
  ctx.google.calendar.busy(at(day, '11:00'), at(day, '11:30'), { summary: 'Calendar: Bob', extendedProperties: { private: { switchboard: 'true', switchboard_email: 'bob@example.com' } } })
  const [first, second] = bookings
  ctx.model!.replies.push(
    { toolCalls: [{ name: 'Calendar_find_booking', arguments: { email: 'ada@example.com' } }] },
    { text: 'You have five appointments.' },
    { toolCalls: [{ name: 'Calendar_reschedule', arguments: { booking_id: first.id, start: `${day}T09:15` } }] },
    { text: 'Moved to a quarter past nine.' },
    { toolCalls: [{ name: 'Calendar_cancel', arguments: { booking_id: second.id, reason: 'travelling' } }] },
    { text: 'Cancelled.' },
    { toolCalls: [{ name: 'Calendar_cancel', arguments: { booking_id: 'someone-elses' } }] },
    { text: 'I cannot find that one.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'What have I booked? ada@example.com', /five appointments/)
  const found = JSON.parse(toolResults(ctx.model!)[0])
  t.same(found.bookings.map((b: { booking_id: string }) => b.booking_id), bookings.map((b) => b.id), 'all five, in order, Bob\'s left out')
  const lists = ctx.google.calendar.requests.filter((r) => r.method === 'GET' && r.path === '/calendars/primary/events' && r.query.has('privateExtendedProperty'))
  t.equal(lists.length, 3, 'three pages read')
  t.same(lists.map((r) => r.query.get('pageToken') !== null), [false, true, true])
  t.equal(lists[0].query.get('privateExtendedProperty'), 'switchboard_email=ada@example.com')
  t.match(Object.fromEntries(lists[0].query), { singleEvents: 'true', orderBy: 'startTime' })

  // 09:15–09:45 overlaps the booking's own 09:00–09:30, which Google reports busy: its own time does not block it.
  await typedTurn(client, 'Move the first one a quarter of an hour later.', /quarter past nine/)
  t.match(JSON.parse(toolResults(ctx.model!).at(-1)!), { rescheduled: { booking_id: first.id, start: `${day}T09:15` } })
  const moved = ctx.google.calendar.events().find((e) => e.id === first.id)!
  t.equal(moved.from.getTime(), at(day, '09:15').getTime())
  t.equal(moved.to.getTime(), at(day, '09:45').getTime())
  t.equal(moved.sequence, 1)
  t.equal(moved.sendUpdates, 'all')

  await typedTurn(client, 'And cancel the second.', /Cancelled/)
  t.match(JSON.parse(toolResults(ctx.model!).at(-1)!), { cancelled: { booking_id: second.id } })
  t.equal(ctx.google.calendar.events().find((e) => e.id === second.id)!.status, 'cancelled')

  await typedTurn(client, 'And Bob\'s too.', /cannot find/)
  t.match(toolResults(ctx.model!).at(-1), /^Error: the caller has no upcoming booking "someone-elses"/)
  client.hangup()
  const { tools } = await toolItems(ctx, callId)
  t.same(tools.map((item: { tool: { name: string } }) => item.tool.name), ['Calendar_find_booking', 'Calendar_reschedule', 'Calendar_cancel', 'Calendar_cancel'])
  t.equal(ctx.google.calendar.events().filter((e) => e.status === 'cancelled').length, 1, 'Bob\'s stays')
})

t.test('an access token that expired mid-call: Google answers 401, the token is refreshed and the booking goes on', async (t) => {
  const ctx = await calendarCall(t)
  const day = openDay()
  ctx.model!.replies.push(
    { toolCalls: [{ name: 'Calendar_book', arguments: { start: `${day}T15:00`, name: 'Ada Lovelace', email: 'ada@example.com' } }] },
    { text: 'Booked for three.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  const old = ctx.google.oauth.accessTokens()[0].token
  ctx.google.oauth.expire()
  await typedTurn(client, 'Three please, Ada Lovelace.', /Booked for three/)
  client.hangup()
  t.match(JSON.parse(toolResults(ctx.model!).at(-1)!), { booked: { start: `${day}T15:00` } })
  t.equal(ctx.google.calendar.events().length, 1)
  const calls = ctx.google.calendar.requests.slice(1)
  t.match(calls[0], { path: '/freeBusy', token: old }, 'the old token first')
  const fresh = ctx.google.oauth.accessTokens().at(-1)!
  t.ok(fresh.live)
  t.not(fresh.token, old)
  t.match(calls.slice(1).map((r) => [r.path, r.token]), [['/freeBusy', fresh.token], ['/calendars/primary/events', fresh.token]], 'then the refreshed one')
  t.same(ctx.google.oauth.tokenRequests.map((form) => form.get('grant_type')), ['refresh_token'], 'one refresh')
  const row = await integrationOf(ctx.db, ctx.account.user.id, 'calendar_one')
  t.equal(row?.credentials.access_token, fresh.token, 'the new token is stored')
  t.equal(row?.status, 'connected')
  await toolItems(ctx, callId)
})

t.test('a revoked connection: the model is told, the call goes on, the integration shows revoked', async (t) => {
  const ctx = await calendarCall(t)
  const day = openDay()
  ctx.model!.replies.push(
    { toolCalls: [{ name: 'Calendar_find_times', arguments: { from: `${day}T09:00`, to: `${day}T10:00` } }] },
    { text: 'I cannot reach the calendar right now, may I take your details?' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  ctx.google.oauth.revokeAll()
  await typedTurn(client, 'Anything Tuesday morning?', /take your details/)
  const result = toolResults(ctx.model!).at(-1)!
  t.match(result, /^Error: Google Calendar refused this account's connection .*invalid_grant.*it must be connected again\. Tell the caller you cannot book right now/)
  t.same(ctx.google.oauth.tokenRequests.map((form) => form.get('grant_type')), ['refresh_token'], 'a refresh was tried once')
  const row = await integrationOf(ctx.db, ctx.account.user.id, 'calendar_one')
  t.equal(row?.status, 'revoked')
  t.match(row?.status_reason, /invalid_grant/)
  await typedTurn(client, 'Okay, thanks.', /./)
  client.hangup()
  const { done, tools } = await toolItems(ctx, callId)
  t.match(tools[0], { tool: { name: 'Calendar_find_times', type: 'calendar_one', error: /refused this account's connection/ } })
  t.equal(done.transcription.at(-1).speaker, 'agent', 'the call went on')
})

t.test('a connection revoked before the call: the functions are still offered and say why they cannot book', async (t) => {
  const ctx = await calendarCall(t)
  const day = openDay()
  await markRevoked(ctx.db, ctx.account.user.id, 'calendar_one', 'invalid_grant')
  ctx.model!.replies.push(
    { toolCalls: [{ name: 'Calendar_find_times', arguments: { from: `${day}T09:00`, to: `${day}T10:00` } }] },
    { text: 'I cannot book right now; may I take your number?' }
  )
  const requests = ctx.google.calendar.requests.length
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'Can I book for Tuesday?', /take your number/)
  t.match(ctx.model!.requests.chat[0].body.tools.map((tool: { function: { name: string } }) => tool.function.name), ['Calendar_find_times', 'Calendar_book', 'Calendar_find_booking', 'Calendar_reschedule', 'Calendar_cancel'])
  t.match(toolResults(ctx.model!).at(-1), /^Error: Google Calendar refused this account's connection \(invalid_grant\); it must be connected again\. Tell the caller you cannot book right now/)
  t.equal(ctx.google.calendar.requests.length, requests, 'Google was not asked')
  client.hangup()
  await toolItems(ctx, callId)
})

t.test('a slot taken meanwhile (between finding it and booking it): the model is told and offered others; nothing is double-booked', async (t) => {
  const ctx = await calendarCall(t)
  const day = openDay()
  ctx.model!.replies.push(
    { toolCalls: [{ name: 'Calendar_book', arguments: { start: `${day}T10:00`, name: 'Ada Lovelace', email: 'ada@example.com' } }] },
    { text: 'Sorry, ten was just taken; half past ten?' },
    { toolCalls: [{ name: 'Calendar_book', arguments: { start: `${day}T10:30`, name: 'Ada Lovelace', email: 'ada@example.com' } }] },
    { text: 'Booked for half past ten.' }
  )
  // Someone books 10:00 in Google Calendar just before the tool asks again whether it is free.
  let taken = false
  ctx.google.calendar.onRequest = (request) => {
    if (!taken && request.path === '/freeBusy') {
      taken = true
      ctx.google.calendar.busy(at(day, '10:00'), at(day, '10:30'), { summary: 'Booked by someone else' })
    }
  }
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'Ten please.', /just taken/)
  const refused = JSON.parse(toolResults(ctx.model!).at(-1)!)
  t.match(refused, { booked: null, problem: /was taken by someone else meanwhile/ })
  t.notOk(refused.free_times.some((s: { start: string }) => s.start === `${day}T10:00`), 'the others offered leave it out')
  t.ok(refused.free_times.some((s: { start: string }) => s.start === `${day}T10:30`))
  t.equal(ctx.google.calendar.events().length, 1, 'no event inserted over it')
  await typedTurn(client, 'Half past ten then.', /half past ten/)
  client.hangup()
  t.same(ctx.google.calendar.events().map((e) => e.summary), ['Booked by someone else', 'Calendar: Ada Lovelace'])
  const { done } = await toolItems(ctx, callId)
  t.equal(done.transcription.at(-1).speaker, 'agent')
})

t.test('rate limits: a 429 (and Google\'s 403 rateLimitExceeded) is retried once and the call goes on; two in a row reach the model as busy', async (t) => {
  const ctx = await calendarCall(t)
  const day = openDay()
  ctx.model!.replies.push(
    { toolCalls: [{ name: 'Calendar_find_times', arguments: { from: `${day}T09:00`, to: `${day}T10:00` } }] },
    { text: 'Nine is free.' },
    { toolCalls: [{ name: 'Calendar_find_times', arguments: { from: `${day}T13:00`, to: `${day}T14:00` } }] },
    { text: 'The calendar is busy, shall I try again in a moment?' },
    { toolCalls: [{ name: 'Calendar_find_times', arguments: { from: `${day}T14:00`, to: `${day}T14:30` } }] },
    { text: 'Two is free.' },
    { toolCalls: [{ name: 'Calendar_find_times', arguments: { from: `${day}T15:00`, to: `${day}T15:30` } }] },
    { text: 'The calendar is still busy.' },
    { toolCalls: [{ name: 'Calendar_find_times', arguments: { from: `${day}T16:00`, to: `${day}T16:30` } }] },
    { text: 'I cannot book that right now.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  ctx.google.calendar.failNext(429, { retryAfter: 1 })
  const before = ctx.google.calendar.requests.length
  await typedTurn(client, 'Anything at nine?', /Nine is free/)
  t.same(ctx.google.calendar.requests.slice(before).map((r) => r.path), ['/freeBusy', '/freeBusy'], 'one retry')
  t.match(JSON.parse(toolResults(ctx.model!).at(-1)!), { free_times: [{ start: `${day}T09:00` }, { start: `${day}T09:30` }] })

  ctx.google.calendar.failNext(429)
  ctx.google.calendar.failNext(429)
  await typedTurn(client, 'And at one?', /try again in a moment/)
  t.match(toolResults(ctx.model!).at(-1), /^Error: Google Calendar is busy \(HTTP 429\).*Tell the caller the booking system is not answering right now/)

  // Google's more usual answer: 403 with reason rateLimitExceeded (or userRateLimitExceeded), retried the same way.
  ctx.google.calendar.failNext(403)
  const third = ctx.google.calendar.requests.length
  await typedTurn(client, 'And at two?', /Two is free/)
  t.same(ctx.google.calendar.requests.slice(third).map((r) => r.path), ['/freeBusy', '/freeBusy'], 'one retry')
  t.match(JSON.parse(toolResults(ctx.model!).at(-1)!), { free_times: [{ start: `${day}T14:00` }] })
  ctx.google.calendar.failNext(403, { reason: 'userRateLimitExceeded' })
  ctx.google.calendar.failNext(403, { reason: 'userRateLimitExceeded' })
  await typedTurn(client, 'And at three?', /still busy/)
  t.match(toolResults(ctx.model!).at(-1), /^Error: Google Calendar is busy \(HTTP 403 userRateLimitExceeded\).*not answering right now/)
  ctx.google.calendar.failNext(403, { reason: 'forbiddenForNonOrganizer' })
  await typedTurn(client, 'And at four?', /cannot book/)
  t.match(toolResults(ctx.model!).at(-1), /^Error: Google Calendar refused the request \(HTTP 403: .*\)\. Tell the caller you cannot book right now/, 'another 403 is a refusal, not retried')
  client.hangup()
  const { done } = await toolItems(ctx, callId)
  t.equal(done.transcription.at(-1).speaker, 'agent', 'the call went on')
})

t.test('settings: opening hours that overlap are refused; the type can be created (it acts)', async (t) => {
  const ctx = await calendarCall(t)
  const bad = await ctx.app.inject({
    method: 'POST',
    url: `/v1/agent/${ctx.agent._id}/tools`,
    headers: ctx.account.headers,
    payload: { tool_type: 'calendar_one', settings: { ...SETTINGS, name: 'Second', opening_hours: { mon: [{ from: '09:00', to: '12:00' }, { from: '11:00', to: '13:00' }] } } }
  })
  t.match({ statusCode: bad.statusCode, ...bad.json() }, { statusCode: 400, code: 'bad_request', message: /opening_hours\.mon: 09:00–12:00 and 11:00–13:00 overlap/ })
  t.match(ctx.tool, { tool_type: 'calendar_one', is_active: true, settings: SETTINGS }, 'created: it acts')

  // An active tool needs the account connected (and not revoked); a tool switched off may be set up before.
  const other = await createAccount(ctx.db)
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: other.headers, payload: { agent_name: 'Other', llm_id: (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: other.headers, payload: {} })).json()._id } })).json()
  const add = async (payload: object) => await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: other.headers, payload: { tool_type: 'calendar_one', settings: SETTINGS, ...payload } })
  const refused = await add({})
  t.match({ statusCode: refused.statusCode, ...refused.json() }, { statusCode: 409, code: 'integration_not_connected', message: /connect it first/ })
  t.equal((await add({ is_active: false })).statusCode, 201)
})

t.test('free times keep the buffer around busy events (also one just before the search), inside the opening hours; booking outside them is refused', async (t) => {
  const ctx = await calendarCall(t)
  const day = openDay()
  const deps = { db: ctx.db, config: ctx.config, log: createLogger(ctx.config) }
  const conn = await connectionOf(deps, ctx.account.user.id, 'calendar_one')
  const weekdays = Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri'].map((d) => [d, [{ from: '09:00', to: '12:00' }]]))
  const backend = googleBackend(conn, { ...SETTINGS, buffer_minutes: 15, opening_hours: weekdays })
  ctx.google.calendar.busy(at(day, '08:20'), at(day, '08:50'), { summary: 'Early' })
  ctx.google.calendar.busy(at(day, '10:00'), at(day, '10:30'), { summary: 'Meeting' })
  ctx.google.calendar.busy(at(day, '11:00'), at(day, '11:30'), { summary: 'Lunch plans', transparency: 'transparent' })
  const signal = new AbortController().signal
  const slots = await backend.slots(at(day, '09:00'), at(day, '12:00'), signal)
  t.same(slots.map((slot) => localOf(slot.start, ZONE).slice(11)), ['11:00', '11:30'], '08:50 + 15 min blocks 09:00; 10:00–10:30 ± 15 min blocks 09:30 to 10:30; a "free" event blocks nothing')
  const freeBusy = ctx.google.calendar.requests.filter((r) => r.path === '/freeBusy').at(-1)!
  t.equal(freeBusy.body.timeMin, at(day, '08:45').toISOString(), 'asked from the buffer before the search')

  const ada = { name: 'Ada', email: null, phone: '+4930111', notes: null }
  const failure = async (booking: Promise<unknown>) => await booking.then(() => undefined, (err: unknown) => err)
  t.ok(await failure(backend.book({ start: at(day, '13:00'), end: at(day, '13:30') }, ada, signal)) instanceof BookingProblem, 'outside the opening hours')
  t.ok(await failure(backend.book({ start: at(day, '09:30'), end: at(day, '10:00') }, ada, signal)) instanceof SlotTaken, 'within the buffer of a busy event')
  const booked = await backend.book({ start: at(day, '11:00'), end: at(day, '11:30') }, ada, signal)
  t.equal(booked.start.getTime(), at(day, '11:00').getTime())
  t.equal(ctx.google.calendar.events().find((e) => e.id === booked.id)?.sendUpdates, 'none', 'no address: no invitation')
  t.same((await backend.find({ email: null, phone: '+49 30 111' }, signal)).map((b) => b.id), [booked.id], 'found by the phone number however it is spaced')
})

t.test('another calendar of the account: free times and bookings use its id; one the account cannot see is a clear error', async (t) => {
  const ctx = await calendarCall(t)
  const day = openDay()
  const team = 'team-room@group.calendar.google.com'
  ctx.google.calendar.addCalendar(team, 'Team room', ZONE)
  ctx.google.calendar.busy(at(day, '09:00'), at(day, '09:30'), { calendarId: team })
  const conn = await connectionOf({ db: ctx.db, config: ctx.config, log: createLogger(ctx.config) }, ctx.account.user.id, 'calendar_one')
  const signal = new AbortController().signal
  const room = googleBackend(conn, { ...SETTINGS, calendar_id: team })
  t.same((await room.slots(at(day, '09:00'), at(day, '10:00'), signal)).map((slot) => localOf(slot.start, ZONE).slice(11)), ['09:30'])
  const booked = await room.book({ start: at(day, '09:30'), end: at(day, '10:00') }, { name: 'Ada', email: 'ada@example.com', phone: null, notes: null }, signal)
  t.same(ctx.google.calendar.events(team).map((e) => e.id).at(-1), booked.id, 'booked in that calendar')
  t.equal(ctx.google.calendar.events().length, 0, 'not in the primary one')
  t.match(ctx.google.calendar.requests.at(-1), { method: 'POST', path: `/calendars/${encodeURIComponent(team)}/events` })

  const missing = googleBackend(conn, { ...SETTINGS, calendar_id: 'gone@group.calendar.google.com' })
  await t.rejects(missing.slots(at(day, '09:00'), at(day, '10:00'), signal), { reason: 'rejected', message: 'Google Calendar cannot read the calendar "gone@group.calendar.google.com" of the connected account (notFound)' })
})
