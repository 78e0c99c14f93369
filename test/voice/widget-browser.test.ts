import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import type { Test } from 'tap'
import type { Page } from 'playwright-core'
import { createAccount, setup } from '../helpers/app.ts'
import { axeViolations, FAKE_CALLER, launchChromium } from '../helpers/chromium.ts'
import { createAgent } from '../helpers/calls.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { poll } from '../helpers/poll.ts'

// The website widget in real Chromium (Debian's `chromium`, headless, a fake microphone playing
// test/fixtures/audio/caller.wav) on pages of other loopback origins than Switchboard's (127.0.0.2 and 127.0.0.3,
// each a small server of its own): the script tag shows the button where and how the agent's widget_settings say,
// a click holds a spoken call on the cascade engine's stand-ins (the caller heard, the agent's greeting shown), the
// end button ends it; with the site's own token endpoint too; and a site the agent does not list gets no widget and
// no call. One browser and one server for the file.

const GREETING = 'Hello from the clinic, how can I help?'

interface Site { origin: string, pages: Map<string, string> }

/** A site on its own loopback address: its pages, and its backend's token endpoint (make-web-call with its API key). */
async function startSite (t: Test, host: string, token: (agentId: string) => Promise<string>): Promise<Site> {
  const pages = new Map<string, string>()
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    if (request.method === 'POST' && request.url === '/switchboard-token') {
      let body = ''
      request.on('data', (chunk) => { body += chunk })
      request.on('end', () => {
        token(JSON.parse(body).agent_id).then((accessToken) => {
          response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: accessToken }))
        }, () => response.writeHead(500).end())
      })
      return
    }
    const page = pages.get(request.url ?? '')
    if (page === undefined) return response.writeHead(404).end()
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page)
  })
  await new Promise<void>((resolve) => server.listen(0, host, resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { origin: `http://${host}:${(server.address() as AddressInfo).port}`, pages }
}

const hostPage = (scriptTag: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Dental practice</title>
<style>button { background: red !important; color: yellow; } * { font-size: 40px; }</style></head>
<body><main><h1>Dental practice</h1><p>We are open on weekdays.</p></main>${scriptTag}</body></html>`

t.test('the widget on other sites', async (t) => {
  const http = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, { VOICE_ENGINE: 'cascade', STT_URL: http.url, LLM_URL: http.url, TTS_URL: http.url }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: GREETING } })).json()
  const agent = await createAgent(ctx.app, account, { agent_name: 'Clinic', llm_id: llm._id })
  // The site's backend: make-web-call with the account's API key; the page receives the token alone.
  const token = async (agentId: string) => (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agentId } })).json().access_token as string
  const site = await startSite(t, '127.0.0.2', token)
  const stranger = await startSite(t, '127.0.0.3', token)
  const patched = await ctx.app.inject({
    method: 'PATCH',
    url: `/v1/agent/${agent._id}`,
    headers: account.headers,
    payload: { widget_settings: { enabled: true, theme: 'dark', primary_color: '#0f766e', position: 'bottom-left', greeting: 'Questions? Talk to us', allowed_origins: [site.origin] } }
  })
  t.equal(patched.statusCode, 200)
  const key = (await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/widget-key`, headers: account.headers })).json().widget_key as string
  const keyTag = `<script src="${url}/widget.js" data-agent-id="${agent._id}" data-widget-key="${key}" defer></script>`
  site.pages.set('/', hostPage(keyTag))
  site.pages.set('/backend', hostPage(`<script src="${url}/widget.js" data-agent-id="${agent._id}" data-token-url="/switchboard-token" defer></script>`))
  stranger.pages.set('/', hostPage(keyTag))

  const browser = await launchChromium(t, [
    ...FAKE_CALLER,
    // The sites' addresses resolve as the helper's own 127.0.0.1 does (the last rule given wins); nothing else does.
    '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1, EXCLUDE 127.0.0.2, EXCLUDE 127.0.0.3'
  ])
  const open = async (t: Test, address: string) => {
    const context = await browser.newContext({ viewport: { width: 1000, height: 700 } })
    t.teardown(() => context.close())
    const page = await context.newPage()
    const errors: string[] = []
    const logged: string[] = []
    page.on('pageerror', (err) => errors.push(err.message))
    page.on('console', (message) => logged.push(message.text()))
    await page.goto(address)
    return { page, errors, logged }
  }
  const calls = async () => (await ctx.app.inject({ method: 'GET', url: `/v1/call/list?agent_id=${agent._id}`, headers: account.headers })).json()
  const ended = async (callId: string) => await poll(async () => (await ctx.app.inject({ method: 'GET', url: `/v1/call/${callId}`, headers: account.headers })).json(),
    (c) => c.call_status === 'success' || c.call_status === 'failed')

  /** A spoken call through the widget: the caller's fixture reaches the recogniser, the greeting is shown, End ends it. */
  async function holdCall (t: Test, page: Page) {
    const launcher = page.getByRole('button', { name: /Questions\? Talk to us: start a call with Clinic/ })
    await launcher.click()
    await page.locator('switchboard-widget .transcript li.agent').first().waitFor()
    t.match(await page.locator('switchboard-widget .transcript li.agent').first().textContent(), GREETING, 'the agent\'s greeting arrives')
    t.equal(await page.evaluate('document.querySelector("switchboard-widget").shadowRoot.activeElement?.className'), 'end', 'focus moved to the end button')
    const heard = await poll(async () => http.requests.transcriptions.map((r) => r.rms), (levels) => levels.some((rms) => rms > 300),
      { message: (levels) => `no caller audio reached the recogniser: ${JSON.stringify(levels)}` })
    t.ok(heard.length > 0, 'the microphone reached the agent')
    await page.locator('switchboard-widget .transcript li.user').first().waitFor()
    t.match(await page.locator('switchboard-widget .status').textContent(), /Listening|speaking/)
    await page.getByRole('button', { name: 'End call' }).click()
    await page.locator('switchboard-widget .status', { hasText: 'The call ended.' }).waitFor()
    t.equal(await page.locator('switchboard-widget .root').getAttribute('data-state'), 'ended')
    await page.getByRole('button', { name: 'Close' }).click()
    t.ok(await launcher.isVisible(), 'the button is back')
  }

  t.test('with the widget key on a listed site: the button as configured, a spoken call, the end', async (t) => {
    const { page, errors } = await open(t, `${site.origin}/`)
    const launcher = page.locator('switchboard-widget .launcher')
    await launcher.waitFor()
    const box = (await launcher.boundingBox())!
    t.ok(box.x >= 10 && box.x <= 40, `bottom-left: x ${box.x}`)
    t.ok(box.y + box.height >= 700 - 40 && box.y + box.height <= 700, `at the bottom: ends at ${box.y + box.height}`)
    t.equal(await page.evaluate('getComputedStyle(document.querySelector("switchboard-widget").shadowRoot.querySelector(".launcher")).backgroundColor'), 'rgb(15, 118, 110)', 'its colour, untouched by the page\'s button rule')
    t.equal(await page.evaluate('getComputedStyle(document.querySelector("switchboard-widget").shadowRoot.querySelector(".launcher")).fontSize'), '15px', 'the page\'s styles stay out')
    t.equal(await page.locator('switchboard-widget .root').getAttribute('data-theme'), 'dark')
    t.match(await launcher.textContent(), 'Questions? Talk to us')
    t.equal(await page.evaluate('getComputedStyle(document.querySelector("h1")).fontSize'), '40px', 'the widget\'s styles stay out of the page')
    t.same(await axeViolations(page), [], 'no accessibility violations')

    const before = (await calls()).length
    await holdCall(t, page)
    const list = await calls()
    t.equal(list.length, before + 1)
    t.match(await ended(list[0]._id), { call_status: 'success', disconnection_reason: 'user_hangup', custom_data: { source: 'widget', origin: site.origin } })
    t.same(errors, [], 'no script errors on the page')
  })

  t.test('with the site\'s own token endpoint (its backend holds the API key)', async (t) => {
    const { page, errors } = await open(t, `${site.origin}/backend`)
    const before = (await calls()).length
    await holdCall(t, page)
    const list = await calls()
    t.equal(list.length, before + 1)
    t.match(await ended(list[0]._id), { call_status: 'success', disconnection_reason: 'user_hangup' })
    t.same(errors, [])
  })

  t.test('a site the agent does not list: no widget, and its page cannot start a call with the key', async (t) => {
    const { page, logged } = await open(t, `${stranger.origin}/`)
    await poll(async () => logged, (lines) => lines.some((line) => line.includes('this site may not start calls')), { message: (lines) => `no refusal logged: ${lines.join(' | ')}` })
    t.equal(await page.locator('switchboard-widget').count(), 0, 'no button')
    const before = (await calls()).length
    const tried = await page.evaluate(async ([base, agentId, widgetKey]) => {
      try {
        const res = await fetch(`${base}/v1/widget/${agentId}/call`, { method: 'POST', headers: { 'x-widget-key': widgetKey } })
        return `answered ${res.status}`
      } catch (err) {
        return `refused: ${(err as Error).message}`
      }
    }, [url, agent._id, key])
    t.match(tried, /^refused/, 'the browser refuses the request after its preflight')
    t.equal((await calls()).length, before, 'no call started')
  })
})
