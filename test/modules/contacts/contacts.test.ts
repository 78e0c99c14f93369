import t from 'tap'
import { memoryOf } from '../../../src/modules/contacts/contacts.ts'
import { createAccount, setup, type Account, type TestContext } from '../../helpers/app.ts'
import { createAgent } from '../../helpers/calls.ts'
import { poll } from '../../helpers/poll.ts'

// Contacts (docs/contacts.md): each call linked to the person on the other end, the API's list, detail, name and
// delete, and its ownership rules. Memory in a live call's instructions: memory.test.ts.

const OUR_NUMBER = '+14155550123'

async function ownNumber (ctx: TestContext, account: Account, agentId: string, phoneNumber = OUR_NUMBER) {
  const bought = (await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: phoneNumber } })).json()
  await ctx.app.inject({ method: 'PATCH', url: `/v1/phone-number/${bought._id}`, headers: account.headers, payload: { inbound_agent_id: agentId } })
}

const contactIdOf = async (ctx: TestContext, account: Account, callId: string): Promise<string | null> =>
  (await ctx.app.inject({ method: 'GET', url: `/v1/call/${callId}`, headers: account.headers })).json().contact_id

async function inbound (ctx: TestContext, account: Account, from: string, to = OUR_NUMBER): Promise<string> {
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: to, from_number: from } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json()._id
}

async function outbound (ctx: TestContext, account: Account, agentId: string, to: string, from = OUR_NUMBER): Promise<string> {
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agentId, from_number: from, to_number: to } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json()._id
}

async function web (ctx: TestContext, account: Account, agentId: string, body: Record<string, unknown>): Promise<string> {
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agentId, ...body } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json()._id
}

t.test('each call is linked to its contact: the other party of a phone call, a web call\'s customer_phone or customer_email', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await ownNumber(ctx, account, agent._id)

  const fromAda = await inbound(ctx, account, '+4930123456')
  const toAda = await outbound(ctx, account, agent._id, '+4930123456')
  const webAda = await web(ctx, account, agent._id, { dynamic_context: { customer_phone: '+49 (30) 123-456' } })
  const ada = await contactIdOf(ctx, account, fromAda)
  t.ok(ada, 'an inbound call: its caller')
  t.equal(await contactIdOf(ctx, account, toAda), ada, 'an outbound call: the number called')
  t.equal(await contactIdOf(ctx, account, webAda), ada, 'a web call: its dynamic_context.customer_phone, written any way')
  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/contacts/${ada}`, headers: account.headers })).json(),
    { _id: ada, phone_number: '+4930123456', email: null, name: null, call_count: 3, calls: [{ _id: webAda }, { _id: toAda }, { _id: fromAda }] })

  const byEmail = await web(ctx, account, agent._id, { dynamic_context: { customer_email: ' Grace@Example.COM ' } })
  const byCustomData = await web(ctx, account, agent._id, { custom_data: { customer_email: 'grace@example.com' } })
  const grace = await contactIdOf(ctx, account, byEmail)
  t.ok(grace)
  t.not(grace, ada)
  t.equal(await contactIdOf(ctx, account, byCustomData), grace, 'custom_data.customer_email when dynamic_context has none')
  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/contacts/${grace}`, headers: account.headers })).json(), { phone_number: null, email: 'grace@example.com' })
  const both = await web(ctx, account, agent._id, { dynamic_context: { customer_phone: '+4930123456', customer_email: 'grace@example.com' } })
  t.equal(await contactIdOf(ctx, account, both), ada, 'the phone number before the e-mail address')

  for (const dynamic of [{}, { customer_phone: 'call me maybe' }, { customer_phone: 4930123456 }, { customer_email: 'not an address' }, { customer_email: ['a@b.c'] }]) {
    t.equal(await contactIdOf(ctx, account, await web(ctx, account, agent._id, { dynamic_context: dynamic })), null, `nobody known: ${JSON.stringify(dynamic)}`)
  }

  // Another owner of calls: the agents of a workspace (or customer) have contacts of their own.
  const workspace = (await ctx.app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: 'Sales' } })).json()
  const salesAgent = await createAgent(ctx.app, account, {}, `?workspace_id=${workspace._id}`)
  const salesCall = await web(ctx, account, salesAgent._id, { dynamic_context: { customer_phone: '+4930123456' } })
  const salesAda = await contactIdOf(ctx, account, salesCall)
  t.ok(salesAda)
  t.not(salesAda, ada, 'the same number in a workspace is the workspace\'s contact')
  const inWorkspace = (await ctx.app.inject({ method: 'GET', url: `/v1/contacts?workspace_id=${workspace._id}`, headers: account.headers })).json()
  t.match(inWorkspace, { total: 1, data: [{ _id: salesAda, workspace_id: workspace._id, call_count: 1 }] })
  const deleteWorkspace = await ctx.app.inject({ method: 'DELETE', url: `/v1/workspaces/${workspace._id}`, headers: account.headers })
  t.equal(deleteWorkspace.statusCode, 409)
  t.match(deleteWorkspace.json().message, /1 contact/, 'a workspace that contacts name is not deleted')
})

