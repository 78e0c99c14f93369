import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// Migration 0032 (workflows, agent versions, the version and path of calls, number pins): a database of the release
// before it, upgraded, has the whole schema a fresh database has, and keeps its agents, calls and numbers.

t.test('an upgrade from before workflows and versions keeps agents, calls and numbers, and gives the whole schema of a fresh database', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') ORDER BY table_name, column_name)
      FROM information_schema.columns WHERE table_schema = 'public') AS columns,
    (SELECT json_agg(indexdef ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'public') AS indexes,
    (SELECT json_agg(conrelid::regclass || ' ' || pg_get_constraintdef(oid) ORDER BY conrelid::regclass::text, pg_get_constraintdef(oid))
      FROM pg_constraint WHERE connamespace = 'public'::regnamespace) AS constraints`)).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0032')
  const userId = '65000000eeeeeeeeeeeeeeee'
  const llmId = '65000001eeeeeeeeeeeeeeee'
  const agentId = '65000002eeeeeeeeeeeeeeee'
  const callId = '65000003eeeeeeeeeeeeeeee'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'versions@example.com'])
  await pool.query('INSERT INTO llm_configs (id, user_id, model) VALUES ($1, $2, $3)', [llmId, userId, 'gpt-4o-mini'])
  await pool.query(`INSERT INTO agents (id, user_id, agent_name, llm_id, voice_id, interruption_sensitivity, call_settings, widget_settings, callback_settings)
    VALUES ($1, $2, 'Front desk', $3, '65a0f0000000000000000001', 0.5, '{}', '{}', '{}')`, [agentId, userId, llmId])
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, start_timestamp)
    VALUES ($1, $2, $3, 'Front desk', 'web', 'inbound', 'success', now())`, [callId, userId, agentId])

  const ran = await migrate(pool)
  t.ok(ran.includes('0032_workflows_versions.sql'))
  t.same((await pool.query('SELECT workflow, version FROM agents')).rows, [{ workflow: null, version: 0 }], 'the agent has no workflow and no version yet (the first is written on use)')
  t.same((await pool.query('SELECT agent_version, workflow FROM calls')).rows, [{ agent_version: null, workflow: null }], 'an older call ran no known version')
  t.same(await schema(), fresh, 'the same columns, indexes and constraints as a fresh database')
  await t.rejects(pool.query('INSERT INTO agent_versions (agent_id, user_id, version, snapshot, change) VALUES ($1, $2, 0, \'{}\', \'created\')', [agentId, userId]), { code: '23514' }, 'versions count from 1')
  await pool.query('INSERT INTO agent_versions (agent_id, user_id, version, snapshot, change) VALUES ($1, $2, 1, \'{}\', \'created\')', [agentId, userId])
  await t.rejects(pool.query('INSERT INTO agent_versions (agent_id, user_id, version, snapshot, change) VALUES ($1, $2, 1, \'{}\', \'agent\')', [agentId, userId]), { code: '23505' }, 'one row per version')
  await pool.query('DELETE FROM agents WHERE id = $1', [agentId])
  t.same((await pool.query('SELECT count(*)::int AS n FROM agent_versions')).rows, [{ n: 0 }], 'an agent\'s versions go with it')
})
