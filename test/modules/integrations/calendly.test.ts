import t, { type Test } from 'tap'
import { createLogger } from '../../../src/logger.ts'
import { createMailer } from '../../../src/mail/mailer.ts'
import { localOf, zonedToUtc } from '../../../src/modules/capabilities/booking/time.ts'
import { loadAgentLive } from '../../helpers/live.ts'
import { PROVIDER_INFO } from '../../../src/modules/integrations/providers.ts'
import { integrationOf } from '../../../src/modules/integrations/queries.ts'
import { connectThroughApi } from '../../helpers/oauth-connect.ts'
import { createAccount, setup, type Account, type TestContext } from '../../helpers/app.ts'
import { CLIENT_ID, CLIENT_SECRET, startCalendlyStandIn, type CalendlyEventType, type CalendlyStandIn } from '../../helpers/calendly-standin.ts'
import { startOpenAiHttpStandin, type OpenAiHttpStandin } from '../../helpers/openai-http-standin.ts'
import { startRealtimeStandin } from '../../helpers/realtime-standin.ts'
import { finishedCall, startWebCall, typedTurn } from '../../helpers/voice-client.ts'

// booking_two against Calendly's API v2, through the real protocols: the API connects the account with a personal
// access token (or OAuth 2.0), a cascade web call's model calls the tool's functions, the tool reaches the Calendly
// stand-in, and the answers go back to the model and into the transcript.

const ENV = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIME_SCALE: '0.001' }
const PAT = 'eyJraWQiOiIxY2UxZTEzNjE3ZGNmNzY2YjNjZWJjY2Y4ZGM1YmFmYThhNjVlNjg0MDIzZjdjMzJiZTgzNDliMjM4MDEzNWI0IiwidHlwIjoiUEFUIn0.test'
const ZONE = 'Europe/Berlin'
const DAY = 86_400_000

/** `days` ahead at 09:00, 09:30 and 10:00 in Berlin. */
const morning = (days: number) => {
  const day = new Date(Date.now() + days * DAY).toISOString().slice(0, 10)
  return ['09:00', '09:30', '10:00'].map((hm) => zonedToUtc(`${day}T${hm}`, ZONE))
}

interface Booked extends TestContext { url: string, standin: OpenAiHttpStandin, cly: CalendlyStandIn, account: Account, agent: { _id: string }, type: CalendlyEventType, fn: (what: string) => string }

interface Options { eventTypeId?: (type: CalendlyEventType, cly: CalendlyStandIn) => string, oauth?: boolean }

