import { sql } from 'kysely'
import t from 'tap'
import { hashToken } from '../../src/modules/users/keys.ts'
import { createLoginLink } from '../../src/modules/console/queries.ts'
import { MAX_FAILURES_PER_ADDRESS, MAX_FAILURES_PER_EMAIL } from '../../src/modules/console/routes.ts'
import { createUser } from '../../src/modules/users/queries.ts'
import { setup } from '../helpers/app.ts'
import { runScript } from '../helpers/scripts.ts'
import { ConsoleClient, createConsoleUser, csrfOf, PASSWORD } from '../helpers/console-client.ts'

const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store'
}

const sessionCount = async (ctx: { db: import('../../src/db/database.ts').DB }, userId: string) =>
  (await ctx.db.selectFrom('console_sessions').select('id_hash').where('user_id', '=', userId).execute()).length

t.test('signed out: every page sends the browser to the sign-in page, which links the docs', async (t) => {
  const { app } = await setup(t)
  for (const url of ['/', '/keys', '/account/password']) {
    const res = await app.inject({ method: 'GET', url })
    t.equal(res.statusCode, 303, url)
    t.equal(res.headers.location, url === '/' ? '/login' : `/login?next=${encodeURIComponent(url)}`, url)
    t.match(res.headers, PAGE_HEADERS, `${url}: the console's headers`)
  }
  const login = await app.inject({ method: 'GET', url: '/login' })
  t.equal(login.statusCode, 200)
  t.equal(login.headers['content-type'], 'text/html; charset=utf-8')
  t.match(login.headers, PAGE_HEADERS)
  for (const href of ['/docs', '/openapi.json', '/health']) t.match(login.body, `href="${href}"`)
  t.notMatch(login.body, /<script|style=/i, 'no inline script or style')
  t.match(login.headers['set-cookie'], /^switchboard_login_csrf=[\w-]{43}; Path=\/login; HttpOnly; SameSite=Lax$/)
  const css = await app.inject({ method: 'GET', url: '/console/console.css' })
  t.equal(css.statusCode, 200)
  t.equal(css.headers['content-type'], 'text/css; charset=utf-8')
  t.match(css.body, /:focus-visible/)

  const paths = Object.keys((await app.inject({ method: 'GET', url: '/openapi.json' })).json().paths)
  t.same(paths.filter((p) => ['/', '/login', '/logout', '/keys', '/account', '/console'].some((c) => p === c || p.startsWith(`${c}/`))), [],
    'no console route in the OpenAPI document')
})

