import t from 'tap'
import type { Test } from 'tap'
import { QUEUES } from '../../src/jobs/queues.ts'
import { placeCallback } from '../../src/modules/calls/phone-calls.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { signedInWithKey } from '../helpers/console-client.ts'
import { poll } from '../helpers/poll.ts'
import { sid, startTwilioStandIn, type TwilioStandIn } from '../helpers/twilio-stand-in.ts'
import { finishedCall } from '../helpers/voice-client.ts'

// Automatic callbacks (an agent's callback_settings; docs/calls.md, "Callbacks"), through the API against the Twilio
// stand-in on loopback: the person's phone does not answer or is busy, the call is placed again after the agent's
// retry_delay_minutes (times CALL_TIME_SCALE), each callback a new call linked to the first.

const PUBLIC = 'https://voice.example.test'
const ACCOUNT_SID = sid('AC')
const AUTH_TOKEN = 'installation-auth-token'
const OUR_NUMBER = '+14155550100'
const OTHER_NUMBER = '+14155550101'
const PERSON = '+14155550111'

// 5 minutes is 0.3 s; 1440 minutes (a day) is 86 s, which outlasts a test: the callback stays scheduled.
const TIME_SCALE = '0.001'
const SOON = 5
const NOT_IN_THIS_TEST = 1440

type Ctx = TestContext & { twilio: TwilioStandIn }

async function listen (t: Test, env: Record<string, string> = {}): Promise<Ctx> {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(ACCOUNT_SID, AUTH_TOKEN)
  twilio.offer('US', [OUR_NUMBER, OTHER_NUMBER].map((number) => ({ phone_number: number, area_code: '415', locality: 'San Francisco', region: 'CA' })))
  const ctx = await setup(t, {
    PHONE_CARRIER: 'twilio',
    TWILIO_ACCOUNT_SID: ACCOUNT_SID,
    TWILIO_AUTH_TOKEN: AUTH_TOKEN,
    TWILIO_API_URL: twilio.url,
    TWILIO_ALLOW_PRIVATE_BASE_URL: 'true',
    PUBLIC_BASE_URL: PUBLIC,
    CALL_TIME_SCALE: TIME_SCALE,
    ...env
  }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  twilio.route(PUBLIC, url)
  return { ...ctx, url, twilio }
}

/** An agent with callback_settings (none: the defaults, callbacks off) answering and calling from a number of the account's. */
async function agentWithNumber (ctx: TestContext, account: Account, callbacks?: Record<string, unknown>, number = OUR_NUMBER) {
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello, this is the clinic.', general_prompt: 'You are the clinic\'s receptionist.' } })).json()
  const created = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: llm._id } })
  if (created.statusCode !== 201) throw new Error(created.body)
  const agentId = created.json()._id as string
  if (callbacks !== undefined) await patchCallbacks(ctx, account, agentId, callbacks)
  const bought = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: number, inbound_agent_id: agentId, outbound_agent_id: agentId } })
  if (bought.statusCode !== 201) throw new Error(bought.body)
  return { agentId, numberId: bought.json()._id as string }
}

