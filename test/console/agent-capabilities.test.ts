import net from 'node:net'
import t, { type Test } from 'tap'
import type { LightMyRequestResponse } from 'fastify'
import { newId } from '../../src/db/ids.ts'
import { Webhook } from 'standardwebhooks'
import { ACTIONS, TOOLS } from '../../src/modules/capabilities/catalog.ts'
import { findCapability } from '../../src/modules/agents/queries.ts'
import { PRIVATE_ADDRESS_REFUSED } from '../../src/net/guard.ts'
import { createApiKey, type User } from '../../src/modules/users/queries.ts'
import { setup, type TestContext } from '../helpers/app.ts'
import { ConsoleClient, createConsoleUser, csrfOf, PASSWORD } from '../helpers/console-client.ts'
import { startReceiver } from '../helpers/receiver.ts'

// An agent's actions and tools in the console (docs/console.md, "Agents: settings, actions and tools").
// Deliveries may reach 127.0.0.1 here (DELIVERY_ALLOW_PRIVATE_NETWORKS, as in the deliveries' tests): the Test
// button's receiver is a local server.

const LOCAL = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIMEOUT_MS: '2000' }

const AGENT = { agent_name: 'Front desk', begin_message: '', general_prompt: 'Be kind.', language: 'en-US', voice_id: '65a0f0000000000000000001', webhook_url: '', status: 'active' }

async function signedIn (ctx: TestContext) {
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id, { name: 'test' })
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const api = async (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
    await ctx.app.inject({ method, url, headers: { 'x-api-key': key }, ...(payload !== undefined && { payload }) })
  return { user, browser, api }
}

const idIn = (location: unknown, pattern: RegExp) => {
  const id = pattern.exec(String(location))?.[1]
  if (id === undefined) throw new Error(`no id in ${String(location)}`)
  return id
}

async function newAgent (browser: ConsoleClient, name = AGENT.agent_name): Promise<string> {
  const res = await browser.submit('/agents/new', '/agents', { ...AGENT, agent_name: name })
  return idIn(res.headers.location, /^\/agents\/([0-9a-f]{24})\?saved=1$/)
}

/** The form of a new action or tool of `type`, filled in with `fields` and sent; answers the response. */
async function create (browser: ConsoleClient, agentId: string, path: 'actions' | 'tools', type: string, fields: Record<string, string>) {
  const page = await browser.get(`/agents/${agentId}/${path}/new?type=${type}`)
  if (page.statusCode !== 200) throw new Error(`${type}: ${page.statusCode}\n${page.body}`)
  return await browser.post(`/agents/${agentId}/${path}`, { csrf_token: csrfOf(page.body), type, ...fields })
}

const API_CALL = (url: string) => ({
  'settings.name': 'Sync <CRM>',
  'settings.url': `${url}/calls/{{call_id}}`,
  'settings.method': 'POST',
  'settings.headers': '2',
  'settings.headers.0.name': 'Authorization',
  'settings.headers.0.value': 'Bearer s3cret-value',
  'settings.headers.1.name': '',
  'settings.headers.1.value': '',
  'settings.query': '1',
  'settings.query.0.name': 'source',
  'settings.query.0.value': 'console',
  'settings.body': '{"people": "{{people}}", "note": "from the console"}',
  'settings.send_only_custom_fields': 'true',
  retry: 'custom',
  'settings.retry_schedule': '60, 300',
  'settings.notify': 'every_attempt',
  'settings.notify_email': 'ops@example.com',
  'settings.condition': 'The caller booked a table.',
  is_active: 'true'
})

/**
 * A refused form (Post/Redirect/Get): 303 to `page` with its draft, opened at the problems; answers that page as a
 * browser following the redirect shows it.
 */
