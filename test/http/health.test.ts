import { PgBoss } from 'pg-boss'
import t from 'tap'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { createDb, createPool } from '../../src/db/database.ts'
import { setup } from '../helpers/app.ts'
import { TEST_SECRETS_KEY } from '../setup/db-env.ts'

t.test('health answers the database state without a key', async (t) => {
  const { app } = await setup(t)
  const res = await app.inject({ method: 'GET', url: '/health' })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { status: 'ok', database: 'up' })
  t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/)

  const live = await app.inject({ method: 'GET', url: '/health/live' })
  t.equal(live.statusCode, 200)
})

t.test('health answers 503 while the database is unreachable, liveness stays 200', async (t) => {
  // Port 1 on loopback: nothing listens there, so every connection is refused at once.
  const url = 'postgres://nobody:nothing@127.0.0.1:1/none'
  const pool = createPool(url, 1)
  const db = createDb(pool)
  // Never started: nothing in this test sends a job.
  const boss = new PgBoss({ connectionString: url })
  const app = await buildApp(loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent', SECRETS_KEY: TEST_SECRETS_KEY }), { db, boss })
  t.teardown(async () => { await app.close(); await pool.end() })

  const res = await app.inject({ method: 'GET', url: '/health' })
  t.equal(res.statusCode, 503)
  t.same(res.json(), { status: 'degraded', database: 'down' })
  t.equal((await app.inject({ method: 'GET', url: '/health/live' })).statusCode, 200)

  // An API request needs the database too: a clear 503 to retry, not a 500 that reads like a bug.
  const api = await app.inject({ method: 'GET', url: '/v1/voice/list', headers: { 'x-api-key': `sk_${'a'.repeat(40)}` } })
  t.equal(api.statusCode, 503)
  t.equal(api.json().code, 'unavailable')
  t.ok(Number(api.headers['retry-after']) > 0)
})
