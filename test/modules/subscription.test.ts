import t from 'tap'
import { chargeCredits, WELCOME_CREDITS } from '../../src/modules/account/credits.ts'
import { createAccount, setup } from '../helpers/app.ts'

t.test('GET /v1/subscription starts the free plan with its welcome credits', async (t) => {
  const { app, db } = await setup(t)
  const { headers, user } = await createAccount(db)
  const before = Date.now()
  const res = await app.inject({ method: 'GET', url: '/v1/subscription', headers })
  t.equal(res.statusCode, 200)
  const sub = res.json()
  t.same(Object.keys(sub).sort(), ['auto_top_up', 'credit_balance', 'current_period', 'plan', 'status', 'top_up_amount'])
  t.match(sub, { plan: 'free', status: 'active', credit_balance: WELCOME_CREDITS, auto_top_up: { enabled: false, threshold: 100 }, top_up_amount: 1000 })
  t.ok(sub.current_period.start <= Date.now() && sub.current_period.start >= before - 1000, 'the period begins with the subscription')
  const end = new Date(sub.current_period.start)
  end.setUTCMonth(end.getUTCMonth() + 1)
  t.ok(Math.abs(sub.current_period.end - end.getTime()) < 3 * 3600_000, 'and lasts a month')

  const again = await app.inject({ method: 'GET', url: '/v1/subscription', headers })
  t.equal(again.json().credit_balance, WELCOME_CREDITS, 'the grant is given once')
  const entries = await db.selectFrom('credit_ledger').selectAll().where('user_id', '=', user.id).execute()
  t.match(entries, [{ kind: 'grant', amount: WELCOME_CREDITS }])
  t.equal(entries.length, 1)
})

t.test('concurrent first requests make one subscription and one grant', async (t) => {
  const { app, db } = await setup(t)
  const { headers, user } = await createAccount(db)
  const answers = await Promise.all(Array.from({ length: 5 }, () => app.inject({ method: 'GET', url: '/v1/subscription', headers })))
  t.same(answers.map((a) => a.statusCode), [200, 200, 200, 200, 200])
  const grants = await db.selectFrom('credit_ledger').select('id').where('user_id', '=', user.id).where('kind', '=', 'grant').execute()
  t.equal(grants.length, 1)
})

t.test('auto top-up and top-up amount settings', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  const on = await app.inject({ method: 'PATCH', url: '/v1/subscription/auto-top-up', headers, payload: { enabled: true, threshold: 250, plan: 'enterprise' } })
  t.equal(on.statusCode, 200)
  t.match(on.json(), { plan: 'free', auto_top_up: { enabled: true, threshold: 250 }, credit_balance: WELCOME_CREDITS })
  const onlyThreshold = await app.inject({ method: 'PATCH', url: '/v1/subscription/auto-top-up', headers, payload: { threshold: 0 } })
  t.same(onlyThreshold.json().auto_top_up, { enabled: true, threshold: 0 })
  const amount = await app.inject({ method: 'PATCH', url: '/v1/subscription/top-up-amount', headers, payload: { top_up_amount: 5000 } })
  t.equal(amount.statusCode, 200)
  t.equal(amount.json().top_up_amount, 5000)
  t.equal((await app.inject({ method: 'GET', url: '/v1/subscription', headers })).json().top_up_amount, 5000)

  const bad: Array<[string, unknown, RegExp]> = [
    ['auto-top-up', {}, /^body\.enabled or body\.threshold is required$/],
    ['auto-top-up', { enabled: 'yes' }, /^body\.enabled must be boolean/],
    ['auto-top-up', { threshold: -1 }, /^body\.threshold must be >= 0/],
    ['auto-top-up', { threshold: 1.5 }, /^body\.threshold must be integer/],
    ['auto-top-up', { threshold: '100' }, /^body\.threshold must be integer/],
    ['top-up-amount', {}, /^body\.top_up_amount is required/],
    ['top-up-amount', { top_up_amount: 0 }, /^body\.top_up_amount must be >= 1/],
    ['top-up-amount', { top_up_amount: 1e12 }, /^body\.top_up_amount must be <= 100000000/]
  ]
  for (const [path, payload, message] of bad) {
    const res = await app.inject({ method: 'PATCH', url: `/v1/subscription/${path}`, headers, payload: payload as object })
    t.equal(res.statusCode, 400, `${path} ${JSON.stringify(payload)}`)
    t.match(res.json().message, message)
  }
  t.equal((await app.inject({ method: 'GET', url: '/v1/subscription', headers })).json().top_up_amount, 5000, 'refused changes stored nothing')
})

