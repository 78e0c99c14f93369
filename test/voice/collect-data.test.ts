import t from 'tap'
import type { Test } from 'tap'
import type { RetrievalField } from '../../src/db/shapes.ts'
import { collectData } from '../../src/modules/voice/collect-data.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { addAction } from '../helpers/calls.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { startRealtimeStandin, type RealtimeStandin } from '../helpers/realtime-standin.ts'
import { startReceiver } from '../helpers/receiver.ts'
import { finishedCall, type WebCallClient, startWebCall, typedTurn } from '../helpers/voice-client.ts'

// Data collection during calls (is_data_collection_active with data_retrieval): the fields in the agent's
// instructions, the built-in save_collected_data function offered to the model, each run a tool event, what was
// saved kept as the call's collected_data and delivered beside what analysis extracted. Through the browser's
// stream on both engines (typed turns), against the providers' stand-ins on loopback, and on the simulator.

const FIELDS = [
  { name: 'email', type: 'string', description: 'the caller\'s e-mail address', required: true },
  { name: 'plan', type: 'enum', enum_values: ['basic', 'pro'], description: 'the plan they want' },
  { name: 'budget', type: 'number', description: 'monthly budget in euros' },
  { name: 'visit_date', type: 'date', description: 'when they want to visit' },
  { name: 'newsletter', type: 'boolean', description: 'wants the newsletter' }
]

/** The function's parameters for FIELDS: each field's type, none required. */
const PARAMETERS = {
  type: 'object',
  properties: {
    email: { type: 'string', description: 'the caller\'s e-mail address' },
    plan: { type: 'string', enum: ['basic', 'pro'], description: 'the plan they want' },
    budget: { type: 'number', description: 'monthly budget in euros' },
    visit_date: { type: 'string', format: 'date', description: 'when they want to visit (YYYY-MM-DD)' },
    newsletter: { type: 'boolean', description: 'wants the newsletter' }
  },
  additionalProperties: false
}

const ENV = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIME_SCALE: '0.001' }

async function listen (t: Test, env: Record<string, string>) {
  const ctx = await setup(t, { ...ENV, ...env }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  return { ...ctx, url }
}

async function cascade (t: Test) {
  const standin = await startOpenAiHttpStandin(t)
  return { ...await listen(t, { VOICE_ENGINE: 'cascade', STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url }), standin }
}

async function agentWith (ctx: TestContext, account: Account, body: Record<string, unknown>, llm: Record<string, unknown> = {}) {
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi!', general_prompt: 'You are the gym\'s front desk.', ...llm } })).json()
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Gym', llm_id: config._id, ...body } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json() as { _id: string }
}

