// Applies pending migrations to the configured database (DATABASE_URL, or the embedded one in DATA_DIR).
import { loadConfig } from '../src/config.ts'
import { createPool } from '../src/db/database.ts'
import { migrate } from '../src/db/migrate.ts'
import { openDatabase } from '../src/db/open.ts'
import { createLogger } from '../src/logger.ts'
import { readArgs } from './args.ts'

readArgs({
  name: 'migrate',
  usage: `usage: npm run migrate

Applies the pending migrations (migrations/*.sql) to the server's database: DATABASE_URL, or the embedded
one in DATA_DIR. The server does the same at every start; this is for deployments that migrate first.`
}, {})

const config = loadConfig()
const log = createLogger(config)
const { url, embedded } = await openDatabase(config, log, 'shared')
const pool = createPool(url, 1)
try {
  const applied = await migrate(pool)
  log.info(applied.length === 0 ? 'no pending migrations' : `applied ${applied.join(', ')}`)
} finally {
  await pool.end()
  await embedded?.stop()
}
