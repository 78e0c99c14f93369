import { sql } from 'kysely'
import t, { type Test } from 'tap'
import { newId } from '../../src/db/ids.ts'
import { placeCallback } from '../../src/modules/calls/phone-calls.ts'
import { addDoNotCall, DNC_MAX_NUMBERS } from '../../src/modules/contacts/dnc.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { poll } from '../helpers/poll.ts'

// The do-not-call list (docs/contacts.md, "Do not call"): its API, its ownership, its limit under concurrent adds, and
// its enforcement: make-phone-call refuses a listed number, a scheduled callback to one is cancelled (also when the
// number is listed while the callback is being placed). The tool that fills it during a call: dnc-tool.test.ts.

const OUR_NUMBER = '+14155550100'
const PERSON = '+14155550111'

const add = async (ctx: TestContext, account: Account, payload: Record<string, unknown>) =>
  await ctx.app.inject({ method: 'POST', url: '/v1/dnc', headers: account.headers, payload })
const list = async (ctx: TestContext, account: Account, query = '') =>
  (await ctx.app.inject({ method: 'GET', url: `/v1/dnc${query}`, headers: account.headers })).json()

t.test('add, add again (200, kept as it was), list newest first with a phone_number filter, delete (204, then 404); another account sees none of it', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)

  const first = await add(ctx, account, { phone_number: PERSON, note: 'asked by e-mail' })
  t.equal(first.statusCode, 201, first.body)
  t.match(first.json(), { phone_number: PERSON, source: 'api', call_id: null, note: 'asked by e-mail' })
  t.ok(first.json().created_at > Date.now() - 60_000)
  const again = await add(ctx, account, { phone_number: PERSON, note: 'another note' })
  t.equal(again.statusCode, 200, 'already listed')
  t.same(again.json(), first.json(), 'the entry as it was')
  t.equal((await add(ctx, account, { phone_number: '+4930123456' })).statusCode, 201)

  const all = await list(ctx, account)
  t.match(all, { total: 2, limit: 100, offset: 0 })
  t.same(all.data.map((entry: { phone_number: string }) => entry.phone_number), ['+4930123456', PERSON], 'newest first')
  t.match(await list(ctx, account, `?phone_number=${encodeURIComponent(PERSON)}`), { total: 1, data: [{ phone_number: PERSON, note: 'asked by e-mail' }] })
  t.match(await list(ctx, account, '?limit=1&offset=1'), { total: 2, limit: 1, offset: 1, data: [{ phone_number: PERSON }] })

  // Another account: its own list is empty, and it cannot take this account's numbers off.
  t.match(await list(ctx, other), { total: 0, data: [] })
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/dnc/${PERSON}`, headers: other.headers })).statusCode, 404)
  t.equal((await add(ctx, other, { phone_number: PERSON })).statusCode, 201, 'each account has its own list')

  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/dnc/${PERSON}`, headers: account.headers })).statusCode, 204)
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/dnc/${encodeURIComponent(PERSON)}`, headers: account.headers })).statusCode, 404, 'no longer listed')
  t.match(await list(ctx, account), { total: 1, data: [{ phone_number: '+4930123456' }] })
  t.match(await list(ctx, other), { total: 1, data: [{ phone_number: PERSON }] })
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/dnc' })).statusCode, 401)
})

t.test('bad input answers 400 with the field, never a 500', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  for (const payload of [{}, { phone_number: '4155550111' }, { phone_number: '+0123' }, { phone_number: '+1415555011122334' }, { phone_number: 14155550111 },
    { phone_number: PERSON, phone_numbers: [PERSON] }, { phone_numbers: [] }, { phone_numbers: ['+14155550111', 'nope'] },
    { phone_numbers: Array.from({ length: 1001 }, (_, i) => `+1415${String(i).padStart(7, '0')}`) }, { phone_number: PERSON, note: 'x'.repeat(501) }]) {
    const res = await add(ctx, account, payload)
    t.equal(res.statusCode, 400, JSON.stringify(payload).slice(0, 80))
    t.match(res.json(), { statusCode: 400, error: 'Bad Request', code: /validation_error/ })
  }
  t.equal((await ctx.app.inject({ method: 'DELETE', url: '/v1/dnc/12345', headers: account.headers })).statusCode, 400)
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/dnc?phone_number=abc', headers: account.headers })).statusCode, 400)
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/dnc?limit=1001', headers: account.headers })).statusCode, 400)
  t.match(await list(ctx, account), { total: 0 })
})

t.test('a bulk add lists the new numbers once and says which were listed already', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  t.equal((await add(ctx, account, { phone_number: PERSON })).statusCode, 201)
  const numbers = Array.from({ length: 1000 }, (_, i) => `+1415${String(i).padStart(7, '0')}`)
  const bulk = await add(ctx, account, { phone_numbers: [PERSON, ...numbers.slice(0, 998), numbers[0]], note: 'campaign opt-outs' })
  t.equal(bulk.statusCode, 201, bulk.body)
  t.equal(bulk.json().added.length, 998)
  t.same(bulk.json().already_listed, [PERSON])
  const repeat = await add(ctx, account, { phone_numbers: [PERSON, numbers[5]] })
  t.equal(repeat.statusCode, 200, 'none new')
  t.same(repeat.json(), { added: [], already_listed: [PERSON, numbers[5]] })
  t.match(await list(ctx, account, `?phone_number=${encodeURIComponent(numbers[7])}`), { data: [{ source: 'api', note: 'campaign opt-outs' }] })
  t.equal((await list(ctx, account)).total, 999)
})

t.test('150 concurrent adds of one number make one row (one 201); at the limit, of 150 concurrent adds of new numbers exactly one gets in', async (t) => {
  const ctx = await setup(t, { DATABASE_POOL_SIZE: '20' })
  const account = await createAccount(ctx.db)
  const same = await Promise.all(Array.from({ length: 150 }, async () => await add(ctx, account, { phone_number: PERSON })))
  t.same(same.map((res) => res.statusCode).sort(), [...Array(149).fill(200), 201])
  t.match(await list(ctx, account), { total: 1 })

  // Fill the list to one below the limit directly; then the adds race for the last place.
  await sql`INSERT INTO do_not_call (user_id, phone_number, source)
    SELECT ${account.user.id}, '+1999' || lpad(i::text, 8, '0'), 'api' FROM generate_series(1, ${DNC_MAX_NUMBERS - 2}) i`.execute(ctx.db)
  await ctx.db.updateTable('do_not_call_counts').set({ size: DNC_MAX_NUMBERS - 1 }).where('user_id', '=', account.user.id).execute()
  const racing = await Promise.all(Array.from({ length: 150 }, async (_, i) => await add(ctx, account, { phone_number: `+4930555${String(i).padStart(4, '0')}` })))
  const statuses = racing.map((res) => res.statusCode)
  t.equal(statuses.filter((s) => s === 201).length, 1, 'one number took the last place')
  t.equal(statuses.filter((s) => s === 409).length, 149, JSON.stringify(racing.filter((res) => res.statusCode !== 409).map((res) => res.body)))
  t.match(racing.find((res) => res.statusCode === 409)!.json(), { code: 'dnc_limit_reached', message: /at most 100000/ })
  t.equal((await list(ctx, account, '?limit=1')).total, DNC_MAX_NUMBERS)
  t.same(await ctx.db.selectFrom('do_not_call_counts').select('size').where('user_id', '=', account.user.id).execute(), [{ size: DNC_MAX_NUMBERS }], 'the count is the list\'s')
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/dnc/${PERSON}`, headers: account.headers })).statusCode, 204)
  t.equal((await add(ctx, account, { phone_number: '+4930999999' })).statusCode, 201, 'a removal frees a place')
  t.equal((await add(ctx, account, { phone_number: '+4930999999' })).statusCode, 200, 'a listed number still answers 200 at the limit')
})

