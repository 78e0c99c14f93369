import t from 'tap'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { poll } from '../helpers/poll.ts'
import { runScript } from '../helpers/scripts.ts'

// Bad inputs to the test chat and the tests API get a clear 4xx, never a 500; another account's agent, test or run is
// not found; the cap on tests holds under concurrent creations; the CLI's exit codes.

async function api (ctx: TestContext, account: Account, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) {
  const res = await ctx.app.inject({ method, url, headers: account.headers, ...(payload === undefined ? {} : { payload: payload as object }) })
  return { status: res.statusCode, body: res.body === '' ? undefined : res.json(), raw: res.body }
}

const SCENARIO = { name: 'Greets', caller: { type: 'script', lines: ['Hello'] }, expectations: [{ type: 'transcript_contains', text: 'help' }] }

t.test('bad test chat bodies and another account\'s agent', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const chat = (payload: unknown, who = account) => api(ctx, who, 'POST', `/v1/agent/${agent._id}/test-chat`, payload)
  const opened = await chat({ message: 'Hello' })
  t.equal(opened.status, 200, opened.raw)
  const conversation = opened.body.conversation

  const item = { speaker: 'user', content: 'x', timestamp: 1 }
  const cases: Array<[string, unknown, number, string]> = [
    ['too many transcript items', { message: 'Hi', conversation: { ...conversation, transcript: Array.from({ length: 401 }, () => item) } }, 400, 'validation_error'],
    ['a huge conversation', { message: 'Hi', conversation: { ...conversation, transcript: [{ ...item, content: 'x'.repeat(600 * 1024) }] } }, 413, 'payload_too_large'],
    ['a transcript that is not a list', { message: 'Hi', conversation: { ...conversation, transcript: 'hello' } }, 400, 'validation_error'],
    ['an unknown speaker', { message: 'Hi', conversation: { ...conversation, transcript: [{ ...item, speaker: 'robot' }] } }, 400, 'validation_error'],
    ['a conversation without its members', { message: 'Hi', conversation: { transcript: [] } }, 400, 'validation_error'],
    ['a message too long', { message: 'x'.repeat(2001) }, 400, 'validation_error'],
    ['an empty message', { message: '' }, 400, 'validation_error'],
    ['a conversation without a message', { conversation }, 400, 'message_required'],
    ['a version that is not a number', { message: 'Hi', agent_version: 'one' }, 400, 'validation_error'],
    ['a version that does not exist', { message: 'Hi', agent_version: 999 }, 404, 'not_found']
  ]
  for (const [what, payload, status, code] of cases) {
    const res = await chat(payload)
    t.equal(res.status, status, `${what}: ${res.raw.slice(0, 300)}`)
    t.equal(res.body.code, code, what)
  }

  const foreign = await chat({ message: 'Hello' }, other)
  t.equal(foreign.status, 404, 'another account\'s agent is not found')
  const hijack = await api(ctx, other, 'POST', `/v1/agent/${(await createAgent(ctx.app, other))._id}/test-chat`, { message: 'Hi', conversation })
  t.equal(hijack.status, 404, 'a conversation of another account\'s agent does not go on')
  t.equal((await api(ctx, account, 'POST', '/v1/agent/65a0f0000000000000000009/test-chat', {})).status, 404)
  t.equal((await api(ctx, account, 'POST', '/v1/agent/nope/test-chat', {})).status, 400)
})

