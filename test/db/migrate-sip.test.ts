import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0039_sip_trunks.sql on an install that holds SIP numbers already: they keep their trunk settings and
// have no SIP Domain (they take no calls until connected again: docs/sip.md); one domain is one number.

t.test('an upgrade from before SIP trunks keeps each number, gives the fresh schema, and refuses one domain for two numbers', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(column_name || ' ' || data_type || ' ' || is_nullable ORDER BY column_name) FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name = 'phone_numbers') AS columns,
    (SELECT json_agg(pg_get_indexdef(indexrelid) ORDER BY indexrelid::regclass::text) FROM pg_index WHERE indrelid = 'phone_numbers'::regclass) AS indexes`)).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0039')
  const userId = '65000000ffffffffffffffff'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'sip@example.com'])
  await pool.query(`INSERT INTO phone_numbers (id, user_id, phone_number, source, carrier, sip_termination_uri, sip_username)
    VALUES ('65000001ffffffffffffffff', $1, '+4930901820', 'sip', 'sip', 'sip:pbx.example.com', 'pbx')`, [userId])
  t.ok((await migrate(pool)).includes('0039_sip_trunks.sql'))
  t.same(await schema(), fresh, 'the same columns and indexes as a fresh database')
  t.same((await pool.query('SELECT sip_termination_uri, sip_username, sip_domain_sid, sip_credential_list_sid FROM phone_numbers')).rows,
    [{ sip_termination_uri: 'sip:pbx.example.com', sip_username: 'pbx', sip_domain_sid: null, sip_credential_list_sid: null }])
  const domain = 'SD' + 'a'.repeat(32)
  await pool.query('UPDATE phone_numbers SET sip_domain_sid = $1', [domain])
  await t.rejects(pool.query(`INSERT INTO phone_numbers (id, user_id, phone_number, source, carrier, sip_domain_sid)
    VALUES ('65000002ffffffffffffffff', $1, '+4930901821', 'sip', 'sip', $2)`, [userId, domain]), { code: '23505' }, 'one domain is one number')
})
