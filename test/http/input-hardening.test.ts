import t from 'tap'
import { sql, type RawBuilder } from 'kysely'
import { createAccount, setup } from '../helpers/app.ts'
import { addAction, createAgent } from '../helpers/calls.ts'
import { upload } from '../helpers/documents.ts'

// Client input that reached PostgreSQL as something it cannot store (and answered 500) is refused with a
// 400 that names the field, by one mechanism per kind of input.

const RANGE = 'date_from=2026-06-01&date_to=2026-06-03'

t.test('an empty value of any list filter is a 400 naming the filter, not an empty IN ()', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  const cases = [
    ['/v1/call/list?call_status=', 'call_status'],
    ['/v1/call/list?direction=', 'direction'],
    ['/v1/call/list?call_type=', 'call_type'],
    ['/v1/call/list?agent_ids=', 'agent_ids'],
    ['/v1/call/list?call_status=,', 'call_status'],
    [`/v1/call/general-metrics?${RANGE}&call_status=`, 'call_status'],
    [`/v1/call/daily-metrics?${RANGE}&direction=`, 'direction'],
    [`/v1/call/list/export?${RANGE}&call_type=`, 'call_type'],
    ['/v1/voice/list?provider=', 'provider'],
    ['/v1/voice/list?gender=', 'gender']
  ]
  for (const [url, field] of cases) {
    const res = await app.inject({ method: 'GET', url, headers })
    t.equal(res.statusCode, 400, url)
    t.match(res.json(), { code: 'validation_error', message: new RegExp(`^query\\.${field} `) }, url)
  }
  t.equal((await app.inject({ method: 'GET', url: '/v1/call/list?call_status=started,', headers })).statusCode, 200, 'an empty item beside others is ignored')
})

t.test('NUL characters and lone surrogates in any string are a 400 naming the field', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const { headers } = account
  const agent = await createAgent(app, account)
  const cases: Array<{ method: 'GET' | 'POST' | 'PATCH', url: string, payload?: unknown, field: string, key?: boolean }> = [
    { method: 'POST', url: '/v1/api-keys', payload: { name: 'a\u0000b' }, field: 'body.name' },
    { method: 'POST', url: '/v1/agent', payload: { agent_name: 'x\ud800y', llm_id: '65a0f0000000000000000001' }, field: 'body.agent_name' },
    { method: 'POST', url: '/v1/llm', payload: { general_prompt: 'be kind \udc00' }, field: 'body.general_prompt' },
    { method: 'POST', url: '/v1/call/make-web-call', payload: { agent_id: agent._id, custom_data: { 'k\u0000': 1 } }, field: 'body.custom_data', key: true },
    { method: 'POST', url: '/v1/call/make-web-call', payload: { agent_id: agent._id, custom_data: { deep: [{ v: 'x\ud83d' }] } }, field: 'body.custom_data.deep.0.v' },
    { method: 'POST', url: `/v1/agent/${agent._id}/actions`, payload: { action_type: 'api_call', settings: { name: 'Sync', url: 'https://example.com/a', headers: { 'x-token': 'a\u0000' } } }, field: 'body.settings.headers.x-token' },
    { method: 'POST', url: '/v1/runtime/calls/65a0f0000000000000000001/end', payload: { outcome: 'completed', disconnection_reason: 'x', transcription: [{ speaker: 'user', content: 'hi\u0000', timestamp: 1 }] }, field: 'body.transcription.0.content' },
    { method: 'GET', url: '/v1/voice/list?provider=a%00b', field: 'query.provider' },
    { method: 'GET', url: '/v1/voice/list?language=de%00', field: 'query.language' }
  ]
  for (const c of cases) {
    const res = await app.inject({ method: c.method, url: c.url, headers, payload: c.payload as never })
    t.equal(res.statusCode, 400, `${c.method} ${c.url} ${c.field}`)
    const problem = c.key === true ? 'has a property name with' : 'must not contain'
    t.match(res.json(), { code: 'invalid_text', message: `${c.field} ${problem} NUL characters or unpaired surrogates` }, c.field)
  }
  t.equal((await app.inject({ method: 'POST', url: '/v1/llm', headers, payload: { general_prompt: 'emoji 😀 are pairs' } })).statusCode, 201, 'paired surrogates are fine')

  const form = await upload(app, '/v1/knowledge-base', headers, { name: 'Docs\u0000', description: 'd' }, [{ name: 'a.txt', content: Buffer.from('hello world'), type: 'text/plain' }])
  t.equal(form.statusCode, 400, 'multipart field')
  t.match(form.json(), { code: 'invalid_text', message: /^body\.name must not contain NUL/ })
})

