import t, { type Test } from 'tap'
import { newId } from '../../src/db/ids.ts'
import { insertPhoneNumber } from '../../src/modules/phone-numbers/queries.ts'
import { signingSecrets, testSecret } from '../../src/modules/deliveries/signing.ts'
import { conflict } from '../../src/http/errors.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup, type TestContext } from '../helpers/app.ts'
import { anotherSession, ConsoleClient, createConsoleUser, csrfOf, followDraft, followRefusal, PASSWORD } from '../helpers/console-client.ts'
import { addNumber, TWILIO_SID, TWILIO_TOKEN } from '../helpers/messaging.ts'
import { sid, startTwilioStandIn } from '../helpers/twilio-stand-in.ts'

// The console's account pages (docs/console.md, "Account pages"): phone numbers, customers, subscription and
// settings, through a browser's view of the routes. Twilio is the local stand-in.

const INSTALLATION_SID = sid('AC')
const INSTALLATION_TOKEN = 'installation-token'
const HOLDER_SID = sid('AC')
const HOLDER_TOKEN = 'holder-token-never-shown-0123456789'
const MARKUP = '<b>x</b>'

async function accountSetup (t: Test) {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(INSTALLATION_SID, INSTALLATION_TOKEN)
  twilio.addAccount(HOLDER_SID, HOLDER_TOKEN)
  twilio.offer('US', [
    { phone_number: '+14155550142', area_code: '415', locality: 'San Francisco', region: 'CA' },
    { phone_number: '+14155550143', area_code: '415', locality: 'San Francisco', region: 'CA' }
  ])
  twilio.hold(HOLDER_SID, '+13105550100')
  const ctx = await setup(t, { PHONE_CARRIER: 'twilio', TWILIO_ACCOUNT_SID: INSTALLATION_SID, TWILIO_AUTH_TOKEN: INSTALLATION_TOKEN, TWILIO_API_URL: twilio.url, TWILIO_ALLOW_PRIVATE_BASE_URL: 'true' })
  const me = await signedIn(ctx)
  const other = await signedIn(ctx)
  return { ctx, twilio, me, other }
}

async function signedIn (ctx: TestContext) {
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id, { name: 'test' })
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  return { user, browser, headers: { 'x-api-key': key } }
}

async function createAgent (browser: ConsoleClient, name: string): Promise<string> {
  const res = await browser.submit('/agents/new', '/agents', {
    agent_name: name, begin_message: '', general_prompt: 'You answer.', language: 'en-US', voice_id: '65a0f0000000000000000001', webhook_url: '', status: 'active'
  })
  return /^\/agents\/([0-9a-f]{24})/.exec(res.headers.location as string)![1]
}

/** Where a 303 leads, and the id in it. */
const idIn = (location: unknown, path: string) => new RegExp(`^/${path}/([0-9a-f]{24})`).exec(String(location))?.[1]

const sipNumber = async (ctx: TestContext, userId: string, phoneNumber: string, customerId: string | null = null) =>
  await insertPhoneNumber(ctx.db, { id: newId(), user_id: userId, phone_number: phoneNumber, source: 'sip', carrier: 'sip', customer_id: customerId }, conflict('taken'))

t.test('every account page answers 200 signed in and sends a signed-out browser to the sign-in page', async (t) => {
  const { ctx, me } = await accountSetup(t)
  const number = await sipNumber(ctx, me.user.id, '+15105550100')
  const customer = await me.browser.submit('/customers', '/customers', { customer_name: 'Acme' })
  const customerId = idIn(customer.headers.location, 'customers')!
  const signedOut = new ConsoleClient(ctx.app)
  const pages = ['/phone-numbers', `/phone-numbers/${number.id}`, '/customers', `/customers/${customerId}`, '/subscription', '/settings']
  for (const url of pages) {
    const page = await me.browser.get(url)
    t.equal(page.statusCode, 200, url)
    t.match(page.headers['content-type'], 'text/html', url)
    const out = await signedOut.get(url)
    t.equal(out.statusCode, 303, `${url} signed out`)
    t.equal(out.headers.location, `/login?next=${encodeURIComponent(url)}`)
  }
  const nav = (await me.browser.get('/settings')).body
  const order = ['Phone numbers', 'Customers', 'Subscription', 'API keys', 'Settings'].map((label) => nav.indexOf(`>${label}</a>`))
  t.ok(order.every((at, i) => at > 0 && (i === 0 || at > order[i - 1])), 'the NAV lists the account pages after the others, in order')
  t.match(nav, '<a href="/settings" aria-current="page">Settings</a>')
})

