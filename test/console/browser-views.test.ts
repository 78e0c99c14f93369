import t from 'tap'
import { setup } from '../helpers/app.ts'
import { axeViolations, launchChromium, signInAt } from '../helpers/chromium.ts'
import { ConsoleClient, createConsoleUser, PASSWORD } from '../helpers/console-client.ts'

// The pages moved to views over the shared components (dataTable, pager, filterBar) and the schema's refusal pages,
// in Chromium: axe-core finds nothing on any of their states.

t.test('the pages built from components and the refusal pages: no axe violations', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const helper = new ConsoleClient(ctx.app)
  await helper.signIn(user.email, PASSWORD)
  await helper.submit('/do-not-call', '/do-not-call', { phone_number: '+14155550100', note: 'asked' })
  await helper.submit('/customers', '/customers', { customer_name: 'Acme', email: 'a@example.com', phone_number: '', metadata: '' })
  await helper.submit('/keys', '/keys', { name: 'crm' })

  const browser = await launchChromium(t)
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } })
  await signInAt(page, url, user.email, PASSWORD)
  for (const [name, path, status] of [
    ['contacts', '/contacts', 200], ['do not call', '/do-not-call', 200], ['customers', '/customers', 200], ['subscription', '/subscription', 200],
    ['settings', '/settings', 200], ['appointments', '/appointments', 200], ['appointments, a bad filter', '/appointments?from=x', 400], ['keys', '/keys', 200],
    ['deliveries', '/deliveries', 200], ['integrations', '/integrations', 200],
    ['a bad id', '/contacts/zz', 404], ['a repeated field', '/contacts?search=a&search=b', 400], ['a number out of range', '/subscription?skip=-1', 400]
  ] as const) {
    const res = await page.goto(`${url}${path}`)
    t.equal(res?.status(), status, name)
    t.same(await axeViolations(page), [], `${name}: no axe violations`)
  }
  t.match(await page.locator('main').innerText(), 'The page position must be at least 0.')
})
