import t, { type Test } from 'tap'
import type { Workflow } from '../../src/modules/agents/workflow.ts'
import { recordVersion } from '../../src/modules/agents/versions.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { FAST } from '../helpers/deliveries.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { poll } from '../helpers/poll.ts'
import { startRealtimeStandin } from '../helpers/realtime-standin.ts'
import { startReceiver, type Receiver } from '../helpers/receiver.ts'
import { finishedCall, startWebCall, typedTurn, type WebCallClient } from '../helpers/voice-client.ts'

// A call runs its agent's workflow (docs/workflows.md, "How a call runs a workflow"), through the real protocols:
// web calls over the browser WebSocket, the model's function calls scripted on the OpenAI HTTP stand-in (cascade)
// and the Realtime stand-in, API call steps reaching a local receiver during and after the call.

async function listen (t: Test, env: Record<string, string>) {
  const ctx = await setup(t, { ...FAST, ...env }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  return { ...ctx, url }
}

async function agentWith (ctx: TestContext, account: Account, name: string, llm: Record<string, unknown> = {}, body: Record<string, unknown> = {}) {
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Welcome to Luigi\'s!', general_prompt: 'You take bookings for Luigi\'s.', ...llm } })).json()
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: name, llm_id: config._id, ...body } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json() as { _id: string, agent_name: string }
}

