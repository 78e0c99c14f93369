import { mkdtemp, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { setImmediate } from 'node:timers/promises'
import type pg from 'pg'
import t, { type Test } from 'tap'
import { createPool } from '../../src/db/database.ts'
import { MIGRATION_LOCK, migrate, MIGRATIONS_DIR } from '../../src/db/migrate.ts'
import { createTestDatabase, migratedBefore } from '../helpers/database.ts'

t.test('migrations applied again are a no-op, also when replicas start together', async (t) => {
  const pool = createPool(await createTestDatabase(t), 4)
  t.teardown(() => pool.end())
  // The template is migrated already: nothing is pending.
  t.same(await migrate(pool), [])
  t.same(await Promise.all([migrate(pool), migrate(pool), migrate(pool)]), [[], [], []])
  const { rows } = await pool.query('SELECT name FROM schema_migrations ORDER BY name')
  t.ok(rows.length >= 2)
  t.equal(rows[0].name, '0001_accounts.sql')
})

t.test('a fresh database gets every migration once, in order', async (t) => {
  const pool = createPool(await createTestDatabase(t), 4)
  t.teardown(() => pool.end())
  await pool.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public')
  const runs = await Promise.all([migrate(pool), migrate(pool)])
  const applied = runs.flat()
  t.same(applied, [...applied].sort(), 'in order')
  t.equal(new Set(applied).size, applied.length, 'each once')
  t.ok(applied.includes('0002_voices.sql'))
  const { rows } = await pool.query('SELECT count(*)::int AS n FROM voices')
  t.ok(rows[0].n > 0)
})

t.test('a failing migration rolls back whole and names itself', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const dir = await mkdtemp(path.join(os.tmpdir(), 'migrations-'))
  await writeFile(path.join(dir, '0001_good.sql'), 'CREATE TABLE good_one (id int)')
  await writeFile(path.join(dir, '0002_bad.sql'), 'CREATE TABLE nope (id nonexistent_type)')
  await t.rejects(migrate(pool, dir), /migration 0002_bad\.sql failed/)
  const { rows } = await pool.query("SELECT to_regclass('good_one') AS t")
  t.equal(rows[0].t, null, 'the good migration of the same run was rolled back too')
  t.ok(MIGRATIONS_DIR.endsWith('migrations'))
})

async function migrationsDir (files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'migrations-'))
  for (const [name, sql] of Object.entries(files)) await writeFile(path.join(dir, name), sql)
  return dir
}

/** A database of the test's own without the repository's schema. */
async function emptyPool (t: Test, max: number): Promise<pg.Pool> {
  const pool = createPool(await createTestDatabase(t), max)
  t.teardown(() => pool.end())
  await pool.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public')
  return pool
}

async function indexValid (pool: pg.Pool, name: string): Promise<boolean | undefined> {
  const { rows } = await pool.query('SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)', [name])
  return rows[0]?.indisvalid
}

async function recorded (pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query('SELECT name FROM schema_migrations ORDER BY name')
  return rows.map((row) => row.name)
}

t.test('a no-transaction migration builds its index concurrently, once, while replicas start together', async (t) => {
  const pool = await emptyPool(t, 4)
  const dir = await migrationsDir({
    '0001_table.sql': 'CREATE TABLE things (id int, name text); INSERT INTO things SELECT n, n::text FROM generate_series(1, 1000) n',
    '0002_index.sql': [
      '-- migrate: no-transaction',
      '-- A comment before the first step.',
      '-- migrate: step',
      'CREATE INDEX CONCURRENTLY IF NOT EXISTS things_name_idx ON things (name);',
      '-- migrate: step',
      '-- A backfill in batches, each committed.',
      'DO $$ BEGIN FOR n IN 1..3 LOOP UPDATE things SET name = name || \'x\' WHERE id % 3 = n - 1; COMMIT; END LOOP; END $$;',
      '-- migrate: step',
      'CREATE INDEX CONCURRENTLY IF NOT EXISTS things_id_idx ON things (id);'
    ].join('\n'),
    '0003_after.sql': 'ALTER TABLE things ADD COLUMN later int'
  })
  // Held until the three runs wait for it, so that two wait while the first builds the indexes: a run
  // waiting in pg_advisory_lock would hold a snapshot that CREATE INDEX CONCURRENTLY waits for, a deadlock.
  const holder = await pool.connect()
  await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK])
  const running = Promise.all([migrate(pool, dir), migrate(pool, dir), migrate(pool, dir)])
  for (;;) {
    const { rows } = await holder.query(`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ~ '^SELECT pg_(try_)?advisory_lock'`)
    if (rows[0].n === 3) break
    await setImmediate()
  }
  await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK])
  holder.release()
  const runs = await running
  t.same(runs.flat().sort(), ['0001_table.sql', '0002_index.sql', '0003_after.sql'], 'each applied once')
  t.same(await recorded(pool), ['0001_table.sql', '0002_index.sql', '0003_after.sql'])
  t.equal(await indexValid(pool, 'things_name_idx'), true)
  t.equal(await indexValid(pool, 'things_id_idx'), true)
  const { rows } = await pool.query("SELECT count(*)::int AS n FROM things WHERE name LIKE '%x'")
  t.equal(rows[0].n, 1000, 'every batch committed')
  t.same(await migrate(pool, dir), [])
})

