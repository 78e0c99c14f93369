import t from 'tap'
import { launchChromium, watchPage } from '../helpers/chromium.ts'
import { createTestDatabase } from '../helpers/database.ts'
import { start, stop } from '../helpers/server-process.ts'

// The "done when": a new self-hoster starts the server as `npm start` does, opens the printed sign-in link,
// sets a password, makes an agent and holds a (typed: no speech providers here) conversation with it, in real
// Chromium, without one API call typed by hand.

t.test('from the first start to a conversation with an agent, in the browser only', async (t) => {
  const server = await start({ DATABASE_URL: await createTestDatabase(t), LOG_FORMAT: 'pretty' })
  t.teardown(() => { server.child.kill('SIGKILL') })
  const began = Date.now()
  const link = /Sign-in {2}(http:\/\/\S+\/login\/link\/sl_\w+)/.exec(server.output())?.[1]
  t.ok(link, 'the banner prints the owner\'s sign-in link')

  const browser = await launchChromium(t)
  const page = await browser.newPage()
  const { problems } = watchPage(page, { failedLoads: 'ignored' })

  await page.goto(link!)
  t.equal(await page.locator('h1').textContent(), 'Set a password')
  await page.getByLabel('New password', { exact: true }).fill('a long enough password')
  await page.getByLabel('New password again').fill('a long enough password')
  await page.getByRole('button', { name: 'Save password' }).click()
  await page.getByRole('heading', { name: 'Your password is saved' }).waitFor()

  // The page says what comes next: the first agent.
  await page.getByRole('link', { name: 'Next: create your first agent' }).click()
  await page.waitForURL(/\/agents\/start$/)
  await page.getByRole('link', { name: 'Open the empty form' }).click()
  await page.waitForURL(/\/agents\/new$/)
  await page.getByLabel('Name', { exact: true }).fill('Front desk')
  await page.getByLabel('Begin message').fill('Good morning, Riverside Dental. How can I help?')
  await page.getByLabel('Prompt', { exact: true }).fill('You book dental appointments.')
  await page.getByRole('button', { name: 'Create agent' }).click()
  await page.getByRole('button', { name: 'Talk to this agent' }).click()
  await page.locator('#talk-transcript li', { hasText: 'Good morning, Riverside Dental.' }).waitFor()
  await page.getByLabel('Say something').fill('I would like an appointment on Tuesday.')
  await page.getByLabel('Say something').press('Enter')
  await page.locator('#talk-transcript li', { hasText: 'I would like an appointment on Tuesday.' }).waitFor()
  await page.locator('#talk-transcript li.agent').nth(1).waitFor()
  t.notMatch(await page.locator('#talk-transcript li.agent').nth(1).textContent(), 'Good morning', 'the agent answered the typed turn')
  await page.getByRole('button', { name: 'Hang up' }).click()
  await page.locator('#talk-status', { hasText: 'The call ended' }).waitFor()
  t.comment(`from the start banner to a finished conversation: ${((Date.now() - began) / 1000).toFixed(1)} s of browser work`)
  t.same(problems, [], 'no script errors and no CSP violations')
  const code = await stop(server)
  t.equal(code, 0, code === 0 ? 'the server stops cleanly' : `the server stopped with ${code}:\n${server.output().slice(-4000)}`)
})
