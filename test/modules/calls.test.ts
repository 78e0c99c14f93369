import t from 'tap'
import { sql } from 'kysely'
import { poolOf } from '../../src/db/database.ts'
import { newId } from '../../src/db/ids.ts'
import { expireIdempotencyKeys } from '../../src/modules/calls/idempotency.ts'
import { createAccount, setup } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { poll } from '../helpers/poll.ts'

type Listed = { _id: string }
const ids = (body: Listed[]) => body.map((c) => c._id)

t.test('GET /v1/call/list: every filter alone and combined, day bounds, order, paging, list fields only', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const other = await createAccount(db)
  const customer = (await app.inject({ method: 'POST', url: '/v1/customer', headers: account.headers, payload: { customer_name: 'Acme' } })).json()._id
  const workspace = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: 'Sales' } })).json()._id
  const a1 = await createAgent(app, account, { agent_name: 'One' })
  const a2 = await createAgent(app, account, { agent_name: 'Two' })
  const [c1, c2] = await insertCalls(db, account.user.id, a1, [
    { start_timestamp: new Date('2026-05-01T00:00:00Z'), direction: 'inbound', call_type: 'phone', call_status: 'success', customer_id: customer },
    { start_timestamp: new Date('2026-05-01T23:59:59.999Z'), direction: 'outbound', call_type: 'web', call_from: null, call_to: null, call_status: 'failed', workspace_id: workspace }
  ])
  const [c3, c4] = await insertCalls(db, account.user.id, a2, [
    { start_timestamp: new Date('2026-05-02T00:00:00Z'), direction: 'outbound', call_type: 'phone', call_status: 'started', end_timestamp: null, duration_ms: null, customer_id: customer, workspace_id: workspace },
    { start_timestamp: new Date('2026-04-30T23:59:59.999Z'), direction: 'inbound', call_type: 'web', call_status: 'pending' }
  ])
  await insertCalls(db, other.user.id, await createAgent(app, other), [{ start_timestamp: new Date('2026-05-01T12:00:00Z') }])

  const list = async (query: string) => {
    const res = await app.inject({ method: 'GET', url: `/v1/call/list${query}`, headers: account.headers })
    t.equal(res.statusCode, 200, query)
    return ids(res.json())
  }
  t.same(await list(''), [c3, c2, c1, c4], 'newest first, only the account\'s')
  t.same(await list('?sort_order=asc'), [c4, c1, c2, c3])
  t.same(await list(`?agent_ids=${a1._id}`), [c2, c1])
  t.same(await list(`?agent_id=${a2._id}`), [c3, c4], 'legacy agent_id')
  t.same(await list(`?agent_ids=${a1._id},${a2._id}&sort_order=asc`), [c4, c1, c2, c3], 'comma list')
  t.same(await list(`?agent_ids=${a1._id}&agent_ids=${a2._id}&sort_order=asc`), [c4, c1, c2, c3], 'repeated key')
  t.same(await list('?direction=inbound'), [c1, c4])
  t.same(await list('?call_status=started,pending'), [c3, c4])
  t.same(await list('?call_status=failed&call_status=success'), [c2, c1])
  t.same(await list('?call_type=web'), [c2, c4])
  t.same(await list(`?customer_id=${customer}`), [c3, c1])
  t.same(await list(`?workspace_id=${workspace}`), [c3, c2])
  t.same(await list('?date_from=2026-05-01&date_to=2026-05-01'), [c2, c1], 'date_to includes its whole day')
  t.same(await list('?date_from=2026-05-01'), [c3, c2, c1])
  t.same(await list('?date_to=2026-04-30'), [c4])
  t.same(await list(`?agent_ids=${a1._id}&direction=outbound&call_type=web&workspace_id=${workspace}&date_from=2026-05-01&date_to=2026-05-02`), [c2], 'combined')
  t.same(await list(`?agent_ids=${a2._id}&call_status=success`), [])
  t.same(await list('?limit=2'), [c3, c2])
  t.same(await list('?limit=2&skip=2'), [c1, c4])

  const [first] = (await app.inject({ method: 'GET', url: '/v1/call/list?limit=1&sort_order=asc', headers: account.headers })).json()
  t.same(Object.keys(first).sort(), ['_id', 'agent_id', 'agent_name', 'agent_version', 'call_from', 'call_status', 'call_summary', 'call_to', 'call_type',
    'direction', 'disconnection_reason', 'end_timestamp', 'recording_url', 'sentiment', 'start_timestamp', 'task_achieved'])
  t.match(first, { _id: c4, agent_name: 'Two', start_timestamp: Date.parse('2026-04-30T23:59:59.999Z') })

  // The stored list view follows every change of the call (the runtime's and the analysis' updates).
  await db.updateTable('calls').set({ call_status: 'success', sentiment: 'negative', sentiment_explanation: null, call_summary: 'Called back "later"', end_timestamp: new Date('2026-05-02T00:01:00Z') })
    .where('id', '=', c3).execute()
  const [updated] = (await app.inject({ method: 'GET', url: '/v1/call/list?limit=1', headers: account.headers })).json()
  t.same(updated, {
    _id: c3,
    call_type: 'phone',
    agent_id: a2._id,
    agent_name: 'Two',
    call_status: 'success',
    call_from: '+14155550100',
    call_to: '+14155550199',
    direction: 'outbound',
    start_timestamp: Date.parse('2026-05-02T00:00:00Z'),
    end_timestamp: Date.parse('2026-05-02T00:01:00Z'),
    recording_url: null,
    disconnection_reason: null,
    sentiment: { sentiment: 'negative', explanation: '' },
    call_summary: 'Called back "later"',
    task_achieved: null,
    agent_version: null
  })
  t.same(await list('?call_status=started'), [], 'and so does the filter')

  for (const [query, message] of [
    ['?direction=sideways', /^query\.direction\.0 /],
    ['?call_status=done', /^query\.call_status\.0 /],
    ['?agent_ids=xyz', /^query\.agent_ids\.0 must be a 24-character hexadecimal id/],
    ['?limit=1001', /^query\.limit must be <= 1000/],
    ['?date_from=2026-05-02&date_to=2026-05-01', /date_to must not be before/],
    ['?date_from=yesterday', /^query\.date_from must match pattern/],
    ['?sort_order=random', /^query\.sort_order /]
  ] as const) {
    const res = await app.inject({ method: 'GET', url: `/v1/call/list${query}`, headers: account.headers })
    t.equal(res.statusCode, 400, query)
    t.match(res.json().message, message)
  }
  t.equal((await app.inject({ method: 'GET', url: `/v1/call/list?customer_id=${newId()}`, headers: account.headers })).statusCode, 404, "a customer not the account's")
})

