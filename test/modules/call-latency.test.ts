// Every answered caller turn timed (issue 27, part 5): the turns of a call's Conversation are stored with their
// summary when the call ends (calls/lifecycle.ts), shown on the call's detail and console page, and summarised over a
// period in general-metrics and the console's Analytics (docs/calls.md, "Latency").
import t from 'tap'
import type { Conversation, TurnTiming } from '../../src/db/shapes.ts'
import { endCall, toCallEnd } from '../../src/modules/calls/lifecycle.ts'
import { setup, type TestContext } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { signedInWithKey } from '../helpers/console-client.ts'

const START = Date.now() - 60_000
/** The n-th turn (its speech ended n × 10 s into the call) with its times in ms: end of turn, transcription, model, what the caller waited. */
const turn = (n: number, endOfTurn: number, transcription: number | null, llm: number | null, e2e: number): TurnTiming =>
  ({ at: START + n * 10_000, end_of_turn_ms: endOfTurn, transcription_ms: transcription, llm_ms: llm, tts_ms: null, e2e_ms: e2e })

// Five turns of a cascade whose voice reports no time (tts null); two of them without a recogniser's time.
const TURNS = [
  turn(1, 250, 120, 410, 900),
  turn(2, 0, null, 350, 300),
  turn(3, 180, 80, 380, 500),
  turn(4, 400, 95, 390, 700),
  turn(5, 95, null, 505, 1100)
]
// By hand: sorted, p50 is the middle value; p90 lies 0.6 of the way (4 × 0.9 = 3.6) from the 4th value to the 5th,
// and for the three transcription times 0.8 of the way (2 × 0.9 = 1.8) from the 2nd to the 3rd.
const SUMMARY = {
  e2e: { p50: 700, p90: 1020, min: 300, max: 1100, num: 5 }, // 300 500 700 900 1100: 900 + 0.6 × 200
  end_of_turn: { p50: 180, p90: 340, min: 0, max: 400, num: 5 }, // 0 95 180 250 400: 250 + 0.6 × 150
  transcription: { p50: 95, p90: 115, min: 80, max: 120, num: 3 }, // 80 95 120: 95 + 0.8 × 25
  llm: { p50: 390, p90: 467, min: 350, max: 505, num: 5 }, // 350 380 390 410 505: 410 + 0.6 × 95
  tts: null
}

function conversation (agentId: string, turns?: TurnTiming[]): Conversation {
  return {
    agent_id: agentId,
    transcript: [{ speaker: 'user', content: 'Hello?', timestamp: START + 1000 }, { speaker: 'agent', content: 'Hi, how can I help?', timestamp: START + 2000 }],
    tokens: {},
    speech: { recognised: 1, synthesised: 1 },
    transfers: [],
    recording_ms: 0,
    ...(turns !== undefined && { turns })
  }
}

/** A started call of the agent, ended as the voice engine ends one: its Conversation through toCallEnd and endCall. */
async function endedCall (ctx: TestContext, userId: string, agent: { _id: string, agent_name: string }, turns?: TurnTiming[]): Promise<string> {
  const [id] = await insertCalls(ctx.db, userId, agent, [{ start_timestamp: new Date(START), call_status: 'started', end_timestamp: null, duration_ms: null }])
  const ended = await endCall(ctx.db, { boss: ctx.boss, config: ctx.config }, userId, id, toCallEnd(ctx.config, id, conversation(agent._id, turns), { reason: 'user_hangup' }))
  if (ended.outcome !== 'ended') throw new Error(`not ended: ${ended.outcome}`)
  return id
}

const today = new Date(START).toISOString().slice(0, 10)

t.test('a call ended with timed turns shows them and their p50/p90 per stage; one without has latency null', async (t) => {
  const ctx = await setup(t)
  const { user, account } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account)
  const timed = await endedCall(ctx, user.id, agent, TURNS)
  const untimed = await endedCall(ctx, user.id, agent)
  const empty = await endedCall(ctx, user.id, agent, [])

  const res = await ctx.app.inject({ method: 'GET', url: `/v1/call/${timed}`, headers: account.headers })
  t.equal(res.statusCode, 200)
  t.same(res.json().latency, { ...SUMMARY, turns: TURNS })
  for (const id of [untimed, empty]) {
    const detail = await ctx.app.inject({ method: 'GET', url: `/v1/call/${id}`, headers: account.headers })
    t.equal(detail.json().latency, null, 'no timed turns: null')
  }
  const stored = await ctx.db.selectFrom('calls').select(['id', 'latency']).where('id', 'in', [untimed, empty]).execute()
  t.same(stored.map((row) => row.latency), [null, null], 'SQL NULL, not a JSON null')
  const list = await ctx.app.inject({ method: 'GET', url: '/v1/call/list', headers: account.headers })
  t.notOk('latency' in list.json()[0], 'not in the list view')
})