async function patchCallbacks (ctx: TestContext, account: Account, agentId: string, callbacks: Record<string, unknown>) {
  const res = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agentId}`, headers: account.headers, payload: { callback_settings: callbacks } })
  if (res.statusCode !== 200) throw new Error(res.body)
}

async function call (ctx: TestContext, account: Account, agentId: string, body: Record<string, unknown> = {}): Promise<string> {
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agentId, from_number: OUR_NUMBER, to_number: PERSON, ...body } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json()._id
}

const detail = async (ctx: TestContext, account: Account, id: string) => (await ctx.app.inject({ method: 'GET', url: `/v1/call/${id}`, headers: account.headers })).json()

/** The Calls API's calls to the person, in order (each a ring of their phone). */
const rings = (ctx: Ctx) => ctx.twilio.calls.filter((c) => c.direction === 'outbound-api' && c.to === PERSON)

/** The first call's callbacks once `done` holds for them. */
async function callbacksOf (ctx: TestContext, account: Account, id: string, done: (callbacks: any[]) => boolean, message: string): Promise<any[]> {
  return await poll(async () => (await detail(ctx, account, id)).callbacks as any[], done, { message: (last) => `${message}: ${JSON.stringify(last)}` })
}

/** Waits for placeCallback jobs to be done. */
async function completed (ctx: TestContext, jobs: Array<string | null>) {
  await poll(async () => await Promise.all(jobs.map(async (job) => (await ctx.boss.getJobById(QUEUES.placeCallback, job!))?.state)),
    (states) => states.every((state) => state === 'completed'), { message: (states) => `the jobs did not complete: ${JSON.stringify(states)}` })
}

t.test('a call not answered is placed again after the delay, linked to the first, at most max_attempts times', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { agentId } = await agentWithNumber(ctx, account, { enabled: true, max_attempts: 2, retry_delay_minutes: SOON, on_outcomes: ['no_answer'] })
  ctx.twilio.callee(PERSON, { answer: 'no-answer' })
  const first = await call(ctx, account, agentId, { custom_data: { crm_id: 7 }, dynamic_context: { name: 'Ada' }, ring_timeout_seconds: 20 })

  const callbacks = await callbacksOf(ctx, account, first, (list) => list.length === 2 && list.every((c) => c.status === 'placed'), 'two callbacks placed')
  const placed = callbacks.map((c) => c.call_id as string)
  // The last callback's end decides whether a third is scheduled, in the same transaction: once it ended, none can come.
  const last = await finishedCall(ctx.app, account.headers, placed[1])
  const firstCall = await detail(ctx, account, first)
  t.match(firstCall, { call_status: 'failed', disconnection_reason: 'no_answer', callback_of: null, callback_attempt: null })
  t.match(callbacks, [{ attempt: 1, max_attempts: 2, status: 'placed', reason: null }, { attempt: 2, max_attempts: 2, status: 'placed', reason: null }])
  t.ok(callbacks[0].scheduled_at >= firstCall.end_timestamp + 250, 'due after the scaled delay of 5 minutes (0.3 s)')
  t.same((await detail(ctx, account, first)).callbacks, callbacks, 'no third callback: max_attempts is 2')
  t.equal(rings(ctx).length, 3, 'the person\'s phone rang three times: the call and two callbacks')
  t.same(rings(ctx).map((c) => c.from), [OUR_NUMBER, OUR_NUMBER, OUR_NUMBER])
  t.same(rings(ctx).map((c) => c.timeout), [20, 20, 20], 'with the first call\'s ring time')

  for (const [i, id] of placed.entries()) {
    const callback = i === 1 ? last : await finishedCall(ctx.app, account.headers, id)
    t.match(callback, {
      call_type: 'phone', direction: 'outbound', agent_id: agentId, call_from: OUR_NUMBER, call_to: PERSON, call_status: 'failed', disconnection_reason: 'no_answer',
      custom_data: { crm_id: 7 }, dynamic_context: { name: 'Ada' }, callback_of: first, callback_attempt: i + 1, simulated: false
    }, `callback ${i + 1} is a new call linked to the first`)
    t.same(callback.callbacks, callbacks, 'a callback shows its chain too')
  }
  const listed = await ctx.app.inject({ method: 'GET', url: `/v1/call/list?callback_of=${first}&sort_order=asc`, headers: account.headers })
  t.same(listed.json().map((c: { _id: string }) => c._id), placed, 'the list filtered by callback_of: the callbacks in order')
  const none = await ctx.app.inject({ method: 'GET', url: `/v1/call/list?callback_of=${placed[0]}`, headers: account.headers })
  t.same(none.json(), [], 'a callback has no callbacks of its own: the chain hangs off the first call')
  const other = await createAccount(ctx.db)
  t.same((await ctx.app.inject({ method: 'GET', url: `/v1/call/list?callback_of=${first}`, headers: other.headers })).json(), [], 'another account sees none')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/call/list?callback_of=nope', headers: account.headers })).statusCode, 400)
  t.same(ctx.twilio.errors, [])
})

t.test('an outcome not in on_outcomes, callbacks off, or a call that connected: no callback', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { agentId } = await agentWithNumber(ctx, account, { enabled: true, max_attempts: 3, retry_delay_minutes: SOON, on_outcomes: ['no_answer'] })
  ctx.twilio.callee(PERSON, { answer: 'busy' })
  const busy = await finishedCall(ctx.app, account.headers, await call(ctx, account, agentId))
  t.match(busy, { disconnection_reason: 'busy', callbacks: [] }, 'busy is not among on_outcomes')

  await patchCallbacks(ctx, account, agentId, { enabled: false, on_outcomes: ['no_answer', 'busy'] })
  const off = await finishedCall(ctx.app, account.headers, await call(ctx, account, agentId))
  t.match(off, { disconnection_reason: 'busy', callbacks: [] }, 'callbacks off')

  // A web call is outbound too, and never called back.
  await patchCallbacks(ctx, account, agentId, { enabled: true, on_outcomes: ['no_answer', 'busy', 'failed'] })
  const web = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agentId } })
  const webEnd = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${web.json()._id as string}/end`, headers: account.headers, payload: { outcome: 'failed', disconnection_reason: 'no_answer' } })
  t.equal(webEnd.statusCode, 202)
  t.same((await detail(ctx, account, web.json()._id)).callbacks, [], 'a web call')
  t.equal(await ctx.db.selectFrom('call_callbacks').select('id').execute().then((rows) => rows.length), 0)
  t.equal(rings(ctx).length, 2)
})

