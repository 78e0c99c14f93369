import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { WorkspaceRole } from '../../db/schema.ts'
import { conflict, notFound, PG } from '../../http/errors.ts'
import { generateToken, hashToken } from '../users/keys.ts'
import { ownedRecords } from './owned-records.ts'

/** How long an invitation e-mail's link works; the owner can send a new one. */
export const INVITATION_MS = 7 * 24 * 3600_000

const invitationToken = () => {
  const token = generateToken('wi_')
  return { token, invite_token_hash: hashToken(token), invite_expires_at: new Date(Date.now() + INVITATION_MS) }
}

export async function listWorkspaces (db: DB, userId: string, page: { limit?: number, skip?: number }) {
  return await db.selectFrom('workspaces').selectAll()
    .where('user_id', '=', userId)
    .orderBy('created_at').orderBy('id')
    .limit(page.limit ?? 100).offset(page.skip ?? 0)
    .execute()
}

/** The caller's workspace, or the 404 every route answers for a `workspace_id` that is not theirs. */
export async function requireWorkspace (db: DB, userId: string, id: string) {
  const workspace = await db.selectFrom('workspaces').selectAll().where('user_id', '=', userId).where('id', '=', id).executeTakeFirst()
  if (workspace === undefined) throw notFound('workspace')
  return workspace
}

/** The account that owns a workspace (for the operator's CLI, which acts for no account); undefined when there is none. */
export async function workspaceOwner (db: DB, id: string): Promise<string | undefined> {
  const workspace = await db.selectFrom('workspaces').select('user_id').where('id', '=', id).executeTakeFirst()
  return workspace?.user_id
}

/** Members of the given workspaces: the owner first, then by invitation time. */
export async function listMembers (db: DB, workspaceIds: string[]) {
  if (workspaceIds.length === 0) return []
  return await db.selectFrom('workspace_members')
    .select(['workspace_id', 'email', 'role', 'status', 'invited_at', 'joined_at'])
    .where('workspace_id', 'in', workspaceIds)
    .orderBy((eb) => eb.case().when('role', '=', 'owner').then(0).else(1).end())
    .orderBy('invited_at').orderBy('email')
    .execute()
}

export async function createWorkspace (db: DB, userId: string, input: { name: string, description?: string }) {
  return await db.transaction().execute(async (trx) => {
    const owner = await trx.selectFrom('users').select('email').where('id', '=', userId).executeTakeFirstOrThrow()
    const workspace = await trx.insertInto('workspaces')
      .values({ id: newId(), user_id: userId, name: input.name, description: input.description ?? '' })
      .returningAll().executeTakeFirstOrThrow()
    await trx.insertInto('workspace_members').values({
      workspace_id: workspace.id,
      email: owner.email.toLowerCase(),
      role: 'owner',
      status: 'active',
      member_user_id: userId,
      joined_at: workspace.created_at
    }).execute()
    return workspace
  })
}

export async function updateWorkspace (db: DB, userId: string, id: string, input: { name?: string, description?: string }) {
  const row = await db.updateTable('workspaces')
    .set({
      updated_at: new Date(),
      ...(input.name !== undefined && { name: input.name }),
      ...(input.description !== undefined && { description: input.description })
    })
    .where('user_id', '=', userId).where('id', '=', id)
    .returningAll().executeTakeFirst()
  if (row === undefined) throw notFound('workspace')
  return row
}

/** Like deleteCustomer: refused while records name the workspace; its members go with it. */
export async function deleteWorkspace (db: DB, userId: string, id: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const workspace = await trx.selectFrom('workspaces').select('id').where('user_id', '=', userId).where('id', '=', id).forUpdate().executeTakeFirst()
    if (workspace === undefined) throw notFound('workspace')
    const owned = await ownedRecords(trx, userId, 'workspace_id', id)
    if (owned.length > 0) throw conflict(`the workspace still holds ${owned.join(' and ')}; delete them or move them to another workspace first`, 'workspace_in_use')
    try {
      await trx.deleteFrom('workspaces').where('id', '=', id).execute()
    } catch (err) {
      if ((err as { code?: string }).code === PG.FOREIGN_KEY_VIOLATION) throw conflict('the workspace is still named by other records', 'workspace_in_use')
      throw err
    }
  })
}

/**
 * Invites an address; answers whether this is a new invitation, with the token of its e-mail's link. Inviting
 * an address again changes nothing but its role, and sends nothing.
 */
export async function inviteMember (db: DB, userId: string, workspaceId: string, email: string, role: Exclude<WorkspaceRole, 'owner'>): Promise<{ invited: true, token: string } | { invited: false }> {
  return await db.transaction().execute(async (trx) => {
    // The key-share lock holds off a concurrent delete of the workspace until the member is stored.
    const workspace = await trx.selectFrom('workspaces').select('id').where('user_id', '=', userId).where('id', '=', workspaceId).forKeyShare().executeTakeFirst()
    if (workspace === undefined) throw notFound('workspace')
    const { token, ...link } = invitationToken()
    const inserted = await trx.insertInto('workspace_members')
      .values({ workspace_id: workspaceId, email, role, status: 'invited', ...link })
      .onConflict((oc) => oc.columns(['workspace_id', 'email']).doNothing())
      .returning('email').executeTakeFirst()
    if (inserted !== undefined) return { invited: true, token }
    const existing = await trx.selectFrom('workspace_members').select('role')
      .where('workspace_id', '=', workspaceId).where('email', '=', email).forUpdate().executeTakeFirstOrThrow()
    if (existing.role === 'owner') throw conflict(`${email} owns this workspace`, 'member_is_owner')
    if (existing.role !== role) {
      await trx.updateTable('workspace_members').set({ role }).where('workspace_id', '=', workspaceId).where('email', '=', email).execute()
    }
    return { invited: false }
  })
}

