import { readFile } from 'node:fs/promises'
import t from 'tap'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { axeViolations, launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'

// The Analytics page in real Chromium, which enforces the CSP: the charts must be styled from console.css alone.

const TITLES = ['Call minutes per day', 'Calls per day by agent', 'Sentiment of the calls', 'Credits by agent']

t.test('analytics: change the range, see the four charts, open their figures, download a CSV: in Chromium', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const account = { user, key, headers: { 'x-api-key': key } }
  const desk = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  const sales = await createAgent(ctx.app, account, { agent_name: 'Sales <b>' })
  await insertCalls(ctx.db, user.id, desk, [
    { start_timestamp: new Date('2026-05-01T09:00:00Z'), duration_ms: 90_000, sentiment: 'positive', phone_call_credits: 7 },
    { start_timestamp: new Date('2026-05-02T09:00:00Z'), duration_ms: 30_000, sentiment: 'negative', phone_call_credits: 3 }
  ])
  await insertCalls(ctx.db, user.id, sales, [{ start_timestamp: new Date('2026-05-03T12:00:00Z'), duration_ms: 120_000, web_call_credits: 4 }])

  const browser = await launchChromium(t)
  const context = await browser.newContext({ acceptDownloads: true })
  const page = await context.newPage()
  const { problems } = watchPage(page)

  await signInAt(page, url, user.email, PASSWORD)
  await page.getByRole('link', { name: 'Analytics' }).click()
  await page.waitForURL(`${url}/analytics`)
  t.equal(await page.locator('h1').textContent(), 'Analytics')
  t.ok(await page.getByText('No calls in this range.').isVisible(), 'the last 30 days hold none of these calls')
  t.same(await axeViolations(page), [], 'no accessibility violations (empty range)')

  await page.getByLabel('From (UTC day)').fill('2026-05-01')
  await page.getByLabel('To (UTC day, included)').fill('2026-05-03')
  await page.getByRole('button', { name: 'Show' }).click()
  await page.waitForURL(`${url}/analytics?from=2026-05-01&to=2026-05-03&agent=`)
  for (const title of TITLES) t.equal(await page.getByRole('img', { name: title }).count(), 1, title)
  t.equal(await page.locator('svg[role=img]').count(), 4)
  t.equal(await page.evaluate('getComputedStyle(document.querySelector("svg[role=img] rect.s0")).fill'), 'rgb(11, 87, 208)', 'bars coloured by the stylesheet')
  t.equal(await page.evaluate('document.querySelector("svg[role=img]").getBoundingClientRect().width > 100'), true, 'charts take the page\'s width')
  t.equal(await page.locator('.legend li').nth(1).textContent(), 'Sales <b>', 'names are text')

  // The figures behind each chart, for whoever cannot see it.
  for (const summary of await page.locator('details.figures summary').all()) await summary.click()
  t.equal(await page.locator('#costs-table tbody tr').count(), 2)
  t.equal(await page.locator('#costs-table tbody tr').first().textContent(), 'Front desk10')
  t.same(await axeViolations(page), [], 'no accessibility violations (charts and open tables)')

  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('link', { name: 'Download the calls (CSV)' }).click()
  ])
  t.equal(download.suggestedFilename(), 'call-details_2026-05-01_2026-05-03.csv')
  const csv = await readFile((await download.path()), 'utf8')
  t.match(csv, /^call_id,agent_id,agent_name,/)
  t.equal(csv.trim().split('\n').length, 4, 'a header and the three calls')

  await page.getByLabel('From (UTC day)').fill('2026-05-04')
  await page.getByRole('button', { name: 'Show' }).click()
  await page.waitForURL(/from=2026-05-04/)
  t.ok(await page.getByRole('alert').getByText('“To” must not be before “from”.').isVisible(), 'a bad range: the reason')
  t.same(await axeViolations(page), [], 'no accessibility violations (bad range)')
  // Chromium logs the 400 page's status as an error; nothing else may show up.
  t.same(problems.filter((p) => !p.startsWith('Failed to load resource: the server responded with a status of 400')), [], 'no script errors and no CSP violations')
})
