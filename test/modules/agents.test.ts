import t from 'tap'
import { newId } from '../../src/db/ids.ts'
import { createAccount, setup, type Account } from '../helpers/app.ts'
import type { FastifyInstance } from 'fastify'

async function llmOf (app: FastifyInstance, account: Account): Promise<string> {
  const res = await app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { general_prompt: 'You help.' } })
  return res.json()._id
}

t.test('POST /v1/agent with only the required fields answers every field with its default', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const llmId = await llmOf(app, account)
  const res = await app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Front desk', llm_id: llmId } })
  t.equal(res.statusCode, 201)
  const agent = res.json()
  t.same(Object.keys(agent).sort(), ['_id', 'agent_name', 'call_settings', 'callback_settings', 'created_at', 'customer_id', 'data_retrieval',
    'folder', 'interruption_sensitivity', 'is_customer_memory_active', 'is_data_collection_active', 'knowledge_base', 'llm_id', 'status',
    'updated_at', 'version', 'voice', 'voicemail_settings', 'webhook_url', 'widget_settings', 'workflow', 'workspace_id'])
  t.match(agent, {
    version: 1,
    _id: /^[0-9a-f]{24}$/,
    agent_name: 'Front desk',
    llm_id: llmId,
    voice: { voice_id: '65a0f0000000000000000001' },
    interruption_sensitivity: 0.5,
    data_retrieval: [],
    webhook_url: null,
    is_data_collection_active: false,
    status: 'active',
    workspace_id: null,
    customer_id: null,
    knowledge_base: [],
    folder: null,
    is_customer_memory_active: false
  })
  t.same(agent.call_settings, {
    language: 'en-US',
    sentiment_analysis: true,
    call_summary: true,
    max_call_duration_minutes: 10,
    reminder_after_seconds: 10,
    reminder_max_count: 1,
    silence_timeout_seconds: 30,
    responsiveness: 0.5,
    recording_enabled: true,
    stt_languages: [],
    wait_for_hello_seconds: 3
  })
  t.same(agent.voicemail_settings, { detection: false, action: 'hang_up', message: '', detection_timeout_seconds: 30 })
  t.same(agent.widget_settings, { enabled: false, theme: 'light', primary_color: '#2563eb', position: 'bottom-right', greeting: '', allowed_origins: [], agent_version: null })
  t.same(agent.callback_settings, { enabled: false, max_attempts: 2, retry_delay_minutes: 30, on_outcomes: ['no_answer', 'busy'] })
  t.same((await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })).json(), agent)
})