async function booked (t: Test, options: Options = {}): Promise<Booked> {
  const cly = await startCalendlyStandIn(t)
  cly.tokens.add(PAT)
  const type = cly.addEventType({ name: 'Intro call', slug: 'intro', duration: 30, openings: [...morning(2), ...morning(9)] })
  const standin = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, {
    ...ENV, VOICE_ENGINE: 'cascade', STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url, CALENDLY_API_URL: cly.apiUrl,
    CALENDLY_CLIENT_ID: CLIENT_ID, CALENDLY_CLIENT_SECRET: CLIENT_SECRET, CALENDLY_AUTHORIZE_URL: cly.oauth.authorizeUrl, CALENDLY_TOKEN_URL: cly.oauth.tokenUrl, CALENDLY_REVOKE_URL: cly.oauth.revokeUrl
  }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  if (options.oauth === true) {
    await connectThroughApi(ctx.app, account.headers, 'booking_two')
  } else {
    const connected = await ctx.app.inject({ method: 'PUT', url: '/v1/integrations/booking_two', headers: account.headers, payload: { api_key: PAT } })
    t.equal(connected.statusCode, 200, connected.body)
  }
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi!', general_prompt: 'You are Ada.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Ada', llm_id: llm._id } })).json()
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id as string}/tools`, headers: account.headers, payload: { tool_type: 'booking_two', settings: { name: 'Calendly', event_type_id: options.eventTypeId?.(type, cly) ?? cly.uriOf('event_types', type.uuid), time_zone: ZONE } } })
  t.equal(tool.statusCode, 201, tool.body)
  return { ...ctx, url, standin, cly, account, agent, type, fn: (what) => `Calendly_${what}` }
}

const local = (date: Date) => localOf(date, ZONE)
const lastToolMessage = (standin: OpenAiHttpStandin): string =>
  standin.requests.chat.flatMap((r) => r.body.messages).filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => m.content).at(-1) ?? ''

function liveContext (ctx: Booked, customer = { phone: null as string | null, email: null as string | null }) {
  const log = createLogger(ctx.config)
  return { db: ctx.db, config: ctx.config, log, mailer: createMailer(ctx.db, ctx.config, log), userId: ctx.account.user.id, callId: 'c', signal: new AbortController().signal, variables: () => ({}), language: 'en-US', customer }
}

t.test('connecting: the account check (GET /users/me) names the account (a personal access token); the scopes an OAuth app asks for', async (t) => {
  const ctx = await booked(t)
  // PUT /v1/integrations/booking_two checked the token once and named the account after it.
  t.equal((await integrationOf(ctx.db, ctx.account.user.id, 'booking_two'))?.account_label, 'Ada Lovelace (ada@ada-clinic.example)')
  const me = ctx.cly.requests.filter((r) => r.path === '/users/me')
  t.equal(me.length, 1)
  t.equal(me[0].headers.authorization, `Bearer ${PAT}`)
  t.same(PROVIDER_INFO.booking_two.scopes, ['users:read', 'event_types:read', 'scheduled_events:write'], 'the scopes an OAuth app asks for')
})

t.test('a call: free times over ten days asked in windows of at most 7 days, one booked through the Scheduling API', async (t) => {
  const ctx = await booked(t)
  const later = ctx.type.openings[4]
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('find_times'), arguments: { from: local(new Date(Date.now() + DAY)), to: local(new Date(Date.now() + 11 * DAY)) } }] },
    { text: 'I have times this week and next.' },
    { toolCalls: [{ name: ctx.fn('book'), arguments: { start: local(later), name: 'Grace Hopper', email: 'grace@example.com' } }] },
    { text: 'You are booked.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'When can we talk?', /this week and next/)
  const windows = ctx.cly.requests.filter((r) => r.path === '/event_type_available_times')
  t.equal(windows.length, 2, 'ten days: two windows')
  for (const w of windows) {
    t.equal(w.query.get('event_type'), ctx.cly.uriOf('event_types', ctx.type.uuid))
    t.ok(Date.parse(w.query.get('end_time')!) - Date.parse(w.query.get('start_time')!) <= 7 * DAY, 'at most 7 days')
    t.ok(Date.parse(w.query.get('start_time')!) > Date.now() - 60_000, 'not in the past')
  }
  t.equal(windows[0].query.get('end_time'), windows[1].query.get('start_time'), 'the windows meet')
  t.same(JSON.parse(lastToolMessage(ctx.standin)).free_times.map((f: { start: string }) => f.start), ctx.type.openings.map(local), 'both weeks\' times')

  await typedTurn(client, 'Next week\'s second one. Grace Hopper, grace@example.com.', /booked/)
  const invitee = ctx.cly.requests.find((r) => r.method === 'POST' && r.path === '/invitees')!
  t.same(invitee.body, { event_type: ctx.cly.uriOf('event_types', ctx.type.uuid), start_time: later.toISOString(), invitee: { name: 'Grace Hopper', email: 'grace@example.com', timezone: ZONE } })
  t.equal(ctx.cly.events.length, 1)
  t.match(ctx.cly.events[0], { status: 'active', start: later, invitees: [{ email: 'grace@example.com' }] })
  client.hangup()
  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  t.match(done.transcription.filter((item: { speaker: string }) => item.speaker === 'tool'), [{ tool: { type: 'booking_two' } }, { tool: { type: 'booking_two' } }])
})

t.test('realtime engine: the booking functions in session.update, the model books, Calendly gets the invitee', async (t) => {
  const cly = await startCalendlyStandIn(t)
  cly.tokens.add(PAT)
  const type = cly.addEventType({ name: 'Intro call', slug: 'intro', duration: 30, openings: morning(2) })
  const realtime = await startRealtimeStandin(t)
  const ctx = await setup(t, { ...ENV, VOICE_ENGINE: 'cascade', REALTIME_URL: realtime.url, REALTIME_API_KEY: 'sk-realtime-test', CALENDLY_API_URL: cly.apiUrl }, { workers: true })
  const listening = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  t.equal((await ctx.app.inject({ method: 'PUT', url: '/v1/integrations/booking_two', headers: account.headers, payload: { api_key: PAT } })).statusCode, 200)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi!', engine: 'realtime' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Ada', llm_id: llm._id } })).json()
  t.equal((await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id as string}/tools`, headers: account.headers, payload: { tool_type: 'booking_two', settings: { name: 'Calendly', event_type_id: 'intro', time_zone: ZONE } } })).statusCode, 201)
  const start = type.openings[1]
  realtime.replies.push({ calls: [{ name: 'Calendly_book', arguments: JSON.stringify({ start: local(start), name: 'Grace Hopper', email: 'grace@example.com' }) }] }, { text: 'You are booked.' })

  const { callId, client } = await startWebCall(ctx.app, listening, account.headers, agent._id)
  const update = realtime.events.find((e) => e.type === 'session.update') as any
  t.match(update.session.tools.map((tool: { name: string }) => tool.name), ['Calendly_find_times', 'Calendly_book', 'Calendly_find_booking', 'Calendly_reschedule', 'Calendly_cancel'])
  t.match(update.session.instructions, /Calendly \(the Calendly_… functions\) books appointments\. Now it is .* in Europe\/Berlin/, 'the prompt says today\'s date in the tool\'s zone')
  await typedTurn(client, 'Book me at half past nine, Grace Hopper, grace@example.com.', /booked/)
  t.match(cly.events, [{ status: 'active', start, invitees: [{ name: 'Grace Hopper', email: 'grace@example.com' }] }])
  const outputs = realtime.events.filter((e: any) => e.type === 'conversation.item.create' && e.item?.type === 'function_call_output').map((e: any) => JSON.parse(String(e.item.output)))
  t.match(outputs, [{ booked: { start: local(start), spoken: /at 9:30 AM$/ } }])
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done.transcription.find((item: { speaker: string }) => item.speaker === 'tool'), { tool: { name: 'Calendly_book', type: 'booking_two' } })
})

