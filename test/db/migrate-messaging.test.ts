import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

t.test('an upgrade from before messaging keeps each call, gives the schema a fresh database has, and a call\'s messages go with it', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') ORDER BY table_name, column_name)
      FROM information_schema.columns WHERE table_schema = 'public' AND table_name IN ('messages', 'messaging_settings')) AS columns,
    (SELECT json_agg(indexdef ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'public' AND tablename IN ('messages', 'messaging_settings')) AS indexes`)).rows[0]
  const fresh = await schema()
  // The database as it was before messaging: every migration before 0027.
  await migratedBefore(t, pool, '0027')
  const userId = '65000000cccccccccccccccc'
  const callId = '65000001cccccccccccccccc'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'messaging@example.com'])
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, start_timestamp)
    VALUES ($1, $2, '65000003cccccccccccccccc', 'Front desk', 'web', 'outbound', 'success', now())`, [callId, userId])

  t.ok((await migrate(pool)).includes('0027_messaging.sql'))
  t.same(await schema(), fresh, 'the same columns and indexes as a fresh database')
  t.same((await pool.query('SELECT id FROM calls')).rows, [{ id: callId }])
  await pool.query(`INSERT INTO messages (id, user_id, call_id, origin, channel, recipient, body, status)
    VALUES ('65000004cccccccccccccccc', $1, $2, 'live', 'sms', '+15105550123', 'hello', 'sent'),
           ('65000005cccccccccccccccc', $1, NULL, 'test', 'email', 'ada@example.com', 'hello', 'recorded')`, [userId, callId])
  await t.rejects(pool.query(`INSERT INTO messages (id, user_id, origin, channel, recipient, body, status)
    VALUES ('65000006cccccccccccccccc', $1, 'live', 'fax', '+15105550123', 'hello', 'sent')`, [userId]), { code: '23514' }, 'a channel it does not know')
  await t.rejects(pool.query("INSERT INTO messaging_settings (user_id, whatsapp_sender) VALUES ($1, '14155550100')", [userId]), { code: '23514' }, 'a sender that is not E.164')
  await pool.query('DELETE FROM calls WHERE id = $1', [callId])
  t.same((await pool.query('SELECT id FROM messages')).rows, [{ id: '65000005cccccccccccccccc' }], 'a deleted call\'s messages go with it')
})