t.test('an inbound call from the person cancels the callbacks scheduled to them; another caller or account does not', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { agentId } = await agentWithNumber(ctx, account, { enabled: true, max_attempts: 2, retry_delay_minutes: NOT_IN_THIS_TEST, on_outcomes: ['no_answer', 'busy'] })
  ctx.twilio.callee(PERSON, { answer: 'no-answer' })
  const first = await call(ctx, account, agentId)
  const [scheduled] = await callbacksOf(ctx, account, first, (list) => list.length === 1, 'a callback scheduled')
  t.match(scheduled, { attempt: 1, max_attempts: 2, status: 'scheduled', call_id: null, reason: null })
  t.ok(scheduled.scheduled_at > Date.now() + 60_000, 'due a (scaled) day later')

  // Someone else calls in, and the same person calls another account: nothing changes.
  const { call: stranger } = await ctx.twilio.dialIn('+14155550177', OUR_NUMBER)
  await stranger.hangup()
  const other = await createAccount(ctx.db)
  await agentWithNumber(ctx, other, undefined, OTHER_NUMBER)
  const { call: elsewhere } = await ctx.twilio.dialIn(PERSON, OTHER_NUMBER)
  await elsewhere.hangup()
  t.match((await detail(ctx, account, first)).callbacks, [{ status: 'scheduled' }], 'still scheduled')

  // The person calls the account back.
  const { call: back, webhook } = await ctx.twilio.dialIn(PERSON, OUR_NUMBER)
  t.equal(webhook.status, 200)
  t.match((await detail(ctx, account, first)).callbacks, [{ attempt: 1, status: 'cancelled', reason: 'called_back', call_id: null }], 'cancelled with the inbound call')
  await back.hangup()

  // The job at its time (delivered now) finds it cancelled: no call.
  const { id } = await ctx.db.selectFrom('call_callbacks').select('id').executeTakeFirstOrThrow()
  await completed(ctx, [await ctx.boss.send(QUEUES.placeCallback, { callbackId: id })])
  t.equal(rings(ctx).length, 1, 'the person is not called again')
  t.match((await detail(ctx, account, first)).callbacks, [{ status: 'cancelled' }])
  t.same(ctx.twilio.errors, [])
})

