import t, { type Test } from 'tap'
import { newId } from '../../src/db/ids.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { signedInWithKey, type ConsoleClient } from '../helpers/console-client.ts'

// The Analytics page's outcomes (docs/console.md, "Analytics"): rates, end reasons, transfers, waits and an extracted
// field's values over a known set of calls, each linking to the Calls list filtered to exactly those calls.

const unescape = (text: string) => text.replaceAll('&amp;', '&').replaceAll('&quot;', '"').replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&#39;', '\'')

/** A chart's table rows (`id`-table) as [label, value, link of the label or undefined]. */
function rowsOf (body: string, id: string): Array<[string, string, string | undefined]> {
  const table = new RegExp(`<table id="${id}-table">([\\s\\S]*?)</table>`).exec(body)?.[1]
  if (table === undefined) throw new Error(`no table ${id} in the page`)
  const body_ = /<tbody>([\s\S]*?)<\/tbody>/.exec(table)![1]
  return [...body_.matchAll(/<tr><th scope="row">(.*?)<\/th><td>(.*?)<\/td><\/tr>/g)].map((m) => {
    const link = /^<a href="([^"]+)">(.*)<\/a>$/.exec(m[1])
    return link === null ? [unescape(m[1]), m[2], undefined] : [unescape(link[2]), m[2], unescape(link[1])]
  })
}

const callIdsOf = (body: string) => [...body.matchAll(/<a href="\/calls\/([0-9a-f]{24})">/g)].map((m) => m[1]).sort()

/** A call's latency; the turns at the indexes `cut` were interrupted by the caller. */
const latency = (p50: number, turns: number[], cut: number[] = []) => JSON.stringify({
  e2e: { p50 }, turns: turns.map((ms, i) => ({ at: i, end_of_turn_ms: 0, transcription_ms: null, llm_ms: null, tts_ms: null, e2e_ms: ms, ...(cut.includes(i) && { interrupted: true }) }))
})

/** Five calls on 2026-05-01 whose outcomes are known, and another account's call on the same day. */
async function seed (ctx: TestContext, user: { id: string }, account: Account) {
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front desk', data_retrieval: [{ name: 'city', type: 'string', description: 'the caller\'s city', required: true }] })
  const at = (hour: number) => new Date(Date.UTC(2026, 4, 1, hour))
  const [hungUp, transferredOnce, transferredTwice, unanswered, running] = await insertCalls(ctx.db, user.id, agent, [
    { start_timestamp: at(9), duration_ms: 60_000, task_achieved: true, disconnection_reason: 'user_hangup', custom_analysis_data: JSON.stringify({ city: 'Lyon' }), latency: latency(400, [300, 500], [1]) },
    { start_timestamp: at(10), duration_ms: 120_000, task_achieved: false, disconnection_reason: 'agent_hangup', custom_analysis_data: JSON.stringify({ city: 'Lyon' }), transfer_history: JSON.stringify([{ to: '+14155550111' }]), latency: latency(1200, [1200]) },
    { start_timestamp: at(11), duration_ms: 180_000, task_achieved: true, disconnection_reason: 'call_transfer', custom_analysis_data: JSON.stringify({ city: 'Paris <b>' }), transfer_history: JSON.stringify([{ to: '+14155550111' }, { to: '+14155550112' }]) },
    { start_timestamp: at(12), duration_ms: null, call_status: 'failed', task_achieved: false, disconnection_reason: 'no_answer' },
    { start_timestamp: at(13), duration_ms: null, end_timestamp: null, call_status: 'started' }
  ])
  const other = await createAccount(ctx.db)
  await insertCalls(ctx.db, other.user.id, await createAgent(ctx.app, other, { agent_name: 'Not mine', data_retrieval: [{ name: 'city', type: 'string', description: 'city', required: false }] }), [
    { start_timestamp: at(9), duration_ms: 6_000_000, task_achieved: true, disconnection_reason: 'voicemail', custom_analysis_data: JSON.stringify({ city: 'Lyon' }), transfer_history: JSON.stringify([{}]), latency: latency(9000, [9000], [0]) }
  ])
  return { agent, calls: { hungUp, transferredOnce, transferredTwice, unanswered, running } }
}

/** The calls a link of the page lists (and says it counts). */
async function listed (t: Test, browser: ConsoleClient, href: string): Promise<string[]> {
  const page = await browser.get(href)
  t.equal(page.statusCode, 200, href)
  const ids = callIdsOf(page.body)
  t.match(page.body, `<strong>${ids.length} ${ids.length === 1 ? 'call' : 'calls'}</strong>`, `${href}: the total counts the same calls`)
  return ids
}

