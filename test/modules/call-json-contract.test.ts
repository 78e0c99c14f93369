import { Ajv, type ValidateFunction } from 'ajv'
import { sql } from 'kysely'
import t, { type Test } from 'tap'
import type { TSchema } from 'typebox'
import { newId } from '../../src/db/ids.ts'
import { callLatency } from '../../src/modules/calls/latency.ts'
import { CallDetail, CallListItem } from '../../src/modules/calls/schemas.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { poll } from '../helpers/poll.ts'

// The call list item and the call detail leave PostgreSQL as JSON text (the list view is kept by a trigger,
// migrations/0010_call_list_json.sql; the detail appends to it, calls/queries.ts) and are sent without the
// response schema ever serialising them. This holds them to CallListItem and CallDetail: every field, with
// its type, and no other; a trigger or query that drops, renames or mistypes a field fails here.

/**
 * The schema with every object's properties required (but those it marks optional: a transcript item's
 * `tool`) and no others allowed, all the way down.
 */
function strict (schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(strict)
  if (schema === null || typeof schema !== 'object') return schema
  const out: Record<string, unknown> = Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, strict(value)]))
  if (typeof out.properties === 'object' && out.properties !== null) {
    // TypeBox lists the properties that are not optional in `required`.
    const required = (schema as { required?: string[] }).required
    out.required = required ?? Object.keys(out.properties)
    out.additionalProperties = false
  }
  return out
}

const ajv = new Ajv({ strict: false, allErrors: true })
const validator = (schema: TSchema) => ajv.compile(strict(schema) as object)
const checkList = validator(CallListItem)
const checkDetail = validator(CallDetail)

function conforms (t: Test, check: ValidateFunction, value: unknown, what: string) {
  t.ok(check(value), what, { errors: check.errors, value })
}

/** The JSON types each top-level field took over the calls seen. */
function typesSeen (items: Array<Record<string, unknown>>): Map<string, Set<string>> {
  const seen = new Map<string, Set<string>>()
  for (const item of items) {
    for (const [key, value] of Object.entries(item)) {
      const type = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value
      seen.set(key, (seen.get(key) ?? new Set()).add(type))
    }
  }
  return seen
}

const nullable = (schema: TSchema) => (schema as { anyOf?: Array<{ type?: string }> }).anyOf?.some((branch) => branch.type === 'null') === true

async function inboundNumber (ctx: TestContext, account: Account, agentId: string) {
  const bought = (await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: '+14155550123' } })).json()
  await ctx.app.inject({ method: 'PATCH', url: `/v1/phone-number/${bought._id}`, headers: account.headers, payload: { inbound_agent_id: agentId } })
  return bought._id as string
}

async function waitForFinal (ctx: TestContext, ids: string[]) {
  await poll(() => ctx.db.selectFrom('calls').select('id').where('id', 'in', ids).where('call_status', '=', 'pending').execute(),
    (pending) => pending.length === 0, { message: 'the calls were not analysed in time' })
}

