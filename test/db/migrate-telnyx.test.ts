import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0038_telnyx.sql on an install that holds Twilio numbers and calls already: they stay, and numbers and
// calls may now be Telnyx's; another carrier name is still refused.

t.test('an upgrade from before Telnyx keeps numbers and calls, gives the fresh schema, and takes telnyx numbers and calls', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable ORDER BY table_name, column_name)
      FROM information_schema.columns WHERE table_schema = 'public' AND table_name IN ('calls', 'phone_numbers')) AS columns,
    (SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) ORDER BY conname) FROM pg_constraint
      WHERE conrelid IN ('calls'::regclass, 'phone_numbers'::regclass)) AS constraints`)).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0038')
  const userId = '65000000eeeeeeeeeeeeeeee'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'telnyx@example.com'])
  await pool.query('INSERT INTO phone_numbers (id, user_id, phone_number, source, carrier) VALUES (\'65000001eeeeeeeeeeeeeeee\', $1, \'+14155550100\', \'purchased\', \'twilio\')', [userId])
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, call_from, call_to, start_timestamp, carrier, carrier_call_id)
    VALUES ('65000002eeeeeeeeeeeeeeee', $1, '65000003eeeeeeeeeeeeeeee', 'Desk', 'phone', 'inbound', 'started', '+14155550111', '+14155550100', now(), 'twilio', 'CA0')`, [userId])
  await t.rejects(pool.query('INSERT INTO phone_numbers (id, user_id, phone_number, source, carrier) VALUES (\'65000004eeeeeeeeeeeeeeee\', $1, \'+14155550101\', \'purchased\', \'telnyx\')', [userId]),
    { code: '23514' }, 'before the upgrade a Telnyx number is refused')

  t.ok((await migrate(pool)).includes('0038_telnyx.sql'))
  t.same(await schema(), fresh, 'the same columns and constraints as a fresh database')
  t.equal((await pool.query('SELECT count(*)::int AS n FROM phone_numbers')).rows[0].n, 1, 'the Twilio number is kept')
  t.equal((await pool.query('SELECT carrier FROM calls')).rows[0].carrier, 'twilio', 'the Twilio call is kept')
  await pool.query('INSERT INTO phone_numbers (id, user_id, phone_number, source, carrier) VALUES (\'65000004eeeeeeeeeeeeeeee\', $1, \'+14155550101\', \'purchased\', \'telnyx\')', [userId])
  await pool.query('UPDATE calls SET carrier = \'telnyx\', carrier_call_id = \'v3:abc\'')
  await t.rejects(pool.query('UPDATE calls SET carrier = \'vonage\''), { code: '23514' }, 'another carrier is still refused')
  await t.rejects(pool.query('UPDATE phone_numbers SET carrier = \'vonage\''), { code: '23514' })
})
