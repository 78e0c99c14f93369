import { sql, type Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { CreditKind, Database } from '../../db/schema.ts'

/** Credits every account receives once, when its subscription is first used (1 credit = 1 US cent of usage). */
export const WELCOME_CREDITS = 1000

/**
 * Makes the account's subscription on first use, with its welcome grant. Two first uses at once make one:
 * the second insert waits for the first one's commit and then does nothing.
 */
async function ensureSubscription (trx: Transaction<Database>, userId: string): Promise<void> {
  const created = await trx.insertInto('subscriptions').values({ user_id: userId })
    .onConflict((oc) => oc.column('user_id').doNothing())
    .returning('user_id').executeTakeFirst()
  if (created !== undefined) {
    await trx.insertInto('credit_ledger')
      .values({ id: newId(), user_id: userId, kind: 'grant', amount: WELCOME_CREDITS, description: 'welcome credits' })
      .execute()
  }
}

async function balanceOf (db: DB, userId: string): Promise<number> {
  const row = await db.selectFrom('credit_ledger')
    .select(sql<number>`coalesce(sum(amount), 0)::bigint`.as('balance'))
    .where('user_id', '=', userId)
    .executeTakeFirstOrThrow()
  return row.balance
}

export interface Subscription {
  plan: 'free' | 'pro' | 'enterprise'
  status: 'active' | 'past_due' | 'canceled'
  creditBalance: number
  autoTopUpEnabled: boolean
  autoTopUpThreshold: number
  topUpAmount: number
  periodStart: Date
  periodEnd: Date
}

/** The subscription with its balance and the monthly period (from the day it began) that contains now. */
export async function getSubscription (db: DB, userId: string): Promise<Subscription> {
  return await db.transaction().execute(async (trx) => {
    await ensureSubscription(trx, userId)
    const row = await trx.selectFrom('subscriptions')
      .select(['plan', 'status', 'auto_top_up_enabled', 'auto_top_up_threshold', 'top_up_amount'])
      // Whole months since the anchor; adding months in SQL keeps a period begun on the 31st at month ends.
      .select(sql<Date>`period_anchor + make_interval(months => (extract(year from age(now(), period_anchor)) * 12 + extract(month from age(now(), period_anchor)))::int)`.as('period_start'))
      .select(sql<Date>`period_anchor + make_interval(months => (extract(year from age(now(), period_anchor)) * 12 + extract(month from age(now(), period_anchor)))::int + 1)`.as('period_end'))
      .where('user_id', '=', userId)
      .executeTakeFirstOrThrow()
    return {
      plan: row.plan,
      status: row.status,
      creditBalance: await balanceOf(trx, userId),
      autoTopUpEnabled: row.auto_top_up_enabled,
      autoTopUpThreshold: row.auto_top_up_threshold,
      topUpAmount: row.top_up_amount,
      periodStart: row.period_start,
      periodEnd: row.period_end
    }
  })
}

export async function updateSubscription (db: DB, userId: string, change: { autoTopUpEnabled?: boolean, autoTopUpThreshold?: number, topUpAmount?: number }): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await ensureSubscription(trx, userId)
    await trx.updateTable('subscriptions')
      .set({
        updated_at: new Date(),
        ...(change.autoTopUpEnabled !== undefined && { auto_top_up_enabled: change.autoTopUpEnabled }),
        ...(change.autoTopUpThreshold !== undefined && { auto_top_up_threshold: change.autoTopUpThreshold }),
        ...(change.topUpAmount !== undefined && { top_up_amount: change.topUpAmount })
      })
      .where('user_id', '=', userId)
      .execute()
  })
}

export interface Charge {
  /** Whole credits to take, > 0. */
  amount: number
  callId?: string
  description?: string
}

export interface ChargeResult {
  entryId: string
  /** The balance after the charge and any top-up; it may be negative: a call is charged after it happened. */
  balance: number
  topUp: { entryId: string, amount: number } | undefined
}

/**
 * Takes credits from the account inside the caller's transaction (the calls work charges a call in the
 * transaction that stores its analysis). When the charge leaves the balance below the auto top-up
 * threshold, one top-up entry is added. The subscription row is locked first, so concurrent charges of
 * one account run one after the other and each sees the top-ups of the ones before: under any number of
 * parallel charges a top-up happens only while the balance is really below the threshold.
 */
export async function chargeCredits (trx: Transaction<Database>, userId: string, charge: Charge): Promise<ChargeResult> {
  if (!Number.isSafeInteger(charge.amount) || charge.amount <= 0) {
    throw new RangeError(`a charge is a whole number of credits above 0, got ${charge.amount}`)
  }
  await ensureSubscription(trx, userId)
  const subscription = await trx.selectFrom('subscriptions')
    .select(['auto_top_up_enabled', 'auto_top_up_threshold', 'top_up_amount'])
    .where('user_id', '=', userId).forUpdate()
    .executeTakeFirstOrThrow()
  const entryId = await addEntry(trx, userId, 'call_charge', -charge.amount, charge)
  let balance = await balanceOf(trx, userId)
  let topUp: ChargeResult['topUp']
  if (subscription.auto_top_up_enabled && balance < subscription.auto_top_up_threshold) {
    const amount = subscription.top_up_amount
    topUp = { entryId: await addEntry(trx, userId, 'top_up', amount, { description: 'auto top-up' }), amount }
    balance += amount
  }
  return { entryId, balance, topUp }
}

async function addEntry (trx: Transaction<Database>, userId: string, kind: CreditKind, amount: number, about: { callId?: string, description?: string }): Promise<string> {
  const id = newId()
  await trx.insertInto('credit_ledger')
    .values({ id, user_id: userId, kind, amount, call_id: about.callId ?? null, description: about.description ?? '' })
    .execute()
  return id
}

export async function listCreditEntries (db: DB, userId: string, page: { limit?: number, skip?: number }) {
  return await db.selectFrom('credit_ledger')
    .select(['id', 'kind', 'amount', 'call_id', 'description', 'created_at'])
    .where('user_id', '=', userId)
    .orderBy('created_at', 'desc').orderBy('id', 'desc')
    .limit(page.limit ?? 100).offset(page.skip ?? 0)
    .execute()
}
