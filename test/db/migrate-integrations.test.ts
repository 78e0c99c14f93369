import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

t.test('an upgrade from before OAuth connections keeps a connected API key as a working connection and gives a fresh database\'s schema', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') ORDER BY table_name, column_name)
      FROM information_schema.columns WHERE table_schema = 'public' AND table_name IN ('integrations', 'oauth_states')) AS columns,
    (SELECT json_agg(indexdef ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'public' AND tablename IN ('integrations', 'oauth_states')) AS indexes,
    (SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) ORDER BY conname) FROM pg_constraint WHERE conrelid IN ('integrations'::regclass, 'oauth_states'::regclass, 'webhook_deliveries'::regclass)) AS constraints`)).rows[0]
  const fresh = await schema()
  // The database as it was before: every migration before 0030.
  await migratedBefore(t, pool, '0030')
  const userId = '66000000cccccccccccccccc'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'integrations@example.com'])
  await pool.query('INSERT INTO integrations (user_id, provider, account_label, credentials) VALUES ($1, \'booking_one\', \'Clinic\', \'{"api_key":"cal_live_1"}\')', [userId])

  t.ok((await migrate(pool)).includes('0030_integration_connections.sql'))
  t.same(await schema(), fresh, 'the same columns, indexes and constraints as a fresh database')
  t.same((await pool.query('SELECT provider, account_label, method, status, expires_at FROM integrations')).rows,
    [{ provider: 'booking_one', account_label: 'Clinic', method: 'api_key', status: 'connected', expires_at: null }], 'a key connected before is a connected API key')
  await t.rejects(pool.query("UPDATE integrations SET status = 'expired'"), { code: '23514' }, 'a status it does not know')
  await t.rejects(pool.query('INSERT INTO oauth_states (state_hash, user_id, provider, code_verifier, expires_at) VALUES (\'h\', $1, \'payroll\', \'v\', now())', [userId]), { code: '23514' }, 'a provider it does not know')
})