t.test('a failed step leaves its migration unrecorded; the next run rebuilds the INVALID index and completes it', async (t) => {
  const pool = await emptyPool(t, 2)
  const dir = await migrationsDir({
    '0001_table.sql': 'CREATE TABLE codes (code text); INSERT INTO codes VALUES (\'a\'), (\'a\'), (\'b\')',
    '0002_unique.sql': [
      '-- migrate: no-transaction',
      'CREATE TABLE IF NOT EXISTS code_notes (note text);',
      '-- migrate: step',
      'CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS codes_code_idx ON codes (code);',
      '-- migrate: step',
      "INSERT INTO code_notes VALUES ('unique')"
    ].join('\n')
  })
  await t.rejects(migrate(pool, dir), /migration 0002_unique\.sql failed at step 2 of 3: could not create unique index/)
  t.same(await recorded(pool), ['0001_table.sql'], 'the transactional migration before it stays applied')
  t.equal(await indexValid(pool, 'codes_code_idx'), false, 'the failed concurrent build left an INVALID index')
  t.not((await pool.query("SELECT to_regclass('code_notes') AS t")).rows[0].t, null, 'the first step stays done')

  await pool.query("DELETE FROM codes WHERE ctid = (SELECT min(ctid) FROM codes WHERE code = 'a')")
  t.same(await migrate(pool, dir), ['0002_unique.sql'])
  t.equal(await indexValid(pool, 'codes_code_idx'), true, 'rebuilt')
  await t.rejects(pool.query("INSERT INTO codes VALUES ('b')"), /duplicate key/)
  t.same((await pool.query('SELECT note FROM code_notes')).rows, [{ note: 'unique' }], 'the last step ran once')
})

t.test('step markers without the no-transaction line are refused before anything runs', async (t) => {
  const pool = await emptyPool(t, 1)
  const dir = await migrationsDir({
    '0001_a.sql': 'CREATE TABLE a (id int)',
    '0002_b.sql': 'CREATE TABLE b (id int);\n-- migrate: step\nCREATE TABLE c (id int)'
  })
  await t.rejects(migrate(pool, dir), /migration 0002_b\.sql has steps but no "-- migrate: no-transaction" first line/)
  t.equal((await pool.query("SELECT to_regclass('a') AS t")).rows[0].t, null)
})

