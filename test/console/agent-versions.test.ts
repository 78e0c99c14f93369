import t from 'tap'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup, type TestContext } from '../helpers/app.ts'
import { axeViolations, signedInChromium } from '../helpers/chromium.ts'
import { ConsoleClient, createConsoleUser, csrfOf, followRefusal, PASSWORD } from '../helpers/console-client.ts'

// An agent's versions in the console (docs/agents.md, "Versions"): the history with what changed, the difference
// between two versions, Restore (CSRF, Post/Redirect/Get), the widget's pin, and the number page's pins.

const FORM = {
  agent_name: 'Front desk',
  begin_message: 'Hello.',
  general_prompt: 'Old prompt.',
  language: 'en-US',
  voice_id: '65a0f0000000000000000001',
  webhook_url: '',
  status: 'active'
}

async function signedIn (ctx: TestContext) {
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id, { name: 'test' })
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const api = async (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
    await ctx.app.inject({ method, url, headers: { 'x-api-key': key }, ...(payload !== undefined && { payload }) })
  return { user, browser, api }
}

async function createThroughForm (browser: ConsoleClient): Promise<string> {
  const res = await browser.submit('/agents/new', '/agents', FORM)
  const id = /^\/agents\/([0-9a-f]{24})\?saved=1$/.exec(res.headers.location as string)?.[1]
  if (id === undefined) throw new Error(`not created: ${res.statusCode}\n${res.body}`)
  return id
}