/** The agent's workflow, saved through the agent API (a new version of the agent, which its calls run). */
async function setWorkflow (ctx: TestContext, account: Account, agentId: string, workflow: Workflow) {
  const res = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agentId}`, headers: account.headers, payload: { workflow } })
  if (res.statusCode !== 200) throw new Error(res.body)
}

/** The booking flow: a variable condition, an API call mapping an answer, a global "human" step, an after-call step. */
const booking = (receiver: Receiver, humanAgentId: string): Workflow => ({
  start: 'greet',
  steps: [
    {
      id: 'greet',
      name: 'Party size',
      type: 'conversation',
      instructions: 'Ask for the caller\'s name and how many people are coming.',
      variables: [{ name: 'party_size', type: 'number', required: true }, { name: 'guest', type: 'string', required: true }],
      transitions: [
        { to: 'large', condition: { type: 'expression', expression: 'party_size > 8' } },
        { to: 'lookup', condition: { type: 'always' } }
      ]
    },
    {
      id: 'large',
      name: 'Large party',
      type: 'conversation',
      instructions: 'Parties over eight book the group menu: explain it to {{guest}}.',
      transitions: [{ to: 'done', condition: { type: 'prompt', prompt: 'the caller accepts the group menu' } }]
    },
    {
      id: 'lookup',
      name: 'Find a table',
      type: 'api_call',
      run: 'during_call',
      method: 'GET',
      url: `${receiver.url}/slots?size={{party_size}}`,
      headers: { 'x-shop': 'luigi' },
      response_variables: { slot: 'slots[0].time' },
      transitions: [{ to: 'confirm', condition: { type: 'always' } }]
    },
    {
      id: 'confirm',
      name: 'Confirm',
      type: 'conversation',
      instructions: 'Offer {{guest}} the table at {{slot}}.',
      variables: [{ name: 'confirmed', type: 'boolean', required: true }],
      transitions: [{ to: 'crm', condition: { type: 'expression', expression: '{{confirmed}} = true' } }]
    },
    {
      id: 'crm',
      name: 'Booking to CRM',
      type: 'api_call',
      run: 'after_call',
      url: `${receiver.url}/crm`,
      headers: { authorization: 'Bearer crm-key' },
      body: { guest: '{{guest}}', party: '{{party_size}}', slot: '{{slot}}', summary: '{{call_summary}}' },
      send_only_custom_fields: true,
      retry_schedule: [60, 120],
      transitions: [{ to: 'done', condition: { type: 'always' } }]
    },
    { id: 'human', name: 'Human', type: 'transfer', message: 'Let me get a colleague.', target: { type: 'agent', agent_id: humanAgentId }, global: { prompt: 'the caller asks to talk to a human' } },
    { id: 'done', name: 'Goodbye', type: 'end', message: 'Goodbye {{guest}}!' }
  ]
})

const steps = (items: Array<{ speaker: string, step?: { id: string } }>) => items.filter((item) => item.speaker === 'step').map((item) => item.step!.id)
const stepEvents = (client: WebCallClient) => steps(client.events as unknown as Array<{ speaker: string, step?: { id: string } }>)
const toolNames = (request: { body: { tools?: Array<{ function: { name: string } }> } }) => (request.body.tools ?? []).map((tool) => tool.function.name)

t.test('cascade: a three-step booking, an API call step mapping an answer into the next prompt, an after-call step on its own schedule', async (t) => {
  const standin = await startOpenAiHttpStandin(t)
  const ctx = await listen(t, { VOICE_ENGINE: 'cascade', STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url })
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const human = await agentWith(ctx, account, 'Human desk')
  const agent = await agentWith(ctx, account, 'Luigi')
  await setWorkflow(ctx, account, agent._id, booking(receiver, human._id))
  receiver.answers.push(
    { status: 200, body: JSON.stringify({ slots: [{ time: '19:30' }, { time: '21:00' }] }), headers: { 'content-type': 'application/json' } },
    { status: 503, body: 'busy' } // the after-call step's first attempt: retried on its own schedule
  )
  standin.replies.push(
    { toolCalls: [{ name: 'save_variables', arguments: { guest: 'Ada', party_size: 4 } }] },
    { text: 'I have a table at 19:30 for you.' },
    { toolCalls: [{ name: 'save_variables', arguments: { confirmed: true } }] },
    { text: 'Goodbye Ada!' }
  )

  const { callId, client } = await startWebCall(ctx.app, ctx.url, account.headers, agent._id)
  t.same(stepEvents(client), ['greet'], 'the start step is entered as the call starts')
  await typedTurn(client, 'Ada here, a table for four please.', /19:30/)
  const [first, second] = standin.requests.chat
  t.match(first.body.messages[0].content, /You take bookings for Luigi's\.[\s\S]*You are in the step "Party size"[\s\S]*Ask for the caller's name[\s\S]*- party_size \(number, required\)[\s\S]*save_variables/)
  t.same(toolNames(first), ['save_variables', 'go_to_human'], 'the step\'s save function and the global step')
  t.equal(receiver.received[0].url, '/slots?size=4', 'the API call step ran as the step was entered')
  t.equal(receiver.received[0].headers['x-shop'], 'luigi')
  t.match(second.body.messages[0].content, /You are in the step "Confirm"[\s\S]*Offer Ada the table at 19:30\./, 'the answer, mapped into {{slot}}, fills the next step\'s prompt')
  t.same(toolNames(second), ['save_variables', 'go_to_human'])
  t.match(second.body.messages.at(-1), { role: 'tool', content: /^Saved: guest, party_size\.[\s\S]*Find a table: done \(slot = 19:30\)[\s\S]*step "Confirm"/ })
  t.same(stepEvents(client), ['greet', 'lookup', 'confirm'])

  await typedTurn(client, 'Yes, book it.', /Goodbye Ada/)
  t.match(standin.requests.chat.at(-1)!.body.messages.at(-1), { role: 'tool', content: /say exactly this and nothing more: Goodbye Ada!/ })
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.equal(done.disconnection_reason, 'agent_hangup', 'the end step ends the call')
  t.same(steps(done.transcription), ['greet', 'lookup', 'confirm', 'crm', 'done'], 'the transcript records each step entered')
  t.match(done.transcription.find((item: { speaker: string }) => item.speaker === 'step'), { content: 'Party size', step: { id: 'greet', name: 'Party size', type: 'conversation' } })
  t.same(done.workflow.path.map((entry: { id: string }) => entry.id), ['greet', 'lookup', 'confirm', 'crm', 'done'])
  const variables = { guest: 'Ada', party_size: 4, lookup_status: 200, slot: '19:30', confirmed: true }
  t.same(done.workflow.variables, variables)
  t.match(done.custom_analysis_data, variables, 'the workflow\'s variables join custom_analysis_data')
  const row = await ctx.db.selectFrom('calls').select('workflow').where('id', '=', callId).executeTakeFirstOrThrow()
  t.same(row.workflow?.after, ['crm'])

  const delivered = await poll(async () => await ctx.db.selectFrom('webhook_deliveries').selectAll().where('call_id', '=', callId).execute(),
    (rows) => rows.length === 1 && rows[0].status === 'delivered', { message: (rows) => `deliveries: ${JSON.stringify(rows.map((r) => [r.kind, r.status, r.attempts_made]))}` })
  t.match(delivered[0], { kind: 'workflow_step', name: 'Booking to CRM', action_id: 'crm', schedule: [60, 120], attempts_max: 3, attempts_made: 2 }, 'its own retry schedule: the 503 was retried')
  const crm = receiver.received.filter((r) => r.url === '/crm')
  t.equal(crm.length, 2)
  t.same(crm[1].json, { guest: 'Ada', party: 4, slot: '19:30', summary: done.call_summary }, 'shaped with the workflow\'s variables by their own names and the call\'s')
  t.equal(crm[1].headers.authorization, 'Bearer crm-key', 'the step\'s headers, read from the workflow at the attempt')
})

t.test('cascade: a variable condition leads elsewhere; the global step is reachable from any step and transfers', async (t) => {
  const standin = await startOpenAiHttpStandin(t)
  const ctx = await listen(t, { VOICE_ENGINE: 'cascade', STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url })
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const human = await agentWith(ctx, account, 'Human desk', { general_prompt: 'You are the human desk.', begin_message: null })
  const agent = await agentWith(ctx, account, 'Luigi')
  await setWorkflow(ctx, account, agent._id, booking(receiver, human._id))
  standin.replies.push(
    { toolCalls: [{ name: 'save_variables', arguments: { guest: 'Bo', party_size: 12 } }] },
    { text: 'For twelve we serve the group menu.' },
    { toolCalls: [{ name: 'go_to_human', arguments: {} }] },
    { text: 'The human desk here.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, account.headers, agent._id)
  await typedTurn(client, 'Bo, twelve people.', /group menu/)
  const large = standin.requests.chat[1]
  t.match(large.body.messages[0].content, /step "Large party"[\s\S]*explain it to Bo\./, 'party_size > 8 went to the large-party step')
  t.same(toolNames(large), ['go_to_done', 'go_to_human'], 'its prompt transition and the global step, as functions')
  t.equal(receiver.received.length, 0, 'the API call step was not reached')

  await typedTurn(client, 'Can I talk to a person?', /human desk here/)
  const after = standin.requests.chat.at(-1)!.body
  t.match(after.messages[0].content, /You are the human desk\./, 'the transfer step handed the call to the other agent')
  t.notMatch(after.messages[0].content, /You are in the step/, 'which talks from its own prompt')
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.same(steps(done.transcription), ['greet', 'large', 'human'])
  t.match(done.transfer_history, [{ type: 'agent_transfer', to_agent_id: human._id }])
  t.same(done.workflow.variables, { guest: 'Bo', party_size: 12 })
  t.equal(await ctx.db.selectFrom('webhook_deliveries').select('id').where('call_id', '=', callId).executeTakeFirst(), undefined, 'no after-call step reached: nothing delivered')
})

t.test('realtime: the step\'s instructions and functions in session.update, moved by the variable condition and the API answer', async (t) => {
  const standin = await startRealtimeStandin(t)
  const ctx = await listen(t, { VOICE_ENGINE: 'cascade', REALTIME_URL: standin.url, REALTIME_API_KEY: 'sk-realtime-test' })
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const human = await agentWith(ctx, account, 'Human desk')
  const agent = await agentWith(ctx, account, 'Luigi', { engine: 'realtime' })
  await setWorkflow(ctx, account, agent._id, booking(receiver, human._id))
  receiver.answers.push({ status: 200, body: JSON.stringify({ slots: [{ time: '20:15' }] }), headers: { 'content-type': 'application/json' } })
  standin.replies.push(
    { calls: [{ name: 'save_variables', arguments: '{"guest":"Cy","party_size":3}' }] },
    { text: 'The table at 20:15 is yours.' },
    { calls: [{ name: 'go_to_human', arguments: '{}' }] },
    { text: 'A colleague will help.' }
  )
  const { callId, client } = await startWebCall(ctx.app, ctx.url, account.headers, agent._id)
  const updates = () => standin.events.filter((e) => e.type === 'session.update') as unknown as Array<{ session: { instructions: string, tools: Array<{ name: string }> } }>
  t.match(updates()[0].session.instructions, /step "Party size"/)
  t.same(updates()[0].session.tools.map((tool) => tool.name), ['save_variables', 'go_to_human'])
  await typedTurn(client, 'Cy, three of us.', /20:15/)
  const confirm = updates().at(-1)!.session
  t.match(confirm.instructions, /step "Confirm"[\s\S]*Offer Cy the table at 20:15\./, 'the engine was updated with the next step')
  await typedTurn(client, 'Actually, a human please.', /colleague/)
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.same(steps(done.transcription), ['greet', 'lookup', 'confirm', 'human'])
  t.same(done.workflow.variables, { guest: 'Cy', party_size: 3, lookup_status: 200, slot: '20:15' })
  t.match(done.custom_analysis_data, { guest: 'Cy', slot: '20:15' })
})

t.test('an invalid stored workflow: the call runs from the single prompt', async (t) => {
  const standin = await startOpenAiHttpStandin(t)
  const ctx = await listen(t, { VOICE_ENGINE: 'cascade', STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url })
  const account = await createAccount(ctx.db)
  const agent = await agentWith(ctx, account, 'Luigi')
  // Written behind the API's back (as a schema change could leave one), and made the version calls run.
  await ctx.db.updateTable('agents').set({ workflow: JSON.stringify({ start: 'x', steps: [{ id: 'x', type: 'teleport' }] }) }).where('id', '=', agent._id).execute()
  await ctx.db.transaction().execute(async (trx) => await recordVersion(trx, account.user.id, agent._id, 'workflow'))
  const { callId, client } = await startWebCall(ctx.app, ctx.url, account.headers, agent._id)
  await typedTurn(client, 'Hello.', /You said/)
  t.notMatch(standin.requests.chat[0].body.messages[0].content, /You are in the step/)
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.equal(done.workflow, null)
})
