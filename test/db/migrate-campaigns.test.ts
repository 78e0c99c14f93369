import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0034_campaigns.sql on an install that holds calls already (docs/migrations.md).

t.test('an upgrade from before campaigns keeps each call (no campaign) and gives the schema a fresh database has', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const tables = '{calls,campaigns,campaign_contacts,campaign_dials}'
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') ORDER BY table_name, column_name)
      FROM information_schema.columns WHERE table_schema = 'public' AND table_name = ANY ($1::text[])) AS columns,
    (SELECT json_agg(pg_get_indexdef(indexrelid) || ' ' || indisvalid::text ORDER BY indexrelid::regclass::text) FROM pg_index
      WHERE indrelid = ANY ($1::regclass[])) AS indexes,
    (SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) || ' ' || convalidated::text ORDER BY conname) FROM pg_constraint
      WHERE conrelid = ANY ($1::regclass[])) AS constraints`, [tables])).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0034')
  const userId = '65000000cccccccccccccccc'
  const callId = '65000001cccccccccccccccc'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'campaigns@example.com'])
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, call_from, call_to, start_timestamp)
    VALUES ($1, $2, '65000003cccccccccccccccc', 'Front desk', 'phone', 'outbound', 'success', '+14155550100', '+14155550199', now())`, [callId, userId])

  t.ok((await migrate(pool)).includes('0034_campaigns.sql'))
  t.same((await pool.query('SELECT id, campaign_id FROM calls')).rows, [{ id: callId, campaign_id: null }], 'a stored call belongs to no campaign')
  t.same(await schema(), fresh, 'the same columns, indexes and (validated) constraints as a fresh database')

  // A contact's number is in its campaign once; deleting the account takes its campaigns along, and a call keeps going without its campaign.
  const campaignId = '65000004cccccccccccccccc'
  await pool.query(`INSERT INTO campaigns (id, user_id, agent_id, name, from_numbers, start_at, calling_hours, timezones, max_concurrent_calls, max_calls_per_minute)
    VALUES ($1, $2, '65000003cccccccccccccccc', 'C', '{+14155550100}', now(), '{}', '{UTC}', 1, 1)`, [campaignId, userId])
  const contact = (id: string) => pool.query(`INSERT INTO campaign_contacts (id, campaign_id, user_id, row_number, phone_number, timezone, due_at)
    VALUES ($1, $2, $3, 1, '+14155550199', 'UTC', now())`, [id, campaignId, userId])
  await contact('65000005cccccccccccccccc')
  await t.rejects(contact('65000006cccccccccccccccc'), { code: '23505' })
  await pool.query('UPDATE calls SET campaign_id = $1', [campaignId])
  await pool.query('DELETE FROM campaigns')
  t.same((await pool.query('SELECT campaign_id FROM calls')).rows, [{ campaign_id: null }])
})
