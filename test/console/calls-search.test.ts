import t from 'tap'
import { newId } from '../../src/db/ids.ts'
import { createAccount, setup, type TestContext } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { signedInWithKey } from '../helpers/console-client.ts'

// The console's calls list (docs/console.md, "Calls"): search by id, number and transcript words, the total, the
// extracted-field columns and the export of the filter, within the account and the workspace.

const callIdsOf = (body: string) => [...body.matchAll(/<a href="\/calls\/([0-9a-f]{24})">/g)].map((m) => m[1])
const csvIdsOf = (body: string) => body.trim().split('\n').slice(1).map((line) => line.split(',')[0])
const said = (content: string) => [{ speaker: 'user' as const, content, timestamp: Date.UTC(2026, 4, 1) }]

async function seeded (ctx: TestContext) {
  const signedIn = await signedInWithKey(ctx)
  const { user, account } = signedIn
  const agent = await createAgent(ctx.app, account, {
    agent_name: 'Front desk',
    data_retrieval: [{ name: 'city', type: 'string', description: 'the caller\'s city', required: false }, { name: 'party_size', type: 'number', description: 'how many', required: false }]
  })
  const at = (minute: number) => new Date(Date.UTC(2026, 4, 1, 9, minute))
  const [refund, booking, web, spoken] = await insertCalls(ctx.db, user.id, agent, [
    { start_timestamp: at(1), call_from: '+14155550123', call_to: '+12125550999', transcription: said('I would like a refund for my order, please'), custom_analysis_data: JSON.stringify({ city: 'Lyon', party_size: 4 }) },
    { start_timestamp: at(2), call_from: '+442071838750', call_to: '+12125550999', direction: 'inbound', transcription: said('Can I book a table for four tonight?'), custom_analysis_data: JSON.stringify({ city: 'Paris <b>' }) },
    { start_timestamp: at(3), call_type: 'web', call_from: null, call_to: null, transcription: [{ speaker: 'agent', content: 'Your refund is on its way', timestamp: 1 }] },
    { start_timestamp: at(4), call_from: '+14155550999', transcription: [{ speaker: 'user', content: 'refund' + ' word'.repeat(3), timestamp: 1 }, { speaker: 'agent', content: 'Noted.', timestamp: 2 }] }
  ])
  return { ...signedIn, agent, calls: { refund, booking, web, spoken } }
}

t.test('search by call id, by any part of a number, by transcript words; the total counts what matches', async (t) => {
  const ctx = await setup(t)
  const { browser, calls, user } = await seeded(ctx)
  const other = await createAccount(ctx.db)
  const [foreign] = await insertCalls(ctx.db, other.user.id, await createAgent(ctx.app, other), [{ call_from: '+14155550123', transcription: said('refund please') }])
  t.not(other.user.id, user.id)

  const search = async (q: string, rest = '') => {
    const res = await browser.get(`/calls?q=${encodeURIComponent(q)}${rest}`)
    t.equal(res.statusCode, 200, q)
    return { ids: callIdsOf(res.body), body: res.body }
  }
  t.same((await search(calls.booking)).ids, [calls.booking], 'a call id')
  t.same((await search(calls.booking.toUpperCase())).ids, [calls.booking], 'in either case')
  t.same((await search(foreign)).ids, [], 'another account\'s call id finds nothing')
  t.same((await search(newId())).ids, [])

  const number = await search('+1 (415) 555-0123')
  t.same(number.ids, [calls.refund], 'a number as people write it')
  t.match(number.body, '<strong>1 call</strong>')
  t.same((await search('5550999')).ids, [calls.spoken, calls.booking, calls.refund], 'part of a number, from or to, newest first')
  t.same((await search('2071838750')).ids, [calls.booking], 'without the country code')
  t.same((await search('5550999', '&direction=inbound')).ids, [calls.booking], 'with the other filters')

  const words = await search('refund')
  t.same(words.ids, [calls.spoken, calls.web, calls.refund], 'a word the caller or the agent said, newest first')
  t.match(words.body, '<strong>3 calls</strong>')
  t.same((await search('REFUND order')).ids, [calls.refund], 'every word, in any case')
  t.same((await search('"table for four"')).ids, [calls.booking], 'a quoted phrase')
  t.same((await search('"four table"')).ids, [], 'a phrase in its order')
  t.same((await search('refund -order')).ids, [calls.spoken, calls.web], 'without a word')
  t.same((await search('refund', '&type=web')).ids, [calls.web])
  t.same((await search('noted')).ids, [calls.spoken], 'the agent\'s lines too')
  t.same((await search('12')).ids, [], 'two digits are a word, not a number')
  t.same((await search('!!! ** ""')).ids, [], 'punctuation alone finds nothing, and is no error')
  t.match((await search('zebra')).body, /<strong>0 calls<\/strong>[\s\S]*No calls match/)
  t.match((await search('refund')).body, 'value="refund"', 'the box keeps the search')
})

