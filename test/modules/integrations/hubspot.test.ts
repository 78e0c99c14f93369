import t, { type Test } from 'tap'
import { createLogger } from '../../../src/logger.ts'
import { connectionOf } from '../../../src/modules/integrations/client.ts'
import { PROVIDER_INFO } from '../../../src/modules/integrations/providers.ts'
import { connectIntegration } from '../../../src/modules/integrations/queries.ts'
import { createAccount, setup, type Account, type TestContext } from '../../helpers/app.ts'
import { deliveries } from '../../helpers/deliveries.ts'
import { HUBSPOT_CLIENT, startHubSpotStandIn, type HubSpotStandIn } from '../../helpers/hubspot-standin.ts'
import { startOpenAiHttpStandin, type OpenAiHttpStandin } from '../../helpers/openai-http-standin.ts'
import { ConsoleClient, createConsoleUser, csrfOf, PASSWORD } from '../../helpers/console-client.ts'
import { poll } from '../../helpers/poll.ts'
import { startRealtimeStandin } from '../../helpers/realtime-standin.ts'
import { finishedCall, openWebCall, typedTurn, type WebCallClient } from '../../helpers/voice-client.ts'

// The CRM tool against HubSpot (issue 29), through the real protocols: the account connected through the API, a
// web call over the browser WebSocket whose model (the OpenAI stand-ins) is told who the caller is and calls the
// tool's functions, HubSpot's wire protocol answered by the stand-in on loopback, and the call logged after the call
// by the delivery engine.

const TOKEN = 'pat-na1-11111111-2222-3333-4444-555555555555'
const CALLER = '+14155550100'
const ENV = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIME_SCALE: '0.001', PUBLIC_BASE_URL: 'https://switchboard.example.com' }

interface World extends TestContext { url: string, hubspot: HubSpotStandIn, openai: OpenAiHttpStandin, account: Account }

/** The app (cascade engine, workers) with HubSpot's stand-in, and an account. */
async function world (t: Test, env: Record<string, string> = {}): Promise<World> {
  const hubspot = await startHubSpotStandIn(t)
  hubspot.privateTokens.add(TOKEN)
  const openai = await startOpenAiHttpStandin(t)
  const oauth = { HUBSPOT_AUTHORIZE_URL: `${hubspot.url}/oauth/authorize`, HUBSPOT_TOKEN_URL: `${hubspot.url}/oauth/v1/token`, HUBSPOT_CLIENT_ID: HUBSPOT_CLIENT.id, HUBSPOT_CLIENT_SECRET: HUBSPOT_CLIENT.secret }
  const ctx = await setup(t, { ...ENV, HUBSPOT_API_URL: hubspot.url, ...oauth, VOICE_ENGINE: 'cascade', STT_URL: openai.url, LLM_URL: openai.url, TTS_URL: openai.url, ...env }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  return { ...ctx, url, hubspot, openai, account: await createAccount(ctx.db) }
}

async function connectToken (w: World, token = TOKEN) {
  return await w.app.inject({ method: 'PUT', url: '/v1/integrations/crm', headers: w.account.headers, payload: { api_key: token } })
}

async function crmAgent (w: World, operations: string[], engine?: 'realtime') {
  const llm = (await w.app.inject({ method: 'POST', url: '/v1/llm', headers: w.account.headers, payload: { begin_message: 'Hello, this is the shop.', general_prompt: 'You are the shop.', ...(engine === undefined ? {} : { engine }) } })).json()
  const agent = (await w.app.inject({ method: 'POST', url: '/v1/agent', headers: w.account.headers, payload: { agent_name: 'Shop', llm_id: llm._id } })).json()
  const tool = await w.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: w.account.headers, payload: { tool_type: 'crm', settings: { name: 'CRM', operations } } })
  if (tool.statusCode !== 201) throw new Error(tool.body)
  return agent._id as string
}

