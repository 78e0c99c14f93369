import { buildApp } from './app.ts'
import { ConfigError, loadConfig, type Config } from './config.ts'
import { createDb, createPool } from './db/database.ts'
import type { EmbeddedPostgres } from './db/embedded.ts'
import { migrate } from './db/migrate.ts'
import { openDatabase } from './db/open.ts'
import type { PgBoss } from 'pg-boss'
import { prepareSecrets } from './db/stored-secrets.ts'
import { createBoss } from './jobs/boss.ts'
import { createQueues } from './jobs/queues.ts'
import { startWorkers } from './workers.ts'
import { createLogger, logFormat } from './logger.ts'
import { createLoginLink, loginLinkUrl } from './modules/console/queries.ts'
import { twilioWebhooksProblem } from './modules/phone-numbers/carriers/index.ts'
import { ensureOwner } from './modules/users/bootstrap.ts'
import { chooseEngine } from './modules/voice/engines/index.ts'

function readConfig (): Config {
  try {
    return loadConfig()
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    process.stderr.write(`Switchboard cannot start: ${err.message}\n`)
    process.exit(2)
  }
}

const config = readConfig()
const log = createLogger(config)
let embedded: EmbeddedPostgres | undefined
let boss: PgBoss | undefined

async function main (): Promise<void> {
  // Twilio would call webhooks that it cannot reach: said at start, and buying or importing is refused (409).
  const unreachable = config.phoneCarrier === 'twilio' ? twilioWebhooksProblem(config) : undefined
  if (unreachable !== undefined) log.warn(`${unreachable}. Until then numbers cannot be bought, imported or repointed.`)
  const database = await openDatabase(config, log, 'exclusive')
  embedded = database.embedded
  const pool = createPool(database.url, config.databasePoolSize, config.databasePool)
  const db = createDb(pool)
  const applied = await migrate(pool)
  if (applied.length > 0) log.info({ applied }, 'migrations applied')
  await prepareSecrets(config, db, log)

  boss = createBoss(database.url, config)
  boss.on('error', (err) => log.error({ err }, 'job queue error'))
  await boss.start()
  await createQueues(boss, config)
  const stopWorkers = config.role === 'all' || config.role === 'worker' ? await startWorkers(boss, { db, config, log }) : undefined

  const app = await buildApp(config, { db, boss, logger: log })
  const address = await app.listen({ port: config.port, host: config.host })
  // The owner is made once the port is ours: a start that fails before never makes a key nobody saw.
  const owner = await ensureOwner(db, config.bootstrapEmail, config.bootstrapApiKey)
  // Every link printed starts with PUBLIC_BASE_URL (default http://localhost:<PORT>): the console's cookie is kept
  // per host, so a sign-in link on one host and a Console link on another would ask to sign in again.
  // PORT=0 without PUBLIC_BASE_URL: the default base names port 0; the port picked is the one to link to.
  const base = config.publicBaseUrl.endsWith(':0') ? address.replace(/\/\/(0\.0\.0\.0|\[::\])(?=:)/, '//localhost') : config.publicBaseUrl
  // The owner has no password yet: a one-time link signs them in to the console to set one.
  const link = owner === undefined ? undefined : loginLinkUrl(base, await createLoginLink(db, owner.userId))
  announce(address, base, owner === undefined ? undefined : { ...owner, link })

  let stopping = false
  const shutdown = async (signal: string) => {
    // npm and process managers often pass one Ctrl-C or stop on twice; the timer below bounds the wait.
    if (stopping) return
    stopping = true
    log.info(`${signal}: finishing in-flight requests and jobs`)
    setTimeout(() => {
      log.error('shutdown took too long; exiting')
      process.exit(1)
    }, config.shutdownTimeoutMs + 5000).unref()
    await app.close()
    await boss?.stop({ graceful: true, timeout: config.shutdownTimeoutMs })
    await stopWorkers?.()
    await pool.end()
    await embedded?.stop()
    log.info('stopped')
    process.exit(0)
  }
  process.on('SIGTERM', (signal) => { void shutdown(signal) })
  process.on('SIGINT', (signal) => { void shutdown(signal) })
}

/** JSON mode: one log line each. A terminal: a banner with the links and the owner's key. */
function announce (address: string, base: string, owner: { email: string, key: string, link?: string } | undefined): void {
  const everywhere = config.host === '0.0.0.0' || config.host === '::' ? ' (all interfaces)' : ''
  const listening = `Switchboard (${config.role}) listening on ${address}${everywhere}`
  const key = config.bootstrapApiKey === undefined ? owner?.key : 'the one in BOOTSTRAP_API_KEY'
  if (logFormat(config) === 'json') {
    if (owner !== undefined) log.warn(`created the owner account ${owner.email}; its API key (shown only now): ${key}; console sign-in link (once, 15 minutes): ${owner.link}`)
    log.info(listening)
    return
  }
  // The engine of LLM configurations that name none: what a new agent's web calls run on.
  const engine = chooseEngine(config.voice, { engine: null })
  const voice = engine === 'simulator'
    ? 'offline simulator, typed turns (set OPENAI_API_KEY or the voice variables for spoken calls: docs/voice.md)'
    : `${engine} engine, spoken`
  const consoleLine = config.role === 'all' || config.role === 'api' ? [`Console  ${base}/`] : []
  const lines = [listening, '', ...consoleLine, `API      ${base}/v1  (header x-api-key)`, `Docs     ${base}/docs`, `Health   ${base}/health`]
  if (config.callRuntime === 'voice') lines.push(`Calls    ${base}/web-call#access_token=<make-web-call's token>  (${voice})`)
  if (owner !== undefined) {
    lines.push('', `Created the owner account ${owner.email}.`, `API key  ${key}  (shown only now: keep it)`,
      `Sign-in  ${owner.link}  (once, within 15 minutes; then set a password)`)
  }
  log.info({ banner: lines }, listening)
}

/** The last line of a failed start: what to do about it. */
function whatToDo (err: unknown): string {
  const { code, syscall, message } = err as NodeJS.ErrnoException
  const database = config.databaseUrl === undefined ? 'the embedded PostgreSQL' : 'the PostgreSQL in DATABASE_URL'
  if (code === 'EADDRINUSE') return `port ${config.port} is in use: set PORT or stop the other process`
  if (code === 'EACCES' && syscall === 'listen') return `port ${config.port} needs privileges: set PORT to 1024 or above`
  if (code === 'EADDRNOTAVAIL') return `HOST ${config.host} is not an address of this machine: set HOST (127.0.0.1, or 0.0.0.0 for every interface)`
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'ETIMEDOUT') return `${database} cannot be reached (${code}): start it or correct DATABASE_URL`
  if (code === '28P01') return `${database} refused the user or password: correct DATABASE_URL`
  if (code === '3D000') return 'the database named in DATABASE_URL does not exist: create it (createdb) or correct DATABASE_URL'
  return `${String(message ?? err).split('\n')[0]} (details in the log above)`
}

main().catch(async (err: unknown) => {
  log.fatal({ err }, 'Switchboard failed to start')
  // Workers stop before the database they poll goes, or each lost connection is logged after this.
  await boss?.stop({ graceful: false }).catch(() => {})
  await embedded?.stop().catch(() => {})
  process.stderr.write(`Switchboard cannot start: ${whatToDo(err)}\n`)
  process.exit(1)
})
