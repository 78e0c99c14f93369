import t from 'tap'
import { inviteMember } from '../../src/modules/account/workspace-queries.ts'
import { addDoNotCall, DNC_MAX_NUMBERS } from '../../src/modules/contacts/dnc.ts'
import { createAccount, setup } from '../helpers/app.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { anotherSession, ConsoleClient, createConsoleUser, followDraft, PASSWORD, signedInWithKey } from '../helpers/console-client.ts'

// The console's Do not call page (docs/contacts.md, "Do not call"): the account's list with its search, adding a
// number (Post/Redirect/Get, the API's checks), removing one; another account's numbers are not shown.

const numbersOf = (body: string) => [...body.matchAll(/<tr>\s*<td>(\+\d+)<\/td>/g)].map((m) => m[1])

t.test('a full list refuses the number with the reason in words, by the form, keeping what was typed', async (t) => {
  const ctx = await setup(t)
  const { account, browser } = await signedInWithKey(ctx)
  await addDoNotCall(ctx.db, account.user.id, { phone_number: '+4930123456', source: 'api' })
  await ctx.db.updateTable('do_not_call_counts').set({ size: DNC_MAX_NUMBERS }).where('user_id', '=', account.user.id).execute()
  const full = await browser.submit('/do-not-call', '/do-not-call', { phone_number: '+14155550111', note: 'one more' })
  const draftUrl = await followDraft(t, browser, full, '/do-not-call', [/<div id="form-problems" class="notice error error-summary" role="alert" tabindex="-1">\s*<p>Not added: /, 'value="+14155550111"', 'value="one more"'], 'add-number')
  t.equal((await ctx.db.selectFrom('do_not_call').select('phone_number').where('user_id', '=', account.user.id).execute()).length, 1, 'nothing added')
  t.notMatch((await (await anotherSession(ctx.app, account.user.email)).get(draftUrl)).body, 'Not added', 'another session: no refusal')
})

t.test('list, search, add (refused, added, listed already) and remove', async (t) => {
  const ctx = await setup(t)
  const { account, browser } = await signedInWithKey(ctx)
  const other = await createAccount(ctx.db)
  await addDoNotCall(ctx.db, other.user.id, { phone_number: '+4930999999', source: 'api' })
  await addDoNotCall(ctx.db, account.user.id, { phone_number: '+4930123456', source: 'api', note: 'asked <by> letter' })

  const empty = await browser.get('/do-not-call')
  t.equal(empty.statusCode, 200)
  t.match(empty.body, /<a href="\/do-not-call" aria-current="page">Do not call<\/a>/, 'in the navigation')
  t.same(numbersOf(empty.body), ['+4930123456'], 'only the account\'s numbers')
  t.match(empty.body, '<td>asked &lt;by&gt; letter</td>', 'notes are text')

  const listed = async () => (await ctx.db.selectFrom('do_not_call').select('phone_number').where('user_id', '=', account.user.id).execute()).length
  const refused = await browser.submit('/do-not-call', '/do-not-call', { phone_number: '030 123', note: 'typed <note>' })
  const draftUrl = await followDraft(t, browser, refused, '/do-not-call', ['<a href="#phone_number">Write the number in E.164', 'value="030 123"', 'value="typed &lt;note&gt;"'])
  t.equal(await listed(), 1, 'refused and reloaded: nothing added')
  t.notMatch((await (await anotherSession(ctx.app, account.user.email)).get(draftUrl)).body, '030 123', 'another session sees an empty form')

  const added = await browser.submit('/do-not-call', '/do-not-call', { phone_number: '+14155550111', note: 'Said so on the phone' })
  t.equal(added.statusCode, 303)
  t.equal(added.headers.location, '/do-not-call?done=added')
  const after = await browser.get('/do-not-call?done=added')
  t.match(after.body, 'The number is on the list')
  t.same(numbersOf(after.body), ['+14155550111', '+4930123456'], 'the newest first')
  t.match((await ctx.app.inject({ method: 'GET', url: '/v1/dnc?phone_number=%2B14155550111', headers: account.headers })).json(), { data: [{ source: 'console', note: 'Said so on the phone' }] })
  t.equal((await browser.submit('/do-not-call', '/do-not-call', { phone_number: '+14155550111', note: '' })).headers.location, '/do-not-call?done=listed')

  t.same(numbersOf((await browser.get('/do-not-call?search=415+555')).body), ['+14155550111'], 'a search by digits, written any way')
  t.match((await browser.get('/do-not-call?search=999')).body, 'No numbers match.')
  t.equal((await browser.get('/do-not-call?search=abc')).statusCode, 400)

  const removed = await browser.submit('/do-not-call', '/do-not-call/remove', { phone_number: '+4930123456' })
  t.equal(removed.statusCode, 303)
  t.equal(removed.headers.location, '/do-not-call?done=removed')
  t.same(numbersOf((await browser.get('/do-not-call')).body), ['+14155550111'])
  t.equal((await browser.submit('/do-not-call', '/do-not-call/remove', { phone_number: '+4930999999' })).statusCode, 404, 'another account\'s number')
  t.equal((await browser.post('/do-not-call', { phone_number: '+14155550122' })).statusCode, 403, 'no CSRF token: refused')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/do-not-call' })).statusCode, 303, 'signed out: sent to sign in')
})

t.test('in a workspace the page is not offered, and the owner\'s list is not reachable: /do-not-call is the person\'s own account', async (t) => {
  const ctx = await setup(t)
  const { user, account } = await signedInWithKey(ctx)
  await addDoNotCall(ctx.db, account.user.id, { phone_number: '+4930123456', source: 'api' })
  const workspace = (await ctx.app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: 'Sales' } })).json()
  const member = await createConsoleUser(ctx.db)
  await inviteMember(ctx.db, user.id, workspace._id, member.email, 'admin')
  const memberKey = (await createApiKey(ctx.db, member.id)).key
  await ctx.app.inject({ method: 'POST', url: `/v1/workspaces/${workspace._id as string}/accept-invitation`, headers: { 'x-api-key': memberKey } })
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(member.email, PASSWORD)
  await browser.submit('/workspaces', '/workspace', { workspace_id: workspace._id })

  const page = await browser.get('/do-not-call')
  t.notMatch(page.body, '<a href="/do-not-call"', 'not in a workspace\'s navigation')
  t.same(numbersOf(page.body), [], 'the member\'s own (empty) list, not the owner\'s')
  await browser.submit('/do-not-call', '/do-not-call', { phone_number: '+14155550111', note: '' })
  t.same((await ctx.db.selectFrom('do_not_call').select(['user_id', 'phone_number']).orderBy('phone_number').execute()),
    [{ user_id: member.id, phone_number: '+14155550111' }, { user_id: user.id, phone_number: '+4930123456' }], 'added to the member\'s own list')
})
