import t from 'tap'
import type { Test } from 'tap'
import { newId } from '../../src/db/ids.ts'
import { findCallRow } from '../../src/modules/calls/queries.ts'
import { createLogger } from '../../src/logger.ts'
import type { SessionEvent } from '../../src/modules/voice/events.ts'
import { Session } from '../../src/modules/voice/session.ts'
import { ManualClock } from '../../src/modules/voice/turns/clock.ts'
import { createAccount, setup } from '../helpers/app.ts'
import { poll } from '../helpers/poll.ts'

// The session's greeting on an outbound phone call (docs/voice.md, "Waiting for hello", "Voicemail"), on a clock
// moved by hand: the begin message waits for the callee's hello up to wait_for_hello_seconds, and for the verdict
// of answering-machine detection; a machine gets the agent's message or a hang-up. No test here sleeps: time moves.

async function outboundSession (t: Test, agentBody: Record<string, unknown>, call: { direction?: 'inbound' | 'outbound', carrier?: 'twilio' | 'telnyx' | null } = {}, begin: string | null = 'Hello {{name}}, this is the clinic.') {
  const ctx = await setup(t, { CALL_RUNTIME: 'voice' })
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: begin } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: llm._id, ...agentBody } })).json()
  const id = newId()
  await ctx.db.insertInto('calls').values({
    id,
    user_id: account.user.id,
    agent_id: agent._id,
    agent_name: 'Clinic',
    call_type: 'phone',
    direction: call.direction ?? 'outbound',
    call_status: 'started',
    call_from: '+14155550100',
    call_to: '+14155550123',
    start_timestamp: new Date(),
    carrier: call.carrier === undefined ? 'twilio' : call.carrier,
    dynamic_context: JSON.stringify({ name: 'Ada' })
  }).execute()
  const events: SessionEvent[] = []
  const clock = new ManualClock()
  const transport = { sendAudio: () => {}, send: (event: SessionEvent) => { events.push(event) }, close: () => {} }
  const session = Session.open({ db: ctx.db, log: createLogger(ctx.config), mailer: undefined as never, boss: ctx.boss, config: ctx.config }, (await findCallRow(ctx.db, id))!, transport, { engine: 'simulator', clock })
  t.teardown(async () => { await session.end('server_shutdown') })
  await poll(() => events.some((e) => e.type === 'ready'), Boolean, { message: 'the session started' })
  const said = () => events.filter((e) => e.type === 'transcript' && e.speaker === 'agent').map((e) => (e as { content: string }).content)
  /** Lets the session's pending work (its database reads) run, then moves the clock. */
  const advance = async (ms: number) => {
    await new Promise((resolve) => setTimeout(resolve, 50))
    clock.advance(ms)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return { ctx, id, session, events, said, advance }
}

t.test('nobody says hello: the begin message comes once wait_for_hello_seconds have passed, not before', async (t) => {
  const { said, advance } = await outboundSession(t, { call_settings: { wait_for_hello_seconds: 4 } })
  await advance(3990)
  t.same(said(), [], 'silent during the wait')
  await advance(20)
  t.same(said(), ['Hello Ada, this is the clinic.'])
})

t.test('speech that never ends holds the begin message twice the wait at most', async (t) => {
  const { said, advance, session } = await outboundSession(t, { call_settings: { wait_for_hello_seconds: 2 } })
  ;(session as unknown as { callerSpeech: (edge: 'start' | 'end') => void }).callerSpeech('start')
  await advance(3990)
  t.same(said(), [], 'the callee is still speaking when the wait is over')
  await advance(20)
  t.same(said(), ['Hello Ada, this is the clinic.'])
})

t.test('no begin message, detection on: what the callee said while the verdict was awaited is answered once it is human', async (t) => {
  const { said, advance, session, events } = await outboundSession(t, { voicemail_settings: { detection: true } }, {}, null)
  const speech = session as unknown as { callerSpeech: (edge: 'start' | 'end') => void }
  speech.callerSpeech('start')
  speech.callerSpeech('end')
  await advance(10_000)
  t.same(said(), [], 'nothing before the verdict')
  session.answeredBy('human')
  await advance(0)
  t.ok(events.some((e) => e.type === 'agent_speaking' && e.speaking), 'the agent answers the callee\'s words')
})

