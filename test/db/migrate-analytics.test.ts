import t from 'tap'
import { createDb, createPool } from '../../src/db/database.ts'
import { dateRange } from '../../src/http/dates.ts'
import { migrate } from '../../src/db/migrate.ts'
import { outcomeCounts, transferCounts } from '../../src/modules/calls/queries.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0047_call_outcomes.sql on an install that holds calls already: the outcome indexes are built over them
// (valid, as on a fresh database), and the Analytics page's counts (calls/queries.ts, outcomeCounts, transferCounts)
// are answered from them.

t.test('an upgrade builds the outcome indexes over stored calls, and the outcome counts read them', async (t) => {
  // One connection: the session's planner settings and statistics are the ones the queries ran with.
  const pool = createPool(await createTestDatabase(t), 1)
  t.teardown(() => pool.end())
  const indexes = async (): Promise<unknown> => (await pool.query(`SELECT json_agg(pg_get_indexdef(indexrelid) || ' ' || indisvalid::text ORDER BY indexrelid::regclass::text) AS indexes
    FROM pg_index WHERE indrelid = 'calls'::regclass`)).rows[0]
  const fresh = await indexes()
  await migratedBefore(t, pool, '0047')
  const userId = '65000000dddddddddddddddd'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'outcomes@example.com'])
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, start_timestamp, duration_ms, task_achieved, disconnection_reason, transfer_history)
    VALUES ('65000001dddddddddddddddd', $1, '65000003dddddddddddddddd', 'Front desk', 'web', 'outbound', 'success', '2026-05-01T09:00Z', 60000, true, 'user_hangup', '[{"to": "+14155550111"}, {"to": "+14155550112"}]'),
      ('65000002dddddddddddddddd', $1, '65000003dddddddddddddddd', 'Front desk', 'web', 'outbound', 'failed', '2026-05-01T10:00Z', NULL, false, 'no_answer', NULL)`, [userId])

  t.ok((await migrate(pool)).includes('0047_call_outcomes.sql'))
  t.same(await indexes(), fresh, 'the same indexes, all valid, as a fresh database')

  // With sequential scans priced out, as with many calls: the counts use the outcome index (index only, once
  // vacuumed) and the transfers the partial one.
  await pool.query('VACUUM ANALYZE calls')
  await pool.query('SET enable_seqscan = off')
  const scans = async () => {
    await pool.query('SELECT pg_stat_force_next_flush()')
    await pool.query('SELECT pg_stat_clear_snapshot()')
    const { rows } = await pool.query(`SELECT indexrelname AS name, idx_scan::int AS scans FROM pg_stat_user_indexes
      WHERE indexrelname IN ('calls_user_outcomes_idx', 'calls_user_transferred_idx') ORDER BY 1`)
    return Object.fromEntries(rows.map((row: { name: string, scans: number }) => [row.name, row.scans]))
  }
  const db = createDb(pool)
  const range = dateRange({ date_from: '2026-05-01', date_to: '2026-05-01' })
  const before = await scans()
  t.same(await outcomeCounts(db, userId, {}, range), [
    { reason: 'no_answer', calls: 1, success: 0, failed: 1, judged: 1, achieved: 0, timed: 0, duration_ms: 0 },
    { reason: 'user_hangup', calls: 1, success: 1, failed: 0, judged: 1, achieved: 1, timed: 1, duration_ms: 60000 }
  ])
  const counted = await scans()
  t.equal(counted.calls_user_outcomes_idx, before.calls_user_outcomes_idx + 1, 'the counts read the outcome index')
  t.same(await transferCounts(db, userId, {}, range), { calls: 1, transfers: 2 })
  t.equal((await scans()).calls_user_transferred_idx, counted.calls_user_transferred_idx + 1, 'the transfers read the partial index')
})
