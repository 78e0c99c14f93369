import t, { type Test } from 'tap'
import { createLogger } from '../../../src/logger.ts'
import { createMailer } from '../../../src/mail/mailer.ts'
import { localOf, zonedToUtc } from '../../../src/modules/capabilities/booking/time.ts'
import { loadLive } from '../../../src/modules/capabilities/load.ts'
import { createAccount, setup, type Account, type TestContext } from '../../helpers/app.ts'
import { startCalendlyStandIn, type CalendlyEventType, type CalendlyStandIn } from '../../helpers/calendly-standin.ts'
import { startOpenAiHttpStandin, type OpenAiHttpStandin } from '../../helpers/openai-http-standin.ts'
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

async function booked (t: Test, eventTypeId?: (type: CalendlyEventType, cly: CalendlyStandIn) => string): Promise<Booked> {
  const cly = await startCalendlyStandIn(t)
  cly.tokens.add(PAT)
  const type = cly.addEventType({ name: 'Intro call', slug: 'intro', duration: 30, openings: [...morning(2), ...morning(9)] })
  const standin = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, { ...ENV, VOICE_ENGINE: 'cascade', STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url, CALENDLY_API_URL: cly.apiUrl }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const connected = await ctx.app.inject({ method: 'PUT', url: '/v1/integrations/booking_two', headers: account.headers, payload: { api_key: PAT } })
  t.equal(connected.statusCode, 200, connected.body)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi!', general_prompt: 'You are Ada.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Ada', llm_id: llm._id } })).json()
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id as string}/tools`, headers: account.headers, payload: { tool_type: 'booking_two', settings: { name: 'Calendly', event_type_id: eventTypeId?.(type, cly) ?? cly.uriOf('event_types', type.uuid), time_zone: ZONE } } })
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

t.test('connect with a personal access token: checked once with GET /users/me, the account name shown', async (t) => {
  const ctx = await booked(t)
  const me = ctx.cly.requests.filter((r) => r.path === '/users/me')
  t.equal(me.length, 1, 'one account check on connect')
  t.equal(me[0].headers.authorization, `Bearer ${PAT}`)
  const list = (await ctx.app.inject({ method: 'GET', url: '/v1/integrations', headers: ctx.account.headers })).json()
  t.match(list.find((i: { provider: string }) => i.provider === 'booking_two'), { connected: true, account_label: 'Ada Lovelace (ada@ada-clinic.example)' })
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
  t.notMatch(lastToolMessage(ctx.standin), /^Error/)

  await typedTurn(client, 'Next week\'s second one. Grace Hopper, grace@example.com.', /booked/)
  const invitee = ctx.cly.requests.find((r) => r.method === 'POST' && r.path === '/invitees')!
  t.same(invitee.body, { event_type: ctx.cly.uriOf('event_types', ctx.type.uuid), start_time: later.toISOString(), invitee: { name: 'Grace Hopper', email: 'grace@example.com', timezone: ZONE } })
  t.equal(ctx.cly.events.length, 1)
  t.match(ctx.cly.events[0], { status: 'active', start: later, invitees: [{ email: 'grace@example.com' }] })
  client.hangup()
  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  t.match(done.transcription.filter((item: { speaker: string }) => item.speaker === 'tool'), [{ tool: { type: 'booking_two' } }, { tool: { type: 'booking_two' } }])
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
  const loaded = await loadLive(context, ctx.agent._id)
  t.teardown(loaded.close)
  const run = async (what: string, args: Record<string, unknown>) => await loaded.tools.find((tool) => tool.spec.name === ctx.fn(what))!.run(args, context)

  ctx.cly.takeNextSlot = true
  await t.rejects(run('reschedule', { booking_id: existing.uuid, start: local(third) }), /taken/i)
  t.equal(existing.status, 'active', 'the old booking stays')
  t.notOk(ctx.cly.requests.some((r) => r.path.endsWith('/cancellation')), 'nothing cancelled')

  ctx.cly.takeNextSlot = true
  await t.rejects(run('book', { start: local(second), name: 'Grace Hopper', email: 'grace@example.com' }), /taken/i)
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
  t.match(lastToolMessage(ctx.standin), /^Error/)
  client.hangup()
  const done = await finishedCall(ctx.app, ctx.account.headers, callId)
  t.equal(done.transcription.at(-1).speaker, 'agent', 'the call went on')
})

t.test('the event type named by its slug is found on the second page of the user\'s event types', async (t) => {
  const ctx = await booked(t, (_type, cly) => {
    for (let i = 0; i < 120; i++) cly.addEventType({ name: `Other ${i}`, slug: `other-${i}`, duration: 15 })
    return 'late-one'
  })
  const late = ctx.cly.addEventType({ name: 'Late one', slug: 'late-one', duration: 45, openings: morning(2) })
  const context = liveContext(ctx)
  const loaded = await loadLive(context, ctx.agent._id)
  t.teardown(loaded.close)
  const outcome = await loaded.tools.find((tool) => tool.spec.name === ctx.fn('find_times'))!.run({ from: local(morning(2)[0]), to: local(new Date(morning(2)[2].getTime() + 3_600_000)) }, context)
  t.notMatch(outcome.output, /^Error/)
  const lists = ctx.cly.requests.filter((r) => r.path === '/event_types')
  t.equal(lists.length, 2, 'two pages of event types')
  t.ok(lists[1].query.has('page_token'), 'the second by its page token')
  t.equal(ctx.cly.requests.find((r) => r.path === '/event_type_available_times')?.query.get('event_type'), ctx.cly.uriOf('event_types', late.uuid))
})
