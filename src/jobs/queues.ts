import type { PgBoss, Queue } from 'pg-boss'
import type { Config } from '../config.ts'

/** Every queue of the server, with how its jobs are retried. */
export const QUEUES = {
  /** The simulator answering a call a few seconds after it was placed. */
  simulateCall: 'call-simulate',
  /** Ends a call still running after its agent's maximum duration. */
  callDeadline: 'call-deadline',
  /** Post-call analysis: summary, sentiment, extraction, credits, then the deliveries. */
  analyseCall: 'call-analyse',
  /** Hourly housekeeping: forgets what is kept only for a while (idempotency keys, delivered requests). */
  housekeeping: 'housekeeping',
  /** One attempt of a post-call delivery; the next attempt is a new job, sent when this one is logged. */
  deliveryAttempt: 'delivery-attempt',
  /** Reads an uploaded knowledge-base file into searchable passages. */
  extractKnowledgeFile: 'knowledge-extract'
} as const

/** Retries: a limit and a first pause in seconds, doubling after each failure. */
const RETRIES: Record<string, { retryLimit: number, retryDelay: number, retryDelayMax?: number }> = {
  [QUEUES.simulateCall]: { retryLimit: 3, retryDelay: 2 },
  [QUEUES.callDeadline]: { retryLimit: 5, retryDelay: 5 },
  // An analyser outage (model API down) is waited out for about half an hour before the call is finalised without it.
  [QUEUES.analyseCall]: { retryLimit: 6, retryDelay: 15, retryDelayMax: 600 },
  [QUEUES.housekeeping]: { retryLimit: 2, retryDelay: 60 },
  // Retries here are for the server's own failures (database); the receiver's failures follow the delivery's schedule.
  [QUEUES.deliveryAttempt]: { retryLimit: 10, retryDelay: 5, retryDelayMax: 300 },
  // A document that cannot be read fails without a retry (the file says why); retries cover the database.
  [QUEUES.extractKnowledgeFile]: { retryLimit: 3, retryDelay: 10 }
}

/**
 * Creates the queues (pg-boss needs them before the first send); existing queues are left as they are.
 * CALL_TIME_SCALE shortens the pauses between retries like every other pause of the call lifecycle.
 */
export async function createQueues (boss: PgBoss, config: Pick<Config, 'callTimeScale' | 'delivery'>): Promise<void> {
  for (const name of Object.values(QUEUES)) {
    const { retryLimit, retryDelay, retryDelayMax } = RETRIES[name]
    const delay = Math.round(retryDelay * config.callTimeScale)
    const options: Omit<Queue, 'name'> = { notify: true, retryLimit, retryDelay: delay, retryBackoff: delay > 0 }
    if (retryDelayMax !== undefined && delay > 0) options.retryDelayMax = Math.max(delay, Math.round(retryDelayMax * config.callTimeScale))
    // A worker that dies mid-attempt leaves its job active; it is attempted again once the attempt's time is surely up.
    if (name === QUEUES.deliveryAttempt) options.expireInSeconds = Math.ceil(config.delivery.timeoutMs / 1000) + 30
    await boss.createQueue(name, options)
  }
}
