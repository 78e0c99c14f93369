// Realistic demo data for one account: agents in workspaces and customers, and N calls over 100 days,
// generated inside PostgreSQL in large batches (no rows cross the network), used by `npm run seed` and the
// benchmarks.
import { randomBytes } from 'node:crypto'
import type pg from 'pg'
import type { DB } from '../src/db/database.ts'
import { newId } from '../src/db/ids.ts'
import { insertAgent, insertLlm } from '../src/modules/agents/queries.ts'
import { AGENT_DEFAULTS, CALL_SETTINGS_DEFAULTS, CALLBACK_SETTINGS_DEFAULTS, LLM_DEFAULTS, WIDGET_SETTINGS_DEFAULTS } from '../src/modules/agents/schemas.ts'
import { createUser, findUser } from '../src/modules/users/queries.ts'

const AGENTS = ['Front desk', 'Appointment booking', 'Lead qualification', 'Customer support', 'Survey', 'Outbound reminder']
const WORKSPACES = ['Sales', 'Support', 'Operations']
const CUSTOMERS = ['Acme Dental', 'Northwind Realty', 'Globex Insurance', 'Initech Services']

export interface SeedAccount { userId: string, agents: Array<{ id: string, name: string, customerId: string | null, workspaceId: string | null }> }

/** The account (created when missing) with its agents, workspaces and customers, made once and reused. */
export async function seedAccount (db: DB, email: string): Promise<SeedAccount> {
  const user = await findUser(db, email) ?? await createUser(db, { email, name: 'Demo owner' })
  const existing = await db.selectFrom('agents').select(['id', 'agent_name', 'customer_id', 'workspace_id'])
    .where('user_id', '=', user.id).where('agent_name', 'in', AGENTS).execute()
  if (existing.length >= AGENTS.length) {
    // In the order they were made in (one transaction: created_at does not tell), as the benchmark expects.
    existing.sort((a, b) => AGENTS.indexOf(a.agent_name) - AGENTS.indexOf(b.agent_name))
    return { userId: user.id, agents: existing.map((a) => ({ id: a.id, name: a.agent_name, customerId: a.customer_id, workspaceId: a.workspace_id })) }
  }
  return await db.transaction().execute(async (trx) => {
    const workspaces = WORKSPACES.map((name) => ({ id: newId(), user_id: user.id, name }))
    await trx.insertInto('workspaces').values(workspaces).execute()
    const customers = CUSTOMERS.map((name) => ({ id: newId(), user_id: user.id, name }))
    await trx.insertInto('customers').values(customers).execute()
    const agents = []
    for (const [i, name] of AGENTS.entries()) {
      const llm = await insertLlm(trx, user.id, { ...LLM_DEFAULTS, general_prompt: `You are the ${name.toLowerCase()} agent.` })
      const row = await insertAgent(trx, user.id, {
        customer_id: i < customers.length ? customers[i].id : null,
        workspace_id: workspaces[i % workspaces.length].id,
        agent_name: name,
        llm_id: llm.id,
        voice_id: AGENT_DEFAULTS.voice_id,
        interruption_sensitivity: AGENT_DEFAULTS.interruption_sensitivity,
        call_settings: CALL_SETTINGS_DEFAULTS,
        data_retrieval: [],
        webhook_url: null,
        is_data_collection_active: false,
        widget_settings: WIDGET_SETTINGS_DEFAULTS,
        callback_settings: CALLBACK_SETTINGS_DEFAULTS
      })
      const agent = { id: row.id, name, customerId: row.customer_id, workspaceId: row.workspace_id }
      agents.push(agent)
    }
    return { userId: user.id, agents }
  })
}

const BATCH = 50_000