t.test('extracted-field columns: chosen from the agents\' fields, values as text', async (t) => {
  const ctx = await setup(t)
  const { browser, calls } = await seeded(ctx)
  const plain = await browser.get('/calls')
  t.match(plain.body, '<details class="columns"><summary>Columns</summary>')
  t.match(plain.body, '<input type="checkbox" name="column" value="city"> city')
  t.match(plain.body, '<input type="checkbox" name="column" value="party_size"> party_size')
  t.notMatch(plain.body, '<th scope="col">city</th>')

  const chosen = await browser.get('/calls?column=city&column=party_size')
  t.equal(chosen.statusCode, 200)
  t.match(chosen.body, '<th scope="col">city</th><th scope="col">party_size</th>')
  t.match(chosen.body, 'value="city" checked')
  const row = (id: string) => chosen.body.slice(chosen.body.indexOf(`/calls/${id}"`), chosen.body.indexOf('</tr>', chosen.body.indexOf(`/calls/${id}"`)))
  t.match(row(calls.refund), /<td>Lyon<\/td>\s*<td>4<\/td>\s*$/)
  t.match(row(calls.booking), /<td>Paris &lt;b&gt;<\/td>\s*<td>—<\/td>\s*$/, 'escaped; a missing value is a dash')
  t.match(row(calls.web), /<td>—<\/td>\s*<td>—<\/td>\s*$/)
  const older = /<a href="([^"]+)" rel="next">/.exec(chosen.body)
  t.equal(older, null, 'one page')
  t.match((await browser.get('/calls?column=no_such_field')).body, '<th scope="col">no_such_field</th>', 'a field no agent has now: still a column')
})

t.test('the export is the current filter\'s calls, every page of them, and only the account\'s', async (t) => {
  const ctx = await setup(t)
  const { browser, calls, user, agent } = await seeded(ctx)
  const other = await createAccount(ctx.db)
  await insertCalls(ctx.db, other.user.id, await createAgent(ctx.app, other), [{ start_timestamp: new Date(Date.UTC(2026, 4, 1, 9, 5)), transcription: said('refund') }])
  const many = await insertCalls(ctx.db, user.id, agent, Array.from({ length: 60 }, (_, i) => ({ start_timestamp: new Date(Date.UTC(2026, 3, 1, 0, i)), call_status: 'failed' as const })))

  const list = await browser.get('/calls?q=refund&type=phone')
  t.match(list.body, '<a href="/calls/export.csv?q=refund&amp;type=phone" download>Export these calls (CSV)</a>')
  const csv = await browser.get('/calls/export.csv?q=refund&type=phone')
  t.equal(csv.statusCode, 200)
  t.match(csv.headers['content-type'], 'text/csv')
  t.match(csv.headers['content-disposition'], /attachment; filename="call-details_first_\d{4}-\d\d-\d\d\.csv"/)
  t.match(csv.body, /^call_id,agent_id,agent_name,/, 'the API\'s columns')
  t.same(csvIdsOf(csv.body), [calls.refund, calls.spoken], 'the filter\'s calls, oldest first as the API exports them')

  const failed = await browser.get('/calls/export.csv?status=failed&from=2026-04-01&to=2026-04-01')
  t.match(failed.headers['content-disposition'], 'call-details_2026-04-01_2026-04-01.csv')
  t.same(csvIdsOf(failed.body), many, 'all 60, not one page')
  t.match((await browser.get('/calls?status=failed')).body, '<strong>60 calls</strong>')

  for (const query of ['?status=done', `?q=${'x'.repeat(201)}`, '?from=2026-02-30']) {
    const bad = await browser.get(`/calls/export.csv${query}`)
    t.equal(bad.statusCode, 400, query)
    t.match(bad.headers['content-type'], 'text/html')
    t.match(bad.body, 'Calls not exported')
  }
  const signedOut = await ctx.app.inject({ method: 'GET', url: '/calls/export.csv' })
  t.equal(signedOut.statusCode, 303)
})

t.test('in a workspace: only its calls are listed, counted, found and exported', async (t) => {
  const ctx = await setup(t)
  const { calls, user } = await seeded(ctx)
  const workspace = newId()
  await ctx.db.insertInto('workspaces').values({ id: workspace, user_id: user.id, name: 'Team' }).execute()
  await ctx.db.updateTable('calls').set({ workspace_id: workspace }).where('id', 'in', [calls.refund, calls.web]).execute()
  const member = await signedInWithKey(ctx)
  await ctx.db.insertInto('workspace_members').values({ workspace_id: workspace, email: member.user.email, role: 'member', status: 'active', member_user_id: member.user.id, joined_at: new Date() }).execute()
  await ctx.db.updateTable('console_sessions').set({ workspace_id: workspace }).where('user_id', '=', member.user.id).execute()

  const page = await member.browser.get('/calls')
  t.same(callIdsOf(page.body), [calls.web, calls.refund])
  t.match(page.body, '<strong>2 calls</strong>')
  t.same(callIdsOf((await member.browser.get('/calls?q=refund')).body), [calls.web, calls.refund])
  t.same(callIdsOf((await member.browser.get(`/calls?q=${calls.spoken}`)).body), [], 'the owner\'s call outside the workspace')
  t.same(callIdsOf((await member.browser.get('/calls?q=5550999')).body), [calls.refund])
  t.same(callIdsOf((await member.browser.get(`/calls?before=${calls.spoken}`)).body), [calls.web, calls.refund], 'a position is only a place in the order')
  t.same(csvIdsOf((await member.browser.get('/calls/export.csv')).body), [calls.refund, calls.web])
})
