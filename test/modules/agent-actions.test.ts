import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { newId } from '../../src/db/ids.ts'
import { openSettings } from '../../src/modules/agents/queries.ts'
import { createAccount, setup, type Account } from '../helpers/app.ts'

async function agentOf (app: FastifyInstance, account: Account): Promise<string> {
  const llm = (await app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: {} })).json()
  return (await app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'A', llm_id: llm._id } })).json()._id
}

const email = { name: 'Notify sales', subject: 'New call', message: 'Summary: {{call_summary}}', direct_recipients: ['sales@example.com', 'boss@example.org'] }

t.test('actions: create, list, patch, delete', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const agentId = await agentOf(app, account)
  const url = `/v1/agent/${agentId}/actions`

  const created = await app.inject({ method: 'POST', url, headers: account.headers, payload: { action_type: 'send_email', settings: { ...email, extra: 1 }, junk: true } })
  t.equal(created.statusCode, 201)
  const action = created.json()
  t.same(Object.keys(action).sort(), ['_id', 'action_type', 'agent_id', 'created_at', 'is_active', 'settings', 'updated_at'])
  t.match(action, { _id: /^[0-9a-f]{24}$/, agent_id: agentId, action_type: 'send_email', is_active: true })
  t.same(action.settings, { ...email, when: 'after_call', send_to_customer: false }, 'unknown settings members are dropped; defaults filled in')

  const sms = (await app.inject({ method: 'POST', url, headers: account.headers, payload: { action_type: 'send_sms', settings: { name: 'Text', message: 'Thanks!' }, is_active: false } })).json()
  t.same(sms.settings, { name: 'Text', message: 'Thanks!', when: 'after_call', send_to_customer: true, direct_recipients: [] })
  t.equal(sms.is_active, false)

  const list = await app.inject({ method: 'GET', url, headers: account.headers })
  t.same(list.json().map((a: { _id: string }) => a._id), [action._id, sms._id])

  const patched = await app.inject({ method: 'PATCH', url: `${url}/${action._id}`, headers: account.headers, payload: { settings: { subject: 'Call ended' }, is_active: false } })
  t.equal(patched.statusCode, 200)
  t.same(patched.json().settings, { ...email, when: 'after_call', send_to_customer: false, subject: 'Call ended' }, 'settings members merge')
  t.equal(patched.json().is_active, false)
  const activeOnly = await app.inject({ method: 'PATCH', url: `${url}/${action._id}`, headers: account.headers, payload: { is_active: true } })
  t.match(activeOnly.json(), { is_active: true, settings: { subject: 'Call ended' } })

  const removed = await app.inject({ method: 'DELETE', url: `${url}/${action._id}`, headers: account.headers })
  t.equal(removed.statusCode, 204)
  t.equal(removed.body, '')
  t.equal((await app.inject({ method: 'DELETE', url: `${url}/${action._id}`, headers: account.headers })).statusCode, 404)
  t.same((await app.inject({ method: 'GET', url, headers: account.headers })).json().map((a: { _id: string }) => a._id), [sms._id])
})

t.test('api_call actions: defaults, write-only headers, retry schedule', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const agentId = await agentOf(app, account)
  const url = `/v1/agent/${agentId}/actions`
  const settings = {
    name: 'CRM sync',
    url: 'https://crm.example.com/calls/{{call_id}}?src=switchboard',
    headers: { Authorization: 'Bearer secret-token', 'X-Tenant': 'acme' },
    body: { phone: '{{customer_phone}}', nested: { score: '{{satisfaction_score}}' } },
    retry_schedule: [60, 300, 604800]
  }
  const created = await app.inject({ method: 'POST', url, headers: account.headers, payload: { action_type: 'api_call', settings } })
  t.equal(created.statusCode, 201)
  const action = created.json()
  t.same(action.settings, {
    when: 'after_call',
    method: 'POST',
    query: {},
    send_only_custom_fields: false,
    notify: 'last_attempt',
    notify_email: null,
    condition: null,
    ...settings,
    headers: { Authorization: '********', 'X-Tenant': '********' }
  })
  t.notOk(created.body.includes('secret-token'), 'header values are never returned')
  const stored = await db.selectFrom('agent_actions').select('settings').where('id', '=', action._id).executeTakeFirstOrThrow()
  t.ok(Object.values(stored.settings.headers as Record<string, string>).every((v) => /^enc:v1:/.test(v)), 'the values are stored encrypted')
  t.same(openSettings(stored.settings).headers, settings.headers, 'the real values are stored')

  // The mask keeps a stored value; a new value replaces it; a header left out is removed.
  const patched = await app.inject({
    method: 'PATCH',
    url: `${url}/${action._id}`,
    headers: account.headers,
    payload: { settings: { headers: { Authorization: '********', 'X-Api-Key': 'k2' }, method: 'PUT', notify: 'every_attempt', notify_email: 'ops@example.com' } }
  })
  t.equal(patched.statusCode, 200)
  t.same(patched.json().settings.headers, { Authorization: '********', 'X-Api-Key': '********' })
  const after = await db.selectFrom('agent_actions').select('settings').where('id', '=', action._id).executeTakeFirstOrThrow()
  t.same(openSettings(after.settings).headers, { Authorization: 'Bearer secret-token', 'X-Api-Key': 'k2' })
  t.match(after.settings, { method: 'PUT', notify: 'every_attempt', notify_email: 'ops@example.com', url: settings.url })

  const unknownMask = await app.inject({ method: 'PATCH', url: `${url}/${action._id}`, headers: account.headers, payload: { settings: { headers: { 'X-New': '********' } } } })
  t.equal(unknownMask.statusCode, 400)
  t.match(unknownMask.json().message, /body\.settings\.headers\.X-New has no stored value/)

  // null returns a member to its default: no retry_schedule means the default schedule.
  const reset = await app.inject({ method: 'PATCH', url: `${url}/${action._id}`, headers: account.headers, payload: { settings: { retry_schedule: null, notify_email: null } } })
  t.equal(reset.statusCode, 200)
  t.notOk('retry_schedule' in reset.json().settings)
  t.equal(reset.json().settings.notify_email, null)
  const noRetries = await app.inject({ method: 'PATCH', url: `${url}/${action._id}`, headers: account.headers, payload: { settings: { retry_schedule: [] } } })
  t.same(noRetries.json().settings.retry_schedule, [], '[] means one send and no retries')

  const maskOnCreate = await app.inject({ method: 'POST', url, headers: account.headers, payload: { action_type: 'api_call', settings: { name: 'x', url: 'https://a.example', headers: { A: '********' } } } })
  t.equal(maskOnCreate.statusCode, 400)
})