// One statement per batch, calls in start order over the last 100 days. random() is seeded per batch so
// that a seed of the same size looks the same.
const INSERT_BATCH = `
WITH agents AS (
  SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS a (id, name, customer_id, workspace_id, n)
), rows AS (
  SELECT i, random() AS r_agent, random() AS r_time, random() AS r_status, random() AS r_len, random() AS r_mood,
    random() AS r_dir, random() AS r_type, random() AS r_model, random() AS r_sms
  FROM generate_series($6::int, $7::int) AS i
), shaped AS (
  SELECT r.*, a.id AS agent_id, a.name AS agent_name, a.customer_id, a.workspace_id,
    -- Calls arrive over time, so their rows lie in start order as in a real account (a few seconds of jitter).
    date_trunc('milliseconds', now() - interval '100 days' * (1 - (r.i + r.r_time) / $10::float8)) AS started,
    CASE WHEN r.r_status < 0.80 THEN 'success' WHEN r.r_status < 0.95 THEN 'failed' WHEN r.r_status < 0.99 THEN 'pending' ELSE 'started' END AS status,
    CASE WHEN r.r_type < 0.75 THEN 'phone' ELSE 'web' END AS call_type,
    CASE WHEN r.r_dir < 0.55 THEN 'inbound' ELSE 'outbound' END AS direction,
    (20000 + r.r_len * 580000)::bigint AS length_ms
  FROM rows r JOIN agents a ON a.n = 1 + floor(r.r_agent * $8)::int
), calls_out AS (
  SELECT s.*,
    CASE WHEN status IN ('success', 'pending') THEN length_ms END AS duration,
    CASE WHEN status = 'success' THEN CASE WHEN r_mood < 0.55 THEN 'positive' WHEN r_mood < 0.80 THEN 'neutral' ELSE 'negative' END END AS mood
  FROM shaped s
)
INSERT INTO calls (id, user_id, agent_id, agent_name, customer_id, workspace_id, call_type, direction, call_status,
  call_from, call_to, start_timestamp, end_timestamp, duration_ms, recording_url, disconnection_reason, sentiment,
  sentiment_explanation, call_summary, task_achieved, transcription, phone_call_credits, web_call_credits,
  text_message_credits, token_usage, input_tokens, output_tokens, sms_count, custom_data)
SELECT
  lpad(to_hex(extract(epoch FROM started)::int), 8, '0') || substr(md5($9 || i::text), 1, 16),
  $1, agent_id, agent_name, customer_id, workspace_id, call_type, direction, status,
  CASE WHEN call_type = 'web' THEN NULL WHEN direction = 'inbound' THEN '+1415555' || lpad((i % 10000)::text, 4, '0') ELSE '+14155550100' END,
  CASE WHEN call_type = 'web' THEN NULL WHEN direction = 'inbound' THEN '+14155550100' ELSE '+1415555' || lpad((i % 10000)::text, 4, '0') END,
  started,
  CASE WHEN status = 'started' THEN NULL ELSE started + coalesce(duration, 0) * interval '1 millisecond' END,
  duration,
  CASE WHEN duration IS NOT NULL THEN 'https://recordings.example.com/' || i || '.mp3' END,
  CASE status WHEN 'started' THEN NULL WHEN 'failed' THEN (ARRAY['no_answer', 'busy', 'invalid_number', 'runtime_error'])[1 + (i % 4)]
    ELSE (ARRAY['user_hangup', 'agent_hangup', 'max_duration_reached'])[1 + (i % 3)] END,
  mood,
  CASE mood WHEN 'positive' THEN 'The caller thanked the agent and agreed to the next step.'
    WHEN 'negative' THEN 'The caller was unhappy with the wait and hung up annoyed.'
    WHEN 'neutral' THEN 'The caller asked for information without strong feelings.' END,
  CASE WHEN status = 'success' THEN 'The caller spoke with ' || agent_name || ' about an appointment; ' ||
    CASE WHEN r_mood < 0.7 THEN 'a time was agreed.' ELSE 'no decision was made.' END END,
  CASE WHEN status = 'success' THEN r_mood < 0.7 END,
  CASE WHEN duration IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(
    jsonb_build_object('speaker', 'agent', 'content', 'Hello, this is ' || agent_name || '. How can I help?', 'timestamp', (extract(epoch FROM started) * 1000)::bigint),
    jsonb_build_object('speaker', 'user', 'content', 'Hi, I would like to book an appointment for next week.', 'timestamp', (extract(epoch FROM started) * 1000)::bigint + 4000),
    jsonb_build_object('speaker', 'agent', 'content', 'Of course. Does Tuesday at ten work for you?', 'timestamp', (extract(epoch FROM started) * 1000)::bigint + 9000),
    jsonb_build_object('speaker', 'user', 'content', CASE WHEN r_mood < 0.7 THEN 'Yes, that works, thank you.' ELSE 'I am not sure yet, I will call back.' END, 'timestamp', (extract(epoch FROM started) * 1000)::bigint + 14000)
  ) END,
  CASE WHEN call_type = 'phone' AND duration IS NOT NULL THEN ceil(duration / 60000.0)::int * 10 ELSE 0 END,
  CASE WHEN call_type = 'web' AND duration IS NOT NULL THEN ceil(duration / 60000.0)::int * 5 ELSE 0 END,
  CASE WHEN status = 'success' AND r_sms < 0.1 THEN 2 ELSE 0 END,
  CASE WHEN duration IS NULL THEN '{}'::jsonb
    WHEN r_model < 0.2 THEN jsonb_build_object('gpt-4o-mini', jsonb_build_object('input', 400 + (r_len * 3000)::int, 'output', 80 + (r_len * 700)::int),
                                              'gpt-4o', jsonb_build_object('input', 150 + (r_len * 600)::int, 'output', 40 + (r_len * 200)::int))
    ELSE jsonb_build_object('gpt-4o-mini', jsonb_build_object('input', 400 + (r_len * 3000)::int, 'output', 80 + (r_len * 700)::int)) END,
  CASE WHEN duration IS NULL THEN 0 WHEN r_model < 0.2 THEN 550 + (r_len * 3000)::int + (r_len * 600)::int ELSE 400 + (r_len * 3000)::int END,
  CASE WHEN duration IS NULL THEN 0 WHEN r_model < 0.2 THEN 120 + (r_len * 700)::int + (r_len * 200)::int ELSE 80 + (r_len * 700)::int END,
  CASE WHEN status = 'success' AND r_sms < 0.1 THEN 1 ELSE 0 END,
  jsonb_build_object('crm_id', 'C-' || i)
FROM calls_out
ORDER BY i`