t.test('the agent forms write versions; the history, a diff, restore and the widget pin', async (t) => {
  const ctx = await setup(t)
  const { browser, api } = await signedIn(ctx)
  const id = await createThroughForm(browser)
  t.match((await api('GET', `/v1/agent/${id}/versions`)).json(), [{ version: 1, change: 'created' }], 'creating is version 1')
  const edited = await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...FORM, general_prompt: 'New prompt.' })
  t.equal(edited.statusCode, 303)
  await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...FORM, general_prompt: 'New prompt.' })
  t.match((await api('GET', `/v1/agent/${id}/versions`)).json(), [{ version: 2, change: 'agent', changes: ['llm.general_prompt'] }, { version: 1 }], 'one version for the change, none for saving it again')
  const tool = await browser.get(`/agents/${id}/tools/new?type=end_call`)
  const added = await browser.post(`/agents/${id}/tools`, { csrf_token: csrfOf(tool.body), type: 'end_call', 'settings.name': 'Bye', active: 'true' })
  t.equal(added.statusCode, 303, added.body)
  t.match((await api('GET', `/v1/agent/${id}/versions`)).json()[0], { version: 3, change: 'tools' }, 'the tool forms write versions too')

  const agentPage = await browser.get(`/agents/${id}`)
  t.match(agentPage.body, `<a href="/agents/${id}/versions">see the history, compare and restore</a>`)
  t.match(agentPage.body, 'Version 3.')

  const history = await browser.get(`/agents/${id}/versions`)
  t.equal(history.statusCode, 200)
  t.match(history.body, '<h1>Versions of Front desk</h1>')
  t.match(history.body, `<a href="/agents/${id}/versions/3">Version 3</a> (latest)`)
  t.match(history.body, /<td>Settings<\/td>\s*<td>llm\.general_prompt<\/td>/, 'the agent form saves the agent and its LLM values at once')
  t.match(history.body, /<td>Tools<\/td>\s*<td>tools<\/td>/)

  const version = await browser.get(`/agents/${id}/versions/2`)
  t.equal(version.statusCode, 200)
  t.match(version.body, '<h2 id="diff-title">Differences from version 1</h2>')
  t.match(version.body, /<th scope="row"><code>llm\.general_prompt<\/code><\/th><td>Old prompt\.<\/td><td>New prompt\.<\/td>/)
  const compared = await browser.get(`/agents/${id}/versions/1?against=3`)
  t.match(compared.body, /<td>New prompt\.<\/td><td>Old prompt\.<\/td>/)
  t.match(compared.body, /Removed tool <code>[0-9a-f]{24}<\/code> \(end_call\)/)
  t.match(compared.body, '<button type="submit">Restore version 1</button>')
  t.notMatch((await browser.get(`/agents/${id}/versions/3`)).body, 'Restore version', 'the latest has nothing to restore')
  t.equal((await browser.get(`/agents/${id}/versions/9`)).statusCode, 404)
  t.equal((await browser.get(`/agents/${id}/versions/x`)).statusCode, 404)
  t.equal((await browser.get(`/agents/${id}/versions/2?against=9`)).statusCode, 404)

  t.equal((await browser.post(`/agents/${id}/versions/1/restore`, {})).statusCode, 403, 'restore needs the CSRF token')
  const restored = await browser.post(`/agents/${id}/versions/1/restore`, { csrf_token: csrfOf(compared.body) })
  t.equal(restored.statusCode, 303)
  t.equal(restored.headers.location, `/agents/${id}/versions?restored=1`)
  t.match((await browser.get(restored.headers.location as string)).body, 'Restored: version 4 is version 1 again.')
  const agent = (await api('GET', `/v1/agent/${id}`)).json()
  t.equal(agent.version, 4)
  t.equal((await api('GET', `/v1/llm/${agent.llm_id as string}`)).json().general_prompt, 'Old prompt.')
  t.same((await api('GET', `/v1/agent/${id}/tools`)).json(), [], 'the tool added since is gone')
  t.match((await api('GET', `/v1/agent/${id}/versions/4`)).json(), { change: 'restore', restored_from: 1 })

  const pin = await browser.post(`/agents/${id}/versions/widget-pin`, { csrf_token: csrfOf(compared.body), version: '2' })
  t.equal(pin.statusCode, 303)
  t.equal((await api('GET', `/v1/agent/${id}`)).json().widget_settings.agent_version, 2)
  t.match((await browser.get(`/agents/${id}/versions?pinned=1`)).body, /<option value="2" selected>Version 2<\/option>/)
  t.equal((await browser.post(`/agents/${id}/versions/widget-pin`, { csrf_token: csrfOf(compared.body), version: '9' })).statusCode, 404)
  await browser.post(`/agents/${id}/versions/widget-pin`, { csrf_token: csrfOf(compared.body), version: '' })
  t.equal((await api('GET', `/v1/agent/${id}`)).json().widget_settings.agent_version, null, 'back to the latest')
  t.equal((await api('GET', `/v1/agent/${id}`)).json().version, 4, 'the pin makes no version')

  // The agent form keeps the widget's pin (it has no field for it).
  await browser.post(`/agents/${id}/versions/widget-pin`, { csrf_token: csrfOf(compared.body), version: '3' })
  await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...FORM, general_prompt: 'Third prompt.' })
  t.equal((await api('GET', `/v1/agent/${id}`)).json().widget_settings.agent_version, 3)

  const stranger = await signedIn(ctx)
  t.equal((await stranger.browser.get(`/agents/${id}/versions`)).statusCode, 404, 'another account\'s agent')
  t.equal((await stranger.browser.get(`/agents/${id}/versions/1`)).statusCode, 404)
  const theirs = await stranger.browser.get('/agents')
  t.equal((await stranger.browser.post(`/agents/${id}/versions/1/restore`, { csrf_token: csrfOf(theirs.body) })).statusCode, 404)
})