t.test('the stored call JSON has exactly the fields of CallListItem and CallDetail, with their types', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account, {
    agent_name: 'Front desk',
    data_retrieval: [{ name: 'caller_name', type: 'string', description: 'the caller\'s name', required: true }]
  })
  const number = await inboundNumber(ctx, account, agent._id)
  const inbound = async (payload: Record<string, unknown> = {}) => {
    const res = await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550123', from_number: '+4930123456', ...payload } })
    if (res.statusCode !== 201) throw new Error(res.body)
    return res.json() as { _id: string, start_timestamp: number }
  }
  const end = async (id: string, payload: Record<string, unknown>) => {
    const res = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${id}/end`, headers: account.headers, payload })
    if (res.statusCode !== 202) throw new Error(res.body)
  }

  // Still running: the end, the analysis and most nullable fields are null.
  const started = await inbound({ custom_data: { crm_id: 7 }, dynamic_context: { customer_name: 'Ada' } })
  // The number pins the agent's version 1 from here on: the calls record it (agent_version).
  await ctx.app.inject({ method: 'PATCH', url: `/v1/phone-number/${number}`, headers: account.headers, payload: { inbound_agent_version: 1 } })
  // Ended and analysed, with everything an end can carry.
  const analysed = await inbound()
  await end(analysed._id, {
    outcome: 'completed',
    disconnection_reason: 'user_hangup',
    end_timestamp: analysed.start_timestamp + 65_000,
    transcription: [
      { speaker: 'agent', content: 'Hello, how can I help?', timestamp: analysed.start_timestamp + 1000 },
      { speaker: 'user', content: 'Hi, my name is Ada Lovelace. Thank you, that was very helpful!', timestamp: analysed.start_timestamp + 4000 }
    ],
    recording_url: 'https://rec.example.com/a.mp3',
    usage: { tokens: { 'gpt-4o-mini': { input: 120, output: 30 }, 'gpt-4o': { input: 5, output: 1 } }, sms_sent: 1, forwarding_seconds: 20 },
    collected_data: { note: 'called back' },
    transfer_history: [{ to_agent_id: agent._id, at: analysed.start_timestamp + 3000 }]
  })
  // Never connected.
  const failed = await inbound()
  await end(failed._id, { outcome: 'failed', disconnection_reason: 'no_answer' })
  // A web call: no numbers.
  const web = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id } })
  t.equal(web.statusCode, 201)
  // Stored as an import would leave them: a sentiment without explanation, a task not achieved, a customer's and workspace's call.
  const customer = (await ctx.app.inject({ method: 'POST', url: '/v1/customer', headers: account.headers, payload: { customer_name: 'Acme' } })).json()
  const workspace = (await ctx.app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: 'Sales' } })).json()
  const imported = await insertCalls(ctx.db, account.user.id, agent, [
    {
      sentiment: 'negative',
      sentiment_explanation: null,
      task_achieved: false,
      call_summary: 'Short.',
      customer_id: customer._id,
      workspace_id: workspace._id,
      latency: JSON.stringify(callLatency([{ at: Date.now(), end_of_turn_ms: 210, transcription_ms: null, llm_ms: 380, tts_ms: null, e2e_ms: 820 }])),
      workflow: JSON.stringify({ step: 'book', path: [{ id: 'book', name: 'Book', type: 'conversation', at: Date.now() }], variables: { party_size: 4, note: null }, after: ['crm'] })
    },
    { call_type: 'web', call_from: null, call_to: null, call_status: 'started', end_timestamp: null, duration_ms: null }
  ])
  const ids = [started._id, analysed._id, failed._id, web.json()._id, ...imported]
  await waitForFinal(ctx, ids)
  // A chain of callbacks (docs/calls.md, "Callbacks"), stored as callbacks.ts leaves it: the first imported call is the
  // failed call's first callback, placed; a second one is cancelled.
  await ctx.db.insertInto('call_callbacks').values([
    { id: newId(), user_id: account.user.id, callback_of: failed._id, after_call_id: failed._id, attempt: 1, max_attempts: 2, to_number: '+4930123456', status: 'placed', due_at: new Date(), call_id: imported[0] },
    { id: newId(), user_id: account.user.id, callback_of: failed._id, after_call_id: imported[0], attempt: 2, max_attempts: 2, to_number: '+4930123456', status: 'cancelled', reason: 'called_back', due_at: new Date() }
  ]).execute()

  const details: Array<Record<string, unknown>> = []
  for (const id of ids) {
    const res = await ctx.app.inject({ method: 'GET', url: `/v1/call/${id}`, headers: account.headers })
    t.equal(res.statusCode, 200)
    details.push(res.json())
    conforms(t, checkDetail, res.json(), `GET /v1/call/${id} is a CallDetail`)
  }
  t.match(details[1], { call_status: 'success', sentiment: { sentiment: 'positive' }, collected_data: { note: 'called back' } }, 'the analysed call is what it should be')
  t.equal(details[2].call_status, 'failed')
  t.match(details[4], { callback_of: failed._id, callback_attempt: 1, callbacks: [{ attempt: 1, status: 'placed', call_id: imported[0] }, { attempt: 2, status: 'cancelled', reason: 'called_back', call_id: null }] })
  t.same(details[2].callbacks, details[4].callbacks, 'the first call shows the same chain')

  const list = await ctx.app.inject({ method: 'GET', url: '/v1/call/list', headers: account.headers })
  t.equal(list.statusCode, 200)
  t.equal(list.json().length, ids.length)
  for (const item of list.json()) conforms(t, checkList, item, `GET /v1/call/list item ${item._id} is a CallListItem`)

  const stored = await ctx.db.selectFrom('calls').select(['id', 'list_json']).where('id', 'in', ids).execute()
  // The list appends the call's agent_version to the stored view (calls/queries.ts, LIST_JSON).
  const versions = new Map(list.json().map((item: { _id: string, agent_version: number | null }) => [item._id, item.agent_version]))
  for (const row of stored) conforms(t, checkList, { ...JSON.parse(row.list_json), agent_version: versions.get(row.id) }, `calls.list_json of ${row.id} with its agent_version is a CallListItem`)

  // Each nullable field was seen both null and not, so a mistyped value cannot hide behind null.
  const seen = typesSeen(details)
  for (const [name, schema] of Object.entries(CallDetail.properties as Record<string, TSchema>)) {
    if (nullable(schema)) t.ok(seen.get(name)?.has('null') === true && seen.get(name)!.size > 1, `${name} seen null and not null`, { seen: [...seen.get(name) ?? []] })
  }
})

t.test('a trigger that renames or mistypes a field fails the contract', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const [id] = await insertCalls(ctx.db, account.user.id, agent, [{ task_achieved: true }])
  // With the agent_version the list appends to the stored view (calls/queries.ts, LIST_JSON).
  const listed = async () => ({ ...JSON.parse((await ctx.db.selectFrom('calls').select('list_json').where('id', '=', id).executeTakeFirstOrThrow()).list_json), agent_version: null })
  conforms(t, checkList, await listed(), 'as migrated')

  // In this test's own database only.
  const { rows } = await sql<{ def: string }>`SELECT pg_get_functiondef('call_list_json_trigger'::regproc) AS def`.execute(ctx.db)
  t.match(rows[0].def, '"call_summary":')
  const altered = async (from: string, to: string) => {
    t.match(rows[0].def, from)
    await sql.raw(rows[0].def.replace(from, to)).execute(ctx.db)
    await ctx.db.updateTable('calls').set({ call_summary: 'Changed.' }).where('id', '=', id).execute()
    const item = await listed()
    const detail = (await ctx.app.inject({ method: 'GET', url: `/v1/call/${id}`, headers: account.headers })).json()
    t.notOk(checkDetail(detail), 'the detail built on it does not conform')
    t.notOk(checkList(item), 'the stored list view does not conform')
    return checkList.errors
  }

  t.match(await altered('"call_summary":', '"summary":'),
    [{ keyword: 'required', params: { missingProperty: 'call_summary' } }, { keyword: 'additionalProperties', params: { additionalProperty: 'summary' } }], 'renamed')
  t.match(await altered('json_value_text(NEW.task_achieved)', 'json_value_text(NEW.task_achieved::text)'),
    [{ instancePath: '/task_achieved' }], 'mistyped')
})
