import { readFile } from 'node:fs/promises'
import t from 'tap'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { axeViolations, launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'

// The Analytics page in real Chromium, which enforces the CSP: the charts must be styled from console.css alone.

const TITLES = ['Result of the calls', 'Whether the task was achieved', 'Why calls ended', 'Calls by the caller\'s usual wait', 'Values of city',
  'Call minutes per day', 'Calls per day by agent', 'Sentiment of the calls', 'Credits by agent']
const latency = (p50: number) => JSON.stringify({ e2e: { p50 }, turns: [{ at: 0, end_of_turn_ms: 0, transcription_ms: null, llm_ms: null, tts_ms: null, e2e_ms: p50 }] })

t.test('analytics: change the range, see the charts, open their figures, follow a bar to its calls, download a CSV: in Chromium', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const account = { user, key, headers: { 'x-api-key': key } }
  const desk = await createAgent(ctx.app, account, { agent_name: 'Front desk', data_retrieval: [{ name: 'city', type: 'string', description: 'the caller\'s city', required: true }] })
  const sales = await createAgent(ctx.app, account, { agent_name: 'Sales <b>' })
  await insertCalls(ctx.db, user.id, desk, [
    { start_timestamp: new Date('2026-05-01T09:00:00Z'), duration_ms: 90_000, sentiment: 'positive', phone_call_credits: 7, task_achieved: true, disconnection_reason: 'user_hangup', custom_analysis_data: JSON.stringify({ city: 'Lyon' }), latency: latency(700) },
    { start_timestamp: new Date('2026-05-02T09:00:00Z'), duration_ms: 30_000, sentiment: 'negative', phone_call_credits: 3, task_achieved: false, disconnection_reason: 'call_transfer', transfer_history: JSON.stringify([{ to: '+14155550111' }]), custom_analysis_data: JSON.stringify({ city: 'Paris' }), latency: latency(1900) }
  ])
  await insertCalls(ctx.db, user.id, sales, [{ start_timestamp: new Date('2026-05-03T12:00:00Z'), duration_ms: 120_000, web_call_credits: 4, task_achieved: true, disconnection_reason: 'user_hangup' }])

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
  await page.waitForURL(`${url}/analytics?from=2026-05-01&to=2026-05-03&agent=&field=city`)
  // Charts whose bars link to their calls are groups of links; the others images.
  for (const [i, title] of TITLES.entries()) t.equal(await page.getByRole(i < 5 ? 'group' : 'img', { name: title }).count(), 1, title)
  t.equal(await page.locator('svg.chart').count(), TITLES.length)
  t.ok(await page.locator('dd', { hasText: '66.7%: 2 of 3 judged calls' }).isVisible(), 'the task-achieved rate')
  t.equal(await page.evaluate('getComputedStyle(document.querySelector("svg.chart rect.s0")).fill'), 'rgb(11, 87, 208)', 'bars coloured by the stylesheet')
  t.equal(await page.evaluate('document.querySelector("svg.chart").getBoundingClientRect().width > 100'), true, 'charts take the page\'s width')
  t.equal(await page.locator('.legend li').nth(1).textContent(), 'Sales <b>', 'names are text')

  // The figures behind each chart, for whoever cannot see it.
  for (const summary of await page.locator('details.figures summary').all()) await summary.click()
  t.equal(await page.locator('#costs-table tbody tr').count(), 2)
  t.equal(await page.locator('#costs-table tbody tr').first().textContent(), 'Front desk10')
  t.same(await axeViolations(page), [], 'no accessibility violations (charts and open tables)')
  await page.setViewportSize({ width: 1400, height: 900 })
  await page.locator('#outcomes').scrollIntoViewIfNeeded()
  // SCREENSHOTS_DIR set: the page in parts, to look at.
  const shots = process.env.SCREENSHOTS_DIR
  if (shots !== undefined) for (let y = 0; y < 5400; y += 1350) await page.screenshot({ path: `${shots}/analytics-${y}.png`, fullPage: true, clip: { x: 0, y, width: 1400, height: 1350 } })

  // A bar is a link for the pointer: to the calls it counts.
  await page.getByRole('link', { name: 'The caller hung up: 2 calls' }).click()
  await page.waitForURL(/\/calls\?from=2026-05-01&to=2026-05-03&reason=user_hangup$/)
  t.equal(await page.locator('table.calls-list tbody tr').count(), 2, 'the two calls the caller hung up')
  t.ok(await page.getByText('Only calls where ended: the caller hung up.').isVisible(), 'the list says what it shows')
  if (shots !== undefined) await page.screenshot({ path: `${shots}/calls-of-a-bar.png` })
  t.same(await axeViolations(page), [], 'no accessibility violations (calls of an outcome)')
  await page.getByRole('link', { name: 'Show every call' }).click()
  await page.waitForURL(`${url}/calls?from=2026-05-01&to=2026-05-03`)
  t.equal(await page.locator('table.calls-list tbody tr').count(), 3)
  await page.goBack()
  await page.goBack()
  await page.waitForURL(/\/analytics\?/)
  // From the keyboard: the bar, then the figures' link.
  await page.getByRole('link', { name: 'Paris: 1 call' }).focus()
  t.equal(await page.evaluate('getComputedStyle(document.activeElement).outlineStyle'), 'solid', 'a focused bar shows it')
  await page.keyboard.press('Enter')
  await page.waitForURL(/\/calls\?.*field=city&value=Paris$/)
  await page.goBack()
  await page.locator('details.figures', { has: page.locator('#field-table') }).locator('summary').click()
  await page.locator('#field-table a', { hasText: 'Paris' }).focus()
  await page.keyboard.press('Enter')
  await page.waitForURL(/\/calls\?.*field=city&value=Paris$/)
  t.equal(await page.locator('table.calls-list tbody tr').count(), 1)
  await page.goBack()

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