t.test('the number page pins versions of its agents', async (t) => {
  const ctx = await setup(t)
  const { browser, api } = await signedIn(ctx)
  const id = await createThroughForm(browser)
  await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...FORM, general_prompt: 'New prompt.' })
  const number = (await api('POST', '/v1/phone-number/buy', { phone_number: '+14155550123' })).json()._id as string
  const page = `/phone-numbers/${number}`
  await browser.submit(page, page, { nickname: '', inbound_agent_id: id, outbound_agent_id: '', inbound_agent_version: '', outbound_agent_version: '' })
  const shown = await browser.get(page)
  t.match(shown.body, '<label for="inbound_agent_version">Inbound agent&#39;s version</label>')
  t.match(shown.body, /<option value="" selected>The latest version<\/option>\s*<option value="2">Version 2<\/option>\s*<option value="1">Version 1<\/option>/)

  const saved = await browser.submit(page, page, { nickname: '', inbound_agent_id: id, outbound_agent_id: '', inbound_agent_version: '1', outbound_agent_version: '' })
  t.equal(saved.statusCode, 303)
  t.match((await api('GET', `/v1/phone-number/${number}`)).json(), { inbound_agent_id: id, inbound_agent_version: 1 })
  t.match((await browser.get(page)).body, '<option value="1" selected>Version 1</option>')

  // Refused: the number's page with the draft (Post/Redirect/Get).
  const missing = await followRefusal(browser, await browser.submit(page, page, { nickname: '', inbound_agent_id: id, outbound_agent_id: '', inbound_agent_version: '7', outbound_agent_version: '' }), page)
  t.match(missing.page.body, '<p id="inbound_agent_version-error" class="field-error">The agent has no such version: choose one of the list.</p>')
  t.match((await api('GET', `/v1/phone-number/${number}`)).json(), { inbound_agent_version: 1 }, 'the pin unchanged')
  const bad = await followRefusal(browser, await browser.submit(page, page, { nickname: '', inbound_agent_id: id, outbound_agent_id: '', inbound_agent_version: 'one', outbound_agent_version: '' }), page)
  t.match(bad.page.body, 'Choose one of the listed versions.')

  const other = await createThroughForm(browser)
  await browser.submit(page, page, { nickname: '', inbound_agent_id: other, outbound_agent_id: '', inbound_agent_version: '1', outbound_agent_version: '' })
  t.match((await api('GET', `/v1/phone-number/${number}`)).json(), { inbound_agent_id: other, inbound_agent_version: null }, 'another agent: its latest, the pin cleared')
})

t.test('the versions pages in Chromium: no axe violations', async (t) => {
  const { page, problems } = await signedInChromium(t)
  await page.getByRole('link', { name: 'New agent' }).click()
  await page.getByRole('link', { name: 'Open the empty form' }).click()
  await page.locator('#agent_name').fill('Bistro')
  await page.getByLabel('Prompt').fill('Old prompt.')
  await page.getByRole('button', { name: 'Create agent' }).click()
  await page.waitForURL(/\/agents\/[0-9a-f]{24}\?saved=1$/)
  await page.getByLabel('Prompt').fill('New prompt.')
  await page.getByRole('button', { name: 'Save' }).first().click()
  await page.waitForURL(/\/agents\/[0-9a-f]{24}\?saved=1$/)

  const axe: Record<string, unknown> = {}
  await page.getByRole('link', { name: 'see the history, compare and restore' }).click()
  await page.waitForURL(/\/versions$/)
  axe.history = await axeViolations(page)
  await page.getByRole('link', { name: 'Version 2' }).click()
  await page.waitForURL(/\/versions\/2$/)
  axe.diff = await axeViolations(page)
  await page.getByLabel('Compare with').selectOption('1')
  await page.getByRole('button', { name: 'Compare' }).click()
  await page.waitForURL(/\/versions\/2\?against=1$/)
  axe.compared = await axeViolations(page)
  await page.getByRole('link', { name: 'All versions of Bistro' }).click()
  await page.getByRole('link', { name: 'Version 1', exact: true }).click()
  await page.waitForURL(/\/versions\/1$/)
  axe.restorable = await axeViolations(page)
  await page.getByRole('button', { name: 'Restore version 1' }).click()
  await page.waitForURL(/\/versions\?restored=1$/)
  t.match(await page.content(), 'Restored: version 3 is version 1 again.')
  axe.restored = await axeViolations(page)
  for (const [name, violations] of Object.entries(axe)) t.same(violations, [], `${name}: no axe-core violations`)
  t.same(problems, [], 'no script errors and no CSP violations')
})
