import { sql, type Selectable, type Transaction } from 'kysely'
import { inOneSnapshot, type DB } from '../../db/database.ts'
import type { Database, DoNotCallSource, DoNotCallTable } from '../../db/schema.ts'

// The do-not-call list's SQL (docs/contacts.md, "Do not call"). One list per account, one row per number.

export type DoNotCallRow = Selectable<DoNotCallTable>

/**
 * The account's lock of its list, held until the transaction ends: exclusive to add, shared to place a call (so a number listed while a call to it is being
 * placed is either seen, or listed after the call was stored: never missed by a check that has already run).
 */
export async function lockDoNotCallList (trx: Transaction<Database>, userId: string, mode: 'add' | 'call'): Promise<void> {
  const key = `do_not_call:${userId}`
  if (mode === 'add') await sql`SELECT pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(trx)
  else await sql`SELECT pg_advisory_xact_lock_shared(hashtextextended(${key}, 0))`.execute(trx)
}

export interface DoNotCallInsert { phone_number: string, source: DoNotCallSource, call_id: string | null, note: string | null }

/** Inserts the numbers not listed yet; answers those it inserted. Run under lockDoNotCallList(…, 'add'). */
export async function insertDoNotCall (trx: Transaction<Database>, userId: string, entries: DoNotCallInsert[]): Promise<string[]> {
  if (entries.length === 0) return []
  const rows = await trx.insertInto('do_not_call')
    .values(entries.map((entry) => ({
      user_id: userId,
      ...entry,
      // The account's stored call, or none: an agent test's conversation is a call that is never stored.
      call_id: entry.call_id === null ? null : sql<string>`(SELECT id FROM calls WHERE id = ${entry.call_id} AND user_id = ${userId})`
    })))
    .onConflict((oc) => oc.columns(['user_id', 'phone_number']).doNothing())
    .returning('phone_number').execute()
  return rows.map((row) => row.phone_number)
}

/** Adds `added` to the account's count of listed numbers; answers the new count. */
export async function countAddedDoNotCall (trx: Transaction<Database>, userId: string, added: number): Promise<number> {
  const row = await trx.insertInto('do_not_call_counts').values({ user_id: userId, size: added })
    .onConflict((oc) => oc.column('user_id').doUpdateSet((eb) => ({ size: eb('do_not_call_counts.size', '+', added) })))
    .returning('size').executeTakeFirstOrThrow()
  return row.size
}

/** The numbers of `phoneNumbers` on the account's list. */
export async function listedAmong (db: DB | Transaction<Database>, userId: string, phoneNumbers: string[]): Promise<string[]> {
  if (phoneNumbers.length === 0) return []
  const rows = await db.selectFrom('do_not_call').select('phone_number').where('user_id', '=', userId).where('phone_number', 'in', phoneNumbers).execute()
  return rows.map((row) => row.phone_number)
}

export async function findDoNotCall (db: DB, userId: string, phoneNumber: string): Promise<DoNotCallRow | undefined> {
  return await db.selectFrom('do_not_call').selectAll().where('user_id', '=', userId).where('phone_number', '=', phoneNumber).executeTakeFirst()
}

export interface DoNotCallFilter {
  /** One number, exactly. */
  phoneNumber?: string
  /** Digits the number contains ("415 555" finds +14155550123). */
  digits?: string
}

/** A page of the list, the newest first, and how many entries match in all. */
export async function listDoNotCall (db: DB, userId: string, filter: DoNotCallFilter, page: { limit: number, offset: number }) {
  return await inOneSnapshot(db, async (snapshot) => {
    let query = snapshot.selectFrom('do_not_call').where('user_id', '=', userId)
    if (filter.phoneNumber !== undefined) query = query.where('phone_number', '=', filter.phoneNumber)
    if (filter.digits !== undefined && filter.digits !== '') query = query.where('phone_number', 'like', `%${filter.digits}%`)
    const rows = await query.selectAll().orderBy('created_at', 'desc').orderBy('phone_number').limit(page.limit).offset(page.offset).execute()
    const total = await query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()
    return { rows, total: Number(total.n) }
  })
}

/** Takes a number off the list (and its count); answers whether it was on it. */
export async function deleteDoNotCall (db: DB, userId: string, phoneNumber: string): Promise<boolean> {
  return await db.transaction().execute(async (trx) => {
    const deleted = await trx.deleteFrom('do_not_call').where('user_id', '=', userId).where('phone_number', '=', phoneNumber).executeTakeFirst()
    if (deleted.numDeletedRows === 0n) return false
    // The row exists: the add that listed the number made it.
    await trx.updateTable('do_not_call_counts').set((eb) => ({ size: eb('size', '-', 1) })).where('user_id', '=', userId).execute()
    return true
  })
}