t.test('outcomes of a known set of calls: rates, reasons, transfers, waits, an extracted field; each links to exactly its calls', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const { agent, calls } = await seed(ctx, user, account)
  const sorted = (...ids: string[]) => ids.sort()

  const page = await browser.get('/analytics?from=2026-05-01&to=2026-05-01')
  t.equal(page.statusCode, 200)
  const body = page.body
  const range = 'from=2026-05-01&amp;to=2026-05-01'
  t.match(body, `<dt>Success rate</dt><dd>75%: <a href="/calls?${range}&amp;status=success">3 of 4 ended calls</a> held a conversation</dd>`)
  t.match(body, `<dt>Task achieved</dt><dd>50%: <a href="/calls?${range}&amp;task=achieved">2 of 4 judged calls</a>`)
  t.match(body, '<dt>Average duration</dt><dd>2:00 over 3 calls</dd>', 'the calls with a duration')
  t.match(body, `<dt>Transfers</dt><dd><a href="/calls?${range}&amp;transferred=yes">2 calls</a> (40%) put through to someone else, 3 transfers in all</dd>`)
  t.match(body, '<dt>Caller waited per turn</dt><dd>500 ms p50, 1,130 ms p95 (over 3 answered turns of 2 timed calls)</dd>', 'percentiles over every timed turn')
  t.match(body, '<dt>Answers cut off</dt><dd>33.3%: the caller talked over 1 of 3 answered turns</dd>', 'the turns the caller interrupted')
  t.notMatch(body, /Not mine|voicemail|Reached a voicemail/i, 'another account\'s calls are never counted')

  t.same(rowsOf(body, 'results'), [
    ['Conversation held', '3', '/calls?from=2026-05-01&to=2026-05-01&status=success'],
    ['Not connected', '1', '/calls?from=2026-05-01&to=2026-05-01&status=failed'],
    ['In progress', '1', undefined]
  ])
  t.same(rowsOf(body, 'tasks').map((row) => row.slice(0, 2)), [['Achieved', '2'], ['Not achieved', '2'], ['Not judged yet', '1']])
  const reasons = rowsOf(body, 'reasons')
  t.same(reasons.map((row) => row.slice(0, 2)), [['The agent ended it', '1'], ['Put through to a person', '1'], ['No answer', '1'], ['The caller hung up', '1']], 'in words, not enum values')
  t.notMatch(body, /user_hangup<|>no_answer/, 'no raw reason shown')
  const waits = rowsOf(body, 'waits')
  t.same(waits.map((row) => row.slice(0, 2)), [['Under 0.5 s', '1'], ['0.5–1 s', '0'], ['1–1.5 s', '1'], ['1.5–2 s', '0'], ['2–2.5 s', '0'], ['2.5–3 s', '0'], ['3 s or more', '0']], 'calls by their median wait')
  const values = rowsOf(body, 'field')
  t.same(values.map((row) => row.slice(0, 2)), [['Lyon', '2'], ['Paris <b>', '1']])
  t.match(body, '<option value="city" selected>city</option>', 'the agents\' field, chosen by default')
  t.notMatch(body, '<b>', 'values are escaped')
  t.match(body, /<a href="\/calls\?from=2026-05-01&amp;to=2026-05-01&amp;reason=no_answer" aria-label="No answer: 1 call">/, 'the bars link too, named as they read')

  // Each link lists exactly the calls it counts.
  t.same(await listed(t, browser, rowsOf(body, 'results')[0][2]!), sorted(calls.hungUp, calls.transferredOnce, calls.transferredTwice))
  t.same(await listed(t, browser, rowsOf(body, 'tasks')[0][2]!), sorted(calls.hungUp, calls.transferredTwice))
  t.same(await listed(t, browser, rowsOf(body, 'tasks')[1][2]!), sorted(calls.transferredOnce, calls.unanswered))
  t.same(await listed(t, browser, reasons[1][2]!), [calls.transferredTwice])
  t.same(await listed(t, browser, reasons[2][2]!), [calls.unanswered])
  t.same(await listed(t, browser, '/calls?from=2026-05-01&to=2026-05-01&transferred=yes'), sorted(calls.transferredOnce, calls.transferredTwice))
  t.same(await listed(t, browser, waits[0][2]!), [calls.hungUp])
  t.equal(waits[0][2], '/calls?from=2026-05-01&to=2026-05-01&wait_from=0&wait_to=500')
  t.same(await listed(t, browser, waits[2][2]!), [calls.transferredOnce])
  t.equal(waits[6][2], '/calls?from=2026-05-01&to=2026-05-01&wait_from=3000', 'the last bucket has no end')
  t.same(await listed(t, browser, waits[6][2]!), [])
  t.same(await listed(t, browser, values[0][2]!), sorted(calls.hungUp, calls.transferredOnce))
  t.same(await listed(t, browser, values[1][2]!), [calls.transferredTwice], 'a value with markup, through the address')

  await ctx.db.updateTable('calls').set({ custom_analysis_data: JSON.stringify({ city: ' Lyon ' }) }).where('id', '=', calls.unanswered).execute()
  t.same(await listed(t, browser, '/calls?field=city&value=%20Lyon%20'), [calls.unanswered], 'a value is matched as stored, spaces included')
  const list = await browser.get(values[1][2]!)
  t.match(list.body, '<p class="outcome-filter">Only calls where city is “Paris &lt;b&gt;”. <a href="/calls?from=2026-05-01&amp;to=2026-05-01">Show every call</a></p>', 'the list says what it shows, and how to see all')
  t.match(list.body, '<input type="hidden" name="field" value="city"><input type="hidden" name="value" value="Paris &lt;b&gt;">', 'changing the other filters keeps the outcome')
  const exported = await browser.get('/calls/export.csv?from=2026-05-01&to=2026-05-01&reason=call_transfer')
  t.same(exported.body.trim().split('\n').slice(1).map((line) => line.split(',')[0]), [calls.transferredTwice], 'the export keeps the outcome filter')
  const words = await browser.get('/calls?task=not_achieved&reason=agent_hangup&wait_from=1000')
  t.match(words.body, 'Only calls where the task was not achieved; ended: the agent ended it; the caller usually waited 1,000 ms or more.')
  t.same(callIdsOf(words.body), [calls.transferredOnce])

  const filtered = await browser.get(`/analytics?from=2026-05-01&to=2026-05-01&agent=${agent._id}`)
  t.match(filtered.body, `<a href="/calls?${range}&amp;agent=${agent._id}&amp;status=success">3 of 4 ended calls</a>`, 'the links keep the agent filter')
})