t.test('action settings are validated per action_type', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const agentId = await agentOf(app, account)
  const url = `/v1/agent/${agentId}/actions`
  const api = { name: 'hook', url: 'https://example.com/hook' }
  const cases: Array<[object, RegExp]> = [
    [{ settings: email }, /^body\.action_type is required/],
    [{ action_type: 'send_fax', settings: email }, /^body\.action_type must be one of send_email, send_sms, send_chat, api_call/],
    [{ action_type: 'send_email' }, /^body\.settings is required/],
    [{ action_type: 'send_email', settings: { ...email, direct_recipients: ['not-an-address'] } }, /^body\.settings\.direct_recipients\.0 must be an e-mail address/],
    [{ action_type: 'send_email', settings: { ...email, direct_recipients: [] } }, /^body\.settings needs a recipient/],
    [{ action_type: 'send_email', settings: { ...email, subject: undefined } }, /^body\.settings\.subject is required/],
    [{ action_type: 'send_sms', settings: { name: 'x', message: 'hi', direct_recipients: ['0301234'] } }, /^body\.settings\.direct_recipients\.0 must be an E\.164 phone number/],
    [{ action_type: 'send_sms', settings: { name: 'x', message: 'hi', send_to_customer: false } }, /^body\.settings needs a recipient/],
    [{ action_type: 'send_chat', settings: { name: 'x', message: '' } }, /^body\.settings\.message must NOT have fewer than 1 characters/],
    [{ action_type: 'api_call', settings: { ...api, url: 'not a url' } }, /^body\.settings\.url must be an absolute http/],
    [{ action_type: 'api_call', settings: { ...api, url: 'mailto:a@b.c' } }, /^body\.settings\.url must be an absolute http/],
    [{ action_type: 'api_call', settings: { ...api, method: 'TRACE' } }, /^body\.settings\.method /],
    [{ action_type: 'api_call', settings: { ...api, retry_schedule: [59] } }, /^body\.settings\.retry_schedule\.0 must be >= 60/],
    [{ action_type: 'api_call', settings: { ...api, retry_schedule: [604801] } }, /^body\.settings\.retry_schedule\.0 must be <= 604800/],
    [{ action_type: 'api_call', settings: { ...api, retry_schedule: Array(11).fill(60) } }, /^body\.settings\.retry_schedule must NOT have more than 10 items/],
    [{ action_type: 'api_call', settings: { ...api, notify: 'sometimes' } }, /^body\.settings\.notify /],
    [{ action_type: 'api_call', settings: { ...api, notify_email: 'nobody' } }, /^body\.settings\.notify_email /],
    [{ action_type: 'api_call', settings: { ...api, headers: { 'Bad Header': 'x' } } }, /^body\.settings\.headers has an invalid header name "Bad Header"/],
    [{ action_type: 'api_call', settings: { ...api, headers: { 'X-Service-Attempt': '1' } } }, /^body\.settings\.headers\.X-Service-Attempt is set by Switchboard/],
    [{ action_type: 'api_call', settings: { ...api, headers: { A: 5 } } }, /^body\.settings\.headers\.A must be string/],
    [{ action_type: 'api_call', settings: { ...api, body: 'text' } }, /^body\.settings\.body must be object/]
  ]
  for (const [payload, message] of cases) {
    const res = await app.inject({ method: 'POST', url, headers: account.headers, payload })
    t.equal(res.statusCode, 400, message.source)
    t.match(res.json(), { statusCode: 400, message })
  }

  const action = (await app.inject({ method: 'POST', url, headers: account.headers, payload: { action_type: 'api_call', settings: api } })).json()
  for (const [payload, message] of [
    [{ settings: { retry_schedule: [30] } }, /^body\.settings\.retry_schedule\.0 must be >= 60/],
    [{ settings: { url: 'ftp://x' } }, /^body\.settings\.url must be an absolute http/],
    [{ settings: { name: null } }, /^body\.settings\.name is required/],
    [{ settings: 'x' }, /^body\.settings must be object/],
    [{ is_active: 'yes' }, /^body\.is_active must be boolean/]
  ] as const) {
    const res = await app.inject({ method: 'PATCH', url: `${url}/${action._id}`, headers: account.headers, payload })
    t.equal(res.statusCode, 400, message.source)
    t.match(res.json().message, message)
  }
  const unchanged = await db.selectFrom('agent_actions').select('settings').where('id', '=', action._id).executeTakeFirstOrThrow()
  t.equal(unchanged.settings.url, api.url, 'a refused update changes nothing')
  t.equal((await db.selectFrom('agent_actions').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n, 1, 'refused creates store nothing')
})

