import t from 'tap'
import { createLogger } from '../../src/logger.ts'
import { createMailer } from '../../src/mail/mailer.ts'
import type { Workflow } from '../../src/modules/agents/workflow.ts'
import type { LiveTool, ToolContext } from '../../src/modules/capabilities/live.ts'
import { MAX_ACTION_STEPS, WorkflowRun } from '../../src/modules/workflows/run.ts'
import { valueAt } from '../../src/modules/workflows/paths.ts'
import { createAccount, setup, type TestContext } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { startReceiver } from '../helpers/receiver.ts'

// The workflow engine on its own (workflows/run.ts): the step's functions, transitions on variables and by the
// model, the action steps run on entering; the end-to-end tests through the voice protocols are test/voice/workflow*.

const ENV = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true' }

function toolContext (ctx: TestContext, userId: string, variables: Record<string, unknown> = {}): ToolContext {
  const log = createLogger(ctx.config)
  return {
    db: ctx.db, config: ctx.config, log, userId, callId: 'call_test', signal: new AbortController().signal,
    variables: () => ({ call_id: 'call_test', ...variables }), customer: { phone: null, email: null },
    mailer: createMailer(ctx.db, ctx.config, log), language: 'en'
  }
}

const tool = (name: string, capabilityId?: string): LiveTool & { capabilityId?: string } =>
  ({ type: 'api_call', spec: { name, description: name, parameters: { type: 'object', properties: {} } }, run: async () => ({ output: name }), ...(capabilityId === undefined ? {} : { capabilityId }) })

const booking = (receiverUrl = 'http://127.0.0.1:9'): Workflow => ({
  start: 'greet',
  steps: [
    {
      id: 'greet',
      name: 'Greeting',
      type: 'conversation',
      instructions: 'Ask how many people, {{caller_name}}.',
      tool_ids: ['tool_a'],
      variables: [{ name: 'party_size', type: 'number', required: true }, { name: 'note', type: 'string' }],
      transitions: [
        { to: 'large', condition: { type: 'expression', expression: 'party_size > 8' } },
        { to: 'lookup', condition: { type: 'always' } }
      ]
    },
    { id: 'large', name: 'Large party', type: 'conversation', instructions: 'Explain the group menu.', interruption_sensitivity: 0.3, transitions: [{ to: 'done', condition: { type: 'prompt', prompt: 'the caller agreed' } }] },
    {
      id: 'lookup',
      name: 'Find a table',
      type: 'api_call',
      run: 'during_call',
      url: `${receiverUrl}/tables?size={{party_size}}`,
      method: 'GET',
      headers: { authorization: 'Bearer {{call_id}}' },
      response_variables: { table: 'data.tables[0].name', missing: 'data.nothing' },
      transitions: [
        { to: 'done', condition: { type: 'expression', expression: 'lookup_status != 200' } },
        { to: 'later', condition: { type: 'always' } }
      ]
    },
    { id: 'later', name: 'Send to CRM', type: 'api_call', run: 'after_call', url: `${receiverUrl}/crm`, transitions: [{ to: 'confirm', condition: { type: 'always' } }] },
    { id: 'confirm', name: 'Confirm', type: 'conversation', instructions: 'Table {{table}} is yours.', tool_ids: [] },
    { id: 'human', name: 'Human', type: 'transfer', message: 'Putting you through.', target: { type: 'number', phone_number: '+14155550100', timeout_seconds: 20 }, global: { prompt: 'the caller asks for a human' } },
    { id: 'done', name: 'Goodbye', type: 'end', message: 'Bye {{caller_name}}!' }
  ]
})

t.test('paths in an answer: names, indexes, quoted names', async (t) => {
  const answer = { data: { tables: [{ name: 'T1' }, { name: 'T2' }], 'a.b': 1 } }
  t.equal(valueAt(answer, 'data.tables[1].name'), 'T2')
  t.equal(valueAt(answer, 'data["a.b"]'), 1)
  t.same(valueAt(answer, 'data.tables[0]'), { name: 'T1' })
  t.equal(valueAt(answer, 'data.tables[5].name'), undefined)
  t.equal(valueAt(answer, 'data.constructor'), undefined, 'own members only')
  t.equal(valueAt(answer, '.data'), undefined)
  t.equal(valueAt(answer, 'data..tables'), undefined)
  t.equal(valueAt([1, 2], '[1]'), 2)
})

