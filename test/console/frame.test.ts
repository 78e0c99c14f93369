import t from 'tap'
import { createLoginLink } from '../../src/modules/console/queries.ts'
import { createApiKey, createUser } from '../../src/modules/users/queries.ts'
import { setup } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { ConsoleClient, createConsoleUser, PASSWORD } from '../helpers/console-client.ts'

// The console's frame (docs/console.md, "The frame"): the header's bar and account menu, the icon on every page,
// the 404 page inside the layout, and the step after a first password.

const HTML = { accept: 'text/html' }
const ICON = '<link rel="icon" href="/favicon.svg" type="image/svg+xml">'

/** The hrefs of a list in the page, in order: the bar's (`Console`) or the account menu's (`Account`). */
const linksOf = (body: string, label: 'Console' | 'Account') => {
  const nav = new RegExp(`<nav aria-label="${label}">([\\s\\S]*?)</nav>`).exec(body)?.[1] ?? ''
  return [...nav.matchAll(/<a href="([^"]+)"/g)].map((m) => m[1])
}

t.test('the header: the primary sections in the bar, the account pages in the account menu', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const page = (await browser.get('/keys')).body
  t.same(linksOf(page, 'Console'), ['/agents', '/knowledge-bases', '/phone-numbers', '/campaigns', '/calls', '/contacts', '/analytics'])
  t.same(linksOf(page, 'Account'), ['/appointments', '/workspaces', '/deliveries', '/integrations', '/customers', '/do-not-call', '/subscription', '/keys', '/settings', '/account/password'])
  t.match(page, /<details class="account">\s*<summary class="current"><span class="context">Your account<\/span><\/summary>/, 'the menu\'s summary is marked when the page is in it')
  t.match(page, `<p>Signed in as <strong>${user.email}</strong></p>`)
  t.match(page, /<form method="post" action="\/logout"><input type="hidden" name="csrf_token" value="[^"]+"><button type="submit" class="link">Sign out<\/button><\/form>\s*<\/div>\s*<\/details>/, 'signing out, last in the menu')
  const agents = (await browser.get('/agents')).body
  t.match(agents, '<summary><span class="context">', 'a page of the bar: the summary is not marked')
  t.match(agents, '<li><a href="/agents" aria-current="page">Agents</a></li>')
})

t.test('the icon is linked from every page, signed in or out, and served', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const signedOut = await ctx.app.inject({ method: 'GET', url: '/login' })
  t.match(signedOut.body, ICON, '/login')
  t.match((await ctx.app.inject({ method: 'GET', url: '/no-such-page', headers: HTML })).body, ICON, 'the 404 page signed out')
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  for (const url of ['/agents', '/agents/new', '/calls', '/keys', '/account/password', '/workspaces', '/settings', '/analytics', '/no-such-page', `/agents/${'0'.repeat(24)}`]) {
    const res = await ctx.app.inject({ method: 'GET', url, headers: { ...HTML, cookie: browser.cookieHeader } })
    t.match(res.body, ICON, `${url} (${res.statusCode})`)
  }
  for (const [path, type] of [['/favicon.svg', 'image/svg+xml'], ['/favicon.ico', 'image/x-icon']]) {
    const res = await ctx.app.inject({ method: 'GET', url: path })
    t.equal(res.statusCode, 200, path)
    t.equal(res.headers['content-type'], type)
    t.ok(res.rawPayload.length > 100, `${path}: ${res.rawPayload.length} bytes`)
  }
})

t.test('an unknown page signed in: 404, inside the layout with the bar and the account menu; signed out: as before', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const res = await ctx.app.inject({ method: 'GET', url: '/agents-typo', headers: { ...HTML, cookie: browser.cookieHeader } })
  t.equal(res.statusCode, 404)
  t.equal(res.headers['content-type'], 'text/html; charset=utf-8')
  t.match(res.body, '<title>Page not found · Switchboard</title>')
  t.equal(linksOf(res.body, 'Console').length, 7, 'the bar')
  t.ok(linksOf(res.body, 'Account').includes('/keys'), 'the account menu')
  t.notMatch(res.body, 'aria-current', 'no section marked')
  const out = await ctx.app.inject({ method: 'GET', url: '/agents-typo', headers: HTML })
  t.equal(out.statusCode, 404)
  t.match(out.body, '<h1>Page not found</h1>')
  t.notMatch(out.body, '<details class="account">', 'signed out: no menu')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/agents-typo' })).json().code, 'route_not_found', 'not asking for HTML: the JSON 404')
})

t.test('after a first password, the next step is creating an agent; with agents, back to them', async (t) => {
  const ctx = await setup(t)
  const user = await createUser(ctx.db, { email: `first-${Date.now()}@example.com` })
  const browser = new ConsoleClient(ctx.app)
  t.equal((await browser.get(`/login/link/${await createLoginLink(ctx.db, user.id)}`)).headers.location, '/account/password')
  const set = await browser.submit('/account/password', '/account/password', { new_password: 'a long password', confirm_password: 'a long password' })
  t.equal(set.statusCode, 200)
  t.match(set.body, /<section class="notice success" role="status" aria-labelledby="saved-title">\s*<h2 id="saved-title">Your password is saved<\/h2>/)
  t.match(set.body, '<a class="next" href="/agents/start">Next: create your first agent</a>')
  t.notMatch(set.body, 'Back to your agents')

  const { key } = await createApiKey(ctx.db, user.id)
  await createAgent(ctx.app, { user, key, headers: { 'x-api-key': key } })
  const again = await browser.submit('/account/password', '/account/password', { current_password: 'a long password', new_password: 'another long one', confirm_password: 'another long one' })
  t.equal(again.statusCode, 200)
  t.match(again.body, '<a href="/agents">Back to your agents</a>')
  t.notMatch(again.body, 'create your first agent')
})
