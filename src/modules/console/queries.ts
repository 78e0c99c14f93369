import { randomBytes } from 'node:crypto'
import { sql } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { WorkspaceRole } from '../../db/schema.ts'
import { generateToken, hashToken } from '../users/keys.ts'

// A session ends after 14 days without a request, and 30 days after sign-in whatever happens.
export const SESSION_IDLE_MS = 14 * 24 * 3600_000
export const SESSION_MAX_MS = 30 * 24 * 3600_000
// last_seen_at only needs to tell days apart: one write a minute per session at most.
const TOUCH_INTERVAL_MS = 60_000

export const LOGIN_LINK_MS = 15 * 60_000
/** How long after signing in by a link a password may be set without the current one. */
export const LINK_GRACE_MS = 15 * 60_000

export interface ConsoleSession {
  idHash: string
  userId: string
  email: string
  hasPassword: boolean
  csrfToken: string
  viaLink: boolean
  createdAt: Date
  lastSeenAt: Date
  /** The workspace the session works in, while the user is an active member of it; undefined: their own account. */
  workspace: SessionWorkspace | undefined
}

export interface SessionWorkspace { id: string, name: string, ownerId: string, role: WorkspaceRole }

export const newSecret = () => randomBytes(32).toString('base64url')

/**
 * A new session for the user (its id is answered once, for the cookie, and kept only as a hash). Expired
 * sessions of the same user go at the same time, so the table does not grow with abandoned browsers.
 */
export async function createSession (db: DB, userId: string, options: { viaLink: boolean, workspaceId?: string }): Promise<{ id: string, csrfToken: string }> {
  const id = newSecret()
  const csrfToken = newSecret()
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('console_sessions').where('user_id', '=', userId)
      .where((eb) => eb.or([eb('expires_at', '<=', new Date()), eb('last_seen_at', '<=', new Date(Date.now() - SESSION_IDLE_MS))]))
      .execute()
    await trx.insertInto('console_sessions').values({
      id_hash: hashToken(id), user_id: userId, csrf_token: csrfToken, via_link: options.viaLink, expires_at: new Date(Date.now() + SESSION_MAX_MS),
      workspace_id: options.workspaceId ?? null
    }).execute()
  })
  return { id, csrfToken }
}

/** The live session whose cookie holds `id`; undefined when unknown, idle too long or past its end. */
export async function findSession (db: DB, id: string): Promise<ConsoleSession | undefined> {
  const row = await db.selectFrom('console_sessions as s').innerJoin('users as u', 'u.id', 's.user_id')
    // The membership is checked here, on every request: a member removed (or a workspace deleted) loses it at once.
    .leftJoin('workspace_members as m', (join) => join.onRef('m.workspace_id', '=', 's.workspace_id')
      .onRef('m.member_user_id', '=', 's.user_id').on('m.status', '=', 'active'))
    .leftJoin('workspaces as w', 'w.id', 'm.workspace_id')
    .select(['s.id_hash', 's.user_id', 'u.email', 'u.password_hash', 's.csrf_token', 's.via_link', 's.created_at', 's.last_seen_at',
      'w.id as workspace_id', 'w.name as workspace_name', 'w.user_id as workspace_owner', 'm.role'])
    .where('s.id_hash', '=', hashToken(id))
    .where('s.expires_at', '>', new Date())
    .where('s.last_seen_at', '>', new Date(Date.now() - SESSION_IDLE_MS))
    .executeTakeFirst()
  if (row === undefined) return undefined
  const session = {
    idHash: row.id_hash,
    userId: row.user_id,
    email: row.email,
    hasPassword: row.password_hash !== null,
    csrfToken: row.csrf_token,
    viaLink: row.via_link,
    createdAt: row.created_at,
    lastSeenAt: row.last_seen_at,
    workspace: row.workspace_id === null
      ? undefined
      : { id: row.workspace_id, name: row.workspace_name!, ownerId: row.workspace_owner!, role: row.role! }
  }
  if (Date.now() - session.lastSeenAt.getTime() > TOUCH_INTERVAL_MS) {
    await db.updateTable('console_sessions').set({ last_seen_at: new Date() }).where('id_hash', '=', session.idHash).execute()
  }
  return session
}

/** The workspace the session works in (null: the user's own account); the membership is checked by findSession. */
export async function setSessionWorkspace (db: DB, idHash: string, workspaceId: string | null): Promise<void> {
  await db.updateTable('console_sessions').set({ workspace_id: workspaceId }).where('id_hash', '=', idHash).execute()
}