t.test('a conversation step offers its tools, its save function, its transitions and the global steps', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const run = new WorkflowRun(booking(), undefined, () => 1000)
  const moved = await run.enter('greet', toolContext(ctx, account.user.id))
  t.same(moved.entered, [{ id: 'greet', name: 'Greeting', type: 'conversation' }])
  t.same(run.state().path, [{ id: 'greet', name: 'Greeting', type: 'conversation', at: 1000 }])

  const setupOf = run.setup([tool('a', 'tool_a'), tool('b', 'tool_b'), tool('save_variables', 'tool_a')], { caller_name: 'Ann' })
  t.match(setupOf.instructions, /step "Greeting"[\s\S]*Ask how many people, Ann\./)
  t.same(setupOf.tools.map((f) => f.spec.name), ['a', 'save_variables', 'save_variables_2', 'go_to_human'], 'tool_ids filter by capability; the save function takes a free name')
  t.same(setupOf.collect?.fields.map((f) => f.name), ['party_size', 'note'])
  const save = setupOf.tools[2]
  const context = toolContext(ctx, account.user.id)

  await t.rejects(save.run({ party_size: 'many' }, context), /party_size must be a number/, 'typed values, as data collection checks them')
  const noteOnly = await save.run({ note: 'window' }, context)
  t.equal(noteOnly.step, undefined, 'the default waits for the required variables')
  t.match(noteOnly.output, /Still needed: party_size/)
  const large = await save.run({ party_size: 12 }, context)
  t.equal(large.step, 'large', 'an expression that holds wins over the default')
  t.same(run.state().variables, { note: 'window', party_size: 12 })

  await run.enter('large', context)
  const largeSetup = run.setup([tool('a', 'tool_a')])
  t.equal(largeSetup.interruptionSensitivity, 0.3)
  t.same(largeSetup.tools.map((f) => f.spec.name), ['a', 'go_to_done', 'go_to_human'], 'no tool_ids: every tool; a prompt transition is a function')
  t.same(await largeSetup.tools[1].run({}, context), { output: 'Moving on to "Goodbye".', step: 'done' })

  const small = new WorkflowRun(booking(), undefined, () => 0)
  await small.enter('greet', context)
  t.equal((await small.setup([]).tools[0].run({ party_size: 4 }, context)).step, 'lookup', 'the default once every required variable is in')
})

t.test('entering runs action steps: an API call maps its answer, an after-call step is recorded, until a conversation step', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const receiver = await startReceiver(t)
  receiver.answers.push({ status: 200, body: JSON.stringify({ data: { tables: [{ name: 'Garden 4' }] } }), headers: { 'content-type': 'application/json' } })
  const run = new WorkflowRun(booking(receiver.url), { step: 'greet', path: [], variables: { party_size: 4 }, after: [] }, () => 5)
  const context = toolContext(ctx, account.user.id)
  const moved = await run.enter('lookup', context)
  t.same(moved.entered.map((s) => s.id), ['lookup', 'later', 'confirm'])
  t.match(moved.output, /Find a table: done \(table = Garden 4, missing = \)[\s\S]*step "Confirm"/)
  t.equal(moved.outcome, undefined)
  t.equal(receiver.received[0].url, '/tables?size=4')
  t.equal(receiver.received[0].headers.authorization, 'Bearer call_test', 'headers with variables, as an api_call action sends them')
  const state = run.state()
  t.same(state.variables, { party_size: 4, lookup_status: 200, table: 'Garden 4', missing: null })
  t.same(state.after, ['later'])
  t.equal(state.step, 'confirm')
  const confirm = run.setup([tool('a', 'tool_a')])
  t.match(confirm.instructions, /Table Garden 4 is yours/, 'the mapped variable fills the next step\'s prompt')
  t.same(confirm.tools.map((f) => f.spec.name), ['go_to_human'], 'tool_ids [] : none of the agent\'s tools')
})

t.test('a failed API call step: status 0, variables cleared, its condition on the status leads on', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const run = new WorkflowRun(booking('http://127.0.0.1:1'), { step: 'greet', path: [], variables: { party_size: 4, table: 'old', caller_name: 'Bo' }, after: [] }, () => 5)
  const moved = await run.enter('lookup', toolContext(ctx, account.user.id))
  t.same(moved.entered.map((s) => s.id), ['lookup', 'done'])
  t.equal(run.state().variables.lookup_status, 0)
  t.equal(run.state().variables.table, null)
  t.same(moved.outcome, { endCall: { message: 'Bye Bo!' } })
  t.match(moved.output, /Find a table failed[\s\S]*say exactly this and nothing more: Bye Bo!/)
})

t.test('a message step is sent through the messaging module and logged with the call', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const [callId] = await insertCalls(ctx.db, account.user.id, agent, [{ call_status: 'started' }])
  const workflow: Workflow = {
    start: 'mail',
    steps: [
      { id: 'mail', name: 'Confirmation', type: 'message', channel: 'email', to: '{{email}}', subject: 'Table for {{guest}}', message: 'See you at {{slot}}, {{guest}}.', transitions: [{ to: 'bye', condition: { type: 'always' } }] },
      { id: 'bye', name: 'Bye', type: 'end' }
    ]
  }
  const run = new WorkflowRun(workflow, { step: 'mail', path: [], variables: { guest: 'Ada', slot: '19:30', email: 'ada@example.com' }, after: [] }, () => 0)
  const moved = await run.enter('mail', { ...toolContext(ctx, account.user.id), callId })
  t.same(moved.entered.map((s) => s.id), ['mail', 'bye'])
  t.match(moved.output, /Confirmation: sent to ada@example.com\./)
  t.same(moved.outcome, { endCall: {} })
  const [message] = await ctx.db.selectFrom('messages').selectAll().where('call_id', '=', callId).execute()
  t.match(message, { action_id: 'mail', origin: 'live', channel: 'email', recipient: 'ada@example.com', subject: 'Table for Ada', body: 'See you at 19:30, Ada.' })

  const nobody = new WorkflowRun(workflow, undefined, () => 0)
  t.match((await nobody.enter('mail', { ...toolContext(ctx, account.user.id), callId })).output, /Confirmation: not sent \(no recipient\)/, 'an empty recipient: not sent, the workflow goes on')
})

