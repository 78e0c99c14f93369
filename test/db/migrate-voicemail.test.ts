import t from 'tap'
import { createDb, createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { loadAgentConfig } from '../../src/modules/agents/versions.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

// migrations/0036_voicemail.sql on an install that holds agents, calls and agent versions already.

t.test('an upgrade from before voicemail keeps each agent (no detection) and call (no verdict), and gives the schema a fresh database has', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') ORDER BY table_name, column_name)
      FROM information_schema.columns WHERE table_schema = 'public' AND table_name IN ('agents', 'calls')) AS columns,
    (SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) ORDER BY conname) FROM pg_constraint WHERE conrelid IN ('agents'::regclass, 'calls'::regclass)) AS constraints`)).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0036')
  const userId = '65000000eeeeeeeeeeeeeeee'
  const llmId = '65000001eeeeeeeeeeeeeeee'
  const agentId = '65000002eeeeeeeeeeeeeeee'
  const callId = '65000003eeeeeeeeeeeeeeee'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'voicemail@example.com'])
  await pool.query('INSERT INTO llm_configs (id, user_id, model) VALUES ($1, $2, $3)', [llmId, userId, 'gpt-4o-mini'])
  await pool.query(`INSERT INTO agents (id, user_id, agent_name, llm_id, voice_id, interruption_sensitivity, call_settings, widget_settings, callback_settings, version)
    VALUES ($1, $2, 'Front desk', $3, '65a0f0000000000000000001', 0.5, '{}', '{}', '{}', 1)`, [agentId, userId, llmId])
  // Version 1, as written before voicemail_settings existed (its snapshot has no such member).
  await pool.query('INSERT INTO agent_versions (user_id, agent_id, version, change, snapshot) VALUES ($1, $2, 1, \'created\', $3)', [userId, agentId, JSON.stringify({
    agent: { agent_name: 'Front desk', voice_id: '65a0f0000000000000000001', interruption_sensitivity: 0.5, call_settings: {}, data_retrieval: [], webhook_url: null, is_data_collection_active: false, is_customer_memory_active: false, callback_settings: {}, workflow: null },
    llm_id: llmId,
    llm: { model: 'gpt-4o-mini', begin_message: null, general_prompt: '', temperature: 0.7, max_tokens: null, engine: null, turn_detection: { type: 'switchboard' } },
    tools: [],
    actions: []
  })])
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, call_from, call_to, start_timestamp)
    VALUES ($1, $2, $3, 'Front desk', 'phone', 'outbound', 'started', '+14155550100', '+14155550111', now())`, [callId, userId, agentId])

  t.ok((await migrate(pool)).includes('0036_voicemail.sql'))
  t.same(await schema(), fresh, 'the same columns and constraints as a fresh database')
  t.same((await pool.query('SELECT voicemail_settings FROM agents')).rows, [{ voicemail_settings: {} }], 'the agent detects nothing (the defaults)')
  t.same((await pool.query('SELECT answered_by FROM calls')).rows, [{ answered_by: null }], 'the call has no verdict')
  // A version from before: it ran without detection, whatever the agent's settings are now.
  await pool.query('UPDATE agents SET voicemail_settings = \'{"detection":true}\'')
  t.same((await loadAgentConfig(createDb(pool), userId, agentId, 1))?.agent.voicemail_settings, {})
  await t.rejects(pool.query("UPDATE calls SET answered_by = 'robot'"), { code: '23514' }, 'only Twilio\'s AnsweredBy values')
})
