import t, { type Test } from 'tap'
import { callLatency } from '../../src/modules/calls/latency.ts'
import { setup } from '../helpers/app.ts'
import { insertCalls } from '../helpers/calls.ts'
import { axeViolations, launchChromium, openSection, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'

// The console in real Chromium (Debian's `chromium`, headless): sign in, create a key and see it once, see
// only its prefix afterwards, sign out. The CSP is enforced by the browser here: a violation would show up
// as a console error.

const launch = async (t: Test) => await launchChromium(t)

t.test('sign in, create a key, see it once, sign out: in Chromium', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)

  const browser = await launch(t)
  const context = await browser.newContext()
  const page = await context.newPage()
  const { problems } = watchPage(page)

  await page.goto(`${url}/`)
  t.equal(new URL(page.url()).pathname, '/login', 'signed out: the sign-in page')
  t.equal(await page.locator('h1').textContent(), 'Sign in')
  t.equal(await page.evaluate('getComputedStyle(document.body).fontFamily.includes("system-ui")'), true, 'the stylesheet applies')

  await page.getByLabel('E-mail address').fill(user.email)
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${url}/agents`)
  await openSection(page, 'API keys')
  t.equal(await page.locator('h1').textContent(), 'API keys')
  const cookie = (await context.cookies()).find((c) => c.name === 'switchboard_session')
  t.match(cookie, { httpOnly: true, sameSite: 'Lax', path: '/' })
  t.equal(await page.evaluate('document.cookie'), '', 'no script sees the session')

  await page.getByLabel('Name').fill('from the browser')
  await page.getByRole('button', { name: 'Create key' }).click()
  const shown = (await page.locator('#new-key').textContent())!
  t.match(shown, /^sk_[0-9A-Za-z]{40}$/, 'the new key is shown')
  t.equal(await page.evaluate('[localStorage.length, sessionStorage.length].join()'), '0,0', 'nothing kept in the browser\'s storage')

  await page.goto(`${url}/keys`)
  t.equal(await page.locator('#new-key').count(), 0, 'not shown again')
  t.notMatch(await page.content(), shown)
  t.equal(await page.locator('tbody code').textContent(), `${shown.slice(0, 11)}…`)
  t.equal(await page.locator('tbody td').nth(1).textContent(), 'from the browser')

  // Keyboard: the first Tab lands on the skip link, which is visible when focused.
  await page.keyboard.press('Tab')
  t.equal(await page.evaluate('document.activeElement?.textContent'), 'Skip to content')
  t.ok(await page.locator('.skip').isVisible())

  await page.locator('.account summary').click()
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.waitForURL(`${url}/login`)
  await page.goto(`${url}/keys`)
  t.equal(new URL(page.url()).pathname, '/login', 'signed out for good')
  t.same(problems, [], 'no script errors and no CSP violations')
})

t.test('create an agent in the form, press Talk, and hear it out on the agent\'s page: in Chromium', async (t) => {
  // No speech providers: the call is typed, on the simulator engine, run by this process's workers.
  const ctx = await setup(t, { VOICE_ENGINE: 'simulator' }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const browser = await launch(t)
  const page = await browser.newPage()
  const { problems } = watchPage(page)
  page.on('response', (res) => { if (res.status() >= 400) problems.push(`${res.status()} ${res.url()}`) })

  await signInAt(page, url, user.email, PASSWORD)
  await page.getByRole('link', { name: 'Agents' }).click()
  await page.getByRole('link', { name: 'New agent' }).click()
  await page.getByRole('link', { name: 'Open the empty form' }).click()
  await page.getByLabel('Name').fill('Clinic')
  await page.getByLabel('Begin message').fill('Hello from the clinic, how can I help?')
  await page.getByLabel('Prompt').fill('You book appointments.')
  await page.getByRole('radio', { name: /^Echo OpenAI/ }).check()
  await page.getByRole('button', { name: 'Create agent' }).click()
  await page.waitForURL(/\/agents\/[0-9a-f]{24}\?saved=1$/)
  t.equal(await page.locator('h1').textContent(), 'Clinic')
  t.equal(await page.getByRole('group', { name: 'Voice', exact: true }).locator('input:checked').inputValue(), '65a0f0000000000000000004', 'the chosen voice is kept')

  // The call is held on the agent's page (browser-talk.test.ts follows it in detail).
  await page.getByRole('button', { name: 'Talk to this agent' }).click()
  await page.locator('#talk-transcript li.agent', { hasText: 'Hello from the clinic, how can I help?' }).waitFor()
  await page.locator('#talk-status', { hasText: 'Type below' }).waitFor()
  await page.getByRole('button', { name: 'Hang up' }).click()
  await page.locator('#talk-status', { hasText: 'The call ended' }).waitFor()
  const calls = await ctx.db.selectFrom('calls').select(['agent_name', 'call_type']).where('user_id', '=', user.id).execute()
  t.match(calls, [{ agent_name: 'Clinic', call_type: 'web' }])

  // The finished call in the console: its page with the transcript.
  await page.goto(`${url}/calls`)
  await page.locator('main tbody a').first().click()
  await page.waitForURL(/\/calls\/[0-9a-f]{24}$/)
  t.equal(await page.locator('h1').textContent(), 'Web call with Clinic')
  t.match(await page.locator('.facts').textContent(), /Agent\s*Clinic/)
  t.match(await page.locator('ol.transcript li').first().textContent(), /Agent: Hello from the clinic, how can I help\?/, 'the transcript, the agent\'s greeting first')
  t.same(problems, [], 'no script errors and no CSP violations')
})

t.test('every console page, and the web-call page it opens, passes axe-core (WCAG 2.1 A and AA)', async (t) => {
  const ctx = await setup(t, { VOICE_ENGINE: 'simulator' })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const browser = await launch(t)
  const page = await browser.newPage()
  const checked: Record<string, unknown> = {}
  const check = async (name: string) => { checked[name] = await axeViolations(page) }

  await page.goto(`${url}/login`)
  await check('sign-in')
  await page.getByLabel('E-mail address').fill(user.email)
  await page.getByLabel('Password').fill('wrong password!')
  await page.getByRole('button', { name: 'Sign in' }).click()
  await check('sign-in refused')
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${url}/agents`)
  await page.goto(`${url}/keys`)
  await check('API keys')
  await page.getByLabel('Name').fill('ci')
  await page.getByRole('button', { name: 'Create key' }).click()
  await check('a new key')
  await page.goto(`${url}/account/password`)
  await check('password')
  await page.goto(`${url}/agents/new`)
  await check('new agent')
  await page.getByRole('button', { name: 'Create agent' }).click()
  await check('new agent with errors')
  await page.getByLabel('Name').fill('Clinic')
  await page.getByRole('button', { name: 'Create agent' }).click()
  await page.waitForURL(/\/agents\/[0-9a-f]{24}/)
  await check('an agent')
  const agentId = /\/agents\/([0-9a-f]{24})/.exec(page.url())![1]
  const turns = [100, 200].map((ms, i) => ({ at: Date.now() + i * 5000, end_of_turn_ms: ms, transcription_ms: null, llm_ms: ms + 300, tts_ms: ms, e2e_ms: ms + 700 }))
  const [timed] = await insertCalls(ctx.db, user.id, { _id: agentId, agent_name: 'Clinic' }, [{ latency: JSON.stringify(callLatency(turns)) }])
  await page.goto(`${url}/calls/${timed}`)
  await check('a call with its latency')
  await page.goto(`${url}/agents`)
  await check('agents')
  await page.goto(`${url}/calls`)
  await check('calls')
  await page.goto(`${url}/calls?status=bad`)
  await check('calls with a bad filter')
  await page.goto(`${url}/calls/${'0'.repeat(24)}`)
  await check('no such call')
  await page.goto(`${url}/web-call`)
  await check('the web-call page')
  t.same(checked, Object.fromEntries(Object.keys(checked).map((name) => [name, []])), 'no violations')
  // The checker does see them where they are.
  await page.setContent('<html><body><img src="/console/console.css"><input type="text"></body></html>')
  t.match((await axeViolations(page)).map((v) => v.id).sort(), ['document-title', 'html-has-lang', 'image-alt', 'label'])
})
