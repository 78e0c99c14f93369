import t from 'tap'
import { createApiKey } from '../../src/modules/users/queries.ts'
import type { Account } from '../helpers/app.ts'
import { setup } from '../helpers/app.ts'
import { addAction, createAgent } from '../helpers/calls.ts'
import { axeViolations, launchChromium, openSection, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { analysedCall, FAST, settled } from '../helpers/deliveries.ts'
import { startReceiver } from '../helpers/receiver.ts'

// The delivery log in real Chromium: a real delivery to a local receiver fails, the log filtered by
// "Not delivered" finds it, and Send again, once the receiver is back, delivers it.

t.test('filter the log by Not delivered, open the failed delivery, Send again once the receiver answers: in Chromium', async (t) => {
  // The loopback receiver is allowed (DELIVERY_ALLOW_PRIVATE_NETWORKS) and the one retry waits 60 ms (DELIVERY_TIME_SCALE).
  const ctx = await setup(t, FAST, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const account: Account = { user, key, headers: { 'x-api-key': key } }
  const receiver = await startReceiver(t)
  receiver.answers.push({ status: 500, body: '<h1>down</h1>' }, { status: 500, body: '<h1>down</h1>' })
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  await addAction(ctx.app, account, agent._id, { name: 'CRM sync', url: `${receiver.url}/crm`, retry_schedule: [60] })
  await analysedCall(ctx, account, agent)
  const [failed] = await settled(t, ctx, account, 1)
  t.equal(failed.status, 'failed')
  t.equal(receiver.received.length, 2, 'both scheduled attempts were answered 500')
  // Once its two 500s are used up, the receiver answers 200: it is back.

  const browser = await launchChromium(t)
  const page = await browser.newPage()
  const { problems } = watchPage(page)

  await signInAt(page, url, user.email, PASSWORD)
  await openSection(page, 'Deliveries')
  await page.waitForURL(`${url}/deliveries`)
  t.equal(await page.locator('h1').textContent(), 'Deliveries')
  t.same(await axeViolations(page), [], 'the log: no axe-core violations')

  await page.getByLabel('Status').selectOption({ label: 'Not delivered' })
  await page.getByRole('button', { name: 'Show deliveries' }).click()
  await page.waitForURL(`${url}/deliveries?status=failed&agent=&call=`)
  const rows = page.locator('tbody tr')
  t.equal(await rows.count(), 1)
  t.match(await rows.first().textContent(), /API call\s+CRM sync\s+Front desk[\s\S]*Not delivered\s+2 of 2/)

  await rows.first().getByRole('link').first().click()
  await page.waitForURL(`${url}/deliveries/${failed.id}`)
  t.equal(await page.locator('h1').textContent(), 'API call: CRM sync')
  const attempts = page.locator('tbody tr')
  t.equal(await attempts.count(), 2)
  t.match(await attempts.nth(1).textContent(), /HTTP 500[\s\S]*<h1>down<\/h1>/, 'the answer shown as text')
  t.same(await axeViolations(page), [], 'a delivery: no axe-core violations')

  await page.getByRole('button', { name: 'Send again' }).click()
  await page.waitForURL(`${url}/deliveries/${failed.id}?sent=3`)
  await attempts.nth(2).waitFor()
  t.match(await page.getByRole('status').textContent(), /^Sent again: delivered \(attempt 3, HTTP 200 in \d+ ms\)\.$/)
  t.match(await attempts.nth(2).textContent(), /3 \(sent again\)[\s\S]*HTTP 200/)
  t.equal(await page.locator('.facts dd').first().textContent(), 'Delivered')
  t.equal(receiver.received.length, 3)
  t.equal(receiver.received[2].headers['x-service-delivery-id'], failed.delivery_id, 'the same delivery id')
  t.same(await axeViolations(page), [], 'after Send again: no axe-core violations')
  t.same(problems, [], 'no script errors and no CSP violations')
})
