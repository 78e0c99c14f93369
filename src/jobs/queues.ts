import type { Transaction } from 'kysely'
import { fromKysely, type PgBoss, type Queue, type SendOptions, type WorkHandlerFor, type WorkOptions } from 'pg-boss'
import type { Config } from '../config.ts'
import type { Database } from '../db/schema.ts'

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
  extractKnowledgeFile: 'knowledge-extract',
  /** Places an outbound phone call at the carrier (Twilio). */
  placeCall: 'call-place',
  /** Ends a phone call the carrier reported over whose session did not (its process died). */
  carrierEnded: 'call-carrier-ended',
  /** Places a scheduled callback of an outbound phone call (an agent's callback_settings) at its time. */
  placeCallback: 'call-callback',
  /** One tick of a campaign's dialler: settles its finished calls, dials its due contacts, sends the next tick. */
  campaignTick: 'campaign-tick'
} as const

/** What a job of each queue carries: `sendJob` and `workOn` take it from here, so a send and its worker agree. */
export interface QueuePayloads {
  [QUEUES.simulateCall]: { callId: string }
  [QUEUES.callDeadline]: { callId: string, maxMs: number }
  [QUEUES.analyseCall]: { callId: string }
  [QUEUES.housekeeping]: object
  /** `n`: the attempt's number, from 1. */
  [QUEUES.deliveryAttempt]: { id: string, n: number }
  [QUEUES.extractKnowledgeFile]: { fileId: string }
  [QUEUES.placeCall]: { callId: string }
  /** `status`: the carrier's final status of the call (Twilio's CallStatus). */
  [QUEUES.carrierEnded]: { callId: string, status: string }
  [QUEUES.placeCallback]: { callbackId: string }
  /** `token`: the campaign's tick_token when it was sent; another tick has taken over when they differ. */
  [QUEUES.campaignTick]: { campaignId: string, token: string }
}

export type QueueName = keyof QueuePayloads

/** What code that starts jobs needs: the process's pg-boss and the configuration (time scales). */
export interface JobSender { boss: PgBoss, config: Config }

/**
 * Sends a job inside the transaction whose writes it follows (rolled back with it), or on its own when
 * `trx` is undefined.
 */
export async function sendJob<Q extends QueueName> (boss: PgBoss, trx: Transaction<Database> | undefined, queue: Q, data: QueuePayloads[Q], options: Omit<SendOptions, 'db'> = {}): Promise<void> {
  await boss.send(queue, data, trx === undefined ? options : { ...options, db: fromKysely(trx) })
}

/** Registers the worker of a queue, its jobs typed as the queue's payload. */
export async function workOn<Q extends QueueName, const O extends WorkOptions> (boss: PgBoss, queue: Q, options: O, handler: WorkHandlerFor<O, QueuePayloads[Q]>): Promise<void> {
  await boss.work<QueuePayloads[Q], unknown, O>(queue, options, handler)
}

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
  [QUEUES.extractKnowledgeFile]: { retryLimit: 3, retryDelay: 10 },
  // Never retried: an attempt that failed after the carrier took the call would ring the person twice.
  [QUEUES.placeCall]: { retryLimit: 0, retryDelay: 0 },
  [QUEUES.carrierEnded]: { retryLimit: 5, retryDelay: 5 },
  // Safe to retry: the callback's row state, changed in the transaction that stores its call, stops a second call.
  [QUEUES.placeCallback]: { retryLimit: 5, retryDelay: 10 },
  // Safe to retry (the token and row locks stop a second chain); a tick lost with its process is taken up again.
  [QUEUES.campaignTick]: { retryLimit: 100, retryDelay: 1 }
}

/**
 * Creates the queues (pg-boss needs them before the first send), and gives queues made by an earlier version the
 * options of this one. CALL_TIME_SCALE shortens the pauses between retries like every other pause of the call lifecycle.
 */
export async function createQueues (boss: PgBoss, config: Pick<Config, 'callTimeScale' | 'delivery' | 'jobHeartbeatSeconds'>): Promise<void> {
  for (const name of Object.values(QUEUES)) {
    const { retryLimit, retryDelay, retryDelayMax } = RETRIES[name]
    const delay = Math.round(retryDelay * config.callTimeScale)
    // A worker that dies mid-job stops refreshing its jobs' heartbeat: the supervisor fails them (to be retried) soon
    // after, where the expiry alone would keep them for 15 minutes (a campaign's contact held that long).
    const options: Omit<Queue, 'name'> = { notify: true, retryLimit, retryDelay: delay, retryBackoff: delay > 0, heartbeatSeconds: config.jobHeartbeatSeconds }
    if (retryDelayMax !== undefined && delay > 0) options.retryDelayMax = Math.max(delay, Math.round(retryDelayMax * config.callTimeScale))
    // A worker that dies mid-attempt leaves its job active; it is attempted again once the attempt's time is surely up.
    if (name === QUEUES.deliveryAttempt) options.expireInSeconds = Math.ceil(config.delivery.timeoutMs / 1000) + 30
    // A tick is short: one that a dead process held is retried soon (the next tick was committed before its work).
    if (name === QUEUES.campaignTick) options.expireInSeconds = 30
    await boss.createQueue(name, options)
    await boss.updateQueue(name, options)
  }
}
