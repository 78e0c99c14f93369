import t from 'tap'
import { newId } from '../../src/db/ids.ts'
import { inviteMember } from '../../src/modules/account/workspace-queries.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { axeViolations, launchChromium, signInAt } from '../helpers/chromium.ts'
import { anotherSession, ConsoleClient, createConsoleUser, followDraft, PASSWORD, signedInWithKey } from '../helpers/console-client.ts'

// The console's Contacts pages (docs/contacts.md): the list with its search, a contact's page with its calls, its
// name and its deletion; the call page's link to its contact; the workspace rule; markup that axe-core passes.

const contactIdsOf = (body: string) => [...body.matchAll(/<a href="\/contacts\/([0-9a-f]{24})">/g)].map((m) => m[1])

async function webCall (ctx: TestContext, account: Account, agentId: string, dynamic: Record<string, unknown>): Promise<string> {
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agentId, dynamic_context: dynamic } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json()._id
}

const contactOf = async (ctx: TestContext, callId: string) =>
  (await ctx.db.selectFrom('calls').select('contact_id').where('id', '=', callId).executeTakeFirstOrThrow()).contact_id!

t.test('the list and its search, a contact\'s page with its calls, its name and its deletion; the call\'s link', async (t) => {
  const ctx = await setup(t)
  const { account, browser } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front <desk>' })
  const adaCall = await webCall(ctx, account, agent._id, { customer_phone: '+4930123456' })
  const adaAgain = await webCall(ctx, account, agent._id, { customer_phone: '+4930123456' })
  const graceCall = await webCall(ctx, account, agent._id, { customer_email: 'grace@example.com' })
  const ada = await contactOf(ctx, adaCall)
  const grace = await contactOf(ctx, graceCall)
  await ctx.app.inject({ method: 'PATCH', url: `/v1/contacts/${ada}`, headers: account.headers, payload: { name: 'Ada <b>Lovelace</b>' } })
  const other = await createAccount(ctx.db)
  const foreign = await contactOf(ctx, await webCall(ctx, other, (await createAgent(ctx.app, other))._id, { customer_phone: '+4930999999' }))

  const list = await browser.get('/contacts')
  t.equal(list.statusCode, 200)
  t.match(list.body, /<a href="\/contacts" aria-current="page">Contacts<\/a>/, 'in the navigation')
  t.same(contactIdsOf(list.body), [grace, ada], 'the latest call first, only the account\'s')
  t.notMatch(list.body, foreign)
  t.match(list.body, '<td>Ada &lt;b&gt;Lovelace&lt;/b&gt;</td>', 'names are text')
  t.match(list.body, /<a href="\/contacts\/[0-9a-f]{24}">\+4930123456<\/a><\/td>\s*<td>[^<]*<\/td>\s*<td>2<\/td>/)
  t.same(contactIdsOf((await browser.get('/contacts?search=lovelace')).body), [ada])
  t.same(contactIdsOf((await browser.get('/contacts?search=GRACE%40')).body), [grace])
  t.match((await browser.get('/contacts?search=nobody')).body, 'No contacts match.')
  t.match((await browser.get('/contacts?search=lovelace')).body, 'value="lovelace"', 'the form keeps the search')
  for (const query of [`?search=${'a'.repeat(201)}`, '?skip=-1', '?skip=x']) {
    const res = await browser.get(`/contacts${query}`)
    t.equal(res.statusCode, 400, query)
    t.match(res.body, /class="notice error"/)
  }
  const nul = await browser.get('/contacts?search=a%00b')
  t.equal(nul.statusCode, 400)
  t.match(nul.body, 'query.search must not contain NUL characters')

  // Its communications: the messages of its calls (another contact's are not shown).
  const message = (callId: string, body: string) => ({ id: newId(), user_id: account.user.id, call_id: callId, origin: 'live' as const, channel: 'sms' as const, sender: '+14155550100', recipient: '+4930123456', body, status: 'sent' as const })
  await ctx.db.insertInto('messages').values([message(adaCall, 'Your code is <b>1</b>'), message(graceCall, 'not hers')]).execute()
  const page = await browser.get(`/contacts/${ada.toUpperCase()}`)
  t.equal(page.statusCode, 200)
  t.match(page.body, /<h2>Messages<\/h2>\s*<div class="table"><table>\s*<caption>The e-mails, SMS and WhatsApp messages of its calls, newest first<\/caption>/)
  t.match(page.body, '<td>SMS</td><td>+4930123456</td><td>Sent</td>')
  t.notMatch(page.body, 'not hers')
  t.match((await browser.get(`/contacts/${grace}`)).body, '<td>SMS</td>', 'each contact its own')
  t.match(page.body, '<h1>Ada &lt;b&gt;Lovelace&lt;/b&gt;</h1>')
  t.match(page.body, '<dd>+4930123456</dd>')
  t.same([...page.body.matchAll(/<a href="\/calls\/([0-9a-f]{24})">/g)].map((m) => m[1]), [adaAgain, adaCall], 'its calls, newest first')
  t.match(page.body, '<td>Front &lt;desk&gt;</td>')
  t.equal((await browser.get(`/contacts/${foreign}`)).statusCode, 404, 'another account\'s contact')
  t.equal((await browser.get('/contacts/nope')).statusCode, 404)

  const call = await browser.get(`/calls/${adaCall}`)
  t.match(call.body, `<dt>Contact</dt><dd><a href="/contacts/${ada}">Ada &lt;b&gt;Lovelace&lt;/b&gt;</a></dd>`, 'the call page links its contact')
  t.match((await browser.get(`/calls/${graceCall}`)).body, `<a href="/contacts/${grace}">grace@example.com</a>`, 'by its address when it has no name')

  const renamed = await browser.submit(`/contacts/${ada}`, `/contacts/${ada}`, { name: '  Ada King ' })
  t.equal(renamed.statusCode, 303)
  t.equal(renamed.headers.location, `/contacts/${ada}?saved=1`)
  t.match((await browser.get(`/contacts/${ada}?saved=1`)).body, '<h1>Ada King</h1>')
  const tooLong = await browser.submit(`/contacts/${ada}`, `/contacts/${ada}`, { name: 'x'.repeat(201) })
  const draftUrl = await followDraft(t, browser, tooLong, `/contacts/${ada}`, [`value="${'x'.repeat(201)}" maxlength="200"`, 'aria-invalid="true"', '<a href="#name">The name must NOT have more than 200 characters.</a>'])
  t.match((await ctx.db.selectFrom('contacts').select('name').where('id', '=', ada).executeTakeFirstOrThrow()).name, 'Ada King', 'nothing saved, even reloaded')
  const elsewhere = await (await anotherSession(ctx.app, account.user.email)).get(draftUrl)
  t.match(elsewhere.body, 'name="name" value="Ada King"', 'another session sees the stored name')
  t.notMatch(elsewhere.body, 'xxxxx')
  t.equal((await browser.submit(`/contacts/${ada}`, `/contacts/${ada}`, { name: '' })).statusCode, 303)
  t.match((await browser.get(`/contacts/${ada}`)).body, '<h1>+4930123456</h1>', 'an empty name: not known')
  t.equal((await browser.submit(`/contacts/${ada}`, `/contacts/${foreign}/delete`, {})).statusCode, 404, 'another account\'s contact is not deleted')

  const deleted = await browser.submit(`/contacts/${ada}`, `/contacts/${ada}/delete`, {})
  t.equal(deleted.statusCode, 303)
  t.equal(deleted.headers.location, '/contacts?deleted=1')
  t.same(contactIdsOf((await browser.get('/contacts?deleted=1')).body), [grace])
  t.equal((await browser.get(`/contacts/${ada}`)).statusCode, 404)
  const unlinked = await browser.get(`/calls/${adaCall}`)
  t.equal(unlinked.statusCode, 200, 'the call stays')
  t.notMatch(unlinked.body, '<dt>Contact</dt>')
})