t.test('chargeCredits: ledger rows, balance derived, isolation between accounts', async (t) => {
  const { app, db } = await setup(t)
  const alice = await createAccount(db)
  const bob = await createAccount(db)
  const callId = '65a0f00000000000000000aa'
  const result = await db.transaction().execute((trx) => chargeCredits(trx, alice.user.id, { amount: 30, callId, description: 'call' }))
  t.match(result, { entryId: /^[0-9a-f]{24}$/, balance: WELCOME_CREDITS - 30, topUp: undefined })
  t.equal((await app.inject({ method: 'GET', url: '/v1/subscription', headers: alice.headers })).json().credit_balance, WELCOME_CREDITS - 30)
  t.equal((await app.inject({ method: 'GET', url: '/v1/subscription', headers: bob.headers })).json().credit_balance, WELCOME_CREDITS)

  const ledger = await app.inject({ method: 'GET', url: '/v1/subscription/credits', headers: alice.headers })
  t.match(ledger.json(), [{ kind: 'call_charge', amount: -30, call_id: callId, description: 'call', created_at: Number }, { kind: 'grant', amount: WELCOME_CREDITS, call_id: null }])

  await t.rejects(db.transaction().execute((trx) => chargeCredits(trx, alice.user.id, { amount: 0 })), RangeError)
  await t.rejects(db.transaction().execute((trx) => chargeCredits(trx, alice.user.id, { amount: 1.5 })), RangeError)

  // A charge rolled back with its transaction leaves nothing behind.
  await t.rejects(db.transaction().execute(async (trx) => {
    await chargeCredits(trx, alice.user.id, { amount: 500 })
    throw new Error('analysis failed')
  }))
  t.equal((await app.inject({ method: 'GET', url: '/v1/subscription', headers: alice.headers })).json().credit_balance, WELCOME_CREDITS - 30)

  const overdraft = await db.transaction().execute((trx) => chargeCredits(trx, bob.user.id, { amount: WELCOME_CREDITS + 50 }))
  t.equal(overdraft.balance, -50, 'a call already made is charged in full; auto top-up is off')
})

t.test('ten concurrent charges crossing the threshold add exactly one top-up', async (t) => {
  const { app, db } = await setup(t)
  const { headers, user } = await createAccount(db)
  await app.inject({ method: 'PATCH', url: '/v1/subscription/auto-top-up', headers, payload: { enabled: true, threshold: 500 } })
  await app.inject({ method: 'PATCH', url: '/v1/subscription/top-up-amount', headers, payload: { top_up_amount: 2000 } })
  // 1000 - 10 x 60: the balance passes below 500 on the ninth charge; one top-up of 2000 lifts it far above.
  const results = await Promise.all(Array.from({ length: 10 }, () => db.transaction().execute((trx) => chargeCredits(trx, user.id, { amount: 60 }))))
  t.equal(results.filter((r) => r.topUp !== undefined).length, 1)
  const topUps = await db.selectFrom('credit_ledger').selectAll().where('user_id', '=', user.id).where('kind', '=', 'top_up').execute()
  t.equal(topUps.length, 1)
  t.equal(topUps[0].amount, 2000)
  t.equal((await app.inject({ method: 'GET', url: '/v1/subscription', headers })).json().credit_balance, 1000 - 600 + 2000)
  // 940 … 520, then 460 + 2000 = 2460, then 2400: each charge saw every one before it.
  t.same(results.map((r) => r.balance).sort((a, b) => a - b), [520, 580, 640, 700, 760, 820, 880, 940, 2400, 2460])
})

t.test('a top-up too small to lift the balance tops up again on the next charge', async (t) => {
  const { app, db } = await setup(t)
  const { headers, user } = await createAccount(db)
  await app.inject({ method: 'PATCH', url: '/v1/subscription/auto-top-up', headers, payload: { enabled: true, threshold: 2000 } })
  await app.inject({ method: 'PATCH', url: '/v1/subscription/top-up-amount', headers, payload: { top_up_amount: 100 } })
  for (let i = 0; i < 3; i++) await db.transaction().execute((trx) => chargeCredits(trx, user.id, { amount: 10 }))
  const kinds = (await app.inject({ method: 'GET', url: '/v1/subscription/credits', headers })).json().map((e: { kind: string }) => e.kind)
  t.same(kinds, ['top_up', 'call_charge', 'top_up', 'call_charge', 'top_up', 'call_charge', 'grant'])
})
