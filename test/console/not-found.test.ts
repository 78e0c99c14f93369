import t from 'tap'
import { setup } from '../helpers/app.ts'
import { axeViolations, launchChromium, signInAt } from '../helpers/chromium.ts'
import { ConsoleClient, createConsoleUser, PAGE_HEADERS, PASSWORD } from '../helpers/console-client.ts'

// An unknown address opened in a browser is the console's own 404 page (inside the layout when signed in, with a
// link home); programs (the API's paths, or a client that does not ask for HTML) keep the JSON 404. The site has
// an icon: the layout links /favicon.svg, and /favicon.ico answers for every other page.

const HTML = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' }

t.test('an unknown page is the console\'s 404 page, inside the layout when signed in; the API keeps its JSON 404', async (t) => {
  const ctx = await setup(t)
  const user = await createConsoleUser(ctx.db)
  const get = async (url: string, headers: Record<string, string> = {}) => await ctx.app.inject({ method: 'GET', url, headers })

  const signedOut = await get('/no-such-page?x=1', HTML)
  t.equal(signedOut.statusCode, 404)
  t.equal(signedOut.headers['content-type'], 'text/html; charset=utf-8')
  t.match(signedOut.headers, PAGE_HEADERS, 'the console\'s headers')
  t.match(signedOut.body, '<h1>Page not found</h1>')
  t.match(signedOut.body, '<a href="/">Back to the console</a>', 'a link home')
  t.notMatch(signedOut.body, 'aria-label="Console"', 'signed out: no navigation')

  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  for (const url of ['/no-such-page', '/agents/x/y/z', '/console/nothing.css']) {
    const res = await get(url, { ...HTML, cookie: browser.cookieHeader })
    t.equal(res.statusCode, 404, url)
    t.match(res.body, '<h1>Page not found</h1>', url)
    t.match(res.body, '<nav aria-label="Console">', `${url}: inside the layout, with the navigation`)
    t.match(res.body, `Signed in as <strong>${user.email}</strong>`, `${url}: and the person signed in`)
    t.match(res.body, '<a href="/">Back to the console</a>')
  }

  for (const [url, headers] of [
    ['/v1/no-such-route', { ...HTML, cookie: browser.cookieHeader }], ['/v1', HTML], ['/telephony/twilio/nothing', HTML],
    ['/no-such-page', {}], ['/no-such-page', { accept: 'application/json' }], ['/no-such-page', { accept: '*/*' }]
  ] as const) {
    const res = await get(url, headers)
    t.equal(res.statusCode, 404, `${url} ${JSON.stringify(headers)}`)
    t.same(res.json(), { statusCode: 404, error: 'Not Found', message: `no route GET ${url}`, code: 'route_not_found' }, `${url}: the JSON 404`)
  }
  t.equal((await get('/logout', HTML)).statusCode, 405, 'a known address with another method is still a 405')
})

t.test('the icon: /favicon.ico and /favicon.svg, linked from every console page', async (t) => {
  const { app } = await setup(t)
  const ico = await app.inject({ method: 'GET', url: '/favicon.ico' })
  t.equal(ico.statusCode, 200)
  t.equal(ico.headers['content-type'], 'image/x-icon')
  t.same([...ico.rawPayload.subarray(0, 6)], [0, 0, 1, 0, 1, 0], 'an ICO with one image')
  t.equal(ico.rawPayload.subarray(22, 30).toString('latin1'), '\x89PNG\r\n\x1a\n', 'a PNG inside')
  const svg = await app.inject({ method: 'GET', url: '/favicon.svg' })
  t.equal(svg.statusCode, 200)
  t.equal(svg.headers['content-type'], 'image/svg+xml')
  t.match(svg.headers, { 'content-security-policy': "default-src 'none'", 'x-content-type-options': 'nosniff' })
  t.match(svg.body, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/)
  t.notMatch(svg.body, /<script|on\w+=/i)
  t.match((await app.inject({ method: 'GET', url: '/login' })).body, '<link rel="icon" href="/favicon.svg" type="image/svg+xml">')
})

t.test('ROLE=voice (no console): the icon is there, an unknown page is the JSON 404', async (t) => {
  const { app } = await setup(t, { ROLE: 'voice' })
  t.equal((await app.inject({ method: 'GET', url: '/favicon.ico' })).statusCode, 200, 'the web-call page\'s icon')
  const res = await app.inject({ method: 'GET', url: '/no-such-page', headers: HTML })
  t.equal(res.statusCode, 404)
  t.equal(res.json().code, 'route_not_found')
})

t.test('in Chromium: an unknown page signed in, its icon, and no failed load', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  const failed: string[] = []
  page.on('pageerror', (err) => failed.push(err.message))
  page.on('response', (res) => { if (res.status() >= 400 && new URL(res.url()).pathname !== '/no-such-page') failed.push(`${res.status()} ${res.url()}`) })
  const icons: string[] = []
  page.on('request', (req) => { if (/\/favicon\.(ico|svg)$/.test(req.url())) icons.push(new URL(req.url()).pathname) })

  await signInAt(page, url, user.email, PASSWORD)
  const response = await page.goto(`${url}/no-such-page`)
  t.equal(response?.status(), 404)
  t.equal(await page.locator('h1').textContent(), 'Page not found')
  t.equal(await page.getByRole('navigation', { name: 'Console' }).count(), 1, 'inside the layout')
  t.same(await axeViolations(page), [], 'WCAG 2.1 A and AA')
  await page.getByRole('link', { name: 'Back to the console' }).click()
  await page.waitForURL(`${url}/agents`)
  await page.waitForLoadState('networkidle')
  // (Headless Chromium asks no /favicon.ico of a page that links no icon: that one is checked above, over HTTP.)
  t.ok(icons.includes('/favicon.svg'), 'the console\'s pages load the SVG icon')
  t.same(failed, [], 'no failed load, no script error')
})
