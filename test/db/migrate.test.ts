import { mkdtemp, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { createPool } from '../../src/db/database.ts'
import { migrate, MIGRATIONS_DIR } from '../../src/db/migrate.ts'
import { createTestDatabase } from '../helpers/database.ts'

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