t.test('a conversation step that collects nothing offers its default as a function', async (t) => {
  const workflow: Workflow = {
    start: 'hello',
    steps: [
      { id: 'hello', name: 'Hello', type: 'conversation', instructions: 'Greet.', transitions: [{ to: 'bye', condition: { type: 'always' } }] },
      { id: 'bye', name: 'Bye', type: 'end' }
    ]
  }
  const run = new WorkflowRun(workflow, { step: 'hello', path: [], variables: {}, after: [] }, () => 0)
  const [move] = run.setup([]).tools
  t.match(move.spec, { name: 'go_to_bye', description: /"Hello"\) is done/ })
})

t.test('moves made at once run one after the other', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const receiver = await startReceiver(t)
  const context = toolContext(ctx, account.user.id)
  const run = new WorkflowRun(booking(receiver.url), { step: 'greet', path: [], variables: { party_size: 2 }, after: [] }, () => 0)
  const [lookup, human] = await Promise.all([run.enter('lookup', context), run.enter('human', context)])
  t.same(lookup.entered.map((s) => s.id), ['lookup', 'later', 'confirm'])
  t.same(human.entered.map((s) => s.id), ['human'])
  t.same(run.state().path.map((s) => s.id), ['lookup', 'later', 'confirm', 'human'], 'the second move waited for the first one\'s API call')
})

t.test('transfer steps answer a transfer; a loop of action steps stops', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const context = toolContext(ctx, account.user.id)
  const run = new WorkflowRun(booking(), undefined, () => 0)
  const human = await run.enter('human', context)
  t.same(human.outcome, { forwardTo: { type: 'agent_transfer', phoneNumber: '+14155550100', timeoutSeconds: 20, showCallerNumber: false } })
  t.match(human.output, /say exactly this: Putting you through/)

  const toAgent = new WorkflowRun({ start: 'x', steps: [{ id: 'x', name: 'X', type: 'transfer', target: { type: 'agent', agent_id: 'agent_b' } }] }, undefined, () => 0)
  t.same((await toAgent.enter('x', context)).outcome, { transferTo: 'agent_b' })

  const loop: Workflow = {
    start: 'a',
    steps: [
      { id: 'a', name: 'A', type: 'api_call', run: 'after_call', url: 'http://127.0.0.1:9/a', transitions: [{ to: 'b', condition: { type: 'always' } }] },
      { id: 'b', name: 'B', type: 'api_call', run: 'after_call', url: 'http://127.0.0.1:9/b', transitions: [{ to: 'a', condition: { type: 'always' } }] }
    ]
  }
  const looping = new WorkflowRun(loop, undefined, () => 0)
  const moved = await looping.enter('a', context)
  t.equal(moved.entered.length, MAX_ACTION_STEPS)
  t.match(moved.output, /stopped after too many automatic steps/)
  t.same(looping.state().after, ['a', 'b'], 'an after-call step is recorded once')
  t.same(looping.setup([tool('a')]), { instructions: '', tools: [] }, 'no conversation step: nothing to add')
})

t.test('an expression reads the call\'s variables too (dynamic_context, collected data); the workflow\'s own win for a name both have', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const workflow: Workflow = {
    start: 'ask',
    steps: [
      {
        id: 'ask',
        name: 'Ask',
        type: 'conversation',
        instructions: 'Ask how many people.',
        variables: [{ name: 'party_size', type: 'number', required: true }],
        transitions: [
          { to: 'vip', condition: { type: 'expression', expression: 'party_size > 8 and tier = "gold"' } },
          { to: 'regular', condition: { type: 'always' } }
        ]
      },
      { id: 'vip', name: 'VIP', type: 'conversation', instructions: 'Offer the private room.' },
      { id: 'regular', name: 'Regular', type: 'conversation', instructions: 'Book a table.' }
    ]
  }
  const saveIn = async (variables: Record<string, unknown>, size: number) => {
    const run = new WorkflowRun(workflow, undefined, () => 0)
    const context = toolContext(ctx, account.user.id, variables)
    await run.enter('ask', context)
    const save = run.setup([]).tools.find((candidate) => candidate.spec.name === 'save_variables')!
    return (await save.run({ party_size: size }, context)).step
  }
  t.equal(await saveIn({ tier: 'gold' }, 10), 'vip', 'tier from the call\'s dynamic_context')
  t.equal(await saveIn({ tier: 'silver' }, 10), 'regular')
  t.equal(await saveIn({}, 10), 'regular', 'a variable the call does not have: the comparison is false')
  t.equal(await saveIn({ tier: 'gold', party_size: 2 }, 10), 'vip', 'the workflow\'s party_size, not the call\'s')
})
