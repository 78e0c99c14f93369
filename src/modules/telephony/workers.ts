import { QUEUES, workOn } from '../../jobs/queues.ts'
import { endReportedCall, placeCall, type TelephonyDeps } from './calls.ts'

export async function registerTelephonyWorkers (deps: TelephonyDeps): Promise<void> {
  await workOn(deps.boss, QUEUES.placeCall, {}, async ([job]) => { await placeCall(deps, job.data.callId) })
  // Ready at their time without a NOTIFY: polled every second.
  await workOn(deps.boss, QUEUES.carrierEnded, { pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: 1 }, async (jobs) => {
    for (const job of jobs) await endReportedCall(deps, job.data.callId, job.data.status)
  })
}