t.test('GET /v1/call/list: agents and channels (merged index ranges) page exactly like one scan', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const agents = [await createAgent(app, account, { agent_name: 'A' }), await createAgent(app, account, { agent_name: 'B' }), await createAgent(app, account, { agent_name: 'C' })]
  const directions = ['inbound', 'outbound'] as const
  const types = ['phone', 'web'] as const
  const statuses = ['started', 'pending', 'success', 'failed'] as const
  const calls: Array<{ id: string, agent: string, direction: string, type: string, status: string, start: number }> = []
  for (let i = 0; i < 120; i++) {
    // Every kind for every agent, and starts that tie (seconds repeat), where the order falls back to the id.
    const seed = { direction: directions[i % 2], call_type: types[(i >> 1) % 2], call_status: statuses[(i >> 2) % 4], start_timestamp: new Date(Date.UTC(2026, 4, 1, 0, 0, i % 50)) }
    const agent = agents[i % 3]
    const [id] = await insertCalls(db, account.user.id, agent, [seed])
    calls.push({ id, agent: agent._id, direction: seed.direction, type: seed.call_type, status: seed.call_status, start: seed.start_timestamp.getTime() })
  }
  const byStart = (a: typeof calls[0], b: typeof calls[0]) => a.start - b.start || (a.id < b.id ? -1 : 1)
  const cases: Array<{ agents?: string[], direction?: string[], type?: string[], status?: string[], order?: 'asc', limit: number, skip?: number }> = [
    { direction: ['inbound'], limit: 100 },
    { status: ['success', 'failed'], type: ['web'], limit: 7, skip: 3 },
    { agents: [agents[0]._id, agents[1]._id], direction: ['outbound'], type: ['phone'], limit: 5, order: 'asc' },
    { agents: [agents[2]._id, agents[2]._id], status: ['pending'], limit: 100 },
    { agents: agents.map((a) => a._id), direction: ['inbound', 'outbound'], type: ['phone', 'web'], limit: 10, skip: 20 },
    { agents: [agents[0]._id, agents[1]._id], limit: 15, skip: 30, order: 'asc' },
    { direction: ['outbound'], type: ['web'], status: ['success', 'started'], limit: 100 },
    { agents: [agents[1]._id], direction: ['inbound'], status: ['started', 'pending', 'success', 'failed'], limit: 4, skip: 2, order: 'asc' },
    { type: ['web'], status: ['failed'], limit: 3, skip: 4 },
    { agents: [agents[0]._id, agents[2]._id], direction: ['inbound'], status: ['started', 'pending'], limit: 6, skip: 1, order: 'asc' }
  ]
  for (const c of cases) {
    const query = new URLSearchParams({ limit: String(c.limit), skip: String(c.skip ?? 0), sort_order: c.order ?? 'desc' })
    if (c.agents !== undefined) query.set('agent_ids', c.agents.join(','))
    if (c.direction !== undefined) query.set('direction', c.direction.join(','))
    if (c.type !== undefined) query.set('call_type', c.type.join(','))
    if (c.status !== undefined) query.set('call_status', c.status.join(','))
    const expected = calls.filter((call) => (c.agents === undefined || c.agents.includes(call.agent)) &&
      (c.direction === undefined || c.direction.includes(call.direction)) && (c.type === undefined || c.type.includes(call.type)) &&
      (c.status === undefined || c.status.includes(call.status))).sort(byStart)
    if (c.order === undefined) expected.reverse()
    const res = await app.inject({ method: 'GET', url: `/v1/call/list?${query}`, headers: account.headers })
    t.same(ids(res.json()), expected.slice(c.skip ?? 0, (c.skip ?? 0) + c.limit).map((call) => call.id), query.toString())
  }
})