t.test('sign-in: a wrong password answers as an unknown address; the right one makes a session cookie', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)

  const wrong = await browser.signIn(user.email, 'wrong password!')
  const unknown = await browser.signIn('nobody@example.com', PASSWORD)
  const noPassword = await browser.signIn((await createUser(ctx.db, { email: 'new@example.com' })).email, PASSWORD)
  for (const res of [wrong, unknown, noPassword]) {
    t.equal(res.statusCode, 401)
    t.match(res.body, 'The e-mail address or the password is wrong.')
    t.notOk(browser.cookies.has('switchboard_session'))
  }
  t.equal(wrong.body.replace(/value="[^"]*"/g, ''), unknown.body.replace(/value="[^"]*"/g, ''), 'the same page but for the e-mail typed')

  const ok = await browser.signIn(user.email.toUpperCase(), PASSWORD)
  t.equal(ok.statusCode, 303)
  t.equal(ok.headers.location, '/agents')
  const cookies = [ok.headers['set-cookie']].flat() as string[]
  const session = cookies.find((c) => c.startsWith('switchboard_session='))!
  t.match(session, /^switchboard_session=[\w-]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=2592000$/, 'HttpOnly, Lax, whole site, no Secure on http')
  t.ok(cookies.some((c) => /^switchboard_login_csrf=; Path=\/login;.*Max-Age=0/.test(c)), 'the sign-in form\'s token is dropped')
  const id = browser.cookies.get('switchboard_session')!
  const row = await ctx.db.selectFrom('console_sessions').selectAll().where('user_id', '=', user.id).executeTakeFirstOrThrow()
  t.equal(row.id_hash, hashToken(id), 'only the hash of the id is stored')
  t.ok(row.expires_at.getTime() - Date.now() > 29 * 24 * 3600_000)

  const keys = await browser.get('/keys')
  t.equal(keys.statusCode, 200)
  t.match(keys.body, user.email)
  t.equal((await browser.get('/login')).headers.location, '/agents', 'signed in: the sign-in page sends you on')
  t.equal((await browser.get('/')).headers.location, '/agents')

  const stranger = await browser.post('/login', { csrf_token: csrfOf((await ctx.app.inject({ method: 'GET', url: '/login' })).body), email: user.email, password: PASSWORD })
  t.equal(stranger.statusCode, 403, 'the sign-in form needs the token of its own cookie')

  // Rotation: signing in again from the same browser (here by a link) makes a new id and ends the old session.
  const again = await browser.get(`/login/link/${await createLoginLink(ctx.db, user.id)}`)
  t.equal(again.statusCode, 303)
  t.not(browser.cookies.get('switchboard_session'), id, 'a new id at sign-in')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/keys', headers: { cookie: `switchboard_session=${id}` } })).statusCode, 303, 'the old id is dead')
  t.equal(await sessionCount(ctx, user.id), 1)
  const second = await new ConsoleClient(ctx.app).signIn(user.email, PASSWORD)
  t.not(second.headers['set-cookie']?.[0], ok.headers['set-cookie']?.[0], 'every password sign-in, a new id')
  t.equal(await sessionCount(ctx, user.id), 2, 'one session per browser')
})

t.test('with an https PUBLIC_BASE_URL the cookies are Secure', async (t) => {
  const ctx = await setup(t, { PUBLIC_BASE_URL: 'https://voice.example.test' })
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  t.match((await browser.get('/login')).headers['set-cookie'], /; Secure$/)
  const res = await browser.signIn(user.email, PASSWORD)
  t.ok(([res.headers['set-cookie']].flat() as string[]).every((c) => c.endsWith('; Secure')))
})

t.test('sign-out ends the session', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const id = browser.cookies.get('switchboard_session')!
  const out = await browser.submit('/keys', '/logout', {})
  t.equal(out.statusCode, 303)
  t.equal(out.headers.location, '/login')
  t.match(out.headers['set-cookie'], /^switchboard_session=; Path=\/; HttpOnly; SameSite=Lax; Max-Age=0$/)
  t.equal(await sessionCount(ctx, user.id), 0)
  const stale = await ctx.app.inject({ method: 'GET', url: '/keys', headers: { cookie: `switchboard_session=${id}` } })
  t.equal(stale.headers.location, '/login?next=%2Fkeys', 'the old cookie opens nothing')
})

t.test('too many failed sign-ins: 429 per e-mail address and per client address, even with the right password', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  for (let i = 0; i < MAX_FAILURES_PER_EMAIL; i++) t.equal((await browser.signIn(user.email, `wrong password ${i}`)).statusCode, 401)
  const limited = await browser.signIn(user.email, PASSWORD)
  t.equal(limited.statusCode, 429)
  t.match(limited.body, /Too many failed sign-ins\. Try again in 15 minutes/)
  t.ok(Number(limited.headers['retry-after']) > 800)
  t.notOk(browser.cookies.has('switchboard_session'))

  // The client address has its own, larger budget, used up by failures for accounts (here three of them).
  const others = [await createConsoleUser(ctx.db), await createConsoleUser(ctx.db)]
  for (let i = MAX_FAILURES_PER_EMAIL; i < MAX_FAILURES_PER_ADDRESS; i++) {
    t.equal((await browser.signIn(others[i % 2].email, `wrong password ${i}`)).statusCode, 401)
  }
  const other = await createConsoleUser(ctx.db)
  t.equal((await browser.signIn(other.email, PASSWORD)).statusCode, 429, 'this address is out of tries')
  t.equal((await browser.signIn('nobody@example.com', PASSWORD)).statusCode, 429, 'for an unknown e-mail address too: a refusal does not tell who has an account')
  const elsewhere = await ctx.app.inject({
    method: 'POST', url: '/login', remoteAddress: '127.0.0.2', headers: { cookie: 'switchboard_login_csrf=t', 'content-type': 'application/x-www-form-urlencoded' }, payload: `csrf_token=t&email=${encodeURIComponent(other.email)}&password=${encodeURIComponent(PASSWORD)}`
  })
  t.equal(elsewhere.statusCode, 303, 'another client address signs in')
})