t.test('in a workspace a member sees its contacts only and changes none', async (t) => {
  const ctx = await setup(t)
  const { user, account } = await signedInWithKey(ctx)
  const workspace = (await ctx.app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: 'Sales' } })).json()
  const shared = await createAgent(ctx.app, account, {}, `?workspace_id=${workspace._id}`)
  const own = await createAgent(ctx.app, account)
  const inside = await contactOf(ctx, await webCall(ctx, account, shared._id, { customer_phone: '+4930123456' }))
  const outside = await contactOf(ctx, await webCall(ctx, account, own._id, { customer_phone: '+4930123456' }))

  const member = await createConsoleUser(ctx.db)
  await inviteMember(ctx.db, user.id, workspace._id, member.email, 'member')
  const memberKey = (await createApiKey(ctx.db, member.id)).key
  await ctx.app.inject({ method: 'POST', url: `/v1/workspaces/${workspace._id}/accept-invitation`, headers: { 'x-api-key': memberKey } })
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(member.email, PASSWORD)
  await browser.submit('/workspaces', '/workspace', { workspace_id: workspace._id })

  t.same(contactIdsOf((await browser.get('/contacts')).body), [inside])
  t.equal((await browser.get(`/contacts/${outside}`)).statusCode, 404, 'the owner\'s other contact is not reachable')
  const page = await browser.get(`/contacts/${inside}`)
  t.equal(page.statusCode, 200)
  t.notMatch(page.body, 'Delete this contact', 'a member is offered no change')
  t.equal((await browser.submit(`/contacts/${inside}`, `/contacts/${inside}/delete`, {})).statusCode, 403)
  t.equal((await browser.submit(`/contacts/${inside}`, `/contacts/${inside}`, { name: 'Mallory' })).statusCode, 403)
  t.equal((await ctx.db.selectFrom('contacts').select('id').where('id', '=', inside).execute()).length, 1)
})