t.test('150 concurrent calls from one number make one contact', async (t) => {
  const ctx = await setup(t, { DATABASE_POOL_SIZE: '10' })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await ownNumber(ctx, account, agent._id)
  const ids = await Promise.all(Array.from({ length: 150 }, async (_, i) => i % 2 === 0
    ? await inbound(ctx, account, '+33612345678')
    : await outbound(ctx, account, agent._id, '+33612345678')))
  t.equal(new Set(ids).size, 150)
  const list = (await ctx.app.inject({ method: 'GET', url: '/v1/contacts', headers: account.headers })).json()
  t.equal(list.total, 1, 'one contact')
  t.match(list.data, [{ phone_number: '+33612345678', call_count: 150 }])
  const linked = await ctx.db.selectFrom('calls').select('contact_id').distinct().where('user_id', '=', account.user.id).execute()
  t.same(linked, [{ contact_id: list.data[0]._id }], 'every call names it')
})

t.test('a name extracted by the analysis names a contact without one; a name set by a person is kept', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account, { data_retrieval: [{ name: 'first_name', type: 'string', description: 'the caller\'s first name' }, { name: 'last_name', type: 'string', description: 'the caller\'s last name' }] })
  await ownNumber(ctx, account, agent._id)
  const held = async (from: string, collected?: Record<string, unknown>) => {
    const id = await inbound(ctx, account, from)
    const start = (await ctx.app.inject({ method: 'GET', url: `/v1/call/${id}`, headers: account.headers })).json().start_timestamp
    const transcription = [{ speaker: 'agent', content: 'Hello, how can I help?', timestamp: start }, { speaker: 'user', content: 'I would like an appointment.', timestamp: start + 1000 }]
    await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${id}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup', transcription, collected_data: collected } })
    await poll(async () => (await ctx.app.inject({ method: 'GET', url: `/v1/call/${id}`, headers: account.headers })).json().call_status, (s) => s === 'success')
    return (await contactIdOf(ctx, account, id))!
  }
  const contactName = async (id: string) => (await ctx.app.inject({ method: 'GET', url: `/v1/contacts/${id}`, headers: account.headers })).json().name

  // The built-in analyser finds no name in these words: what was collected during the call names the contact.
  const ada = await held('+4930123456', { first_name: ' Ada ', last_name: 'Lovelace' })
  t.equal(await contactName(ada), 'Ada Lovelace', 'first_name and last_name, trimmed')
  await held('+4930123456', { name: 'Someone Else' })
  t.equal(await contactName(ada), 'Ada Lovelace', 'a known name is not replaced')

  const patched = await ctx.app.inject({ method: 'PATCH', url: `/v1/contacts/${ada}`, headers: account.headers, payload: { name: '  Countess Lovelace ' } })
  t.match(patched.json(), { _id: ada, name: 'Countess Lovelace', call_count: 2 })
  t.equal((await ctx.app.inject({ method: 'PATCH', url: `/v1/contacts/${ada}`, headers: account.headers, payload: { name: null } })).json().name, null, 'null forgets it')
  await held('+4930123456', { customer_name: 'Ada King' })
  t.equal(await contactName(ada), 'Ada King', 'an unnamed contact takes the next call\'s name')

  const grace = await held('+4930999999', { notes: 'no name here' })
  t.equal(await contactName(grace), null)
})

