// tap `before`: prepares one PostgreSQL for the whole run and a migrated template database that each test
// file copies. TEST_DATABASE_URL names a server to use; otherwise an embedded cluster is started (in
// /dev/shm where there is one: it starts faster there) and left running, detached, until stop-db.ts.
import { mkdir, mkdtemp, stat, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { PgBoss } from 'pg-boss'
import { openEmbedded } from '../../src/db/embedded.ts'
import { migrate } from '../../src/db/migrate.ts'
import { ENV_FILE, TEST_SECRETS_KEY } from './db-env.ts'

async function clusterDir (): Promise<string> {
  const shm = await stat('/dev/shm').then((s) => s.isDirectory(), () => false)
  return await mkdtemp(path.join(shm ? '/dev/shm' : os.tmpdir(), 'switchboard-test-'))
}

function withDatabase (url: string, database: string): string {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

const started = Date.now()
let serverUrl = process.env.TEST_DATABASE_URL
let dataDir = ''
if (serverUrl === undefined || serverUrl === '') {
  dataDir = await clusterDir()
  const embedded = await openEmbedded(dataDir, { mode: 'shared', database: 'postgres' })
  serverUrl = embedded.url
}

const template = `switchboard_template_${process.pid}`
const admin = new pg.Client({ connectionString: serverUrl })
await admin.connect()
await admin.query(`DROP DATABASE IF EXISTS ${template}`)
await admin.query(`CREATE DATABASE ${template}`)
await admin.end()

const templateUrl = withDatabase(serverUrl, template)
const pool = new pg.Pool({ connectionString: templateUrl, max: 1 })
await migrate(pool)
await pool.end()
// pg-boss installs its schema on first start: done once here instead of in every test database.
const boss = new PgBoss({ connectionString: templateUrl, supervise: false, schedule: false })
await boss.start()
await boss.stop({ graceful: false })

await mkdir(path.dirname(ENV_FILE), { recursive: true })
await writeFile(ENV_FILE, [
  `SWITCHBOARD_TEST_SERVER=${serverUrl}`,
  `SWITCHBOARD_TEST_TEMPLATE=${template}`,
  `SWITCHBOARD_TEST_DATA_DIR=${dataDir}`,
  `SECRETS_KEY=${TEST_SECRETS_KEY}`
].join('\n') + '\n')
console.log(`# test database ready in ${Date.now() - started} ms (${dataDir === '' ? 'TEST_DATABASE_URL' : `embedded in ${dataDir}`})`)