t.test('a callback job delivered twice, or run at once by several workers, places one call', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { agentId } = await agentWithNumber(ctx, account, { enabled: true, max_attempts: 1, retry_delay_minutes: NOT_IN_THIS_TEST, on_outcomes: ['busy'] })
  ctx.twilio.callee(PERSON, { answer: 'busy' })
  const first = await call(ctx, account, agentId)
  await callbacksOf(ctx, account, first, (list) => list.length === 1, 'a callback scheduled')
  const { id } = await ctx.db.selectFrom('call_callbacks').select('id').executeTakeFirstOrThrow()

  const deps = { db: ctx.db, boss: ctx.boss, config: ctx.config }
  const jobs = await Promise.all([ctx.boss.send(QUEUES.placeCallback, { callbackId: id }), ctx.boss.send(QUEUES.placeCallback, { callbackId: id })])
  await Promise.all(Array.from({ length: 8 }, async () => { await placeCallback(deps, id) }))
  await completed(ctx, jobs)

  const [callback] = (await detail(ctx, account, first)).callbacks
  t.match(callback, { attempt: 1, status: 'placed' })
  const calls = await ctx.db.selectFrom('calls').select(['id']).where('call_to', '=', PERSON).execute()
  t.equal(calls.length, 2, 'the first call and one callback')
  await finishedCall(ctx.app, account.headers, callback.call_id)
  t.equal(rings(ctx).length, 2, 'the person\'s phone rang twice')
})

t.test('checked at placing time: agent deleted, made inactive, callbacks turned off → cancelled; number gone, no credits → failed', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const settings = { enabled: true, max_attempts: 2, retry_delay_minutes: NOT_IN_THIS_TEST, on_outcomes: ['no_answer'] }
  const { agentId } = await agentWithNumber(ctx, account, settings)
  ctx.twilio.callee(PERSON, { answer: 'no-answer' })

  /** A first call that was not answered, its callback scheduled; then `meanwhile`, then the callback's time comes. */
  const attempt = async (meanwhile: () => Promise<void>, agent = agentId, from = OUR_NUMBER) => {
    const first = await call(ctx, account, agent, { from_number: from })
    await callbacksOf(ctx, account, first, (list) => list.length === 1, 'a callback scheduled')
    await meanwhile()
    const { id } = await ctx.db.selectFrom('call_callbacks').select('id').where('callback_of', '=', first).executeTakeFirstOrThrow()
    await ctx.boss.send(QUEUES.placeCallback, { callbackId: id })
    return (await callbacksOf(ctx, account, first, (list) => list[0].status !== 'scheduled', 'the callback settled'))[0]
  }

  t.match(await attempt(async () => { await patchCallbacks(ctx, account, agentId, { enabled: false }) }), { status: 'cancelled', reason: 'callbacks_disabled', call_id: null })
  await patchCallbacks(ctx, account, agentId, { enabled: true })
  t.match(await attempt(async () => { await patchCallbacks(ctx, account, agentId, { max_attempts: 1 }) }), { status: 'placed' }, 'attempt 1 of 1 is still allowed')
  await poll(() => ctx.db.selectFrom('calls').select('id').where('call_status', '=', 'started').execute(), (rows) => rows.length === 0)
  await patchCallbacks(ctx, account, agentId, settings)
  const inactive = async (status: string) => {
    const res = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agentId}`, headers: account.headers, payload: { status } })
    t.equal(res.statusCode, 200)
  }
  t.match(await attempt(async () => { await inactive('inactive') }), { status: 'cancelled', reason: 'agent_inactive' })
  await inactive('active')
  // The account's balance is spent (a charge of it all), and auto top-up is off.
  t.match(await attempt(async () => {
    const { credit_balance: balance } = (await ctx.app.inject({ method: 'GET', url: '/v1/subscription', headers: account.headers })).json()
    await ctx.db.insertInto('credit_ledger').values({ id: '65000000aaaaaaaaaaaaaaaa', user_id: account.user.id, kind: 'adjustment', amount: -balance, description: 'spent' }).execute()
  }), { status: 'failed', reason: 'no_credits' })
  await ctx.db.deleteFrom('credit_ledger').where('id', '=', '65000000aaaaaaaaaaaaaaaa').execute()
  t.match(await attempt(async () => {
    t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/agent/${agentId}`, headers: account.headers })).statusCode, 204)
  }), { status: 'cancelled', reason: 'agent_deleted' })
  const second = await agentWithNumber(ctx, account, settings, OTHER_NUMBER)
  t.match(await attempt(async () => {
    t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/phone-number/${second.numberId}`, headers: account.headers })).statusCode, 204)
  }, second.agentId, OTHER_NUMBER), { status: 'failed', reason: 'number_gone' })
  // Six first calls and the one callback placed.
  t.equal(rings(ctx).length, 7)
})

t.test('an outside runtime\'s voicemail counts as on_outcomes voicemail; its callback is a new call for the runtime', async (t) => {
  const ctx = await setup(t, { CALL_RUNTIME: 'external', CALL_TIME_SCALE: TIME_SCALE }, { workers: true })
  const account = await createAccount(ctx.db)
  const { agentId } = await agentWithNumber(ctx, account, { enabled: true, max_attempts: 1, retry_delay_minutes: SOON, on_outcomes: ['voicemail'] })
  const first = await call(ctx, account, agentId)
  const end = async (id: string, body: Record<string, unknown>) => {
    const res = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${id}/end`, headers: account.headers, payload: body })
    t.equal(res.statusCode, 202, res.body)
  }
  // The runtime reached the mailbox and left a message: completed, yet a voicemail.
  await end(first, { outcome: 'completed', disconnection_reason: 'voicemail', transcription: [{ speaker: 'agent', content: 'Please call us back.', timestamp: Date.now() }] })
  const [callback] = await callbacksOf(ctx, account, first, (list) => list[0]?.status === 'placed', 'the callback placed')
  t.match(await detail(ctx, account, callback.call_id), { call_status: 'started', direction: 'outbound', call_from: OUR_NUMBER, call_to: PERSON, callback_of: first, callback_attempt: 1 })
  await end(callback.call_id, { outcome: 'failed', disconnection_reason: 'voicemail_reached' })
  t.equal((await detail(ctx, account, first)).callbacks.length, 1, 'max_attempts 1: no second callback')
})