export async function deleteSession (db: DB, idHash: string): Promise<void> {
  await db.deleteFrom('console_sessions').where('id_hash', '=', idHash).execute()
}

/** The user's stored password hash, by e-mail address (case-insensitive); null when there is none yet. */
export async function findSignIn (db: DB, email: string): Promise<{ userId: string, passwordHash: string | null } | undefined> {
  const row = await db.selectFrom('users').select(['id', 'password_hash'])
    .where(sql`lower(email)`, '=', email.toLowerCase()).executeTakeFirst()
  return row === undefined ? undefined : { userId: row.id, passwordHash: row.password_hash }
}

export async function passwordHashOf (db: DB, userId: string): Promise<string | null> {
  const row = await db.selectFrom('users').select('password_hash').where('id', '=', userId).executeTakeFirstOrThrow()
  return row.password_hash
}

/**
 * Stores a new password and ends every other session of the user (a browser someone else may hold); the
 * session that made the change stays, and loses the link's grace.
 */
export async function setPassword (db: DB, userId: string, passwordHash: string, keepSessionHash: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', userId).execute()
    await trx.deleteFrom('console_sessions').where('user_id', '=', userId).where('id_hash', '<>', keepSessionHash).execute()
    await trx.updateTable('console_sessions').set({ via_link: false }).where('id_hash', '=', keepSessionHash).execute()
  })
}

/** A one-time sign-in link's token (kept as a hash), valid LOGIN_LINK_MS. Spent and expired links of the user go. */
export async function createLoginLink (db: DB, userId: string): Promise<string> {
  const token = generateToken('sl_')
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('login_links').where('user_id', '=', userId)
      .where((eb) => eb.or([eb('used_at', 'is not', null), eb('expires_at', '<=', new Date())]))
      .execute()
    await trx.insertInto('login_links').values({ token_hash: hashToken(token), user_id: userId, expires_at: new Date(Date.now() + LOGIN_LINK_MS) }).execute()
  })
  return token
}

export const loginLinkUrl = (publicBaseUrl: string, token: string) => `${publicBaseUrl}/login/link/${token}`

/** Spends the link: its user the first time, within its time; undefined ever after (one UPDATE, so two clicks cannot both win). */
export async function spendLoginLink (db: DB, token: string): Promise<string | undefined> {
  const row = await db.updateTable('login_links').set({ used_at: new Date() })
    .where('token_hash', '=', hashToken(token)).where('used_at', 'is', null).where('expires_at', '>', new Date())
    .returning('user_id').executeTakeFirst()
  return row?.user_id
}

/** A count of sign-in attempts (`email:…`, `address:…`) and how many it allows within the window. */
export interface AttemptBucket { bucket: string, max: number }

/**
 * Counts an attempt in each of `buckets` before its password is checked, or refuses it when one of them, or one of
 * `alsoFull` (read, not counted), holds `max` attempts within the window: then `retryAfterMs`, until its oldest
 * leaves it. A row of sign_in_failures is an attempt running or failed; a success gives its rows back
 * (giveBackAttempt). Each bucket is locked for the transaction (in one order, so that two attempts cannot
 * deadlock), so concurrent attempts are counted one after the other and no more than `max` get through.
 */
export async function reserveAttempt (db: DB, buckets: AttemptBucket[], windowMs: number, alsoFull: AttemptBucket[] = []): Promise<{ ids: number[] } | { retryAfterMs: number }> {
  const names = buckets.map((b) => b.bucket).sort()
  return await db.transaction().execute(async (trx) => {
    for (const name of names) await sql`SELECT pg_advisory_xact_lock(hashtextextended(${name}, 0))`.execute(trx)
    const since = new Date(Date.now() - windowMs)
    // What has left the window goes, so the table stays small: at most `max` rows per bucket.
    await trx.deleteFrom('sign_in_failures').where('bucket', 'in', names).where('failed_at', '<=', since).execute()
    const rows = await trx.selectFrom('sign_in_failures')
      .select((eb) => ['bucket', eb.fn.countAll<number>().as('count'), eb.fn.min('failed_at').as('oldest')])
      .where('bucket', 'in', [...names, ...alsoFull.map((b) => b.bucket)]).where('failed_at', '>', since)
      .groupBy('bucket').execute()
    for (const { bucket, max } of [...buckets, ...alsoFull]) {
      const row = rows.find((r) => r.bucket === bucket)
      if (row !== undefined && Number(row.count) >= max) return { retryAfterMs: row.oldest.getTime() + windowMs - Date.now() }
    }
    const ids = await trx.insertInto('sign_in_failures').values(names.map((bucket) => ({ bucket }))).returning('id').execute()
    return { ids: ids.map((row) => row.id) }
  })
}