/** A web call whose caller gave their number (dynamic_context.customer_phone), once the agent has greeted. */
async function webCall (w: World, agentId: string, dynamic: Record<string, string> = { customer_phone: CALLER }): Promise<{ callId: string, client: WebCallClient }> {
  const call = (await w.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: w.account.headers, payload: { agent_id: agentId, dynamic_context: dynamic } })).json()
  const client = await openWebCall(w.url, call.access_token)
  t.teardown(() => client.hangup())
  await client.waitFor('transcript', (e) => e.speaker === 'agent')
  return { callId: call._id, client }
}

const systemPrompt = (w: World, n = 0) => String(w.openai.requests.chat[n].body.messages[0].content)
const toolItems = (call: any) => call.transcription.filter((item: { speaker: string }) => item.speaker === 'tool')

t.test('connect with a private app token through the API; the account check (GET /account-info/v3/details) names the HubSpot account; a token HubSpot refuses is revoked', async (t) => {
  const w = await world(t)
  const connected = await connectToken(w)
  t.equal(connected.statusCode, 200, connected.body)
  const deps = { db: w.db, config: w.config, log: createLogger(w.config) }
  t.equal(await PROVIDER_INFO.crm.account(await connectionOf(deps, w.account.user.id, 'crm')), `HubSpot account ${w.hubspot.portalId}`)
  t.match(w.hubspot.requests.at(-1), { method: 'GET', path: '/account-info/v3/details', authorization: `Bearer ${TOKEN}` }, 'checked with the token as a Bearer token')

  await w.db.deleteFrom('integrations').execute()
  await connectIntegration(w.db, w.account.user.id, 'crm', { account_label: '', method: 'api_key', credentials: { api_key: 'pat-na1-wrong' } })
  await t.rejects(PROVIDER_INFO.crm.account(await connectionOf(deps, w.account.user.id, 'crm')), { message: /refused this account's connection \(HubSpot answered 401: Authentication credentials not found/ }, 'HubSpot\'s 401 INVALID_AUTHENTICATION: revoked')
})

t.test('the console: a CRM tool is added with its operations as checkboxes, once HubSpot is connected', async (t) => {
  const w = await world(t)
  const user = await createConsoleUser(w.db)
  await connectIntegration(w.db, user.id, 'crm', { account_label: 'HubSpot account 62515', method: 'api_key', credentials: { api_key: TOKEN } })
  const browser = new ConsoleClient(w.app)
  await browser.signIn(user.email, PASSWORD)
  const created = await browser.submit('/agents/new', '/agents', { agent_name: 'Front desk', begin_message: '', general_prompt: 'Be kind.', language: 'en-US', voice_id: '65a0f0000000000000000001', webhook_url: '', status: 'active' })
  const agentId = /^\/agents\/([0-9a-f]{24})/.exec(String(created.headers.location))?.[1]
  const page = await browser.get(`/agents/${agentId}/tools/new?type=crm`)
  t.equal(page.statusCode, 200)
  for (const operation of ['lookup_contact', 'create_contact', 'update_contact', 'log_call']) t.match(page.body, `name="settings.operations.${operation}"`, operation)
  t.match(page.body, 'greet a known caller by name')
  const saved = await browser.post(`/agents/${agentId}/tools`, { csrf_token: csrfOf(page.body), type: 'crm', 'settings.name': 'HubSpot', 'settings.operations': '', 'settings.operations.lookup_contact': 'true', 'settings.operations.log_call': 'true', is_active: 'true' })
  t.equal(saved.statusCode, 303, saved.body)
  const row = await w.db.selectFrom('agent_tools').select(['tool_type', 'settings', 'is_active']).where('agent_id', '=', agentId!).executeTakeFirst()
  t.match(row, { tool_type: 'crm', settings: { name: 'HubSpot', operations: ['lookup_contact', 'log_call'] }, is_active: true })
})

t.test('a known caller is greeted by name (cascade): the lookup finds the number stored in its national form, the prompt names them', async (t) => {
  const w = await world(t)
  t.equal((await connectToken(w)).statusCode, 200)
  const jane = w.hubspot.addContact({ firstname: 'Jane', lastname: 'Doe', email: 'jane@example.com', mobilephone: '4155550100', company: 'Acme' })
  w.hubspot.addContact({ firstname: 'Joe', lastname: 'Other', phone: '+14155550199' })
  const agentId = await crmAgent(w, ['lookup_contact'])
  w.openai.replies.push({ text: 'Good to hear from you, Jane.' })

  const { callId, client } = await webCall(w, agentId)
  await typedTurn(client, 'Hi, it is me.', /Jane/)
  t.match(systemPrompt(w), new RegExp(`The caller is Jane Doe of Acme, a known customer \\(HubSpot contact ${jane.id}\\); greet them by name\\.`))
  const search = w.hubspot.requests.find((r) => r.path === '/crm/v3/objects/contacts/search')
  t.match(search?.body.filterGroups, [
    { filters: [{ propertyName: 'phone', operator: 'EQ', value: CALLER }] },
    { filters: [{ propertyName: 'mobilephone', operator: 'EQ', value: CALLER }] },
    { filters: [{ propertyName: 'phone', operator: 'EQ', value: '4155550100' }] },
    { filters: [{ propertyName: 'mobilephone', operator: 'EQ', value: '4155550100' }] }
  ], 'phone and mobilephone, in E.164 and the national form')
  t.match(w.openai.requests.chat[0].body.tools, [{ function: { name: 'CRM_lookup' } }], 'the lookup function is offered')
  client.hangup()
  const done = await finishedCall(w.app, w.account.headers, callId)
  t.match(done.transcription.filter((item: { speaker: string }) => item.speaker === 'tool')[0], {
    content: `caller_lookup: found: Jane Doe (HubSpot contact ${jane.id})`,
    tool: { name: 'caller_lookup', type: 'crm', arguments: JSON.stringify({ phone: CALLER }), output: `found: Jane Doe (HubSpot contact ${jane.id})` }
  }, 'the lookup at the start of the call is a tool item of the transcript')
  t.equal((await deliveries(w, w.account)).total, 0, 'a tool that does not log calls has no post-call delivery')
})

t.test('a known caller is greeted by name (realtime): session.update\'s instructions name them', async (t) => {
  const realtime = await startRealtimeStandin(t)
  const w = await world(t, { REALTIME_URL: realtime.url, REALTIME_API_KEY: 'sk-realtime-test' })
  t.equal((await connectToken(w)).statusCode, 200)
  w.hubspot.addContact({ firstname: 'Jane', lastname: 'Doe', phone: CALLER })
  const agentId = await crmAgent(w, ['lookup_contact'], 'realtime')
  const { callId, client } = await webCall(w, agentId)
  const update = realtime.events.find((e) => e.type === 'session.update') as any
  t.match(update.session.instructions, /The caller is Jane Doe, a known customer \(HubSpot contact \d+\); greet them by name\./)
  client.hangup()
  await finishedCall(w.app, w.account.headers, callId)
})

t.test('a number two people share: the prompt names both and asks the agent to ask who is calling', async (t) => {
  const realtime = await startRealtimeStandin(t)
  const w = await world(t, { REALTIME_URL: realtime.url, REALTIME_API_KEY: 'sk-realtime-test' })
  t.equal((await connectToken(w)).statusCode, 200)
  w.hubspot.addContact({ firstname: 'Jane', lastname: 'Doe', phone: CALLER })
  w.hubspot.addContact({ firstname: 'John', lastname: 'Doe', mobilephone: CALLER })
  const agentId = await crmAgent(w, ['lookup_contact'], 'realtime')
  const { callId, client } = await webCall(w, agentId)
  const update = realtime.events.find((e) => e.type === 'session.update') as any
  t.match(update.session.instructions, /The caller's number belongs to several HubSpot contacts \((Jane Doe, John Doe|John Doe, Jane Doe)\): ask who is calling before using a name\./)
  t.notMatch(update.session.instructions, /greet them by name/)
  client.hangup()
  await finishedCall(w.app, w.account.headers, callId)
})

t.test('an unknown caller or a slow HubSpot: no greeting, and the call starts all the same', async (t) => {
  // The lookup's bound is 3 s times CALL_TIME_SCALE.
  const w = await world(t, { CALL_TIME_SCALE: '0.1' })
  t.equal((await connectToken(w)).statusCode, 200)
  const agentId = await crmAgent(w, ['lookup_contact'])
  w.openai.replies.push({ text: 'Welcome.' }, { text: 'Welcome back.' })
  // Nobody in HubSpot has the number.
  const first = await webCall(w, agentId)
  await typedTurn(first.client, 'Hello?', /Welcome\./)
  t.notMatch(systemPrompt(w), /The caller is/)
  first.client.hangup()
  await finishedCall(w.app, w.account.headers, first.callId)

  w.hubspot.addContact({ firstname: 'Jane', lastname: 'Doe', phone: CALLER })
  // HubSpot holds the search past the lookup's bound: the call does not wait for it.
  let release: (() => void) | undefined
  w.hubspot.beforeAnswer = async (request) => {
    if (request.path === '/crm/v3/objects/contacts/search') await new Promise<void>((resolve) => { release = resolve })
  }
  const second = await webCall(w, agentId)
  await typedTurn(second.client, 'Hello again?', /Welcome back/)
  t.notMatch(systemPrompt(w, 1), /The caller is/, 'the greeting is dropped, not waited for')
  release?.()
  second.client.hangup()
  const done = await finishedCall(w.app, w.account.headers, second.callId)
  t.match(done.transcription.find((item: { speaker: string }) => item.speaker === 'tool'), { tool: { name: 'caller_lookup', type: 'crm', error: /HubSpot could not be reached/ } }, 'the lookup given up is in the transcript')
})

t.test('a CRM tool needs HubSpot connected: 409 integration_not_connected before, 201 after', async (t) => {
  const w = await world(t)
  const llm = (await w.app.inject({ method: 'POST', url: '/v1/llm', headers: w.account.headers, payload: {} })).json()
  const agent = (await w.app.inject({ method: 'POST', url: '/v1/agent', headers: w.account.headers, payload: { agent_name: 'Shop', llm_id: llm._id } })).json()
  const add = async () => await w.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: w.account.headers, payload: { tool_type: 'crm', settings: { name: 'CRM', operations: ['log_call'] } } })
  const refused = await add()
  t.equal(refused.statusCode, 409)
  t.match(refused.json(), { code: 'integration_not_connected', message: /connect it first/ })
  t.equal((await connectToken(w)).statusCode, 200)
  t.equal((await add()).statusCode, 201)
})