t.test('the console\'s call page says what became of the callbacks', async (t) => {
  const ctx = await setup(t, { CALL_RUNTIME: 'external', CALL_TIME_SCALE: TIME_SCALE }, { workers: true })
  const { account, browser } = await signedInWithKey(ctx)
  const { agentId } = await agentWithNumber(ctx, account, { enabled: true, max_attempts: 2, retry_delay_minutes: SOON, on_outcomes: ['busy'] })
  const first = await call(ctx, account, agentId)
  await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${first}/end`, headers: account.headers, payload: { outcome: 'failed', disconnection_reason: 'busy' } })
  const [placed] = await callbacksOf(ctx, account, first, (list) => list[0]?.status === 'placed', 'the callback placed')
  await patchCallbacks(ctx, account, agentId, { retry_delay_minutes: NOT_IN_THIS_TEST })
  await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${placed.call_id as string}/end`, headers: account.headers, payload: { outcome: 'failed', disconnection_reason: 'busy' } })
  const [, scheduled] = await callbacksOf(ctx, account, first, (list) => list.length === 2, 'the second callback scheduled')

  const page = (await browser.get(`/calls/${placed.call_id as string}`)).body
  t.match(page, `<dt>Callback of</dt><dd><a href="/calls/${first}">the call of ${first}</a> (attempt 1)</dd>`)
  t.match(page, 'Callback placed (attempt 1 of 2): this call')
  t.match(page, `Callback scheduled for <time datetime="${new Date(scheduled.scheduled_at as number).toISOString()}">`)
  t.match(page, '(attempt 2 of 2)')

  const inbound = await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: OUR_NUMBER, from_number: PERSON } })
  t.equal(inbound.statusCode, 201)
  const firstPage = (await browser.get(`/calls/${first}`)).body
  t.match(firstPage, `Callback placed (attempt 1 of 2): <a href="/calls/${placed.call_id as string}">its call</a>`)
  t.match(firstPage, 'Callback cancelled: the person called back (attempt 2 of 2)')
  t.notMatch(firstPage, 'Callback of')
})