t.test('a call: the booking found by e-mail, rescheduled (the new time booked first, then the old one cancelled), then cancelled', async (t) => {
  const ctx = await booked(t)
  const [first, , third] = ctx.type.openings
  const existing = ctx.cly.book(ctx.type.uuid, first, { name: 'Grace Hopper', email: 'grace@example.com', timezone: 'America/New_York' })
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('find_booking'), arguments: { email: 'grace@example.com' } }] },
    { text: 'I found your booking.' },
    { toolCalls: [{ name: ctx.fn('reschedule'), arguments: { booking_id: existing.uuid, start: local(third) } }] },
    { text: 'It is moved.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'I booked something, grace@example.com.', /found your booking/)
  const search = ctx.cly.requests.find((r) => r.path === '/scheduled_events')!
  t.equal(search.query.get('invitee_email'), 'grace@example.com')
  t.equal(search.query.get('status'), 'active')
  t.equal(search.query.get('user'), ctx.cly.uriOf('users', ctx.cly.user.uuid))
  t.match(lastToolMessage(ctx.standin), existing.uuid)

  await typedTurn(client, 'Move it to ten.', /moved/)
  const writes = ctx.cly.requests.filter((r) => r.method === 'POST').map((r) => r.path)
  t.same(writes, ['/invitees', `/scheduled_events/${existing.uuid}/cancellation`], 'booked first, cancelled after')
  const moved = ctx.cly.events.find((e) => e.uuid !== existing.uuid)!
  t.match(moved, { status: 'active', start: third, invitees: [{ name: 'Grace Hopper', email: 'grace@example.com', timezone: 'America/New_York' }] })
  t.equal(existing.status, 'canceled')

  ctx.standin.replies.push({ toolCalls: [{ name: ctx.fn('cancel'), arguments: { booking_id: moved.uuid, reason: 'Plans changed' } }] }, { text: 'It is cancelled.' })
  await typedTurn(client, 'Cancel it after all.', /cancelled/)
  t.equal(moved.status, 'canceled')
  t.equal(moved.cancellation?.reason, 'Plans changed')
  client.hangup()
  await finishedCall(ctx.app, ctx.account.headers, callId)
})

