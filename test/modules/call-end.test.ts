// The record of a call so far (db/shapes.ts, Conversation) and the one function that turns it into the call's end
// (calls/lifecycle.ts, toCallEnd), used by the voice session, the carrier's webhooks and the deadline.
import t from 'tap'
import { Value } from 'typebox/value'
import { Conversation, type TransferRecord } from '../../src/db/shapes.ts'
import { settledTransfers, toCallEnd } from '../../src/modules/calls/lifecycle.ts'

const config = { publicBaseUrl: 'https://switchboard.example' }
const CALL = '65f000000000000000000001'
const AGENT = '65f000000000000000000002'

const agentTransfer: TransferRecord = { type: 'agent_transfer', from_agent_id: AGENT, to_agent_id: '65f000000000000000000003', to_agent_name: 'Billing', reason: 'billing question', timestamp: 1_700_000_001_000, outcome: 'transferred' }
const forwarding: TransferRecord = { type: 'call_forwarding', from_agent_id: AGENT, to_number: '+14155550142', reason: null, timestamp: 1_700_000_002_000, outcome: 'dialing' }

function conversation (values: Partial<Conversation> = {}): Conversation {
  return {
    agent_id: AGENT,
    transcript: [
      { speaker: 'agent', content: 'Hello, how can I help?', timestamp: 1_700_000_000_000 },
      { speaker: 'user', content: 'A person, please.', timestamp: 1_700_000_000_500 }
    ],
    tokens: { 'gpt-4o-mini': { input: 120, output: 30 } },
    speech: { recognised: 1.5, synthesised: 2.25 },
    transfers: [],
    recording_ms: 0,
    ...values
  }
}

t.test('a conversation held ends completed with its transcript, usage and recording', async (t) => {
  const held = conversation({ recording_ms: 4_000, transfers: [agentTransfer] })
  t.same(toCallEnd(config, CALL, held, { reason: 'user_hangup' }), {
    outcome: 'completed',
    disconnection_reason: 'user_hangup',
    transcription: held.transcript,
    recording_url: `https://switchboard.example/v1/call/${CALL}/recording`,
    usage: { tokens: held.tokens, speech: { recognised_seconds: 1.5, synthesised_seconds: 2.25 }, forwarding_seconds: 0 },
    transfer_history: [agentTransfer]
  })
})

t.test('a call ended before a word was said never connected; nothing recorded, no transfers: none listed', async (t) => {
  const silent = conversation({ transcript: [{ speaker: 'tool', content: 'end_call', timestamp: 1_700_000_000_000 }] })
  const end = toCallEnd(config, CALL, silent, { reason: 'inactivity' })
  t.equal(end.outcome, 'failed')
  t.equal(end.recording_url, undefined, 'no recording: no link')
  t.equal(end.transfer_history, undefined, 'no transfers: the call\'s transfer_history stays null')
})

t.test('a forwarding that was answered settles the last transfer and counts its seconds', async (t) => {
  const held = conversation({ transfers: [agentTransfer, forwarding], recording_ms: 2_000 })
  const end = toCallEnd(config, CALL, held, { reason: 'call_transfer', forwarding: { outcome: 'answered', seconds: 95 } })
  t.equal(end.outcome, 'completed')
  t.equal(end.usage?.forwarding_seconds, 95)
  t.same(end.transfer_history, [agentTransfer, { ...forwarding, outcome: 'answered', duration_seconds: 95 }])
  t.equal(held.transfers[1].outcome, 'dialing', 'the record itself is left as it was')
})

t.test('a forwarding nobody answered: its outcome, no length and no forwarding seconds', async (t) => {
  const held = conversation({ transfers: [forwarding] })
  const end = toCallEnd(config, CALL, held, { reason: 'user_hangup', forwarding: { outcome: 'no_answer', seconds: 12 } })
  t.same(end.transfer_history, [{ ...forwarding, outcome: 'no_answer' }])
  t.equal(end.usage?.forwarding_seconds, 0)
  t.same(settledTransfers(held, 'busy'), [{ ...forwarding, outcome: 'busy' }])
})

t.test('a caller put through to a number connected, even before a word was transcribed', async (t) => {
  const end = toCallEnd(config, CALL, conversation({ transcript: [], transfers: [forwarding] }), { reason: 'max_duration_reached' })
  t.equal(end.outcome, 'completed')
  t.same(end.transfer_history, [forwarding], 'without a forwarding to settle, the transfers stay as they are')
})

t.test('the record is serialisable: what calls.forwarding stores reads back as the same shape', async (t) => {
  const held = conversation({ transfers: [agentTransfer, forwarding], recording_ms: 1_000 })
  const stored = JSON.parse(JSON.stringify(held))
  t.ok(Value.Check(Conversation, stored))
  t.same(stored, held)
  t.notOk(Value.Check(Conversation, { ...stored, transfers: [{ ...forwarding, type: 'sms' }] }), 'the shape checks what it holds')
})

t.test('the conversation\'s timed turns go with its end; a record stored before turns were timed still reads and ends', async (t) => {
  const turns = [{ at: 1_700_000_000_400, end_of_turn_ms: 210, transcription_ms: 90, llm_ms: 350, tts_ms: 120, e2e_ms: 770 }]
  t.same(toCallEnd(config, CALL, conversation({ turns }), { reason: 'user_hangup' }).turns, turns)
  const { turns: _, ...older } = conversation()
  t.ok(Value.Check(Conversation, older), 'rows of calls.forwarding without turns are still the shape')
  t.equal(toCallEnd(config, CALL, older, { reason: 'user_hangup' }).turns, undefined)
  t.notOk(Value.Check(Conversation, { ...older, turns: [{ ...turns[0], e2e_ms: null }] }), 'what the caller waited is always a number')
})