t.test('JSON nested deeper than 64 levels is a 400', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const agent = await createAgent(app, account)
  const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`
  const send = (depth: number) => app.inject({
    method: 'POST', url: '/v1/call/make-web-call', headers: { ...account.headers, 'content-type': 'application/json' },
    payload: `{"agent_id":"${agent._id}","custom_data":${nested(depth)}}`
  })
  for (const depth of [100, 5000, 100_000]) {
    const res = await send(depth)
    t.equal(res.statusCode, 400, `${depth} levels`)
    t.same(res.json(), { statusCode: 400, error: 'Bad Request', code: 'json_too_deep', message: 'body.custom_data nests deeper than 64 levels' })
  }
  const arrays = await app.inject({ method: 'POST', url: '/v1/api-keys', headers: { ...account.headers, 'content-type': 'application/json' }, payload: `{"name":${'['.repeat(10_000)}${']'.repeat(10_000)}}` })
  t.equal(arrays.statusCode, 400)
  t.equal(arrays.json().message, 'body.name nests deeper than 64 levels')
  t.equal((await send(60)).statusCode, 201, '60 levels are fine')
})

t.test('uppercase ids are lowercased once, in validation: stored and found as lowercase', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const { headers } = account
  const llm = (await app.inject({ method: 'POST', url: '/v1/llm', headers, payload: {} })).json()
  const created = await app.inject({ method: 'POST', url: '/v1/agent', headers, payload: { agent_name: 'Upper', llm_id: llm._id.toUpperCase() } })
  t.equal(created.statusCode, 201, created.body)
  t.equal(created.json().llm_id, llm._id)
  const agentId = created.json()._id as string
  const bought = (await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+14155550123' } })).json()
  const patched = await app.inject({ method: 'PATCH', url: `/v1/phone-number/${bought._id.toUpperCase()}`, headers, payload: { inbound_agent_id: agentId.toUpperCase() } })
  t.equal(patched.statusCode, 200, patched.body)
  const row = await db.selectFrom('phone_numbers').select('inbound_agent_id').where('id', '=', bought._id).executeTakeFirstOrThrow()
  t.equal(row.inbound_agent_id, agentId)
  const call = await app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers, payload: { agent_id: agentId.toUpperCase() } })
  t.equal(call.statusCode, 201)
  t.equal(call.json().agent_id, agentId)
  const listed = await app.inject({ method: 'GET', url: `/v1/call/list?agent_ids=${agentId.toUpperCase()}`, headers })
  t.same(listed.json().map((c: { _id: string }) => c._id), [call.json()._id])
})

t.test('offsets, dates and ranges outside what PostgreSQL stores are 400', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  for (const url of ['/v1/webhook-deliveries?offset=1e20', '/v1/webhook-deliveries?offset=9223372036854775808',
    '/v1/call/general-metrics?date_from=0000-01-01&date_to=0000-01-02', '/v1/call/daily-metrics?date_from=0000-12-31&date_to=0001-01-01',
    '/v1/call/list?date_from=0000-01-01']) {
    const res = await app.inject({ method: 'GET', url, headers })
    t.equal(res.statusCode, 400, url)
    t.match(res.json(), { message: /^query\.(offset|date_from)/ }, url)
  }
  t.same((await app.inject({ method: 'GET', url: `/v1/webhook-deliveries?offset=${Number.MAX_SAFE_INTEGER}`, headers })).json().data, [])
  t.equal((await app.inject({ method: 'GET', url: '/v1/call/general-metrics?date_from=0001-01-01&date_to=0001-01-02', headers })).statusCode, 200)
})

t.test('an action whose URL renders invalid answers 422 when tested', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const agent = await createAgent(app, account)
  const action = await addAction(app, account, agent._id, { url: 'https://{{call_summary}}.example.com/hook' })
  const res = await app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions/${action._id}/test`, headers: account.headers })
  t.equal(res.statusCode, 422)
  t.match(res.json(), { code: 'invalid_action_url', message: /url renders to an invalid URL/ })
})

