import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

t.test('an upgrade from before agent tests keeps each agent (no tests, no runs) and gives the schema a fresh database has', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') ORDER BY table_name, column_name)
      FROM information_schema.columns WHERE table_schema = 'public' AND table_name LIKE 'agent_test%') AS columns,
    (SELECT json_agg(indexdef ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'public' AND tablename LIKE 'agent_test%') AS indexes`)).rows[0]
  const fresh = await schema()
  t.ok((fresh as { columns: unknown[] }).columns.length > 0, 'a fresh database has the tables')
  await migratedBefore(t, pool, '0033')
  const userId = '65000000dddddddddddddddd'
  const llmId = '65000001dddddddddddddddd'
  const agentId = '65000002dddddddddddddddd'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'tests@example.com'])
  await pool.query('INSERT INTO llm_configs (id, user_id, model) VALUES ($1, $2, $3)', [llmId, userId, 'gpt-4o-mini'])
  await pool.query(`INSERT INTO agents (id, user_id, agent_name, llm_id, voice_id, interruption_sensitivity, call_settings, widget_settings, callback_settings)
    VALUES ($1, $2, 'Front desk', $3, '65a0f0000000000000000001', 0.5, '{}', '{}', '{}')`, [agentId, userId, llmId])

  t.ok((await migrate(pool)).includes('0033_agent_tests.sql'))
  t.same((await pool.query('SELECT id, agent_name FROM agents')).rows, [{ id: agentId, agent_name: 'Front desk' }], 'the agent stays')
  t.same((await pool.query('SELECT * FROM agent_tests')).rows, [], 'no tests yet')
  t.same((await pool.query('SELECT * FROM agent_test_runs')).rows, [], 'no runs yet')
  t.same(await schema(), fresh, 'the same tables and indexes as a fresh database')

  // A result belongs to its run (one per scenario), and a run to its agent: removing the agent removes both.
  await pool.query("INSERT INTO agent_test_runs (id, user_id, agent_id, agent_version, engine) VALUES ('r1', $1, $2, 1, 'simulator')", [userId, agentId])
  const result = "INSERT INTO agent_test_results (run_id, position, scenario_id, scenario_name, status, expectations, transcript, caller_turns, answer_ms, duration_ms) VALUES ('r1', $1, 's1', 'one', 'passed', '[]', '[]', 1, '[]', 5)"
  await pool.query(result, [0])
  await t.rejects(pool.query(result, [1]), { code: '23505' }, 'one result per scenario per run')
  await pool.query('DELETE FROM agents WHERE id = $1', [agentId])
  t.same((await pool.query('SELECT count(*)::int AS n FROM agent_test_results')).rows, [{ n: 0 }])
})
