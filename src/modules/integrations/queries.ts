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

/**
 * Switches off the account's tools of one type (their integration was disconnected); answers the agents whose tools
 * it switched off. Their agents are locked first, in id order, as every change of an agent locks it (its version is
 * written under that lock, agents/versions.ts).
 */
export async function deactivateTools (db: Db, userId: string, toolType: string): Promise<string[]> {
  const holders = db.selectFrom('agent_tools').select('agent_id').where('user_id', '=', userId).where('tool_type', '=', toolType).where('is_active', '=', true)
  await db.selectFrom('agents').select('id').where('user_id', '=', userId).where('id', 'in', holders).orderBy('id').forUpdate().execute()
  const rows = await db.updateTable('agent_tools').set({ is_active: false, updated_at: new Date() })
    .where('user_id', '=', userId).where('tool_type', '=', toolType).where('is_active', '=', true).returning('agent_id').execute()
  return rows.map((row) => row.agent_id)
}

function defined (credentials: Credentials): Record<string, string> {
  return Object.fromEntries(Object.entries(credentials).filter((entry): entry is [string, string] => typeof entry[1] === 'string'))
}

/** The account's active tools per type: what disconnecting an integration switches off (its tools share its name). */
export async function countActiveTools (db: Db, userId: string): Promise<Partial<Record<string, number>>> {
  const rows = await db.selectFrom('agent_tools').select(['tool_type', (eb) => eb.fn.countAll<string>().as('n')])
    .where('user_id', '=', userId).where('is_active', '=', true).groupBy('tool_type').execute()
  return Object.fromEntries(rows.map((row) => [row.tool_type, Number(row.n)]))
}

/** A pending OAuth authorization (connect.ts): the state's hash, the sealed PKCE verifier, whose it is. */
export async function insertState (db: Db, row: { state_hash: string, user_id: string, session_id: string | null, provider: Provider, code_verifier: string, expires_at: Date }): Promise<void> {
  await db.insertInto('oauth_states').values(row).execute()
}

/** Pending authorizations past their time: nobody can finish them any more. */
export async function deleteExpiredStates (db: Db): Promise<void> {
  await db.deleteFrom('oauth_states').where('expires_at', '<=', new Date()).execute()
}

/** Takes (deletes and answers) the pending authorization of a state's hash: one statement, so a state works once. */
export async function takeState (db: Db, stateHash: string) {
  const row = await db.deleteFrom('oauth_states').where('state_hash', '=', stateHash)
    .returning(['user_id', 'session_id', 'provider', 'code_verifier', 'expires_at']).executeTakeFirst()
  return row === undefined ? undefined : { ...row, provider: row.provider as Provider }
}
