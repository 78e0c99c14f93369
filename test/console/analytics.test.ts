import t from 'tap'
import { newId } from '../../src/db/ids.ts'
import { MAX_RANGE_DAYS } from '../../src/http/dates.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { PAGE_HEADERS, signedInWithKey } from '../helpers/console-client.ts'

/** The rows of a chart's table (`id`-table): header row first, each row's cells as text. */
function tableOf (body: string, id: string): string[][] {
  const table = new RegExp(`<table id="${id}-table">([\\s\\S]*?)</table>`).exec(body)?.[1]
  if (table === undefined) throw new Error(`no table ${id} in the page`)
  return [...table.matchAll(/<tr>(.*?)<\/tr>/g)].map((row) => [...row[1].matchAll(/<t[hd][^>]*>(.*?)<\/t[hd]>/g)].map((cell) => cell[1]))
}

const charts = (body: string) => [...body.matchAll(/<svg class="chart"[^>]* role="(?:img|group)" aria-labelledby="(\w+)-title"/g)].map((m) => m[1])

/** Two agents' calls around 2026-05-01..03, and another account's on the same days. */
async function seed (ctx: TestContext, user: { id: string }, account: Account) {
  const desk = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  const sales = await createAgent(ctx.app, account, { agent_name: 'Sales <b>' })
  await insertCalls(ctx.db, user.id, desk, [
    { start_timestamp: new Date('2026-05-01T09:00:00Z'), duration_ms: 90_000, sentiment: 'positive', phone_call_credits: 7 },
    { start_timestamp: new Date('2026-05-01T10:00:00Z'), duration_ms: 30_000, sentiment: 'negative', phone_call_credits: 3, call_forwarding_credits: 2 },
    { start_timestamp: new Date('2026-04-30T23:59:00Z'), duration_ms: 600_000, phone_call_credits: 50 }
  ])
  await insertCalls(ctx.db, user.id, sales, [
    { start_timestamp: new Date('2026-05-03T12:00:00Z'), call_type: 'web', call_from: null, call_to: null, duration_ms: 120_000, web_call_credits: 4 }
  ])
  const other = await createAccount(ctx.db)
  await insertCalls(ctx.db, other.user.id, await createAgent(ctx.app, other, { agent_name: 'Not mine' }), [
    { start_timestamp: new Date('2026-05-02T12:00:00Z'), duration_ms: 6_000_000, sentiment: 'neutral', phone_call_credits: 100 }
  ])
  return { desk, sales }
}

