import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type pg from 'pg'

export const MIGRATIONS_DIR = path.resolve(import.meta.dirname, '../../migrations')

// Any constant shared by every replica: the lock serialises concurrent start-ups on one database.
export const MIGRATION_LOCK = 7_202_611

const FILE_NAME = /^(\d{4})_[a-z0-9_]+\.sql$/

// How a migration declares that it runs outside a transaction, step by step (docs/migrations.md).
const NO_TRANSACTION = '-- migrate: no-transaction'
const STEP = /^-- migrate: step[ \t]*\r?$/m
// A concurrent index build that a failed run may have left INVALID under its name.
const CONCURRENT_INDEX = /^CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+("[^"]+"|\w+)/i

interface Migration {
  name: string
  /** Applied with the other pending transactional migrations in one transaction. */
  transactional: boolean
  /** What is sent, each as one query: the whole file, or each step of a no-transaction migration. */
  steps: string[]
}

/** The text from its first statement on: '' for comments alone. */
function statements (sql: string): string {
  return sql.replace(/^(?:\s*--[^\n]*(?:\n|$))*\s*/, '')
}

function parse (name: string, sql: string): Migration {
  if (sql.split('\n', 1)[0].trim() !== NO_TRANSACTION) {
    if (STEP.test(sql)) throw new Error(`migration ${name} has steps but no "${NO_TRANSACTION}" first line`)
    return { name, transactional: true, steps: [sql] }
  }
  return { name, transactional: false, steps: sql.split(STEP).filter((step) => statements(step) !== '') }
}

/**
 * Takes the session-level lock, polling: a session blocked in pg_advisory_lock holds a snapshot, which a
 * CREATE INDEX CONCURRENTLY of the session holding the lock would wait for, a deadlock.
 */
async function lock (client: pg.PoolClient): Promise<void> {
  for (let wait = 20; ; wait = Math.min(wait * 2, 1000)) {
    const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [MIGRATION_LOCK])
    if (rows[0].locked) return
    await sleep(wait)
  }
}

/** A concurrent build that failed leaves an INVALID index, which IF NOT EXISTS would keep: drop it to build again. */
async function dropInvalidIndex (client: pg.PoolClient, step: string): Promise<void> {
  const index = CONCURRENT_INDEX.exec(statements(step))?.[1]
  if (index === undefined) return
  const { rows } = await client.query<{ valid: boolean }>(
    'SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass($1)', [index])
  if (rows[0]?.valid === false) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index}`)
}

async function apply (client: pg.PoolClient, migrations: Migration[]): Promise<string[]> {
  await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
    name text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`)
  const { rows } = await client.query<{ name: string }>('SELECT name FROM schema_migrations')
  const done = new Set(rows.map((row) => row.name))
  const applied: string[] = []
  let inTransaction = false
  for (const { name, transactional, steps } of migrations) {
    if (done.has(name)) continue
    // Consecutive transactional migrations share a transaction; a no-transaction one starts after they commit.
    if (transactional !== inTransaction) {
      await client.query(transactional ? 'BEGIN' : 'COMMIT')
      inTransaction = transactional
    }
    for (const [i, step] of steps.entries()) {
      try {
        if (!transactional) await dropInvalidIndex(client, step)
        await client.query(step)
      } catch (err) {
        const where = transactional ? '' : ` at step ${i + 1} of ${steps.length}`
        throw new Error(`migration ${name} failed${where}: ${(err as Error).message}`, { cause: err })
      }
    }
    // A no-transaction migration is recorded once all its steps are done; until then each run repeats them.
    await client.query('INSERT INTO schema_migrations (name) VALUES ($1)', [name])
    applied.push(name)
  }
  if (inTransaction) await client.query('COMMIT')
  return applied
}

/**
 * Applies the pending `migrations/NNNN_name.sql` files in order, on one connection holding the migration
 * lock; answers the names applied. Transactional migrations of a run commit together; a no-transaction one
 * runs its steps each on its own (docs/migrations.md).
 */
export async function migrate (pool: pg.Pool, dir = MIGRATIONS_DIR): Promise<string[]> {
  const names = (await readdir(dir)).filter((name) => FILE_NAME.test(name)).sort()
  const migrations = await Promise.all(names.map(async (name) => parse(name, await readFile(path.join(dir, name), 'utf8'))))
  const client = await pool.connect()
  try {
    await lock(client)
    const applied = await apply(client, migrations)
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK])
    client.release()
    return applied
  } catch (err) {
    // Closing the connection rolls back an open transaction and frees the lock, whatever state it is in.
    client.release(true)
    throw err
  }
}
