import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { newId } from '../../src/db/ids.ts'
import { ACTIONS, TOOLS } from '../../src/modules/capabilities/catalog.ts'
import { connectIntegration, markRevoked } from '../../src/modules/integrations/queries.ts'
import { PROVIDERS } from '../../src/modules/integrations/providers.ts'
import { createAccount, setup, type Account } from '../helpers/app.ts'

async function agentOf (app: FastifyInstance, account: Account): Promise<string> {
  const llm = (await app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: {} })).json()
  return (await app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'A', llm_id: llm._id } })).json()._id
}

t.test('every tool type is accepted with valid settings and answered with its defaults', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const agentId = await agentOf(app, account)
  const target = await agentOf(app, account)
  const kb = newId()
  await db.insertInto('knowledge_bases').values({ id: kb, user_id: account.user.id, name: 'Docs', description: 'Product docs', language: 'en', search_config: 'english' }).execute()
  const cases: Record<string, [object, object]> = {
    api_rag: [{ name: 'Search docs', knowledge_base_ids: [kb] }, { name: 'Search docs', knowledge_base_ids: [kb], top_k: 3 }],
    appointment_booking: [{ name: 'Book', time_zone: 'Europe/Berlin', duration_minutes: 30 }, {
      name: 'Book', time_zone: 'Europe/Berlin', duration_minutes: 30, notify_email: null, buffer_minutes: 0, days_ahead: 60, min_notice_minutes: 60,
      opening_hours: Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri'].map((day) => [day, [{ from: '09:00', to: '17:00' }]]))
    }],
    call_forwarding: [{ name: 'To a human', phone_number: '+4930123456' }, { name: 'To a human', phone_number: '+4930123456' }],
    end_call: [{ name: 'Hang up', description: 'when the caller says goodbye' }, { name: 'Hang up', description: 'when the caller says goodbye' }],
    calendar_one: [{ name: 'Cal', calendar_id: 'primary', time_zone: 'America/New_York', duration_minutes: 45 }, { name: 'Cal', calendar_id: 'primary', time_zone: 'America/New_York', duration_minutes: 45 }],
    calendar_two: [{ name: 'Cal2', calendar_id: 'team', time_zone: 'UTC', duration_minutes: 15 }, { name: 'Cal2', calendar_id: 'team', time_zone: 'UTC', duration_minutes: 15 }],
    booking_one: [{ name: 'Live booking', event_type_id: '12345', time_zone: 'Europe/Paris' }, { name: 'Live booking', event_type_id: '12345', time_zone: 'Europe/Paris' }],
    booking_two: [{ name: 'Live booking 2', event_type_id: '42', time_zone: 'Asia/Tokyo' }, { name: 'Live booking 2', event_type_id: '42', time_zone: 'Asia/Tokyo' }],
    crm: [{ name: 'CRM', operations: ['lookup_contact', 'log_call'] }, { name: 'CRM', operations: ['lookup_contact', 'log_call'] }],
    agent_transfer: [{ name: 'To billing', agent_id: target.toUpperCase() }, { name: 'To billing', agent_id: target }],
    mcp: [{ name: 'Tools', server_url: 'https://mcp.example.com/sse', headers: { Authorization: 'Bearer t' } }, { name: 'Tools', server_url: 'https://mcp.example.com/sse', allowed_tools: [], headers: { Authorization: '********' } }]
  }
  // The calendar, booking and CRM tools act in a connected account (see the next test when it is not).
  for (const provider of PROVIDERS) await connectIntegration(db, account.user.id, provider, { account_label: 'Test', method: 'api_key', credentials: { api_key: 'k' } })
  for (const [toolType, [settings, expected]] of Object.entries(cases)) {
    const res = await app.inject({ method: 'POST', url: `/v1/agent/${agentId}/tools`, headers: account.headers, payload: { tool_type: toolType, settings: { ...settings, stray: 1 } } })
    t.equal(res.statusCode, 201, toolType)
    t.match(res.json(), { agent_id: agentId, tool_type: toolType, is_active: true })
    t.same(res.json().settings, expected, `${toolType} settings`)
  }
  const list = (await app.inject({ method: 'GET', url: `/v1/agent/${agentId}/tools`, headers: account.headers })).json()
  t.same(list.map((tool: { tool_type: string }) => tool.tool_type), Object.keys(cases))
})