t.test('GET /v1/call/:id answers the detail view; another account\'s call is 404', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const other = await createAccount(db)
  const agent = await createAgent(app, account, { agent_name: 'Detail' })
  const [id] = await insertCalls(db, account.user.id, agent, [{
    start_timestamp: new Date('2026-05-01T10:00:00Z'),
    duration_ms: 95_500,
    end_timestamp: new Date('2026-05-01T10:01:35.500Z'),
    sentiment: 'positive',
    sentiment_explanation: 'thanked the agent',
    call_summary: 'Booked a table.',
    task_achieved: true,
    disconnection_reason: 'user_hangup',
    recording_url: 'https://rec.example.com/1.mp3',
    transcription: [{ speaker: 'agent', content: 'Hello', timestamp: 1777629600000 }, { speaker: 'user', content: 'Hi', timestamp: 1777629601000 }],
    phone_call_credits: 20,
    text_message_credits: 1,
    token_usage: { 'gpt-4o-mini': { input: 900, output: 120 }, 'gpt-4o': { input: 50, output: 10 } },
    custom_analysis_data: JSON.stringify({ party_size: 4 })
  }])
  const res = await app.inject({ method: 'GET', url: `/v1/call/${id}`, headers: account.headers })
  t.equal(res.statusCode, 200)
  t.match(res.json(), {
    _id: id,
    agent_name: 'Detail',
    call_status: 'success',
    end_timestamp: Date.parse('2026-05-01T10:01:35.500Z'),
    sentiment: { sentiment: 'positive', explanation: 'thanked the agent' },
    call_summary: 'Booked a table.',
    task_achieved: true,
    duration_ms: 95_500,
    transcription: [{ speaker: 'agent', content: 'Hello', timestamp: 1777629600000 }, { speaker: 'user', content: 'Hi', timestamp: 1777629601000 }],
    call_credits_details: { phone_call_credits: 20, web_call_credits: 0, text_message_credits: 1, call_forwarding_credits: 0 },
    tokens: { input: 950, output: 130, total: 1080, by_model: { 'gpt-4o-mini': { input: 900, output: 120, total: 1020 }, 'gpt-4o': { input: 50, output: 10, total: 60 } } },
    custom_analysis_data: { party_size: 4 },
    simulated: false
  })
  t.equal((await app.inject({ method: 'GET', url: `/v1/call/${id}`, headers: other.headers })).statusCode, 404)
  t.equal((await app.inject({ method: 'GET', url: `/v1/call/${newId()}`, headers: account.headers })).statusCode, 404)
  t.equal((await app.inject({ method: 'GET', url: '/v1/call/not-an-id', headers: account.headers })).json().code, 'invalid_id')
})

