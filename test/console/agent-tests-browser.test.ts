import t from 'tap'
import { setup } from '../helpers/app.ts'
import { addAction, createAgent } from '../helpers/calls.ts'
import { axeViolations, launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { startOpenAiHttpStandin, type ScriptedReply } from '../helpers/openai-http-standin.ts'
import { startReceiver } from '../helpers/receiver.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'

// In real Chromium: type to an agent in the playground (its model is the local stand-in, with scripted replies
// that call a tool), save the conversation as a test, run it and see it pass, run it again and compare both runs
// side by side; axe-core finds nothing on any page state. The tool's receiver listens on 127.0.0.1
// (DELIVERY_ALLOW_PRIVATE_NETWORKS).

const TURNS: ScriptedReply[][] = [
  [{ toolCalls: [{ name: 'lookup', arguments: { ref: 'A1' } }] }, { text: 'Your table is booked for 19:00.' }],
  [{ text: 'See you tonight.' }]
]

t.test('the playground typed through, saved as a test, run and passed, two runs side by side: in Chromium', async (t) => {
  const llm = await startOpenAiHttpStandin(t)
  const receiver = await startReceiver(t)
  const ctx = await setup(t, { LLM_URL: llm.url, DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIMEOUT_MS: '2000' })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const account = { user, key, headers: { 'x-api-key': key } }
  const agent = await createAgent(ctx.app, account, { agent_name: 'Bistro' })
  await addAction(ctx.app, account, agent._id, { name: 'lookup', when: 'during_call', url: `${receiver.url}/lookup`, description: 'find the booking' })

  const browser = await launchChromium(t)
  const page = await browser.newPage()
  const { problems, axe, check } = watchPage(page)

  await signInAt(page, url, user.email, PASSWORD)
  await page.goto(`${url}/agents/${agent._id}`)
  await page.getByRole('link', { name: 'Type to it in the playground' }).click()
  await page.waitForURL(`${url}/agents/${agent._id}/playground`)
  t.equal(await page.locator('h1').textContent(), 'Playground: Bistro')
  t.equal(await page.locator('#engine-notice').count(), 0, 'a model is configured: no simulator notice')
  await check('empty playground')

  llm.replies.push(...TURNS[0])
  await page.getByLabel('Your message').fill('Is my table booked?')
  await page.getByRole('button', { name: 'Send' }).click()
  const chat = page.locator('#chat')
  await chat.getByText('Your table is booked for 19:00.').waitFor()
  const tool = chat.locator('li.tool')
  t.match(await tool.textContent(), /lookup[\s\S]*Arguments[\s\S]*"ref":"A1"[\s\S]*Answer/, 'the tool call: name, arguments, answer')
  t.equal(receiver.received.length, 1, 'the tool ran')
  await check('after a turn with a tool call')

  llm.replies.push(...TURNS[1])
  await page.getByLabel('Your message').fill('Thanks!')
  await page.getByRole('button', { name: 'Send' }).click()
  await chat.getByText('See you tonight.').waitFor()
  t.same(await chat.locator('li.user').allTextContents(), ['Caller: Is my table booked?', 'Caller: Thanks!'], 'both caller lines, in order')

  await page.getByLabel('Name of the test').fill('Table booked')
  await page.getByRole('button', { name: 'Save as test' }).click()
  await page.waitForURL(/\/agents\/[0-9a-f]{24}\/tests\/[0-9a-f]{24}\?saved=1$/)
  t.equal(await page.locator('h1').textContent(), 'Test: Table booked')
  t.equal(await page.getByLabel('Lines of the caller').inputValue(), 'Is my table booked?\nThanks!', 'the caller\'s lines are the script')
  await check('saved test')

  await page.getByRole('link', { name: 'All tests of Bistro' }).click()
  await page.waitForURL(`${url}/agents/${agent._id}/tests`)
  await check('tests')

  for (const turn of TURNS) llm.replies.push(...turn)
  await page.getByRole('button', { name: 'Run all tests' }).click()
  await page.waitForURL(/\/tests\/runs\/[0-9a-f]{24}$/)
  t.match(await page.locator('.notice').first().textContent(), 'Every test passed: 1 passed, 0 failed.')
  t.ok(await page.locator('.test-result .result.passed').count() >= 1, 'the test passed')
  await page.getByText('Transcript of Table booked').click()
  await page.locator('.test-result ol.transcript').getByText('See you tonight.').waitFor()
  await check('run results, transcript open')
  const firstRun = page.url()

  // Run it again (the page's own form for one test), then compare the two runs.
  await page.goto(`${url}/agents/${agent._id}/tests`)
  await page.getByRole('link', { name: 'Table booked' }).click()
  for (const turn of TURNS) llm.replies.push(...turn)
  await page.getByRole('button', { name: 'Run this test' }).click()
  await page.waitForURL((address) => /\/tests\/runs\/[0-9a-f]{24}$/.test(address.pathname) && address.href !== firstRun)
  await page.getByLabel('Side by side with').selectOption({ index: 0 })
  await page.getByRole('button', { name: 'Compare' }).click()
  await page.waitForURL(/\?with=[0-9a-f]{24}$/)
  t.equal(await page.locator('.side-by-side .test-result').count(), 2, 'both runs side by side')
  await check('two runs side by side')

  await page.goto(`${url}/agents/${agent._id}/tests`)
  t.equal(await page.getByRole('table', { name: 'Tests, with the latest result on each version' }).locator('.result.passed').count(), 1, 'the list shows the latest result of the version')
  t.equal(await page.getByRole('table', { name: 'The latest runs' }).locator('tbody tr').count(), 2, 'and both runs')
  await check('tests with results')
  t.same(problems, [], 'no script errors and no CSP violations')

  // A refused form redirects (303) to the new test's page with its draft (Post/Redirect/Get): no error status at all.
  await page.getByRole('link', { name: 'New test' }).click()
  await page.getByLabel('Name', { exact: true }).fill('Asks about parking')
  await page.getByRole('button', { name: 'Add test' }).click()
  await page.waitForURL(/\/tests\/new\?draft=[0-9a-f]{24}#form-problems$/)
  await page.locator('.error-summary').waitFor()
  await check('a refused new test')

  t.match(await page.locator('#caller-lines-error').textContent(), 'Give the caller\'s lines')
  t.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Asks about parking', 'the name typed is shown')
  await page.reload()
  t.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Asks about parking', 'and again on a reload')
  t.same(problems, [])
  for (const [name, violations] of Object.entries(axe)) t.same(violations, [], `${name}: no axe-core violations`)
})

t.test('the playground without a model: the simulator answers, the notice says so: in Chromium', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const agent = await createAgent(ctx.app, { user, key, headers: { 'x-api-key': key } }, { agent_name: 'Front desk' })
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  await signInAt(page, url, user.email, PASSWORD)
  await page.goto(`${url}/agents/${agent._id}/playground`)
  t.match(await page.locator('#engine-notice').textContent(), 'the built-in simulator answers')
  await page.getByLabel('Your message').fill('Do you have a table on Tuesday?')
  await page.getByRole('button', { name: 'Send' }).click()
  await page.locator('#chat li.user').waitFor()
  t.match(await page.locator('#chat li.agent').last().textContent(), 'Agent: ', 'the simulator\'s reply')
  t.same(await axeViolations(page), [], 'no axe-core violations')
})
