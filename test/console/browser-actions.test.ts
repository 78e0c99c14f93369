import t from 'tap'
import { setup } from '../helpers/app.ts'
import { launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { startReceiver } from '../helpers/receiver.ts'

// In real Chromium: create an agent, give it an API call action whose body carries a {{variable}}, press Test
// and read the outcome; axe-core finds nothing on the agent page or the action's form. Deliveries may reach
// 127.0.0.1 here (DELIVERY_ALLOW_PRIVATE_NETWORKS), where the receiver listens.

t.test('an agent with an API call action, tested against a local receiver: in Chromium', async (t) => {
  const ctx = await setup(t, { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIMEOUT_MS: '2000' })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const receiver = await startReceiver(t)
  receiver.answers.push({ status: 201, body: '{"stored":true}' })
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  const { problems, axe, check } = watchPage(page)

  await signInAt(page, url, user.email, PASSWORD)
  await page.getByRole('link', { name: 'New agent' }).click()
  await page.getByRole('link', { name: 'Open the empty form' }).click()
  await page.locator('#agent_name').fill('Bistro')
  await page.getByLabel('Prompt').fill('You take table reservations.')
  // A field of data retrieval, for the action's body.
  await page.getByRole('button', { name: 'Add a field' }).click()
  await page.getByLabel('Variable').fill('people')
  await page.locator('#data_retrieval-0-type').selectOption('number')
  await page.getByRole('button', { name: 'Create agent' }).click()
  await page.waitForURL(/\/agents\/[0-9a-f]{24}\?saved=1$/)
  t.equal(await page.locator('h1').textContent(), 'Bistro')
  await check('agent page')

  await page.getByLabel('New action of type').selectOption({ label: 'API call' })
  await page.getByRole('button', { name: 'Add an action' }).click()
  await page.waitForURL(/\/actions\/new\?type=api_call$/)
  await check('new API call action')
  await page.locator('#settings-name').fill('Reservations')
  // Refused first (Post/Redirect/Get): the draft's page lists the problem at the top, the name typed is kept.
  await page.getByLabel('URL').fill('ftp://files.example.test')
  await page.getByRole('button', { name: 'Add action' }).click()
  await page.waitForURL(/\/actions\/new\?type=api_call&draft=[0-9a-f]{24}#form-problems$/)
  t.match(await page.locator('#form-problems').textContent(), 'The URL must be an absolute http:// or https:// URL')
  t.equal(await page.locator('#settings-name').inputValue(), 'Reservations')
  await check('refused API call action')
  await page.locator('#form-problems a').first().click()
  t.equal(await page.evaluate('document.activeElement?.id'), 'settings-url', 'the problem\'s link leads to its field')
  await page.getByLabel('URL').fill(`${receiver.url}/reservations`)
  await page.getByLabel('Name of header 1').fill('Authorization')
  await page.getByLabel('Value of header 1').fill('Bearer from-chromium')
  await page.getByLabel('Body (JSON)').fill('{"guests": "{{people}}", "agent": "{{agent_id}}"}')
  await page.getByRole('button', { name: 'Add action' }).click()
  await page.waitForURL(/\/actions\/[0-9a-f]{24}\?saved=1$/)
  t.equal(await page.locator('h1').textContent(), 'API call: Reservations')
  t.notMatch(await page.content(), 'from-chromium', 'the header value is not in the page')
  await check('API call action')

  // The result appears under the button without a reload, in view, with the request as sent.
  const before = page.url()
  await page.getByRole('button', { name: 'Test' }).click()
  await page.locator('#test-result h3').first().waitFor()
  t.equal(page.url(), before, 'no reload: the page stays where it was')
  const outcome = (await page.locator('#test-result').textContent())!
  t.match(outcome, 'Delivered: the answer\'s status is 201')
  t.match(outcome, '{"stored":true}')
  t.match(outcome, /POST http:\/\/127\.0\.0\.1:\d+\/reservations\nAuthorization: \*{8}/)
  t.notMatch(outcome, 'from-chromium', 'the header value is masked')
  t.equal(await page.evaluate('document.activeElement?.id'), 'test-result', 'focus moves to the result')
  const box = (await page.locator('#test-result').boundingBox())!
  const viewport = page.viewportSize()!
  t.ok(box.y >= 0 && box.y < viewport.height, `the result starts in view (at ${Math.round(box.y)} px of ${viewport.height})`)
  await check('tested action')
  const [received] = await receiver.waitFor(1)
  t.equal(received.url, '/reservations')
  t.equal(received.headers.authorization, 'Bearer from-chromium')
  t.match(received.json, { guests: 42, agent: /^[0-9a-f]{24}$/ })

  // Back on the agent's page, the action is listed.
  await page.getByRole('link', { name: 'Back to Bistro' }).click()
  t.equal(await page.getByRole('link', { name: 'Reservations' }).count(), 1)

  for (const [name, violations] of Object.entries(axe)) t.same(violations, [], `${name}: no axe-core violations`)
  t.same(problems, [], 'no script errors and no CSP violations')
})