t.test('metrics: general, daily, sentiment; kept exact through updates and deletes', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const other = await createAccount(db)
  const a1 = await createAgent(app, account)
  const a2 = await createAgent(app, account)
  const [, , , started] = await insertCalls(db, account.user.id, a1, [
    { start_timestamp: new Date('2026-06-01T00:00:00Z'), duration_ms: 30_000, sentiment: 'positive', direction: 'inbound' },
    { start_timestamp: new Date('2026-06-01T23:59:59Z'), duration_ms: 90_000, sentiment: 'negative' },
    { start_timestamp: new Date('2026-06-03T08:00:00Z'), duration_ms: 60_500, sentiment: 'positive', call_type: 'web' },
    { start_timestamp: new Date('2026-06-03T09:00:00Z'), duration_ms: null, end_timestamp: null, call_status: 'started' }
  ])
  await insertCalls(db, account.user.id, a2, [
    { start_timestamp: new Date('2026-06-02T12:00:00Z'), duration_ms: 10_000, sentiment: 'neutral' },
    { start_timestamp: new Date('2026-06-04T00:00:00Z'), duration_ms: 99_000, sentiment: 'neutral' } // outside the range
  ])
  await insertCalls(db, other.user.id, await createAgent(app, other), [{ start_timestamp: new Date('2026-06-02T12:00:00Z'), sentiment: 'positive' }])
  const range = 'date_from=2026-06-01&date_to=2026-06-03'
  const get = async (path: string) => {
    const res = await app.inject({ method: 'GET', url: `/v1/call/${path}`, headers: account.headers })
    t.equal(res.statusCode, 200, path)
    return res.json()
  }

  t.same(await get(`general-metrics?${range}`), { total_calls: 5, total_duration: 190.5, average_duration: 47.625, latency: null })
  t.same(await get(`general-metrics?${range}&agent_ids=${a1._id}`), { total_calls: 4, total_duration: 180.5, average_duration: 60.167, latency: null })
  t.same(await get(`general-metrics?${range}&direction=inbound`), { total_calls: 1, total_duration: 30, average_duration: 30, latency: null })
  t.same(await get(`general-metrics?${range}&call_type=web&agent_id=${a1._id}`), { total_calls: 1, total_duration: 60.5, average_duration: 60.5, latency: null })
  t.same(await get('general-metrics?date_from=2030-01-01&date_to=2030-01-31'), { total_calls: 0, total_duration: 0, average_duration: 0, latency: null })

  t.same(await get(`daily-metrics?${range}`), [
    { date: '2026-06-01', total_duration: 120, total_calls: 2 },
    { date: '2026-06-02', total_duration: 10, total_calls: 1 },
    { date: '2026-06-03', total_duration: 60.5, total_calls: 2 }
  ])
  t.same(await get(`daily-metrics?${range}&call_status=started`), [
    { date: '2026-06-01', total_duration: 0, total_calls: 0 },
    { date: '2026-06-02', total_duration: 0, total_calls: 0 },
    { date: '2026-06-03', total_duration: 0, total_calls: 1 }
  ])
  t.same(await get(`sentiment-stats?agent_id=${a1._id}&${range}`), { positive: 2, negative: 1, neutral: 0 })
  t.same(await get(`sentiment-stats?agent_id=${a2._id}&date_from=2026-06-01&date_to=2026-06-04`), { positive: 0, negative: 0, neutral: 2 })

  // The rollup follows the call through its end, its analysis and its deletion.
  await db.updateTable('calls').set({ call_status: 'success', duration_ms: 20_000, end_timestamp: new Date('2026-06-03T09:00:20Z'), sentiment: 'negative' }).where('id', '=', started).execute()
  t.same(await get(`general-metrics?${range}`), { total_calls: 5, total_duration: 210.5, average_duration: 42.1, latency: null })
  t.same(await get(`sentiment-stats?agent_id=${a1._id}&${range}`), { positive: 2, negative: 2, neutral: 0 })
  await db.deleteFrom('calls').where('id', '=', started).execute()
  t.same(await get(`general-metrics?${range}`), { total_calls: 4, total_duration: 190.5, average_duration: 47.625, latency: null })

  for (const path of ['general-metrics', 'daily-metrics', 'costs-breakdown', 'list/export', 'costs-breakdown/export']) {
    for (const query of ['date_to=2026-06-03', 'date_from=2026-06-01', 'date_from=2026-06-04&date_to=2026-06-03', 'date_from=2026-13-01&date_to=2026-13-02']) {
      const res = await app.inject({ method: 'GET', url: `/v1/call/${path}?${query}`, headers: account.headers })
      t.equal(res.statusCode, 400, `${path}?${query}`)
    }
  }
  const noAgent = await app.inject({ method: 'GET', url: `/v1/call/sentiment-stats?${range}`, headers: account.headers })
  t.match(noAgent.json(), { statusCode: 400, message: /query\.agent_id is required/ })

  // A workspace or customer filter: the account's own without calls answers empty; another's or none is 404.
  const empty = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: 'Empty' } })).json()._id
  const theirs = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers: other.headers, payload: { workspace_name: 'Theirs' } })).json()._id
  t.same(await get(`general-metrics?${range}&workspace_id=${empty}`), { total_calls: 0, total_duration: 0, average_duration: 0, latency: null })
  t.same((await get(`daily-metrics?${range}&workspace_id=${empty}`)).map((d: { total_calls: number }) => d.total_calls), [0, 0, 0])
  t.same((await get(`costs-breakdown?${range}&workspace_id=${empty}`)).breakdown, [])
  t.same(await get(`list?workspace_id=${empty}`), [])
  for (const path of ['list/export', 'costs-breakdown/export']) {
    const res = await app.inject({ method: 'GET', url: `/v1/call/${path}?${range}&workspace_id=${empty}`, headers: account.headers })
    t.equal(res.statusCode, 200, path)
  }
  for (const path of ['general-metrics', 'daily-metrics', 'costs-breakdown', 'list', 'list/export', 'costs-breakdown/export']) {
    for (const owner of [`workspace_id=${theirs}`, `customer_id=${newId()}`]) {
      const res = await app.inject({ method: 'GET', url: `/v1/call/${path}?${range}&${owner}`, headers: account.headers })
      t.equal(res.statusCode, 404, `${path}?${owner}`)
    }
  }
})

