import { QUEUES, workOn } from '../../jobs/queues.ts'
import { endReportedCall, placeCall, type TelephonyDeps } from './calls.ts'

export async function registerTelephonyWorkers (deps: TelephonyDeps): Promise<void> {
  // Calls come in bursts (a campaign's tick, many make-phone-calls): a worker that took one job per NOTIFY left the
  // rest of a burst to its next poll, 30 s later. It takes up to 20 at once, again at once while batches come full,
  // and places them side by side.
  await workOn(deps.boss, QUEUES.placeCall, { batchSize: 20, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 1 }, async (jobs) => {
    const placed = await Promise.allSettled(jobs.map(async (job) => { await placeCall(deps, job.data.callId) }))
    const failed = placed.find((result) => result.status === 'rejected')
    if (failed !== undefined) throw failed.reason
  })
  // Ready at their time without a NOTIFY: polled every second.
  await workOn(deps.boss, QUEUES.carrierEnded, { pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: 1 }, async (jobs) => {
    for (const job of jobs) await endReportedCall(deps, job.data.callId, job.data.status)
  })
}
