import type { Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { Database } from '../../db/schema.ts'
import { sealValues } from '../../db/secrets.ts'

export const PROVIDERS = ['calendar_one', 'calendar_two', 'booking_one', 'booking_two', 'crm'] as const
export type Provider = typeof PROVIDERS[number]

export async function listIntegrations (db: DB, userId: string) {
  return await db.selectFrom('integrations').select(['provider', 'account_label', 'connected_at'])
    .where('user_id', '=', userId).execute()
}

/** Connects the provider, or replaces the credentials of an existing connection; each credential is stored encrypted. */
export async function connectIntegration (db: DB, userId: string, provider: Provider, input: { account_label: string, credentials: Record<string, string> }) {
  const values = { account_label: input.account_label, credentials: JSON.stringify(sealValues(input.credentials)) }
  return await db.insertInto('integrations')
    .values({ user_id: userId, provider, ...values })
    .onConflict((oc) => oc.columns(['user_id', 'provider']).doUpdateSet({ ...values, connected_at: new Date() }))
    .returning(['provider', 'account_label', 'connected_at'])
    .executeTakeFirstOrThrow()
}

export async function disconnectIntegration (db: DB | Transaction<Database>, userId: string, provider: Provider): Promise<boolean> {
  const result = await db.deleteFrom('integrations').where('user_id', '=', userId).where('provider', '=', provider).executeTakeFirst()
  return result.numDeletedRows > 0n
}

/** Switches off the account's tools of one type (their integration was disconnected). */
export async function deactivateTools (db: DB | Transaction<Database>, userId: string, toolType: string): Promise<number> {
  const result = await db.updateTable('agent_tools').set({ is_active: false, updated_at: new Date() })
    .where('user_id', '=', userId).where('tool_type', '=', toolType).where('is_active', '=', true).executeTakeFirst()
  return Number(result.numUpdatedRows)
}
