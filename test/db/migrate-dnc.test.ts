import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0035_do_not_call.sql on an install that holds calls already (docs/migrations.md).

t.test('an upgrade from before the do-not-call list takes do_not_call tools and gives the schema a fresh database has', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const tables = "'{do_not_call,do_not_call_counts,agent_tools}'::regclass[]"
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
      ORDER BY table_name, column_name) FROM information_schema.columns WHERE table_schema = 'public' AND table_name IN ('do_not_call', 'do_not_call_counts', 'agent_tools')) AS columns,
    (SELECT json_agg(pg_get_indexdef(indexrelid) || ' ' || indisvalid::text ORDER BY indexrelid::regclass::text) FROM pg_index WHERE indrelid = ANY (${tables})) AS indexes,
    (SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) || ' ' || convalidated::text ORDER BY conname) FROM pg_constraint WHERE conrelid = ANY (${tables})) AS constraints`)).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0035')
  const userId = '65000000dddddddddddddddd'
  const agentId = '65000003dddddddddddddddd'
  const callId = '65000001dddddddddddddddd'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'dnc@example.com'])
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, call_from, call_to, start_timestamp)
    VALUES ($1, $2, $3, 'Front desk', 'phone', 'inbound', 'success', '+14155550111', '+14155550100', now())`, [callId, userId, agentId])

  t.ok((await migrate(pool)).includes('0035_do_not_call.sql'))
  t.same(await schema(), fresh, 'the same columns, indexes and (validated) constraints as a fresh database')
  t.match((await pool.query("SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'agent_tools_tool_type_check'")).rows, [{ def: /'do_not_call'/ }])

  // One entry per account and number; the entry outlives its call; deleting the account takes the list along.
  const insert = async () => await pool.query("INSERT INTO do_not_call (user_id, phone_number, source, call_id) VALUES ($1, '+14155550111', 'call', $2)", [userId, callId])
  await insert()
  await t.rejects(insert(), { code: '23505' }, 'one row per account and number')
  await t.rejects(pool.query("INSERT INTO do_not_call (user_id, phone_number, source) VALUES ($1, '004930123', 'api')", [userId]), { code: '23514' }, 'E.164 only')
  await t.rejects(pool.query("INSERT INTO do_not_call (user_id, phone_number, source) VALUES ($1, '+4930123', 'robot')", [userId]), { code: '23514' }, 'a known source only')
  await pool.query('DELETE FROM calls WHERE id = $1', [callId])
  t.same((await pool.query('SELECT phone_number, call_id FROM do_not_call')).rows, [{ phone_number: '+14155550111', call_id: null }])
  await pool.query('DELETE FROM users WHERE id = $1', [userId])
  t.same((await pool.query('SELECT * FROM do_not_call')).rows, [])
})
