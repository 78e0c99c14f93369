import { readFile } from 'node:fs/promises'
import t from 'tap'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { axeViolations, launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'

// The calls list in real Chromium (CSP enforced): the filter bar in one row, search, columns, keyset pages, the
// export of the filter, and times rewritten to the browser's time zone by static/local-time.js.

t.test('calls list: one-row filters, search, columns, pages, export, local times: in Chromium with axe', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const account = { user, key, headers: { 'x-api-key': key } }
  const desk = await createAgent(ctx.app, account, { agent_name: 'Front desk', data_retrieval: [{ name: 'city', type: 'string', description: 'the city', required: false }] })
  const seeds = Array.from({ length: 60 }, (_, i) => ({
    start_timestamp: new Date(Date.UTC(2026, 4, 1, 9, i)),
    call_from: `+1415555${String(1000 + i)}`,
    transcription: [{ speaker: 'user' as const, content: i === 7 ? 'I want a refund' : 'Book a table', timestamp: 1 }],
    custom_analysis_data: JSON.stringify({ city: i % 2 === 0 ? 'Lyon' : 'Paris' })
  }))
  const ids = await insertCalls(ctx.db, user.id, desk, seeds)
  await createAgent(ctx.app, account, { agent_name: 'Reservations desk of the Grand Hotel de Lyon, evenings' })

  const browser = await launchChromium(t)
  const context = await browser.newContext({ acceptDownloads: true, timezoneId: 'Europe/Paris', viewport: { width: 1400, height: 900 } })
  const page = await context.newPage()
  const { problems } = watchPage(page)
  await signInAt(page, url, user.email, PASSWORD)
  await page.goto(`${url}/calls`)
  t.equal(await page.locator('h1').textContent(), 'Calls')
  t.equal(await page.locator('.list-total').textContent(), '60 calls · Export these calls (CSV)')
  // Every control of the bar (the fields, the columns chooser, the button) on one row at 1,400 px, a long agent name too.
  const rowOf = async () => await page.locator('.filter-bar > :not(.hint)').evaluateAll((items) => items.map((item) => Math.round(item.getBoundingClientRect().bottom)))
  t.equal(new Set(await rowOf()).size, 1, 'the filters in one row at 1,400 px')
  t.ok(await page.evaluate('document.querySelector("table").getBoundingClientRect().top < 500'), 'the table starts high above the fold')
  const first = page.locator('tbody tr').first().locator('time')
  t.equal(await first.textContent(), '2026-05-01 11:59:00 CEST', 'the browser\'s zone')
  t.equal(await first.getAttribute('title'), '2026-05-01 09:59:00 UTC', 'the UTC time kept as the title')
  t.same(await axeViolations(page), [], 'no accessibility violations (first page)')

  await page.getByRole('link', { name: 'Older calls' }).click()
  await page.waitForURL(/before=/)
  t.equal(await page.locator('tbody tr').count(), 10, 'the last ten')
  await page.getByRole('link', { name: 'Newer calls' }).click()
  await page.waitForURL(/after=/)
  t.equal(await page.locator('tbody tr').count(), 50)

  await page.getByLabel('Search').fill('refund')
  await page.locator('details.columns summary').click()
  await page.getByLabel('city').check()
  t.same(await axeViolations(page), [], 'no accessibility violations (columns open)')
  await page.getByRole('button', { name: 'Show calls' }).click()
  await page.waitForURL(`${url}/calls?q=refund&agent=&status=&type=&direction=&from=&to=&column=city`)
  t.equal(await page.locator('tbody tr').count(), 1)
  t.match(await page.locator('tbody tr').textContent(), /\+14155551007[\s\S]*Paris/)
  t.equal(await page.locator('.list-total strong').textContent(), '1 call')
  t.same(await axeViolations(page), [], 'no accessibility violations (a search with a column)')

  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Export these calls (CSV)' }).click()])
  const csv = await readFile((await download.path()), 'utf8')
  t.same(csv.trim().split('\n').slice(1).map((line) => line.split(',')[0]), [ids[7]], 'the export holds the search\'s call')

  await page.setViewportSize({ width: 700, height: 900 })
  await page.goto(`${url}/calls?q=${'x'.repeat(201)}`)
  t.ok(await page.getByRole('alert').getByText('The search must be at most 200 characters.').isVisible())
  t.same(await axeViolations(page), [], 'no accessibility violations (a bad search, narrow screen)')
  t.same(problems.filter((p) => !p.startsWith('Failed to load resource: the server responded with a status of 400')), [], 'no script errors and no CSP violations')
})