t.test('bad outcome filters on the Calls list are a 400 page in words', async (t) => {
  const ctx = await setup(t)
  const { browser } = await signedInWithKey(ctx)
  for (const [query, message] of [
    ['task=maybe', 'The task filter must be “achieved” or “not_achieved”.'],
    ['transferred=no', 'The transferred filter can only be “yes”.'],
    ['wait_from=fast', 'A wait must be a whole number of milliseconds.'],
    ['wait_from=500&wait_to=500', 'The longest wait must be more than the shortest.'],
    ['field=1city&value=x', 'An extracted field&#39;s name has letters'],
    ['field=city', 'Give the extracted field&#39;s value'],
    [`reason=${'x'.repeat(201)}`, 'The end reason must be at most 200 characters.'],
    ['reason=a&reason=b', 'The filter “reason” was given more than once.']
  ]) {
    const res = await browser.get(`/calls?${query}`)
    t.equal(res.statusCode, 400, query)
    t.match(res.body, message, query)
    t.equal((await browser.get(`/calls/export.csv?${query}`)).statusCode, 400, `export ${query}`)
  }
  const page = await browser.get('/analytics?field=1x')
  t.equal(page.statusCode, 400)
  t.match(page.body, 'An extracted field&#39;s name has letters')
})

t.test('a workspace member sees the workspace\'s analytics: its calls only, Analytics in the bar', async (t) => {
  const ctx = await setup(t)
  const { user, account } = await signedInWithKey(ctx)
  const { agent, calls } = await seed(ctx, user, account)
  const workspace = newId()
  await ctx.db.insertInto('workspaces').values({ id: workspace, user_id: user.id, name: 'Team' }).execute()
  await ctx.db.updateTable('agents').set({ workspace_id: workspace }).where('id', '=', agent._id).execute()
  await ctx.db.updateTable('calls').set({ workspace_id: workspace }).where('id', 'in', [calls.hungUp, calls.unanswered]).execute()
  const member = await signedInWithKey(ctx)
  await ctx.db.insertInto('workspace_members').values({ workspace_id: workspace, email: member.user.email, role: 'member', status: 'active', member_user_id: member.user.id, joined_at: new Date() }).execute()
  await ctx.db.updateTable('console_sessions').set({ workspace_id: workspace }).where('user_id', '=', member.user.id).execute()

  const page = await member.browser.get('/analytics?from=2026-05-01&to=2026-05-01')
  t.equal(page.statusCode, 200)
  t.match(page.body, /<li><a href="\/analytics" aria-current="page">Analytics<\/a><\/li>/, 'in the bar for a member')
  t.match(page.body, '<dt>Calls</dt><dd>2</dd>')
  t.match(page.body, '<dt>Success rate</dt><dd>50%: ')
  t.same(rowsOf(page.body, 'reasons').map((row) => row.slice(0, 2)), [['No answer', '1'], ['The caller hung up', '1']])
  t.same(rowsOf(page.body, 'field').map((row) => row.slice(0, 2)), [['Lyon', '1']])
  t.same(await listed(t, member.browser, rowsOf(page.body, 'results')[0][2]!), [calls.hungUp], 'the link lists the workspace\'s calls')
  const csv = await member.browser.get('/analytics/calls.csv?from=2026-05-01&to=2026-05-01')
  t.same(csv.body.trim().split('\n').slice(1).map((line) => line.split(',')[0]).sort(), [calls.hungUp, calls.unanswered].sort(), 'the download too')
  const costs = await member.browser.get('/analytics/costs.csv?from=2026-05-01&to=2026-05-01')
  t.match(costs.body.trim().split('\n').at(-1), /^total,,2,/)
  t.notMatch(page.body, 'Paris', 'the owner\'s calls outside the workspace are not counted')
})