t.test('costs breakdown by user, agent and workspace, with its CSV export', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const workspace = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: '=Sales' } })).json()._id
  const a1 = await createAgent(app, account, { agent_name: 'Front desk' }, `?workspace_id=${workspace}`)
  const a2 = await createAgent(app, account, { agent_name: '@Reminder' })
  await insertCalls(db, account.user.id, a1, [
    { start_timestamp: new Date('2026-07-01T10:00:00Z'), duration_ms: 120_000, phone_call_credits: 20, text_message_credits: 2, workspace_id: workspace, token_usage: { m: { input: 100, output: 50 } } },
    { start_timestamp: new Date('2026-07-02T10:00:00Z'), duration_ms: 60_000, phone_call_credits: 10, call_forwarding_credits: 5, workspace_id: workspace, token_usage: { m: { input: 10, output: 5 } } }
  ])
  await insertCalls(db, account.user.id, a2, [
    { start_timestamp: new Date('2026-07-02T11:00:00Z'), duration_ms: 30_000, call_type: 'web', web_call_credits: 3 }
  ])
  // A deleted agent keeps its calls and its name in the report.
  await db.deleteFrom('agents').where('id', '=', a2._id).execute()

  const get = async (query: string) => (await app.inject({ method: 'GET', url: `/v1/call/costs-breakdown?date_from=2026-07-01&date_to=2026-07-31${query}`, headers: account.headers })).json()
  const byUser = await get('')
  t.same(byUser.breakdown, [{
    user_id: account.user.id,
    total_calls: 3,
    total_duration_minutes: 3.5,
    credits: { phone_call: 30, web_call: 3, text_message: 2, call_forwarding: 5, total: 40 },
    tokens: { input: 110, output: 55, total: 165 }
  }])
  t.same(byUser.totals, { total_calls: 3, total_duration_minutes: 3.5, total_credits: 40, total_tokens: 165 })
  t.same(byUser.period, { from: Date.parse('2026-07-01T00:00:00Z'), to: Date.parse('2026-08-01T00:00:00Z') - 1 })

  const byAgent = await get('&group_by=agent')
  t.same(byAgent.breakdown.map((b: { agent_id: string, agent_name: string, credits: { total: number } }) => [b.agent_id, b.agent_name, b.credits.total]),
    [[a1._id, 'Front desk', 37], [a2._id, '@Reminder', 3]])
  const byWorkspace = await get('&group_by=workspace')
  t.same(byWorkspace.breakdown.map((b: { workspace_id: string | null, workspace_name: string | null, total_calls: number }) => [b.workspace_id, b.workspace_name, b.total_calls]),
    [[workspace, '=Sales', 2], [null, null, 1]])
  t.same((await get(`&workspace_id=${workspace}`)).totals.total_calls, 2)
  t.equal((await app.inject({ method: 'GET', url: '/v1/call/costs-breakdown?date_from=2026-07-01&date_to=2026-07-31&group_by=team', headers: account.headers })).statusCode, 400)

  const csv = await app.inject({ method: 'GET', url: '/v1/call/costs-breakdown/export?date_from=2026-07-01&date_to=2026-07-31&group_by=agent', headers: account.headers })
  t.equal(csv.statusCode, 200)
  t.match(csv.headers['content-type'], /^text\/csv/)
  t.equal(csv.headers['content-disposition'], 'attachment; filename="costs-breakdown_2026-07-01_2026-07-31.csv"')
  t.same(csv.body.split('\n'), [
    'agent_id,agent_name,total_calls,total_duration_minutes,phone_call_credits,web_call_credits,text_message_credits,call_forwarding_credits,total_credits,input_tokens,output_tokens,total_tokens',
    `${a1._id},Front desk,2,3,30,0,2,5,37,110,55,165`,
    `${a2._id},'@Reminder,1,0.5,0,3,0,0,3,0,0,0`,
    'total,,3,3.5,,,,,40,,,165'
  ])
  const wsCsv = await app.inject({ method: 'GET', url: '/v1/call/costs-breakdown/export?date_from=2026-07-01&date_to=2026-07-31&group_by=workspace', headers: account.headers })
  t.equal(wsCsv.body.split('\n')[1], `${workspace},'=Sales,2,3,30,0,2,5,37,110,55,165`, 'a formula-like name is escaped')
})