t.test('every create field round-trips; update-only fields and unknown fields are dropped on create', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const llmId = await llmOf(app, account)
  const customerId = (await app.inject({ method: 'POST', url: '/v1/customer', headers: account.headers, payload: { customer_name: 'Acme' } })).json()._id
  const workspaceId = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: 'Sales' } })).json()._id
  const payload = {
    agent_name: 'Sales',
    llm_id: llmId,
    voice: { voice_id: '65a0f0000000000000000003' },
    interruption_sensitivity: 0.9,
    call_settings: {
      language: 'de-DE',
      sentiment_analysis: false,
      call_summary: false,
      max_call_duration_minutes: 15,
      reminder_after_seconds: 20,
      reminder_max_count: 0,
      silence_timeout_seconds: 60,
      recording_enabled: false,
      stt_languages: ['de-DE', 'en-US']
    },
    data_retrieval: [
      { name: 'budget', type: 'number', description: 'budget in EUR', required: true },
      { name: 'product', type: 'enum', enum_values: ['basic', 'pro'] }
    ],
    webhook_url: 'https://hooks.example.com/calls?token=abc',
    is_data_collection_active: true,
    folder: 'sales',
    status: 'inactive',
    surprise: 'dropped'
  }
  const res = await app.inject({ method: 'POST', url: `/v1/agent?customer_id=${customerId}&workspace_id=${workspaceId}`, headers: account.headers, payload })
  t.equal(res.statusCode, 201)
  const agent = res.json()
  t.match(agent, {
    agent_name: 'Sales',
    voice: { voice_id: '65a0f0000000000000000003' },
    interruption_sensitivity: 0.9,
    webhook_url: 'https://hooks.example.com/calls?token=abc',
    is_data_collection_active: true,
    customer_id: customerId,
    workspace_id: workspaceId,
    folder: null,
    status: 'active'
  })
  t.same(agent.call_settings, {
    language: 'de-DE',
    sentiment_analysis: false,
    call_summary: false,
    max_call_duration_minutes: 15,
    reminder_after_seconds: 20,
    reminder_max_count: 0,
    silence_timeout_seconds: 60,
    responsiveness: 0.5,
    recording_enabled: true,
    stt_languages: [],
    wait_for_hello_seconds: 3
  }, 'recording_enabled and stt_languages are update-only')
  t.same(agent.data_retrieval, [
    { name: 'budget', type: 'number', description: 'budget in EUR', required: true },
    { name: 'product', type: 'enum', description: '', required: false, enum_values: ['basic', 'pro'] }
  ])
  t.notOk('surprise' in agent)
  const stored = await db.selectFrom('agents').selectAll().where('id', '=', agent._id).executeTakeFirstOrThrow()
  t.notOk(JSON.stringify(stored).includes('dropped'), 'unknown fields are not stored')

  const byCustomer = await app.inject({ method: 'GET', url: `/v1/agent/list?customer_id=${customerId}`, headers: account.headers })
  t.same(byCustomer.json().map((a: { _id: string }) => a._id), [agent._id])
  const byWorkspace = await app.inject({ method: 'GET', url: `/v1/agent/list?workspace_id=${workspaceId}`, headers: account.headers })
  t.same(byWorkspace.json().map((a: { _id: string }) => a._id), [agent._id])
  const otherWorkspace = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: 'Empty' } })).json()._id
  t.same((await app.inject({ method: 'GET', url: `/v1/agent/list?workspace_id=${otherWorkspace}`, headers: account.headers })).json(), [])

  // Customers and workspaces must be the account's own; one that still owns an agent cannot be deleted.
  const stranger = await createAccount(db)
  const foreign = (await app.inject({ method: 'POST', url: '/v1/customer', headers: stranger.headers, payload: { customer_name: 'Theirs' } })).json()._id
  for (const url of [`/v1/agent?customer_id=${foreign}`, `/v1/agent?workspace_id=${newId()}`]) {
    const res = await app.inject({ method: 'POST', url, headers: account.headers, payload: { agent_name: 'X', llm_id: llmId } })
    t.equal(res.statusCode, 404, url)
  }
  t.equal((await app.inject({ method: 'GET', url: `/v1/agent/list?customer_id=${foreign}`, headers: account.headers })).statusCode, 404)
  const inUse = await app.inject({ method: 'DELETE', url: `/v1/customer/${customerId}`, headers: account.headers })
  t.equal(inUse.statusCode, 409)
  t.match(inUse.json().message, /1 agent/)
  const workspaceInUse = await app.inject({ method: 'DELETE', url: `/v1/workspaces/${workspaceId}`, headers: account.headers })
  t.equal(workspaceInUse.statusCode, 409)
})

t.test('PATCH changes only what it names and merges nested settings member by member', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const llmId = await llmOf(app, account)
  const otherLlm = await llmOf(app, account)
  const agent = (await app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'A', llm_id: llmId, call_settings: { language: 'fr-FR', max_call_duration_minutes: 5 }, webhook_url: 'https://example.com/hook' } })).json()

  const patch = async (payload: object) => {
    const res = await app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload })
    t.equal(res.statusCode, 200, JSON.stringify(payload))
    return res.json()
  }
  let updated = await patch({ call_settings: { recording_enabled: false, stt_languages: ['fr-FR', 'en-GB', 'de-DE', 'es-ES'] } })
  t.match(updated.call_settings, { language: 'fr-FR', max_call_duration_minutes: 5, recording_enabled: false, stt_languages: ['fr-FR', 'en-GB', 'de-DE', 'es-ES'], call_summary: true })
  updated = await patch({ call_settings: { max_call_duration_minutes: 12 } })
  t.match(updated.call_settings, { language: 'fr-FR', max_call_duration_minutes: 12, recording_enabled: false })
  updated = await patch({ widget_settings: { enabled: true, theme: 'dark' } })
  t.same(updated.widget_settings, { enabled: true, theme: 'dark', primary_color: '#2563eb', position: 'bottom-right', greeting: '', allowed_origins: [], agent_version: null })
  updated = await patch({ widget_settings: { greeting: 'Hi!' }, callback_settings: { enabled: true, on_outcomes: ['voicemail'] } })
  t.match(updated.widget_settings, { enabled: true, theme: 'dark', greeting: 'Hi!' })
  t.same(updated.callback_settings, { enabled: true, max_attempts: 2, retry_delay_minutes: 30, on_outcomes: ['voicemail'] })
  updated = await patch({ folder: 'support', status: 'inactive', is_customer_memory_active: true, llm_id: otherLlm, voice: { voice_id: '65a0f0000000000000000002' }, agent_name: 'B' })
  t.match(updated, { folder: 'support', status: 'inactive', is_customer_memory_active: true, llm_id: otherLlm, voice: { voice_id: '65a0f0000000000000000002' }, agent_name: 'B', webhook_url: 'https://example.com/hook' })
  updated = await patch({ webhook_url: null, folder: null })
  t.match(updated, { webhook_url: null, folder: null, agent_name: 'B' })
  updated = await patch({})
  t.equal(updated.agent_name, 'B', 'an empty PATCH changes nothing')

  // Two concurrent PATCHes of different members both survive.
  await Promise.all([patch({ call_settings: { reminder_max_count: 3 } }), patch({ call_settings: { silence_timeout_seconds: 90 } })])
  const final = (await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })).json()
  t.match(final.call_settings, { reminder_max_count: 3, silence_timeout_seconds: 90, max_call_duration_minutes: 12 })
})