t.test('the Contacts and Do not call pages pass axe-core (WCAG 2.1 A and AA) in Chromium', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const account = { user, key, headers: { 'x-api-key': key } }
  const agent = await createAgent(ctx.app, account)
  const callId = await webCall(ctx, account, agent._id, { customer_phone: '+4930123456' })
  const contact = await contactOf(ctx, callId)

  const browser = await launchChromium(t)
  const page = await browser.newPage()
  await signInAt(page, url, user.email, PASSWORD)
  const checked: Record<string, unknown> = {}
  const check = async (name: string, path: string) => {
    await page.goto(`${url}${path}`)
    checked[name] = await axeViolations(page)
  }
  await check('contacts', '/contacts')
  await check('a search with no match', '/contacts?search=nobody')
  await check('a bad search', `/contacts?search=${'a'.repeat(201)}`)
  await check('a contact', `/contacts/${contact}`)
  await page.getByLabel('Name').fill('x'.repeat(200))
  await page.getByLabel('Name').evaluate((input) => input.removeAttribute('maxlength'))
  await page.getByLabel('Name').fill('x'.repeat(201))
  await page.getByRole('button', { name: 'Save name' }).click()
  checked['a name refused'] = await axeViolations(page)
  t.match(await page.locator('.field-error').textContent(), /The name/)
  await check('the call with its contact', `/calls/${callId}`)
  // The account's do-not-call list (console/do-not-call.ts), an entry made by a call, and an add refused.
  await ctx.db.insertInto('do_not_call').values({ user_id: user.id, phone_number: '+4930123456', source: 'call', call_id: callId, note: 'asked' }).execute()
  await check('do not call', '/do-not-call')
  await page.getByLabel('Phone number').fill('030 123')
  await page.getByRole('button', { name: 'Add to the list' }).click()
  checked['a number refused'] = await axeViolations(page)
  t.match(await page.locator('.field-error').textContent(), /E\.164/)
  t.same(checked, Object.fromEntries(Object.keys(checked).map((name) => [name, []])), 'no violations')
})
