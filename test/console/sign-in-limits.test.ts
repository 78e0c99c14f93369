// Sign-in and password-change limits under concurrent requests (docs/console.md, "Too many failures"): each
// attempt is counted before its password is checked, hashes are bounded per address and per process, and
// failures for made-up e-mail addresses do not use up the budget of the people signing in from that address.
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import t from 'tap'
import { FAILURE_WINDOW_MS, MAX_FAILURES_PER_ADDRESS, MAX_FAILURES_PER_EMAIL } from '../../src/modules/console/routes.ts'
import { reserveAttempt } from '../../src/modules/console/queries.ts'
import { setup } from '../helpers/app.ts'
import { ConsoleClient, createConsoleUser, csrfOf, PASSWORD } from '../helpers/console-client.ts'

const RACE = 150

/** A sign-in form as a browser at `remoteAddress` sends it (the form's cookie and field agree). */
function signIn (app: FastifyInstance, remoteAddress: string, email: string, password: string, headers: Record<string, string> = {}) {
  return app.inject({
    method: 'POST',
    url: '/login',
    remoteAddress,
    headers: { cookie: 'switchboard_login_csrf=t', 'content-type': 'application/x-www-form-urlencoded', ...headers },
    payload: new URLSearchParams({ csrf_token: 't', email, password }).toString()
  })
}

/** How many answers had each status. */
function tally (answers: LightMyRequestResponse[]): Record<number, number> {
  const counts: Record<number, number> = {}
  for (const answer of answers) counts[answer.statusCode] = (counts[answer.statusCode] ?? 0) + 1
  return counts
}

const refusalsSayWhen = (answers: LightMyRequestResponse[]) =>
  answers.filter((a) => a.statusCode === 429 || a.statusCode === 503).every((a) => Number(a.headers['retry-after']) >= 1)

t.test(`${RACE} concurrent guesses from one address, the right one last: at most the limit are checked, and it does not sign in`, async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const answers = await Promise.all(Array.from({ length: RACE }, (_, i) =>
    signIn(ctx.app, '127.0.0.5', user.email, i === RACE - 1 ? PASSWORD : `wrong password ${i}`)))
  const counts = tally(answers)
  t.comment(`one address, one e-mail: ${JSON.stringify(counts)}`)
  t.equal(counts[303], undefined, 'nobody signed in')
  t.ok((counts[401] ?? 0) <= MAX_FAILURES_PER_EMAIL, `${counts[401]} checked`)
  t.equal((counts[401] ?? 0) + (counts[429] ?? 0) + (counts[503] ?? 0), RACE, 'the others were refused')
  t.ok(refusalsSayWhen(answers), 'every refusal has Retry-After')
  const rows = await ctx.db.selectFrom('sign_in_failures').select('bucket').where('bucket', '=', `email:${user.email}`).execute()
  t.equal(rows.length, counts[401], 'one failure stored per password checked')
})

t.test(`${RACE} concurrent guesses for one account from ${RACE} addresses: ${MAX_FAILURES_PER_EMAIL} are checked, and the limit holds afterwards`, async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const answers = await Promise.all(Array.from({ length: RACE }, (_, i) =>
    signIn(ctx.app, `127.0.1.${i + 1}`, user.email, i === RACE - 1 ? PASSWORD : `wrong password ${i}`)))
  const counts = tally(answers)
  t.comment(`${RACE} addresses, one e-mail: ${JSON.stringify(counts)}`)
  t.equal(counts[303], undefined, 'nobody signed in')
  t.equal(counts[401], MAX_FAILURES_PER_EMAIL, 'exactly the limit were checked')
  t.ok((counts[503] ?? 0) > 0, 'past the process\'s hash slots: 503 at once')
  t.ok(refusalsSayWhen(answers))
  const after = await signIn(ctx.app, '127.0.2.1', user.email, PASSWORD)
  t.equal(after.statusCode, 429, 'the account is out of tries, from any address')
  t.ok(Number(after.headers['retry-after']) > 800)
})

t.test('concurrent attempts are counted one after the other: no more than the limit get through (as on several replicas)', async (t) => {
  const ctx = await setup(t)
  const bucket = { bucket: 'email:race@example.com', max: MAX_FAILURES_PER_EMAIL }
  const address = { bucket: 'address:192.0.2.1', max: MAX_FAILURES_PER_ADDRESS }
  const results = await Promise.all(Array.from({ length: RACE }, () => reserveAttempt(ctx.db, [bucket, address], FAILURE_WINDOW_MS)))
  t.equal(results.filter((r) => 'ids' in r).length, MAX_FAILURES_PER_EMAIL, 'exactly the limit reserved')
  t.ok(results.filter((r) => 'retryAfterMs' in r).every((r) => 'retryAfterMs' in r && r.retryAfterMs > FAILURE_WINDOW_MS - 60_000))
  const other = await Promise.all(Array.from({ length: RACE }, (_, i) => reserveAttempt(ctx.db, [{ bucket: `email:${i}@example.com`, max: MAX_FAILURES_PER_EMAIL }, address], FAILURE_WINDOW_MS)))
  t.equal(other.filter((r) => 'ids' in r).length, MAX_FAILURES_PER_ADDRESS - MAX_FAILURES_PER_EMAIL, 'the address\'s budget holds across e-mail addresses')
})