t.test('phone numbers: search, buy, assign agents and nickname, release', async (t) => {
  const { ctx, twilio, me, other } = await accountSetup(t)
  const agentId = await createAgent(me.browser, 'Front desk')
  const otherAgent = await createAgent(other.browser, 'Not yours')

  const empty = await me.browser.get('/phone-numbers')
  t.match(empty.body, /No phone numbers yet/)
  t.notMatch(empty.body, 'Numbers to buy', 'no search before one is asked for')

  const found = await me.browser.get('/phone-numbers?country=us&area_code=415&contains=')
  t.equal(found.statusCode, 200)
  t.match(found.body, '<caption>Numbers to buy</caption>')
  t.match(found.body, '<td>+14155550142</td><td>San Francisco, CA, US</td>')
  t.match(found.body, 'aria-label="Buy +14155550143"')
  t.match(found.body, 'value="us"', 'the search is kept')

  const bad = await me.browser.get('/phone-numbers?country=USA&area_code=4x&contains=abc')
  t.equal(bad.statusCode, 400)
  t.match(bad.body, '<p id="country-error" class="field-error">Give a two-letter country code such as US.</p>')
  t.match(bad.body, '<p id="area_code-error" class="field-error">An area code is 2 to 4 digits, such as 415.</p>')
  t.match(bad.body, '<p id="contains-error" class="field-error">Give 1 to 10 digits, or leave it empty.</p>')
  t.match(bad.body, 'value="4x" maxlength="4" inputmode="numeric" autocomplete="off" aria-describedby="area_code-hint area_code-error" aria-invalid="true"')
  t.equal(twilio.requests.filter((r) => r.path.startsWith('/AvailablePhoneNumbers')).length, 1, 'a bad search asks the carrier nothing')

  const csrf = csrfOf(found.body)
  t.equal((await me.browser.post('/phone-numbers/buy', { phone_number: '+14155550142' })).statusCode, 403, 'no CSRF token')
  t.equal((await me.browser.post('/phone-numbers/buy', { csrf_token: 'wrong', phone_number: '+14155550142' })).statusCode, 403, 'a wrong one')
  t.same(twilio.incoming(INSTALLATION_SID), [], 'nothing bought without the token')

  const bought = await me.browser.post('/phone-numbers/buy', { csrf_token: csrf, phone_number: '+14155550142', country: 'us', area_code: '415', contains: '' })
  t.equal(bought.statusCode, 303)
  const id = idIn(bought.headers.location, 'phone-numbers')!
  t.equal(bought.headers.location, `/phone-numbers/${id}?saved=bought`)
  t.equal(twilio.incoming(INSTALLATION_SID)[0].phone_number, '+14155550142')

  // Post/Redirect/Get: a refused purchase goes back to its search, which says why; a reload buys nothing.
  const again = await me.browser.post('/phone-numbers/buy', { csrf_token: csrf, phone_number: '+14155550142', country: 'us', area_code: '415', contains: '' })
  const notBought = await followRefusal(me.browser, again, '/phone-numbers?country=us&area_code=415')
  for (const view of [notBought.page, await me.browser.get(notBought.url)]) {
    t.equal(view.statusCode, 200)
    t.match(view.body, '<p>+14155550142 was not bought: +14155550142 is already in your account.</p>', 'the reason, in words')
    t.match(view.body, '<caption>Numbers to buy</caption>', 'the search results are shown again')
  }
  t.equal(twilio.incoming(INSTALLATION_SID).length, 1, 'reloading bought nothing')
  t.equal((await ctx.db.selectFrom('phone_numbers').select('id').where('user_id', '=', me.user.id).execute()).length, 1)
  const notANumber = await me.browser.post('/phone-numbers/buy', { csrf_token: csrf, phone_number: 'x', country: 'us', area_code: '', contains: '' })
  t.match((await followRefusal(me.browser, notANumber, '/phone-numbers?country=us')).page.body, 'Choose a number from the search results.')

  const page = await me.browser.get(bought.headers.location as string)
  t.match(page.body, /Bought: the number is yours/)
  t.match(page.body, '<h1>+14155550142</h1>')
  t.match(page.body, `<option value="${agentId}">Front desk</option>`)
  t.notMatch(page.body, 'Not yours', 'another account\'s agents are not offered')

  const assign = { nickname: MARKUP, inbound_agent_id: agentId, outbound_agent_id: '' }
  t.equal((await me.browser.post(`/phone-numbers/${id}`, assign)).statusCode, 403, 'assigning needs the token')
  const saved = await me.browser.submit(`/phone-numbers/${id}`, `/phone-numbers/${id}`, assign)
  t.equal(saved.statusCode, 303)
  t.equal(saved.headers.location, `/phone-numbers/${id}?saved=1`)
  const api = (await ctx.app.inject({ method: 'GET', url: `/v1/phone-number/${id}`, headers: me.headers })).json()
  t.match(api, { nickname: MARKUP, inbound_agent_id: agentId, outbound_agent_id: null })
  const shown = await me.browser.get(`/phone-numbers/${id}`)
  t.match(shown.body, 'value="&lt;b&gt;x&lt;/b&gt;"')
  t.match(shown.body, `<option value="${agentId}" selected>Front desk</option>`)
  const list = await me.browser.get('/phone-numbers')
  t.match(list.body, `<td><a href="/phone-numbers/${id}">+14155550142</a></td><td>&lt;b&gt;x&lt;/b&gt;</td><td>twilio (purchased)</td>`)
  t.match(list.body, '<td>Front desk</td>')
  t.notMatch(list.body, MARKUP, 'the nickname is text, never markup')

  // Post/Redirect/Get: the number's page shows the values sent and the problems, again on a reload, which saves nothing.
  const long = await me.browser.submit(`/phone-numbers/${id}`, `/phone-numbers/${id}`, { nickname: 'n'.repeat(101), inbound_agent_id: 'nope', outbound_agent_id: agentId })
  const longDraft = await followRefusal(me.browser, long, `/phone-numbers/${id}`)
  for (const view of [longDraft.page, await me.browser.get(longDraft.url)]) {
    t.equal(view.statusCode, 200)
    t.match(view.body, '<h2>2 fields need another look</h2>')
    t.match(view.body, '<a href="#nickname">The nickname must NOT have more than 100 characters.</a>')
    t.match(view.body, '<p id="nickname-error" class="field-error">The nickname must NOT have more than 100 characters.</p>')
    t.match(view.body, '<p id="inbound_agent_id-error" class="field-error">Choose one of the listed agents.</p>')
    t.match(view.body, `value="${'n'.repeat(101)}"`, 'values kept')
    t.match(view.body, `<option value="${agentId}" selected>Front desk</option>`, 'the outbound choice kept')
  }
  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/phone-number/${id}`, headers: me.headers })).json(), { nickname: MARKUP, outbound_agent_id: null }, 'nothing saved')
  t.notMatch((await other.browser.get(longDraft.url)).body, 'n'.repeat(101), 'another session does not see the draft')

  const foreignAgent = await me.browser.submit(`/phone-numbers/${id}`, `/phone-numbers/${id}`, { nickname: '', inbound_agent_id: otherAgent, outbound_agent_id: '' })
  t.match((await followRefusal(me.browser, foreignAgent, `/phone-numbers/${id}`)).page.body,
    '<p id="inbound_agent_id-error" class="field-error">You have no such agent (it may have been deleted): choose one of the list.</p>', 'another account\'s agent')
  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/phone-number/${id}`, headers: me.headers })).json(), { nickname: MARKUP, inbound_agent_id: agentId })

  // Another account's number: 404 on its page and on every form of it.
  const theirs = await sipNumber(ctx, other.user.id, '+15105550199')
  t.equal((await me.browser.get(`/phone-numbers/${theirs.id}`)).statusCode, 404)
  t.equal((await me.browser.get('/phone-numbers/not-an-id')).statusCode, 404)
  t.equal((await me.browser.post(`/phone-numbers/${theirs.id}`, { csrf_token: csrf, nickname: 'mine' })).statusCode, 404)
  t.equal((await me.browser.post(`/phone-numbers/${theirs.id}/release`, { csrf_token: csrf })).statusCode, 404)
  t.notMatch((await me.browser.get('/phone-numbers')).body, '+15105550199', 'not listed either')
  t.ok(await ctx.db.selectFrom('phone_numbers').select('id').where('id', '=', theirs.id).where('nickname', '=', '').executeTakeFirst(), 'theirs unchanged')

  t.equal((await me.browser.post(`/phone-numbers/${id}/release`, {})).statusCode, 403, 'releasing needs the token')
  // A carrier failure: the number's page says it (Post/Redirect/Get); a reload releases nothing.
  twilio.failNext(500, 20500, 'Twilio is down for a moment')
  const kept = await followRefusal(me.browser, await me.browser.submit(`/phone-numbers/${id}`, `/phone-numbers/${id}/release`, {}), `/phone-numbers/${id}`)
  for (const view of [kept.page, await me.browser.get(kept.url)]) {
    t.equal(view.statusCode, 200)
    t.match(view.body, /<div id="form-problems" class="notice error error-summary" role="alert" tabindex="-1">\s*<p>The number was not released: [^<]*Twilio is down for a moment/)
    t.match(view.body, `value="${MARKUP.replaceAll('<', '&lt;').replaceAll('>', '&gt;')}"`, 'the assign form shows the stored number')
  }
  t.equal(twilio.incoming(INSTALLATION_SID).length, 1, 'still held at the carrier')
  t.ok(await ctx.db.selectFrom('phone_numbers').select('id').where('id', '=', id).executeTakeFirst(), 'and here')
  const released = await me.browser.submit(`/phone-numbers/${id}`, `/phone-numbers/${id}/release`, {})
  t.equal(released.statusCode, 303)
  t.equal(released.headers.location, '/phone-numbers?released=1')
  t.same(twilio.incoming(INSTALLATION_SID), [], 'given back to the carrier')
  t.match((await me.browser.get('/phone-numbers?released=1')).body, /The number is released\.[^]*No phone numbers yet/)
})

