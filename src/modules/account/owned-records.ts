import { sql } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { Database } from '../../db/schema.ts'

export type OwnerColumn = 'customer_id' | 'workspace_id'

/** Tables whose rows belong to an account and may name a customer and a workspace. */
type OwningTable = {
  [T in keyof Database]: Database[T] extends { user_id: string, customer_id: string | null, workspace_id: string | null } ? T : never
}[keyof Database]

/**
 * Every kind of record that can belong to a customer or a workspace. Deleting a customer or workspace
 * is refused while any of these still names it: a module that adds such a table adds its line here.
 */
export const RECORDS_WITH_OWNERS: ReadonlyArray<{ table: OwningTable, one: string, many: string }> = [
  { table: 'phone_numbers', one: 'phone number', many: 'phone numbers' },
  { table: 'agents', one: 'agent', many: 'agents' },
  { table: 'calls', one: 'call', many: 'calls' },
  { table: 'contacts', one: 'contact', many: 'contacts' },
  { table: 'knowledge_bases', one: 'knowledge base', many: 'knowledge bases' }
]

/** What still names the customer or workspace, for the 409 message: ["2 phone numbers"]. */
export async function ownedRecords (db: DB, userId: string, column: OwnerColumn, ownerId: string): Promise<string[]> {
  const owned: string[] = []
  for (const { table, one, many } of RECORDS_WITH_OWNERS) {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)} where user_id = ${userId} and ${sql.ref(column)} = ${ownerId}`.execute(db)
    if (rows[0].n > 0) owned.push(`${rows[0].n} ${rows[0].n === 1 ? one : many}`)
  }
  return owned
}