t.test('actions of another account, or under another agent, are 404', async (t) => {
  const { app, db } = await setup(t)
  const a = await createAccount(db)
  const b = await createAccount(db)
  const agentA = await agentOf(app, a)
  const agentA2 = await agentOf(app, a)
  const agentB = await agentOf(app, b)
  const action = (await app.inject({ method: 'POST', url: `/v1/agent/${agentA}/actions`, headers: a.headers, payload: { action_type: 'send_email', settings: email } })).json()

  for (const [method, url, headers, payload] of [
    ['GET', `/v1/agent/${agentA}/actions`, b.headers],
    ['POST', `/v1/agent/${agentA}/actions`, b.headers, { action_type: 'send_email', settings: email }],
    ['PATCH', `/v1/agent/${agentA}/actions/${action._id}`, b.headers, { is_active: false }],
    ['DELETE', `/v1/agent/${agentA}/actions/${action._id}`, b.headers],
    ['PATCH', `/v1/agent/${agentB}/actions/${action._id}`, b.headers, { is_active: false }],
    ['PATCH', `/v1/agent/${agentA2}/actions/${action._id}`, a.headers, { is_active: false }],
    ['DELETE', `/v1/agent/${agentA2}/actions/${action._id}`, a.headers],
    ['PATCH', `/v1/agent/${agentA}/actions/${newId()}`, a.headers, { is_active: false }],
    ['POST', `/v1/agent/${newId()}/actions`, a.headers, { action_type: 'send_email', settings: email }]
  ] as const) {
    const res = await app.inject({ method, url, headers, payload })
    t.equal(res.statusCode, 404, `${method} ${url}`)
  }
  const stored = await db.selectFrom('agent_actions').selectAll().executeTakeFirstOrThrow()
  t.equal(stored.is_active, true, 'nothing changed')
})

t.test('an agent holds at most 20 actions and 30 tools, even when requests race', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const agentId = await agentOf(app, account)
  const post = (path: string, payload: object) => app.inject({ method: 'POST', url: `/v1/agent/${agentId}/${path}`, headers: account.headers, payload })

  const actions = await Promise.all(Array.from({ length: 23 }, (_, i) => post('actions', { action_type: 'send_email', settings: { ...email, name: `A${i}` } })))
  t.equal(actions.filter((r) => r.statusCode === 201).length, 20)
  const refused = actions.find((r) => r.statusCode !== 201)!
  t.equal(refused.statusCode, 409)
  t.match(refused.json(), { statusCode: 409, error: 'Conflict', code: 'action_limit_reached', message: /at most 20 actions/ })

  const tools = await Promise.all(Array.from({ length: 31 }, (_, i) => post('tools', { tool_type: 'end_call', settings: { name: `T${i}` } })))
  t.equal(tools.filter((r) => r.statusCode === 201).length, 30)
  t.match(tools.find((r) => r.statusCode !== 201)!.json(), { statusCode: 409, code: 'tool_limit_reached' })

  // Deleting one makes room again.
  const list = (await app.inject({ method: 'GET', url: `/v1/agent/${agentId}/actions`, headers: account.headers })).json()
  await app.inject({ method: 'DELETE', url: `/v1/agent/${agentId}/actions/${list[0]._id}`, headers: account.headers })
  t.equal((await post('actions', { action_type: 'send_email', settings: email })).statusCode, 201)
})