t.test('phone numbers: import from a carrier account; the auth token is never rendered', async (t) => {
  const { ctx, twilio, me } = await accountSetup(t)
  const form = { phone_number: '+13105550100', carrier: 'twilio', account_sid: HOLDER_SID, auth_token: HOLDER_TOKEN, nickname: MARKUP }

  t.equal((await me.browser.post('/phone-numbers/import', form)).statusCode, 403, 'no CSRF token')

  // Post/Redirect/Get: the list shows the values sent (never the token) and the problems, again on a reload.
  const half = await followRefusal(me.browser, await me.browser.submit('/phone-numbers', '/phone-numbers/import', { ...form, account_sid: '' }), '/phone-numbers')
  for (const view of [half.page, await me.browser.get(half.url)]) {
    t.equal(view.statusCode, 200)
    t.match(view.body, '<a href="#import-account_sid">Give the account SID with the auth token.</a>', 'the summary links to the field')
    t.match(view.body, '<p id="import-account_sid-error" class="field-error">Give the account SID with the auth token.</p>')
    t.match(view.body, 'value="+13105550100"', 'the number kept')
    t.match(view.body, '<option value="twilio" selected>Twilio</option>', 'the carrier kept')
    t.match(view.body, 'value="&lt;b&gt;x&lt;/b&gt;"', 'the nickname kept, escaped')
    t.notMatch(view.body, HOLDER_TOKEN, 'the token is not given back')
  }
  const drafts = await ctx.db.selectFrom('console_drafts').select(['form_values']).execute()
  t.notMatch(JSON.stringify(drafts), HOLDER_TOKEN, 'nor kept in the draft')

  const bad = (await followRefusal(me.browser, await me.browser.submit('/phone-numbers', '/phone-numbers/import', { ...form, phone_number: '3105550100', account_sid: 'AC123', carrier: 'sandbox' }), '/phone-numbers')).page
  t.match(bad.body, '<p id="import-phone_number-error" class="field-error">The number must be an E.164 phone number such as +14155550123.</p>')
  t.match(bad.body, '<p id="import-account_sid-error" class="field-error">A Twilio account SID is AC followed by 32 hexadecimal characters.</p>')
  t.match(bad.body, '<p id="import-carrier-error" class="field-error">The sandbox takes no account SID or auth token.</p>')
  t.notMatch(bad.body, HOLDER_TOKEN)

  const wrong = (await followRefusal(me.browser, await me.browser.submit('/phone-numbers', '/phone-numbers/import', { ...form, auth_token: 'wrong-token' }), '/phone-numbers')).page
  t.match(wrong.body, '<p>+13105550100 was not imported:', 'credentials the carrier refuses')
  t.notMatch(wrong.body, 'wrong-token')

  const missing = await followRefusal(me.browser, await me.browser.submit('/phone-numbers', '/phone-numbers/import', { ...form, phone_number: '+13105550101' }), '/phone-numbers')
  t.match(missing.page.body, '+13105550101 was not imported: +13105550101 in the twilio account not found.', 'a number the account does not hold')
  t.match(missing.page.body, 'value="+13105550101"')
  t.equal(await ctx.db.selectFrom('phone_numbers').select('id').executeTakeFirst(), undefined, 'nothing imported')

  const imported = await me.browser.submit('/phone-numbers', '/phone-numbers/import', form)
  t.equal(imported.statusCode, 303)
  const id = idIn(imported.headers.location, 'phone-numbers')!
  t.equal(imported.headers.location, `/phone-numbers/${id}?saved=imported`)
  t.match(twilio.incoming(HOLDER_SID)[0], { voice_url: /\/twilio\/voice$/ }, 'its calls are pointed here')
  const row = await ctx.db.selectFrom('phone_numbers').select(['carrier_auth_token', 'carrier_account_id', 'source']).where('id', '=', id).executeTakeFirstOrThrow()
  t.match(row, { carrier_account_id: HOLDER_SID, source: 'imported' })
  t.not(row.carrier_auth_token, HOLDER_TOKEN, 'stored sealed')
  for (const url of [imported.headers.location as string, '/phone-numbers']) {
    const page = await me.browser.get(url)
    t.equal(page.statusCode, 200)
    t.notMatch(page.body, HOLDER_TOKEN, `${url} never shows the token`)
    t.notMatch(page.body, MARKUP)
  }
})