t.test('a one-time link signs in once, within 15 minutes, and leads to setting a password', async (t) => {
  const ctx = await setup(t)
  const user = await createUser(ctx.db, { email: 'owner@example.com' })
  const out = await runScript('cli.ts', ctx.url, 'user', 'login-link', '--email', 'OWNER@example.com')
  t.equal(out.code, 0, out.stderr)
  const link = /^http:\/\/localhost:3000\/login\/link\/(sl_[0-9A-Za-z]{40})\n/.exec(out.stdout)
  t.ok(link, out.stdout)
  t.match(out.stdout, /signs owner@example.com in to the console once, within 15 minutes/)
  t.equal((await runScript('cli.ts', ctx.url, 'user', 'login-link', '--email', 'nobody@example.com')).code, 2)

  const browser = new ConsoleClient(ctx.app)
  const first = await browser.get(`/login/link/${link![1]}`)
  t.equal(first.statusCode, 303)
  t.equal(first.headers.location, '/account/password')
  t.match(first.headers['set-cookie'], /switchboard_session=[\w-]{43}; Path=\/; HttpOnly/)
  const page = await browser.get('/account/password')
  t.match(page.body, /<h1>Set a password<\/h1>/)
  t.notMatch(page.body, /current_password/, 'no current password to give')

  const second = await new ConsoleClient(ctx.app).get(`/login/link/${link![1]}`)
  t.equal(second.statusCode, 404, 'spent')
  t.match(second.body, /unknown, was used already, or is older than 15 minutes/)
  t.match(second.headers, PAGE_HEADERS)

  const old = await createLoginLink(ctx.db, user.id)
  await ctx.db.updateTable('login_links').set({ expires_at: new Date(Date.now() - 1000) }).where('token_hash', '=', hashToken(old)).execute()
  t.equal((await new ConsoleClient(ctx.app).get(`/login/link/${old}`)).statusCode, 404, 'expired')
  t.equal((await new ConsoleClient(ctx.app).get('/login/link/sl_nothing')).statusCode, 404, 'unknown')

  const short = await browser.submit('/account/password', '/account/password', { new_password: 'too short', confirm_password: 'too short' })
  t.equal(short.statusCode, 400)
  t.match(short.body, /at least 10 characters/)
  const differ = await browser.submit('/account/password', '/account/password', { new_password: 'a long password', confirm_password: 'a long passworD' })
  t.match(differ.body, /The two new passwords differ/)
  const set = await browser.submit('/account/password', '/account/password', { new_password: 'a long password', confirm_password: 'a long password' })
  t.equal(set.statusCode, 200)
  t.match(set.body, /Your password is saved/)
  t.equal((await new ConsoleClient(ctx.app).signIn('owner@example.com', 'a long password')).statusCode, 303, 'the password signs in')
})

