// Manages users and API keys against the server's database, embedded or not:
//   npm run cli -- user create --email a@example.com [--name "Ada"] [--language de]
//   npm run cli -- user list
//   npm run cli -- user login-link --email a@example.com
//   npm run cli -- workspace invite-link --workspace <id> --email a@example.com
//   npm run cli -- key create --user <id|email> [--name ci]
//   npm run cli -- key list --user <id|email>
//   npm run cli -- key revoke <prefix|key>
//   npm run cli -- secrets rotate [--new-key <key>]
//   npm run cli -- number import --user <id|email> --number <+E.164> [--name <nickname>] [--carrier twilio|telnyx]
//   npm run cli -- numbers repoint
//   npm run cli -- replay <call id> [--agent <id>]
//   npm run cli -- test <agent id> [--version N] [--test <id>]…
import { loadConfig, parseSecretsKey, type Config } from '../src/config.ts'
import { createDb, createPool, type DB } from '../src/db/database.ts'
import { migrate } from '../src/db/migrate.ts'
import { openDatabase } from '../src/db/open.ts'
import { createCipher, isSealed, keyFileOf, newSecretsKey, SecretsKeyError, stageKeyFile, type Cipher } from '../src/db/secrets.ts'
import { prepareSecrets, rewriteSecrets } from '../src/db/stored-secrets.ts'
import { HttpError } from '../src/http/errors.ts'
import { createBoss } from '../src/jobs/boss.ts'
import { createQueues } from '../src/jobs/queues.ts'
import { createLogger } from '../src/logger.ts'
import { createMailer } from '../src/mail/mailer.ts'
import { agentOwner, runReport, runTests } from '../src/modules/agent-tests/tests.ts'
import { INVITATION_MS, renewInvitation, workspaceOwner } from '../src/modules/account/workspace-queries.ts'
import { publicInvitationUrl } from '../src/modules/account/workspaces.ts'
import { createLoginLink, LOGIN_LINK_MS, loginLinkUrl } from '../src/modules/console/queries.ts'
import { createCarriers } from '../src/modules/phone-numbers/carriers/index.ts'
import { importNumber, repointNumbers } from '../src/modules/phone-numbers/numbers.ts'
import { createApiKey, createUser, findUser, listApiKeys, revokeApiKey, type User } from '../src/modules/users/queries.ts'
import { readArgs } from './args.ts'
import { replayCall, ReplayError } from './bench/replay.ts'

const USAGE = `usage:
  cli user create --email <address> [--name <name>] [--language <en|de|…>]
  cli user list
  cli user login-link --email <address>
  cli workspace invite-link --workspace <id> --email <address>
  cli key create --user <id|email> [--name <label>]
  cli key list --user <id|email>
  cli key revoke <prefix|key>
  cli secrets rotate [--new-key <32 bytes, base64 or hex>]
  cli number import --user <id|email> --number <+E.164> [--name <nickname>] [--carrier twilio|telnyx]   (a number of this installation's Twilio (default) or Telnyx account)
  cli numbers repoint   (every Twilio number's calls to PUBLIC_BASE_URL again)
  cli replay <call id> [--agent <id>]
      plays the caller of a stored call (the left track of its two-track recording) again, in real time, to the
      call's agent or --agent (another agent of the same account), on a server of this installation started in
      this process with its configuration and providers (CALL_RUNTIME=voice), and scores the new call against the
      original as npm run bench:turns does: turn boundaries, end-of-turn latency, cut-offs, barge-ins; a table,
      then one JSON line. The replay is a new web call of the account: its providers are paid for and it is
      billed like any call (custom_data.replay_of names the original). docs/voice.md, "Replaying a call"
  cli test <agent id> [--version <n>] [--test <test id>]…
      runs the agent's tests (all, or each --test) against its latest version or --version, as POST
      /v1/agent/:id/tests/run does, stores the run and prints one line per test and expectation. Exit code 0 when
      every test passed, 1 otherwise, 2 for bad arguments (an unknown agent, version or test included).
      Tools that are not mocked act for real. docs/testing.md, "CLI"`

