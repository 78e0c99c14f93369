import net from 'node:net'
import t from 'tap'
import { newId } from '../../src/db/ids.ts'
import { setup } from '../helpers/app.ts'
import { launchChromium, openSection, signInAt, watchPage } from '../helpers/chromium.ts'
import { ConsoleClient, createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { accountsStandIn, ACCOUNT_EMAIL } from '../helpers/oauth-connect.ts'

// The Integrations page in real Chromium (CSP enforced): Connect Google Calendar, which goes (303) to a loopback
// stand-in of Google's authorize page, Allow there, back through the callback to the page showing the account
// connected; a refused API key shown under its field; Disconnect switching the agent's calendar tool off. axe-core
// (WCAG 2.1 A and AA) over the page in each state.

async function freePort (): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

t.test('connect Google Calendar through its OAuth page and disconnect it: in Chromium, without axe violations', async (t) => {
  const google = await accountsStandIn(t)
  // The callback address is PUBLIC_BASE_URL's, so the server listens where that says.
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const ctx = await setup(t, { ...google.env, PUBLIC_BASE_URL: base })
  await ctx.app.listen({ port, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const helper = new ConsoleClient(ctx.app)
  await helper.signIn(user.email, PASSWORD)
  const created = await helper.submit('/agents/new', '/agents', {
    agent_name: 'Front desk', begin_message: '', general_prompt: 'You book visits.', language: 'en-US', voice_id: '65a0f0000000000000000001', webhook_url: '', status: 'active'
  })
  const agentId = /^\/agents\/([0-9a-f]{24})/.exec(created.headers.location as string)![1]
  // The calendar tool whose integration is disconnected below (inserted: its type's form is not this test's).
  const toolId = newId()
  await ctx.db.insertInto('agent_tools').values({
    id: toolId, user_id: user.id, agent_id: agentId, tool_type: 'calendar_one', is_active: true,
    settings: JSON.stringify({ name: 'Visits calendar', calendar_id: 'primary', time_zone: 'Europe/Berlin', duration_minutes: 30 })
  }).execute()

  const browser = await launchChromium(t)
  const page = await browser.newPage()
  // The refused key answers 422 on purpose; every other console error (a CSP violation among them) is a problem.
  const { problems, axe, check } = watchPage(page, { failedLoads: 'ignored' })

  await signInAt(page, base, user.email, PASSWORD)
  await openSection(page, 'Integrations')
  await page.waitForURL(`${base}/integrations`)
  t.equal(await page.locator('#integration-calendar_one-status').textContent(), 'Not connected')
  await check('integrations, none connected')

  // A refused token: the message under the field, nothing connected.
  await page.getByLabel('Calendly personal access token').fill('not-a-token')
  await page.getByRole('button', { name: 'Connect Calendly with the token' }).click()
  await page.locator('#booking_two-api_key-error').waitFor()
  t.match(await page.locator('#booking_two-api_key-error').textContent(), /^Calendly refused the key/)
  t.equal(await page.getByLabel('Calendly personal access token').getAttribute('aria-invalid'), 'true')
  await check('a refused token')

  // Connect → Google's page (the stand-in, another origin) → Allow → back on the Integrations page.
  await page.getByRole('button', { name: 'Connect Google Calendar' }).click()
  await page.waitForURL((url) => url.href.startsWith(`${google.calendar.origin}/o/oauth2/v2/auth?`))
  await page.getByRole('button', { name: 'Allow' }).click()
  await page.waitForURL(`${base}/integrations?connected=calendar_one`)
  t.equal(await page.getByRole('status').textContent(), `Google Calendar is connected as ${ACCOUNT_EMAIL}.`)
  t.equal(await page.locator('#integration-calendar_one-status').textContent(), 'Connected')
  t.equal(await page.locator('#integration-calendar_one-account').textContent(), ACCOUNT_EMAIL)
  t.match(await page.locator('.integration').first().textContent(), /switches off\s+1 tool that uses it/)
  await check('Google Calendar connected')

  await page.getByRole('button', { name: 'Disconnect Google Calendar' }).click()
  await page.waitForURL(`${base}/integrations?disconnected=calendar_one&tools=1`)
  t.equal(await page.getByRole('status').textContent(), 'Google Calendar is disconnected; 1 tool was switched off.')
  t.equal(await page.locator('#integration-calendar_one-status').textContent(), 'Not connected')
  t.equal(google.oauth.revoked.length, 1, 'revoked at Google')
  await check('disconnected')

  // The agent page lists the tool as no longer active.
  await page.goto(`${base}/agents/${agentId}`)
  const state = await page.getByRole('row', { name: /Visits calendar/ }).locator('td').nth(2).textContent()
  t.not(state, 'active', `the agent page shows the tool off (${state})`)
  t.equal((await ctx.db.selectFrom('agent_tools').select('is_active').where('id', '=', toolId).executeTakeFirstOrThrow()).is_active, false)

  for (const [name, violations] of Object.entries(axe)) t.same(violations, [], `${name}: no axe-core violations`)
  t.same(problems, [], 'no script errors or CSP violations')
})
