import type { DB } from '../../db/database.ts'
import { requireCustomer } from './customer-queries.ts'
import { requireWorkspace } from './workspace-queries.ts'

/** A customer and a workspace named by a request must be the caller's (404 otherwise). */
export async function requireOwners (db: DB, userId: string, owners: { customer_id?: string, workspace_id?: string }): Promise<void> {
  if (owners.customer_id !== undefined) await requireCustomer(db, userId, owners.customer_id)
  if (owners.workspace_id !== undefined) await requireWorkspace(db, userId, owners.workspace_id)
}