class UsageError extends Error {}
/** Some test failed: its report goes to stdout, the exit code is 1. */
class TestsFailed extends Error {}

const { values, positionals } = readArgs({ name: 'cli', usage: USAGE }, {
  allowPositionals: true,
  options: { email: { type: 'string' }, name: { type: 'string' }, language: { type: 'string' }, user: { type: 'string' }, workspace: { type: 'string' }, 'new-key': { type: 'string' }, number: { type: 'string' }, carrier: { type: 'string' }, agent: { type: 'string' }, version: { type: 'string' }, test: { type: 'string', multiple: true } }
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

/** A record id as the API writes it (24 hexadecimal digits). */
function recordId (value: string | undefined, what: string): string {
  const id = required(value, what).toLowerCase()
  if (!/^[0-9a-f]{24}$/.test(id)) throw new UsageError(`${what} ${value} is not an id (24 hexadecimal digits)`)
  return id
}

/** `replay <call id> [--agent <id>]`: on a server of this installation in this process, with CALL_RUNTIME=voice. */
async function replay (url: string, log: ReturnType<typeof createLogger>): Promise<string> {
  const [, callId, extra] = positionals
  if (extra !== undefined) throw new UsageError(`replay takes one call id, got also ${extra}`)
  const call = recordId(callId, 'call id')
  const agentId = values.agent === undefined ? undefined : recordId(values.agent, '--agent')
  const config = loadConfig({ ...process.env, CALL_RUNTIME: 'voice', ROLE: 'voice', PORT: '0', HOST: '127.0.0.1' })
  return await replayCall({ databaseUrl: url, config, log, callId: call, agentId, write: (line) => process.stdout.write(line + '\n') })
}

/** `test <agent id> [--version N] [--test id]…`: the agent's tests against the database the server uses. */
async function agentTests (db: DB, config: Config, url: string, log: ReturnType<typeof createLogger>): Promise<string> {
  const [, agentArg, extra] = positionals
  if (extra !== undefined) throw new UsageError(`test takes one agent id, got also ${extra}`)
  const agentId = recordId(agentArg, 'agent id')
  if (values.version !== undefined && !/^[1-9]\d{0,8}$/.test(values.version)) throw new UsageError(`--version ${values.version} is not a version number (1, 2, …)`)
  const testIds = values.test?.map((id) => recordId(id, '--test'))
  const userId = await agentOwner(db, agentId)
  if (userId === undefined) throw new UsageError(`no agent ${agentId}`)
  const boss = createBoss(url, config)
  boss.on('error', (err) => log.error({ err }, 'job queue error'))
  await boss.start()
  const mailer = createMailer(db, config, log)
  try {
    await createQueues(boss, config)
    const run = await runTests({ db, boss, config, log, mailer }, userId, agentId, { testIds, version: values.version === undefined ? null : Number(values.version) })
    if (run.status !== 'passed') throw new TestsFailed(runReport(run))
    return runReport(run)
  } catch (err) {
    // An agent, version or test that is not there is a mistake on the command line.
    if (err instanceof HttpError && err.statusCode === 404) throw new UsageError(err.message)
    throw err
  } finally {
    await mailer.close()
    await boss.stop({ graceful: false })
  }
}

/**
 * Re-encrypts every stored secret with a new key in one transaction. A key file (embedded database
 * without SECRETS_KEY) is replaced once the transaction commits; SECRETS_KEY is the operator's to change.
 */
async function rotateSecrets (db: DB, config: Config, current: Cipher, embeddedInUse: boolean): Promise<string> {
  const text = values['new-key'] ?? newSecretsKey()
  const key = parseSecretsKey(text)
  if (key === undefined) throw new UsageError('--new-key must be 32 bytes as base64 (`openssl rand -base64 32`) or as 64 hexadecimal digits')
  const next = createCipher(key)
  if (next.keyId === current.keyId) throw new UsageError('--new-key is the key in use now')
  const keyFile = config.secretsKey === undefined
  // A server running on the embedded database holds the old key: it could not read what this writes.
  if (embeddedInUse) throw new UsageError('stop the server first: it holds the current key until it restarts')
  const staged = keyFile ? await stageKeyFile(config.dataDir, key) : undefined
  let count: number
  try {
    count = await db.transaction().execute(async (trx) =>
      await rewriteSecrets(trx, (value) => next.seal(isSealed(value) ? current.open(value) : value), false))
  } catch (err) {
    await staged?.discard()
    throw err
  }
  await staged?.commit()
  const done = `re-encrypted ${count} stored secret${count === 1 ? '' : 's'} with key ${next.keyId} (was ${current.keyId})`
  if (keyFile) return `${done}\n${keyFileOf(config.dataDir)} holds the new key; start the server as before`
  return `${done}\nnow set SECRETS_KEY=${text} on every process and restart them: until then they cannot read the stored secrets`
}

async function command (db: DB, config: Config, cipher: Cipher, embeddedInUse: boolean): Promise<string> {
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
    case 'user login-link': {
      const user = await userOf(db, required(values.email, 'email'))
      const link = loginLinkUrl(config.publicBaseUrl, await createLoginLink(db, user.id))
      return `${link}\n(signs ${user.email} in to the console once, within ${LOGIN_LINK_MS / 60_000} minutes)`
    }
    case 'workspace invite-link': {
      // For an invitation whose e-mail could not be sent: the operator hands the link to the invited person.
      const workspaceId = required(values.workspace, 'workspace').toLowerCase()
      const email = required(values.email, 'email').toLowerCase()
      const owner = await workspaceOwner(db, workspaceId)
      if (owner === undefined) throw new UsageError(`no workspace ${workspaceId}`)
      const token = await renewInvitation(db, owner, workspaceId, email)
      if (token === undefined) throw new UsageError(`${email} has no open invitation to workspace ${workspaceId}`)
      return `${publicInvitationUrl(config.publicBaseUrl, token)}\n(for ${email} only: it makes their account or joins it to the workspace, once, within ${INVITATION_MS / 86_400_000} days; earlier links stop working)`
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
    case 'secrets rotate':
      return await rotateSecrets(db, config, cipher, embeddedInUse)
    case 'number import': {
      // The operator gives a number of the installation's own Twilio account to an account (tenants cannot).
      const user = await userOf(db, required(values.user, 'user'))
      const phoneNumber = required(values.number, 'number')
      if (!/^\+[1-9]\d{1,14}$/.test(phoneNumber)) throw new UsageError(`--number ${phoneNumber} is not an E.164 number such as +14155550123`)
      const carrier = values.carrier ?? 'twilio'
      if (carrier !== 'twilio' && carrier !== 'telnyx') throw new UsageError(`--carrier ${carrier} must be twilio or telnyx`)
      const row = await importNumber(db, createCarriers(db, config), user.id, { phone_number: phoneNumber, carrier, nickname: values.name }, 'operator')
      return `imported ${row.phone_number} (${row.carrier_number_id ?? ''}) into ${user.email} as phone number ${row.id}; its calls now come to ${config.publicBaseUrl}`
    }
    case 'numbers repoint': {
      const { repointed, failed } = await repointNumbers(db, createCarriers(db, config))
      const lines = [`${repointed.length} Twilio number${repointed.length === 1 ? '' : 's'} now send${repointed.length === 1 ? 's' : ''} calls to ${config.publicBaseUrl}`]
      for (const f of failed) lines.push(`not repointed: ${f.phone_number}: ${f.message}`)
      if (failed.length > 0) throw new HttpError(502, 'carrier_error', lines.join('\n'))
      return lines.join('\n')
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
    const cipher = await prepareSecrets(config, db)
    const output = positionals[0] === 'replay'
      ? await replay(url, log)
      : positionals[0] === 'test' ? await agentTests(db, config, url, log) : await command(db, config, cipher, embedded !== undefined && !embedded.owned)
    process.stdout.write(output + '\n')
    return 0
  } catch (err) {
    if (err instanceof TestsFailed) {
      process.stdout.write(err.message + '\n')
      return 1
    }
    if (!(err instanceof UsageError || err instanceof HttpError || err instanceof SecretsKeyError || err instanceof ReplayError)) throw err
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