t.test('the figures of one\'s own calls in the range, in four charts and their tables; the agent filter', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const { desk, sales } = await seed(ctx, user, account)

  const page = await browser.get('/analytics?from=2026-05-01&to=2026-05-03')
  t.equal(page.statusCode, 200)
  t.match(page.headers, PAGE_HEADERS)
  t.match(page.body, /<a href="\/contacts">Contacts<\/a><\/li><li><a href="\/analytics" aria-current="page">Analytics<\/a>/, 'in the header\'s bar, after Calls and Contacts')
  t.same(charts(page.body), ['results', 'tasks', 'minutes', 'calls', 'sentiment', 'costs'], 'the outcomes first (analytics-outcomes.test.ts), then calls and costs')
  t.notMatch(page.body, /style=|<script/i)
  t.match(page.body, '<dt>Calls</dt><dd>3</dd>')
  t.match(page.body, '<dt>Minutes</dt><dd>4</dd>')
  t.match(page.body, '<dt>Credits</dt><dd>16 (1 credit = 1 US cent)</dd>')
  t.same(tableOf(page.body, 'minutes'), [['Day (UTC)', 'Minutes'], ['2026-05-01', '2'], ['2026-05-02', '0'], ['2026-05-03', '2']])
  t.same(tableOf(page.body, 'calls'), [
    ['Day (UTC)', 'Front desk', 'Sales &lt;b&gt;', 'Total'], ['2026-05-01', '2', '0', '2'], ['2026-05-02', '0', '0', '0'], ['2026-05-03', '0', '1', '1']
  ])
  t.same(tableOf(page.body, 'sentiment'), [['Sentiment', 'Calls'], ['Positive', '1'], ['Neutral', '0'], ['Negative', '1'], ['Unknown', '1']])
  t.same(tableOf(page.body, 'costs'), [['Agent', 'Credits'], ['Front desk', '12'], ['Sales &lt;b&gt;', '4']])
  t.match(page.body, /<text class="label"[^>]*>Sales &lt;b&gt;<\/text>/, 'agent names are text inside the SVG')
  t.notMatch(page.body, '<b>')
  t.notMatch(page.body, 'Not mine', 'another account\'s calls are never counted')
  t.match(page.body, 'name="from" type="date" value="2026-05-01"', 'the form keeps the range')
  t.match(page.body, `<option value="${sales._id}">Sales &lt;b&gt;</option>`, 'the agent select lists the agents')
  t.match(page.body, '<a href="/analytics/calls.csv?from=2026-05-01&amp;to=2026-05-03" download>')
  t.match(page.body, '<a href="/analytics/costs.csv?from=2026-05-01&amp;to=2026-05-03" download>')

  const filtered = await browser.get(`/analytics?from=2026-05-01&to=2026-05-03&agent=${sales._id.toUpperCase()}`)
  t.equal(filtered.statusCode, 200)
  t.match(filtered.body, `<option value="${sales._id}" selected>`)
  t.same(tableOf(filtered.body, 'minutes').slice(1).map((row) => row[1]), ['0', '0', '2'])
  t.same(tableOf(filtered.body, 'calls')[0], ['Day (UTC)', 'Sales &lt;b&gt;', 'Total'])
  t.same(tableOf(filtered.body, 'sentiment').slice(1).map((row) => row[1]), ['0', '0', '0', '1'])
  t.same(tableOf(filtered.body, 'costs'), [['Agent', 'Credits'], ['Sales &lt;b&gt;', '4']])
  t.match(filtered.body, `/analytics/costs.csv?from=2026-05-01&amp;to=2026-05-03&amp;agent=${sales._id}`, 'the downloads keep the filter')

  const wider = await browser.get(`/analytics?from=2026-04-30&to=2026-05-01&agent=${desk._id}`)
  t.same(tableOf(wider.body, 'minutes').slice(1), [['2026-04-30', '10'], ['2026-05-01', '2']], '"to" includes its day')

  const long = await browser.get('/analytics?from=2025-05-01&to=2026-05-03')
  t.match(long.body, '<title id="minutes-title">Call minutes per month</title>', 'past a year: a column per month')
  const months = tableOf(long.body, 'minutes')
  t.equal(months.length, 14, 'a header and 13 months')
  t.same(months.slice(-2), [['2026-04', '10'], ['2026-05', '4']])
  t.same(tableOf(long.body, 'calls').slice(-1), [['2026-05', '2', '1', '3']])

  for (const query of ['?from=2026-04-01&to=2026-04-29', `?from=2026-05-01&to=2026-05-03&agent=${newId()}`]) {
    const empty = await browser.get(`/analytics${query}`)
    t.equal(empty.statusCode, 200, query)
    t.match(empty.body, '<p>No calls in this range.</p>', query)
    t.same(charts(empty.body), [], 'no empty charts')
  }
})

t.test('the default range is the last 30 days, today included', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Today' })
  const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10)
  await insertCalls(ctx.db, user.id, agent, [{ start_timestamp: new Date(), duration_ms: 60_000 }, { start_timestamp: new Date(`${day(30)}T12:00:00Z`) }])
  const page = await browser.get('/analytics')
  t.equal(page.statusCode, 200)
  t.match(page.body, `name="from" type="date" value="${day(29)}"`)
  t.match(page.body, `name="to" type="date" value="${day(0)}"`)
  const minutes = tableOf(page.body, 'minutes')
  t.equal(minutes.length, 31, 'a row a day')
  t.same(minutes[30], [day(0), '1'])
  t.match(page.body, '<dt>Calls</dt><dd>1</dd>', 'the call of 30 days ago is outside')
  t.match((await browser.get(`/analytics?to=${day(1)}`)).body, `name="from" type="date" value="${day(30)}"`, 'a "to" alone: the 30 days up to it')
})