t.test('customers: create, edit, escape, refuse bad fields, delete unless records name them', async (t) => {
  const { ctx, me, other } = await accountSetup(t)
  const csrf = csrfOf((await me.browser.get('/customers')).body)
  const fields = { customer_name: MARKUP, email: 'ops@acme.example', phone_number: '+14155550100', metadata: '{"crm_id": "A-17"}' }

  t.equal((await me.browser.post('/customers', fields)).statusCode, 403, 'no CSRF token')
  const created = await me.browser.post('/customers', { csrf_token: csrf, ...fields })
  t.equal(created.statusCode, 303)
  const id = idIn(created.headers.location, 'customers')!
  const api = (await ctx.app.inject({ method: 'GET', url: `/v1/customer/${id}`, headers: me.headers })).json()
  t.match(api, { customer_name: MARKUP, email: 'ops@acme.example', phone_number: '+14155550100', metadata: { crm_id: 'A-17' } })

  const list = await me.browser.get('/customers')
  t.match(list.body, `<a href="/customers/${id}">&lt;b&gt;x&lt;/b&gt;</a>`)
  t.notMatch(list.body, MARKUP)
  const page = await me.browser.get(`/customers/${id}?saved=1`)
  t.match(page.body, '<h1>&lt;b&gt;x&lt;/b&gt;</h1>')
  t.match(page.body, 'Saved.')
  t.match(page.body, '"crm_id": "A-17"'.replaceAll('"', '&quot;'))

  // A refused edit: Post/Redirect/Get (drafts.ts) to the customer's page, which shows what was sent and why.
  const bad = await me.browser.post(`/customers/${id}`, { csrf_token: csrf, customer_name: '', email: 'no-at-sign', phone_number: '555', metadata: '[1, 2]' })
  const badUrl = await followDraft(t, me.browser, bad, `/customers/${id}`, [
    '<p id="customer_name-error" class="field-error">The name is required.</p>',
    '<p id="email-error" class="field-error">The e-mail address must be an e-mail address.</p>',
    '<p id="phone_number-error" class="field-error">The phone number must be an E.164 phone number such as +14155550123.</p>',
    '<p id="metadata-error" class="field-error">The metadata must be a JSON object, such as {&quot;crm_id&quot;: &quot;A-17&quot;}.</p>',
    '<a href="#customer_name">The name is required.</a>',
    'value="no-at-sign"',
    '>\n[1, 2]</textarea>'
  ])
  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/customer/${id}`, headers: me.headers })).json(), { customer_name: MARKUP, email: 'ops@acme.example' }, 'nothing saved')
  const elsewhere = await (await anotherSession(ctx.app, me.user.email)).get(badUrl)
  t.match(elsewhere.body, 'value="ops@acme.example"', 'another session sees the stored customer')
  t.notMatch(elsewhere.body, 'no-at-sign')
  const customers = async () => (await ctx.db.selectFrom('customers').select('id').where('user_id', '=', me.user.id).execute()).length
  const nul = await me.browser.post('/customers', { csrf_token: csrf, customer_name: 'Nul', metadata: '{"a": "\\u0000"}' })
  await followDraft(t, me.browser, nul, '/customers', ['value="Nul"', '<a href="#metadata">The metadata must be a JSON object'])
  const deep = await me.browser.post('/customers', { csrf_token: csrf, customer_name: 'Deep', metadata: '{"a":' + '['.repeat(5000) + ']'.repeat(5000) + '}' })
  const deepUrl = await followDraft(t, me.browser, deep, '/customers', ['value="Deep"', '<a href="#metadata">'])
  t.equal(await customers(), 1, 'refused and reloaded: no customer created')
  t.notMatch((await (await anotherSession(ctx.app, me.user.email)).get(deepUrl)).body, 'value="Deep"', 'another session sees an empty form')

  const edited = await me.browser.post(`/customers/${id}`, { csrf_token: csrf, customer_name: 'Acme', email: '', phone_number: '', metadata: '' })
  t.equal(edited.statusCode, 303)
  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/customer/${id}`, headers: me.headers })).json(), { customer_name: 'Acme', email: null, phone_number: null, metadata: {} })

  // Another account's customer: 404 everywhere, never listed.
  const theirs = await other.browser.submit('/customers', '/customers', { customer_name: 'Their client' })
  const theirId = idIn(theirs.headers.location, 'customers')!
  t.equal((await me.browser.get(`/customers/${theirId}`)).statusCode, 404)
  t.equal((await me.browser.post(`/customers/${theirId}`, { csrf_token: csrf, customer_name: 'Mine now' })).statusCode, 404)
  t.equal((await me.browser.post(`/customers/${theirId}/delete`, { csrf_token: csrf })).statusCode, 404)
  t.notMatch((await me.browser.get('/customers')).body, 'Their client')
  t.match((await other.browser.get(`/customers/${theirId}`)).body, '<h1>Their client</h1>', 'theirs unchanged')

  const number = await sipNumber(ctx, me.user.id, '+15105550111', id)
  t.equal((await me.browser.post(`/customers/${id}/delete`, {})).statusCode, 403, 'deleting needs the token')
  const inUse = await me.browser.post(`/customers/${id}/delete`, { csrf_token: csrf })
  const inUseUrl = await followDraft(t, me.browser, inUse, `/customers/${id}`, [
    '<p class="notice error" role="alert">Not deleted: the customer still owns 1 phone number; delete them or move them to another customer first.</p>',
    '<h1>Acme</h1>', 'name="customer_name" value="Acme"'
  ], 'delete')
  t.notMatch((await (await anotherSession(ctx.app, me.user.email)).get(inUseUrl)).body, 'Not deleted', 'another session: no refusal shown')
  await ctx.db.updateTable('phone_numbers').set({ customer_id: null }).where('id', '=', number.id).execute()
  const deleted = await me.browser.post(`/customers/${id}/delete`, { csrf_token: csrf })
  t.equal(deleted.statusCode, 303)
  t.equal(deleted.headers.location, '/customers?deleted=1')
  t.equal((await me.browser.get(`/customers/${id}`)).statusCode, 404)
})