t.test('an active calendar, booking or CRM tool needs its integration connected and not revoked; a switched-off one may wait', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const agentId = await agentOf(app, account)
  const settings = { name: 'Cal2', calendar_id: 'primary', time_zone: 'UTC', duration_minutes: 15 }
  const add = async (isActive: boolean) => await app.inject({ method: 'POST', url: `/v1/agent/${agentId}/tools`, headers: account.headers, payload: { tool_type: 'calendar_two', settings, is_active: isActive } })
  const refused = await add(true)
  t.match({ status: refused.statusCode, ...refused.json() }, { status: 409, code: 'integration_not_connected', message: 'calendar_two tools act in a connected Microsoft Outlook account: connect it first (PUT /v1/integrations/calendar_two, or the console\'s Integrations page)' })
  const waiting = await add(false)
  t.equal(waiting.statusCode, 201, 'stored switched off')
  const switchOn = async () => await app.inject({ method: 'PATCH', url: `/v1/agent/${agentId}/tools/${waiting.json()._id as string}`, headers: account.headers, payload: { is_active: true } })
  t.equal((await switchOn()).statusCode, 409)
  await connectIntegration(db, account.user.id, 'calendar_two', { account_label: 'Ada', method: 'oauth', credentials: { access_token: 'a', refresh_token: 'r' } })
  t.equal((await switchOn()).statusCode, 200, 'switched on once connected')
  await markRevoked(db, account.user.id, 'calendar_two', 'invalid_grant')
  const again = await add(true)
  t.match({ status: again.statusCode, ...again.json() }, { status: 409, code: 'integration_not_connected', message: /Microsoft Outlook refused this account's connection \(invalid_grant\): connect it again first/ })
})

t.test('tool settings are validated per tool_type', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const other = await createAccount(db)
  const agentId = await agentOf(app, account)
  const foreignAgent = await agentOf(app, other)
  const url = `/v1/agent/${agentId}/tools`
  const cases: Array<[object, number, RegExp]> = [
    [{ tool_type: 'teleport', settings: { name: 'x' } }, 400, /^body\.tool_type must be one of api_rag, appointment_booking, call_forwarding, end_call, calendar_one, calendar_two, booking_one, booking_two, crm, agent_transfer, mcp/],
    [{ tool_type: 'call_forwarding', settings: { name: 'x', phone_number: '030 123456' } }, 400, /^body\.settings\.phone_number must be an E\.164 phone number/],
    [{ tool_type: 'call_forwarding', settings: { name: 'x' } }, 400, /^body\.settings\.phone_number is required/],
    [{ tool_type: 'api_rag', settings: { name: 'x', knowledge_base_ids: [] } }, 400, /^body\.settings\.knowledge_base_ids must NOT have fewer than 1 items/],
    [{ tool_type: 'api_rag', settings: { name: 'x', knowledge_base_ids: ['kb'] } }, 400, /^body\.settings\.knowledge_base_ids\.0 must be a 24-character hexadecimal id/],
    [{ tool_type: 'api_rag', settings: { name: 'x', knowledge_base_ids: ['65a0f000000000000000bbbb'] } }, 404, /^knowledge base 65a0f000000000000000bbbb \(body\.settings\.knowledge_base_ids\) not found/],
    [{ tool_type: 'appointment_booking', settings: { name: 'x', time_zone: 'Mars/Olympus', duration_minutes: 30 } }, 400, /^body\.settings\.time_zone must be an IANA time zone/],
    [{ tool_type: 'appointment_booking', settings: { name: 'x', time_zone: 'UTC', duration_minutes: 1 } }, 400, /^body\.settings\.duration_minutes must be >= 5/],
    [{ tool_type: 'crm', settings: { name: 'x', operations: ['delete_everything'] } }, 400, /^body\.settings\.operations\.0 /],
    [{ tool_type: 'mcp', settings: { name: 'x', server_url: 'ws://mcp.example.com' } }, 400, /^body\.settings\.server_url must be an absolute http/],
    [{ tool_type: 'mcp', settings: { name: 'x', server_url: 'https://mcp.example.com', headers: { Host: 'evil' } } }, 400, /^body\.settings\.headers\.Host is set by Switchboard/],
    [{ tool_type: 'agent_transfer', settings: { name: 'x', agent_id: agentId } }, 400, /^body\.settings\.agent_id must name another agent/],
    [{ tool_type: 'agent_transfer', settings: { name: 'x', agent_id: foreignAgent } }, 404, /^agent [0-9a-f]{24} \(body\.settings\.agent_id\) not found/],
    [{ tool_type: 'agent_transfer', settings: { name: 'x', agent_id: 'me' } }, 400, /^body\.settings\.agent_id must be a 24-character hexadecimal id/],
    [{ tool_type: 'agent_transfer', settings: { name: 'x' } }, 400, /agent_id|phone_number/],
    [{ tool_type: 'agent_transfer', settings: { name: 'x', agent_id: foreignAgent, phone_number: '+4930555000' } }, 400, /^body\.settings needs one of agent_id .* and phone_number .*, not both/],
    [{ tool_type: 'agent_transfer', settings: { name: 'x', phone_number: '030 555' } }, 400, /^body\.settings\.phone_number must be/],
    [{ tool_type: 'call_forwarding', settings: { name: 'x', phone_number: '+4930555000', timeout_seconds: 600 } }, 400, /^body\.settings\.timeout_seconds must be <= 120/],
    [{ tool_type: 'end_call', settings: {} }, 400, /^body\.settings\.name is required/]
  ]
  for (const [payload, status, message] of cases) {
    const res = await app.inject({ method: 'POST', url, headers: account.headers, payload })
    t.equal(res.statusCode, status, message.source)
    t.match(res.json().message, message)
  }
  t.equal((await db.selectFrom('agent_tools').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n, 0)

  const tool = (await app.inject({ method: 'POST', url, headers: account.headers, payload: { tool_type: 'call_forwarding', settings: { name: 'x', phone_number: '+4930123456' } } })).json()
  const bad = await app.inject({ method: 'PATCH', url: `${url}/${tool._id}`, headers: account.headers, payload: { settings: { phone_number: '12' } } })
  t.equal(bad.statusCode, 400)
  t.match(bad.json().message, /^body\.settings\.phone_number must be an E\.164 phone number/)
  const good = await app.inject({ method: 'PATCH', url: `${url}/${tool._id}`, headers: account.headers, payload: { settings: { phone_number: '+14155550100', transfer_message: 'One moment' } } })
  t.same(good.json().settings, { name: 'x', phone_number: '+14155550100', transfer_message: 'One moment' })
})

t.test('every tool and action type acts during calls, after them, or both: none is stored that never acts', async (t) => {
  for (const kind of [TOOLS, ACTIONS]) {
    for (const [type, definition] of Object.entries(kind.types)) t.ok(definition.live !== undefined || definition.after !== undefined, `${kind.noun} ${type}`)
  }
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  // The integrations keep their own routes (test/modules/integrations/connect.test.ts connects and disconnects them).
  t.equal((await app.inject({ method: 'PUT', url: '/v1/integrations/fax', headers: account.headers, payload: { api_key: 'x' } })).statusCode, 400)
})

t.test('tools of another account, or under another agent, are 404', async (t) => {
  const { app, db } = await setup(t)
  const a = await createAccount(db)
  const b = await createAccount(db)
  const agentA = await agentOf(app, a)
  const agentA2 = await agentOf(app, a)
  const tool = (await app.inject({ method: 'POST', url: `/v1/agent/${agentA}/tools`, headers: a.headers, payload: { tool_type: 'end_call', settings: { name: 'bye' } } })).json()
  for (const [method, url, headers, payload] of [
    ['GET', `/v1/agent/${agentA}/tools`, b.headers],
    ['POST', `/v1/agent/${agentA}/tools`, b.headers, { tool_type: 'end_call', settings: { name: 'x' } }],
    ['PATCH', `/v1/agent/${agentA}/tools/${tool._id}`, b.headers, { is_active: false }],
    ['DELETE', `/v1/agent/${agentA}/tools/${tool._id}`, b.headers],
    ['PATCH', `/v1/agent/${agentA2}/tools/${tool._id}`, a.headers, { is_active: false }],
    ['DELETE', `/v1/agent/${agentA2}/tools/${tool._id}`, a.headers]
  ] as const) {
    t.equal((await app.inject({ method, url, headers, payload })).statusCode, 404, `${method} ${url}`)
  }
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/agent/${agentA}/tools/${tool._id}`, headers: a.headers })).statusCode, 204)
})

t.test('the OpenAPI document shows every agent route with its schemas', async (t) => {
  const { app } = await setup(t)
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
  const expected: Record<string, string[]> = {
    '/v1/llm/list': ['get'],
    '/v1/llm': ['post'],
    '/v1/llm/{id}': ['get', 'patch', 'delete'],
    '/v1/agent/list': ['get'],
    '/v1/agent': ['post'],
    '/v1/agent/{id}': ['get', 'patch', 'delete'],
    '/v1/agent/{id}/call-stats': ['get'],
    '/v1/agent/agent_template/list': ['get'],
    '/v1/agent/agent_template/{id}/clone': ['post'],
    '/v1/agent/{id}/actions': ['get', 'post'],
    '/v1/agent/{id}/actions/{agentActionId}': ['patch', 'delete'],
    '/v1/agent/{id}/tools': ['get', 'post'],
    '/v1/agent/{id}/tools/{agentToolId}': ['patch', 'delete'],
    '/v1/integrations': ['get'],
    '/v1/integrations/{provider}': ['put', 'delete'],
    '/v1/integrations/{provider}/authorizations': ['post']
  }
  for (const [path, methods] of Object.entries(expected)) {
    for (const method of methods) t.ok(doc.paths[path]?.[method], `${method} ${path}`)
  }
  const createTool = doc.paths['/v1/agent/{id}/tools'].post.requestBody.content['application/json'].schema
  t.equal(createTool.oneOf.length, Object.keys(TOOLS.types).length, 'one settings schema per tool type')
  t.ok(doc.paths['/v1/agent'].post.requestBody.content['application/json'].schema.properties.call_settings)
})