t.test('wait_for_hello_seconds 0, an inbound call, a simulated call: the agent speaks at once', async (t) => {
  for (const [name, body, call] of [
    ['no wait', { call_settings: { wait_for_hello_seconds: 0 } }, {}],
    ['inbound', { voicemail_settings: { detection: true } }, { direction: 'inbound' }],
    ['simulated', { voicemail_settings: { detection: true } }, { carrier: null }]
  ] as const) {
    await t.test(name, async (t) => {
      const { said, advance } = await outboundSession(t, body, call)
      await advance(0)
      t.same(said(), ['Hello Ada, this is the clinic.'])
    })
  }
})

t.test('detection on: no word before the verdict, whatever the wait; human → the begin message', async (t) => {
  const { said, advance, session } = await outboundSession(t, { voicemail_settings: { detection: true }, call_settings: { wait_for_hello_seconds: 1 } })
  await advance(20_000)
  t.same(said(), [], 'the wait is over, the verdict is not in')
  session.answeredBy('human')
  await advance(0)
  t.same(said(), ['Hello Ada, this is the clinic.'])
})

t.test('detection on, a Telnyx call: as on Twilio, no word before the verdict', async (t) => {
  const { said, advance, session } = await outboundSession(t, { voicemail_settings: { detection: true }, call_settings: { wait_for_hello_seconds: 1 } }, { carrier: 'telnyx' })
  await advance(20_000)
  t.same(said(), [], 'the wait is over, the verdict is not in')
  session.answeredBy('human')
  await advance(0)
  t.same(said(), ['Hello Ada, this is the clinic.'])
})

t.test('detection on, a call no carrier placed (the simulated phone call): no verdict is awaited, the begin message comes after the wait', async (t) => {
  const { said, advance } = await outboundSession(t, { voicemail_settings: { detection: true }, call_settings: { wait_for_hello_seconds: 1 } }, { carrier: null })
  await advance(1010)
  t.same(said(), ['Hello Ada, this is the clinic.'])
})

t.test('detection on, no verdict ever: after detection_timeout_seconds and its grace the agent speaks (unknown)', async (t) => {
  const { said, advance, events } = await outboundSession(t, { voicemail_settings: { detection: true, detection_timeout_seconds: 10 }, call_settings: { wait_for_hello_seconds: 1 } })
  await advance(14_990)
  t.same(said(), [])
  await advance(20)
  t.same(said(), ['Hello Ada, this is the clinic.'])
  t.ok(events.some((e) => e.type === 'transcript' && e.speaker === 'tool' && /unknown/.test(e.content)), 'recorded as unknown')
})

t.test('a machine: leave_message says the message (variables filled) and ends the call voicemail; an empty message hangs up', async (t) => {
  const left = await outboundSession(t, { voicemail_settings: { detection: true, action: 'leave_message', message: 'Hi {{name}}, please call back.' } })
  left.session.answeredBy('machine')
  await left.advance(0)
  await left.session.done
  t.same(left.said(), ['Hi Ada, please call back.'], 'no begin message, the message only')
  t.match(await findCallRow(left.ctx.db, left.id), { disconnection_reason: 'voicemail', outcome: 'completed' })

  const empty = await outboundSession(t, { voicemail_settings: { detection: true, action: 'leave_message', message: ' ' } })
  empty.session.answeredBy('machine')
  await empty.session.done
  t.same(empty.said(), [])
  t.match(await findCallRow(empty.ctx.db, empty.id), { disconnection_reason: 'voicemail', outcome: 'completed' }, 'answered: charged')

  const fax = await outboundSession(t, { voicemail_settings: { detection: true } })
  fax.session.answeredBy('fax')
  await fax.session.done
  t.match(await findCallRow(fax.ctx.db, fax.id), { disconnection_reason: 'fax_detected' })
})

t.test('a verdict stored before the session listened is acted on when it reaches its greeting', async (t) => {
  const ctx = await outboundSession(t, { voicemail_settings: { detection: true, action: 'hang_up' } })
  // The session already read the row; a second session of a call whose verdict is stored shows the read.
  await ctx.ctx.db.updateTable('calls').set({ answered_by: 'machine_end_silence' }).where('id', '=', ctx.id).execute()
  const events: SessionEvent[] = []
  const other = Session.open({ db: ctx.ctx.db, log: createLogger(ctx.ctx.config), mailer: undefined as never, boss: ctx.ctx.boss, config: ctx.ctx.config },
    (await findCallRow(ctx.ctx.db, ctx.id))!, { sendAudio: () => {}, send: (e: SessionEvent) => { events.push(e) }, close: () => {} }, { engine: 'simulator', clock: new ManualClock() })
  await other.done
  t.ok(events.some((e) => e.type === 'ended' && e.reason === 'voicemail'), 'hung up on the machine without any signal')
})
