import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import type pg from 'pg'

export const MIGRATIONS_DIR = path.resolve(import.meta.dirname, '../../migrations')

// Any constant shared by every replica: the lock serialises concurrent start-ups on one database.
const MIGRATION_LOCK = 7_202_611

const FILE_NAME = /^(\d{4})_[a-z0-9_]+\.sql$/

/** Applies the pending `migrations/NNNN_name.sql` files in one transaction; answers the names applied. */
export async function migrate (pool: pg.Pool, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = (await readdir(dir)).filter((name) => FILE_NAME.test(name)).sort()
  const client = await pool.connect()
  try {
    await client.query('BEGIN')
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      name text PRIMARY KEY,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`)
    const { rows } = await client.query<{ name: string }>('SELECT name FROM schema_migrations')
    const done = new Set(rows.map((row) => row.name))
    const applied: string[] = []
    for (const name of files) {
      if (done.has(name)) continue
      try {
        await client.query(await readFile(path.join(dir, name), 'utf8'))
      } catch (err) {
        throw new Error(`migration ${name} failed: ${(err as Error).message}`, { cause: err })
      }
      await client.query('INSERT INTO schema_migrations (name) VALUES ($1)', [name])
      applied.push(name)
    }
    await client.query('COMMIT')
    return applied
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.release()
  }
}