t.test('a reschedule whose new time was taken meanwhile keeps the old booking; a booking whose time was taken is reported', async (t) => {
  const ctx = await booked(t)
  const [first, second, third] = ctx.type.openings
  const existing = ctx.cly.book(ctx.type.uuid, first, { name: 'Grace Hopper', email: 'grace@example.com' })
  const context = liveContext(ctx)
  const loaded = await loadAgentLive(context, ctx.agent._id)
  t.teardown(loaded.close)
  const run = async (what: string, args: Record<string, unknown>) => await loaded.tools.find((tool) => tool.spec.name === ctx.fn(what))!.run(args, context)

  ctx.cly.takeNextSlot = true
  t.match(JSON.parse((await run('reschedule', { booking_id: existing.uuid, start: local(third), email: 'grace@example.com' })).output), { rescheduled: null, problem: /taken .*stays/ })
  t.equal(existing.status, 'active', 'the old booking stays')
  t.notOk(ctx.cly.requests.some((r) => r.path.endsWith('/cancellation')), 'nothing cancelled')

  ctx.cly.takeNextSlot = true
  t.match(JSON.parse((await run('book', { start: local(second), name: 'Grace Hopper', email: 'grace@example.com' })).output), { booked: null, problem: /taken/ })
  t.same(ctx.cly.events.filter((e) => e.invitees[0].email === 'grace@example.com').length, 1, 'nothing new for the caller')
})

t.test('a revoked token: reported to the model, the call goes on', async (t) => {
  const ctx = await booked(t)
  ctx.cly.tokens.delete(PAT)
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('find_times'), arguments: { from: local(ctx.type.openings[0]), to: local(ctx.type.openings[2]) } }] },
    { text: 'I cannot reach the calendar right now.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'When are you free?', /cannot reach/)
  t.match(lastToolMessage(ctx.standin), /^Error: Calendly refused this account's connection/)
  t.match(await integrationOf(ctx.db, ctx.account.user.id, 'booking_two'), { status: 'revoked' })
  client.hangup()
  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  t.equal(done.transcription.at(-1).speaker, 'agent', 'the call went on')
})

t.test('the event type named by its slug is found on the second page of the user\'s event types', async (t) => {
  const ctx = await booked(t, {
    eventTypeId: (_type, cly) => {
      for (let i = 0; i < 120; i++) cly.addEventType({ name: `Other ${i}`, slug: `other-${i}`, duration: 15 })
      return 'late-one'
    }
  })
  const late = ctx.cly.addEventType({ name: 'Late one', slug: 'late-one', duration: 45, openings: morning(2) })
  const context = liveContext(ctx)
  const loaded = await loadAgentLive(context, ctx.agent._id)
  t.teardown(loaded.close)
  const outcome = await loaded.tools.find((tool) => tool.spec.name === ctx.fn('find_times'))!.run({ from: local(morning(2)[0]), to: local(new Date(morning(2)[2].getTime() + 3_600_000)) }, context)
  t.notMatch(outcome.output, /^Error/)
  const lists = ctx.cly.requests.filter((r) => r.path === '/event_types')
  t.equal(lists.length, 2, 'two pages of event types')
  t.ok(lists[1].query.has('page_token'), 'the second by its page token')
  t.equal(ctx.cly.requests.find((r) => r.path === '/event_type_available_times')?.query.get('event_type'), ctx.cly.uriOf('event_types', late.uuid))
})