t.test('changing the password needs the current one and ends every other session', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const phone = new ConsoleClient(ctx.app)
  const laptop = new ConsoleClient(ctx.app)
  await phone.signIn(user.email, PASSWORD)
  await laptop.signIn(user.email, PASSWORD)
  t.equal(await sessionCount(ctx, user.id), 2)

  const form = await laptop.get('/account/password')
  t.match(form.body, /<h1>Change your password<\/h1>/)
  t.match(form.body, /name="current_password"/)
  const wrong = await laptop.post('/account/password', { csrf_token: csrfOf(form.body), current_password: 'not it at all', new_password: 'new password 1', confirm_password: 'new password 1' })
  t.equal(wrong.statusCode, 400)
  t.match(wrong.body, /The current password is wrong/)
  t.equal(await sessionCount(ctx, user.id), 2, 'nothing changed')

  const changed = await laptop.submit('/account/password', '/account/password', { current_password: PASSWORD, new_password: 'new password 1', confirm_password: 'new password 1' })
  t.equal(changed.statusCode, 200)
  t.match(changed.body, /Every other browser signed in as you has been signed out/)
  t.equal((await laptop.get('/keys')).statusCode, 200, 'the browser that changed it stays signed in')
  t.equal((await phone.get('/keys')).headers.location, '/login?next=%2Fkeys', 'the other one is signed out')
  t.equal(await sessionCount(ctx, user.id), 1)
  t.equal((await new ConsoleClient(ctx.app).signIn(user.email, PASSWORD)).statusCode, 401, 'the old password is gone')
  t.equal((await new ConsoleClient(ctx.app).signIn(user.email, 'new password 1')).statusCode, 303)

  // A link's grace: a password may be replaced without the current one for 15 minutes after signing in by link.
  const linked = new ConsoleClient(ctx.app)
  await linked.get(`/login/link/${await createLoginLink(ctx.db, user.id)}`)
  t.notMatch((await linked.get('/account/password')).body, /current_password/)
  await sql`UPDATE console_sessions SET created_at = now() - interval '16 minutes' WHERE via_link`.execute(ctx.db)
  t.match((await linked.get('/account/password')).body, /current_password/, 'the grace is over')
})