t.test('save_contact creates the caller\'s contact with their number, then updates it; notes become a note on the contact', async (t) => {
  const w = await world(t)
  t.equal((await connectToken(w)).statusCode, 200)
  const agentId = await crmAgent(w, ['lookup_contact', 'create_contact', 'update_contact'])
  w.openai.replies.push(
    { toolCalls: [{ name: 'CRM_save_contact', arguments: { firstname: 'Ada', lastname: 'Lovelace', email: 'Ada@Example.com' } }] },
    { text: 'I have saved your details.' },
    { toolCalls: [{ name: 'CRM_save_contact', arguments: { company: 'Analytical Engines', notes: 'Wants a call back on Monday.' } }] },
    { text: 'I have noted your company.' }
  )
  const { callId, client } = await webCall(w, agentId)
  await typedTurn(client, 'I am Ada Lovelace, ada@example.com.', /saved your details/)
  t.notMatch(systemPrompt(w), /The caller is/, 'an unknown caller')
  t.equal(w.hubspot.contacts.size, 1)
  const [ada] = w.hubspot.contacts.values()
  t.match(ada.properties, { firstname: 'Ada', lastname: 'Lovelace', email: 'ada@example.com', phone: CALLER }, 'created with the caller\'s number')
  t.match(w.openai.requests.chat[1].body.messages.at(-1), { role: 'tool', content: new RegExp(`^Saved: HubSpot contact ${ada.id} \\(Ada Lovelace, ada@example.com, \\${CALLER}\\), created\\.$`) })

  await typedTurn(client, 'I work at Analytical Engines. Please call me back on Monday.', /noted your company/)
  t.equal(w.hubspot.contacts.size, 1, 'the same contact, updated')
  t.match(ada.properties, { company: 'Analytical Engines', firstname: 'Ada' })
  t.match([...w.hubspot.notes.values()], [{ properties: { hs_note_body: 'Wants a call back on Monday.' }, contactIds: [ada.id] }])
  t.match(w.openai.requests.chat[3].body.messages.at(-1), { role: 'tool', content: /, updated, with a note\.$/ })
  client.hangup()
  const done = await finishedCall(w.app, w.account.headers, callId)
  t.match(toolItems(done), [{ tool: { name: 'caller_lookup', type: 'crm', output: 'not found in HubSpot' } }, { tool: { name: 'CRM_save_contact', type: 'crm', output: /created/ } }, { tool: { name: 'CRM_save_contact', type: 'crm', output: /updated/ } }])
})

