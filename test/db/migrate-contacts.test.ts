import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

t.test('an upgrade from before contacts keeps each call (no contact) and gives the schema a fresh database has; run again, it changes nothing', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable ORDER BY table_name, column_name) FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name IN ('calls', 'contacts')) AS columns,
    (SELECT json_agg(pg_get_indexdef(indexrelid) || ' ' || indisvalid::text ORDER BY indexrelid::regclass::text) FROM pg_index
      WHERE indrelid = ANY ('{calls,contacts}'::regclass[])) AS indexes,
    (SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) || ' ' || convalidated::text ORDER BY conname) FROM pg_constraint
      WHERE conrelid = ANY ('{calls,contacts}'::regclass[])) AS constraints`)).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0024')
  const userId = '65000000cccccccccccccccc'
  const callId = '65000001cccccccccccccccc'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'contacts@example.com'])
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, call_from, call_to, start_timestamp)
    VALUES ($1, $2, '65000003cccccccccccccccc', 'Front desk', 'phone', 'inbound', 'success', '+14155550100', '+14155550199', now())`, [callId, userId])

  t.ok((await migrate(pool)).includes('0024_contacts.sql'))
  t.same((await pool.query('SELECT id, contact_id FROM calls')).rows, [{ id: callId, contact_id: null }], 'a stored call names no contact')
  t.same((await pool.query('SELECT count(*)::int AS n FROM contacts')).rows, [{ n: 0 }])
  t.same(await schema(), fresh, 'the same columns, indexes and (validated) constraints as a fresh database')
  await pool.query("DELETE FROM schema_migrations WHERE name = '0024_contacts.sql'")
  t.same(await migrate(pool), ['0024_contacts.sql'], 'a start that stopped before recording it runs it again')
  t.same(await schema(), fresh)
})