async function addTool (ctx: TestContext, account: Account, agentId: string, type: string, settings: Record<string, unknown>) {
  const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agentId}/tools`, headers: account.headers, payload: { tool_type: type, settings } })
  if (res.statusCode !== 201) throw new Error(res.body)
}

const webCall = async (ctx: TestContext & { url: string }, account: Account, agentId: string) => await startWebCall(ctx.app, ctx.url, account.headers, agentId)

const turn = typedTurn

const toolEvents = (client: WebCallClient) => client.events.filter((e) => e.type === 'transcript' && e.speaker === 'tool')

t.test('cascade: the fields are asked for and saved as the call goes; a bad value is answered with an error and the call goes on; stored as collected_data and delivered beside custom_analysis_data', async (t) => {
  const ctx = await cascade(t)
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { webhook_url: receiver.url, is_data_collection_active: true, data_retrieval: FIELDS })
  // A tool of the agent's own with the built-in's name: the built-in gives way.
  await addTool(ctx, account, agent._id, 'end_call', { name: 'save_collected_data' })
  await addAction(ctx.app, account, agent._id, { url: `${receiver.url}/action`, body: { plan: '{{plan}}', email: '{{email}}' }, send_only_custom_fields: true })
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'save_collected_data_2', arguments: { email: 'ada@example.com', budget: 'a lot', plan: 'gold' } }] },
    { text: 'How much a month, in euros?' },
    { toolCalls: [{ name: 'save_collected_data_2', arguments: { email: 'ada@example.com', budget: 1500, plan: 'pro', newsletter: true } }] },
    { text: 'Thanks, noted.' },
    { toolCalls: [{ name: 'save_collected_data_2', arguments: { visit_date: '2026-05-04', newsletter: null } }] },
    { text: 'See you then.' }
  )

  const { callId, client } = await webCall(ctx, account, agent._id)
  await turn(client, 'Write to me at my usual address, and I can spend a lot.', /How much/)
  const [first] = ctx.standin.requests.chat
  t.match(first.body.tools, [
    { type: 'function', function: { name: 'save_collected_data' } },
    { type: 'function', function: { name: 'save_collected_data_2', description: /Save details the caller gave you/, parameters: PARAMETERS } }
  ], 'the function is offered with the fields\' types, after the agent\'s own tools')
  t.notOk('required' in first.body.tools[1].function.parameters, 'no field is required by the schema: the agent saves as it goes')
  const system = first.body.messages[0].content as string
  t.match(system, /You are the gym's front desk\./)
  for (const line of [
    '- email (text, required): the caller\'s e-mail address',
    '- plan (one of basic, pro): the plan they want',
    '- budget (number): monthly budget in euros',
    '- visit_date (date): when they want to visit',
    '- newsletter (yes or no): wants the newsletter'
  ]) t.ok(system.includes(line), `the instructions list ${line}`)
  t.match(system, /save it with the save_collected_data_2 function/)
  t.match(toolEvents(client)[0], { content: /^save_collected_data_2: error: Nothing was saved: budget must be a number; plan must be one of basic, pro\./, tool: { name: 'save_collected_data_2', type: 'collect_data', error: /budget must be a number/ } })
  t.match(ctx.standin.requests.chat[1].body.messages.at(-1), { role: 'tool', content: /^Error: Nothing was saved: budget must be a number; plan must be one of basic, pro/ }, 'the model is told which fields were wrong')

  await turn(client, 'Fifteen hundred, the bigger plan, and put me on the newsletter.', /noted/)
  t.match(toolEvents(client)[1], { tool: { type: 'collect_data', output: 'Saved: email, budget, plan, newsletter. Every required field is collected.' } })
  await turn(client, 'I will come on the fourth of May.', /See you/)
  t.match(toolEvents(client)[2], { tool: { output: /^Saved: visit_date\./ } })
  client.hangup()

  const done = await finishedCall(ctx.app, account.headers, callId)
  const collected = { email: 'ada@example.com', budget: 1500, plan: 'pro', newsletter: true, visit_date: '2026-05-04' }
  t.same(done.collected_data, collected, 'what the agent saved is the call\'s collected_data')
  t.same(done.transcription.map((i: { speaker: string }) => i.speaker), ['agent', 'user', 'tool', 'agent', 'user', 'tool', 'agent', 'user', 'tool', 'agent'])
  t.equal(done.custom_analysis_data.email, undefined, 'analysis found no e-mail address in what was said')
  t.equal(done.custom_analysis_data.plan, undefined, 'nor the plan')
  t.equal(done.task_achieved, true, 'the required field collected during the call counts')

  const received = await receiver.waitFor(2)
  const webhook = received.find((r) => r.url === '/')!
  t.same(webhook.json.collected_data, collected, 'the post-call payload carries what the agent collected')
  t.same(webhook.json.custom_analysis_data, done.custom_analysis_data, 'and what analysis extracted afterwards')
  t.same(received.find((r) => r.url === '/action')!.json, { plan: 'pro', email: 'ada@example.com' }, 'a collected value fills {{name}} where analysis found nothing')
})

t.test('cascade: inactive collection offers no function and asks for nothing; after an agent_transfer the new agent\'s fields apply and what was collected stays', async (t) => {
  const ctx = await cascade(t)
  const account = await createAccount(ctx.db)

  const off = await agentWith(ctx, account, { data_retrieval: FIELDS })
  const quiet = await webCall(ctx, account, off._id)
  await turn(quiet.client, 'Hello there.', /You said/)
  t.notOk('tools' in ctx.standin.requests.chat[0].body, 'no function offered')
  t.notMatch(ctx.standin.requests.chat[0].body.messages[0].content, /save_collected_data|email/, 'no field asked for')
  quiet.client.hangup()
  t.equal((await finishedCall(ctx.app, account.headers, quiet.callId)).collected_data, null, 'nothing collected: null')

  const billing = await agentWith(ctx, account, { agent_name: 'Billing', is_data_collection_active: true, data_retrieval: [FIELDS[1]] }, { general_prompt: 'You are billing.' })
  const front = await agentWith(ctx, account, { is_data_collection_active: true, data_retrieval: [FIELDS[0]] })
  await addTool(ctx, account, front._id, 'agent_transfer', { name: 'Billing', agent_id: billing._id })
  ctx.standin.replies.push(
    { toolCalls: [{ name: 'save_collected_data', arguments: { email: 'ada@example.com' } }] },
    { text: 'Got it.' },
    { toolCalls: [{ name: 'Billing', arguments: { reason: 'plan question' } }] },
    { text: 'Billing here.' },
    { toolCalls: [{ name: 'save_collected_data', arguments: { plan: 'basic' } }] },
    { text: 'Basic it is.' }
  )
  const before = ctx.standin.requests.chat.length
  const { callId, client } = await webCall(ctx, account, front._id)
  await turn(client, 'My e-mail is ada@example.com.', /Got it/)
  t.same(Object.keys(ctx.standin.requests.chat[before].body.tools[1].function.parameters.properties), ['email'])
  await turn(client, 'I have a question about plans.', /Billing here/)
  await turn(client, 'The basic one, please.', /Basic it is/)
  const after = ctx.standin.requests.chat.at(-1)!.body
  t.match(after.messages[0].content, /You are billing\./)
  t.same(after.tools.map((tool: { function: { name: string } }) => tool.function.name), ['save_collected_data'], 'the new agent\'s function')
  t.same(Object.keys(after.tools[0].function.parameters.properties), ['plan'], 'with the new agent\'s fields')
  t.match(after.messages[0].content, /- plan \(one of basic, pro\)[\s\S]*Already saved \(do not ask again unless the caller corrects it\): email: "ada@example.com"/, 'the new agent knows what was collected')
  client.hangup()
  t.same((await finishedCall(ctx.app, account.headers, callId)).collected_data, { email: 'ada@example.com', plan: 'basic' }, 'both agents\' fields are kept')
})

t.test('realtime: the function offered in session.update, the fields in German instructions, a bad value answered as the function\'s output, the values stored', async (t) => {
  const standin: RealtimeStandin = await startRealtimeStandin(t)
  const ctx = await listen(t, { VOICE_ENGINE: 'cascade', REALTIME_URL: standin.url, REALTIME_API_KEY: 'sk-realtime-test' })
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, {
    is_data_collection_active: true,
    data_retrieval: [{ ...FIELDS[1], required: true }, FIELDS[3]],
    call_settings: { language: 'de-DE' }
  }, { begin_message: 'Hallo!', engine: 'realtime' })
  standin.replies.push(
    { calls: [{ name: 'save_collected_data', arguments: '{"plan":"gold","visit_date":"2026-02-30"}' }] },
    { text: 'Welchen Tarif?' },
    { calls: [{ name: 'save_collected_data', arguments: '{"plan":"basic","visit_date":"2026-03-02"}' }] },
    { text: 'Notiert.' }
  )
  const { callId, client } = await webCall(ctx, account, agent._id)
  const update = standin.events.find((e) => e.type === 'session.update') as any
  t.same(update.session.tools, [{
    type: 'function',
    name: 'save_collected_data',
    description: 'Save details the caller gave you, as soon as they give them: one or several fields at a time. Saved values are kept; save a field again to correct it.',
    parameters: { type: 'object', properties: { plan: PARAMETERS.properties.plan, visit_date: PARAMETERS.properties.visit_date }, additionalProperties: false }
  }])
  t.match(update.session.instructions, /Fragen Sie im Gespräch nach und nach[^\n]*\n- plan \(eines von basic, pro, Pflicht\): the plan they want\n- visit_date \(Datum\): when they want to visit\nSobald der Anrufer eine Angabe nennt, speichern Sie sie mit der Funktion save_collected_data/)

  await turn(client, 'Den goldenen Tarif ab dem dreißigsten Februar.', /Welchen Tarif/)
  const outputs = () => standin.events.filter((e: any) => e.type === 'conversation.item.create' && e.item?.type === 'function_call_output').map((e: any) => e.item.output as string)
  t.match(outputs()[0], /^Error: Nothing was saved: plan must be one of basic, pro; visit_date must be a date as YYYY-MM-DD\./, 'the bad values are named')
  await turn(client, 'Basic, ab dem zweiten März.', /Notiert/)
  t.equal(outputs()[1], 'Saved: plan, visit_date. Every required field is collected.')
  t.same(toolEvents(client).map((e) => e.tool.type), ['collect_data', 'collect_data'])
  client.hangup()
  t.same((await finishedCall(ctx.app, account.headers, callId)).collected_data, { plan: 'basic', visit_date: '2026-03-02' })
})

t.test('the simulator (the console\'s text test-call) saves what the caller states and says so; a bad value is told', async (t) => {
  const ctx = await listen(t, { VOICE_ENGINE: 'simulator' })
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, { is_data_collection_active: true, data_retrieval: FIELDS })
  const { callId, client } = await webCall(ctx, account, agent._id)
  t.match(await client.waitFor('ready'), { engine: 'simulator' })
  await turn(client, 'My email is ada@example.com, visit date: 2026-05-04.', /^Thank you, I have noted that\.$/)
  t.match(toolEvents(client)[0], { tool: { name: 'save_collected_data', type: 'collect_data', arguments: '{"email":"ada@example.com","visit_date":"2026-05-04"}' } })
  await turn(client, 'My budget is lots and newsletter is yes.', /^I could not note that: Nothing was saved: budget must be a number\./)
  await turn(client, 'The budget is 80 and the newsletter is yes.', /noted/)
  client.hangup()
  t.same((await finishedCall(ctx.app, account.headers, callId)).collected_data, { email: 'ada@example.com', visit_date: '2026-05-04', budget: 80, newsletter: true })
})

t.test('the function checks every value against its field, saves all or nothing, and keeps what was saved before', async (t) => {
  const fields = FIELDS.map((field) => ({ required: false, ...field })) as RetrievalField[]
  t.equal(collectData({ is_data_collection_active: false, data_retrieval: fields }, 'en', {}, []), undefined, 'inactive: no function')
  t.equal(collectData({ is_data_collection_active: true, data_retrieval: [] }, 'en', {}, []), undefined, 'no fields: no function')
  t.equal(collectData({ is_data_collection_active: true, data_retrieval: fields }, 'en', {}, ['save_collected_data', 'save_collected_data_2'])?.tool.spec.name, 'save_collected_data_3', 'a name no tool has')

  const collected = { email: 'old@example.com' }
  const { tool, instructions } = collectData({ is_data_collection_active: true, data_retrieval: fields }, 'fr-FR', collected, [])!
  t.match(instructions, /^During the conversation, ask the caller/, 'English for a language without lines of its own')
  t.match(instructions, /Already saved \(do not ask again unless the caller corrects it\): email: "old@example.com"$/)
  const run = async (args: Record<string, unknown>) => await tool.run(args, undefined as never)
  for (const [args, problem] of [
    [{ budget: '12' }, /budget must be a number/],
    [{ budget: Number.NaN }, /budget must be a number/],
    [{ newsletter: 'yes' }, /newsletter must be true or false/],
    [{ plan: 'Pro' }, /plan must be one of basic, pro/],
    [{ visit_date: '2026-02-30' }, /visit_date must be a date as YYYY-MM-DD/],
    [{ visit_date: '4 May 2026' }, /visit_date must be a date as YYYY-MM-DD/],
    [{ email: '   ' }, /email must be a text that is not empty/],
    [{ email: 'a\u0000b' }, /email must be a text that is not empty/],
    [{ email: '\ud800' }, /email must be a text that is not empty/],
    [{ email: 'x'.repeat(1001) }, /email must be at most 1000 characters/],
    [{ phone: '+4930123' }, /phone is not a field to collect \(the fields: email, plan, budget, visit_date, newsletter\)/],
    [{}, /give at least one of the fields/],
    [{ email: null }, /give at least one of the fields/],
    [{ email: 'new@example.com', budget: 'a lot' }, /budget must be a number/]
  ] as const) await t.rejects(run(args), problem, JSON.stringify(args))
  t.same(collected, { email: 'old@example.com' }, 'nothing saved by a run with a bad value')
  t.same(await run({ email: '  new@example.com ', newsletter: false, budget: 0, plan: null }), { output: 'Saved: email, newsletter, budget. Every required field is collected.' })
  t.same(collected, { email: 'new@example.com', newsletter: false, budget: 0 }, 'merged, trimmed, corrected')
})