t.test('save_contact updates the contact an e-mail address names, even when the search has not indexed it yet (409 CONFLICT)', async (t) => {
  const w = await world(t)
  t.equal((await connectToken(w)).statusCode, 200)
  const agentId = await crmAgent(w, ['create_contact', 'update_contact'])
  const existing = w.hubspot.addContact({ firstname: 'Grace', email: 'grace@example.com' })
  // Just written: the search does not find it yet, the create meets the taken address.
  w.hubspot.unindexed.add(existing.id)
  w.openai.replies.push({ toolCalls: [{ name: 'CRM_save_contact', arguments: { firstname: 'Grace', lastname: 'Hopper', email: 'grace@example.com' } }] }, { text: 'Saved.' })
  const { callId, client } = await webCall(w, agentId, {})
  await typedTurn(client, 'Grace Hopper, grace@example.com.', /Saved/)
  t.equal(w.hubspot.contacts.size, 1, 'no second contact')
  t.match(existing.properties, { lastname: 'Hopper' })
  client.hangup()
  await finishedCall(w.app, w.account.headers, callId)
})

t.test('save_contact does not take another person\'s contact for the caller\'s: a shared number with another address gets a contact of its own', async (t) => {
  const w = await world(t)
  t.equal((await connectToken(w)).statusCode, 200)
  const bob = w.hubspot.addContact({ firstname: 'Bob', email: 'bob@example.com', phone: CALLER })
  const agentId = await crmAgent(w, ['create_contact', 'update_contact'])
  w.openai.replies.push({ toolCalls: [{ name: 'CRM_save_contact', arguments: { firstname: 'Alice', email: 'alice@example.com' } }] }, { text: 'Saved, Alice.' })
  const { callId, client } = await webCall(w, agentId)
  await typedTurn(client, 'I am Alice, alice@example.com, on the family phone.', /Saved, Alice/)
  t.match(bob.properties, { firstname: 'Bob', email: 'bob@example.com' }, 'Bob\'s contact is untouched')
  const alice = [...w.hubspot.contacts.values()].find((c) => c.properties.email === 'alice@example.com')
  t.match(alice?.properties, { firstname: 'Alice', phone: CALLER })
  client.hangup()
  await finishedCall(w.app, w.account.headers, callId)
})

