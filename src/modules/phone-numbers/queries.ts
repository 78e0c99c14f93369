import type { Insertable, Updateable } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { PhoneNumbersTable } from '../../db/schema.ts'
import { conflict, notFound, PG } from '../../http/errors.ts'

export interface PhoneNumberFilter {
  inbound_agent_id?: string
  outbound_agent_id?: string
  customer_id?: string
  workspace_id?: string
  limit?: number
  skip?: number
}

export async function listPhoneNumbers (db: DB, userId: string, filter: PhoneNumberFilter) {
  return await db.selectFrom('phone_numbers').selectAll()
    .where('user_id', '=', userId)
    .$if(filter.inbound_agent_id !== undefined, (q) => q.where('inbound_agent_id', '=', filter.inbound_agent_id!))
    .$if(filter.outbound_agent_id !== undefined, (q) => q.where('outbound_agent_id', '=', filter.outbound_agent_id!))
    .$if(filter.customer_id !== undefined, (q) => q.where('customer_id', '=', filter.customer_id!))
    .$if(filter.workspace_id !== undefined, (q) => q.where('workspace_id', '=', filter.workspace_id!))
    .orderBy('created_at').orderBy('id')
    .limit(filter.limit ?? 100).offset(filter.skip ?? 0)
    .execute()
}

export async function findPhoneNumber (db: DB, userId: string, id: string) {
  return await db.selectFrom('phone_numbers').selectAll().where('user_id', '=', userId).where('id', '=', id).executeTakeFirst()
}

/**
 * The account's number called at `phoneNumber` (E.164), for routing an inbound call to its
 * `inbound_agent_id`; undefined when the account has no such number.
 */
export async function findPhoneNumberByE164 (db: DB, userId: string, phoneNumber: string) {
  return await db.selectFrom('phone_numbers').selectAll().where('user_id', '=', userId).where('phone_number', '=', phoneNumber).executeTakeFirst()
}

/** Who holds a number on this installation, if anyone: numbers are unique across accounts. */
export async function numberHolder (db: DB, phoneNumber: string): Promise<string | undefined> {
  const row = await db.selectFrom('phone_numbers').select('user_id').where('phone_number', '=', phoneNumber).executeTakeFirst()
  return row?.user_id
}

export const numberTaken = (phoneNumber: string) => conflict(`${phoneNumber} is already registered on this installation`, 'number_taken')

function mapWriteError (err: unknown, phoneNumber: string | undefined): never {
  const code = (err as { code?: string }).code
  if (code === PG.UNIQUE_VIOLATION && phoneNumber !== undefined) throw numberTaken(phoneNumber)
  // The customer or workspace was deleted between the check and this write.
  if (code === PG.FOREIGN_KEY_VIOLATION) throw notFound('customer or workspace')
  throw err
}

export async function insertPhoneNumber (db: DB, row: Insertable<PhoneNumbersTable>) {
  try {
    return await db.insertInto('phone_numbers').values(row).returningAll().executeTakeFirstOrThrow()
  } catch (err) {
    mapWriteError(err, row.phone_number)
  }
}

export async function updatePhoneNumber (db: DB, userId: string, id: string, change: Updateable<PhoneNumbersTable>) {
  try {
    const row = await db.updateTable('phone_numbers').set({ ...change, updated_at: new Date() })
      .where('user_id', '=', userId).where('id', '=', id)
      .returningAll().executeTakeFirst()
    if (row === undefined) throw notFound('phone number')
    return row
  } catch (err) {
    mapWriteError(err, undefined)
  }
}

export async function deletePhoneNumber (db: DB, userId: string, id: string): Promise<void> {
  await db.deleteFrom('phone_numbers').where('user_id', '=', userId).where('id', '=', id).execute()
}
