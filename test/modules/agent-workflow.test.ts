import { randomBytes } from 'node:crypto'
import t from 'tap'
import { createCipher, isSealed, openSecret } from '../../src/db/secrets.ts'
import { foreignKeyIds, rewriteSecrets } from '../../src/db/stored-secrets.ts'
import { findAgent } from '../../src/modules/agents/queries.ts'
import { createAccount, setup, type TestContext } from '../helpers/app.ts'
import { addAction, createAgent } from '../helpers/calls.ts'

// An agent's workflow through the API (docs/workflows.md): every refusal of the graph check with the member it names,
// the write-only header values of API call steps (sealed at rest, masked in answers, kept by the mask, dropped when
// the URL moves to another origin), PATCH null, and the named schemas of the OpenAPI document.

type Step = Record<string, any>
interface Flow { start: string, steps: Step[] }

const SECRET = 'Bearer step-secret'
const MASK = '********'

/** A booking flow that passes every rule: a variable condition, an API call step, a global "human" step, an after-call step. */
function booking (): Flow {
  return {
    start: 'greet',
    steps: [
      {
        id: 'greet',
        name: 'Greet',
        type: 'conversation',
        instructions: 'Ask how many people are coming.',
        variables: [{ name: 'party_size', type: 'number', required: true }],
        transitions: [
          { to: 'large', condition: { type: 'expression', expression: 'party_size > 8' } },
          { to: 'check', condition: { type: 'always' } }
        ]
      },
      {
        id: 'check',
        name: 'Check availability',
        type: 'api_call',
        run: 'during_call',
        url: 'https://api.example.com/slots?n={{party_size}}',
        method: 'GET',
        headers: { Authorization: SECRET },
        response_variables: { slot: 'data.slot' },
        transitions: [
          { to: 'confirm', condition: { type: 'expression', expression: '{{check_status}} = 200 and slot is set' } },
          { to: 'human', condition: { type: 'always' } }
        ]
      },
      { id: 'confirm', name: 'Confirm', type: 'conversation', instructions: 'Offer {{slot}}.', transitions: [{ to: 'log', condition: { type: 'prompt', prompt: 'the caller accepts the time' } }] },
      { id: 'log', name: 'Log the booking', type: 'api_call', run: 'after_call', url: 'https://hooks.example.com/bookings', headers: { 'X-Key': 'k-1' }, retry_schedule: [60], transitions: [{ to: 'bye', condition: { type: 'always' } }] },
      { id: 'large', name: 'Large party', type: 'transfer', message: 'Let me put you through.', target: { type: 'number', phone_number: '+14155550123' } },
      { id: 'human', name: 'Human', type: 'transfer', global: { prompt: 'the caller asks for a person' }, target: { type: 'number', phone_number: '+14155550124' } },
      { id: 'bye', name: 'Goodbye', type: 'end', message: 'See you soon.' }
    ]
  }
}

const stepOf = (flow: Flow, id: string) => flow.steps.find((step) => step.id === id)!

async function post (ctx: TestContext, headers: Record<string, string>, workflow: unknown, extra: Record<string, unknown> = {}) {
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers, payload: {} })).json()
  return await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers, payload: { agent_name: 'Bistro', llm_id: llm._id, workflow, ...extra } })
}

t.test('a valid workflow is stored, answered with its header values masked, and sealed at rest', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const res = await post(ctx, account.headers, booking())
  t.equal(res.statusCode, 201, res.body)
  const agent = res.json()
  const expected = booking()
  stepOf(expected, 'check').headers = { Authorization: MASK }
  stepOf(expected, 'log').headers = { 'X-Key': MASK }
  t.same(agent.workflow, expected, 'everything as sent, header values masked')
  t.notMatch(res.body, 'step-secret')
  const got = await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })
  t.same(got.json().workflow, expected)
  t.notMatch(got.body, 'step-secret')
  t.same((await ctx.app.inject({ method: 'GET', url: '/v1/agent/list', headers: account.headers })).json()[0].workflow, expected)

  const raw = await ctx.db.selectFrom('agents').select('workflow').where('id', '=', agent._id).executeTakeFirstOrThrow()
  const stored = raw.workflow as unknown as Flow
  t.match(stepOf(stored, 'check').headers.Authorization, /^enc:v1:/, 'sealed in the database')
  t.notMatch(JSON.stringify(stored), 'step-secret')
  const row = await findAgent(ctx.db, account.user.id, agent._id)
  t.equal(stepOf(row!.workflow as unknown as Flow, 'check').headers.Authorization, SECRET, 'the modules read it opened')

  const plain = await post(ctx, account.headers, undefined)
  t.equal(plain.json().workflow, null, 'an agent without one answers null')
})

