import t from 'tap'
import type { Conversation } from '../../src/db/shapes.ts'
import { check } from '../../src/modules/agent-tests/expect.ts'
import { scenarioFromChat } from '../../src/modules/agent-tests/tests.ts'

// Expectations against a conversation that went through a workflow (steps entered, variables collected, tools with
// arguments), and a test chat kept as a scenario: without a server, from the conversation record alone.

const at = 1_800_000_000_000
const conversation: Conversation = {
  agent_id: '65a0f0000000000000000001',
  transcript: [
    { speaker: 'agent', content: 'Welcome to Luigi\'s!', timestamp: at },
    { speaker: 'step', content: 'Greeting', timestamp: at, step: { id: 'greet', name: 'Greeting', type: 'conversation' } },
    { speaker: 'user', content: 'A table for ten, please.', timestamp: at + 1 },
    { speaker: 'tool', content: 'collect', timestamp: at + 2, tool: { name: 'collect_booking', type: 'collect', arguments: '{"party_size":10,"name":"Ada Lovelace","extras":{"cake":true}}', output: 'ok' } },
    { speaker: 'step', content: 'Large party', timestamp: at + 3, step: { id: 'large_party', name: 'Large party', type: 'conversation' } },
    { speaker: 'agent', content: 'For ten, let me pass you to our events team.', timestamp: at + 4 },
    { speaker: 'user', content: 'Great, bye.', timestamp: at + 5 },
    { speaker: 'step', content: 'Goodbye', timestamp: at + 6, step: { id: 'bye', name: 'Goodbye', type: 'end' } }
  ],
  tokens: {},
  speech: { recognised: 0, synthesised: 0 },
  transfers: [],
  recording_ms: 0,
  collected_data: { email: 'ada@example.com' },
  workflow: {
    step: 'bye',
    path: [
      { id: 'greet', name: 'Greeting', type: 'conversation', at },
      { id: 'large_party', name: 'Large party', type: 'conversation', at: at + 3 },
      { id: 'bye', name: 'Goodbye', type: 'end', at: at + 6 }
    ],
    variables: { party_size: 10, insured: true, name: 'Ada Lovelace' },
    after: []
  }
}

const status = (expectation: Parameters<typeof check>[0], endReason: string | null = 'agent_hangup') => {
  const result = check(expectation, conversation, endReason)
  return [result.status, result.reason]
}

t.test('step paths: the steps in order, others between them; out of order or missing fails', async (t) => {
  t.same(status({ type: 'step_path', steps: ['greet', 'large_party', 'bye'] }), ['passed', 'path: greet → large_party → bye'])
  t.same(status({ type: 'step_path', steps: ['greet', 'bye'] })[0], 'passed', 'a step between')
  t.same(status({ type: 'step_path', steps: ['Large party'] })[0], 'passed', 'by name')
  t.same(status({ type: 'step_path', steps: ['bye', 'greet'] }), ['failed', 'greet not entered in that order (path: greet → large_party → bye)'])
  t.same(status({ type: 'step_path', steps: ['small_party'] })[0], 'failed')
  // Without a workflow state (a conversation saved before it), the transcript's step items stand for the path.
  const { workflow: _, ...plain } = conversation
  t.equal(check({ type: 'step_path', steps: ['greet', 'bye'] }, plain, null).status, 'passed')
})

t.test('variables, tool arguments as a subset, the end', async (t) => {
  t.same(status({ type: 'variable', name: 'party_size', value: 10 }), ['passed', 'party_size is 10'])
  t.same(status({ type: 'variable', name: 'party_size', value: '10' })[0], 'failed', 'a number is not a string')
  t.same(status({ type: 'variable', name: 'name', value: 'ada lovelace' })[0], 'passed', 'strings compare case-insensitively')
  t.same(status({ type: 'variable', name: 'email', value: 'ada@example.com' })[0], 'passed', 'data collected during the call counts')
  t.same(status({ type: 'variable', name: 'insured', value: false }), ['failed', 'insured is true'])
  t.same(status({ type: 'variable', name: 'phone', value: null }), ['failed', 'phone was not collected'])
  t.same(status({ type: 'tool_called', tool: 'collect_booking', arguments: { party_size: 10 } })[0], 'passed')
  t.same(status({ type: 'tool_called', tool: 'collect_booking', arguments: { extras: { cake: true }, name: 'ADA LOVELACE' } })[0], 'passed')
  t.same(status({ type: 'tool_called', tool: 'collect_booking', arguments: { party_size: 8 } })[0], 'failed')
  t.same(status({ type: 'tool_called', tool: 'collect_booking', arguments: { extras: {} } })[0], 'failed', 'an object compares whole')
  t.same(status({ type: 'ended', reason: 'agent_hangup' }), ['passed', 'ended: agent_hangup'])
  t.same(status({ type: 'ended', reason: 'none' }, null), ['passed', 'the conversation did not end'])
  t.same(status({ type: 'ended', reason: 'agent_hangup' }, null)[0], 'failed')
  t.same(status({ type: 'transcript_contains', text: 'EVENTS TEAM' })[0], 'passed')
  t.same(status({ type: 'transcript_contains', text: 'a table for ten' })[0], 'failed', 'only what the agent said counts')
})

t.test('a test chat kept as a scenario: caller lines, tools, steps, variables and its end', async (t) => {
  const scenario = scenarioFromChat(conversation, { endReason: 'agent_hangup' })
  t.same(scenario.caller, { type: 'script', lines: ['A table for ten, please.', 'Great, bye.'] })
  t.same(scenario.expectations, [
    { type: 'tool_called', tool: 'collect_booking' },
    { type: 'step_path', steps: ['greet', 'large_party', 'bye'] },
    { type: 'variable', name: 'party_size', value: 10 },
    { type: 'variable', name: 'insured', value: true },
    { type: 'variable', name: 'name', value: 'Ada Lovelace' },
    { type: 'ended', reason: 'agent_hangup' }
  ])
  t.equal(scenario.name, 'Chat: A table for ten, please.')
  // Every expectation of it holds on the conversation it came from.
  for (const expectation of scenario.expectations) {
    if (expectation.type !== 'criterion') t.equal(check(expectation, conversation, 'agent_hangup').status, 'passed', expectation.type)
  }
  const quiet = scenarioFromChat({ ...conversation, workflow: undefined, transcript: conversation.transcript.filter((item) => item.speaker === 'agent' || item.speaker === 'user') })
  t.same(quiet.expectations, [{ type: 'transcript_contains', text: 'For ten, let me pass you to our events team.' }], 'nothing happened: the agent\'s last answer')
  t.throws(() => scenarioFromChat({ ...conversation, transcript: [] }), { message: /no caller line/ })
})