t.test('bad scenarios, another account\'s tests and runs, the cap under concurrent creations', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const base = `/v1/agent/${agent._id}/tests`
  const bad: Array<[string, unknown]> = [
    ['no expectation', { ...SCENARIO, expectations: [] }],
    ['an unknown caller type', { ...SCENARIO, caller: { type: 'robot', lines: ['Hi'] } }],
    ['a script without lines', { ...SCENARIO, caller: { type: 'script', lines: [] } }],
    ['a persona with too many turns', { ...SCENARIO, caller: { type: 'persona', persona: 'Ada', max_turns: 21 } }],
    ['an expectation of an unknown type', { ...SCENARIO, expectations: [{ type: 'vibes' }] }],
    ['a tool expectation without its tool', { ...SCENARIO, expectations: [{ type: 'tool_called' }] }],
    ['a step path without steps', { ...SCENARIO, expectations: [{ type: 'step_path', steps: [] }] }],
    ['a mock without output', { ...SCENARIO, mocks: [{ tool: 'x' }] }],
    ['no name', { caller: SCENARIO.caller, expectations: SCENARIO.expectations }],
    ['a conversation without caller lines', { from_conversation: { agent_id: agent._id, transcript: [], tokens: {}, speech: { recognised: 0, synthesised: 0 }, transfers: [], recording_ms: 0 } }]
  ]
  for (const [what, payload] of bad) {
    const res = await api(ctx, account, 'POST', base, payload)
    t.equal(res.status, 400, `${what}: ${res.raw.slice(0, 300)}`)
  }
  t.equal((await api(ctx, account, 'GET', base)).body.data.length, 0, 'nothing was stored')

  // 60 creations at once: exactly the cap of 50 get in.
  const created = await Promise.all(Array.from({ length: 60 }, (_, i) => api(ctx, account, 'POST', base, { ...SCENARIO, name: `t${i}` })))
  t.equal(created.filter((r) => r.status === 201).length, 50)
  t.ok(created.filter((r) => r.status !== 201).every((r) => r.status === 409 && r.body.code === 'test_limit_reached'))
  const id = created.find((r) => r.status === 201)!.body._id

  const patched = await api(ctx, account, 'PATCH', `${base}/${id}`, { name: 'Renamed', caller: { type: 'persona', persona: 'Ada', max_turns: 2 } })
  t.equal(patched.status, 200, patched.raw)
  t.match(patched.body, { name: 'Renamed', caller: { type: 'persona', persona: 'Ada', max_turns: 2 }, expectations: SCENARIO.expectations })
  t.equal((await api(ctx, account, 'PATCH', `${base}/${id}`, {})).status, 400, 'an empty change')
  t.equal((await api(ctx, account, 'PATCH', `${base}/${id}`, { caller: { type: 'script' } })).status, 400)

  // Another account sees none of it.
  for (const [method, url, payload] of [
    ['GET', base], ['GET', `${base}/${id}`], ['PATCH', `${base}/${id}`, { name: 'x' }], ['DELETE', `${base}/${id}`], ['POST', base, SCENARIO],
    ['POST', `${base}/run`, {}], ['GET', `${base}/runs`]
  ] as Array<['GET' | 'POST' | 'PATCH' | 'DELETE', string, unknown]>) {
    const res = await api(ctx, other, method, url, payload)
    t.equal(res.status, 404, `${method} ${url} by another account: ${res.raw.slice(0, 200)}`)
  }
  const run = await api(ctx, account, 'POST', `${base}/run`, { test_ids: [created.find((r) => r.status === 201 && r.body._id !== id)!.body._id] })
  t.equal(run.status, 200, run.raw)
  t.equal((await api(ctx, other, 'GET', `${base}/runs/${run.body._id}`)).status, 404)
  t.equal((await api(ctx, account, 'POST', `${base}/run`, { test_ids: ['65a0f0000000000000000009'] })).status, 404, 'an unknown test')
  t.equal((await api(ctx, account, 'POST', `${base}/run`, { agent_version: 77 })).status, 404, 'an unknown version')
  t.equal((await api(ctx, account, 'GET', `${base}/runs/65a0f0000000000000000009`)).status, 404)

  t.equal((await api(ctx, account, 'DELETE', `${base}/${id}`)).status, 204)
  t.equal((await api(ctx, account, 'DELETE', `${base}/${id}`)).status, 404)
  t.equal((await api(ctx, account, 'GET', `${base}/runs/${run.body._id}`)).status, 200, 'runs stay')

  const empty = await createAgent(ctx.app, account)
  const none = await api(ctx, account, 'POST', `/v1/agent/${empty._id}/tests/run`, {})
  t.equal(none.status, 400)
  t.match(none.body.message, /no test/)
})

t.test('runs of one account at once are capped, reserved before the conversations: of 12 at once exactly 2 run', async (t) => {
  const llm = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, { LLM_URL: llm.url })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests`, SCENARIO)
  // Every answer of the model stops after its first sentence until released: the runs that got in stay running.
  for (let i = 0; i < 12; i++) llm.replies.push({ text: 'One moment. How can I help?', hold: true })
  const answers: Array<{ status: number, body: any }> = []
  const runs = Array.from({ length: 12 }, async () => {
    const res = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests/run`, {})
    answers.push(res)
    return res
  })
  await poll(() => answers.length, (n) => n === 10, { message: 'ten runs refused while two run' })
  t.ok(answers.every((r) => r.status === 409 && r.body.code === 'test_run_busy'), answers.map((r) => r.status).join(','))
  t.equal(llm.requests.chat.length, 2, 'two conversations talk')
  llm.replies.length = 0
  llm.release()
  const all = await Promise.all(runs)
  t.equal(all.filter((r) => r.status === 200).length, 2)
  const after = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests/run`, {})
  t.equal(after.status, 200, 'finished runs no longer count')
})

t.test('the CLI runs an agent\'s tests: exit code 0 when all passed, 1 otherwise, 2 for bad arguments', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const passing = (await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests`, { name: 'Offers a time', caller: { type: 'script', lines: ['I need an appointment'] }, expectations: [{ type: 'transcript_contains', text: 'Tuesday' }] })).body
  const cli = async (...args: string[]) => await runScript('cli.ts', ctx.url, 'test', ...args)

  const ok = await cli(agent._id, '--test', passing._id)
  t.equal(ok.code, 0, ok.stderr)
  t.match(ok.stdout, /^pass {2}Offers a time/m)
  t.match(ok.stdout, /^ {2}passed +transcript_contains \{"text":"Tuesday"\}: the agent said it$/m)
  t.match(ok.stdout, /1 passed, 0 failed \(run [0-9a-f]{24}/)

  await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests`, { name: 'Books at once', caller: { type: 'script', lines: ['Hello'] }, expectations: [{ type: 'tool_called', tool: 'book' }] })
  const failed = await cli(agent._id)
  t.equal(failed.code, 1, failed.stderr)
  t.match(failed.stdout, /^FAIL {2}Books at once/m)
  t.match(failed.stdout, /^ {2}FAILED +tool_called \{"tool":"book"\}: book was not called/m)
  t.match(failed.stdout, /1 passed, 1 failed/)
  const stored = await api(ctx, account, 'GET', `/v1/agent/${agent._id}/tests/runs`)
  t.equal(stored.body.total, 2, 'the CLI\'s runs are stored as the API\'s')

  for (const args of [[], ['nope'], [agent._id, 'extra'], [agent._id, '--version', 'x'], [agent._id, '--test', 'nope'], ['65a0f0000000000000000009'], [agent._id, '--version', '99'], [agent._id, '--test', '65a0f0000000000000000009'], [agent._id, '--bogus']]) {
    const res = await cli(...args)
    t.equal(res.code, 2, `test ${args.join(' ')}: ${res.stderr}`)
  }
})
