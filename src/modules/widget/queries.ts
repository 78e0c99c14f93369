import { sql } from 'kysely'
import type { DB } from '../../db/database.ts'

// The widget's tables (migration 0025): an agent's public key, and the calls started with it per client address.

export interface WidgetKey { agent_id: string, key: string, created_at: Date }

export async function findWidgetKey (db: DB, userId: string, agentId: string): Promise<WidgetKey | undefined> {
  return await db.selectFrom('widget_keys').select(['agent_id', 'key', 'created_at'])
    .where('user_id', '=', userId).where('agent_id', '=', agentId.toLowerCase()).executeTakeFirst()
}

/** Sets the agent's key (a new one, or a replacement), or answers undefined when the account has no such agent. */
export async function putWidgetKey (db: DB, userId: string, agentId: string, key: string): Promise<WidgetKey | undefined> {
  return await db.insertInto('widget_keys')
    .columns(['agent_id', 'user_id', 'key'])
    .expression((eb) => eb.selectFrom('agents').select(['id', 'user_id', eb.val(key).as('key')])
      .where('user_id', '=', userId).where('id', '=', agentId.toLowerCase()))
    .onConflict((oc) => oc.column('agent_id').doUpdateSet({ key, created_at: sql<Date>`now()` }))
    .returning(['agent_id', 'key', 'created_at']).executeTakeFirst()
}

export async function deleteWidgetKey (db: DB, userId: string, agentId: string): Promise<void> {
  await db.deleteFrom('widget_keys').where('user_id', '=', userId).where('agent_id', '=', agentId.toLowerCase()).execute()
}

/** The agent and account a key belongs to. */
export async function findKeyOwner (db: DB, key: string): Promise<{ agent_id: string, user_id: string } | undefined> {
  return await db.selectFrom('widget_keys').select(['agent_id', 'user_id']).where('key', '=', key).executeTakeFirst()
}

/** What a page of any site may learn of an agent's widget, by the agent's id alone (the id is in the page's snippet). */
export async function findWidgetAgent (db: DB, agentId: string) {
  return await db.selectFrom('agents').select(['id', 'agent_name', 'widget_settings'])
    .where('id', '=', agentId.toLowerCase()).executeTakeFirst()
}

/**
 * Counts one widget-key call of `address` to the agent, if its window has room: one upsert, so concurrent
 * requests are counted one after the other by PostgreSQL's row lock and never pass together. A window opens with
 * the first call and lasts an hour. Answers whether the call may go on, or in how many seconds the window ends.
 */
export async function takeWidgetCall (db: DB, agentId: string, address: string, max: number): Promise<{ taken: true } | { taken: false, retryAfterSeconds: number }> {
  const { rows } = await sql<{ calls: number }>`
    INSERT INTO widget_call_budgets AS b (agent_id, address, calls, window_ends_at) VALUES (${agentId}, ${address}, 1, now() + interval '1 hour')
    ON CONFLICT (agent_id, address) DO UPDATE SET
      calls = CASE WHEN b.window_ends_at <= now() THEN 1 ELSE b.calls + 1 END,
      window_ends_at = CASE WHEN b.window_ends_at <= now() THEN now() + interval '1 hour' ELSE b.window_ends_at END
    WHERE b.window_ends_at <= now() OR b.calls < ${max}
    RETURNING calls`.execute(db)
  if (rows.length > 0) return { taken: true }
  const { rows: [window] } = await sql<{ seconds: number }>`
    SELECT ceil(extract(epoch FROM window_ends_at - now()))::int AS seconds FROM widget_call_budgets WHERE agent_id = ${agentId} AND address = ${address}`.execute(db)
  return { taken: false, retryAfterSeconds: Math.max(1, window?.seconds ?? 1) }
}

/** Housekeeping: windows that have ended count nothing any more. */
export async function expireWidgetBudgets (db: DB): Promise<number> {
  const result = await db.deleteFrom('widget_call_budgets').where('window_ends_at', '<=', sql<Date>`now()`).executeTakeFirst()
  return Number(result.numDeletedRows)
}