t.test('make-phone-call to a listed number answers 409 do_not_call and places no call; once taken off, it is placed', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  t.equal((await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: OUR_NUMBER } })).statusCode, 201)
  await addDoNotCall(ctx.db, account.user.id, { phone_number: PERSON, source: 'campaign' })
  const make = async (headers: Record<string, string> = {}) => await ctx.app.inject({
    method: 'POST', url: '/v1/call/make-phone-call', headers: { ...account.headers, ...headers }, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: PERSON }
  })
  const refused = await make({ 'idempotency-key': 'first-try' })
  t.equal(refused.statusCode, 409)
  t.match(refused.json(), { statusCode: 409, code: 'do_not_call', message: /\+14155550111 \(body.to_number\) is on the account's do-not-call list/ })
  t.equal((await ctx.db.selectFrom('calls').select('id').execute()).length, 0, 'no call stored')
  t.match(await list(ctx, account), { data: [{ phone_number: PERSON, source: 'campaign' }] })

  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/dnc/${PERSON}`, headers: account.headers })).statusCode, 204)
  // A call that is not stored (an agent test's conversation) or another account's: listed without a call.
  await addDoNotCall(ctx.db, account.user.id, { phone_number: '+4930123456', source: 'call', call_id: newId() })
  t.match(await list(ctx, account), { data: [{ phone_number: '+4930123456', source: 'call', call_id: null }] })
  const placed = await make({ 'idempotency-key': 'first-try' })
  t.equal(placed.statusCode, 201, 'the refused attempt kept no idempotency answer')
})

/** An agent with callbacks on busy, its number, and a first call that ended busy (an outside runtime): its callback is scheduled. */
async function scheduledCallback (t: Test, retryMinutes: number) {
  const ctx = await setup(t, { CALL_RUNTIME: 'external', CALL_TIME_SCALE: '0.001' }, { workers: true })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const patched = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { callback_settings: { enabled: true, max_attempts: 1, retry_delay_minutes: retryMinutes, on_outcomes: ['busy'] } } })
  t.equal(patched.statusCode, 200, patched.body)
  const bought = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: OUR_NUMBER } })
  t.equal(bought.statusCode, 201, bought.body)
  const made = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: OUR_NUMBER, to_number: PERSON } })
  t.equal(made.statusCode, 201, made.body)
  const first = made.json()._id as string
  const ended = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${first}/end`, headers: account.headers, payload: { outcome: 'failed', disconnection_reason: 'busy' } })
  t.equal(ended.statusCode, 202, ended.body)
  const callbacks = async () => (await ctx.app.inject({ method: 'GET', url: `/v1/call/${first}`, headers: account.headers })).json().callbacks as Array<Record<string, unknown>>
  await poll(callbacks, (list) => list.length === 1, { message: 'no callback scheduled' })
  const { id } = await ctx.db.selectFrom('call_callbacks').select('id').executeTakeFirstOrThrow()
  return { ctx, account, callbacks, callbackId: id }
}

