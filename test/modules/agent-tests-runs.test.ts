import t from 'tap'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { startReceiver } from '../helpers/receiver.ts'

// Scenario runs (docs/testing.md, "Runs"): scripted and persona callers, expectations passing and failing for the
// right reasons, the judge, mocks, a suite of twenty.

async function api (ctx: TestContext, account: Account, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) {
  const res = await ctx.app.inject({ method, url, headers: account.headers, ...(payload === undefined ? {} : { payload: payload as object }) })
  return { status: res.statusCode, body: res.body === '' ? undefined : res.json(), raw: res.body }
}

async function addTest (ctx: TestContext, account: Account, agentId: string, scenario: object) {
  const res = await api(ctx, account, 'POST', `/v1/agent/${agentId}/tests`, scenario)
  if (res.status !== 201) throw new Error(res.raw)
  return res.body as { _id: string }
}

const statuses = (result: any) => result.expectations.map((e: any) => [e.expectation.type, e.status])

t.test('with the simulator: a scripted caller; each expectation passes or fails for its own reason; criteria are not judged without an analyser', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  t.equal((await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tools`, { tool_type: 'end_call', settings: { name: 'end' } })).status, 201)

  const chat = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/test-chat`, { message: 'I need an appointment' })
  t.equal(chat.status, 200, chat.raw)
  t.equal(chat.body.engine, 'simulator')
  t.match(chat.body.notice, /No language model is configured/)
  t.match(chat.body.items.at(-1), { speaker: 'agent', content: /Tuesday at 10/ })

  const scenario = await addTest(ctx, account, agent._id, {
    name: 'Books and leaves',
    caller: { type: 'script', lines: ['I need an appointment', 'Yes please', 'Thanks, goodbye', 'Are you still there?'] },
    expectations: [
      { type: 'transcript_contains', text: 'tuesday at 10' },
      { type: 'transcript_excludes', text: 'Wednesday' },
      { type: 'ended', reason: 'agent_hangup' },
      { type: 'tool_called', tool: 'end' },
      { type: 'transcript_excludes', text: 'Tuesday' },
      { type: 'tool_called', tool: 'book_appointment' },
      { type: 'criterion', criterion: 'The agent was polite.' }
    ]
  })
  const run = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests/run`, { test_ids: [scenario._id] })
  t.equal(run.status, 200, run.raw)
  t.equal(run.body.engine, 'simulator')
  const [result] = run.body.results
  t.same(statuses(result), [
    ['transcript_contains', 'passed'], ['transcript_excludes', 'passed'], ['ended', 'passed'], ['tool_called', 'passed'],
    ['transcript_excludes', 'failed'], ['tool_called', 'failed'], ['criterion', 'not_judged']
  ], JSON.stringify(result.expectations))
  t.match(result.expectations[5].reason, /book_appointment was not called \(called: end\)/)
  t.match(result.expectations[6].reason, /ANALYSER=openai/)
  t.equal(result.status, 'failed')
  t.equal(result.caller_turns, 3, 'the caller stops once the conversation ended')
  t.equal(result.end_reason, 'agent_hangup')
  t.equal(result.answer_ms.length, 3)
  t.equal(run.body.status, 'failed')
  t.same([run.body.passed, run.body.failed], [0, 1])

  // A persona caller needs the model: without one the scenario is in error, and says why.
  const persona = await addTest(ctx, account, agent._id, { name: 'Persona', caller: { type: 'persona', persona: 'A busy dentist patient', max_turns: 3 }, expectations: [{ type: 'ended', reason: 'none' }] })
  const personaRun = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests/run`, { test_ids: [persona._id] })
  t.match(personaRun.body.results[0], { status: 'error', error: /persona caller needs the LLM/ })
})