t.test('GET /v1/call/list/export streams one row per call and model, escaped, with the filters', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const other = await createAccount(db)
  const agent = await createAgent(app, account, { agent_name: '=HYPERLINK("x")' })
  const [withUsage, without] = await insertCalls(db, account.user.id, agent, [
    { start_timestamp: new Date('2026-08-01T10:00:00Z'), duration_ms: 61_500, end_timestamp: new Date('2026-08-01T10:01:01.500Z'), call_from: '+4930123456', disconnection_reason: '-1 hangup, "quoted"', sentiment: 'positive', task_achieved: true, phone_call_credits: 20, token_usage: { 'gpt-4o-mini': { input: 10, output: 5 }, 'gpt-4o': { input: 1, output: 2 } } },
    { start_timestamp: new Date('2026-08-02T10:00:00Z'), call_type: 'web', direction: 'inbound', call_status: 'failed', call_from: null, call_to: null, duration_ms: null, end_timestamp: null }
  ])
  await insertCalls(db, account.user.id, agent, [{ start_timestamp: new Date('2026-08-03T00:00:00Z') }]) // the day after
  await insertCalls(db, other.user.id, await createAgent(app, other), [{ start_timestamp: new Date('2026-08-01T11:00:00Z') }])
  const path = [{ id: 'greet', name: 'Greeting', type: 'conversation', at: 1 }, { id: 'book', name: 'Book', type: 'conversation', at: 2 }]
  await db.updateTable('calls').set({ workflow: JSON.stringify({ step: 'book', path, variables: {}, after: [] }) }).where('id', '=', withUsage).execute()

  const res = await app.inject({ method: 'GET', url: '/v1/call/list/export?date_from=2026-08-01&date_to=2026-08-02', headers: account.headers })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^text\/csv; charset=utf-8/)
  t.equal(res.headers['content-disposition'], 'attachment; filename="call-details_2026-08-01_2026-08-02.csv"')
  const lines = res.body.split('\n')
  t.equal(lines[0], 'call_id,agent_id,agent_name,call_type,direction,call_status,call_from,call_to,start_time,end_time,duration_seconds,disconnection_reason,sentiment,task_achieved,phone_call_credits,web_call_credits,text_message_credits,call_forwarding_credits,model,input_tokens,output_tokens,total_tokens,workflow_path')
  t.same(lines.slice(1), [
    `${withUsage},${agent._id},"'=HYPERLINK(""x"")",phone,outbound,success,'+4930123456,'+14155550199,2026-08-01T10:00:00.000Z,2026-08-01T10:01:01.500Z,61.5,"'-1 hangup, ""quoted""",positive,true,20,0,0,0,gpt-4o,1,2,3,greet > book`,
    `${withUsage},${agent._id},"'=HYPERLINK(""x"")",phone,outbound,success,'+4930123456,'+14155550199,2026-08-01T10:00:00.000Z,2026-08-01T10:01:01.500Z,61.5,"'-1 hangup, ""quoted""",positive,true,20,0,0,0,gpt-4o-mini,10,5,15,greet > book`,
    `${without},${agent._id},"'=HYPERLINK(""x"")",web,inbound,failed,,,2026-08-02T10:00:00.000Z,,,,,,0,0,0,0,,,,,`
  ])
  const filtered = await app.inject({ method: 'GET', url: '/v1/call/list/export?date_from=2026-08-01&date_to=2026-08-02&call_type=web', headers: account.headers })
  t.equal(filtered.body.split('\n').length, 2)
  const empty = await app.inject({ method: 'GET', url: '/v1/call/list/export?date_from=2020-01-01&date_to=2020-01-01', headers: account.headers })
  t.equal(empty.body.split('\n').length, 1, 'only the header row')
})

t.test('an export the client leaves mid-download gives its database connection back', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const agent = await createAgent(app, account)
  // Enough bytes (~12 MB) that the server is still reading rows when the client goes; an hour apart, since
  // one statement adding thousands of calls to one day's rollup row is slow.
  await sql`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, start_timestamp, disconnection_reason)
    SELECT lpad(to_hex(i), 24, '0'), ${account.user.id}, ${agent._id}, 'Agent', 'phone', 'inbound', 'success',
      timestamptz '2026-01-01' + i * interval '1 hour', repeat('x', 2000)
    FROM generate_series(1, 6000) i`.execute(db)
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  const exportUrl = `${url}/v1/call/list/export?date_from=2026-01-01&date_to=2026-12-31`
  for (let i = 0; i < 8; i++) { // more than the pool's 5 connections
    const aborter = new AbortController()
    let res = await fetch(exportUrl, { headers: account.headers, signal: aborter.signal })
    // The account's export slots (EXPORTS_PER_ACCOUNT) come back as the aborted downloads wind down.
    while (res.status === 429) res = await fetch(exportUrl, { headers: account.headers, signal: aborter.signal })
    t.equal(res.status, 200)
    await res.body!.getReader().read()
    aborter.abort()
  }
  const pool = poolOf(db)
  await poll(() => pool.totalCount - pool.idleCount, (busy) => busy === 0, { timeoutMs: 5000, intervalMs: 50 })
  t.equal(pool.totalCount - pool.idleCount, 0, 'no connection left checked out')
  const whole = await (await fetch(exportUrl, { headers: account.headers })).text()
  t.equal(whole.split('\n').length, 1 + 6000, 'a whole export still works')
})