t.test('the API: paging, search, ownership, bad input, delete erases the memory', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await ownNumber(ctx, account, agent._id)
  const numbers = Array.from({ length: 5 }, (_, i) => `+4930555000${i}`)
  for (const number of numbers) await inbound(ctx, account, number)
  await web(ctx, account, agent._id, { dynamic_context: { customer_email: 'grace_hopper@example.com' } })
  const get = async (url: string, who = account) => await ctx.app.inject({ method: 'GET', url, headers: who.headers })

  const all = (await get('/v1/contacts')).json()
  t.match(all, { total: 6, limit: 100, offset: 0 })
  t.same(Object.keys(all.data[0]).sort(), ['_id', 'call_count', 'created_at', 'customer_id', 'email', 'last_call_at', 'name', 'phone_number', 'updated_at', 'workspace_id'])
  t.equal(all.data[0].email, 'grace_hopper@example.com', 'the latest call first')
  const page = (await get('/v1/contacts?limit=2&offset=2')).json()
  t.match(page, { total: 6, limit: 2, offset: 2 })
  t.same(page.data.map((c: { _id: string }) => c._id), all.data.slice(2, 4).map((c: { _id: string }) => c._id))

  const ada = all.data.find((c: { phone_number: string }) => c.phone_number === numbers[3])
  await ctx.app.inject({ method: 'PATCH', url: `/v1/contacts/${ada._id}`, headers: account.headers, payload: { name: 'Ada Lovelace' } })
  const search = async (text: string) => (await get(`/v1/contacts?search=${encodeURIComponent(text)}`)).json().data.map((c: { _id: string }) => c._id)
  t.same(await search('lovelace'), [ada._id], 'by name, any case')
  t.same(await search('5550003'), [ada._id], 'by part of the number')
  t.same(await search('+49 30 5550003'), [ada._id], 'by the number written with spaces')
  t.same((await search('HOPPER@')).length, 1, 'by e-mail address')
  t.same(await search('grace_'), await search('grace_hopper'), 'LIKE wildcards are literal')
  t.same(await search('%'), [], 'a % is a percent sign')
  t.equal((await search('30555')).length, 5)

  // Another account's contact is a missing one.
  for (const [method, payload] of [['GET', undefined], ['PATCH', { name: 'Mallory' }], ['DELETE', undefined]] as const) {
    const res = await ctx.app.inject({ method, url: `/v1/contacts/${ada._id}`, headers: other.headers, payload })
    t.equal(res.statusCode, 404, `${method} another account's contact`)
    t.equal(res.json().code, 'not_found')
  }
  t.equal((await get('/v1/contacts', other)).json().total, 0)
  t.equal((await get(`/v1/contacts?workspace_id=${'a'.repeat(24)}`)).statusCode, 404, 'a workspace of nobody\'s')

  // Bad input: a clear 4xx, never a 500.
  for (const [method, url, payload, code] of [
    ['GET', '/v1/contacts/xyz', undefined, 'invalid_id'],
    ['PATCH', '/v1/contacts/123', { name: 'x' }, 'invalid_id'],
    ['DELETE', '/v1/contacts/nothex000000000000000000', undefined, 'invalid_id'],
    ['GET', `/v1/contacts?search=${'a'.repeat(201)}`, undefined, 'validation_error'],
    ['GET', `/v1/contacts?search=${'a'.repeat(100_000)}`, undefined, undefined],
    ['GET', '/v1/contacts?search=a%00b', undefined, 'invalid_text'],
    ['GET', '/v1/contacts?limit=1001', undefined, 'validation_error'],
    ['GET', '/v1/contacts?offset=-1', undefined, 'validation_error'],
    ['GET', `/v1/contacts/${ada._id}?calls_limit=0`, undefined, 'validation_error'],
    ['PATCH', `/v1/contacts/${ada._id}`, { name: '' }, 'validation_error'],
    ['PATCH', `/v1/contacts/${ada._id}`, { name: '   ' }, 'validation_error'],
    ['PATCH', `/v1/contacts/${ada._id}`, { name: 'x'.repeat(201) }, 'validation_error'],
    ['PATCH', `/v1/contacts/${ada._id}`, { name: 'Ada\u0000' }, 'invalid_text'],
    ['PATCH', `/v1/contacts/${ada._id}`, {}, 'validation_error']
  ] as const) {
    const res = await ctx.app.inject({ method, url, headers: account.headers, payload })
    t.ok(res.statusCode >= 400 && res.statusCode < 500, `${method} ${url.slice(0, 60)} ${JSON.stringify(payload)}: ${res.statusCode}`)
    if (code !== undefined) t.equal(res.json().code, code)
  }
  t.equal((await get(`/v1/contacts/${ada._id}`)).json().name, 'Ada Lovelace', 'unchanged by the bad requests')

  // Delete: the contact and its memory go, its calls stay unlinked; the next call from the number starts afresh.
  const detail = (await get(`/v1/contacts/${ada._id.toUpperCase()}`)).json()
  t.equal(detail.calls.length, 1, 'ids in either case')
  const [oldCall] = detail.calls
  await ctx.db.updateTable('calls').set({ call_status: 'success', call_summary: 'Asked about invoice 17.' }).where('id', '=', oldCall._id).execute()
  const memoryOn = { is_customer_memory_active: true }
  const nextCall = async () => (await ctx.db.selectFrom('calls').selectAll().where('id', '=', await inbound(ctx, account, numbers[3])).executeTakeFirstOrThrow())
  t.match(await memoryOf(ctx.db, await nextCall(), memoryOn), /Their name: Ada Lovelace\.\n- .*Asked about invoice 17\./)
  t.equal(await memoryOf(ctx.db, await nextCall(), { is_customer_memory_active: false }), '', 'memory off')

  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/contacts/${ada._id}`, headers: account.headers })).statusCode, 204)
  t.equal((await get(`/v1/contacts/${ada._id}`)).statusCode, 404)
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/contacts/${ada._id}`, headers: account.headers })).statusCode, 404, 'once')
  t.same(await ctx.db.selectFrom('calls').select(['contact_id', 'call_summary']).where('id', '=', oldCall._id).execute(), [{ contact_id: null, call_summary: 'Asked about invoice 17.' }], 'the call stays, unlinked')
  const after = await nextCall()
  t.not(after.contact_id, ada._id, 'a new contact')
  t.equal(await memoryOf(ctx.db, after, memoryOn), '', 'which remembers nothing of the deleted one')
  t.equal((await get(`/v1/contacts/${after.contact_id!}`)).json().call_count, 1)
})
