import type { PgBoss } from 'pg-boss'
import type { Logger } from 'pino'
import type { Config } from '../config.ts'
import type { DB } from '../db/database.ts'
import { expireIdempotencyKeys } from '../modules/calls/idempotency.ts'
import { purgeExpired } from '../modules/deliveries/engine.ts'
import { QUEUES } from './queues.ts'

/** Hourly: forgets idempotency keys after 24 hours and delivery requests after the retention. */
export async function registerHousekeeping (boss: PgBoss, deps: { db: DB, config: Config, log: Logger }): Promise<void> {
  await boss.work(QUEUES.housekeeping, async () => {
    const keys = await expireIdempotencyKeys(deps.db)
    const requests = await purgeExpired(deps.db, deps.config.delivery.retentionDays)
    if (keys + requests > 0) deps.log.info({ keys, requests }, 'housekeeping forgot expired records')
  })
  // pg-boss keeps one schedule however many processes ask, and runs it where schedules run (ROLE=all, worker).
  await boss.schedule(QUEUES.housekeeping, '17 * * * *')
}