t.test("the repository's no-transaction migrations run again after a start that stopped before recording them", async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(pg_get_indexdef(indexrelid) || ' ' || indisvalid::text ORDER BY indexrelid::regclass::text)
      FROM pg_index WHERE indrelid = ANY ('{calls,call_daily_stats}'::regclass[])) AS indexes,
    (SELECT json_agg(conname || ' ' || pg_get_constraintdef(oid) ORDER BY conname) FROM pg_constraint WHERE conrelid = 'calls'::regclass) AS constraints,
    (SELECT attnotnull FROM pg_attribute WHERE attrelid = 'calls'::regclass AND attname = 'list_json') AS list_json_not_null`)).rows[0]
  const before = await schema()
  const again = ['0010_call_list_json.sql', '0011_call_stats_by_agent.sql', '0012_call_channel_indexes.sql']
  await pool.query('DELETE FROM schema_migrations WHERE name = ANY ($1)', [again])
  t.same(await migrate(pool), again)
  t.same(await schema(), before)
})

t.test('an upgrade from before the recording parts keeps each stored recording, and gives the schema a fresh database has', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const columns = async (): Promise<unknown> => (await pool.query(`SELECT json_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
    ORDER BY table_name, column_name) AS columns FROM information_schema.columns WHERE table_schema = 'public'`)).rows[0]
  const fresh = await columns()
  // The database as the main before recording parts left it: every migration before 0018.
  await migratedBefore(t, pool, '0018')
  const userId = '65000000aaaaaaaaaaaaaaaa'
  const callIds = ['65000001aaaaaaaaaaaaaaaa', '65000002aaaaaaaaaaaaaaaa']
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'upgrade@example.com'])
  for (const id of callIds) {
    await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, start_timestamp)
      VALUES ($1, $2, '65000003aaaaaaaaaaaaaaaa', 'Front desk', 'web', 'outbound', 'success', now())`, [id, userId])
  }
  const samples = Buffer.from(Array.from({ length: 3200 }, (_, i) => i % 251))
  const wav = Buffer.concat([Buffer.alloc(44, 7), samples])
  await pool.query('INSERT INTO call_recordings (call_id, user_id, duration_ms, data) VALUES ($1, $2, 100, $3), ($4, $2, 0, $5)',
    [callIds[0], userId, wav, callIds[1], Buffer.alloc(44)])

  t.ok((await migrate(pool)).includes('0018_recording_chunks.sql'))
  const { rows } = await pool.query(`SELECT r.call_id, r.pcm_bytes::int, string_agg(encode(c.data, 'hex'), '' ORDER BY c.offset_bytes) AS hex
    FROM call_recordings r LEFT JOIN call_recording_chunks c USING (call_id) GROUP BY r.call_id, r.pcm_bytes ORDER BY r.call_id`)
  t.same(rows, [
    { call_id: callIds[0], pcm_bytes: samples.length, hex: samples.toString('hex') },
    { call_id: callIds[1], pcm_bytes: 0, hex: null }
  ], 'the samples without their header; an empty recording stays empty')
  t.same(await columns(), fresh, 'the same columns as a fresh database')
})

t.test('an upgrade from before call latency keeps each call (latency null) and gives the schema a fresh database has; run again, it changes nothing', async (t) => {
  const pool = createPool(await createTestDatabase(t), 2)
  t.teardown(() => pool.end())
  const schema = async (): Promise<unknown> => (await pool.query(`SELECT
    (SELECT json_agg(column_name || ' ' || data_type || ' ' || is_nullable ORDER BY column_name) FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name = 'calls') AS columns,
    (SELECT json_agg(pg_get_indexdef(indexrelid) || ' ' || indisvalid::text ORDER BY indexrelid::regclass::text) FROM pg_index WHERE indrelid = 'calls'::regclass) AS indexes`)).rows[0]
  const fresh = await schema()
  await migratedBefore(t, pool, '0023')
  const userId = '65000000bbbbbbbbbbbbbbbb'
  const callId = '65000001bbbbbbbbbbbbbbbb'
  await pool.query('INSERT INTO users (id, email) VALUES ($1, $2)', [userId, 'latency@example.com'])
  await pool.query(`INSERT INTO calls (id, user_id, agent_id, agent_name, call_type, direction, call_status, start_timestamp)
    VALUES ($1, $2, '65000003bbbbbbbbbbbbbbbb', 'Front desk', 'web', 'outbound', 'success', now())`, [callId, userId])

  t.ok((await migrate(pool)).includes('0023_call_latency.sql'))
  t.same((await pool.query('SELECT id, latency FROM calls')).rows, [{ id: callId, latency: null }], 'a stored call has no timed turns')
  t.same(await schema(), fresh, 'the same columns and indexes as a fresh database')
  await pool.query("DELETE FROM schema_migrations WHERE name = '0023_call_latency.sql'")
  t.same(await migrate(pool), ['0023_call_latency.sql'], 'a start that stopped before recording it runs it again')
  t.same(await schema(), fresh)
})
