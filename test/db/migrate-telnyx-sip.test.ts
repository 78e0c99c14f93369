import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0043_telnyx_sip.sql on an install that holds SIP numbers already: a number connected through a Twilio SIP
// Domain is Twilio's (sip_carrier), one kept without a domain has no SIP carrier; the schema is a fresh database's.

t.test('an upgrade from before Telnyx SIP trunks marks connected SIP numbers as Twilio\'s and gives the fresh schema', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(column_name || ' ' || data_type || ' ' || is_nullable ORDER BY column_name) FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name = 'phone_numbers') AS columns,
    (SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) ORDER BY conname) FROM pg_constraint WHERE conrelid = 'phone_numbers'::regclass) AS constraints`)).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0043')
  const userId = '65000000fefefefefefefefe'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'telnyx-sip@example.com'])
  await pool.query(`INSERT INTO phone_numbers (id, user_id, phone_number, source, carrier, sip_termination_uri, sip_domain_sid, sip_credential_list_sid) VALUES
    ('65000001fefefefefefefefe', $1, '+4930901820', 'sip', 'sip', 'sip:pbx.example.com', 'SD${'a'.repeat(32)}', 'CL${'b'.repeat(32)}'),
    ('65000002fefefefefefefefe', $1, '+4930901821', 'sip', 'sip', 'sip:pbx.example.com', NULL, NULL)`, [userId])
  t.ok((await migrate(pool)).includes('0043_telnyx_sip.sql'))
  t.same(await schema(), fresh, 'the same columns and constraints as a fresh database')
  t.same((await pool.query('SELECT phone_number, sip_carrier, sip_subdomain FROM phone_numbers ORDER BY phone_number')).rows,
    [{ phone_number: '+4930901820', sip_carrier: 'twilio', sip_subdomain: null }, { phone_number: '+4930901821', sip_carrier: null, sip_subdomain: null }])
  await t.rejects(pool.query("UPDATE phone_numbers SET sip_carrier = 'sandbox'"), { code: '23514' }, 'only twilio or telnyx')
})
