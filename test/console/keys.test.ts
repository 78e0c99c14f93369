import t from 'tap'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup } from '../helpers/app.ts'
import { ConsoleClient, createConsoleUser, csrfOf, PASSWORD, PAGE_HEADERS, withoutLocalTime } from '../helpers/console-client.ts'

t.test('API keys: a new key is shown once, then only its prefix; the API takes it; at most 3', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)

  const empty = await browser.get('/keys')
  t.equal(empty.statusCode, 200)
  t.match(empty.body, /No active keys/)
  t.match(empty.body, /<a href="\/keys" aria-current="page">API keys<\/a>/)

  const created = await browser.submit('/keys', '/keys', { name: 'crm integration' })
  t.equal(created.statusCode, 201)
  t.match(created.headers, PAGE_HEADERS)
  const key = /<code id="new-key" class="secret">(sk_[0-9A-Za-z]{40})<\/code>/.exec(created.body)?.[1]
  t.ok(key, 'the key is on the answer page')
  t.match(created.body, /shown only this once/)
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/api-keys', headers: { 'x-api-key': key! } })).statusCode, 200, 'and works on the API')

  const listed = await browser.get('/keys')
  t.notMatch(listed.body, key!, 'never shown again')
  t.match(listed.body, `<code>${key!.slice(0, 11)}…</code>`)
  t.match(listed.body, /crm integration/)
  t.match(listed.body, /You have 1 of at most 3 active keys/)
  const stored = await ctx.db.selectFrom('api_keys').selectAll().where('user_id', '=', user.id).executeTakeFirstOrThrow()
  t.notMatch(JSON.stringify(stored), key!, 'stored as a hash')

  await browser.submit('/keys', '/keys', { name: 'two' })
  await browser.submit('/keys', '/keys', { name: '' })
  const full = await browser.get('/keys')
  t.match(full.body, /Revoke a key to create another: at most 3 may be active/)
  t.notMatch(full.body, /action="\/keys" /, 'no create form at the limit')
  const fourth = await browser.post('/keys', { csrf_token: csrfOf(full.body), name: 'four' })
  t.equal(fourth.statusCode, 409)
  t.match(fourth.body, /You have 3 active keys already: revoke one first/)
  t.equal((await ctx.db.selectFrom('api_keys').select('id').where('user_id', '=', user.id).execute()).length, 3)

  const long = await browser.post('/keys', { csrf_token: csrfOf(full.body), name: 'x'.repeat(101) })
  t.equal(long.statusCode, 400)
  t.match(long.body, /at most 100 characters/)
})

t.test('revoking: one\'s own key stops working at once; another account\'s key is a 404 and stays', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const other = await createConsoleUser(ctx.db)
  const mine = await createApiKey(ctx.db, user.id, { name: 'mine' })
  const theirs = await createApiKey(ctx.db, other.id, { name: 'theirs' })
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const headers = { 'x-api-key': mine.key }
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/api-keys', headers })).statusCode, 200)

  const page = await browser.get('/keys')
  t.match(page.body, `action="/keys/${mine.id}/revoke"`)
  t.notMatch(page.body, theirs.prefix, 'only one\'s own keys are listed')

  const foreign = await browser.post(`/keys/${theirs.id}/revoke`, { csrf_token: csrfOf(page.body) })
  t.equal(foreign.statusCode, 404)
  t.match(foreign.headers['content-type'], 'text/html')
  t.match(foreign.body, /You have no active API key with that id/)
  t.match(foreign.body, /Sign out/, 'the error page keeps the signed-in layout')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/api-keys', headers: { 'x-api-key': theirs.key } })).statusCode, 200, 'their key still works')

  const noToken = await browser.post(`/keys/${mine.id}/revoke`, {})
  t.equal(noToken.statusCode, 403)
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/api-keys', headers })).statusCode, 200, 'a refused form revokes nothing')

  const revoked = await browser.post(`/keys/${mine.id}/revoke`, { csrf_token: csrfOf(page.body) })
  t.equal(revoked.statusCode, 303)
  t.equal(revoked.headers.location, '/keys')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/api-keys', headers })).statusCode, 403, 'revoked at once')
  t.match((await browser.get('/keys')).body, /No active keys/)
  t.equal((await browser.post(`/keys/${mine.id}/revoke`, { csrf_token: csrfOf(page.body) })).statusCode, 404, 'twice: nothing left to revoke')
})

t.test('names and addresses are shown as text, never as markup', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const evil = '<script>alert(1)</script>'
  const created = await browser.submit('/keys', '/keys', { name: evil })
  const listed = await browser.get('/keys')
  for (const page of [created, listed]) {
    t.notMatch(page.body, evil)
    t.match(page.body, '&lt;script&gt;alert(1)&lt;/script&gt;')
    t.notMatch(withoutLocalTime(page.body), /<script/i, 'no script element but the local times\' one')
  }
  const typed = await browser.post('/logout', { csrf_token: csrfOf(listed.body) })
  t.equal(typed.statusCode, 303)
  const failed = await browser.signIn('"><img src=x onerror=alert(1)>@example.com', 'whatever it is')
  t.match(failed.body, 'value="&quot;&gt;&lt;img src=x onerror=alert(1)&gt;@example.com"')
})

t.test('every page and answer carries the security headers', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  const answers = [await browser.get('/login'), await browser.signIn(user.email, 'wrong password'), await browser.signIn(user.email, PASSWORD)]
  answers.push(await browser.get('/'), await browser.get('/keys'), await browser.get('/account/password'), await browser.submit('/keys', '/keys', { name: 'x' }))
  answers.push(await browser.get('/login/link/sl_unknown'), await browser.post('/keys', {}), await browser.submit('/keys', '/logout', {}))
  for (const res of answers) {
    t.match(res.headers, PAGE_HEADERS, `${res.statusCode} ${res.headers.location ?? ''}`)
  }
  for (const res of answers.filter((r) => r.statusCode !== 303)) {
    t.match(res.body, /<main id="main"/)
    t.match(res.body, /<a class="skip" href="#main">/)
    t.notMatch(withoutLocalTime(res.body), /<script|<style|style=/i, 'nothing inline that the CSP would block')
  }
})