/**
 * Adds `count` calls to the account. When the connection may, the rollup trigger is switched off for the
 * load and the account's rollup rebuilt once at the end, which is several times faster than row by row.
 */
export async function seedCalls (pool: pg.Pool, account: SeedAccount, count: number, progress: (done: number, rowsPerSecond: number) => void = () => {}): Promise<void> {
  const client = await pool.connect()
  try {
    const bulk = await client.query("SET session_replication_role = 'replica'").then(() => true, () => false)
    const salt = randomBytes(8).toString('hex')
    const started = performance.now()
    const agents = account.agents
    for (let from = 0; from < count; from += BATCH) {
      const to = Math.min(count, from + BATCH) - 1
      await client.query('BEGIN')
      await client.query('SELECT setseed($1)', [(from / count) * 0.999])
      await client.query(INSERT_BATCH, [account.userId, agents.map((a) => a.id), agents.map((a) => a.name),
        agents.map((a) => a.customerId), agents.map((a) => a.workspaceId), from, to, agents.length, salt, count])
      await client.query('COMMIT')
      progress(to + 1, Math.round((to + 1) / ((performance.now() - started) / 1000)))
    }
    if (bulk) {
      await client.query("SET session_replication_role = 'origin'")
      await rebuildRollup(client, account.userId)
    }
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.release()
  }
}

/** Recomputes an account's daily rollup from its calls (after a load with the trigger off). */
async function rebuildRollup (client: pg.PoolClient, userId: string): Promise<void> {
  await client.query('BEGIN')
  // Holds off calls being written meanwhile, whose trigger would otherwise count them twice.
  await client.query('LOCK TABLE calls IN SHARE MODE')
  await client.query('DELETE FROM call_daily_agent_stats WHERE user_id = $1', [userId])
  await client.query('DELETE FROM call_daily_stats WHERE user_id = $1', [userId])
  await client.query(`
    INSERT INTO call_daily_agent_stats
    SELECT user_id, (start_timestamp AT TIME ZONE 'UTC')::date, agent_id, coalesce(customer_id, ''), coalesce(workspace_id, ''),
      count(*), count(duration_ms), coalesce(sum(duration_ms), 0), sum(phone_call_credits), sum(web_call_credits),
      sum(text_message_credits), sum(call_forwarding_credits), sum(input_tokens), sum(output_tokens)
    FROM calls WHERE user_id = $1
    GROUP BY 1, 2, 3, 4, 5`, [userId])
  await client.query(`
    INSERT INTO call_daily_stats
    SELECT user_id, (start_timestamp AT TIME ZONE 'UTC')::date, agent_id, coalesce(customer_id, ''), coalesce(workspace_id, ''),
      direction, call_type, call_status, coalesce(sentiment, ''), count(*), count(duration_ms), coalesce(sum(duration_ms), 0)
    FROM calls WHERE user_id = $1
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9`, [userId])
  await client.query('COMMIT')
}

/**
 * The benchmarks' account of `email` with at least `count` calls: what is missing is seeded (with progress on
 * stdout) and kept in the bench database for the next run, then the calls' statistics are refreshed.
 */
export async function seedBenchCalls (db: DB, pool: pg.Pool, email: string, count: number): Promise<SeedAccount> {
  const account = await seedAccount(db, email)
  const { n: existing } = await db.selectFrom('calls').select((eb) => eb.fn.countAll<number>().as('n')).where('user_id', '=', account.userId).executeTakeFirstOrThrow()
  if (existing < count) {
    process.stdout.write(`seeding ${count - existing} calls (once; kept in the bench database)\n`)
    await seedCalls(pool, account, count - existing, (done, rate) => process.stdout.write(`\r  ${done.toLocaleString('en')} calls, ${rate.toLocaleString('en')}/s`))
    process.stdout.write('\n')
    await pool.query('VACUUM ANALYZE calls')
    await pool.query('VACUUM ANALYZE call_daily_stats')
  }
  return account
}
