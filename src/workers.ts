import type { PgBoss } from 'pg-boss'
import type { Logger } from 'pino'
import type { Config } from './config.ts'
import type { DB } from './db/database.ts'
import { createMailer, type Mailer } from './mail/mailer.ts'
import { expireIdempotencyKeys } from './modules/calls/idempotency.ts'
import { registerCallWorkers } from './modules/calls/workers.ts'
import { registerDeliveryWorkers } from './modules/deliveries/engine.ts'
import { purgeExpired } from './modules/deliveries/queries.ts'
import { guardedAgent } from './net/guard.ts'
import { expireHourlyBudgets } from './db/budgets.ts'
import { registerKnowledgeWorkers } from './modules/knowledge-bases/workers.ts'
import { createAnalyser } from './modules/runtime/analysis/analyser.ts'
import type { Analyser } from './modules/runtime/analysis/types.ts'
import { registerRuntimeWorkers } from './modules/runtime/workers.ts'
import { registerVoiceWorkers } from './modules/voice/workers.ts'
import { registerTelephonyWorkers } from './modules/telephony/workers.ts'
import { QUEUES, workOn } from './jobs/queues.ts'
import { registerCampaignWorkers } from './modules/campaigns/workers.ts'

// The one place background workers start, for main.ts (ROLE=all and worker) and the tests alike. Like app.ts
// it composes the modules, so it sits beside main.ts, above them all (docs/architecture.md).

export interface WorkerOptions {
  db: DB
  config: Config
  log: Logger
  /** Default: the one the configuration names. */
  analyser?: Analyser
  /** Default: SMTP per config (failure e-mails). */
  mailer?: Mailer
  /** The campaigns' clock (calling hours, due times, per-minute caps); default: the system's. */
  now?: () => Date
}

/** Registers every queue's worker on a started pg-boss; answers a function that closes what they opened. */
export async function startWorkers (boss: PgBoss, options: WorkerOptions): Promise<() => Promise<void>> {
  const { db, config, log } = options
  const agent = guardedAgent(config.delivery)
  const mailer = options.mailer ?? createMailer(db, config, log)
  await registerCallWorkers({ db, boss, config })
  await registerRuntimeWorkers({ db, boss, config, log, analyser: options.analyser ?? createAnalyser(config.analyser) })
  await registerVoiceWorkers({ db, boss, config, log, mailer })
  await registerTelephonyWorkers({ db, boss, config, log, mailer })
  await registerDeliveryWorkers({ db, boss, config, log, agent, mailer })
  await registerKnowledgeWorkers(boss, { db, log, limits: config.knowledgeBases })
  await registerCampaignWorkers({ db, boss, config, now: options.now ?? (() => new Date()) })
  await registerHousekeeping(boss, { db, config, log })
  return async () => {
    await agent.close()
    if (options.mailer === undefined) mailer.close()
  }
}

/** Hourly: forgets idempotency keys after 24 hours, delivery requests after the retention and the hourly budgets of past hours. */
async function registerHousekeeping (boss: PgBoss, deps: { db: DB, config: Config, log: Logger }): Promise<void> {
  await workOn(boss, QUEUES.housekeeping, {}, async () => {
    const keys = await expireIdempotencyKeys(deps.db)
    const requests = await purgeExpired(deps.db, deps.config.delivery.retentionDays)
    const budgets = await expireHourlyBudgets(deps.db)
    if (keys + requests + budgets > 0) deps.log.info({ keys, requests, budgets }, 'housekeeping forgot expired records')
  })
  // pg-boss keeps one schedule however many processes ask, and runs it where schedules run (ROLE=all, worker).
  await boss.schedule(QUEUES.housekeeping, '17 * * * *')
}
