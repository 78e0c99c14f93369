import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import { conflict, notFound, PG } from '../../http/errors.ts'
import { ownedRecords } from './owned-records.ts'

export interface CustomerInput {
  name?: string
  email?: string | null
  phone_number?: string | null
  metadata?: Record<string, unknown>
}

export async function listCustomers (db: DB, userId: string, page: { limit?: number, skip?: number }) {
  return await db.selectFrom('customers').selectAll()
    .where('user_id', '=', userId)
    .orderBy('created_at').orderBy('id')
    .limit(page.limit ?? 100).offset(page.skip ?? 0)
    .execute()
}

export async function findCustomer (db: DB, userId: string, id: string) {
  return await db.selectFrom('customers').selectAll().where('user_id', '=', userId).where('id', '=', id).executeTakeFirst()
}

/** The caller's customer, or the 404 every route answers for a `customer_id` that is not theirs. */
export async function requireCustomer (db: DB, userId: string, id: string) {
  const customer = await findCustomer(db, userId, id)
  if (customer === undefined) throw notFound('customer')
  return customer
}

export async function createCustomer (db: DB, userId: string, input: CustomerInput & { name: string }) {
  return await db.insertInto('customers').values({
    id: newId(),
    user_id: userId,
    name: input.name,
    email: input.email ?? null,
    phone_number: input.phone_number ?? null,
    metadata: JSON.stringify(input.metadata ?? {})
  }).returningAll().executeTakeFirstOrThrow()
}

export async function updateCustomer (db: DB, userId: string, id: string, input: CustomerInput) {
  const row = await db.updateTable('customers')
    .set({
      updated_at: new Date(),
      ...(input.name !== undefined && { name: input.name }),
      ...(input.email !== undefined && { email: input.email }),
      ...(input.phone_number !== undefined && { phone_number: input.phone_number }),
      ...(input.metadata !== undefined && { metadata: JSON.stringify(input.metadata) })
    })
    .where('user_id', '=', userId).where('id', '=', id)
    .returningAll().executeTakeFirst()
  if (row === undefined) throw notFound('customer')
  return row
}

/**
 * Deletes a customer that no record names any more. The row lock keeps a record from being given
 * this customer between the check and the delete (its foreign key waits for the lock).
 */
export async function deleteCustomer (db: DB, userId: string, id: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const customer = await trx.selectFrom('customers').select('id').where('user_id', '=', userId).where('id', '=', id).forUpdate().executeTakeFirst()
    if (customer === undefined) throw notFound('customer')
    const owned = await ownedRecords(trx, userId, 'customer_id', id)
    if (owned.length > 0) throw conflict(`the customer still owns ${owned.join(' and ')}; delete them or move them to another customer first`, 'customer_in_use')
    try {
      await trx.deleteFrom('customers').where('id', '=', id).execute()
    } catch (err) {
      if ((err as { code?: string }).code === PG.FOREIGN_KEY_VIOLATION) throw conflict('the customer is still named by other records', 'customer_in_use')
      throw err
    }
  })
}