t.test('subscription: balance, ledger pages, auto top-up settings', async (t) => {
  const { ctx, me, other } = await accountSetup(t)
  const first = await me.browser.get('/subscription')
  t.equal(first.statusCode, 200)
  t.match(first.body, '<dt>Balance</dt><dd>1,000 credits ($10.00 of usage)</dd>')
  t.match(first.body, '<td>grant</td><td class="number">+1,000</td>')
  t.notMatch(first.body, 'Older entries')

  await other.browser.get('/subscription')
  await ctx.db.insertInto('credit_ledger').values({ id: newId(), user_id: other.user.id, kind: 'adjustment', amount: 5, description: 'theirs only' }).execute()
  await ctx.db.insertInto('credit_ledger').values(Array.from({ length: 60 }, (_, i) => ({
    id: newId(), user_id: me.user.id, kind: 'call_charge' as const, amount: -1, description: `charge ${i} ${MARKUP}`, created_at: new Date(Date.now() + i * 1000)
  }))).execute()
  const newest = await me.browser.get('/subscription')
  t.match(newest.body, '<caption>Entries 1–50, newest first</caption>')
  t.match(newest.body, 'charge 59 &lt;b&gt;x&lt;/b&gt;')
  t.notMatch(newest.body, MARKUP)
  t.notMatch(newest.body, 'theirs only', 'another account\'s ledger is not shown')
  t.match(newest.body, '<a href="/subscription?skip=50" rel="next">Older entries</a>')
  const older = await me.browser.get('/subscription?skip=50')
  t.match(older.body, '<caption>Entries 51–61, newest first</caption>')
  t.match(older.body, 'welcome credits')
  t.match(older.body, '<a href="/subscription" rel="prev">Newer entries</a>')
  t.equal((await me.browser.get('/subscription?skip=-1')).statusCode, 400)
  t.equal((await me.browser.get('/subscription?skip=a&skip=b')).statusCode, 400)

  const settings = { auto_top_up_enabled: 'on', auto_top_up_threshold: '500', top_up_amount: '2000' }
  t.equal((await me.browser.post('/subscription/auto-top-up', settings)).statusCode, 403, 'no CSRF token')
  const saved = await me.browser.submit('/subscription', '/subscription/auto-top-up', settings)
  t.equal(saved.statusCode, 303)
  t.equal(saved.headers.location, '/subscription?saved=1')
  t.match((await ctx.app.inject({ method: 'GET', url: '/v1/subscription', headers: me.headers })).json(), { auto_top_up: { enabled: true, threshold: 500 }, top_up_amount: 2000 })
  const shown = await me.browser.get('/subscription?saved=1')
  t.match(shown.body, 'name="auto_top_up_enabled" type="checkbox" value="on" checked')
  t.match(shown.body, 'value="500"')

  const bad = await me.browser.submit('/subscription', '/subscription/auto-top-up', { auto_top_up_threshold: '-1', top_up_amount: 'lots' })
  const badUrl = await followDraft(t, me.browser, bad, '/subscription', [
    '<p id="auto_top_up_threshold-error" class="field-error">The threshold is a whole number of credits from 0 to 100,000,000.</p>',
    '<p id="top_up_amount-error" class="field-error">The top-up amount is a whole number of credits from 1 to 100,000,000.</p>',
    '<a href="#top_up_amount">', 'value="-1"', 'value="lots"'
  ])
  t.notMatch((await me.browser.get(badUrl)).body, 'value="on" checked', 'the unticked box is kept unticked')
  t.match((await ctx.app.inject({ method: 'GET', url: '/v1/subscription', headers: me.headers })).json(), { auto_top_up: { enabled: true, threshold: 500 }, top_up_amount: 2000 }, 'nothing saved, even reloaded')
  const elsewhere = await (await anotherSession(ctx.app, me.user.email)).get(badUrl)
  t.match(elsewhere.body, 'value="500"', 'another session sees the stored settings')
  t.notMatch(elsewhere.body, 'value="lots"')
  await followDraft(t, me.browser, await me.browser.submit('/subscription', '/subscription/auto-top-up', { auto_top_up_threshold: '1.5', top_up_amount: '0' }), '/subscription', ['value="1.5"', '<a href="#auto_top_up_threshold">'])

  const off = await me.browser.submit('/subscription', '/subscription/auto-top-up', { auto_top_up_threshold: '0', top_up_amount: '1' })
  t.equal(off.statusCode, 303)
  t.match((await ctx.app.inject({ method: 'GET', url: '/v1/subscription', headers: me.headers })).json(), { auto_top_up: { enabled: false, threshold: 0 }, top_up_amount: 1 })
  t.match((await ctx.app.inject({ method: 'GET', url: '/v1/subscription', headers: other.headers })).json(), { auto_top_up: { enabled: false }, top_up_amount: 1000 }, 'another account unchanged')
})