t.test('call_settings.responsiveness: set on create, changed on update, refused out of 0 to 1 with nothing stored', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const llmId = await llmOf(app, account)
  const created = await app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Quick', llm_id: llmId, call_settings: { responsiveness: 0.8 } } })
  t.equal(created.statusCode, 201)
  const agent = created.json()
  t.match(agent.call_settings, { responsiveness: 0.8, language: 'en-US' })
  const stored = await db.selectFrom('agents').select('call_settings').where('id', '=', agent._id).executeTakeFirstOrThrow()
  t.equal(stored.call_settings.responsiveness, 0.8, 'stored with the agent')

  const patched = await app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { call_settings: { responsiveness: 0 } } })
  t.equal(patched.statusCode, 200)
  t.match(patched.json().call_settings, { responsiveness: 0, language: 'en-US', max_call_duration_minutes: 10 })

  for (const responsiveness of [1.01, -0.1, '0.5', null, true]) {
    const payload = { call_settings: { responsiveness } }
    const create = await app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Bad', llm_id: llmId, ...payload } })
    t.equal(create.statusCode, 400, JSON.stringify(responsiveness))
    t.match(create.json(), { statusCode: 400, code: 'validation_error', message: /^body\.call_settings\.responsiveness must be (<= 1|>= 0|number)/ })
    const update = await app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload })
    t.equal(update.statusCode, 400, JSON.stringify(responsiveness))
    t.match(update.json().message, /^body\.call_settings\.responsiveness /)
  }
  t.same((await db.selectFrom('agents').select('agent_name').where('user_id', '=', account.user.id).execute()).map((row) => row.agent_name), ['Quick'], 'no agent created')
  t.match((await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })).json().call_settings, { responsiveness: 0 }, 'nothing changed')

  // A row stored before the setting existed reads with the default.
  await db.updateTable('agents').set({ call_settings: JSON.stringify({ language: 'de-DE' }) }).where('id', '=', agent._id).execute()
  t.match((await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })).json().call_settings, { language: 'de-DE', responsiveness: 0.5 })
})

