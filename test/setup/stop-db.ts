// tap `after`: drops the template, or stops and removes the embedded cluster start-db.ts made.
import { readFile, rm } from 'node:fs/promises'
import pg from 'pg'
import { stopEmbedded } from '../../src/db/embedded.ts'
import { ENV_FILE } from './db-env.ts'

const env = Object.fromEntries((await readFile(ENV_FILE, 'utf8').catch(() => ''))
  .split('\n').filter(Boolean).map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]))

if (env.SWITCHBOARD_TEST_DATA_DIR) {
  await stopEmbedded(env.SWITCHBOARD_TEST_DATA_DIR)
  await rm(env.SWITCHBOARD_TEST_DATA_DIR, { recursive: true, force: true })
} else if (env.SWITCHBOARD_TEST_SERVER) {
  const admin = new pg.Client({ connectionString: env.SWITCHBOARD_TEST_SERVER })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${env.SWITCHBOARD_TEST_TEMPLATE} WITH (FORCE)`)
  await admin.end()
}
await rm(ENV_FILE, { force: true })