t.test('settings: the signing secret only in the answer of a POST; rotation keeps the previous one signing', async (t) => {
  const { ctx, me, other } = await accountSetup(t)
  const secretOf = async (userId: string) => (await signingSecrets(ctx.db, [userId])).get(userId)!
  const page = await me.browser.get('/settings')
  t.equal(page.statusCode, 200)
  t.notMatch(page.body, /whsec_/, 'a GET page never holds the secret')
  t.match(page.body, '<a href="/account/password">Change your password</a>')
  t.match(page.body, 'method="post" action="/settings/signing-secret/reveal"')

  t.equal((await me.browser.post('/settings/signing-secret/reveal', {})).statusCode, 403, 'no CSRF token')
  t.equal((await me.browser.post('/settings/signing-secret/reveal', { csrf_token: 'wrong' })).statusCode, 403)
  const [current] = await secretOf(me.user.id)
  const revealed = await me.browser.submit('/settings', '/settings/signing-secret/reveal', {})
  t.equal(revealed.statusCode, 200)
  t.match(revealed.body, `<code id="signing-secret" class="secret">${current}</code>`)
  t.notMatch(revealed.body, (await secretOf(other.user.id))[0], 'never another account\'s')
  t.match(revealed.body, `<code id="test-signing-secret" class="secret">${await testSecret(ctx.db, me.user.id)}</code>`, 'the Test button\'s own secret beside it')
  t.notMatch((await me.browser.get('/settings')).body, /whsec_/, 'not shown again on the GET page')

  t.equal((await me.browser.post('/settings/signing-secret/rotate', {})).statusCode, 403, 'no CSRF token')
  t.same(await secretOf(me.user.id), [current], 'nothing rotated without the token')
  const rotated = await me.browser.submit('/settings', '/settings/signing-secret/rotate', {})
  t.equal(rotated.statusCode, 200)
  const [fresh, previous] = await secretOf(me.user.id)
  t.equal(previous, current, 'the previous secret still signs')
  t.not(fresh, current)
  t.match(rotated.body, `<code id="signing-secret" class="secret">${fresh}</code>`)
  t.match(rotated.body, 'The previous secret keeps signing for 24 hours.')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/webhook-secret', headers: me.headers })).json().secret, fresh, 'the API sees the same secret')
  const after = await me.browser.get('/settings')
  t.notMatch(after.body, /whsec_/)
  t.match(after.body, '<dt>Previous secret signs until</dt>')
})