t.test('log_call: after the call a call engagement with the summary, duration, direction and the console link, on the caller\'s contact', async (t) => {
  const w = await world(t)
  t.equal((await connectToken(w)).statusCode, 200)
  const jane = w.hubspot.addContact({ firstname: 'Jane', lastname: 'Doe', phone: CALLER })
  const agentId = await crmAgent(w, ['lookup_contact', 'log_call'])
  w.openai.replies.push({ text: 'Hello Jane, your order has shipped.' })
  const { callId, client } = await webCall(w, agentId)
  await typedTurn(client, 'Where is my order?', /shipped/)
  client.hangup()
  const done = await finishedCall(w.app, w.account.headers, callId)
  const [logged] = await poll(() => [...w.hubspot.calls.values()], (calls) => calls.length > 0, { message: 'no call was logged in HubSpot' })
  t.match(logged, {
    contactIds: [jane.id],
    properties: {
      hs_timestamp: new Date(done.start_timestamp).toISOString(),
      hs_call_direction: 'INBOUND',
      hs_call_status: 'COMPLETED',
      hs_call_duration: String(done.duration_ms ?? done.end_timestamp - done.start_timestamp),
      hs_call_body: `${String(done.call_summary)}\n\nTranscript and recording: https://switchboard.example.com/calls/${callId}`
    }
  })
  const list = await poll(() => deliveries(w, w.account), (l: any) => l.data.some((d: any) => d.kind === 'crm' && d.status === 'delivered'))
  t.match(list.data.find((d: any) => d.kind === 'crm'), { status: 'delivered' }, 'a post-call delivery of its own')
})

