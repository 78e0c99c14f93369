import type { FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import { buildApp, type Deps } from '../../src/app.ts'
import { loadConfig, type Config } from '../../src/config.ts'
import { createDb, createPool, type DB } from '../../src/db/database.ts'
import { createApiKey, createUser, type User } from '../../src/modules/users/queries.ts'
import { createTestDatabase } from './database.ts'

export interface TestContext {
  app: FastifyInstance
  db: DB
  config: Config
  url: string
}

/** The app on a database of the test's own, configured as a server started with `env` would be. */
export async function setup (t: Test, env: Record<string, string> = {}, deps: Omit<Deps, 'db'> = {}): Promise<TestContext> {
  const url = await createTestDatabase(t)
  const config = loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent', ...env })
  const pool = createPool(url, 5)
  const db = createDb(pool)
  const app = await buildApp(config, { ...deps, db })
  t.teardown(async () => {
    await app.close()
    await pool.end()
  })
  return { app, db, config, url }
}

export interface Account { user: User, key: string, headers: { 'x-api-key': string } }

let accounts = 0

/** A user with one API key, ready to call the API as that account. */
export async function createAccount (db: DB, email = `user${++accounts}-${Date.now()}@example.com`): Promise<Account> {
  const user = await createUser(db, { email })
  const { key } = await createApiKey(db, user.id)
  return { user, key, headers: { 'x-api-key': key } }
}
