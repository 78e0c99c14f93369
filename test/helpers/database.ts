import { randomBytes } from 'node:crypto'
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import type { Test } from 'tap'
import { migrate, MIGRATIONS_DIR } from '../../src/db/migrate.ts'

function env (name: string): string {
  const value = process.env[name]
  if (value === undefined || value === '') {
    throw new Error(`${name} is not set: run the tests with \`npm test\` (tap's before script prepares the database)`)
  }
  return value
}

/** The server the run uses, with another database name. */
export function databaseUrl (database: string): string {
  const url = new URL(env('SWITCHBOARD_TEST_SERVER'))
  url.pathname = `/${database}`
  return url.toString()
}

async function admin<T> (work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: env('SWITCHBOARD_TEST_SERVER') })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

/**
 * A database of this test's own, copied from the migrated template. It is dropped when the test passes
 * and kept (its name printed) when it fails, to look at.
 */
export async function createTestDatabase (t: Test): Promise<string> {
  const name = `sb_test_${randomBytes(6).toString('hex')}`
  const template = env('SWITCHBOARD_TEST_TEMPLATE')
  await admin(async (client) => {
    // Copies from one template cannot overlap; a concurrent test file may hold it for a moment.
    for (let attempt = 1; ; attempt++) {
      try {
        await client.query(`CREATE DATABASE ${name} TEMPLATE ${template}`)
        return
      } catch (err) {
        if (attempt >= 50 || !/being accessed by other users/.test((err as Error).message)) throw err
        await new Promise((resolve) => setTimeout(resolve, 50 * attempt))
      }
    }
  })
  t.teardown(async () => {
    if (t.passing()) {
      await admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
    } else {
      t.comment(`kept database ${name} of the failed test`)
    }
  })
  return databaseUrl(name)
}

/** The database as a release before migration `first` left it ('0030'): the schema dropped, every earlier migration run. */
export async function migratedBefore (t: Test, pool: pg.Pool, first: string): Promise<void> {
  await pool.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public; DROP EXTENSION IF EXISTS btree_gist')
  const before = await mkdtemp(path.join(os.tmpdir(), 'migrations-'))
  t.teardown(() => rm(before, { recursive: true, force: true }))
  for (const name of (await readdir(MIGRATIONS_DIR)).filter((name) => name < first)) await copyFile(path.join(MIGRATIONS_DIR, name), path.join(before, name))
  await migrate(pool, before)
}