t.test('log_call without a known contact creates one with the caller\'s number; a contact saved during the call is the one logged on', async (t) => {
  const w = await world(t)
  t.equal((await connectToken(w)).statusCode, 200)
  const agentId = await crmAgent(w, ['log_call'])
  const first = await webCall(w, agentId, { customer_phone: '+442079460000' })
  first.client.hangup()
  await finishedCall(w.app, w.account.headers, first.callId)
  const [call] = await poll(() => [...w.hubspot.calls.values()], (calls) => calls.length === 1)
  const [created] = w.hubspot.contacts.values()
  t.match(created.properties, { phone: '+442079460000' })
  t.same(call.contactIds, [created.id])

  const saver = await crmAgent(w, ['create_contact', 'log_call'])
  w.openai.replies.push({ toolCalls: [{ name: 'CRM_save_contact', arguments: { firstname: 'Max', email: 'max@example.com' } }] }, { text: 'Saved.' })
  const second = await webCall(w, saver, {})
  await typedTurn(second.client, 'I am Max, max@example.com.', /Saved/)
  second.client.hangup()
  await finishedCall(w.app, w.account.headers, second.callId)
  const calls = await poll(() => [...w.hubspot.calls.values()], (all) => all.length === 2)
  const max = [...w.hubspot.contacts.values()].find((c) => c.properties.email === 'max@example.com')
  t.same(calls[1].contactIds, [max?.id], 'logged on the contact the call saved (a web call without a number)')
})

t.test('a 429 is retried once and the answer reaches the model', async (t) => {
  const w = await world(t)
  t.equal((await connectToken(w)).statusCode, 200)
  w.hubspot.addContact({ firstname: 'Jane', lastname: 'Doe', email: 'jane@example.com' })
  const agentId = await crmAgent(w, ['lookup_contact'])
  w.openai.replies.push({ toolCalls: [{ name: 'CRM_lookup', arguments: { email: 'jane@example.com' } }] }, { text: 'Found you.' })
  const { callId, client } = await webCall(w, agentId, {})
  w.hubspot.rateLimitNext(1)
  const before = w.hubspot.requests.length
  await typedTurn(client, 'Look me up: jane@example.com', /Found you/)
  t.equal(w.hubspot.requests.length - before, 2, 'the 429, then the one retry')
  t.match(w.openai.requests.chat[1].body.messages.at(-1), { role: 'tool', content: /^Found HubSpot contact \d+ \(Jane Doe, jane@example.com\)\.$/ })
  client.hangup()
  await finishedCall(w.app, w.account.headers, callId)
})

