import { sql, type Insertable, type Selectable, type Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { CampaignContactsTable, CampaignsTable, Database } from '../../db/schema.ts'

// The SQL of campaigns (migrations/0034_campaigns.sql). Every query is scoped by the account, except the dialler's,
// which runs for a campaign id its own tick job carries.

type Trx = Transaction<Database>
export type CampaignRow = Selectable<CampaignsTable>

/** Rows a multi-row INSERT takes at once (PostgreSQL allows 65535 parameters; a contact has 8). */
const INSERT_CHUNK = 2000

export async function insertCampaign (trx: Trx, campaign: Insertable<CampaignsTable>, contacts: Array<Insertable<CampaignContactsTable>>): Promise<void> {
  await trx.insertInto('campaigns').values(campaign).execute()
  for (let i = 0; i < contacts.length; i += INSERT_CHUNK) {
    await trx.insertInto('campaign_contacts').values(contacts.slice(i, i + INSERT_CHUNK)).execute()
  }
}

export async function findCampaign (db: DB, userId: string, id: string): Promise<CampaignRow | undefined> {
  return await db.selectFrom('campaigns').selectAll().where('user_id', '=', userId).where('id', '=', id).executeTakeFirst()
}

export async function listCampaigns (db: DB, userId: string, page: { limit: number, skip: number }): Promise<CampaignRow[]> {
  return await db.selectFrom('campaigns').selectAll().where('user_id', '=', userId).orderBy('id', 'desc').limit(page.limit).offset(page.skip).execute()
}

/** Locks a campaign row (the account's, or any when `userId` is undefined: the dialler's). */
export async function lockCampaign (trx: Trx, id: string, userId?: string): Promise<CampaignRow | undefined> {
  let query = trx.selectFrom('campaigns').selectAll().where('id', '=', id)
  if (userId !== undefined) query = query.where('user_id', '=', userId)
  return await query.forUpdate().executeTakeFirst()
}

export async function updateCampaign (trx: Trx, id: string, change: Partial<Pick<CampaignRow, 'status' | 'status_reason' | 'tick_token' | 'completed_at'>>): Promise<void> {
  await trx.updateTable('campaigns').set({ ...change, updated_at: new Date() }).where('id', '=', id).execute()
}

/**
 * Serialises the dialling of one account's campaigns for the rest of the transaction, so that the account's caps are
 * counted and reserved by one dialler at a time (a second waits, then counts what the first dialled).
 */
export async function lockAccountDialling (trx: Trx, userId: string): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`campaign-dial:${userId}`}, 0))`.execute(trx)
}

export interface Progress { total: number, pending: number, calling: number, done: number, cancelled: number, outcomes: Record<string, number> }

/** Contacts per state, and the finished ones per outcome; for several campaigns at once. */
export async function campaignProgress (db: DB, campaignIds: string[]): Promise<Map<string, Progress>> {
  const progress = new Map<string, Progress>(campaignIds.map((id) => [id, { total: 0, pending: 0, calling: 0, done: 0, cancelled: 0, outcomes: {} }]))
  if (campaignIds.length === 0) return progress
  const rows = await db.selectFrom('campaign_contacts')
    .select(['campaign_id', 'status', 'outcome', (eb) => eb.fn.countAll<string>().as('n')])
    .where('campaign_id', 'in', campaignIds).groupBy(['campaign_id', 'status', 'outcome']).execute()
  for (const row of rows) {
    const entry = progress.get(row.campaign_id)!
    const n = Number(row.n)
    entry.total += n
    entry[row.status] += n
    if (row.status === 'done' && row.outcome !== null) entry.outcomes[row.outcome] = (entry.outcomes[row.outcome] ?? 0) + n
  }
  return progress
}

/** Calls in progress and calls started since `since`: of the campaign, and of all the account's campaigns. */
export async function dialCounts (trx: Trx, campaignId: string, userId: string, since: Date) {
  const { rows } = await sql<{ campaign_calling: string, account_calling: string, campaign_recent: string, account_recent: string }>`SELECT
    (SELECT count(*) FROM campaign_contacts WHERE user_id = ${userId} AND campaign_id = ${campaignId} AND status = 'calling') AS campaign_calling,
    (SELECT count(*) FROM campaign_contacts WHERE user_id = ${userId} AND status = 'calling') AS account_calling,
    (SELECT count(*) FROM campaign_dials WHERE campaign_id = ${campaignId} AND dialled_at > ${since}) AS campaign_recent,
    (SELECT count(*) FROM campaign_dials WHERE user_id = ${userId} AND dialled_at > ${since}) AS account_recent`.execute(trx)
  const row = rows[0]
  return { campaignCalling: Number(row.campaign_calling), accountCalling: Number(row.account_calling), campaignRecent: Number(row.campaign_recent), accountRecent: Number(row.account_recent) }
}

/** The campaign's contacts being called whose call has ended, with the call's outcome (locked, skipping those that are). */
export async function endedCalls (trx: Trx, campaignId: string) {
  return await trx.selectFrom('campaign_contacts as cc')
    .innerJoin('calls as c', 'c.id', 'cc.last_call_id')
    .select(['cc.id', 'cc.attempts', 'c.outcome', 'c.disconnection_reason'])
    .where('cc.campaign_id', '=', campaignId).where('cc.status', '=', 'calling').where('c.call_status', '!=', 'started')
    .forUpdate('cc').skipLocked()
    .execute()
}

/** Contacts still `calling` whose call is gone (deleted with its data): they count as failed. */
export async function callingWithoutCall (trx: Trx, campaignId: string) {
  return await trx.selectFrom('campaign_contacts').select(['id', 'attempts'])
    .where('campaign_id', '=', campaignId).where('status', '=', 'calling').where('last_call_id', 'is', null)
    .forUpdate().skipLocked().execute()
}

export async function settleContact (trx: Trx, id: string, change: { status: 'done', outcome: string } | { status: 'pending', due_at: Date }): Promise<void> {
  await trx.updateTable('campaign_contacts').set({ ...change, updated_at: new Date() }).where('id', '=', id).execute()
}

/** Up to `limit` due contacts of the campaign in the zones given, first due first, locked (skipping locked ones). */
export async function claimDue (trx: Trx, campaignId: string, zones: string[], now: Date, limit: number) {
  if (zones.length === 0 || limit <= 0) return []
  return await trx.selectFrom('campaign_contacts').select(['id', 'row_number', 'phone_number', 'columns', 'attempts'])
    .where('campaign_id', '=', campaignId).where('status', '=', 'pending').where('due_at', '<=', now).where('timezone', 'in', zones)
    .orderBy('due_at').orderBy('row_number').limit(limit)
    .forUpdate().skipLocked()
    .execute()
}

/** A contact whose call was just started: `calling`, one attempt more, and the dial recorded (the caps count it). */
export async function markDialled (trx: Trx, contact: { id: string, attempts: number }, campaign: Pick<CampaignRow, 'id' | 'user_id'>, callId: string, now: Date): Promise<void> {
  await trx.updateTable('campaign_contacts').set({ status: 'calling', attempts: contact.attempts + 1, last_call_id: callId, updated_at: new Date() }).where('id', '=', contact.id).execute()
  await trx.insertInto('campaign_dials').values({ campaign_id: campaign.id, user_id: campaign.user_id, contact_id: contact.id, call_id: callId, attempt: contact.attempts + 1, dialled_at: now }).execute()
}

/** The pending contacts of a cancelled campaign are not called. */
export async function cancelPending (trx: Trx, campaignId: string): Promise<void> {
  await trx.updateTable('campaign_contacts').set({ status: 'cancelled', updated_at: new Date() }).where('campaign_id', '=', campaignId).where('status', '=', 'pending').execute()
}

/** Whether any contact is still pending or being called. */
export async function unfinished (trx: Trx, campaignId: string): Promise<{ pending: boolean, calling: boolean }> {
  const rows = await trx.selectFrom('campaign_contacts').select('status').distinct()
    .where('campaign_id', '=', campaignId).where('status', 'in', ['pending', 'calling']).execute()
  return { pending: rows.some((r) => r.status === 'pending'), calling: rows.some((r) => r.status === 'calling') }
}

/** Every contact with its last call's analysis, in list order (the results CSV). */
export async function campaignResults (db: DB, userId: string, campaignId: string) {
  return await db.selectFrom('campaign_contacts as cc')
    .leftJoin('calls as c', 'c.id', 'cc.last_call_id')
    .select(['cc.row_number', 'cc.phone_number', 'cc.timezone', 'cc.columns', 'cc.status', 'cc.outcome', 'cc.attempts', 'cc.last_call_id', 'c.call_summary', 'c.custom_analysis_data'])
    .where('cc.user_id', '=', userId).where('cc.campaign_id', '=', campaignId)
    .orderBy('cc.row_number').execute()
}
