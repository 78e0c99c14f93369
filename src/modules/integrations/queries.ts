import type { Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { Database } from '../../db/schema.ts'
import { openValues, sealValues } from '../../db/secrets.ts'
import type { AuthMethod, Provider } from './types.ts'

type Db = DB | Transaction<Database>

/** What a connection holds: an API key, or an OAuth access token with the refresh token that renews it. */
export interface Credentials { api_key?: string, access_token?: string, refresh_token?: string }

const LISTED = ['provider', 'method', 'status', 'status_reason', 'account_label', 'connected_at', 'expires_at'] as const

export async function listIntegrations (db: DB, userId: string) {
  return await db.selectFrom('integrations').select(LISTED).where('user_id', '=', userId).execute()
}

/** One connection with its credentials opened; undefined when the provider is not connected. */
export async function integrationOf (db: Db, userId: string, provider: Provider, lock = false) {
  let query = db.selectFrom('integrations').select([...LISTED, 'credentials', 'refreshed_at'])
    .where('user_id', '=', userId).where('provider', '=', provider)
  if (lock) query = query.forUpdate()
  const row = await query.executeTakeFirst()
  return row === undefined ? undefined : { ...row, credentials: openValues(row.credentials) as Credentials }
}

/**
 * Connects the provider, or replaces the credentials of an existing connection (which makes it `connected` again);
 * each credential is stored encrypted. `expires_at`: when an OAuth access token runs out.
 */
export async function connectIntegration (db: Db, userId: string, provider: Provider,
  input: { account_label: string, method: AuthMethod, credentials: Credentials, expires_at?: Date | null }) {
  const values = {
    account_label: input.account_label,
    method: input.method,
    status: 'connected' as const,
    status_reason: null,
    expires_at: input.expires_at ?? null,
    credentials: JSON.stringify(sealValues(defined(input.credentials)))
  }
  return await db.insertInto('integrations')
    .values({ user_id: userId, provider, ...values })
    .onConflict((oc) => oc.columns(['user_id', 'provider']).doUpdateSet({ ...values, connected_at: new Date(), refreshed_at: null }))
    .returning(LISTED)
    .executeTakeFirstOrThrow()
}

/** A refreshed access token (and the new refresh token, when the service rotates it). */
export async function storeTokens (db: Db, userId: string, provider: Provider, credentials: Credentials, expiresAt: Date | null): Promise<void> {
  await db.updateTable('integrations')
    .set({ credentials: JSON.stringify(sealValues(defined(credentials))), expires_at: expiresAt, refreshed_at: new Date() })
    .where('user_id', '=', userId).where('provider', '=', provider).execute()
}

/** The service refused the credentials for good: the account must be connected again (the app says why). */
export async function markRevoked (db: Db, userId: string, provider: Provider, reason: string): Promise<void> {
  await db.updateTable('integrations').set({ status: 'revoked', status_reason: reason })
    .where('user_id', '=', userId).where('provider', '=', provider).execute()
}

export async function disconnectIntegration (db: Db, userId: string, provider: Provider): Promise<boolean> {
  const result = await db.deleteFrom('integrations').where('user_id', '=', userId).where('provider', '=', provider).executeTakeFirst()
  return result.numDeletedRows > 0n
}

/** Switches off the account's tools of one type (their integration was disconnected). */
export async function deactivateTools (db: Db, userId: string, toolType: string): Promise<number> {
  const result = await db.updateTable('agent_tools').set({ is_active: false, updated_at: new Date() })
    .where('user_id', '=', userId).where('tool_type', '=', toolType).where('is_active', '=', true).executeTakeFirst()
  return Number(result.numUpdatedRows)
}

function defined (credentials: Credentials): Record<string, string> {
  return Object.fromEntries(Object.entries(credentials).filter((entry): entry is [string, string] => typeof entry[1] === 'string'))
}