t.test('a revoked token: the model is told and the call goes on; the call log fails at once without retries', async (t) => {
  const w = await world(t)
  t.equal((await connectToken(w)).statusCode, 200)
  const agentId = await crmAgent(w, ['create_contact', 'log_call'])
  w.hubspot.privateTokens.delete(TOKEN)
  w.openai.replies.push({ toolCalls: [{ name: 'CRM_save_contact', arguments: { firstname: 'Ada' } }] }, { text: 'I could not save that, but let us go on.' }, { text: 'Anything else?' })
  const { callId, client } = await webCall(w, agentId)
  await typedTurn(client, 'I am Ada.', /let us go on/)
  t.match(w.openai.requests.chat[1].body.messages.at(-1), { role: 'tool', content: /^Error: .*HubSpot connection has been revoked/ })
  await typedTurn(client, 'Thanks.', /Anything else/)
  client.hangup()
  const done = await finishedCall(w.app, w.account.headers, callId)
  t.equal(done.transcription.at(-1).speaker, 'agent', 'the call went on')
  const list = await poll(() => deliveries(w, w.account), (l: any) => l.data.some((d: any) => d.kind === 'crm' && d.status !== 'pending'))
  const delivery = list.data.find((d: any) => d.kind === 'crm')
  t.match(delivery, { status: 'failed' })
  t.equal(delivery.attempts?.length ?? delivery.attempts_made, 1, 'not retried: a revoked connection does not heal by waiting')
  const integration = await w.db.selectFrom('integrations').select(['status', 'status_reason']).where('user_id', '=', w.account.user.id).executeTakeFirst()
  t.match(integration, { status: 'revoked', status_reason: /HubSpot answered 401: Authentication credentials not found/ }, 'the integration shows it must be connected again')
})

t.test('an expired OAuth access token is refreshed mid-call (refresh_token grant with the app\'s client) and the request goes through', async (t) => {
  const w = await world(t)
  const issued = w.hubspot.oauth.issue()
  await connectIntegration(w.db, w.account.user.id, 'crm', {
    account_label: 'HubSpot account 62515', method: 'oauth', credentials: { access_token: issued.access_token, refresh_token: issued.refresh_token }, expires_at: new Date(Date.now() + issued.expires_in * 1000)
  })
  const jane = w.hubspot.addContact({ firstname: 'Jane', lastname: 'Doe', phone: CALLER })
  const agentId = await crmAgent(w, ['lookup_contact', 'update_contact'])
  w.openai.replies.push({ toolCalls: [{ name: 'CRM_save_contact', arguments: { company: 'Acme' } }] }, { text: 'Noted, Jane.' })
  const { callId, client } = await webCall(w, agentId)
  t.match(w.hubspot.requests.find((r) => r.path.endsWith('/search')), { authorization: `Bearer ${issued.access_token}` }, 'the greeting\'s lookup used the access token')
  w.hubspot.oauth.expire()
  await typedTurn(client, 'I work at Acme now.', /Noted, Jane/)
  t.match(jane.properties, { company: 'Acme' }, 'the update went through')
  const grants = w.hubspot.oauth.tokenRequests.map((form) => Object.fromEntries(form))
  t.match(grants, [{ grant_type: 'refresh_token', refresh_token: issued.refresh_token, client_id: HUBSPOT_CLIENT.id, client_secret: HUBSPOT_CLIENT.secret }], 'one refresh, form-encoded, with the app\'s client')
  const fresh = w.hubspot.oauth.accessTokens().at(-1)
  t.match(w.hubspot.requests.at(-1), { method: 'PATCH', authorization: `Bearer ${fresh?.token}` }, 'retried with the new token')
  t.match(w.hubspot.requests.filter((r) => r.method === 'PATCH').map((r) => r.authorization), [`Bearer ${issued.access_token}`, `Bearer ${fresh?.token}`], 'the 401, then the retry')
  client.hangup()
  await finishedCall(w.app, w.account.headers, callId)
})
