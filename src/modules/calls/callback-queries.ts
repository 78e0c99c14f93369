import type { Insertable, Selectable, Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { CallCallbacksTable, Database } from '../../db/schema.ts'

// The callbacks of outbound phone calls (migrations/0026_call_callbacks.sql). A callback's status changes only
// from `scheduled`, under its row lock: that is what keeps a job delivered twice from placing two calls.

type Trx = Transaction<Database>
export type CallbackRow = Selectable<CallCallbacksTable>

/** Stores a scheduled callback; undefined when that attempt of the chain exists already. */
export async function insertCallback (trx: Trx, values: Insertable<CallCallbacksTable>): Promise<string | undefined> {
  const row = await trx.insertInto('call_callbacks').values(values)
    .onConflict((oc) => oc.columns(['callback_of', 'attempt']).doNothing())
    .returning('id').executeTakeFirst()
  return row?.id
}

export async function findCallback (db: DB, id: string): Promise<CallbackRow | undefined> {
  return await db.selectFrom('call_callbacks').selectAll().where('id', '=', id).executeTakeFirst()
}

/** The callback a call was placed for: the chain it belongs to and which callback it is; undefined for other calls. */
export async function findCallbackOfCall (db: DB, callId: string): Promise<Pick<CallbackRow, 'callback_of' | 'attempt'> | undefined> {
  return await db.selectFrom('call_callbacks').select(['callback_of', 'attempt']).where('call_id', '=', callId).executeTakeFirst()
}

/** Locks a callback that is still scheduled (FOR UPDATE); undefined when it is not (any more). */
export async function lockScheduledCallback (trx: Trx, id: string): Promise<CallbackRow | undefined> {
  return await trx.selectFrom('call_callbacks').selectAll().where('id', '=', id).where('status', '=', 'scheduled').forUpdate().executeTakeFirst()
}

/** What became of a scheduled callback (locked by lockScheduledCallback). */
export async function settleCallback (trx: Trx, id: string, change: { status: 'placed', callId: string } | { status: 'cancelled' | 'failed', reason: string }): Promise<void> {
  await trx.updateTable('call_callbacks')
    .set(change.status === 'placed'
      ? { status: 'placed', call_id: change.callId, updated_at: new Date() }
      : { status: change.status, reason: change.reason, updated_at: new Date() })
    .where('id', '=', id).where('status', '=', 'scheduled')
    .execute()
}

/** Cancels the account's scheduled callbacks to a number; answers how many. */
export async function cancelCallbacksTo (trx: Trx, userId: string, toNumber: string, reason: string): Promise<number> {
  const result = await trx.updateTable('call_callbacks').set({ status: 'cancelled', reason, updated_at: new Date() })
    .where('user_id', '=', userId).where('to_number', '=', toNumber).where('status', '=', 'scheduled')
    .executeTakeFirst()
  return Number(result.numUpdatedRows)
}