t.test('a scheduled callback to a number listed meanwhile is cancelled do_not_call at its time: no call', async (t) => {
  const { ctx, account, callbacks, callbackId } = await scheduledCallback(t, 1440)
  t.equal((await add(ctx, account, { phone_number: PERSON })).statusCode, 201)
  await placeCallback({ db: ctx.db, boss: ctx.boss, config: ctx.config }, callbackId)
  t.match(await callbacks(), [{ status: 'cancelled', reason: 'do_not_call', call_id: null }])
  t.equal((await ctx.db.selectFrom('calls').select('id').execute()).length, 1, 'only the first call')
})

t.test('a number listed while its callback is being placed: the placing waits for the add and cancels', async (t) => {
  const { ctx, account, callbacks, callbackId } = await scheduledCallback(t, 1440)
  let release!: () => void
  const held = new Promise<void>((resolve) => { release = resolve })
  let adding!: Promise<void>
  const listed = new Promise<void>((resolve) => {
    // The add's transaction stays open (uncommitted) while the callback is placed.
    adding = ctx.db.transaction().execute(async (trx) => {
      await addDoNotCall(trx, account.user.id, { phone_number: PERSON, source: 'console' })
      resolve()
      await held
    })
  })
  await listed
  const placing = placeCallback({ db: ctx.db, boss: ctx.boss, config: ctx.config }, callbackId)
  // The placing transaction waits on the list's lock (it would otherwise not see the uncommitted number and place the call).
  try {
    await poll(async () => (await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`.execute(ctx.db)).rows[0].n,
      (n) => n === 1, { message: 'the placing did not wait for the list', timeoutMs: 5000 })
  } finally {
    release()
  }
  await adding
  await placing
  t.match(await callbacks(), [{ status: 'cancelled', reason: 'do_not_call' }])
  t.equal((await ctx.db.selectFrom('calls').select('id').execute()).length, 1, 'no callback call')
})
