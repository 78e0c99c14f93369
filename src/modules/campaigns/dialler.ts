import { randomUUID } from 'node:crypto'
import type { Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { Database, RetrySettings } from '../../db/schema.ts'
import { QUEUES, sendJob, type JobSender } from '../../jobs/queues.ts'
import { getSubscription } from '../account/credits.ts'
import { findAgent, type AgentRow } from '../agents/queries.ts'
import { callbackOutcome, callbackSettings } from '../calls/callbacks.ts'
import { doNotCallForCalls } from '../contacts/dnc.ts'
import { startPhoneCall } from '../calls/phone-calls.ts'
import { findPhoneNumberByE164 } from '../phone-numbers/queries.ts'
import { withinHours } from './hours.ts'
import {
  callingWithoutCall, claimDue, dialCounts, endedCalls, lockAccountDialling, lockCampaign, markDialled, settleContact, unfinished, updateCampaign,
  type CampaignRow
} from './queries.ts'

// The dialler (docs/campaigns.md, "How calls are placed"): a chain of pg-boss ticks per campaign. Each tick first
// commits its successor (so a process that dies mid-tick stops nothing), then, in one transaction under the campaign's
// row lock and the account's advisory lock, settles the contacts whose call ended and dials due contacts within the
// caps and calling hours: each call is started, and its contact marked `calling`, in that same transaction. A contact
// is therefore dialled by exactly one tick, whichever process runs it, and a tick that dies dials nobody.

type Trx = Transaction<Database>

export interface DiallerDeps extends JobSender {
  db: DB
  /** The clock of calling hours, due times and the per-minute caps (tests pass a fake one). */
  now: () => Date
}

/** Starts a new tick chain (creation, resume): a tick of an older chain finds the token changed and stops. */
export async function startTicks (trx: Trx, jobs: JobSender, campaignId: string): Promise<void> {
  const token = randomUUID()
  await updateCampaign(trx, campaignId, { tick_token: token })
  await sendJob(jobs.boss, trx, QUEUES.campaignTick, { campaignId, token })
}

export async function tickCampaign (deps: DiallerDeps, campaignId: string, token: string): Promise<void> {
  const current = await deps.db.transaction().execute(async (trx) => {
    const campaign = await lockCampaign(trx, campaignId)
    if (campaign === undefined || campaign.tick_token !== token) return undefined
    const next = randomUUID()
    await updateCampaign(trx, campaignId, { tick_token: next })
    await sendJob(deps.boss, trx, QUEUES.campaignTick, { campaignId, token: next }, { startAfter: new Date(Date.now() + deps.config.campaigns.tickMs) })
    return campaign
  })
  if (current === undefined) return
  // Read outside the dialling transaction: a subscription is made on first use in a transaction of its own.
  const subscription = await getSubscription(deps.db, current.user_id)
  const noCredits = subscription.creditBalance <= 0 && !subscription.autoTopUpEnabled
  await deps.db.transaction().execute(async (trx) => {
    const campaign = await lockCampaign(trx, campaignId)
    if (campaign === undefined) return
    const now = deps.now()
    const agent = await findAgent(trx, campaign.user_id, campaign.agent_id)
    await settleEnded(trx, deps, campaign, agent, now)
    if (campaign.status === 'active') await dial(trx, deps, campaign, agent, noCredits, now)
    const left = await unfinished(trx, campaign.id)
    const status = (await lockCampaign(trx, campaignId))!.status
    if (status === 'active' && !left.pending && !left.calling) {
      await updateCampaign(trx, campaign.id, { status: 'completed', completed_at: now, tick_token: null })
    } else if (status !== 'active' && !left.calling) {
      // Paused or cancelled with no call left to settle: the chain rests until a resume starts another.
      await updateCampaign(trx, campaign.id, { tick_token: null })
    }
  })
}

/** The campaign's retries: its own, else the agent's callback_settings when they are on, else none. */
function retriesOf (campaign: CampaignRow, agent: AgentRow | undefined): Omit<RetrySettings, 'on_outcomes'> & { on_outcomes: readonly string[] } | undefined {
  if (campaign.retry_settings !== null) return campaign.retry_settings
  if (agent === undefined) return undefined
  const settings = callbackSettings(agent)
  return settings.enabled ? settings : undefined
}

/**
 * Settles the contacts whose call ended: a conversation held is `success` (done); an outcome of the retry settings'
 * on_outcomes is tried again after the delay while attempts remain (max_attempts retries after the first call);
 * anything else is done with that outcome.
 */
async function settleEnded (trx: Trx, deps: DiallerDeps, campaign: CampaignRow, agent: AgentRow | undefined, now: Date): Promise<void> {
  const retries = retriesOf(campaign, agent)
  const retryAt = new Date(now.getTime() + Math.round((retries?.retry_delay_minutes ?? 0) * 60_000 * deps.config.callTimeScale))
  for (const row of await endedCalls(trx, campaign.id)) {
    const outcome = callbackOutcome(row) ?? 'success'
    const again = outcome !== 'success' && retries !== undefined && retries.on_outcomes.includes(outcome) && row.attempts <= retries.max_attempts && campaign.status !== 'cancelled'
    await settleContact(trx, row.id, again ? { status: 'pending', due_at: retryAt } : { status: 'done', outcome })
  }
  for (const row of await callingWithoutCall(trx, campaign.id)) await settleContact(trx, row.id, { status: 'done', outcome: 'failed' })
}

async function pause (trx: Trx, campaign: CampaignRow, reason: string): Promise<void> {
  await updateCampaign(trx, campaign.id, { status: 'paused', status_reason: reason })
}

/** Dials the due contacts whose zone is within calling hours, as many as the campaign's and the account's caps leave. */
async function dial (trx: Trx, deps: DiallerDeps, campaign: CampaignRow, agent: AgentRow | undefined, noCredits: boolean, now: Date): Promise<void> {
  if (campaign.start_at > now) return
  const zones = campaign.timezones.filter((zone) => withinHours(campaign.calling_hours, zone, now))
  if (zones.length === 0) return
  if (agent === undefined) return await pause(trx, campaign, 'agent_deleted')
  if (agent.status !== 'active') return await pause(trx, campaign, 'agent_inactive')
  if (noCredits) return await pause(trx, campaign, 'no_credits')
  const numbers = (await Promise.all(campaign.from_numbers.map(async (e164) => await findPhoneNumberByE164(trx, campaign.user_id, e164))))
    .filter((number) => number !== undefined)
  if (numbers.length === 0) return await pause(trx, campaign, 'no_numbers')

  await lockAccountDialling(trx, campaign.user_id)
  const caps = deps.config.campaigns
  const counts = await dialCounts(trx, campaign.id, campaign.user_id, new Date(now.getTime() - 60_000))
  const free = Math.min(
    campaign.max_concurrent_calls - counts.campaignCalling,
    caps.accountMaxConcurrent - counts.accountCalling,
    campaign.max_calls_per_minute - counts.campaignRecent,
    caps.accountCallsPerMinute - counts.accountRecent
  )
  const due = await claimDue(trx, campaign.id, zones, now, free)
  if (due.length === 0) return
  const listed = await doNotCallForCalls(trx, campaign.user_id, due.map((contact) => contact.phone_number))
  for (const contact of due) {
    if (listed.has(contact.phone_number)) {
      await settleContact(trx, contact.id, { status: 'done', outcome: 'do_not_call' })
      continue
    }
    // The pool's numbers in turn, a contact's retries from the next number.
    const number = numbers[(contact.row_number + contact.attempts) % numbers.length]
    const call = await startPhoneCall(trx, deps, agent, number, {
      from_number: number.phone_number,
      to_number: contact.phone_number,
      dynamic_context: contact.columns,
      custom_data: { campaign_id: campaign.id },
      ring_timeout_seconds: campaign.ring_timeout_seconds ?? undefined,
      campaign_id: campaign.id
    })
    await markDialled(trx, contact, campaign, call.id, now)
  }
}