t.test('general-metrics: what callers waited, percentiles over every timed turn of the range\'s calls, by the same filters', async (t) => {
  const ctx = await setup(t)
  const { user, account } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account)
  const quiet = await createAgent(ctx.app, account, { agent_name: 'Quiet' })
  await endedCall(ctx, user.id, agent, TURNS)
  await endedCall(ctx, user.id, agent, [turn(1, 120, 60, 300, 1500), turn(2, 90, 70, 320, 600)])
  await endedCall(ctx, user.id, quiet)
  const metrics = async (query: string, days = `date_from=${today}&date_to=${today}`) => {
    const res = await ctx.app.inject({ method: 'GET', url: `/v1/call/general-metrics?${days}${query}`, headers: account.headers })
    t.equal(res.statusCode, 200)
    return res.json()
  }
  const all = await metrics('')
  t.equal(all.total_calls, 3, 'the existing fields are unchanged')
  // e2e of the seven turns: 300 500 600 700 900 1100 1500. p50 the 4th; p90 0.4 of the way (6 × 0.9 = 5.4) from 1100 to 1500.
  // Not the average of the calls' own p50s (700 and 1050) and p90s.
  t.same(all.latency, { calls: 2, e2e: { p50: 700, p90: 1260, min: 300, max: 1500, num: 7 } })
  t.equal((await metrics(`&agent_ids=${quiet._id}`)).latency, null, 'no timed calls: null')
  t.equal((await metrics('', 'date_from=2020-01-01&date_to=2020-01-02')).latency, null, 'another range')
  t.equal((await metrics(`&agent_ids=${agent._id}`)).latency.e2e.num, 7)
})

t.test('the console: the call page shows the turns and the call\'s p50/p90, hidden without them; Analytics shows the wait', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account)
  const timed = await endedCall(ctx, user.id, agent, TURNS)
  const untimed = await endedCall(ctx, user.id, agent)

  const page = await browser.get(`/calls/${timed}`)
  t.equal(page.statusCode, 200)
  t.match(page.body, '<h2>Latency</h2>')
  t.match(page.body, 'Caller waited: <strong>700 ms</strong> p50, <strong>1,020 ms</strong> p90 over 5 turns.')
  const table = /<caption>Each answered turn[\s\S]*?<\/table>/.exec(page.body)?.[0] ?? ''
  const rows = [...table.matchAll(/<tr>(.*?)<\/tr>/g)].map((row) => [...row[1].matchAll(/<t[hd][^>]*>(.*?)<\/t[hd]>/g)].map((cell) => cell[1].replace(/<[^>]+>/g, '').trim()))
  t.same(rows, [
    ['Turn', 'End of turn', 'Transcription', 'Model', 'Speech', 'Caller waited'],
    ['1 0:10', '250 ms', '120 ms', '410 ms', '—', '900 ms'],
    ['2 0:20', '0 ms', '—', '350 ms', '—', '300 ms'],
    ['3 0:30', '180 ms', '80 ms', '380 ms', '—', '500 ms'],
    ['4 0:40', '400 ms', '95 ms', '390 ms', '—', '700 ms'],
    ['5 0:50', '95 ms', '—', '505 ms', '—', '1,100 ms'],
    ['p50', '180 ms', '95 ms', '390 ms', '—', '700 ms'],
    ['p90', '340 ms', '115 ms', '467 ms', '—', '1,020 ms']
  ])
  const plain = await browser.get(`/calls/${untimed}`)
  t.equal(plain.statusCode, 200)
  t.notMatch(plain.body, 'Latency', 'no timed turns: no section')

  const analytics = await browser.get(`/analytics?from=${today}&to=${today}`)
  t.equal(analytics.statusCode, 200)
  t.match(analytics.body, '<dt>Caller waited per turn</dt><dd>700 ms p50, 1,060 ms p95 (over 5 answered turns of 1 timed call)</dd>')
  const other = await createAgent(ctx.app, account, { agent_name: 'Other' })
  await endedCall(ctx, user.id, other)
  t.match((await browser.get(`/analytics?from=${today}&to=${today}&agent=${other._id}`)).body, '<dt>Caller waited per turn</dt><dd>No timed turns</dd>', 'no timed calls: said so')
})
