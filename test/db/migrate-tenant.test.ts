import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0044_telnyx_tenant.sql on an install holding numbers already: they stay (the installation's Telnyx
// numbers with no tenant account), and a number of a tenant's own Telnyx account must have all it needs.

t.test('an upgrade keeps the numbers, gives the fresh schema, and a tenant Telnyx number needs its account, key and application', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(column_name || ' ' || data_type || ' ' || is_nullable ORDER BY column_name)
      FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'phone_numbers') AS columns,
    (SELECT json_agg(pg_get_indexdef(indexrelid) ORDER BY indexrelid::regclass::text) FROM pg_index WHERE indrelid = 'phone_numbers'::regclass) AS indexes,
    (SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) ORDER BY conname) FROM pg_constraint WHERE conrelid = 'phone_numbers'::regclass) AS constraints`)).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0044')
  const userId = '65000000ffffffffffffffff'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'tenant@example.com'])
  await pool.query('INSERT INTO phone_numbers (id, user_id, phone_number, source, carrier) VALUES (\'65000001ffffffffffffffff\', $1, \'+14155550100\', \'purchased\', \'telnyx\')', [userId])

  t.ok((await migrate(pool)).includes('0044_telnyx_tenant.sql'))
  t.same(await schema(), fresh, 'the same columns, indexes and constraints as a fresh database')
  t.match((await pool.query('SELECT carrier, carrier_public_key, carrier_connection_id FROM phone_numbers')).rows, [{ carrier: 'telnyx', carrier_public_key: null, carrier_connection_id: null }])
  const insert = async (id: string, carrier: string, account: string | null, token: string | null, connection: string | null) => await pool.query(`INSERT INTO phone_numbers
    (id, user_id, phone_number, source, carrier, carrier_account_id, carrier_auth_token, carrier_public_key, carrier_connection_id)
    VALUES ($1, $2, '+1415555' || right($1, 4), 'imported', $3, $4, $5, 'AAAA', $6)`, [id, userId, carrier, account, token, connection])
  await t.rejects(insert('6500000200000000000f0101', 'telnyx', null, 'sealed', '123'), { code: '23514' }, 'no account id')
  await t.rejects(insert('6500000200000000000f0102', 'telnyx', '65000003ffffffffffffffff', null, '123'), { code: '23514' }, 'no API key')
  await t.rejects(insert('6500000200000000000f0103', 'telnyx', '65000003ffffffffffffffff', 'sealed', null), { code: '23514' }, 'no application')
  await t.rejects(insert('6500000200000000000f0104', 'twilio', 'AC00', 'sealed', '123'), { code: '23514' }, 'a public key is Telnyx\'s only')
  await t.resolves(insert('6500000200000000000f0105', 'telnyx', '65000003ffffffffffffffff', 'sealed', '123'))
})