t.test('bad ranges and filters are a 400 page with the reason and the form', async (t) => {
  const ctx = await setup(t)
  const { browser } = await signedInWithKey(ctx)
  for (const [query, message] of [
    ['?from=yesterday&to=2026-05-01', /“From” must be a calendar day written YYYY-MM-DD/],
    ['?from=2026-05-01&to=soon', /“To” must be a calendar day written YYYY-MM-DD/],
    ['?from=2026-02-30&to=2026-03-01', /“From” must be a calendar day/],
    // Days that match YYYY-MM-DD but are none; a “to” alone once made the default “from” of an invalid date (500).
    ['?to=2026-13-01', /“To” must be a calendar day/],
    ['?to=2026-12-32', /“To” must be a calendar day/],
    ['?to=2026-00-10', /“To” must be a calendar day/],
    ['?to=9999-99-99', /“To” must be a calendar day/],
    ['?from=2026-05-01&to=2026-02-29', /“To” must be a calendar day/],
    ['?from=0000-12-01&to=0001-01-02', /“From” must be a calendar day written YYYY-MM-DD, from 0001-01-01/],
    ['?from=2026-05-02&to=2026-05-01', /“To” must not be before “from”/],
    ['?from=2000-01-01&to=2026-05-01', new RegExp(`at most ${MAX_RANGE_DAYS} days`)],
    ['?from=2026-05-01&from=2026-05-02', /“from” was given more than once/],
    ['?agent=xyz', /not a valid agent id/],
    ['?from=%22%3E%3Cscript%3E', /must be a calendar day/]
  ] as const) {
    const res = await browser.get(`/analytics${query}`)
    t.equal(res.statusCode, 400, query)
    t.match(res.body, message, query)
    t.match(res.body, /<p class="notice error" role="alert">/)
    t.match(res.body, /<form method="get" action="\/analytics"/, 'the form is there to correct it')
    t.same(charts(res.body), [], 'no charts')
    t.notMatch(res.body, /<script|\.csv/i, 'no downloads either')
    for (const file of ['calls', 'costs']) {
      const csv = await browser.get(`/analytics/${file}.csv${query}`)
      t.equal(csv.statusCode, 400, `${file}.csv${query}`)
      t.match(csv.headers['content-type'], 'text/html')
      t.match(csv.body, message)
    }
  }
  t.equal((await browser.get(`/analytics?from=2000-01-01&to=${new Date(Date.UTC(2000, 0, MAX_RANGE_DAYS)).toISOString().slice(0, 10)}`)).statusCode, 200, 'the longest range the API allows')
})

t.test('CSV downloads: the API\'s exports for the session, with their headers and rows, one\'s own calls only', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const { sales } = await seed(ctx, user, account)

  const calls = await browser.get('/analytics/calls.csv?from=2026-05-01&to=2026-05-03')
  t.equal(calls.statusCode, 200)
  t.equal(calls.headers['content-type'], 'text/csv; charset=utf-8')
  t.equal(calls.headers['content-disposition'], 'attachment; filename="call-details_2026-05-01_2026-05-03.csv"')
  const lines = calls.body.trim().split('\n')
  t.match(lines[0], /^call_id,agent_id,agent_name,call_type,/)
  t.equal(lines.length, 4, 'a header and three calls')
  t.notMatch(calls.body, 'Not mine')
  const api = await ctx.app.inject({ url: '/v1/call/list/export?date_from=2026-05-01&date_to=2026-05-03', headers: account.headers })
  t.equal(calls.body, api.body, 'the same file as the API\'s export')

  const one = await browser.get(`/analytics/calls.csv?from=2026-05-01&to=2026-05-03&agent=${sales._id}`)
  t.equal(one.body.trim().split('\n').length, 2, 'the agent filter applies')
  t.match(one.body, 'Sales <b>')

  const costs = await browser.get('/analytics/costs.csv?from=2026-05-01&to=2026-05-03')
  t.equal(costs.statusCode, 200)
  t.equal(costs.headers['content-type'], 'text/csv; charset=utf-8')
  t.equal(costs.headers['content-disposition'], 'attachment; filename="costs-breakdown_2026-05-01_2026-05-03.csv"')
  const rows = costs.body.trim().split('\n')
  t.match(rows[0], /^agent_id,agent_name,total_calls,total_duration_minutes,/)
  t.match(rows[1], /^[0-9a-f]{24},Front desk,2,2,10,0,0,2,12,/)
  t.match(rows[2], `${sales._id},Sales <b>,1,2,0,4,0,0,4,`)
  t.match(rows[3], /^total,,3,4,,,,,16,/)
  const apiCosts = await ctx.app.inject({ url: '/v1/call/costs-breakdown/export?date_from=2026-05-01&date_to=2026-05-03&group_by=agent', headers: account.headers })
  t.equal(costs.body, apiCosts.body, 'the same file as the API\'s export grouped by agent')

  const empty = await browser.get('/analytics/costs.csv?from=2026-04-01&to=2026-04-02')
  t.same(empty.body.trim().split('\n').slice(1), ['total,,0,0,,,,,0,,,0'], 'an empty range: only the total')
})

t.test('signed out: every route leads to the sign-in page', async (t) => {
  const ctx = await setup(t)
  for (const url of ['/analytics', '/analytics?from=bad', '/analytics/calls.csv', '/analytics/costs.csv?from=2026-05-01&to=2026-05-03']) {
    const res = await ctx.app.inject({ method: 'GET', url })
    t.equal(res.statusCode, 303, url)
    t.equal(res.headers.location, `/login?next=${encodeURIComponent(url)}`, url)
  }
})
