import t from 'tap'
import { createDb, createPool } from '../../src/db/database.ts'
import { dateRange } from '../../src/http/dates.ts'
import { migrate } from '../../src/db/migrate.ts'
import { medianWaitBuckets, turnWaits } from '../../src/modules/calls/queries.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0048_call_daily_waits.sql: the Analytics page's waits come from a rollup kept by a trigger. On an install
// that holds timed calls, the upgrade counts them (in batches, behind a watermark the trigger respects), and from then
// on every insert, change and deletion of a call keeps the rollup equal to a count over the calls themselves; the
// percentiles read from it equal percentile_cont over every turn.

const USER = '65000000eeeeeeeeeeeeeeee'
const AGENTS = ['65000003eeeeeeeeeeeeeee1', '65000003eeeeeeeeeeeeeee2']
const RANGE = dateRange({ date_from: '2026-05-01', date_to: '2026-05-03' })

/** A deterministic spread of waits: call i's turns. */
const waitsOf = (i: number) => Array.from({ length: 1 + (i % 5) }, (_, k) => 200 + ((i * 37 + k * 113) % 1900))
const latencyOf = (waits: number[], cut: number[] = []) => {
  const sorted = [...waits].sort((a, b) => a - b)
  const at = (sorted.length - 1) / 2
  const p50 = Math.round(sorted[Math.floor(at)] + (sorted[Math.ceil(at)] - sorted[Math.floor(at)]) * (at - Math.floor(at)))
  return JSON.stringify({ e2e: { p50 }, turns: waits.map((ms, k) => ({ at: k, end_of_turn_ms: 0, transcription_ms: null, llm_ms: null, tts_ms: null, e2e_ms: ms, ...(cut.includes(k) && { interrupted: true }) })) })
}

t.test('an upgrade counts the stored calls; inserts, changes and deletions keep the rollup equal to the calls', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  await migratedBefore(t, pool, '0048')
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [USER, 'waits@example.com'])
  const insert = async (from: number, to: number) => {
    for (let i = from; i < to; i++) {
      await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, start_timestamp, latency, workspace_id)
        VALUES ($1, $2, $3, 'Front desk', 'web', 'outbound', 'success', $4, $5, NULL)`,
      [`65000001${String(i).padStart(16, '0')}`, USER, AGENTS[i % 2], `2026-05-0${1 + (i % 3)}T09:00Z`, i % 7 === 0 ? null : latencyOf(waitsOf(i), i % 4 === 0 ? [0] : [])])
    }
  }
  // 12,000 calls: more than two of the backfill's batches.
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, start_timestamp, latency)
    SELECT '65000001' || lpad(i::text, 16, '0'), $1, CASE WHEN i % 2 = 0 THEN $2 ELSE $3 END, 'Front desk', 'web', 'outbound', 'success',
      ('2026-05-0' || (1 + i % 3) || 'T09:00Z')::timestamptz,
      CASE WHEN i % 7 = 0 THEN NULL ELSE jsonb_build_object('e2e', jsonb_build_object('p50', 200 + (i * 37) % 1900),
        'turns', jsonb_build_array(jsonb_build_object('e2e_ms', 200 + (i * 37) % 1900), jsonb_build_object('e2e_ms', 300 + (i * 53) % 2100, 'interrupted', i % 4 = 0))) END
    FROM generate_series(0, 11999) AS i`, [USER, AGENTS[0], AGENTS[1]])

  t.ok((await migrate(pool)).includes('0048_call_daily_waits.sql'))
  t.equal((await pool.query("SELECT to_regclass('call_daily_waits_backfill') AS mark")).rows[0].mark, null, 'the watermark is gone once counted')

  /** The rollup as a count over the calls themselves would give it, and as stored. */
  const expected = async () => (await pool.query(`SELECT w.day::text, w.agent_id, w.kind, w.wait_ms, count(*)::int AS n, count(*) FILTER (WHERE w.interrupted)::int AS interrupted
    FROM calls c CROSS JOIN LATERAL call_waits(c) w GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`)).rows
  const stored = async () => (await pool.query(`SELECT day::text, agent_id, kind, wait_ms, n::int, interrupted::int FROM call_daily_waits
    WHERE n <> 0 OR interrupted <> 0 ORDER BY 1, 2, 3, 4`)).rows
  const first = await expected()
  t.ok(first.length > 1000, `${first.length} distinct waits`)
  t.same(await stored(), first, 'the stored calls were counted once each')

  // From now on the trigger: new calls, a call that ends (latency set), one moved to another agent, one deleted.
  await insert(20_000, 20_040)
  await pool.query('UPDATE calls SET latency = $1 WHERE id = \'650000010000000000000007\'', [latencyOf([640, 1200, 90], [2])])
  await pool.query('UPDATE calls SET agent_id = $1, start_timestamp = \'2026-05-03T10:00Z\' WHERE id = \'650000010000000000000010\'', [AGENTS[1]])
  await pool.query('UPDATE calls SET call_status = \'failed\' WHERE id = \'650000010000000000000011\'')
  await pool.query('DELETE FROM calls WHERE id = \'650000010000000000000012\'')
  t.same(await stored(), await expected(), 'inserts, changes and deletions are counted')

  // The page's figures from the rollup equal percentile_cont over every turn of the range's calls.
  const db = createDb(pool)
  const direct = (await pool.query(`SELECT count(*) FILTER (WHERE turn.n = 1)::int AS calls, count(*)::int AS turns,
      count(*) FILTER (WHERE turn.value ->> 'interrupted' = 'true')::int AS interrupted,
      percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY (turn.value ->> 'e2e_ms')::float8) AS percentiles
    FROM calls CROSS JOIN LATERAL jsonb_array_elements(latency -> 'turns') WITH ORDINALITY AS turn (value, n)
    WHERE user_id = $1 AND agent_id = $2 AND latency IS NOT NULL`, [USER, AGENTS[1]])).rows[0]
  t.same(await turnWaits(db, USER, { agentIds: [AGENTS[1]] }, RANGE), {
    calls: direct.calls, turns: direct.turns, interrupted: direct.interrupted, p50: Math.round(direct.percentiles[0]), p95: Math.round(direct.percentiles[1])
  }, 'p50, p95 and the counts as percentile_cont gives them')
  const buckets = (await pool.query(`SELECT least(floor((latency -> 'e2e' ->> 'p50')::float8 / 500), 5)::int AS bucket, count(*)::int AS calls
    FROM calls WHERE user_id = $1 AND latency IS NOT NULL GROUP BY 1`, [USER])).rows
  const counts = Array<number>(6).fill(0)
  for (const row of buckets) counts[row.bucket] = row.calls
  t.same(await medianWaitBuckets(db, USER, {}, RANGE, 500, 6), counts, 'calls by median wait')
  t.equal(await turnWaits(db, USER, {}, dateRange({ date_from: '2026-06-01', date_to: '2026-06-02' })), null, 'no timed turns: none')
})
