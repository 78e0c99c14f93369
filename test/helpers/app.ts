import type { FastifyInstance } from 'fastify'
import { PgBoss } from 'pg-boss'
import type { Test } from 'tap'
import { buildApp, type Deps } from '../../src/app.ts'
import { loadConfig, type Config } from '../../src/config.ts'
import { createDb, createPool, type DB } from '../../src/db/database.ts'
import { prepareSecrets } from '../../src/db/stored-secrets.ts'
import { createQueues } from '../../src/jobs/queues.ts'
import { createLogger } from '../../src/logger.ts'
import { startWorkers } from '../../src/workers.ts'
import type { Analyser } from '../../src/modules/runtime/analysis/types.ts'
import { createApiKey, createUser, type User } from '../../src/modules/users/queries.ts'
import { TEST_SECRETS_KEY } from '../setup/db-env.ts'
import { createTestDatabase } from './database.ts'

export interface TestContext {
  app: FastifyInstance
  db: DB
  boss: PgBoss
  config: Config
  url: string
}

export interface SetupOptions extends Partial<Omit<Deps, 'db' | 'boss'>> {
  /** The analyser the workers use; default: the one the configuration names. */
  analyser?: Analyser
  /** Run the background workers in this process too, as ROLE=all does. */
  workers?: boolean
  /** The campaigns' clock in the workers (a fake one for calling hours). */
  now?: () => Date
}

/** The app on a database of the test's own, configured as a server started with `env` would be. */
export async function setup (t: Test, env: Record<string, string> = {}, options: SetupOptions = {}): Promise<TestContext> {
  const { workers = false, now, ...deps } = options
  const url = await createTestDatabase(t)
  // Rate limits off unless a test sets them: the tests of one file share one address and often one key.
  const config = loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent', SECRETS_KEY: TEST_SECRETS_KEY, RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_PER_ADDRESS: '0', ...env })
  const pool = createPool(url, env.DATABASE_POOL_SIZE === undefined ? 5 : config.databasePoolSize, config.databasePool)
  const db = createDb(pool)
  await prepareSecrets(config, db)
  const boss = new PgBoss({ connectionString: url, useListenNotify: true, supervise: false, schedule: false, max: 3 })
  // As main.ts does: without a listener an error of the queue's connections is thrown out of the test file. Once the
  // test ends, its database is dropped WITH (FORCE), which terminates any connection still closing (57P01).
  let stopping = false
  boss.on('error', (err) => { if (!stopping) t.error(err, 'job queue error') })
  await boss.start()
  await createQueues(boss, config)
  const log = createLogger(config)
  const stopWorkers = workers ? await startWorkers(boss, { db, config, log, analyser: deps.analyser, mailer: deps.mailer, now }) : undefined
  const app = await buildApp(config, { ...deps, db, boss, logger: deps.logger ?? log })
  t.teardown(async () => {
    stopping = true
    await app.close()
    await boss.stop({ graceful: false })
    await stopWorkers?.()
    await pool.end()
  })
  return { app, db, boss, config, url }
}

export interface Account { user: User, key: string, headers: { 'x-api-key': string } }

let accounts = 0

/** A user with one API key, ready to call the API as that account. */
export async function createAccount (db: DB, email = `user${++accounts}-${Date.now()}@example.com`): Promise<Account> {
  const user = await createUser(db, { email })
  const { key } = await createApiKey(db, user.id)
  return { user, key, headers: { 'x-api-key': key } }
}
