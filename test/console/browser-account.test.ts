import t from 'tap'
import { setup } from '../helpers/app.ts'
import { launchChromium, openSection, signInAt, watchPage } from '../helpers/chromium.ts'
import { ConsoleClient, createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { sid, startTwilioStandIn } from '../helpers/twilio-stand-in.ts'

// The account pages in real Chromium (CSP enforced, so a violation is a console error): buy a number from the
// carrier's search results (the local Twilio stand-in) and give it an agent, set auto top-up, reveal the
// signing secret; axe-core (WCAG 2.1 A and AA) over every account page, with and without field errors.

const INSTALLATION_SID = sid('AC')

t.test('phone numbers, customers, subscription and settings: in Chromium, without axe violations', async (t) => {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(INSTALLATION_SID, 'installation-token')
  twilio.offer('US', [{ phone_number: '+14155550142', area_code: '415', locality: 'San Francisco', region: 'CA' }])
  const ctx = await setup(t, { PHONE_CARRIER: 'twilio', TWILIO_ACCOUNT_SID: INSTALLATION_SID, TWILIO_AUTH_TOKEN: 'installation-token', TWILIO_API_URL: twilio.url, TWILIO_ALLOW_PRIVATE_BASE_URL: 'true' })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  // The agent to assign, made through the console's own form by a second session of the same person.
  const helper = new ConsoleClient(ctx.app)
  await helper.signIn(user.email, PASSWORD)
  await helper.submit('/agents/new', '/agents', {
    agent_name: 'Front desk', begin_message: '', general_prompt: 'You answer.', language: 'en-US', voice_id: '65a0f0000000000000000001', webhook_url: '', status: 'active'
  })

  const browser = await launchChromium(t)
  const page = await browser.newPage()
  // The forms sent with bad fields on purpose answer 400; those are counted apart, every other failure is a problem.
  const { problems, axe: checked, check } = watchPage(page, { failedLoads: 'ignored' })
  const refused: string[] = []
  page.on('response', (res) => { if (res.status() >= 400) refused.push(`${res.status()} ${new URL(res.url()).pathname}`) })

  await signInAt(page, url, user.email, PASSWORD)

  // Buy a number from the search results and give it an inbound agent.
  await page.getByRole('link', { name: 'Phone numbers' }).click()
  await page.waitForURL(`${url}/phone-numbers`)
  await check('phone numbers, none yet')
  await page.getByLabel('Area code').fill('4x')
  await page.getByRole('button', { name: 'Search' }).click()
  t.equal(await page.getByLabel('Area code').getAttribute('aria-invalid'), 'true')
  await check('a bad search')
  await page.getByLabel('Area code').fill('415')
  await page.getByRole('button', { name: 'Search' }).click()
  await check('search results')
  await page.getByRole('button', { name: 'Buy +14155550142' }).click()
  await page.waitForURL(/\/phone-numbers\/[0-9a-f]{24}\?saved=bought$/)
  t.equal(await page.locator('h1').textContent(), '+14155550142')
  await check('a bought number')
  await page.getByLabel('Inbound agent', { exact: true }).selectOption({ label: 'Front desk' })
  await page.getByLabel('Nickname').fill('Main line')
  await page.getByRole('button', { name: 'Save' }).click()
  await page.waitForURL(/\/phone-numbers\/[0-9a-f]{24}\?saved=1$/)
  const row = await ctx.db.selectFrom('phone_numbers').innerJoin('agents', 'agents.id', 'phone_numbers.inbound_agent_id')
    .select(['phone_numbers.nickname', 'agents.agent_name']).where('phone_numbers.user_id', '=', user.id).executeTakeFirstOrThrow()
  t.same(row, { nickname: 'Main line', agent_name: 'Front desk' })
  t.equal(twilio.incoming(INSTALLATION_SID)[0].phone_number, '+14155550142', 'bought at the carrier')
  await page.goto(`${url}/phone-numbers`)
  await page.getByLabel('Number', { exact: true }).fill('not a number')
  await page.getByLabel('Twilio auth token').fill('a token')
  await page.getByRole('button', { name: 'Import number' }).click()
  // Post/Redirect/Get: the list with the draft, opened at its problems.
  await page.waitForURL(/\/phone-numbers\?draft=[0-9a-f]{24}#form-problems$/)
  t.equal(await page.getByLabel('Number', { exact: true }).inputValue(), 'not a number', 'the number sent is shown')
  t.equal(await page.getByLabel('Twilio auth token').inputValue(), '', 'the token is not given back')
  await check('an import with errors')

  // Customers.
  await openSection(page, 'Customers')
  await check('customers, none yet')
  await page.getByLabel('Name').fill('Acme')
  await page.getByLabel('Metadata').fill('[1, 2]')
  await page.getByRole('button', { name: 'Create customer' }).click()
  await page.locator('#metadata-error').waitFor()
  await check('a new customer with errors')
  await page.getByLabel('Metadata').fill('{"crm_id": "A-17"}')
  await page.getByRole('button', { name: 'Create customer' }).click()
  await page.waitForURL(/\/customers\/[0-9a-f]{24}\?saved=1$/)
  await check('a customer')
  await page.goto(`${url}/customers`)
  await check('customers')

  // Auto top-up.
  await openSection(page, 'Subscription')
  await check('subscription')
  await page.getByLabel('Top up automatically').check()
  await page.getByLabel('Threshold (credits)').fill('250')
  await page.getByLabel('Top-up amount (credits)').fill('1500')
  await page.getByRole('button', { name: 'Save auto top-up' }).click()
  await page.waitForURL(`${url}/subscription?saved=1`)
  t.ok(await page.getByLabel('Top up automatically').isChecked())
  t.match(await ctx.db.selectFrom('subscriptions').selectAll().where('user_id', '=', user.id).executeTakeFirstOrThrow(),
    { auto_top_up_enabled: true, auto_top_up_threshold: 250, top_up_amount: 1500 })
  await page.getByLabel('Threshold (credits)').fill('-5')
  // Chromium would refuse -5 itself (min="0"): without the attribute the server's answer shows.
  await page.getByLabel('Threshold (credits)').evaluate((input) => { input.removeAttribute('min') })
  await page.getByRole('button', { name: 'Save auto top-up' }).click()
  await page.locator('#auto_top_up_threshold-error').waitFor()
  await check('subscription with errors')

  // The signing secret.
  await openSection(page, 'Settings')
  await page.waitForURL(`${url}/settings`)
  t.notMatch(await page.content(), /whsec_/)
  await check('settings')
  await page.getByRole('button', { name: 'Reveal the secret' }).click()
  t.match(await page.locator('#signing-secret').textContent(), /^whsec_[A-Za-z0-9+/=]+$/)
  t.equal(new URL(page.url()).pathname, '/settings/signing-secret/reveal', 'the answer of the POST; no secret in the URL')
  await check('the revealed secret')

  t.same(checked, Object.fromEntries(Object.keys(checked).map((name) => [name, []])), 'no violations')
  t.same(problems, [], 'no script errors and no CSP violations')
  t.same(refused, ['400 /phone-numbers'], 'only the number search sent with bad fields (a GET: the forms redirect to their drafts)')
})
