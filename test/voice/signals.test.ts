import t from 'tap'
import { sql } from 'kysely'
import { createDb, createPool } from '../../src/db/database.ts'
import { createLogger } from '../../src/logger.ts'
import { loadConfig } from '../../src/config.ts'
import { LiveCalls } from '../../src/modules/voice/live-calls.ts'
import type { Session } from '../../src/modules/voice/session.ts'
import { answeredByOf, listenForSignals, parseSignal, signalCall, type CallSignal } from '../../src/modules/voice/signals.ts'
import { createTestDatabase } from '../helpers/database.ts'
import { poll } from '../helpers/poll.ts'

// Call signals (voice/signals.ts): PostgreSQL LISTEN/NOTIFY between the processes that run voice sessions, and
// LiveCalls handing each signal to the session that holds the call.

const log = createLogger(loadConfig({ LOG_LEVEL: 'silent' }))

t.test('two listeners (two processes) each hear every signal; one that loses its connection reconnects and hears the next', async (t) => {
  const pool = createPool(await createTestDatabase(t), 3)
  t.teardown(() => pool.end())
  const db = createDb(pool)
  const heard: Array<Array<{ callId: string, signal: CallSignal }>> = [[], []]
  const listeners = heard.map((into) => listenForSignals(db, log, (callId, signal) => into.push({ callId, signal })))
  t.teardown(async () => { for (const listener of listeners) await listener.stop() })
  await Promise.all(listeners.map(async (l) => await l.ready))

  await signalCall(db, 'call-1', { type: 'answered_by', answered_by: 'machine' })
  await poll(() => heard.map((h) => h.length), (n) => n.every((count) => count === 1), { message: 'both heard it' })
  t.same(heard[0], [{ callId: 'call-1', signal: { type: 'answered_by', answered_by: 'machine' } }])
  t.same(heard[1], heard[0])

  // The server ends both listening connections (a restart, a failover): they come back on their own. Only this
  // database's: other test files listen on the same server.
  const ended = await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND datname = current_database() AND pid <> pg_backend_pid()`.execute(db)
  t.equal(ended.rows.length, 2, 'both listening connections ended')
  await poll(async () => await signalCall(db, 'call-2', { type: 'answered_by', answered_by: 'human' }).then(() => heard.map((h) => h.some((s) => s.callId === 'call-2'))),
    (got) => got.every(Boolean), { message: 'both listen again', intervalMs: 100 })
  t.ok(heard.every((h) => h.at(-1)!.callId === 'call-2'))
})

t.test('LiveCalls gives a signal to the live session of the call only; payloads that are no signal are ignored', async (t) => {
  const given: string[] = []
  const session = (id: string, finished = false) => ({
    call: { id },
    finished,
    done: new Promise<void>(() => {}),
    answeredBy: (kind: string) => given.push(`${id}:${kind}`)
  }) as unknown as Session
  const live = new LiveCalls()
  live.add(session('a'))
  live.add(session('b'))
  live.add(session('c', true))
  t.equal(live.signal('b', { type: 'answered_by', answered_by: 'fax' }), true)
  t.equal(live.signal('c', { type: 'answered_by', answered_by: 'human' }), false, 'a session that is over (its call forwarded) takes none')
  t.equal(live.signal('x', { type: 'answered_by', answered_by: 'human' }), false, 'a call another process holds')
  t.same(given, ['b:fax'])

  t.same(parseSignal('{"callId":"a","signal":{"type":"answered_by","answered_by":"machine"}}'), { callId: 'a', signal: { type: 'answered_by', answered_by: 'machine' } })
  for (const bad of [undefined, '', 'not json', '{"callId":1}', '{"callId":"a","signal":{"type":"other"}}', '{"callId":"a","signal":{"type":"answered_by","answered_by":"robot"}}']) {
    t.equal(parseSignal(bad), undefined, String(bad))
  }
  t.same(['human', 'machine_start', 'machine_end_beep', 'machine_end_silence', 'machine_end_other', 'fax', 'unknown', null].map(answeredByOf),
    ['human', undefined, 'machine', 'machine', 'machine', 'fax', 'unknown', undefined], 'Twilio\'s AnsweredBy as a session acts on it')
})
