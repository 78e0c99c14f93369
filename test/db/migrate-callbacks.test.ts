import t from 'tap'
import { createDb, createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { findCallJson } from '../../src/modules/calls/queries.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0026_call_callbacks.sql on an install that holds calls already (docs/migrations.md).

t.test('an upgrade from before callbacks keeps each call (no callbacks) and gives the schema a fresh database has', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
      ORDER BY table_name, column_name) FROM information_schema.columns WHERE table_schema = 'public') AS columns,
    (SELECT json_agg(pg_get_indexdef(indexrelid) || ' ' || indisvalid::text ORDER BY indexrelid::regclass::text) FROM pg_index
      WHERE indrelid IN ('calls'::regclass, 'call_callbacks'::regclass)) AS indexes,
    (SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) ORDER BY conname) FROM pg_constraint WHERE conrelid = 'call_callbacks'::regclass) AS constraints`)).rows[0]
  const fresh = await schema()
  // The database as the main before callbacks left it: every migration before 0026.
  await migratedBefore(t, pool, '0026')
  const userId = '65000000cccccccccccccccc'
  const callId = '65000001cccccccccccccccc'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'callbacks@example.com'])
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, call_from, call_to, start_timestamp, disconnection_reason)
    VALUES ($1, $2, '65000003cccccccccccccccc', 'Front desk', 'phone', 'outbound', 'failed', '+14155550100', '+14155550111', now(), 'no_answer')`, [callId, userId])

  t.ok((await migrate(pool)).includes('0026_call_callbacks.sql'))
  t.same(await schema(), fresh, 'the same columns, indexes and constraints as a fresh database')
  const detail = JSON.parse((await findCallJson(createDb(pool), userId, callId))!)
  t.match(detail, { _id: callId, call_status: 'failed', callback_of: null, callback_attempt: null, callbacks: [] }, 'a stored call is no callback and has none')

  // The chain is tied to its calls and account: a second row for the same attempt is refused, and deleting the account takes it along.
  const insert = (id: string) => pool.query(`INSERT INTO call_callbacks (id, user_id, callback_of, after_call_id, attempt, max_attempts, to_number, due_at)
    VALUES ($1, $2, $3, $3, 1, 2, '+14155550111', now())`, [id, userId, callId])
  await insert('65000004cccccccccccccccc')
  await t.rejects(insert('65000005cccccccccccccccc'), { code: '23505' }, 'one row per attempt of a chain')
  await pool.query('DELETE FROM users WHERE id = $1', [userId])
  t.same((await pool.query('SELECT id FROM call_callbacks')).rows, [])
})
