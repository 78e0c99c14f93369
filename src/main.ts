import { buildApp } from './app.ts'
import { ConfigError, loadConfig, type Config } from './config.ts'
import { createDb, createPool } from './db/database.ts'
import type { EmbeddedPostgres } from './db/embedded.ts'
import { migrate } from './db/migrate.ts'
import { openDatabase } from './db/open.ts'
import { prepareSecrets } from './db/stored-secrets.ts'
import { createBoss } from './jobs/boss.ts'
import { registerHousekeeping } from './jobs/housekeeping.ts'
import { createQueues } from './jobs/queues.ts'
import { createLogger } from './logger.ts'
import { createMailer } from './mail/mailer.ts'
import { registerDeliveryWorkers } from './modules/deliveries/engine.ts'
import { deliveryAgent } from './modules/deliveries/network.ts'
import { registerKnowledgeWorkers } from './modules/knowledge-bases/workers.ts'
import { createAnalyser } from './modules/runtime/analysis/analyser.ts'
import { registerRuntimeWorkers } from './modules/runtime/workers.ts'
import { ensureOwner } from './modules/users/bootstrap.ts'

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

async function main (): Promise<void> {
  const database = await openDatabase(config, log, 'exclusive')
  embedded = database.embedded
  const pool = createPool(database.url, config.databasePoolSize)
  const db = createDb(pool)
  const applied = await migrate(pool)
  if (applied.length > 0) log.info({ applied }, 'migrations applied')
  await prepareSecrets(config, db, log)

  const owner = await ensureOwner(db, config.bootstrapEmail, config.bootstrapApiKey)
  if (owner !== undefined) {
    const shown = config.bootstrapApiKey === undefined ? owner.key : 'the one in BOOTSTRAP_API_KEY'
    log.warn(`created the owner account ${owner.email}; its API key (shown only now): ${shown}`)
  }

  const boss = createBoss(database.url, config)
  boss.on('error', (err) => log.error({ err }, 'job queue error'))
  await boss.start()
  await createQueues(boss, config)
  const agent = deliveryAgent(config.delivery)
  // The workers' own mailer (failure e-mails); the API's is made with the app.
  const mailer = createMailer(db, config, log)
  if (config.role !== 'api') {
    await registerRuntimeWorkers(boss, { db, boss, config, log, analyser: createAnalyser(config.analyser) })
    await registerDeliveryWorkers(boss, { db, boss, config, log, agent, mailer })
    await registerHousekeeping(boss, { db, config, log })
    await registerKnowledgeWorkers(boss, { db, log })
  }

  const app = await buildApp(config, { db, boss, logger: log })
  const address = await app.listen({ port: config.port, host: config.host })
  const everywhere = config.host === '0.0.0.0' || config.host === '::' ? ' (all interfaces)' : ''
  log.info(`Switchboard (${config.role}) listening on ${address}${everywhere}`)

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
    await boss.stop({ graceful: true, timeout: config.shutdownTimeoutMs })
    await agent.close()
    mailer.close()
    await pool.end()
    await embedded?.stop()
    log.info('stopped')
    process.exit(0)
  }
  process.on('SIGTERM', (signal) => { void shutdown(signal) })
  process.on('SIGINT', (signal) => { void shutdown(signal) })
}

main().catch(async (err: unknown) => {
  log.fatal({ err }, 'Switchboard failed to start')
  await embedded?.stop().catch(() => {})
  process.exit(1)
})