t.test('CSRF: a form without the token, with a wrong one, or from another origin is refused with 403 and changes nothing', async (t) => {
  const ctx = await setup(t, { PUBLIC_BASE_URL: 'https://voice.example.test' })
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const token = csrfOf((await browser.get('/keys')).body)
  const hashBefore = (await ctx.db.selectFrom('users').select('password_hash').where('id', '=', user.id).executeTakeFirstOrThrow()).password_hash
  const attempts: Array<[string, Record<string, string>, Record<string, string>]> = [
    ['/keys', { name: 'no token' }, {}],
    ['/keys', { name: 'wrong token', csrf_token: token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A') }, {}],
    ['/keys', { name: 'foreign', csrf_token: token }, { origin: 'https://evil.example.test' }],
    ['/account/password', { csrf_token: '', current_password: PASSWORD, new_password: 'attacker pw 1', confirm_password: 'attacker pw 1' }, {}],
    ['/account/password', { csrf_token: token, current_password: PASSWORD, new_password: 'attacker pw 1', confirm_password: 'attacker pw 1' }, { origin: 'null' }],
    ['/logout', {}, {}],
    ['/logout', { csrf_token: token }, { origin: 'http://evil.example.test' }]
  ]
  for (const [url, form, headers] of attempts) {
    const res = await browser.post(url, form, headers)
    t.equal(res.statusCode, 403, `${url} ${JSON.stringify(headers)}`)
    t.match(res.headers, PAGE_HEADERS)
    t.match(res.headers['content-type'], 'text/html')
    t.match(res.body, /<h1>Refused<\/h1>/)
  }
  t.same(await ctx.db.selectFrom('api_keys').select('name').where('user_id', '=', user.id).execute(), [], 'no key made')
  t.equal((await ctx.db.selectFrom('users').select('password_hash').where('id', '=', user.id).executeTakeFirstOrThrow()).password_hash, hashBefore)
  t.equal(await sessionCount(ctx, user.id), 1, 'still signed in')

  for (const origin of ['https://voice.example.test', 'http://localhost:80']) {
    const ok = await browser.post('/keys', { name: `from ${origin}`, csrf_token: token }, { origin })
    t.equal(ok.statusCode, 201, `${origin}: this server's own origin`)
  }
  const json = await ctx.app.inject({ method: 'POST', url: '/keys', headers: { cookie: browser.cookieHeader, 'content-type': 'application/json' }, payload: { name: 'json', csrf_token: token } })
  t.equal(json.statusCode, 415, 'forms only')
  t.match(json.headers['content-type'], 'text/html')
  const login = await ctx.app.inject({ method: 'POST', url: '/login', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: `email=${encodeURIComponent(user.email)}&password=${encodeURIComponent(PASSWORD)}` })
  t.equal(login.statusCode, 403, 'the sign-in form needs its token too')
})

t.test('console errors are pages, not JSON', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const token = csrfOf((await browser.get('/keys')).body)
  const nul = await browser.post('/keys', { csrf_token: token, name: 'a\u0000b' })
  t.equal(nul.statusCode, 400)
  t.match(nul.headers['content-type'], 'text/html')
  t.match(nul.body, /NUL characters/)
  const big = await browser.post('/keys', { csrf_token: token, name: 'x'.repeat(20_000) })
  t.equal(big.statusCode, 413)
  t.match(big.headers['content-type'], 'text/html')
  t.match(big.headers, PAGE_HEADERS)
})

t.test('a page opened signed out comes back after sign-in; `next` never leaves the site', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  const asked = await browser.get('/calls?status=failed')
  t.equal(asked.headers.location, '/login?next=%2Fcalls%3Fstatus%3Dfailed')
  const form = await browser.get(asked.headers.location as string)
  t.match(form.body, '<input type="hidden" name="next" value="/calls?status=failed">')
  const back = await browser.post('/login', { csrf_token: csrfOf(form.body), email: user.email, password: PASSWORD, next: '/calls?status=failed' })
  t.equal(back.headers.location, '/calls?status=failed')

  for (const next of ['//evil.example/x', 'https://evil.example/', '/\\evil.example', '/\t/evil.example', 'calls', '']) {
    const res = await new ConsoleClient(ctx.app).submit('/login', '/login', { email: user.email, password: PASSWORD, next })
    t.equal(res.headers.location, '/agents', JSON.stringify(next))
  }
  t.equal((await browser.get('/login?next=%2F%2Fevil.example')).headers.location, '/agents', 'signed in already: home, not the other site')
})

t.test('`next` is checked after normalising: dot segments, encodings, backslashes and tabs never lead to another host', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const offSite = [
    '/.//evil.example/phish', '/..//evil.example/phish', '/%2e//evil.example/phish', '/%2E%2E//evil.example/phish',
    '/x/..//evil.example/phish', '/x/%2e%2e//evil.example/phish', '/.\\/evil.example', '/x/..\\\\evil.example',
    '/\\evil.example', '/\t/evil.example', '/.\t//evil.example', '/\n/evil.example', '/.\r\n//evil.example'
  ]
  for (const next of offSite) {
    const res = await new ConsoleClient(ctx.app).submit('/login', '/login', { email: user.email, password: PASSWORD, next })
    t.equal(res.headers.location, '/agents', `sign-in with next=${JSON.stringify(next)}`)
  }
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const landing = async (next: string) => (await browser.get(`/login?next=${encodeURIComponent(next)}`)).headers.location
  for (const next of offSite) t.equal(await landing(next), '/agents', `signed in, next=${JSON.stringify(next)}`)
  // Encoded backslashes and tabs stay encoded in the path: a page of this site (its 404), not another host.
  t.equal(await landing('/%5cevil.example'), '/%5cevil.example')
  t.equal(await landing('/%5C%5Cevil.example'), '/%5C%5Cevil.example')
  t.equal(await landing('/%09/evil.example'), '/%09/evil.example')
  t.equal(await landing('/calls/../keys?x=//evil.example'), '/keys?x=//evil.example', 'the normalised path and its query')
})