t.test('OAuth: an access token that expires mid-call is refreshed once at Calendly\'s token endpoint and the booking goes on; a revoked grant is reported', async (t) => {
  const ctx = await booked(t, { oauth: true })
  const [first, second] = ctx.type.openings
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('find_times'), arguments: { from: local(new Date(first.getTime() - 3_600_000)), to: local(new Date(first.getTime() + 3_600_000)) } }] },
    { text: 'Nine or half past nine.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, ctx.account.headers, ctx.agent._id)
  await typedTurn(client, 'When can we talk?', /half past/)
  const [issued] = ctx.cly.oauth.accessTokens()
  t.equal(ctx.cly.requests.find((r) => r.path === '/users/me')?.headers.authorization, `Bearer ${issued.token}`, 'the OAuth access token is used')

  ctx.cly.oauth.expire()
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('book'), arguments: { start: local(second), name: 'Grace Hopper', email: 'grace@example.com' } }] },
    { text: 'You are booked.' }
  )
  await typedTurn(client, 'Half past nine. Grace Hopper, grace@example.com.', /booked/)
  t.same(ctx.cly.oauth.tokenRequests.map((form) => form.get('grant_type')), ['authorization_code', 'refresh_token'], 'connected with a code (PKCE), then one refresh')
  t.ok(ctx.cly.oauth.tokenRequests[0].has('code_verifier'), 'the code exchange carries the PKCE verifier')
  t.equal(ctx.cly.oauth.tokenRequests[0].get('client_id'), CLIENT_ID)
  const fresh = ctx.cly.oauth.accessTokens().at(-1)!
  t.ok(fresh.live && fresh.token !== issued.token, 'a new access token')
  t.equal(ctx.cly.requests.filter((r) => r.method === 'POST' && r.path === '/invitees').at(-1)?.headers.authorization, `Bearer ${fresh.token}`, 'the booking went with it')
  t.equal(ctx.cly.events.length, 1, 'booked')

  ctx.cly.oauth.revokeAll()
  ctx.standin.replies.push(
    { toolCalls: [{ name: ctx.fn('find_booking'), arguments: { email: 'grace@example.com' } }] },
    { text: 'I cannot reach the calendar right now.' }
  )
  await typedTurn(client, 'Did it work?', /cannot reach/)
  t.match(lastToolMessage(ctx.standin), /^Error: Calendly refused this account's connection/)
  t.match(await integrationOf(ctx.db, ctx.account.user.id, 'booking_two'), { status: 'revoked' })
  client.hangup()
  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  t.equal(done.transcription.at(-1).speaker, 'agent', 'the call went on')
})

t.test('a 429 is retried once; a free Calendly plan and a missing e-mail address are told to the model in words it can act on', async (t) => {
  const ctx = await booked(t)
  const context = liveContext(ctx)
  const loaded = await loadAgentLive(context, ctx.agent._id)
  t.teardown(loaded.close)
  const run = async (what: string, args: Record<string, unknown>) => await loaded.tools.find((tool) => tool.spec.name === ctx.fn(what))!.run(args, context)
  const [first, second] = ctx.type.openings

  ctx.cly.queued.push({ status: 429, headers: { 'retry-after': '0', 'x-ratelimit-limit': '500', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '60' }, body: { title: 'Too Many Requests', message: 'You have exceeded the rate limit' } })
  const found = JSON.parse((await run('find_times', { from: local(first), to: local(second) })).output)
  t.same(found.free_times.map((f: { start: string }) => f.start), [local(first), local(second)], 'answered after one retry')
  t.equal(ctx.cly.requests.filter((r) => r.path === '/users/me').length, 3, 'the check on connect, then the 429 and its retry')

  await t.rejects(run('book', { start: local(first), name: 'Grace Hopper' }), /e-mail address: ask the caller for it/)
  t.notOk(ctx.cly.requests.some((r) => r.path === '/invitees'), 'nothing sent without an address')

  ctx.cly.plan = 'free'
  await t.rejects(run('book', { start: local(first), name: 'Grace Hopper', email: 'grace@example.com' }), /Scheduling API needs a paid Calendly plan/)
  t.equal(ctx.cly.events.length, 0)
})

t.test('an event type the account does not have is named in the answer, with some of those it has', async (t) => {
  const ctx = await booked(t, { eventTypeId: () => 'no-such-type' })
  const context = liveContext(ctx)
  const loaded = await loadAgentLive(context, ctx.agent._id)
  t.teardown(loaded.close)
  await t.rejects(loaded.tools.find((tool) => tool.spec.name === ctx.fn('find_times'))!.run({ from: local(ctx.type.openings[0]), to: local(ctx.type.openings[2]) }, context),
    /Calendly has no event type "no-such-type" for Ada Lovelace; it has: Intro call \(intro\)/)
  t.notOk(ctx.cly.requests.some((r) => r.path === '/event_type_available_times'), 'no availability asked')
})