async function refused (t: Test, browser: ConsoleClient, res: LightMyRequestResponse, page: string) {
  t.equal(res.statusCode, 303, `refused: ${res.body.slice(0, 500)}`)
  const location = String(res.headers.location)
  t.match(location, new RegExp(`^${page.replace(/[?]/g, '\\?')}[?&]draft=[0-9a-f]{24}#form-problems$`), 'to the form\'s page with its draft')
  const shown = await browser.get(location.replace(/#.*$/, ''))
  t.equal(shown.statusCode, 200)
  t.match(shown.body, 'id="form-problems"')
  return shown
}

async function storedHeaders (ctx: TestContext, user: User, agentId: string, actionId: string) {
  return (await findCapability(ctx.db, user.id, ACTIONS, agentId, actionId))!.settings.headers
}

t.test('an API call action: created, shown without its header values, edited, its headers kept, replaced and removed, deleted', async (t) => {
  const ctx = await setup(t, LOCAL)
  const { user, browser, api } = await signedIn(ctx)
  const agentId = await newAgent(browser)

  const agentPage = await browser.get(`/agents/${agentId}`)
  t.match(agentPage.body, /<h2 id="actions-title">Actions<\/h2>/)
  t.match(agentPage.body, 'No actions yet.')
  t.match(agentPage.body, `<form method="get" action="/agents/${agentId}/actions/new" class="inline">`)
  t.match(agentPage.body, '<option value="api_call">API call</option>')

  const form = await browser.get(`/agents/${agentId}/actions/new?type=api_call`)
  t.equal(form.statusCode, 200)
  for (const label of ['settings-name', 'settings-url', 'settings-method', 'settings-body', 'settings-send_only_custom_fields', 'retry', 'settings-retry_schedule', 'settings-notify', 'settings-notify_email', 'settings-condition', 'is_active']) {
    t.match(form.body, `<label for="${label}">`, `${label} has a label`)
  }
  t.match(form.body, 'aria-label="Name of header 1"')
  t.match(form.body, '<option value="POST" selected>POST</option>', 'the defaults are filled in')

  const created = await create(browser, agentId, 'actions', 'api_call', API_CALL('https://hooks.example.test'))
  t.equal(created.statusCode, 303, created.body)
  const actionId = idIn(created.headers.location, new RegExp(`^/agents/${agentId}/actions/([0-9a-f]{24})\\?saved=1$`))
  const [action] = (await api('GET', `/v1/agent/${agentId}/actions`)).json()
  t.match(action, {
    _id: actionId,
    action_type: 'api_call',
    is_active: true,
    settings: {
      name: 'Sync <CRM>', url: 'https://hooks.example.test/calls/{{call_id}}', method: 'POST', headers: { Authorization: '********' },
      query: { source: 'console' }, body: { people: '{{people}}', note: 'from the console' }, send_only_custom_fields: true,
      retry_schedule: [60, 300], notify: 'every_attempt', notify_email: 'ops@example.com', condition: 'The caller booked a table.'
    }
  })
  t.same(await storedHeaders(ctx, user, agentId, actionId), { Authorization: 'Bearer s3cret-value' })

  const page = await browser.get(`/agents/${agentId}/actions/${actionId}?saved=1`)
  t.equal(page.statusCode, 200)
  t.match(page.body, /<h1>API call: Sync &lt;CRM&gt;<\/h1>/)
  t.match(page.body, 'Saved.')
  t.notMatch(page.body, 's3cret', 'a header value is never rendered')
  t.notMatch(page.body, '********', 'not even masked')
  t.match(page.body, '<code>Authorization</code>')
  t.match(page.body, 'aria-label="Remove Authorization"')
  t.match(page.body, '&quot;people&quot;: &quot;{{people}}&quot;')
  t.match(page.body, 'value="60, 300"')
  t.match(page.body, '<option value="custom" selected>')
  t.match((await browser.get(`/agents/${agentId}`)).body, `<a href="/agents/${agentId}/actions/${actionId}">Sync &lt;CRM&gt;</a></td><td>API call</td><td>active, after the call</td>`)

  // Kept: the stored value left empty; a new header beside it; optional members emptied return to their defaults.
  const edit = {
    'settings.name': 'Sync', 'settings.url': 'https://hooks.example.test/v2', 'settings.method': 'PUT',
    'settings.headers': '3', 'settings.headers.0.name': 'Authorization', 'settings.headers.0.stored': 'true', 'settings.headers.0.value': '',
    'settings.headers.1.name': 'X-Extra', 'settings.headers.1.value': 'extra-value', 'settings.headers.2.name': '', 'settings.headers.2.value': '',
    'settings.query': '1', 'settings.query.0.name': '', 'settings.query.0.value': '', 'settings.body': '',
    'settings.send_only_custom_fields': 'false', retry: 'default', 'settings.retry_schedule': '', 'settings.notify': 'never',
    'settings.notify_email': '', 'settings.condition': '', is_active: 'false'
  }
  const edited = await browser.submit(`/agents/${agentId}/actions/${actionId}`, `/agents/${agentId}/actions/${actionId}`, edit)
  t.equal(edited.statusCode, 303, edited.body)
  const after = (await api('GET', `/v1/agent/${agentId}/actions`)).json()[0]
  t.same(after.settings, {
    name: 'Sync', when: 'after_call', url: 'https://hooks.example.test/v2', method: 'PUT', headers: { Authorization: '********', 'X-Extra': '********' }, query: {}, body: {},
    send_only_custom_fields: false, notify: 'never', notify_email: null, condition: null
  }, 'no retry_schedule: the default schedule')
  t.equal(after.is_active, false)
  t.same(await storedHeaders(ctx, user, agentId, actionId), { Authorization: 'Bearer s3cret-value', 'X-Extra': 'extra-value' })

  const removed = await browser.submit(`/agents/${agentId}/actions/${actionId}`, `/agents/${agentId}/actions/${actionId}`, {
    ...edit, 'settings.headers.0.remove': 'true', 'settings.headers.1.stored': 'true', 'settings.headers.1.value': 'replaced', retry: 'none'
  })
  t.equal(removed.statusCode, 303)
  t.same(await storedHeaders(ctx, user, agentId, actionId), { 'X-Extra': 'replaced' })
  t.same((await api('GET', `/v1/agent/${agentId}/actions`)).json()[0].settings.retry_schedule, [], 'none: one attempt')

  // During the call: when, and the parameters the model gives, as JSON Schema typed in the form.
  const parameters = { type: 'object', properties: { order_id: { type: 'string', description: 'the order number' } }, required: ['order_id'] }
  const liveEdit = { ...edit, 'settings.headers': '0' }
  const live = await browser.submit(`/agents/${agentId}/actions/${actionId}`, `/agents/${agentId}/actions/${actionId}`, { ...liveEdit, 'settings.when': 'both', 'settings.parameters': JSON.stringify(parameters) })
  t.equal(live.statusCode, 303, live.body)
  t.match((await api('GET', `/v1/agent/${agentId}/actions`)).json()[0].settings, { when: 'both', parameters })
  t.match((await browser.get(`/agents/${agentId}`)).body, '<td>API call</td><td>inactive</td>')
  const livePage = await browser.get(`/agents/${agentId}/actions/${actionId}`)
  t.match(livePage.body, '<label for="settings-parameters">Parameters during the call (JSON Schema)</label>')
  t.match(livePage.body, '&quot;order_id&quot;')
  t.match(livePage.body, '<option value="both" selected>During and after the call</option>')
  for (const [text, message] of [['{"type": ', /The parameters is not valid JSON/], ['[1]', /The parameters must be a JSON object/], ['{"type": "object", "properties": {"call_id": {"type": "string"}}}', /call_id.*is a built-in call variable/]] as const) {
    const bad = await browser.post(`/agents/${agentId}/actions/${actionId}`, { ...liveEdit, csrf_token: csrfOf(livePage.body), 'settings.parameters': text })
    t.match((await refused(t, browser, bad, `/agents/${agentId}/actions/${actionId}`)).body, message, text)
  }
  const cleared = await browser.submit(`/agents/${agentId}/actions/${actionId}`, `/agents/${agentId}/actions/${actionId}`, { ...liveEdit, 'settings.parameters': '' })
  t.equal(cleared.statusCode, 303)
  t.equal((await api('GET', `/v1/agent/${agentId}/actions`)).json()[0].settings.parameters, undefined, 'emptied: none')

  const deleted = await browser.post(`/agents/${agentId}/actions/${actionId}/delete`, { csrf_token: csrfOf(page.body) })
  t.equal(deleted.statusCode, 303)
  t.equal(deleted.headers.location, `/agents/${agentId}#actions-title`, 'back to the agent\'s Actions')
  t.same((await api('GET', `/v1/agent/${agentId}/actions`)).json(), [])
  t.equal((await browser.get(`/agents/${agentId}/actions/${actionId}`)).statusCode, 404)
})

t.test('bad inputs: 303 to the form\'s draft, each message under its field, values kept but header values; nothing stored', async (t) => {
  const ctx = await setup(t, LOCAL)
  const { browser, api } = await signedIn(ctx)
  const agentId = await newAgent(browser)
  const good = API_CALL('https://hooks.example.test')
  const form = `/agents/${agentId}/actions/new?type=api_call`
  const refusedNew = async (fields: Record<string, string>, type = 'api_call') =>
    await refused(t, browser, await create(browser, agentId, 'actions', type, fields), `/agents/${agentId}/actions/new?type=${type}`)

  const sent = await create(browser, agentId, 'actions', 'api_call', {
    ...good,
    'settings.name': '',
    'settings.url': 'ftp://files.example.test',
    'settings.body': '{"people": ',
    'settings.headers.1.name': 'X-Second',
    'settings.query.0.name': '',
    'settings.retry_schedule': '60, 5',
    'settings.notify': 'sometimes',
    'settings.notify_email': 'nobody'
  })
  const res = await refused(t, browser, sent, form)
  t.match(res.body, /<h2>\d+ fields need another look<\/h2>/, 'the problems at the top')
  t.match(res.body, '<li><a href="#settings-url">The URL must be an absolute http:// or https:// URL ({{variables}} allowed).</a></li>', 'each a link to its field')
  t.match(res.body, '<p id="settings-name-error" class="field-error">The name is required.</p>')
  t.match(res.body, '<p id="settings-url-error" class="field-error">The URL must be an absolute http:// or https:// URL ({{variables}} allowed).</p>')
  t.match(res.body, /<p id="settings-body-error" class="field-error">The body is not valid JSON: [^<]+\.<\/p>/)
  t.match(res.body, 'aria-describedby="settings-body-hint settings-body-error" aria-invalid="true"')
  t.match(res.body, '<p id="settings-headers-1-value-error" class="field-error">Give X-Second a value.</p>')
  t.match(res.body, '<p id="settings-query-0-name-error" class="field-error">Give this parameter a name.</p>')
  t.match(res.body, '<p id="settings-retry_schedule-error" class="field-error">Each pause must be 60 to 604800 seconds.</p>')
  t.match(res.body, '<p id="settings-notify-error" class="field-error">The failure e-mails must be one of the listed choices.</p>')
  t.match(res.body, '<p id="settings-notify_email-error" class="field-error">The failure e-mail recipient must be an e-mail address.</p>')
  t.match(res.body, 'value="ftp://files.example.test"', 'the values sent are kept')
  t.match(res.body, '>\n{&quot;people&quot;: </textarea>')
  t.notMatch(res.body, 's3cret', 'but never a header value')
  const drafts = await ctx.db.selectFrom('console_drafts').selectAll().execute()
  t.equal(drafts.length, 1)
  t.notMatch(JSON.stringify(drafts), 's3cret', 'nor is one kept aside with the draft')
  const reload = await browser.get(String(sent.headers.location).replace(/#.*$/, ''))
  t.equal(reload.body, res.body, 'a reload shows the same draft')
  t.same((await api('GET', `/v1/agent/${agentId}/actions`)).json(), [], 'and creates nothing')
  const fresh = await browser.get(form)
  t.notMatch(fresh.body, 'ftp://files.example.test', 'without the draft\'s address: the empty form')
  const badDraft = await browser.get(`${form}&draft=not-a-draft`)
  t.equal(badDraft.statusCode, 400)
  t.match(badDraft.body, 'The draft is not in the expected form. Check the address')
  // Another person with the draft's id, on their own agent's form: the empty form.
  const stranger = await signedIn(ctx)
  const theirs = await stranger.browser.get(String(sent.headers.location).replace(/#.*$/, '').replace(agentId, await newAgent(stranger.browser)))
  t.equal(theirs.statusCode, 200)
  t.notMatch(theirs.body, 'ftp://files.example.test', 'another session never sees the draft')

  t.match((await refusedNew({ ...good, 'settings.body': '[1, 2]' })).body, 'The body must be a JSON object')
  t.match((await refusedNew({ ...good, 'settings.body': '{"a": "\\u0000"}' })).body, 'The body holds a NUL character or an unpaired surrogate.')
  t.match((await refusedNew({ ...good, 'settings.body': `${'{"a":'.repeat(100)}1${'}'.repeat(100)}` })).body, 'The body nests deeper than 64 levels.')
  t.match((await refusedNew({ ...good, 'settings.headers.0.name': 'Host' })).body, '<p id="settings-headers-0-name-error" class="field-error">Host is set by Switchboard and cannot be configured.</p>')
  t.match((await refusedNew({ ...good, 'settings.headers.0.name': 'Bad Name' })).body, '<p id="settings-headers-0-name-error" class="field-error">This is not a valid header name.</p>')
  const sms = await refusedNew({ 'settings.name': 'Text', 'settings.message': 'Hi', 'settings.send_to_customer': 'false', 'settings.direct_recipients': '', is_active: 'true' }, 'send_sms')
  t.match(sms.body, '<div id="form-problems" class="notice error" role="alert" tabindex="-1"><p>This action needs a recipient: send_to_customer true or at least one direct_recipients number.</p></div>', 'a check of the API beyond the schema')
  t.match(sms.body, '<textarea', 'the form under it')
  const teleport = await browser.get(`/agents/${agentId}/actions/new?type=teleport`)
  t.equal(teleport.statusCode, 400)
  t.match(teleport.body, 'Choose one of the action types: ')
  t.match((await create(browser, agentId, 'actions', 'api_call', good)).statusCode, 303)
  t.equal((await api('GET', `/v1/agent/${agentId}/actions`)).json().length, 1, 'only the good one was stored')
})

t.test('the other action types and a tool of each type: created, edited, deleted; the limits answer 409', async (t) => {
  const ctx = await setup(t, LOCAL)
  const { browser, api } = await signedIn(ctx)
  const agentId = await newAgent(browser)
  const otherId = await newAgent(browser, 'Billing')

  const actions: Record<string, Record<string, string>> = {
    send_email: { 'settings.name': 'Mail', 'settings.subject': 'Your call', 'settings.message': 'Thanks, {{customer_email}}', 'settings.direct_recipients': 'a@example.com\nb@example.com' },
    send_sms: { 'settings.name': 'Text', 'settings.message': 'Thanks!', 'settings.send_to_customer': 'true', 'settings.direct_recipients': '+14155550100' },
    send_chat: { 'settings.name': 'Chat', 'settings.message': 'Thanks!', 'settings.send_to_customer': 'true', 'settings.direct_recipients': '' }
  }
  const tools: Record<string, Record<string, string>> = {
    call_forwarding: { 'settings.name': 'Forward', 'settings.phone_number': '+14155550123', 'settings.transfer_message': 'One moment', 'settings.timeout_seconds': '20', 'settings.show_caller_number': 'true' },
    end_call: { 'settings.name': 'Bye', 'settings.description': 'When the caller is done' },
    agent_transfer: { 'settings.name': 'To billing', 'settings.agent_id': otherId, 'settings.phone_number': '' },
    mcp: { 'settings.name': 'Tools', 'settings.server_url': 'https://mcp.example.test/sse', 'settings.allowed_tools': 'lookup\nbook', 'settings.headers': '1', 'settings.headers.0.name': 'X-Key', 'settings.headers.0.value': 'mcp-secret' }
  }
  const expected: Record<string, object> = {
    send_email: { subject: 'Your call', direct_recipients: ['a@example.com', 'b@example.com'] },
    send_sms: { send_to_customer: true, direct_recipients: ['+14155550100'] },
    send_chat: { direct_recipients: [] },
    call_forwarding: { phone_number: '+14155550123', timeout_seconds: 20, show_caller_number: true },
    agent_transfer: { agent_id: otherId },
    mcp: { allowed_tools: ['lookup', 'book'], headers: { 'X-Key': '********' } }
  }
  for (const [path, types] of [['actions', actions], ['tools', tools]] as const) {
    for (const [type, fields] of Object.entries(types)) {
      const res = await create(browser, agentId, path, type, { is_active: 'true', ...fields })
      t.equal(res.statusCode, 303, `${type} created: ${res.body.slice(0, 2000)}`)
      const id = idIn(res.headers.location, /\/([0-9a-f]{24})\?saved=1$/)
      const item = (await api('GET', `/v1/agent/${agentId}/${path}`)).json().find((row: { _id: string }) => row._id === id)
      t.match(item.settings, { name: fields['settings.name'], ...expected[type] }, `${type} stored as the API stores it`)
      const page = await browser.get(`/agents/${agentId}/${path}/${id}`)
      t.equal(page.statusCode, 200, `${type} page`)
      t.notMatch(page.body, 'mcp-secret')
      const renamed = await browser.post(`/agents/${agentId}/${path}/${id}`, { csrf_token: csrfOf(page.body), 'settings.name': `${fields['settings.name']} (2)` })
      t.equal(renamed.statusCode, 303, `${type} edited`)
      t.match((await api('GET', `/v1/agent/${agentId}/${path}`)).json().find((row: { _id: string }) => row._id === id).settings, { name: `${fields['settings.name']} (2)`, ...expected[type] }, `${type}: the other members kept`)
    }
  }
  const listed = await browser.get(`/agents/${agentId}`)
  t.match(listed.body, '4 of at most 30.')
  for (const type of ['appointment_booking', 'calendar_one', 'calendar_two', 'booking_one', 'booking_two', 'crm']) t.match(listed.body, `<option value="${type}">`, `${type} acts: offered`)

  const transfer = `/agents/${agentId}/tools/new?type=agent_transfer`
  const both = await create(browser, agentId, 'tools', 'agent_transfer', { 'settings.name': 'Both', 'settings.agent_id': otherId, 'settings.phone_number': '+14155550123', is_active: 'true' })
  t.match((await refused(t, browser, both, transfer)).body, 'This tool needs one of agent_id (another agent here) and phone_number (a number to put the call through to), not both.')
  const self = await create(browser, agentId, 'tools', 'agent_transfer', { 'settings.name': 'Self', 'settings.agent_id': agentId, is_active: 'true' })
  t.match((await refused(t, browser, self, transfer)).body, 'The agent must be one of the listed choices.', 'only the other agents are offered')
  t.equal((await browser.get(`/agents/${agentId}/tools/new?type=teleport`)).statusCode, 400, 'a type that does not exist has no form')

  // Up to the limit through the API, then the console's form answers 409 with the API's message.
  for (let i = 4; i < 30; i++) t.equal((await api('POST', `/v1/agent/${agentId}/tools`, { tool_type: 'end_call', settings: { name: `End ${i}` } })).statusCode, 201)
  t.notMatch((await browser.get(`/agents/${agentId}`)).body, `/agents/${agentId}/tools/new`, 'no add form at the limit')
  t.equal((await browser.get(`/agents/${agentId}/tools/new?type=end_call`)).statusCode, 409)
  const full = await create(browser, otherId, 'tools', 'end_call', { 'settings.name': 'Fine' })
  t.equal(full.statusCode, 303, 'the limit is per agent')
  const page = await browser.get(`/agents/${otherId}/tools/new?type=end_call`)
  const over = await browser.post(`/agents/${agentId}/tools`, { csrf_token: csrfOf(page.body), type: 'end_call', 'settings.name': 'One more' })
  const overPage = await refused(t, browser, over, `/agents/${agentId}/tools/new?type=end_call`)
  t.match(overPage.body, 'An agent has at most 30 tools; delete one before adding another.', 'the draft comes back at the limit')
  t.match(overPage.body, 'value="One more"', 'with what was typed')

  const tool = (await api('GET', `/v1/agent/${agentId}/tools`)).json()[0]
  t.equal((await browser.post(`/agents/${agentId}/tools/${tool._id as string}/delete`, { csrf_token: csrfOf(page.body) })).statusCode, 303)
  t.equal((await api('GET', `/v1/agent/${agentId}/tools`)).json().length, 29)
})

t.test('the Test button: a local receiver\'s outcome on the page; a 500 answer and a refused connection too', async (t) => {
  const ctx = await setup(t, LOCAL)
  const { browser, api } = await signedIn(ctx)
  const agentId = await newAgent(browser)
  // A data-retrieval field: the sample call fills {{people}} with a sample number.
  t.equal((await api('PATCH', `/v1/agent/${agentId}`, { data_retrieval: [{ name: 'people', type: 'number' }] })).statusCode, 200)
  const receiver = await startReceiver(t)
  receiver.answers.push({ status: 200, body: '{"received": "<yes>"}' }, { status: 500, body: 'receiver broke' })
  const created = await create(browser, agentId, 'actions', 'api_call', API_CALL(receiver.url))
  const actionUrl = `/agents/${agentId}/actions/${idIn(created.headers.location, /\/([0-9a-f]{24})\?saved=1$/)}`

  const page = await browser.get(actionUrl)
  t.match(page.body, `<form method="post" action="${actionUrl}/test#test-result" data-test-action>`)
  const ok = await browser.post(`${actionUrl}/test`, { csrf_token: csrfOf(page.body) })
  t.equal(ok.statusCode, 200)
  t.match(ok.body, /<div id="test-result" tabindex="-1" role="status" aria-live="polite"><div class="notice success">\s*<h3>Delivered: the answer's status is 200<\/h3>/, 'the result right under the button')
  // The request as sent: the method, the URL with its query values masked, the headers (the action's values and the signature masked) and the body.
  t.match(ok.body, /<pre class="preview test-request">POST http:\/\/127\.0\.0\.1:\d+\/calls\/0{24}\?source=\*{8}\nAuthorization: \*{8}\n/)
  t.match(ok.body, /webhook-signature: \*{8}\n/)
  t.match(ok.body, /content-type: application\/json; charset=utf-8\n\n\{&quot;note&quot;:&quot;from the console&quot;,&quot;people&quot;:42\}<\/pre>/)
  t.notMatch(ok.body, 's3cret-value', 'the stored header value is not shown')
  t.match(ok.body, /<dt>Duration<\/dt><dd>\d+ ms<\/dd>/)
  t.match(ok.body, '<pre class="preview">{&quot;received&quot;: &quot;&lt;yes&gt;&quot;}</pre>', 'the answer escaped')
  const [sent] = await receiver.waitFor(1)
  t.equal(sent.headers.authorization, 'Bearer s3cret-value', 'the stored header value is sent')
  t.same(sent.json, { people: 42, note: 'from the console' }, 'only my fields, {{people}} with its type')

  const failed = await browser.post(`${actionUrl}/test`, { csrf_token: csrfOf(page.body) })
  t.equal(failed.statusCode, 200)
  t.match(failed.body, /<div class="notice error">\s*<h3>Not delivered: the answer's status is 500<\/h3>/)
  t.match(failed.body, 'receiver broke')
  // The button's script asks for the result alone (static/action-test.js) and puts it under the button.
  const fragment = await browser.post(`${actionUrl}/test`, { csrf_token: csrfOf(page.body) }, { 'x-console-fragment': 'test' })
  t.equal(fragment.statusCode, 200)
  t.match(fragment.body, /^<div class="notice (success|error)">\s*<h3>/, 'only the result, no page around it')
  t.notMatch(fragment.body, '<html')

  // A port that nobody listens on: taken, then freed.
  const closed = await new Promise<number>((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
  // Another origin: the stored header value must be typed again.
  const edit = { ...API_CALL(`http://127.0.0.1:${closed}`), 'settings.headers.0.stored': 'true', 'settings.headers.0.value': 'Bearer s3cret-value' }
  t.equal((await browser.post(actionUrl, { csrf_token: csrfOf(page.body), ...edit })).statusCode, 303)
  const refused = await browser.post(`${actionUrl}/test`, { csrf_token: csrfOf(page.body) })
  t.equal(refused.statusCode, 200)
  t.match(refused.body, '<dt>Error</dt><dd>the receiver could not be reached</dd>')
  t.notMatch(refused.body, '<dt>Status</dt>')
  t.equal(receiver.received.length, 3, 'nothing more reached the receiver')

  const email = await create(browser, agentId, 'actions', 'send_email', { 'settings.name': 'Mail', 'settings.subject': 'S', 'settings.message': 'M', 'settings.direct_recipients': 'a@example.com' })
  const emailUrl = String(email.headers.location).replace(/\?saved=1$/, '')
  t.notMatch((await browser.get(emailUrl)).body, '>Test</button>', 'only an API call has a Test button')
  t.equal((await browser.post(`${emailUrl}/test`, { csrf_token: csrfOf(page.body) })).statusCode, 400)
})

t.test('CSRF: without or with a wrong token, 403 and nothing changes', async (t) => {
  const ctx = await setup(t, LOCAL)
  const { browser, api } = await signedIn(ctx)
  const agentId = await newAgent(browser)
  const created = await create(browser, agentId, 'actions', 'api_call', API_CALL('https://hooks.example.test'))
  const actionUrl = String(created.headers.location).replace(/\?saved=1$/, '')
  for (const [url, form] of [
    [`/agents/${agentId}/actions`, { type: 'api_call', ...API_CALL('https://hooks.example.test') }],
    [actionUrl, { 'settings.name': 'Forged' }],
    [`${actionUrl}/delete`, {}],
    [`${actionUrl}/test`, {}],
    [`/agents/${agentId}/tools`, { type: 'end_call', 'settings.name': 'Forged' }]
  ] as const) {
    t.equal((await browser.post(url, form)).statusCode, 403, `${url} without a token`)
    t.equal((await browser.post(url, { ...form, csrf_token: 'wrong' })).statusCode, 403, `${url} with a wrong token`)
  }
  const actions = (await api('GET', `/v1/agent/${agentId}/actions`)).json()
  t.equal(actions.length, 1)
  t.equal(actions[0].settings.name, 'Sync <CRM>')
  t.same((await api('GET', `/v1/agent/${agentId}/tools`)).json(), [])
})

t.test('another account\'s agents and actions, and unknown ids: 404 for every page and form', async (t) => {
  const ctx = await setup(t, LOCAL)
  const owner = await signedIn(ctx)
  const agentId = await newAgent(owner.browser)
  const created = await create(owner.browser, agentId, 'actions', 'api_call', API_CALL('https://hooks.example.test'))
  const actionId = idIn(created.headers.location, /\/([0-9a-f]{24})\?saved=1$/)
  const tool = await create(owner.browser, agentId, 'tools', 'end_call', { 'settings.name': 'Bye' })
  const toolId = idIn(tool.headers.location, /\/([0-9a-f]{24})\?saved=1$/)

  const { browser } = await signedIn(ctx)
  const mine = await newAgent(browser, 'Mine')
  const csrf = csrfOf((await browser.get('/agents')).body)
  const gets = [
    `/agents/${agentId}/actions/new?type=api_call`, `/agents/${agentId}/actions/${actionId}`, `/agents/${agentId}/tools/${toolId}`,
    `/agents/${mine}/actions/${actionId}`, `/agents/${mine}/tools/${toolId}`, `/agents/${mine}/actions/not-an-id`, '/agents/ffffffffffffffffffffffff/tools/new?type=end_call'
  ]
  for (const url of gets) {
    const res = await browser.get(url)
    t.equal(res.statusCode, 404, `GET ${url}`)
    t.equal(res.headers['content-type'], 'text/html; charset=utf-8', 'a page')
  }
  const posts = [
    `/agents/${agentId}/actions`, `/agents/${agentId}/actions/${actionId}`, `/agents/${agentId}/actions/${actionId}/delete`, `/agents/${agentId}/actions/${actionId}/test`,
    `/agents/${mine}/actions/${actionId}`, `/agents/${mine}/actions/${actionId}/delete`, `/agents/${mine}/actions/${actionId}/test`, `/agents/${mine}/tools/${toolId}/delete`
  ]
  for (const url of posts) {
    const res = await browser.post(url, { csrf_token: csrf, type: 'api_call', 'settings.name': 'Taken over' })
    t.equal(res.statusCode, 404, `POST ${url}`)
    t.equal(res.headers['content-type'], 'text/html; charset=utf-8')
    t.match(res.body, /You have no agent with that id|This agent has no (action|tool) with that id/)
    t.match(res.body, '<nav aria-label="Console">', 'the page in the layout of the person signed in')
  }
  // A malformed id is refused by the route's schema: the 404 page, before any lookup.
  const malformed = [
    `/agents/${mine}/actions/not-an-id`, '/agents/not-an-id/tools/new?type=end_call', `/agents/${mine.slice(0, 23)}/tools/${toolId}`
  ]
  for (const url of malformed) {
    const res = await browser.get(url)
    t.equal(res.statusCode, 404, `GET ${url}`)
    t.match(res.body, '<h1>Page not found</h1>')
    t.match(res.body, 'There is no page at this address')
  }
  for (const url of [`/agents/${mine}/actions/x${actionId}`, `/agents/${mine}/tools/${toolId}z/delete`, '/agents/-/actions', `/agents/${mine}/actions/${actionId.toUpperCase()}g/test`]) {
    const res = await browser.post(url, { csrf_token: csrf, type: 'api_call', 'settings.name': 'Taken over' })
    t.equal(res.statusCode, 404, `POST ${url}`)
    t.match(res.body, '<h1>Page not found</h1>')
  }
  t.equal((await owner.api('GET', `/v1/agent/${agentId}/actions`)).json()[0].settings.name, 'Sync <CRM>')
  t.equal((await owner.api('GET', `/v1/agent/${agentId}/tools`)).json().length, 1)
})

/** An owner with an agent in a workspace, and a second person signed in to that workspace with `role`. */
async function inWorkspace (ctx: TestContext, role: 'admin' | 'member') {
  const owner = await signedIn(ctx)
  const agentId = await newAgent(owner.browser)
  const workspace = newId()
  await ctx.db.insertInto('workspaces').values({ id: workspace, user_id: owner.user.id, name: 'Team' }).execute()
  await ctx.db.updateTable('agents').set({ workspace_id: workspace }).where('id', '=', agentId).execute()
  const other = await signedIn(ctx)
  await ctx.db.insertInto('workspace_members').values({ workspace_id: workspace, email: other.user.email, role, status: 'active', member_user_id: other.user.id, joined_at: new Date() }).execute()
  await ctx.db.updateTable('console_sessions').set({ workspace_id: workspace }).where('user_id', '=', other.user.id).execute()
  return { owner, agentId, other }
}

t.test('a workspace admin who moves the owner\'s action or tool to another origin never gets the stored header values', async (t) => {
  const ctx = await setup(t, LOCAL)
  const { owner, agentId, other: admin } = await inWorkspace(ctx, 'admin')
  const owners = await startReceiver(t)
  const admins = await startReceiver(t)
  const created = await create(owner.browser, agentId, 'actions', 'api_call', API_CALL(owners.url))
  const actionId = idIn(created.headers.location, /\/([0-9a-f]{24})\?saved=1$/)
  const actionUrl = `/agents/${agentId}/actions/${actionId}`
  const page = await admin.browser.get(actionUrl)
  t.equal(page.statusCode, 200)
  t.notMatch(page.body, 's3cret', 'the admin never sees the value')
  const csrf = csrfOf(page.body)
  const form = (url: string, value: string, extra: Record<string, string> = {}) =>
    ({ csrf_token: csrf, ...API_CALL(url), 'settings.headers.0.stored': 'true', 'settings.headers.0.value': value, ...extra })

  // The URL alone changes (the header's value left empty, "keep it"): refused, under the header, and nothing changes.
  const urlOnly = await refused(t, admin.browser, await admin.browser.post(actionUrl, form(admins.url, '')), actionUrl)
  t.match(urlOnly.body, /<input id="settings-headers-0-value"[^>]*aria-invalid="true"/)
  t.match(urlOnly.body, 'Cannot keep its stored value: stored header values go only to the origin they were given for')
  t.equal((await findCapability(ctx.db, owner.user.id, ACTIONS, agentId, actionId))!.settings.url, `${owners.url}/calls/{{call_id}}`)
  const test = async () => await admin.browser.post(`${actionUrl}/test`, { csrf_token: csrf })
  t.equal((await test()).statusCode, 200)
  t.equal(admins.received.length, 0, 'the admin\'s receiver got nothing')

  // The URL changes and the header is removed: saved, and the admin's receiver gets no Authorization.
  t.equal((await admin.browser.post(actionUrl, form(admins.url, '', { 'settings.headers.0.remove': 'true' }))).statusCode, 303)
  t.match((await test()).body, /<h3>Delivered/)
  const [bare] = await admins.waitFor(1)
  t.notOk('authorization' in bare.headers, 'no stored credential reached the admin\'s receiver')

  // Typed again with the new URL: sent (it is the admin's own value now).
  t.equal((await admin.browser.post(actionUrl, form(owners.url, '', { 'settings.headers.0.stored': 'false', 'settings.headers.0.value': 'Bearer typed-by-admin' }))).statusCode, 303)
  await test()
  t.equal(owners.received.at(-1)!.headers.authorization, 'Bearer typed-by-admin')

  // Only the path changes: the stored value is kept and sent.
  t.equal((await admin.browser.post(actionUrl, { ...form(owners.url, ''), 'settings.url': `${owners.url}/v2/{{call_id}}` })).statusCode, 303)
  await test()
  t.match(owners.received.at(-1), { url: /^\/v2\//, headers: { authorization: 'Bearer typed-by-admin' } })

  // The Test the admin pressed does not verify with the owner's delivery secret, only with the test secret.
  const secrets = (await owner.api('GET', '/v1/webhook-secret')).json()
  const last = owners.received.at(-1)!
  t.throws(() => new Webhook(secrets.secret).verify(last.body, last.headers as Record<string, string>))
  t.ok(new Webhook(secrets.test_secret).verify(last.body, last.headers as Record<string, string>))

  // An MCP tool: a new server origin with the header left empty is refused; removed, the new server gets nothing stored.
  const mcp = await create(owner.browser, agentId, 'tools', 'mcp', { 'settings.name': 'Tools', 'settings.server_url': `${owners.url}/mcp`, 'settings.headers': '1', 'settings.headers.0.name': 'X-Key', 'settings.headers.0.value': 'mcp-secret' })
  const toolId = idIn(mcp.headers.location, /\/([0-9a-f]{24})\?saved=1$/)
  const toolUrl = `/agents/${agentId}/tools/${toolId}`
  const toolForm = { csrf_token: csrf, 'settings.name': 'Tools', 'settings.server_url': `${admins.url}/mcp`, 'settings.headers': '1', 'settings.headers.0.name': 'X-Key', 'settings.headers.0.stored': 'true', 'settings.headers.0.value': '' }
  await refused(t, admin.browser, await admin.browser.post(toolUrl, toolForm), toolUrl)
  t.equal((await admin.browser.post(toolUrl, { ...toolForm, 'settings.headers.0.remove': 'true' })).statusCode, 303)
  t.match((await findCapability(ctx.db, owner.user.id, TOOLS, agentId, toolId))!.settings, { server_url: `${admins.url}/mcp`, headers: {} }, 'what a call would send to the admin\'s server holds no stored value')
})

t.test('Test to a private address with DELIVERY_ALLOW_PRIVATE_NETWORKS off: the page says so and names the setting', async (t) => {
  const ctx = await setup(t, { DELIVERY_TIMEOUT_MS: '2000' })
  const { browser } = await signedIn(ctx)
  const agentId = await newAgent(browser)
  const receiver = await startReceiver(t)
  const created = await create(browser, agentId, 'actions', 'api_call', API_CALL(receiver.url))
  const actionUrl = String(created.headers.location).replace(/\?saved=1$/, '')
  const page = await browser.get(actionUrl)
  const tested = await browser.post(`${actionUrl}/test`, { csrf_token: csrfOf(page.body) })
  t.equal(tested.statusCode, 200)
  t.match(tested.body, `<dt>Error</dt><dd>${PRIVATE_ADDRESS_REFUSED.replaceAll("'", '&#39;')}</dd>`)
  t.match(tested.body, 'DELIVERY_ALLOW_PRIVATE_NETWORKS=true')
  t.equal(receiver.received.length, 0)
})

t.test('a workspace member sees the workspace agent\'s actions and tools read-only and gets 403 on every change', async (t) => {
  const ctx = await setup(t, LOCAL)
  const owner = await signedIn(ctx)
  const agentId = await newAgent(owner.browser)
  const outside = await newAgent(owner.browser, 'Private')
  const created = await create(owner.browser, agentId, 'actions', 'api_call', API_CALL('https://hooks.example.test'))
  const actionUrl = String(created.headers.location).replace(/\?saved=1$/, '')
  const tool = await create(owner.browser, agentId, 'tools', 'mcp', { 'settings.name': 'Tools', 'settings.server_url': 'https://mcp.example.test', 'settings.headers': '1', 'settings.headers.0.name': 'X-Key', 'settings.headers.0.value': 'mcp-secret' })
  const toolUrl = String(tool.headers.location).replace(/\?saved=1$/, '')
  const outsideTool = String((await create(owner.browser, outside, 'tools', 'end_call', { 'settings.name': 'Bye' })).headers.location).replace(/\?saved=1$/, '')
  const workspace = newId()
  await ctx.db.insertInto('workspaces').values({ id: workspace, user_id: owner.user.id, name: 'Team' }).execute()
  await ctx.db.updateTable('agents').set({ workspace_id: workspace }).where('id', '=', agentId).execute()

  const member = await signedIn(ctx)
  await ctx.db.insertInto('workspace_members').values({ workspace_id: workspace, email: member.user.email, role: 'member', status: 'active', member_user_id: member.user.id, joined_at: new Date() }).execute()
  await ctx.db.updateTable('console_sessions').set({ workspace_id: workspace }).where('user_id', '=', member.user.id).execute()

  const agentPage = await member.browser.get(`/agents/${agentId}`)
  t.equal(agentPage.statusCode, 200)
  t.match(agentPage.body, 'Sync &lt;CRM&gt;</a>')
  t.match(agentPage.body, '>Tools</a>')
  t.notMatch(agentPage.body, '/actions/new', 'no add form')
  const action = await member.browser.get(actionUrl)
  t.equal(action.statusCode, 200)
  t.match(action.body, 'You are a member of this workspace: you can see this action, not change it.')
  t.match(action.body, '<fieldset class="plain" disabled>')
  t.notMatch(action.body, /<button type="submit">(Save|Test)<\/button>|Delete this action/, 'no change forms')
  t.notMatch(action.body, 's3cret')
  t.notMatch((await member.browser.get(toolUrl)).body, 'mcp-secret')

  // Query values, and a user name, password or query in a URL, are masked as the delivery log masks them.
  const keyed = { ...API_CALL('https://bot:pw-secret@hooks.example.test'), 'settings.url': 'https://bot:pw-secret@hooks.example.test/c?api_key=url-key-secret', 'settings.query.0.value': 'query-key-secret', 'settings.headers.0.stored': 'true', 'settings.headers.0.value': '' }
  t.equal((await owner.browser.post(actionUrl, { csrf_token: csrfOf((await owner.browser.get(actionUrl)).body), ...keyed })).statusCode, 303)
  const ownView = await owner.browser.get(actionUrl)
  t.match(ownView.body, 'query-key-secret', 'the owner, who may change them, sees them')
  const masked = await member.browser.get(actionUrl)
  t.notMatch(masked.body, /query-key-secret|url-key-secret|pw-secret|bot:/, 'the member sees no value')
  t.match(masked.body, 'value="https://********:********@hooks.example.test/c?api_key=********"')
  t.match(masked.body, /name="settings\.query\.0\.value" value="\*{8}"/)
  const getAction = await owner.api('PATCH', `/v1/agent/${agentId}/actions/${idIn(actionUrl, /\/([0-9a-f]{24})$/)}`, { settings: { method: 'GET', body: { token: 'body-key-secret' } } })
  t.equal(getAction.statusCode, 200)
  t.notMatch((await member.browser.get(actionUrl)).body, 'body-key-secret', 'a GET\'s body travels in the query string: masked too')
  await owner.api('PATCH', `/v1/agent/${agentId}`, { webhook_url: 'https://hooks.example.test/agent?token=webhook-key-secret' })
  const agentView = await member.browser.get(`/agents/${agentId}`)
  t.notMatch(agentView.body, 'webhook-key-secret')
  t.match(agentView.body, 'https://hooks.example.test/agent?token=********')
  t.equal((await member.browser.get(outsideTool)).statusCode, 404, 'outside the workspace: as if it did not exist')
  t.equal((await member.browser.get(`/agents/${agentId}/tools/new?type=end_call`)).statusCode, 403)

  const csrf = csrfOf(agentPage.body)
  for (const [url, form] of [
    [`/agents/${agentId}/actions`, { type: 'api_call', ...API_CALL('https://hooks.example.test') }],
    [actionUrl, { 'settings.name': 'Changed' }],
    [`${actionUrl}/delete`, {}],
    [`${actionUrl}/test`, {}],
    [`${toolUrl}/delete`, {}]
  ] as const) {
    const res = await member.browser.post(url, { csrf_token: csrf, ...form })
    t.equal(res.statusCode, 403, `POST ${url}`)
    t.match(res.body, 'You can view this workspace but not change it.')
  }
  t.equal((await owner.api('GET', `/v1/agent/${agentId}/actions`)).json()[0].settings.name, 'Sync <CRM>')
  t.equal((await owner.api('GET', `/v1/agent/${agentId}/tools`)).json().length, 1)
})

t.test('a warm transfer in the console: the mode and the hold sound are labelled choices; warm needs a number', async (t) => {
  const ctx = await setup(t, LOCAL)
  const { browser, api } = await signedIn(ctx)
  const agentId = await newAgent(browser)
  const otherId = await newAgent(browser, 'Billing')
  const form = await browser.get(`/agents/${agentId}/tools/new?type=call_forwarding`)
  t.match(form.body, 'Transfer mode')
  t.match(form.body, 'On hold (warm)')
  t.match(form.body, /<option value="warm"/)
  t.match(form.body, /<option value="none"/)
  t.match(form.body, 'the caller waits on hold while the agent calls the person')
  const res = await create(browser, agentId, 'tools', 'call_forwarding', { is_active: 'true', 'settings.name': 'Desk', 'settings.phone_number': '+14155550123', 'settings.transfer_mode': 'warm', 'settings.hold_music': 'none' })
  t.equal(res.statusCode, 303, res.body.slice(0, 2000))
  t.match((await api('GET', `/v1/agent/${agentId}/tools`)).json()[0].settings, { transfer_mode: 'warm', hold_music: 'none' })
  const toAgent = await create(browser, agentId, 'tools', 'agent_transfer', { is_active: 'true', 'settings.name': 'Billing', 'settings.agent_id': otherId, 'settings.transfer_mode': 'warm' })
  t.match((await refused(t, browser, toAgent, `/agents/${agentId}/tools/new?type=agent_transfer`)).body, 'needs a phone_number')
})

t.test('knowledge has one place, the agent\'s Knowledge section: the tool pages neither offer nor change the search tool', async (t) => {
  const ctx = await setup(t, LOCAL)
  const { user, browser, api } = await signedIn(ctx)
  const agentId = await newAgent(browser)
  const kb = newId()
  await ctx.db.insertInto('knowledge_bases').values({ id: kb, user_id: user.id, name: 'Prices', description: 'The price list', language: 'en', search_config: 'simple' }).execute()
  const pointer = `Knowledge bases are given to the agent in its <a href="/agents/${agentId}#knowledge">Knowledge section</a>`

  const agentPage = await browser.get(`/agents/${agentId}`)
  t.notMatch(agentPage.body, '<option value="api_rag">', 'not a choice among the new tools')
  t.match(agentPage.body, '<option value="end_call">', 'the other tools are')
  t.match(agentPage.body, new RegExp(`</form>\\s*<p>${pointer.replace(/[?.]/g, '\\$&')}`), 'in its place: the way to the Knowledge section')
  t.match(agentPage.body, '<section aria-labelledby="knowledge-title" id="knowledge">', 'which the link opens')
  const csrf = csrfOf(agentPage.body)

  // Its address typed anyway: the way there, no form.
  const typed = await browser.get(`/agents/${agentId}/tools/new?type=api_rag`)
  t.equal(typed.statusCode, 200)
  t.match(typed.body, pointer)
  t.notMatch(typed.body, `<form method="post" action="/agents/${agentId}/tools"`)

  // A POST anyway: refused in words, pointing to the Knowledge section; a reload creates nothing.
  const forced = await browser.post(`/agents/${agentId}/tools`, { csrf_token: csrf, type: 'api_rag', 'settings.name': 'Prices', 'settings.knowledge_base_ids': '', [`settings.knowledge_base_ids.${kb}`]: 'true' })
  const forcedPage = await refused(t, browser, forced, `/agents/${agentId}/tools/new?type=api_rag`)
  t.match(forcedPage.body, 'The knowledge search tool (search_knowledge) is not added or changed here: tick the knowledge bases the agent searches in its Knowledge section.')
  t.match(forcedPage.body, pointer)
  t.equal((await browser.get(String(forced.headers.location).replace(/#.*$/, ''))).statusCode, 200)
  t.same((await api('GET', `/v1/agent/${agentId}/tools`)).json(), [], 'no search tool was made')

  // Ticked in the Knowledge section: the search tool is made there.
  const ticked = await browser.post(`/agents/${agentId}/knowledge`, { csrf_token: csrf, [`kb_${kb}`]: 'on' })
  t.equal(ticked.statusCode, 303)
  const [tool] = (await api('GET', `/v1/agent/${agentId}/tools`)).json()
  t.match(tool, { tool_type: 'api_rag', settings: { name: 'search_knowledge', knowledge_base_ids: [kb] } })
  const toolUrl = `/agents/${agentId}/tools/${tool._id as string}`
  t.match((await browser.get(`/agents/${agentId}`)).body, `<a href="${toolUrl}">search_knowledge</a></td><td>Knowledge-base search</td>`, 'listed with the tools')

  // Its own page says where it is managed, shows it read-only and offers neither Save nor Delete.
  const toolPage = await browser.get(toolUrl)
  t.equal(toolPage.statusCode, 200)
  t.match(toolPage.body, pointer)
  t.match(toolPage.body, '<fieldset class="plain" disabled>')
  t.notMatch(toolPage.body, /<button type="submit">Save<\/button>|Delete this tool/)
  t.notMatch(toolPage.body, 'You are a member of this workspace')

  // Its save and delete sent anyway: refused in words, the tool as it was.
  const save = await browser.post(toolUrl, { csrf_token: csrf, 'settings.name': 'Renamed', 'settings.top_k': '9' })
  const savePage = await refused(t, browser, save, toolUrl)
  t.match(savePage.body, 'is not added or changed here: tick the knowledge bases the agent searches in its Knowledge section.')
  t.match(savePage.body, 'value="search_knowledge"', 'the stored settings shown, not the ones sent')
  const remove = await browser.post(`${toolUrl}/delete`, { csrf_token: csrf })
  t.match((await refused(t, browser, remove, toolUrl)).body, 'tick the knowledge bases the agent searches in its Knowledge section')
  t.match((await api('GET', `/v1/agent/${agentId}/tools`)).json(), [{ _id: tool._id, settings: { name: 'search_knowledge', knowledge_base_ids: [kb] } }], 'unchanged')
})