export async function removeMember (db: DB, userId: string, workspaceId: string, email: string): Promise<void> {
  await requireWorkspace(db, userId, workspaceId)
  const member = await db.selectFrom('workspace_members').select('role')
    .where('workspace_id', '=', workspaceId).where('email', '=', email).executeTakeFirst()
  if (member === undefined) throw notFound('member')
  if (member.role === 'owner') throw conflict(`${email} owns this workspace and cannot be removed`, 'member_is_owner')
  await db.deleteFrom('workspace_members').where('workspace_id', '=', workspaceId).where('email', '=', email).where('role', '<>', 'owner').execute()
}

/**
 * The invited person accepts with their own API key: the invitation must be addressed to the e-mail
 * of the caller's account. Accepting twice answers the same membership.
 */
export async function acceptInvitation (db: DB, userId: string, workspaceId: string) {
  const user = await db.selectFrom('users').select('email').where('id', '=', userId).executeTakeFirstOrThrow()
  const email = user.email.toLowerCase()
  await db.updateTable('workspace_members')
    .set({ status: 'active', member_user_id: userId, joined_at: new Date(), invite_token_hash: null, invite_expires_at: null })
    .where('workspace_id', '=', workspaceId).where('email', '=', email).where('status', '=', 'invited')
    .execute()
  const member = await db.selectFrom('workspace_members')
    .innerJoin('workspaces', 'workspaces.id', 'workspace_members.workspace_id')
    .select(['workspaces.id as workspace_id', 'workspaces.name as workspace_name', 'email', 'role', 'status', 'invited_at', 'joined_at'])
    .where('workspace_id', '=', workspaceId).where('email', '=', email).where('member_user_id', '=', userId)
    .executeTakeFirst()
  if (member === undefined) throw notFound('invitation')
  return member
}

/** A new link (and time) for an invitation not yet accepted, to send again; undefined when there is none. */
export async function renewInvitation (db: DB, userId: string, workspaceId: string, email: string): Promise<string | undefined> {
  await requireWorkspace(db, userId, workspaceId)
  const { token, ...link } = invitationToken()
  const row = await db.updateTable('workspace_members').set(link)
    .where('workspace_id', '=', workspaceId).where('email', '=', email).where('status', '=', 'invited')
    .returning('email').executeTakeFirst()
  return row === undefined ? undefined : token
}

export interface Invitation { workspaceId: string, workspaceName: string, ownerEmail: string, email: string, role: WorkspaceRole }

/** The open invitation of an e-mail's link: not accepted, not withdrawn, not expired. */
export async function findInvitation (db: DB, token: string): Promise<Invitation | undefined> {
  const row = await db.selectFrom('workspace_members as m')
    .innerJoin('workspaces as w', 'w.id', 'm.workspace_id').innerJoin('users as u', 'u.id', 'w.user_id')
    .select(['w.id', 'w.name', 'u.email as owner_email', 'm.email', 'm.role'])
    .where('m.invite_token_hash', '=', hashToken(token)).where('m.status', '=', 'invited').where('m.invite_expires_at', '>', new Date())
    .executeTakeFirst()
  return row === undefined ? undefined : { workspaceId: row.id, workspaceName: row.name, ownerEmail: row.owner_email, email: row.email, role: row.role }
}

/**
 * Accepts the invitation of a link for the account `userId` (whose e-mail it is addressed to): one UPDATE,
 * so that the link works once. Answers the workspace's id, or undefined when the link no longer works.
 */
export async function acceptInvitationLink (db: DB, token: string, userId: string): Promise<string | undefined> {
  const row = await db.updateTable('workspace_members')
    .set({ status: 'active', member_user_id: userId, joined_at: new Date(), invite_token_hash: null, invite_expires_at: null })
    .where('invite_token_hash', '=', hashToken(token)).where('status', '=', 'invited').where('invite_expires_at', '>', new Date())
    .returning('workspace_id').executeTakeFirst()
  return row?.workspace_id
}

export interface Membership { workspaceId: string, workspaceName: string, ownerEmail: string, role: WorkspaceRole }

/** The workspaces a user is an active member of (their own ones too, as `owner`), by name. */
export async function listMemberships (db: DB, userId: string): Promise<Membership[]> {
  const rows = await db.selectFrom('workspace_members as m')
    .innerJoin('workspaces as w', 'w.id', 'm.workspace_id').innerJoin('users as u', 'u.id', 'w.user_id')
    .select(['w.id', 'w.name', 'u.email as owner_email', 'm.role'])
    .where('m.member_user_id', '=', userId).where('m.status', '=', 'active')
    .orderBy('w.name').orderBy('w.id')
    .execute()
  return rows.map((row) => ({ workspaceId: row.id, workspaceName: row.name, ownerEmail: row.owner_email, role: row.role }))
}