t.test('PATCH: the mask keeps the stored value by step id; a new origin drops it; null removes the workflow', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = (await post(ctx, account.headers, booking())).json()
  const url = `/v1/agent/${agent._id}`
  const patch = async (payload: Record<string, unknown>) => await ctx.app.inject({ method: 'PATCH', url, headers: account.headers, payload })
  const stored = async () => (await findAgent(ctx.db, account.user.id, agent._id))!.workflow as unknown as Flow | null

  // What GET answered, sent back with a change elsewhere: the stored values stay.
  const echoed = structuredClone(agent.workflow) as Flow
  stepOf(echoed, 'confirm').instructions = 'Offer {{slot}} and ask for a name.'
  const kept = await patch({ workflow: echoed })
  t.equal(kept.statusCode, 200, kept.body)
  t.equal(stepOf(kept.json().workflow, 'confirm').instructions, 'Offer {{slot}} and ask for a name.')
  t.equal(stepOf((await stored())!, 'check').headers.Authorization, SECRET)
  t.equal(stepOf((await stored())!, 'log').headers['X-Key'], 'k-1')

  // The same path on another origin with the mask: refused, nothing changes.
  const moved = structuredClone(echoed)
  stepOf(moved, 'check').url = 'https://elsewhere.example.net/slots'
  const refused = await patch({ workflow: moved, agent_name: 'Renamed' })
  t.equal(refused.statusCode, 400)
  t.match(refused.json(), { code: 'invalid_workflow', message: /^body\.workflow\.steps\[1\]\.headers\.Authorization cannot keep its stored value: .*another \(scheme, host or port\)/ })
  t.equal(stepOf((await stored())!, 'check').url, 'https://api.example.com/slots?n={{party_size}}')
  t.equal((await findAgent(ctx.db, account.user.id, agent._id))!.agent_name, 'Bistro', 'the refused PATCH changed nothing')

  // Without the headers: the stored values are dropped; with a new value typed: stored.
  delete stepOf(moved, 'check').headers
  const dropped = await patch({ workflow: moved })
  t.equal(dropped.statusCode, 200, dropped.body)
  t.notOk(stepOf(dropped.json().workflow, 'check').headers, 'no stored header followed the URL')
  stepOf(moved, 'check').headers = { Authorization: 'Bearer typed-again' }
  t.equal((await patch({ workflow: moved })).statusCode, 200)
  t.equal(stepOf((await stored())!, 'check').headers.Authorization, 'Bearer typed-again')
  // Moved with an empty headers object: nothing stored follows either.
  const emptied = structuredClone(moved)
  stepOf(emptied, 'check').url = 'https://third.example.org/slots'
  stepOf(emptied, 'check').headers = {}
  t.same(stepOf((await patch({ workflow: emptied })).json().workflow, 'check').headers, {})

  // A mask for a step id that has no stored header (a renamed step): refused.
  const renamed = structuredClone(booking())
  stepOf(renamed, 'check').headers = { Authorization: 'Bearer typed' }
  stepOf(renamed, 'log').headers = { 'X-Key': MASK }
  stepOf(renamed, 'log').id = 'archive'
  stepOf(renamed, 'confirm').transitions[0].to = 'archive'
  const noValue = await patch({ workflow: renamed })
  t.equal(noValue.statusCode, 400)
  t.match(noValue.json(), { code: 'invalid_workflow', message: 'body.workflow.steps[3].headers.X-Key has no stored value to keep; send the value itself' })

  // null removes it; the answer says null; a later GET too.
  const removed = await patch({ workflow: null })
  t.equal(removed.statusCode, 200)
  t.equal(removed.json().workflow, null)
  t.equal(await stored(), null)
  t.equal((await ctx.app.inject({ method: 'GET', url, headers: account.headers })).json().workflow, null)
  // A PATCH without the member leaves it as it is.
  t.equal((await patch({ workflow: booking() })).statusCode, 200)
  t.equal((await patch({ agent_name: 'Other' })).json().workflow.start, 'greet')
})

t.test('a bad workflow never replaces the stored one', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = (await post(ctx, account.headers, booking())).json()
  const broken = booking()
  broken.start = 'nowhere'
  const res = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { workflow: broken, agent_name: 'Changed' } })
  t.equal(res.statusCode, 400)
  const after = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })).json()
  t.same(after.workflow, agent.workflow)
  t.equal(after.agent_name, 'Bistro')
  // Schema errors too (an unknown step type): 400, never a 500, and nothing changes.
  const unknownType = booking()
  unknownType.steps[6].type = 'dance'
  const schema = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { workflow: unknownType } })
  t.equal(schema.statusCode, 400)
  t.equal(schema.json().code, 'validation_error')
  t.match(schema.json().message, /^body\.workflow\.steps\.6/)
})