t.test('database errors that input causes are mapped by code to 4xx, without PostgreSQL\'s text', async (t) => {
  const { app, db } = await setup(t)
  await createAccount(db)
  // Statements that fail in PostgreSQL exactly as unvalidated input would.
  const statements: Record<string, { query: RawBuilder<unknown>, status: number, code: string }> = {
    unique: { query: sql`INSERT INTO users (id, email) SELECT id, email FROM users LIMIT 1`, status: 409, code: 'conflict' },
    foreign_key: { query: sql`INSERT INTO llm_configs (id, user_id, model) VALUES ('65a0f0000000000000000009', '65a0f0000000000000000009', 'm')`, status: 409, code: 'conflict' },
    check: { query: sql`INSERT INTO llm_configs (id, user_id, model) VALUES ('65A0F0000000000000000009', '65a0f0000000000000000009', 'm')`, status: 400, code: 'invalid_value' },
    text: { query: sql`SELECT ${'12a'}::int`, status: 400, code: 'invalid_value' },
    nul: { query: sql`SELECT ${'a\u0000'}::text`, status: 400, code: 'invalid_text' },
    json_nul: { query: sql`SELECT ${'"\\u0000"'}::jsonb`, status: 400, code: 'invalid_text' },
    number: { query: sql`SELECT ${'2147483648'}::int`, status: 400, code: 'out_of_range' },
    date: { query: sql`SELECT ${'0000-01-01'}::date`, status: 400, code: 'out_of_range' }
  }
  app.get('/pg-error/:name', async (request) => {
    await statements[(request.params as { name: string }).name].query.execute(db)
    return {}
  })
  for (const [name, expected] of Object.entries(statements)) {
    const res = await app.inject({ method: 'GET', url: `/pg-error/${name}` })
    t.equal(res.statusCode, expected.status, name)
    t.equal(res.json().code, expected.code, name)
    t.notMatch(res.json().message, /users|llm_configs|constraint|Key \(|syntax|0000|2147483648|unicode|byte sequence/i, `${name}: ${res.json().message}`)
  }
})

t.test('days that match YYYY-MM-DD but are none are a 400 naming the field on every date filter', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const { headers } = account
  const agent = await createAgent(app, account)
  const routes = ['/v1/call/list', '/v1/call/general-metrics', '/v1/call/daily-metrics', `/v1/call/sentiment-stats?agent_id=${agent._id}&`,
    '/v1/call/costs-breakdown', '/v1/call/list/export', '/v1/call/costs-breakdown/export', `/v1/agent/${agent._id}/call-stats`]
  for (const route of routes) {
    const base = route.includes('?') ? route : `${route}?`
    for (const bad of ['2026-13-01', '2026-12-32', '2026-00-10', '9999-99-99', '2026-02-29']) {
      for (const [field, query] of [['date_from', `date_from=${bad}&date_to=2026-12-31`], ['date_to', `date_from=2026-01-01&date_to=${bad}`]]) {
        const url = `${base}${query}`
        const res = await app.inject({ method: 'GET', url, headers })
        t.equal(res.statusCode, 400, url)
        t.match(res.json(), { code: 'bad_request', message: `query.${field} ${bad} is not a calendar date from 0001-01-01` }, url)
      }
    }
  }
  t.equal((await app.inject({ method: 'GET', url: '/v1/call/general-metrics?date_from=2028-02-29&date_to=2028-02-29', headers })).statusCode, 200, 'a leap day is one')
})

t.test('a query parameter that takes one value, given twice, is a 4xx on every route, the web-call stream included', async (t) => {
  const { app, db } = await setup(t, { CALL_RUNTIME: 'voice' })
  const { headers } = await createAccount(db)
  const upgrade = { connection: 'upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' }
  for (const extra of [{}, upgrade]) {
    const res = await app.inject({ method: 'GET', url: '/web-call/stream?access_token=wct_a&access_token=wct_b', headers: extra })
    t.equal(res.statusCode, 400, 'the stream validates its query before it looks the token up')
    t.match(res.json(), { code: 'validation_error', message: /^query\.access_token / })
  }
  t.equal((await app.inject({ method: 'GET', url: '/web-call/stream?access_token=wct_a', headers: upgrade })).statusCode, 403, 'one unknown token: refused as before')

  // Every documented operation, each of its single-valued query parameters twice.
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, { parameters?: Array<{ in: string, name: string, schema: { type?: string } }> }>> }
  let checked = 0
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      for (const param of (operation.parameters ?? []).filter((p) => p.in === 'query' && p.schema.type !== 'array')) {
        const url = `${path.replace(/\{\w+\}/g, '0123456789abcdef01234567')}?${param.name}=a&${param.name}=b`
        const res = await app.inject({ method: method.toUpperCase() as 'GET', url, headers })
        t.ok(res.statusCode >= 400 && res.statusCode < 500, `${method.toUpperCase()} ${url}: ${res.statusCode}`)
        checked++
      }
    }
  }
  t.ok(checked > 50, `${checked} parameters checked`)
})
