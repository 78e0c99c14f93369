// Fills an account with demo data, on the server's database (embedded or DATABASE_URL):
//   npm run seed -- --calls 100000 [--email owner@localhost]   (--help: the usage)
import { loadConfig } from '../src/config.ts'
import { createDb, createPool } from '../src/db/database.ts'
import { migrate } from '../src/db/migrate.ts'
import { openDatabase } from '../src/db/open.ts'
import { createLogger } from '../src/logger.ts'
import { readArgs, usageError } from './args.ts'
import { seedAccount, seedCalls } from './seed-data.ts'

const SEED = {
  name: 'seed',
  usage: `usage: npm run seed -- [--calls <n>] [--email <address>]

Fills an account with demo calls over the last 100 days, on the server's database (DATABASE_URL, or the
embedded one in DATA_DIR), and prints a command that reads their metrics.

  --calls <n>        how many calls to add, 1 to 100000000 (default 10000)
  --email <address>  the account to fill, made if missing (default BOOTSTRAP_EMAIL, owner@localhost)
  -h, --help         this text`
}

const { values } = readArgs(SEED, { options: { calls: { type: 'string', default: '10000' }, email: { type: 'string' } } })
const count = Number(values.calls)
if (!/^\d+$/.test(values.calls) || count < 1 || count > 100_000_000) usageError(SEED, `--calls must be a whole number from 1 to 100000000, got ${values.calls}`)

const config = loadConfig()
const { url, embedded } = await openDatabase(config, createLogger({ logLevel: 'warn' }, 2), 'shared')
const pool = createPool(url, 2)
try {
  await migrate(pool)
  const email = values.email ?? config.bootstrapEmail
  const account = await seedAccount(createDb(pool), email)
  await seedCalls(pool, account, count, (done, rate) => {
    process.stdout.write(`\r${done.toLocaleString('en')} / ${count.toLocaleString('en')} calls (${rate.toLocaleString('en')} calls/s)`)
  })
  process.stdout.write(`\nseeded ${count} calls for ${email} across ${account.agents.length} agents\n`)
  // The account's whole range (earlier seeds included), as the metrics routes take it: UTC days.
  const { rows: [range] } = await pool.query<{ from: string, to: string }>(
    `SELECT to_char(min(start_timestamp) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS from,
            to_char(max(start_timestamp) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS to
       FROM calls WHERE user_id = $1`, [account.userId])
  process.stdout.write(`calls from ${range.from} to ${range.to} (UTC days); their metrics, with an API key of ${email}:\n` +
    `  curl -H "x-api-key: $KEY" "${config.publicBaseUrl}/v1/call/general-metrics?date_from=${range.from}&date_to=${range.to}"\n`)
} finally {
  await pool.end()
  await embedded?.stop()
}