t.test('settings: the senders of messages, as the API\'s messaging settings; a WhatsApp sender must be one of the account\'s Twilio numbers', async (t) => {
  const { ctx, twilio, me, other } = await accountSetup(t)
  const page = await me.browser.get('/settings')
  t.match(page.body, '<h2 id="messaging-title">Messages</h2>')
  for (const id of ['whatsapp_sender', 'email_from_name', 'email_reply_to']) t.match(page.body, `<label for="${id}">`)
  const bad = await me.browser.submit('/settings', '/settings/messaging', { whatsapp_sender: '+13105550100', email_from_name: 'Acme <x@y>', email_reply_to: 'not an address' })
  const badUrl = await followDraft(t, me.browser, bad, '/settings', [
    'id="email_from_name-error" class="field-error">The E-mail sender name must be a name without @, &lt;, &gt;, &quot; or \\',
    'id="email_reply_to-error" class="field-error">',
    '<a href="#email_reply_to">',
    'value="Acme &lt;x@y&gt;"'
  ])
  t.match((await ctx.app.inject({ method: 'GET', url: '/v1/messaging-settings', headers: me.headers })).json(), { whatsapp_sender: null, email_from_name: null }, 'nothing saved, even reloaded')
  const elsewhere = await (await anotherSession(ctx.app, me.user.email)).get(badUrl)
  t.match(elsewhere.body, 'name="email_from_name" type="text" value=""', 'another session sees the stored settings')
  t.notMatch(elsewhere.body, 'Acme &lt;x@y&gt;')
  const notOurs = await me.browser.submit('/settings', '/settings/messaging', { whatsapp_sender: '+13105550100', email_from_name: 'Acme', email_reply_to: '' })
  await followDraft(t, me.browser, notOurs, '/settings', ['<a href="#whatsapp_sender">', 'id="whatsapp_sender-error" class="field-error">', 'value="+13105550100"'])

  twilio.addAccount(TWILIO_SID, TWILIO_TOKEN)
  await addNumber(ctx.db, me.user.id, '+14155550100', 'twilio', twilio)
  const saved = await me.browser.submit('/settings', '/settings/messaging', { whatsapp_sender: '+14155550100', email_from_name: 'Acme Dental', email_reply_to: 'desk@acme.example' })
  t.equal(saved.statusCode, 303, saved.body.slice(0, 2000))
  t.equal(saved.headers.location, '/settings?saved=messaging#messaging-title')
  const after = await me.browser.get('/settings?saved=messaging')
  t.match(after.body, 'Saved.')
  t.match(after.body, 'value="Acme Dental"')
  t.match((await ctx.app.inject({ method: 'GET', url: '/v1/messaging-settings', headers: me.headers })).json(), { whatsapp_sender: '+14155550100', email_from_name: 'Acme Dental', email_reply_to: 'desk@acme.example' }, 'the API sees the same')
  t.match((await ctx.app.inject({ method: 'GET', url: '/v1/messaging-settings', headers: other.headers })).json(), { whatsapp_sender: null, email_from_name: null }, 'another account unchanged')
  const cleared = await me.browser.submit('/settings', '/settings/messaging', { whatsapp_sender: '', email_from_name: '', email_reply_to: '' })
  t.equal(cleared.statusCode, 303)
  t.match((await ctx.app.inject({ method: 'GET', url: '/v1/messaging-settings', headers: me.headers })).json(), { whatsapp_sender: null, email_from_name: null, email_reply_to: null }, 'emptied: cleared')
})