t.test('validation answers 400 naming the field', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const llmId = await llmOf(app, account)
  const base = { agent_name: 'A', llm_id: llmId }
  const cases: Array<[object, RegExp, string?]> = [
    [{ llm_id: llmId }, /^body\.agent_name is required/],
    [{ agent_name: 'A' }, /^body\.llm_id is required/],
    [{ ...base, agent_name: '' }, /^body\.agent_name /],
    [{ ...base, llm_id: 'nope' }, /^body\.llm_id must be a 24-character hexadecimal id/, 'invalid_id'],
    [{ ...base, call_settings: { max_call_duration_minutes: 0 } }, /^body\.call_settings\.max_call_duration_minutes must be >= 1/],
    [{ ...base, call_settings: { max_call_duration_minutes: 16 } }, /^body\.call_settings\.max_call_duration_minutes must be <= 15/],
    [{ ...base, call_settings: { language: 'english please' } }, /^body\.call_settings\.language must be a BCP-47 language tag/],
    [{ ...base, interruption_sensitivity: 1.5 }, /^body\.interruption_sensitivity must be <= 1/],
    [{ ...base, interruption_sensitivity: -0.1 }, /^body\.interruption_sensitivity must be >= 0/],
    [{ ...base, webhook_url: 'ftp://example.com/x' }, /^body\.webhook_url must be an absolute http/],
    [{ ...base, webhook_url: '/relative' }, /^body\.webhook_url must be an absolute http/],
    [{ ...base, voice: { voice_id: '65a0f00000000000000000ff' } }, /^body\.voice\.voice_id 65a0f00000000000000000ff is not a voice/],
    [{ ...base, voice: {} }, /^body\.voice\.voice_id is required/],
    [{ ...base, data_retrieval: [{ name: '1abc', type: 'string' }] }, /^body\.data_retrieval\.0\.name must match pattern/],
    [{ ...base, data_retrieval: [{ name: 'a', type: 'money' }] }, /^body\.data_retrieval\.0\.type /],
    [{ ...base, data_retrieval: [{ name: 'a', type: 'string' }, { name: 'a', type: 'number' }] }, /^body\.data_retrieval\.1\.name "a" is used twice/],
    [{ ...base, data_retrieval: [{ name: 'call_summary', type: 'string' }] }, /^body\.data_retrieval\.0\.name "call_summary" is a built-in call variable/],
    [{ ...base, data_retrieval: [{ name: 'plan', type: 'enum' }] }, /^body\.data_retrieval\.0\.enum_values is required for type enum/],
    [{ ...base, data_retrieval: [{ name: 'plan', type: 'string', enum_values: ['a'] }] }, /^body\.data_retrieval\.0\.enum_values is allowed only for type enum/]
  ]
  for (const [payload, message, code] of cases) {
    const res = await app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload })
    t.equal(res.statusCode, 400, message.source)
    t.match(res.json(), { statusCode: 400, code: code ?? /^(validation_error|bad_request)$/, message })
  }
  t.equal((await app.inject({ method: 'POST', url: '/v1/agent?customer_id=xyz', headers: account.headers, payload: base })).json().code, 'invalid_id')

  const agent = (await app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: base })).json()
  const updateCases: Array<[object, RegExp]> = [
    [{ call_settings: { stt_languages: ['en-US', 'de-DE', 'fr-FR', 'es-ES', 'it-IT'] } }, /^body\.call_settings\.stt_languages must NOT have more than 4 items/],
    [{ call_settings: { stt_languages: ['en_US!'] } }, /^body\.call_settings\.stt_languages\.0 must be a BCP-47 language tag/],
    [{ status: 'deleted' }, /^body\.status /],
    [{ widget_settings: { primary_color: 'blue' } }, /^body\.widget_settings\.primary_color must match pattern/],
    [{ callback_settings: { max_attempts: 9 } }, /^body\.callback_settings\.max_attempts must be <= 5/],
    [{ folder: 'x'.repeat(101) }, /^body\.folder /]
  ]
  for (const [payload, message] of updateCases) {
    const res = await app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload })
    t.equal(res.statusCode, 400, message.source)
    t.match(res.json().message, message)
  }
  const unknownLlm = await app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { llm_id: newId() } })
  t.equal(unknownLlm.statusCode, 404)
  t.match(unknownLlm.json().message, /^LLM configuration [0-9a-f]{24} not found/)
  const after = (await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })).json()
  t.same(after, agent, 'a refused update changes nothing')
})

t.test("another account's agents and LLM configurations are 404", async (t) => {
  const { app, db } = await setup(t)
  const a = await createAccount(db)
  const b = await createAccount(db)
  const agent = (await app.inject({ method: 'POST', url: '/v1/agent', headers: a.headers, payload: { agent_name: 'A', llm_id: await llmOf(app, a) } })).json()
  for (const [method, url, payload] of [
    ['GET', `/v1/agent/${agent._id}`],
    ['PATCH', `/v1/agent/${agent._id}`, { agent_name: 'stolen' }],
    ['DELETE', `/v1/agent/${agent._id}`],
    ['GET', `/v1/agent/${agent._id}/call-stats?date_from=2026-01-01&date_to=2026-01-02`],
    ['GET', `/v1/agent/${agent._id}/actions`],
    ['GET', `/v1/agent/${agent._id}/tools`]
  ] as const) {
    const res = await app.inject({ method, url, headers: b.headers, payload })
    t.equal(res.statusCode, 404, `${method} ${url}`)
    t.equal(res.json().code, 'not_found')
  }
  t.same((await app.inject({ method: 'GET', url: '/v1/agent/list', headers: b.headers })).json(), [])
  const foreignLlm = await app.inject({ method: 'POST', url: '/v1/agent', headers: b.headers, payload: { agent_name: 'B', llm_id: agent.llm_id } })
  t.equal(foreignLlm.statusCode, 404, "another account's LLM configuration cannot be used")
  t.equal((await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: a.headers })).json().agent_name, 'A')
  for (const [method, url] of [['GET', '/v1/agent/xyz'], ['GET', '/v1/agent/xyz/actions'], ['PATCH', `/v1/agent/${agent._id}/actions/123`],
    ['DELETE', `/v1/agent/${agent._id}/tools/123`], ['POST', '/v1/agent/agent_template/zz/clone']] as const) {
    const res = await app.inject({ method, url, headers: a.headers, payload: method === 'PATCH' ? {} : undefined })
    t.equal(res.statusCode, 400, url)
    t.equal(res.json().code, 'invalid_id')
  }
})

