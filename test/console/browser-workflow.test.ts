import t from 'tap'
import { setup } from '../helpers/app.ts'
import { launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'

// In real Chromium: build a three-step workflow on an agent's workflow page (a conversation step, an end step after
// it, a global transfer step), see the steps in the drawn graph, and let axe-core look at every page on the way.

t.test('a three-step workflow built in the console: in Chromium', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  const { problems, axe, check } = watchPage(page)

  await signInAt(page, url, user.email, PASSWORD)
  await page.getByRole('link', { name: 'New agent' }).click()
  await page.getByRole('link', { name: 'Open the empty form' }).click()
  await page.locator('#agent_name').fill('Bistro')
  await page.getByRole('button', { name: 'Create agent' }).click()
  await page.waitForURL(/\/agents\/[0-9a-f]{24}\?saved=1$/)
  await page.getByRole('link', { name: 'Build a workflow' }).click()
  await page.waitForURL(/\/workflow$/)
  await check('empty workflow page')

  const addStep = async (type: string) => {
    await page.getByLabel('Type of the new step').selectOption({ label: type })
    await page.getByRole('button', { name: 'Add a step' }).click()
    await page.waitForURL(/\/workflow\/steps\/new\?type=/)
  }
  const backToWorkflow = async () => {
    await page.getByRole('link', { name: 'Back to the workflow of Bistro' }).click()
    await page.waitForURL(/\/workflow$/)
  }

  await addStep('Conversation')
  await check('new conversation step')
  await page.getByLabel('Step id').fill('greet')
  await page.getByLabel('Name', { exact: true }).fill('Greet')
  await page.getByLabel('Instructions').fill('Greet the caller and ask what they need.')
  await page.getByRole('button', { name: 'Add step' }).click()
  await page.waitForURL(/\/workflow\/steps\/greet\?saved=1$/)
  await check('saved conversation step')
  await backToWorkflow()

  await addStep('End')
  await page.getByLabel('Step id').fill('bye')
  await page.getByLabel('Name', { exact: true }).fill('Goodbye')
  await page.getByLabel('Comes after').selectOption('greet')
  await page.getByLabel('Condition of that transition').selectOption('prompt')
  await page.getByLabel('When or if', { exact: true }).fill('the caller has what they need')
  await page.getByRole('button', { name: 'Add step' }).click()
  await page.waitForURL(/\/workflow\/steps\/bye\?saved=1$/)
  await backToWorkflow()

  await addStep('Transfer')
  await page.getByLabel('Step id').fill('human')
  await page.getByLabel('Name', { exact: true }).fill('A person')
  await page.getByLabel('Reachable from every conversation step when').fill('the caller asks for a person')
  await page.getByLabel('Transfer to').selectOption('number')
  await page.getByLabel('Phone number').fill('+14155550123')
  // First a mistake: the API's refusal is shown next to the field.
  await page.getByLabel('Step id').fill('Human desk')
  await page.getByRole('button', { name: 'Add step' }).click()
  // Post/Redirect/Get: the new step's page with the draft, opened at the summary of its problems.
  await page.waitForURL(/\/workflow\/steps\/new\?type=transfer&draft=[0-9a-f]{24}#form-problems$/)
  await page.locator('#id-error').waitFor()
  t.match(await page.locator('#id-error').textContent(), /step id may hold only lower-case letters, digits and underscores/i)
  t.equal(await page.getByLabel('Phone number').inputValue(), '+14155550123', 'the values sent are shown')
  await check('refused transfer step')
  await page.getByLabel('Step id').fill('human')
  await page.getByRole('button', { name: 'Add step' }).click()
  await page.waitForURL(/\/workflow\/steps\/human\?saved=1$/)
  await backToWorkflow()

  const graph = page.locator('svg.workflow')
  t.equal(await graph.getAttribute('role'), 'img')
  t.equal(await graph.locator('g.step').count(), 3, 'three steps are drawn')
  t.same((await graph.locator('g.step text.name').allTextContents()).sort(), ['A person', 'Goodbye', 'Greet'])
  t.equal(await graph.locator('g.edge').count(), 1, 'one transition is drawn')
  t.match(await graph.locator('g.edge text').textContent(), 'when the caller has what')
  t.ok(await graph.locator('g.step.start').isVisible())
  await check('workflow page with its graph')

  for (const [name, violations] of Object.entries(axe)) t.same(violations, [], `${name}: no axe-core violations`)
  t.same(problems, [], 'no script errors and no CSP violations (a refused form redirects: no error status)')
})
