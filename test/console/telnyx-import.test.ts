import t from 'tap'
import { setup } from '../helpers/app.ts'
import { ConsoleClient, createConsoleUser, followRefusal, PASSWORD } from '../helpers/console-client.ts'
import { telnyxSettings } from '../helpers/telnyx-phone.ts'
import { startTelnyxStandIn } from '../helpers/telnyx-standin.ts'

// The console's import form takes a number of the person's own Telnyx account (its API key and public key), as
// POST /v1/phone-number/import-carrier does, against the Telnyx stand-in's second account.

const NUMBER = '+13125550150'

t.test('importing a number of your own Telnyx account from the console: the keys checked, kept, never shown', async (t) => {
  const telnyx = await startTelnyxStandIn(t)
  telnyx.tenant.owned.set('2293384261075731501', { id: '2293384261075731501', phone_number: NUMBER, connection_id: null })
  const ctx = await setup(t, telnyxSettings(telnyx))
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const form = { phone_number: NUMBER, carrier: 'telnyx', account_sid: '', auth_token: '', api_key: telnyx.tenant.apiKey, public_key: telnyx.tenant.publicKey, nickname: '' }

  const page = await browser.get('/phone-numbers')
  t.match(page.body, '<option value="telnyx">Telnyx</option>')
  t.match(page.body, 'Telnyx API key')

  // Each refusal: 303 to the list with the draft (Post/Redirect/Get), which shows the problem in words.
  const refusal = async (sent: Record<string, string>) => (await followRefusal(browser, await browser.submit('/phone-numbers', '/phone-numbers/import', sent), '/phone-numbers')).page
  const half = await refusal({ ...form, public_key: '' })
  t.match(half.body, 'Give the public key with the API key.')
  t.notMatch(half.body, telnyx.tenant.apiKey, 'the API key is not given back')
  t.notMatch(JSON.stringify(await ctx.db.selectFrom('console_drafts').select('form_values').execute()), telnyx.tenant.apiKey, 'nor kept in the draft')

  const none = await refusal({ ...form, api_key: '', public_key: '' })
  t.match(none.body, 'numbers of this server&#39;s own account are assigned by its operator')

  const mixed = await refusal({ ...form, account_sid: 'AC' + 'a'.repeat(32), auth_token: 'x'.repeat(32) })
  t.match(mixed.body, 'not both')

  const twilio = await refusal({ ...form, carrier: 'twilio' })
  t.match(twilio.body, 'The API key and public key are for Telnyx')

  const badKey = await refusal({ ...form, public_key: 'not a key' })
  t.match(badKey.body, 'Keys &amp; Credentials')

  const wrong = await refusal({ ...form, api_key: 'KEY' + '0'.repeat(32) })
  t.match(wrong.body, `${NUMBER} was not imported:`)
  t.equal(await ctx.db.selectFrom('phone_numbers').select('id').executeTakeFirst(), undefined, 'nothing stored')

  const imported = await browser.submit('/phone-numbers', '/phone-numbers/import', form)
  t.equal(imported.statusCode, 303, imported.body)
  t.match(imported.headers.location, /^\/phone-numbers\/[0-9a-f]{24}\?saved=imported$/)
  const row = await ctx.db.selectFrom('phone_numbers').selectAll().executeTakeFirstOrThrow()
  t.match(row, { phone_number: NUMBER, carrier: 'telnyx', carrier_public_key: telnyx.tenant.publicKey })
  const [application] = telnyx.tenant.applications.values()
  t.equal(telnyx.tenant.owned.get('2293384261075731501')!.connection_id, application.id, 'its calls go to the application made in that account')
  for (const url of [imported.headers.location as string, '/phone-numbers']) {
    t.notMatch((await browser.get(url)).body, telnyx.tenant.apiKey, `${url} never shows the API key`)
  }
})
