// Manages users and API keys against the server's database, embedded or not:
//   npm run cli -- user create --email a@example.com [--name "Ada"] [--language de]
//   npm run cli -- user list
//   npm run cli -- key create --user <id|email> [--name ci]
//   npm run cli -- key list --user <id|email>
//   npm run cli -- key revoke <prefix|key>
import { parseArgs } from 'node:util'
import { loadConfig } from '../src/config.ts'
import { createDb, createPool, type DB } from '../src/db/database.ts'
import { migrate } from '../src/db/migrate.ts'
import { openDatabase } from '../src/db/open.ts'
import { HttpError } from '../src/http/errors.ts'
import { createLogger } from '../src/logger.ts'
import { createApiKey, createUser, findUser, listApiKeys, revokeApiKey, type User } from '../src/modules/users/queries.ts'

const USAGE = `usage:
  cli user create --email <address> [--name <name>] [--language <en|de|…>]
  cli user list
  cli key create --user <id|email> [--name <label>]
  cli key list --user <id|email>
  cli key revoke <prefix|key>`

class UsageError extends Error {}

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  allowPositionals: true,
  options: { email: { type: 'string' }, name: { type: 'string' }, language: { type: 'string' }, user: { type: 'string' } }
})

function required (value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`--${flag} is required`)
  return value
}

async function userOf (db: DB, ref: string): Promise<User> {
  const user = await findUser(db, ref)
  if (user === undefined) throw new UsageError(`no user ${ref}`)
  return user
}

const iso = (date: Date | null) => date?.toISOString() ?? '-'

async function command (db: DB): Promise<string> {
  const [noun, verb, arg] = positionals
  switch (`${noun} ${verb}`) {
    case 'user create': {
      const email = required(values.email, 'email')
      if (!/^[^\s@]+@[^\s@]+$/.test(email)) throw new UsageError(`--email ${email} is not an e-mail address`)
      if (values.language !== undefined && !/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/.test(values.language)) {
        throw new UsageError(`--language ${values.language} is not a language tag such as en or de`)
      }
      const user = await createUser(db, { email, name: values.name, language: values.language })
      return `created user ${user.id} ${user.email}`
    }
    case 'user list': {
      const users = await db.selectFrom('users').selectAll().orderBy('created_at').execute()
      return users.map((u) => `${u.id}  ${u.email}  ${u.language}  ${iso(u.created_at)}`).join('\n') || 'no users'
    }
    case 'key create': {
      const user = await userOf(db, required(values.user, 'user'))
      const key = await createApiKey(db, user.id, { name: values.name })
      return `${key.key}\n(shown only now; ${key.prefix}… is what key list shows)`
    }
    case 'key list': {
      const user = await userOf(db, required(values.user, 'user'))
      const keys = await listApiKeys(db, user.id)
      const rows = keys.map((k) => `${k.prefix}…  ${k.revoked_at === null ? 'active ' : 'revoked'}  created ${iso(k.created_at)}  last used ${iso(k.last_used_at)}  ${k.name}`)
      return rows.join('\n') || 'no keys'
    }
    case 'key revoke': {
      // Taken as key list prints it (`sk_AbC12345…`) or without the ellipsis.
      const key = await revokeApiKey(db, required(arg, 'prefix').replace(/(…|\.\.\.)$/, ''))
      return `revoked key ${key.id}`
    }
    default:
      throw new UsageError(USAGE)
  }
}

async function main (): Promise<number> {
  const config = loadConfig()
  const log = createLogger({ logLevel: 'warn' }, 2)
  const { url, embedded } = await openDatabase(config, log, 'shared')
  const pool = createPool(url, 2)
  const db = createDb(pool)
  try {
    await migrate(pool)
    process.stdout.write(await command(db) + '\n')
    return 0
  } catch (err) {
    if (!(err instanceof UsageError || err instanceof HttpError)) throw err
    process.stderr.write(err.message + '\n')
    return err instanceof UsageError ? 2 : 1
  } finally {
    // pool.end(), not db.destroy(): Kysely ends the pool only if it ran a query itself.
    await pool.end()
    await embedded?.stop()
  }
}

process.exitCode = await main().catch((err: unknown) => {
  process.stderr.write(`cli failed: ${err instanceof Error ? err.message : String(err)}\n`)
  return 1
})
