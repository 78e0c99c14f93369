import type { PgBoss, Queue } from 'pg-boss'

/** Every queue of the server, with how its jobs are retried. */
export const QUEUES = {
  /** The simulator answering a call a few seconds after it was placed. */
  simulateCall: 'call-simulate',
  /** Ends a call still running after its agent's maximum duration. */
  callDeadline: 'call-deadline',
  /** Post-call analysis: summary, sentiment, extraction, credits, then the deliveries. */
  analyseCall: 'call-analyse'
} as const

const OPTIONS: Record<string, Omit<Queue, 'name'>> = {
  [QUEUES.simulateCall]: { retryLimit: 3, retryDelay: 2, retryBackoff: true },
  [QUEUES.callDeadline]: { retryLimit: 5, retryDelay: 5, retryBackoff: true },
  // An analyser outage (model API down) is waited out for about half an hour before the call is finalised without it.
  [QUEUES.analyseCall]: { retryLimit: 6, retryDelay: 15, retryBackoff: true, retryDelayMax: 600 }
}

/** Creates the queues (pg-boss needs them before the first send); repeated calls are no-ops. */
export async function createQueues (boss: PgBoss): Promise<void> {
  for (const name of Object.values(QUEUES)) {
    await boss.createQueue(name, { notify: true, ...OPTIONS[name] })
  }
}