t.test("phone numbers: this server's own Twilio numbers are not imported from the console; repoint; a rotated auth token replaced", async (t) => {
  const { ctx, twilio, me } = await accountSetup(t)
  const own = twilio.hold(INSTALLATION_SID, '+13105550111', { voice_url: 'https://elsewhere.example.com/voice' })
  for (const carrier of ['twilio', '']) {
    const refused = await me.browser.submit('/phone-numbers', '/phone-numbers/import', { phone_number: '+13105550111', carrier, account_sid: '', auth_token: '', nickname: '' })
    t.match((await followRefusal(me.browser, refused, '/phone-numbers')).page.body, 'numbers of this server&#39;s own account are assigned by its operator', `carrier "${carrier}" without credentials`)
  }
  t.equal(own.voice_url, 'https://elsewhere.example.com/voice', 'the number still sends its calls where it did')
  t.equal(await ctx.db.selectFrom('phone_numbers').select('id').executeTakeFirst(), undefined)

  t.notMatch((await me.browser.get('/phone-numbers')).body, 'Repoint my Twilio numbers', 'no Twilio section without Twilio numbers')
  const imported = await me.browser.submit('/phone-numbers', '/phone-numbers/import', { phone_number: '+13105550100', carrier: 'twilio', account_sid: HOLDER_SID, auth_token: HOLDER_TOKEN, nickname: '' })
  t.equal(imported.statusCode, 303)
  const held = twilio.incoming(HOLDER_SID)[0]
  held.voice_url = 'https://old-address.example.com/telephony/twilio/voice'
  twilio.failNext(500, 20500, 'Twilio is down for a moment')
  const notRepointed = await followRefusal(me.browser, await me.browser.submit('/phone-numbers', '/phone-numbers/repoint', {}), '/phone-numbers')
  for (const view of [notRepointed.page, await me.browser.get(notRepointed.url)]) t.match(view.body, '<p>0 repointed; not repointed: +13105550100 (Twilio answered 500 (error 20500): Twilio is down for a moment).</p>', 'a refused repointing said in words, again on a reload')
  t.equal(held.voice_url, 'https://old-address.example.com/telephony/twilio/voice', 'a reload repoints nothing')
  const repoint = await me.browser.submit('/phone-numbers', '/phone-numbers/repoint', {})
  t.equal(repoint.statusCode, 303, 'Post/Redirect/Get: a reload repoints nothing again')
  t.equal(repoint.headers.location, '/phone-numbers?repointed=1')
  const repointed = await me.browser.get(repoint.headers.location as string)
  t.match(repointed.body, '1 number now sends calls to this server.')
  t.equal(held.voice_url, `${ctx.config.publicBaseUrl}/telephony/twilio/voice`)
  t.equal((await me.browser.post('/phone-numbers/repoint', {})).statusCode, 403, 'no CSRF token')

  twilio.addAccount(HOLDER_SID, 'rotated-token-0123456789')
  const wrong = await followRefusal(me.browser, await me.browser.submit('/phone-numbers', '/phone-numbers/carrier-token', { account_sid: HOLDER_SID, auth_token: 'not-the-token' }), '/phone-numbers')
  for (const view of [wrong.page, await me.browser.get(wrong.url)]) {
    t.match(view.body, '<p>The auth token was not replaced:')
    t.match(view.body, `id="token-account_sid" name="account_sid" value="${HOLDER_SID}"`, 'the account SID kept')
    t.notMatch(view.body, 'not-the-token', 'the token is neither shown')
  }
  t.notMatch(JSON.stringify(await ctx.db.selectFrom('console_drafts').select('form_values').execute()), 'not-the-token', 'nor kept')
  const bad = (await followRefusal(me.browser, await me.browser.submit('/phone-numbers', '/phone-numbers/carrier-token', { account_sid: 'AC1', auth_token: '' }), '/phone-numbers')).page
  t.match(bad.body, 'id="token-account_sid-error"')
  t.match(bad.body, '<a href="#token-auth_token">')
  const replace = await me.browser.submit('/phone-numbers', '/phone-numbers/carrier-token', { account_sid: HOLDER_SID, auth_token: 'rotated-token-0123456789' })
  t.equal(replace.statusCode, 303)
  t.equal(replace.headers.location, '/phone-numbers?token_kept=1', 'the token never reaches an address')
  const replaced = await me.browser.get(replace.headers.location as string)
  t.match(replaced.body, 'The new auth token is kept with 1 number.')
  t.notMatch(replaced.body, 'rotated-token-0123456789', 'the token is never rendered')
  held.voice_url = null
  t.equal((await me.browser.submit('/phone-numbers', '/phone-numbers/repoint', {})).headers.location, '/phone-numbers?repointed=1', 'the number is reached with the new token')
  t.equal(held.voice_url, `${ctx.config.publicBaseUrl}/telephony/twilio/voice`)
})
