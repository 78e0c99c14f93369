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