/** A change of the booking flow, the status and code it gets, and the message that names the member. */
const REFUSALS: Array<[string, (flow: Flow) => void, number, string, RegExp | string]> = [
  ['two steps with one id', (f) => { f.steps[2].id = 'greet' }, 400, 'invalid_workflow', 'body.workflow.steps[2].id "greet" is the id of steps[0] too; step ids must be unique'],
  ['a start that is no step', (f) => { f.start = 'hello' }, 400, 'invalid_workflow', 'body.workflow.start "hello" is not the id of any step'],
  ['a dangling transition', (f) => { f.steps[2].transitions[0].to = 'payment' }, 400, 'invalid_workflow', 'body.workflow.steps[2].transitions[0].to "payment" is not the id of any step'],
  ['a transition to the step itself', (f) => { f.steps[2].transitions[0].to = 'confirm' }, 400, 'invalid_workflow', /^body\.workflow\.steps\[2\]\.transitions\[0\]\.to "confirm" is the step itself/],
  ['"always" before another transition', (f) => { f.steps[0].transitions.reverse() }, 400, 'invalid_workflow', /^body\.workflow\.steps\[0\]\.transitions\[0\]\.condition "always" must be the step's last transition/],
  ['two "always" transitions', (f) => { f.steps[1].transitions[0].condition = { type: 'always' } }, 400, 'invalid_workflow', /^body\.workflow\.steps\[1\]\.transitions\[0\]\.condition "always" must be the step's last transition \(at most one per step\)/],
  ['"always" on a conversation step that collects nothing', (f) => { f.steps[2].transitions[0].condition = { type: 'always' } }, 400, 'invalid_workflow', /^body\.workflow\.steps\[2\]\.transitions\[0\]\.condition "always" of a conversation step is taken once the step's variables are collected/],
  ['an expression on a conversation step that collects nothing', (f) => { f.steps[2].transitions[0].condition = { type: 'expression', expression: 'slot is set' } }, 400, 'invalid_workflow', /^body\.workflow\.steps\[2\]\.transitions\[0\]\.condition "expression" of a conversation step is checked when the step's variables are saved, and this step collects none/],
  ['a prompt condition on an action step', (f) => { f.steps[1].transitions[0].condition = { type: 'prompt', prompt: 'it worked' } }, 400, 'invalid_workflow', /^body\.workflow\.steps\[1\]\.transitions\[0\]\.condition "prompt" is judged by the model during a conversation step/],
  ['an expression that does not parse', (f) => { f.steps[0].transitions[0].condition.expression = 'party_size >' }, 400, 'invalid_workflow', /^body\.workflow\.steps\[0\]\.transitions\[0\]\.condition\.expression cannot be read: unexpected the end/],
  ['an expression on a variable nothing sets', (f) => { f.steps[0].transitions[0].condition.expression = 'partysize > 8' }, 400, 'invalid_workflow', 'body.workflow.steps[0].transitions[0].condition.expression reads "partysize", which no step collects, no API call step maps, and is no data_retrieval field or call variable'],
  ['a during-call API call step without a way on', (f) => { f.steps[1].transitions.pop() }, 400, 'invalid_workflow', /^body\.workflow\.steps\[1\]\.transitions needs an "always" transition last: a during-call API call step goes on by itself/],
  ['a message step without a way on', (f) => {
    f.steps[2].transitions[0].to = 'text'
    f.steps.push({ id: 'text', name: 'Text the time', type: 'message', channel: 'sms', to: '{{customer_phone}}', message: 'Booked: {{slot}}' })
  }, 400, 'invalid_workflow', /^body\.workflow\.steps\[7\]\.transitions needs an "always" transition last: a message step/],
  ['a transfer step with transitions', (f) => { f.steps[4].transitions = [{ to: 'bye', condition: { type: 'always' } }] }, 400, 'invalid_workflow', /^body\.workflow\.steps\[4\]\.transitions must be empty: a transfer step/],
  ['an end step with transitions', (f) => { f.steps[6].transitions = [{ to: 'greet', condition: { type: 'always' } }] }, 400, 'invalid_workflow', /^body\.workflow\.steps\[6\]\.transitions must be empty: a end step|^body\.workflow\.steps\[6\]\.transitions must be empty/],
  ['a step nothing leads to', (f) => { f.steps.push({ id: 'survey', name: 'Survey', type: 'conversation', instructions: 'Ask.' }) }, 400, 'invalid_workflow', 'body.workflow.steps[7] ("Survey") cannot be reached from the start step "greet" or a global step: lead a transition to it, make it global, or remove it'],
  ['a step variable named twice', (f) => { f.steps[0].variables.push({ name: 'party_size', type: 'string' }) }, 400, 'invalid_workflow', 'body.workflow.steps[0].variables[1].name "party_size" is used twice; names must be unique'],
  ['a step variable named like a call variable', (f) => { f.steps[0].variables.push({ name: 'call_id', type: 'string' }) }, 400, 'invalid_workflow', /^body\.workflow\.steps\[0\]\.variables\[1\]\.name "call_id" is a built-in call variable/],
  ['enum values on a number variable', (f) => { f.steps[0].variables[0].enum_values = ['2'] }, 400, 'invalid_workflow', 'body.workflow.steps[0].variables[0].enum_values is allowed only for type enum'],
  ['response variables after the call', (f) => { f.steps[3].response_variables = { id: 'id' } }, 400, 'invalid_workflow', /^body\.workflow\.steps\[3\]\.response_variables is for run during_call/],
  ['a response variable named like a call variable', (f) => { f.steps[1].response_variables = { slot: 'data.slot', agent_id: 'x' } }, 400, 'invalid_workflow', 'body.workflow.steps[1].response_variables.agent_id is a built-in call variable; choose another name'],
  ['a header Switchboard sets', (f) => { f.steps[1].headers = { 'Content-Length': '1' } }, 400, 'invalid_workflow', 'body.workflow.steps[1].headers.Content-Length is set by Switchboard and cannot be configured'],
  ['a message to something that is no number', (f) => {
    f.steps[2].transitions[0].to = 'text'
    f.steps.push({ id: 'text', name: 'Text', type: 'message', channel: 'sms', to: 'tomorrow', message: 'Hi', transitions: [{ to: 'log', condition: { type: 'always' } }] })
  }, 400, 'invalid_workflow', 'body.workflow.steps[7].to must be an E.164 phone number such as +14155550123 or a {{variable}} that holds one'],
  ['a voice outside the catalogue', (f) => { f.steps[2].voice_id = 'ffffffffffffffffffffffff' }, 400, 'invalid_workflow', 'body.workflow.steps[2].voice_id ffffffffffffffffffffffff is not a voice of GET /v1/voice/list'],
  ['a tool the agent does not have', (f) => { f.steps[2].tool_ids = ['aaaaaaaaaaaaaaaaaaaaaaaa'] }, 404, 'not_found', 'body.workflow.steps[2].tool_ids[0]: tool or action aaaaaaaaaaaaaaaaaaaaaaaa of this agent not found'],
  ['a transfer to an agent of no one here', (f) => { f.steps[4].target = { type: 'agent', agent_id: 'bbbbbbbbbbbbbbbbbbbbbbbb' } }, 404, 'not_found', 'body.workflow.steps[4].target.agent_id: agent bbbbbbbbbbbbbbbbbbbbbbbb not found'],
  ['a header value sent as the mask on create', (f) => { f.steps[1].headers = { Authorization: MASK } }, 400, 'invalid_workflow', 'body.workflow.steps[1].headers.Authorization must be the header\'s value, not the mask']
]

t.test('every rule of the graph check refuses with a message naming the member (create)', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  for (const [name, change, status, code, message] of REFUSALS) {
    const flow = booking()
    change(flow)
    const res = await post(ctx, account.headers, flow)
    t.equal(res.statusCode, status, `${name}: ${res.body}`)
    t.match(res.json(), { code, message: typeof message === 'string' ? message : message }, name)
  }
  t.equal((await ctx.db.selectFrom('agents').select('id').execute()).length, 0, 'no agent was created')
})

t.test('references of a change: the agent\'s own tools and during-call actions, other agents, not itself', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const stranger = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const other = await createAgent(ctx.app, account)
  const theirs = await createAgent(ctx.app, stranger)
  const during = await addAction(ctx.app, account, agent._id, { name: 'Lookup', url: 'https://api.example.com/x', when: 'during_call' })
  const after = await addAction(ctx.app, account, agent._id, { name: 'Sync', url: 'https://api.example.com/y' })
  const otherAgentsAction = await addAction(ctx.app, account, other._id, { name: 'Lookup', url: 'https://api.example.com/x', when: 'during_call' })
  const tool = (await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'end_call', settings: { name: 'Hang up' } } })).json()
  const patch = async (flow: Flow) => await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { workflow: flow } })

  const flow = booking()
  stepOf(flow, 'confirm').tool_ids = [during._id, tool._id.toUpperCase()]
  stepOf(flow, 'human').target = { type: 'agent', agent_id: other._id }
  stepOf(flow, 'confirm').voice_id = '65a0f0000000000000000002'
  const ok = await patch(flow)
  t.equal(ok.statusCode, 200, ok.body)

  stepOf(flow, 'confirm').tool_ids = [after._id]
  t.match((await patch(flow)).json(), { statusCode: 400, code: 'invalid_workflow', message: `body.workflow.steps[2].tool_ids[0] ${after._id} is an action that runs after the call only; a step may use tools and during-call actions` })
  stepOf(flow, 'confirm').tool_ids = [otherAgentsAction._id]
  t.match((await patch(flow)).json(), { statusCode: 404, code: 'not_found', message: `body.workflow.steps[2].tool_ids[0]: tool or action ${otherAgentsAction._id} of this agent not found` })
  stepOf(flow, 'confirm').tool_ids = []
  stepOf(flow, 'human').target = { type: 'agent', agent_id: agent._id }
  t.match((await patch(flow)).json(), { statusCode: 400, code: 'invalid_workflow', message: 'body.workflow.steps[5].target.agent_id is this agent itself; a transfer goes to another agent' })
  stepOf(flow, 'human').target = { type: 'agent', agent_id: theirs._id }
  t.match((await patch(flow)).json(), { statusCode: 404, code: 'not_found', message: `body.workflow.steps[5].target.agent_id: agent ${theirs._id} not found` })
})

