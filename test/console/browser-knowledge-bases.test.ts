import t from 'tap'
import { startWorkers } from '../../src/workers.ts'
import { createLogger } from '../../src/logger.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup } from '../helpers/app.ts'
import { launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { createAgent } from '../helpers/calls.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'

// The knowledge bases' pages in real Chromium: a file chosen through the file input, its state followed by the
// page's script (under the page's CSP) until it is ready, a search showing the snippet, an agent given it in the
// agent's Knowledge section (the one place) and then listed on its page, and axe-core on each page.

const HOURS = 'The front desk opens at eight in the morning.\n\nParking is free for visitors in the blue garage on Elm Street.\n'

t.test('create a knowledge base with a file, watch it become ready, search it: in Chromium', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id, { name: 'test' })
  const agent = await createAgent(ctx.app, { user, key, headers: { 'x-api-key': key } }, { agent_name: 'Reception' })
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  // A refused upload redirects to the form's draft (Post/Redirect/Get): no answer here is a 4xx.
  const { problems, axe: checked, check } = watchPage(page)
  const refused: string[] = []
  page.on('response', (res) => { if (res.status() >= 400) refused.push(`${res.status()} ${res.request().method()} ${new URL(res.url()).pathname}`) })

  await signInAt(page, url, user.email, PASSWORD)
  await page.getByRole('link', { name: 'Knowledge bases' }).click()
  t.equal(await page.locator('h1').textContent(), 'Knowledge bases')
  await check('knowledge bases, none')

  await page.getByRole('link', { name: 'New knowledge base' }).click()
  await check('new knowledge base')
  await page.getByLabel('Name').fill('Front desk')
  await page.getByLabel('Description').fill('What callers ask the front desk')
  await page.getByLabel('File').setInputFiles({ name: 'tool.exe', mimeType: 'application/octet-stream', buffer: Buffer.from('plain words') })
  await page.getByRole('button', { name: 'Create knowledge base' }).click()
  await page.waitForURL(/\/knowledge-bases\/new\?draft=[0-9a-f]{24}#form-problems$/)
  await page.locator('#file-error').waitFor()
  t.match(await page.locator('#file-error').textContent(), /\.exe files are not supported/)
  t.equal(await page.getByLabel('Name').inputValue(), 'Front desk', 'a refused file: the form again with what was typed, the reason under the file')
  t.equal(await page.getByLabel('Description').inputValue(), 'What callers ask the front desk')
  await check('new knowledge base, file refused')

  await page.getByLabel('Folder').fill('clinic')
  await page.getByLabel('File').setInputFiles({ name: 'hours.txt', mimeType: 'text/plain', buffer: Buffer.from(HOURS) })
  await page.getByRole('button', { name: 'Create knowledge base' }).click()
  await page.waitForURL(/\/knowledge-bases\/[0-9a-f]{24}\?done=created$/)
  t.equal(await page.locator('h1').textContent(), 'Front desk')
  // No worker yet: the file waits, and the page says it will update.
  t.equal(await page.locator('td.file-state').textContent(), 'Queued')
  t.match(await page.locator('#reading').textContent(), /updates their state by itself/)
  await check('a knowledge base, its file queued')

  // Workers start now: the page's script sees the file become ready without a reload.
  const stop = await startWorkers(ctx.boss, { db: ctx.db, config: ctx.config, log: createLogger(ctx.config) })
  t.teardown(stop)
  await page.locator('td.file-state', { hasText: 'Ready' }).waitFor({ timeout: 30_000 })
  await page.locator('#reading', { hasText: 'Every file has been read.' }).waitFor()
  t.equal(new URL(page.url()).search, '?done=created', 'the same page, not reloaded')

  await page.getByLabel('Words to find').fill('Where can visitors park?')
  await page.getByRole('button', { name: 'Search' }).click()
  await page.waitForURL(/\?q=/)
  const result = page.getByRole('list', { name: 'Search results' }).locator('li').first()
  t.match(await result.textContent(), /Parking is free for visitors in the blue garage/)
  t.same(await result.locator('mark').allTextContents(), ['Parking', 'visitors'])
  await check('a knowledge base, search results')

  // No agent uses it: the Agents section says where an agent is given knowledge and leads there.
  const agents = page.locator('#agents-title ~ p').first()
  t.match(await agents.textContent(), /An agent is given knowledge in its own Knowledge section/)
  await agents.getByRole('link', { name: 'Agents' }).click()
  await page.getByRole('link', { name: 'Reception' }).click()
  const knowledge = page.locator('#knowledge')
  await knowledge.getByLabel('Front desk').check()
  await knowledge.getByRole('button', { name: 'Save knowledge' }).click()
  await page.waitForURL(/\?knowledge=saved#knowledge$/)
  t.equal(await knowledge.getByLabel('Front desk').isChecked(), true)

  await page.getByRole('link', { name: 'Knowledge bases', exact: true }).first().click()
  await page.getByRole('link', { name: 'Front desk' }).click()
  const listed = page.getByRole('list', { name: 'Agents' })
  t.same(await listed.getByRole('link').allTextContents(), ['Reception'], 'the agent is listed on the knowledge base\'s page')
  await check('a knowledge base used by an agent')
  await listed.getByRole('link', { name: 'Reception' }).click()
  await page.waitForURL(new RegExp(`/agents/${agent._id}#knowledge$`))
  t.equal(await page.locator('#knowledge').getByLabel('Front desk').isChecked(), true, 'the link opens the agent\'s Knowledge section')

  await page.getByRole('link', { name: 'Knowledge bases', exact: true }).first().click()
  t.equal(await page.locator('tbody td').nth(4).textContent(), '1 ready')
  await check('knowledge bases')

  t.same(checked, Object.fromEntries(Object.keys(checked).map((name) => [name, []])), 'axe-core finds nothing on any page')
  t.same(problems, [], 'no script errors and no CSP violations')
  t.same(refused, [], 'the refused file was a redirect to its draft, not a 4xx page')
})