t.test('POST /v1/call/make-phone-call and make-web-call', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const other = await createAccount(db)
  const agent = await createAgent(app, account, { agent_name: 'Caller' })
  const bought = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: '+14155550123' } })
  t.equal(bought.statusCode, 201, bought.body)

  const body = { agent_id: agent._id, from_number: '+14155550123', to_number: '+4930123456', custom_data: { crm_id: 7 }, dynamic_context: { customer_name: 'Ada' } }
  const res = await app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { ...body, extra: true } })
  t.equal(res.statusCode, 201)
  const call = res.json()
  t.same(Object.keys(call).sort(), ['_id', 'agent_id', 'call_from', 'call_status', 'call_to', 'call_type', 'direction', 'start_timestamp'])
  t.match(call, { call_type: 'phone', agent_id: agent._id, call_status: 'started', call_from: '+14155550123', call_to: '+4930123456', direction: 'outbound', start_timestamp: Number })
  const detail = (await app.inject({ method: 'GET', url: `/v1/call/${call._id}`, headers: account.headers })).json()
  t.match(detail, { agent_name: 'Caller', custom_data: { crm_id: 7 }, dynamic_context: { customer_name: 'Ada' } })

  const web = await app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id } })
  t.equal(web.statusCode, 201)
  t.same(Object.keys(web.json()).sort(), ['_id', 'access_token', 'access_token_expires_at', 'agent_id', 'call_status', 'call_type', 'start_timestamp'])
  t.match(web.json(), { call_type: 'web', call_status: 'started', access_token: /^wct_[0-9A-Za-z]{40}$/ })
  t.ok(web.json().access_token_expires_at > Date.now())
  const stored = await db.selectFrom('calls').select(['access_token_hash']).where('id', '=', web.json()._id).executeTakeFirstOrThrow()
  t.notOk(stored.access_token_hash?.includes(web.json().access_token), 'only a hash of the token is kept')

  const cases: Array<[string, object, number, RegExp]> = [
    ['make-phone-call', { ...body, from_number: '+14155550124' }, 404, /phone number \+14155550124/],
    ['make-phone-call', { ...body, to_number: '0301234' }, 400, /^body\.to_number must be an E\.164/],
    ['make-phone-call', { ...body, from_number: undefined }, 400, /^body\.from_number is required/],
    ['make-phone-call', { ...body, agent_id: newId() }, 404, /^agent/],
    ['make-phone-call', { ...body, custom_data: 'text' }, 400, /^body\.custom_data must be object/],
    ['make-web-call', { agent_id: 'nope' }, 400, /^body\.agent_id must be a 24-character hexadecimal id/],
    ['make-web-call', { agent_id: agent._id, dynamic_context: [1] }, 400, /^body\.dynamic_context must be object/]
  ]
  for (const [path, payload, status, message] of cases) {
    const bad = await app.inject({ method: 'POST', url: `/v1/call/${path}`, headers: account.headers, payload })
    t.equal(bad.statusCode, status, `${path} ${JSON.stringify(payload)}`)
    t.match(bad.json().message, message)
  }
  t.equal((await app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: other.headers, payload: { agent_id: agent._id } })).statusCode, 404, "another account's agent")
  await app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { status: 'inactive' } })
  const inactive = await app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id } })
  t.equal(inactive.statusCode, 409)
  t.equal(inactive.json().code, 'agent_inactive')
  const count = await db.selectFrom('calls').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()
  t.equal(count.n, 2, 'refused requests store no call')
})

