import t from 'tap'
import { setup } from '../helpers/app.ts'
import { launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { agentOf, buyNumber } from '../modules/campaigns/helpers.ts'

// The Campaigns pages in real Chromium: a campaign created through the form with a CSV file chosen in the file input
// (a bad file first, refused with the form kept), its page with the progress bar and outcome chart, the results CSV
// downloaded through the session, pause/resume/cancel; axe-core on each page. No workers: nobody is called.

const FROM = '+12125550100'

t.test('create a campaign from a CSV file, follow it, download its results, pause, resume and cancel it: in Chromium', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const account = { user, key: '', headers: { 'x-api-key': (await createApiKey(ctx.db, user.id)).key } }
  await agentOf(ctx, account)
  await buyNumber(ctx, account, FROM)
  const browser = await launchChromium(t)
  const page = await browser.newPage({ acceptDownloads: true })
  const { problems, axe: checked, check } = watchPage(page, { failedLoads: 'ignored' })
  const refused: string[] = []
  page.on('response', (res) => { if (res.status() >= 400) refused.push(`${res.status()} ${res.request().method()} ${new URL(res.url()).pathname}`) })

  await signInAt(page, url, user.email, PASSWORD)
  await page.getByRole('link', { name: 'Campaigns' }).click()
  t.equal(await page.locator('h1').textContent(), 'Campaigns')
  await check('campaigns, none')

  await page.getByRole('link', { name: 'Create a campaign' }).click()
  t.equal(await page.locator('h1').textContent(), 'New campaign')
  await check('new campaign')
  await page.getByLabel('Name', { exact: true }).fill('Flu shots')
  await page.getByLabel('Agent', { exact: true }).selectOption({ label: 'Caller' })
  await page.getByLabel(FROM).check()
  await page.getByLabel('CSV file').setInputFiles({ name: 'people.csv', mimeType: 'text/csv', buffer: Buffer.from('number,name\n+14155550101,Ada\n') })
  await page.getByLabel('Saturday from').fill('10:00')
  await page.getByLabel('Saturday until').fill('14:00')
  await page.getByRole('button', { name: 'Create campaign' }).click()
  await page.locator('#contacts-error').waitFor()
  t.match(await page.locator('#contacts-error').textContent(), /header has no "phone_number" column/)
  t.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Flu shots', 'a refused file: the form again, as it was filled in')
  t.equal(await page.getByLabel('Saturday until').inputValue(), '14:00')
  t.ok(await page.getByLabel(FROM).isChecked())
  await check('new campaign, file refused')

  await page.getByLabel('CSV file').setInputFiles({ name: 'people.csv', mimeType: 'text/csv', buffer: Buffer.from('phone_number,name\n+14155550101,Ada\n+14155550102,Bob\nnope,Cy\n') })
  await page.getByLabel('Time zone').selectOption('America/New_York')
  await page.getByLabel('The campaign\'s own, as below').check()
  await page.getByLabel('Busy').check()
  await page.getByRole('button', { name: 'Create campaign' }).click()
  await page.locator('h1', { hasText: 'Flu shots' }).waitFor()
  t.match(await page.getByRole('status').first().textContent(), 'Created: 2 contacts to call.')
  t.match(await page.getByRole('table', { name: 'Rows not imported' }).textContent(), /3nopeNot a phone number/)
  const bar = page.getByRole('progressbar', { name: 'Progress of Flu shots' })
  t.equal(await bar.getAttribute('aria-valuetext'), '0 of 2 done, 0 calling, 2 pending')
  await check('a campaign, just created')

  const [api] = (await ctx.app.inject({ method: 'GET', url: '/v1/campaigns', headers: account.headers })).json()
  t.equal(new URL(page.url()).pathname, `/campaigns/${api._id as string}`, 'the answer to the form takes the campaign\'s address')
  t.match(api, { calling_hours: { sat: [{ start: '10:00', end: '14:00' }] }, retry_settings: { on_outcomes: ['no_answer', 'busy'] } })
  await ctx.db.updateTable('campaign_contacts').set({ status: 'done', outcome: 'no_answer', attempts: 3 }).where('row_number', '=', 2).execute()
  await page.reload()
  t.equal(await bar.getAttribute('aria-valuetext'), '1 of 2 done, 0 calling, 1 pending')
  t.equal((await ctx.db.selectFrom('campaigns').select('id').execute()).length, 1, 'reloading showed the campaign: the form was not sent again')
  t.equal(await page.getByRole('table', { name: 'Rows not imported' }).count(), 0, 'the report was shown once')
  t.equal(await page.getByRole('img', { name: 'Done contacts by outcome' }).count(), 1, 'the outcome chart')
  await check('a campaign with an outcome')

  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download results (CSV)' }).click()])
  t.equal(download.suggestedFilename(), `campaign_${api._id as string}_results.csv`)
  const chunks: Buffer[] = []
  for await (const chunk of await download.createReadStream()) chunks.push(chunk as Buffer)
  const fromApi = await ctx.app.inject({ method: 'GET', url: `/v1/campaigns/${api._id as string}/results.csv`, headers: account.headers })
  t.equal(Buffer.concat(chunks).toString(), fromApi.body, 'the API\'s CSV, through the session')

  await page.getByRole('button', { name: 'Pause' }).click()
  await page.waitForURL(/\?done=pause$/)
  t.match(await page.locator('.facts dd').first().textContent(), 'Paused')
  await check('a campaign, paused')
  await page.getByRole('button', { name: 'Resume' }).click()
  await page.waitForURL(/\?done=resume$/)
  await page.getByRole('button', { name: 'Cancel campaign' }).click()
  await page.waitForURL(/\?done=cancel$/)
  t.equal(await bar.getAttribute('aria-valuetext'), '1 of 2 done, 0 calling, 0 pending, 1 cancelled')
  t.equal(await page.getByRole('button', { name: 'Resume' }).count(), 0)

  await page.getByRole('link', { name: 'All campaigns' }).click()
  t.same((await page.locator('tbody tr').first().locator('td').allInnerTexts()).slice(0, 3), ['Flu shots', 'Caller', 'Cancelled'])
  await check('campaigns')

  t.same(checked, Object.fromEntries(Object.keys(checked).map((name) => [name, []])), 'axe-core finds nothing on any page')
  t.same(problems, [], 'no script errors and no CSP violations')
  t.same(refused, ['400 POST /campaigns'], 'the refused file alone failed')
})