t.test('variables an expression may read: collected, mapped, <step>_status, data_retrieval fields (as the PATCH leaves them), call variables', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account, { data_retrieval: [{ name: 'insured', type: 'boolean' }] })
  const patch = async (payload: Record<string, unknown>) => await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload })
  const flow = booking()
  stepOf(flow, 'greet').transitions[0].condition.expression = '{{insured}} = true or call_direction = "outbound" or party_size > 8'
  t.equal((await patch({ workflow: flow })).statusCode, 200, 'a stored data_retrieval field and a call variable')
  const res = await patch({ workflow: flow, data_retrieval: [] })
  t.equal(res.statusCode, 400, 'the fields the same PATCH sets are the ones that count')
  t.match(res.json().message, 'reads "insured"')
})

t.test('the OpenAPI document names the workflow schemas and the agent refers to them', async (t) => {
  const ctx = await setup(t)
  const doc = (await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json()
  const schemas = doc.components.schemas
  for (const name of ['Workflow', 'WorkflowStep', 'WorkflowConversationStep', 'WorkflowApiCallStep', 'WorkflowMessageStep', 'WorkflowTransferStep', 'WorkflowEndStep', 'WorkflowTransition', 'WorkflowCondition']) {
    t.ok(schemas[name], `${name} is a component`)
  }
  t.match(JSON.stringify(schemas.Agent.properties.workflow), '#/components/schemas/Workflow')
  t.match(JSON.stringify(schemas.WorkflowStep), '#/components/schemas/WorkflowApiCallStep')
  t.same(schemas.WorkflowStep.discriminator, { propertyName: 'type' })
  t.match(JSON.stringify(schemas.WorkflowApiCallStep.properties.headers), '#/components/schemas/RequestHeaders')
  const create = doc.paths['/v1/agent'].post.requestBody.content['application/json'].schema
  t.match(JSON.stringify(create), '#/components/schemas/Workflow')
})

t.test('a key rotation re-seals the API call steps\' header values, and start-up sees their key', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = (await post(ctx, account.headers, booking())).json()
  await post(ctx, account.headers, null)
  const next = createCipher(randomBytes(32))
  const count = await ctx.db.transaction().execute(async (trx) => await rewriteSecrets(trx, (value) => next.seal(isSealed(value) ? openSecret(value) : value), false))
  t.equal(count, 4, 'the two header values of the two API call steps, and their sealed copies in the agent version')
  const raw = (await ctx.db.selectFrom('agents').select('workflow').where('id', '=', agent._id).executeTakeFirstOrThrow()).workflow as unknown as Flow
  t.equal(next.open(stepOf(raw, 'check').headers.Authorization), SECRET)
  t.equal(next.open(stepOf(raw, 'log').headers['X-Key']), 'k-1')
  t.same(stepOf(raw, 'greet'), booking().steps[0], 'the other steps are as they were')
  t.ok((await foreignKeyIds(ctx.db, 'ffffffff')).includes(next.keyId), 'a key other than the configured one is noticed in a workflow')
})