t.test('Idempotency-Key on make-web-call: the stored answer holds no token; a retry gets a fresh one while the call runs', async (t) => {
  const { app, db } = await setup(t, { CALL_RUNTIME: 'external' })
  const account = await createAccount(db)
  const agent = await createAgent(app, account)
  const headers = { ...account.headers, 'idempotency-key': 'web-1' }
  const join = async (token: string) => (await app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: token } })).statusCode

  const first = await app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers, payload: { agent_id: agent._id } })
  t.equal(first.statusCode, 201)
  const created = first.json()
  t.match(created, { access_token: /^wct_/, access_token_expires_at: Number })
  const stored = await db.selectFrom('idempotency_keys').select('response').where('key', '=', 'web-1').executeTakeFirstOrThrow()
  t.notOk(JSON.stringify(stored.response).includes(created.access_token), 'the stored answer has no token')
  t.same(Object.keys(stored.response as object).sort(), ['_id', 'agent_id', 'call_status', 'call_type', 'start_timestamp'])

  const retry = await app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers, payload: { agent_id: agent._id } })
  t.equal(retry.statusCode, 201)
  const again = retry.json()
  t.same({ ...again, access_token: undefined, access_token_expires_at: undefined }, { ...created, access_token: undefined, access_token_expires_at: undefined }, 'the same call')
  t.not(again.access_token, created.access_token, 'with a fresh token')
  t.equal(await join(again.access_token), 200)
  t.equal(await join(created.access_token), 403, 'the earlier token stops working: one token per call')

  await app.inject({ method: 'POST', url: `/v1/runtime/calls/${created._id}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup' } })
  const ended = await app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers, payload: { agent_id: agent._id } })
  t.equal(ended.statusCode, 409)
  t.equal(ended.json().code, 'web_call_ended')
  t.equal((await db.selectFrom('calls').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n, 1, 'no second call')
})

t.test('Idempotency-Key: a retry answers the first call; another body with the key is 422', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const other = await createAccount(db)
  const agent = await createAgent(app, account)
  await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: '+14155550123' } })
  const body = { agent_id: agent._id, from_number: '+14155550123', to_number: '+4930123456', custom_data: { a: 1, b: [1, 2] } }
  const headers = { ...account.headers, 'idempotency-key': 'order-42' }

  const results = await Promise.all([1, 2, 3].map(() => app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers, payload: body })))
  t.same(results.map((r) => r.statusCode), [201, 201, 201])
  t.equal(new Set(results.map((r) => r.json()._id)).size, 1, 'concurrent retries answer one call')
  const reordered = await app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers, payload: { custom_data: { b: [1, 2], a: 1 }, to_number: body.to_number, from_number: body.from_number, agent_id: body.agent_id } })
  t.same(reordered.json(), results[0].json(), 'the same body in another key order is the same request')
  const changed = await app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers, payload: { ...body, to_number: '+4930999999' } })
  t.equal(changed.statusCode, 422)
  t.equal(changed.json().code, 'idempotency_key_reused')
  const webWithSameKey = await app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers, payload: { agent_id: agent._id } })
  t.equal(webWithSameKey.statusCode, 422, 'a key names one request, whatever the route')

  const otherAgent = await createAgent(app, other)
  const otherAccount = await app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: { ...other.headers, 'idempotency-key': 'order-42' }, payload: { agent_id: otherAgent._id } })
  t.equal(otherAccount.statusCode, 201, 'keys are per account')

  // After 24 hours the key is forgotten and places a new call.
  await db.updateTable('idempotency_keys').set({ created_at: new Date(Date.now() - 25 * 3_600_000) } as never).where('key', '=', 'order-42').where('user_id', '=', account.user.id).execute()
  const later = await app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers, payload: { ...body, to_number: '+4930999999' } })
  t.equal(later.statusCode, 201)
  t.not(later.json()._id, results[0].json()._id)
  const calls = await db.selectFrom('calls').select((eb) => eb.fn.countAll<number>().as('n')).where('user_id', '=', account.user.id).executeTakeFirstOrThrow()
  t.equal(calls.n, 2)

  // Housekeeping forgets keys past their 24 hours.
  await db.updateTable('idempotency_keys').set({ created_at: new Date(Date.now() - 25 * 3_600_000) } as never).where('user_id', '=', other.user.id).execute()
  t.equal(await expireIdempotencyKeys(db), 1)
  t.same((await db.selectFrom('idempotency_keys').select('user_id').execute()).map((r) => r.user_id), [account.user.id])
})

t.test('sentiment-stats: an agent the account never had is 404; a deleted one still counts', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const other = await createAccount(db)
  const theirs = await createAgent(app, other)
  const idle = await createAgent(app, account)
  const gone = await createAgent(app, account)
  await insertCalls(db, account.user.id, gone, [{ start_timestamp: new Date('2026-06-02T12:00:00Z'), sentiment: 'positive' }])
  await app.inject({ method: 'DELETE', url: `/v1/agent/${gone._id}`, headers: account.headers })
  const stats = (agentId: string, range = 'date_from=2026-06-01&date_to=2026-06-03') =>
    app.inject({ method: 'GET', url: `/v1/call/sentiment-stats?agent_id=${agentId}&${range}`, headers: account.headers })
  for (const agentId of [theirs._id, newId()]) {
    const res = await stats(agentId)
    t.equal(res.statusCode, 404)
    t.match(res.json(), { code: 'not_found', message: `agent ${agentId} not found` })
  }
  t.same((await stats(idle._id)).json(), { positive: 0, negative: 0, neutral: 0 }, 'an agent without calls')
  t.same((await stats(gone._id)).json(), { positive: 1, negative: 0, neutral: 0 }, 'a deleted agent')
  t.same((await stats(gone._id, 'date_from=2030-01-01&date_to=2030-01-02')).json(), { positive: 0, negative: 0, neutral: 0 }, 'a deleted agent, no calls in the range')
})
