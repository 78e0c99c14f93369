import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

t.test('an upgrade from before widget keys keeps each agent (no key) and gives the schema a fresh database has', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') ORDER BY table_name, column_name)
      FROM information_schema.columns WHERE table_schema = 'public' AND table_name LIKE 'widget_%') AS columns,
    (SELECT json_agg(indexdef ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'public' AND tablename LIKE 'widget_%') AS indexes`)).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0025')
  const userId = '65000000cccccccccccccccc'
  const llmId = '65000001cccccccccccccccc'
  const agentId = '65000002cccccccccccccccc'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'widget@example.com'])
  await pool.query('INSERT INTO llm_configs (id, user_id, model) VALUES ($1, $2, $3)', [llmId, userId, 'gpt-4o-mini'])
  await pool.query(`INSERT INTO agents (id, user_id, agent_name, llm_id, voice_id, interruption_sensitivity, call_settings, widget_settings, callback_settings)
    VALUES ($1, $2, 'Front desk', $3, '65a0f0000000000000000001', 0.5, '{}', '{"enabled": true}', '{}')`, [agentId, userId, llmId])

  t.ok((await migrate(pool)).includes('0025_widget_keys.sql'))
  t.same((await pool.query('SELECT id, widget_settings FROM agents')).rows, [{ id: agentId, widget_settings: { enabled: true } }], 'the agent and its settings stay')
  t.same((await pool.query('SELECT * FROM widget_keys')).rows, [], 'no agent has a key yet')
  t.same(await schema(), fresh, 'the same tables and indexes as a fresh database')
})
