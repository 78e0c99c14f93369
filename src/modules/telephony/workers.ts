import { QUEUES, workOn } from '../../jobs/queues.ts'
import { placeCall, type TelephonyDeps } from './calls.ts'

export async function registerTelephonyWorkers (deps: TelephonyDeps): Promise<void> {
  await workOn(deps.boss, QUEUES.placeCall, {}, async ([job]) => { await placeCall(deps, job.data.callId) })
}
