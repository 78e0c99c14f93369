import { QUEUES, workOn } from '../../jobs/queues.ts'
import { tickCampaign, type DiallerDeps } from './dialler.ts'

export async function registerCampaignWorkers (deps: DiallerDeps): Promise<void> {
  // Ticks become ready at their time without a NOTIFY: poll for them as often as pg-boss allows.
  await workOn(deps.boss, QUEUES.campaignTick, { batchSize: 10, pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 0.5 }, async (jobs) => {
    for (const job of jobs) await tickCampaign(deps, job.data.campaignId, job.data.token)
  })
}