t.test('80 concurrent guesses of the current password, the right one last, do not change the password', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const token = csrfOf((await browser.get('/account/password')).body)
  const before = (await ctx.db.selectFrom('users').select('password_hash').where('id', '=', user.id).executeTakeFirstOrThrow()).password_hash
  const answers = await Promise.all(Array.from({ length: 80 }, (_, i) => ctx.app.inject({
    method: 'POST',
    url: '/account/password',
    remoteAddress: `127.0.3.${i + 1}`,
    headers: { cookie: browser.cookieHeader, 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ csrf_token: token, current_password: i === 79 ? PASSWORD : `wrong password ${i}`, new_password: 'attacker password', confirm_password: 'attacker password' }).toString()
  })))
  const counts = tally(answers)
  t.comment(`password page, 80 at once: ${JSON.stringify(counts)}`)
  t.equal(counts[200], undefined, 'the password was not changed')
  t.ok((counts[400] ?? 0) <= MAX_FAILURES_PER_EMAIL, `${counts[400]} checked`)
  t.ok(refusalsSayWhen(answers))
  const after = (await ctx.db.selectFrom('users').select('password_hash').where('id', '=', user.id).executeTakeFirstOrThrow()).password_hash
  t.equal(after, before)
  const late = await browser.submit('/account/password', '/account/password', { current_password: PASSWORD, new_password: 'attacker password', confirm_password: 'attacker password' })
  t.equal(late.statusCode, 429, 'the account is out of tries: the wrong guesses count as for signing in')
  t.match(late.body, /Too many wrong passwords/)
})

t.test('a flood of failures for made-up e-mail addresses does not stop a real user signing in from that address', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const address = '127.0.0.7'
  for (let i = 0; i < MAX_FAILURES_PER_ADDRESS + 5; i++) {
    t.equal((await signIn(ctx.app, address, `nobody${i}@example.com`, 'wrong password')).statusCode, 401)
  }
  const burst = await Promise.all(Array.from({ length: RACE }, (_, i) => signIn(ctx.app, address, `burst${i}@example.com`, 'wrong password')))
  const counts = tally(burst)
  t.comment(`made-up e-mail addresses, ${RACE} at once from one address: ${JSON.stringify(counts)}`)
  t.same(Object.keys(counts).filter((status) => status !== '401' && status !== '429'), [], 'refused as wrong, or as too many at once')
  t.ok(refusalsSayWhen(burst))
  const real = await signIn(ctx.app, address, user.email, PASSWORD)
  t.equal(real.statusCode, 303, 'the real user signs in')
  // Ten tries per made-up address all the same, as for a real one: the answers do not tell them apart.
  for (let i = 0; i < MAX_FAILURES_PER_EMAIL; i++) t.equal((await signIn(ctx.app, address, 'ghost@example.com', `guess ${i}`)).statusCode, 401)
  t.equal((await signIn(ctx.app, address, 'ghost@example.com', 'one more')).statusCode, 429)
})

t.test('TRUST_PROXY: behind the load balancer each client has its own budget, and X-Forwarded-For is ignored without it', async (t) => {
  const users = async (db: import('../../src/db/database.ts').DB) => [await createConsoleUser(db), await createConsoleUser(db), await createConsoleUser(db), await createConsoleUser(db)]
  // The load balancer connects from 127.0.0.1 and appends the address it saw to X-Forwarded-For.
  const via = (client: string, chain = '') => ({ 'x-forwarded-for': chain === '' ? client : `${chain}, ${client}` })
  const exhaust = async (app: FastifyInstance, accounts: Array<{ email: string }>, headers: Record<string, string>) => {
    for (let i = 0; i < MAX_FAILURES_PER_ADDRESS; i++) {
      t.equal((await signIn(app, '127.0.0.1', accounts[i % 3].email, `wrong password ${i}`, headers)).statusCode, 401)
    }
  }

  const behind = await setup(t, { TRUST_PROXY: '1' })
  const mine = await users(behind.db)
  await exhaust(behind.app, mine, via('198.51.100.7'))
  t.equal((await signIn(behind.app, '127.0.0.1', mine[3].email, PASSWORD, via('198.51.100.7'))).statusCode, 429, 'that client is out of tries')
  t.equal((await signIn(behind.app, '127.0.0.1', mine[3].email, PASSWORD, via('198.51.100.7', '203.0.113.99'))).statusCode, 429,
    'a forged address in front of the chain changes nothing: the balancer\'s entry counts')
  t.equal((await signIn(behind.app, '127.0.0.1', mine[3].email, PASSWORD, via('198.51.100.8'))).statusCode, 303, 'another client signs in')

  const direct = await setup(t)
  const theirs = await users(direct.db)
  await exhaust(direct.app, theirs, via('198.51.100.7'))
  t.equal((await signIn(direct.app, '127.0.0.1', theirs[3].email, PASSWORD, via('198.51.100.8'))).statusCode, 429,
    'without TRUST_PROXY a client cannot claim another address to escape its limit')
})