t.test('a persona played by the LLM stand-in; criteria judged by a judge stand-in, passing and failing with its reasons; mocks keep a real tool from acting', async (t) => {
  const llm = await startOpenAiHttpStandin(t)
  const judge = await startOpenAiHttpStandin(t)
  const receiver = await startReceiver(t)
  const ctx = await setup(t, { LLM_URL: llm.url, ANALYSER: 'openai', ANALYSER_BASE_URL: judge.url, ANALYSER_API_KEY: 'sk-judge', DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true' })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const llmId = (await api(ctx, account, 'GET', `/v1/agent/${agent._id}`)).body.llm_id
  await api(ctx, account, 'PATCH', `/v1/llm/${llmId}`, { general_prompt: 'You book tables at Luigi\'s.', begin_message: 'Luigi\'s, how can I help?' })
  t.equal((await api(ctx, account, 'POST', `/v1/agent/${agent._id}/actions`, { action_type: 'api_call', settings: { name: 'book_table', when: 'during_call', url: `${receiver.url}/book`, description: 'book a table' } })).status, 201)

  // The persona (a request that is not streamed) says two lines, then hangs up; the agent (streamed) books.
  const personaLines = ['A table for two tonight, please.', 'At eight. My name is Ada.', '[HANG UP]']
  const personaRequests: any[] = []
  llm.replyTo = (body) => {
    if (body.stream === true) return undefined
    personaRequests.push(body)
    return { text: personaLines[personaRequests.length - 1] }
  }
  llm.replies.push({ text: 'What time?' }, { toolCalls: [{ name: 'book_table', arguments: { people: 2, time: '20:00', name: 'ada' } }] }, { text: 'Booked for two at eight.' })
  // The judge reads the criteria it is given and the transcript: "booked" passes, "offered dessert" fails.
  judge.replyTo = (body) => {
    const criteria = body.messages[0].content as string
    const transcript = body.messages[1].content as string
    t.match(body.response_format, { type: 'json_schema' })
    const verdict = (line: string) => /dessert/.test(line) ? { passed: false, reason: 'no dessert was offered' } : { passed: /Booked/.test(transcript), reason: 'the agent confirmed the booking' }
    const answers = Object.fromEntries([...criteria.matchAll(/^(c\d+): (.*)$/gm)].map((m) => [m[1], verdict(m[2])]))
    return { text: JSON.stringify({ criteria: answers }) }
  }

  const scenario = await addTest(ctx, account, agent._id, {
    name: 'Ada books',
    caller: { type: 'persona', persona: 'Ada wants a table for two at 8 pm tonight.', max_turns: 5 },
    mocks: [{ tool: 'book_table', output: '{"confirmed":true}' }],
    expectations: [
      { type: 'tool_called', tool: 'book_table', arguments: { people: 2, name: 'Ada' } },
      { type: 'tool_called', tool: 'book_table', arguments: { people: 3 } },
      { type: 'criterion', criterion: 'The agent confirmed the booking.' },
      { type: 'criterion', criterion: 'The agent offered dessert.' }
    ]
  })
  const run = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests/run`, {})
  t.equal(run.status, 200, run.raw)
  const [result] = run.body.results
  t.same(statuses(result), [['tool_called', 'passed'], ['tool_called', 'failed'], ['criterion', 'passed'], ['criterion', 'failed']], JSON.stringify(result))
  t.match(result.expectations[1].reason, /never with those arguments/)
  t.equal(result.expectations[3].reason, 'no dessert was offered', 'the judge\'s reason')
  t.equal(result.caller_turns, 2, 'the persona hung up after two lines')
  t.equal(result.end_reason, null, 'the caller stopped; the conversation did not end')
  t.same(result.transcript.filter((item: any) => item.speaker === 'user').map((item: any) => item.content), personaLines.slice(0, 2))
  t.equal(receiver.received.length, 0, 'the mocked tool sent no request')
  t.match(result.transcript.find((item: any) => item.speaker === 'tool').tool, { name: 'book_table', output: '{"confirmed":true}' })
  // The persona heard the agent as the other side: the agent's lines are the user's, its own the assistant's.
  t.match(personaRequests[1].messages, [{ role: 'system', content: /Ada wants a table/ }, { role: 'user', content: 'Luigi\'s, how can I help?' }, { role: 'assistant', content: personaLines[0] }, { role: 'user', content: 'What time?' }])
  t.equal(judge.requests.chat.length, 1, 'one judge request per scenario')
  t.equal(judge.requests.chat[0].authorization, 'Bearer sk-judge')

  // A judge that fails leaves the criteria not judged, never passed.
  judge.replyTo = undefined
  judge.failNext('chat', 500)
  llm.replies.push({ text: 'What time?' }, { text: 'Booked.' })
  personaRequests.length = 0
  const broken = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests/run`, { test_ids: [scenario._id] })
  t.same(statuses(broken.body.results[0]).slice(2), [['criterion', 'not_judged'], ['criterion', 'not_judged']])
  t.match(broken.body.results[0].expectations[2].reason, /the judge failed: the analyser answered 500/)
  t.equal(broken.body.status, 'failed')
})

t.test('a suite of twenty scenarios runs in one request, results in order', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const ids: string[] = []
  for (let i = 0; i < 20; i++) {
    ids.push((await addTest(ctx, account, agent._id, {
      name: `case ${i}`,
      caller: { type: 'script', lines: ['I need an appointment', 'yes'] },
      expectations: [{ type: i === 7 ? 'transcript_excludes' : 'transcript_contains', text: 'booked' }]
    }))._id)
  }
  const run = await api(ctx, account, 'POST', `/v1/agent/${agent._id}/tests/run`, {})
  t.equal(run.status, 200, run.raw)
  t.same(run.body.results.map((r: any) => r.scenario_id), ids, 'in the order they were made')
  t.same([run.body.passed, run.body.failed], [19, 1])
  t.equal(run.body.results[7].status, 'failed')
  const rows = await ctx.db.selectFrom('agent_test_results').select('scenario_id').where('run_id', '=', run.body._id).execute()
  t.equal(rows.length, 20, 'one result per scenario stored')
})