/** The attempt succeeded: it does not count. */
export async function giveBackAttempt (db: DB, ids: number[]): Promise<void> {
  await db.deleteFrom('sign_in_failures').where('id', 'in', ids).execute()
}

// What goes with an agent when it is deleted (console/agent-templates.ts's confirmation page).

export interface AgentDependents {
  actions: number
  tools: number
  tests: number
  knowledgeBases: string[]
  /** Numbers that answer or call with it: they keep naming it and take no calls until another agent is chosen. */
  phoneNumbers: string[]
  /** Other agents whose transfer tools hand calls to it: those tools are switched off. */
  transferringAgents: string[]
}

export async function agentDependents (db: DB, userId: string, agentId: string): Promise<AgentDependents> {
  const count = async (table: 'agent_actions' | 'agent_tools' | 'agent_tests') => Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<string>().as('n'))
    .where('user_id', '=', userId).where('agent_id', '=', agentId).executeTakeFirstOrThrow()).n)
  const [actions, tools, tests, knowledgeBases, phoneNumbers, transferring] = await Promise.all([
    count('agent_actions'), count('agent_tools'), count('agent_tests'),
    db.selectFrom('knowledge_base_agents').innerJoin('knowledge_bases', 'knowledge_bases.id', 'knowledge_base_agents.knowledge_base_id')
      .select('knowledge_bases.name').where('knowledge_base_agents.user_id', '=', userId).where('knowledge_base_agents.agent_id', '=', agentId)
      .orderBy('knowledge_bases.name').execute(),
    db.selectFrom('phone_numbers').select('phone_number').where('user_id', '=', userId)
      .where((eb) => eb.or([eb('inbound_agent_id', '=', agentId), eb('outbound_agent_id', '=', agentId)])).orderBy('phone_number').execute(),
    db.selectFrom('agent_tools').innerJoin('agents', 'agents.id', 'agent_tools.agent_id').select('agents.agent_name').distinct()
      .where('agent_tools.user_id', '=', userId).where('agent_tools.tool_type', '=', 'agent_transfer').where('agent_tools.is_active', '=', true)
      .where('agent_tools.agent_id', '<>', agentId)
      .where((eb) => eb(eb.ref('agent_tools.settings', '->>').key('agent_id'), '=', agentId)).orderBy('agents.agent_name').execute()
  ])
  return {
    actions,
    tools,
    tests,
    knowledgeBases: knowledgeBases.map((row) => row.name),
    phoneNumbers: phoneNumbers.map((row) => row.phone_number),
    transferringAgents: transferring.map((row) => row.agent_name)
  }
}

// Drafts: refused forms kept for their session (drafts.ts).

/** How long a refused form stays readable. */
const DRAFT_MAX_MS = 24 * 3600_000

/** Stores the session's draft of the form at `path` in place of an earlier one, and deletes stale drafts. */
export async function putDraft (db: DB, draft: { id: string, sessionHash: string, path: string, values: Record<string, string>, problems: Record<string, string> }): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('console_drafts').where('created_at', '<=', new Date(Date.now() - DRAFT_MAX_MS)).execute()
    await trx.insertInto('console_drafts').values({
      id: draft.id, session_hash: draft.sessionHash, path: draft.path, form_values: JSON.stringify(draft.values), problems: JSON.stringify(draft.problems)
    }).onConflict((oc) => oc.columns(['session_hash', 'path']).doUpdateSet((eb) => ({
      id: eb.ref('excluded.id'), form_values: eb.ref('excluded.form_values'), problems: eb.ref('excluded.problems'), created_at: new Date()
    }))).execute()
  })
}

/** The draft `id` when it is this session's, of the form at `path`, and not stale. */
export async function findDraft (db: DB, sessionHash: string, path: string, id: string): Promise<{ values: Record<string, string>, problems: Record<string, string> } | undefined> {
  const row = await db.selectFrom('console_drafts').select(['form_values', 'problems'])
    .where('id', '=', id).where('session_hash', '=', sessionHash).where('path', '=', path)
    .where('created_at', '>', new Date(Date.now() - DRAFT_MAX_MS))
    .executeTakeFirst()
  return row === undefined ? undefined : { values: row.form_values, problems: row.problems }
}

/** The form was saved: its draft is no longer needed. */
export async function deleteDraft (db: DB, sessionHash: string, path: string): Promise<void> {
  await db.deleteFrom('console_drafts').where('session_hash', '=', sessionHash).where('path', '=', path).execute()
}