t.test('DELETE /v1/agent/:id deletes actions and tools, keeps calls, switches off transfers to it', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const llmId = await llmOf(app, account)
  const create = async (name: string) => (await app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: name, llm_id: llmId } })).json()
  const agent = await create('Doomed')
  const other = await create('Other')
  await app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions`, headers: account.headers, payload: { action_type: 'send_email', settings: { name: 'n', subject: 's', message: 'm', direct_recipients: ['a@example.com'] } } })
  await app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'end_call', settings: { name: 'bye' } } })
  const transfer = (await app.inject({ method: 'POST', url: `/v1/agent/${other._id}/tools`, headers: account.headers, payload: { tool_type: 'agent_transfer', settings: { name: 'to doomed', agent_id: agent._id } } })).json()
  await db.insertInto('calls').values({ id: newId(), user_id: account.user.id, agent_id: agent._id, agent_name: 'Doomed', call_type: 'web', direction: 'outbound', call_status: 'success', start_timestamp: new Date() }).execute()

  const res = await app.inject({ method: 'DELETE', url: `/v1/agent/${agent._id}`, headers: account.headers })
  t.equal(res.statusCode, 204)
  t.equal(res.body, '')
  t.equal((await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })).statusCode, 404)
  const count = async (table: 'agent_actions' | 'agent_tools' | 'calls') =>
    (await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).where('agent_id', '=', agent._id).executeTakeFirstOrThrow()).n
  t.equal(await count('agent_actions'), 0)
  t.equal(await count('agent_tools'), 0)
  t.equal(await count('calls'), 1, 'calls stay')
  const tools = (await app.inject({ method: 'GET', url: `/v1/agent/${other._id}/tools`, headers: account.headers })).json()
  t.match(tools, [{ _id: transfer._id, is_active: false, settings: { agent_id: agent._id } }])
})

t.test('GET /v1/agent/:id/call-stats counts calls per UTC day, zero days included', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const other = await createAccount(db)
  const llmId = await llmOf(app, account)
  const agent = (await app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'A', llm_id: llmId } })).json()
  const call = (at: string, agentId = agent._id, userId = account.user.id) => ({
    id: newId(), user_id: userId, agent_id: agentId, agent_name: 'A', call_type: 'phone' as const, direction: 'inbound' as const, call_status: 'success' as const, start_timestamp: new Date(at)
  })
  await db.insertInto('calls').values([
    call('2026-03-01T00:00:00Z'),
    call('2026-03-01T23:59:59.999Z'),
    call('2026-03-03T12:00:00Z'),
    call('2026-03-04T00:00:00Z'), // the day after the range
    call('2026-02-28T23:59:59Z'), // the day before
    call('2026-03-02T10:00:00Z', newId()), // another agent
    call('2026-03-02T10:00:00Z', agent._id, other.user.id) // another account
  ]).execute()
  const res = await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/call-stats?date_from=2026-03-01&date_to=2026-03-03`, headers: account.headers })
  t.equal(res.statusCode, 200)
  t.same(res.json(), [
    { date: '2026-03-01', total_calls: 2 },
    { date: '2026-03-02', total_calls: 0 },
    { date: '2026-03-03', total_calls: 1 }
  ])
  const oneDay = await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/call-stats?date_from=2026-03-04&date_to=2026-03-04`, headers: account.headers })
  t.same(oneDay.json(), [{ date: '2026-03-04', total_calls: 1 }])
  const quiet = await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/call-stats?date_from=2027-01-01&date_to=2027-01-02`, headers: account.headers })
  t.equal(quiet.statusCode, 200, 'an agent without calls in the range is no 404')
  t.same(quiet.json(), [{ date: '2027-01-01', total_calls: 0 }, { date: '2027-01-02', total_calls: 0 }])

  for (const [query, message] of [
    ['date_to=2026-03-03', /query\.date_from is required/],
    ['date_from=2026-03-01', /query\.date_to is required/],
    ['date_from=2026-3-1&date_to=2026-03-03', /query\.date_from must match pattern/],
    ['date_from=2026-02-30&date_to=2026-03-03', /query\.date_from 2026-02-30 is not a calendar date/],
    ['date_from=2026-03-05&date_to=2026-03-03', /query\.date_to must not be before query\.date_from/],
    ['date_from=2000-01-01&date_to=2026-03-03', /must not exceed 3660 days/]
  ] as const) {
    const bad = await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/call-stats?${query}`, headers: account.headers })
    t.equal(bad.statusCode, 400, query)
    t.match(bad.json().message, message)
  }
})

t.test('templates: a catalogue of six, cloned into an agent with its own LLM configuration', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const list = await app.inject({ method: 'GET', url: '/v1/agent/agent_template/list', headers: account.headers })
  t.equal(list.statusCode, 200)
  const templates = list.json()
  t.equal(templates.length, 6)
  t.same(templates.map((tp: { agent: { agent_name: string } }) => tp.agent.agent_name),
    ['Receptionist', 'Appointment booking', 'Lead qualification', 'Customer support', 'Survey', 'Outbound reminder'])
  for (const template of templates) {
    t.match(template, {
      _id: /^[0-9a-f]{24}$/,
      icon_url: /^data:image\/svg\+xml,/,
      description: /.{20}/,
      agent: { agent_name: String, call_settings: { language: 'en-US', max_call_duration_minutes: Number }, data_retrieval: Array },
      llm: { model: /^gpt-/, begin_message: /\w/, general_prompt: /.{40}/, temperature: Number }
    })
  }

  const survey = templates[4]
  const workspaceId = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: 'Research' } })).json()._id
  const res = await app.inject({ method: 'POST', url: `/v1/agent/agent_template/${survey._id}/clone?workspace_id=${workspaceId}`, headers: account.headers })
  t.equal(res.statusCode, 201)
  const agent = res.json()
  t.match(agent, { agent_name: 'Survey', workspace_id: workspaceId, call_settings: { max_call_duration_minutes: 5, recording_enabled: true } })
  t.same(agent.data_retrieval.map((f: { name: string }) => f.name), ['satisfaction_score', 'would_recommend', 'comments'])
  const llm = (await app.inject({ method: 'GET', url: `/v1/llm/${agent.llm_id}`, headers: account.headers })).json()
  t.match(llm, { model: survey.llm.model, begin_message: survey.llm.begin_message, general_prompt: survey.llm.general_prompt, temperature: survey.llm.temperature })

  const named = await app.inject({ method: 'POST', url: `/v1/agent/agent_template/${survey._id}/clone`, headers: account.headers, payload: { agent_name: 'NPS' } })
  t.equal(named.json().agent_name, 'NPS')
  t.not(named.json().llm_id, agent.llm_id, 'each clone has its own configuration')
  t.equal((await app.inject({ method: 'POST', url: `/v1/agent/agent_template/${newId()}/clone`, headers: account.headers })).statusCode, 404)
})

t.test('floats are stored as sent: tiny values and ten digits survive, agent and LLM alike', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  for (const value of [1e-50, 0.1234567891, 5e-324, 0.7]) {
    const llm = await app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { temperature: value } })
    t.equal(llm.statusCode, 201, `temperature ${value}: ${llm.body}`)
    t.equal(llm.json().temperature, value)
    t.equal((await app.inject({ method: 'GET', url: `/v1/llm/${llm.json()._id}`, headers: account.headers })).json().temperature, value)
    const agent = await app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Float', llm_id: llm.json()._id, interruption_sensitivity: value } })
    t.equal(agent.statusCode, 201, `interruption_sensitivity ${value}: ${agent.body}`)
    t.equal((await app.inject({ method: 'GET', url: `/v1/agent/${agent.json()._id}`, headers: account.headers })).json().interruption_sensitivity, value)
    const patched = await app.inject({ method: 'PATCH', url: `/v1/agent/${agent.json()._id}`, headers: account.headers, payload: { interruption_sensitivity: value / 2 } })
    t.equal(patched.json().interruption_sensitivity, value / 2)
  }
})
