import { sql, type Selectable, type Transaction } from 'kysely'
import { inOneSnapshot, type DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { ContactsTable, Database } from '../../db/schema.ts'

// The contacts' SQL (docs/contacts.md). A contact belongs to an owner of calls: the account, and within it the
// customer and workspace of the agent that talked to it. The calls table is the calls module's: this module
// only reads it (a contact's calls, its memory); unlinking a deleted contact's calls is the foreign key's
// ON DELETE SET NULL.

export type ContactRow = Selectable<ContactsTable>

/** Whose contact: the account and, within it, the customer and workspace (as the call's agent names them). */
export interface ContactOwner { user_id: string, customer_id: string | null, workspace_id: string | null }

/** What a contact is known by: exactly one of them (migrations/0024_contacts.sql). */
export type ContactKey = { phone_number: string } | { email: string }

/**
 * The contact of `key` for `owner`, created when there is none, its last call set to `at`; answers its id.
 * One statement, so concurrent calls from one number make one contact: a second insert waits for the first
 * and updates the row it made. The row stays locked until the caller's transaction ends (the new call is
 * stored in it), so a contact being deleted meanwhile is deleted after the call is linked and unlinks it.
 */
export async function upsertContact (trx: Transaction<Database>, owner: ContactOwner, key: ContactKey, at: Date): Promise<string> {
  const [column, value] = 'phone_number' in key ? ['phone_number', key.phone_number] : ['email', key.email]
  const { rows } = await sql<{ id: string }>`
    INSERT INTO contacts (id, user_id, customer_id, workspace_id, ${sql.ref(column)}, last_call_at)
    VALUES (${newId()}, ${owner.user_id}, ${owner.customer_id}, ${owner.workspace_id}, ${value}, ${at})
    ON CONFLICT (user_id, (coalesce(customer_id, '')), (coalesce(workspace_id, '')), ${sql.ref(column)}) WHERE ${sql.ref(column)} IS NOT NULL
    DO UPDATE SET last_call_at = greatest(contacts.last_call_at, excluded.last_call_at)
    RETURNING id`.execute(trx)
  return rows[0].id
}

/** Names a contact whose name is unknown (a name set by a person or an earlier call is kept). */
export async function nameUnnamedContact (trx: Transaction<Database>, contactId: string, name: string): Promise<void> {
  await trx.updateTable('contacts').set({ name, updated_at: new Date() }).where('id', '=', contactId).where('name', 'is', null).execute()
}

export interface ContactFilter { search?: string, customerId?: string, workspaceId?: string }

/** `%text%` for LIKE, its wildcards taken literally. */
const containing = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

function contactConditions (userId: string, filter: ContactFilter) {
  const conditions = [sql`user_id = ${userId}`]
  if (filter.customerId !== undefined) conditions.push(sql`customer_id = ${filter.customerId}`)
  if (filter.workspaceId !== undefined) conditions.push(sql`workspace_id = ${filter.workspaceId}`)
  const search = filter.search?.trim() ?? ''
  if (search !== '') {
    // A number is looked for by its digits, however it is written ("+1 (415) 555-0123").
    const digits = search.replace(/[\s().-]/g, '')
    const number = /^\+?\d+$/.test(digits) ? [sql`phone_number LIKE ${containing(digits)}`] : []
    conditions.push(sql`(${sql.join([...number, sql`email LIKE ${containing(search.toLowerCase())}`, sql`name ILIKE ${containing(search)}`], sql` OR `)})`)
  }
  return sql.join(conditions, sql` AND `)
}

/** A page of contacts, the latest call first, with how many calls each has and how many match in all. */
export async function listContacts (db: DB, userId: string, filter: ContactFilter, page: { limit: number, offset: number }) {
  const where = contactConditions(userId, filter)
  return await inOneSnapshot(db, async (snapshot) => {
    const { rows } = await sql<ContactRow & { call_count: number }>`SELECT c.*, (SELECT count(*)::int FROM calls WHERE contact_id = c.id) AS call_count
      FROM contacts c WHERE ${where} ORDER BY last_call_at DESC, id DESC LIMIT ${page.limit} OFFSET ${page.offset}`.execute(snapshot)
    const total = await sql<{ n: number }>`SELECT count(*)::int AS n FROM contacts WHERE ${where}`.execute(snapshot)
    return { rows, total: total.rows[0].n }
  })
}

export async function findContact (db: DB, userId: string, id: string): Promise<ContactRow | undefined> {
  return await db.selectFrom('contacts').selectAll().where('user_id', '=', userId).where('id', '=', id).executeTakeFirst()
}

export async function countContactCalls (db: DB, userId: string, contactId: string): Promise<number> {
  const row = await db.selectFrom('calls').select((eb) => eb.fn.countAll<number>().as('n')).where('contact_id', '=', contactId).where('user_id', '=', userId).executeTakeFirstOrThrow()
  return Number(row.n)
}

/** A contact's calls, newest first, and how many it has. */
export async function contactCalls (db: DB, userId: string, contactId: string, page: { limit: number, offset: number }) {
  return await inOneSnapshot(db, async (snapshot) => {
    const rows = await snapshot.selectFrom('calls')
      .select(['id', 'call_type', 'direction', 'agent_id', 'agent_name', 'call_status', 'start_timestamp', 'end_timestamp', 'call_summary', 'custom_analysis_data', 'collected_data'])
      .where('contact_id', '=', contactId).where('user_id', '=', userId)
      .orderBy('start_timestamp', 'desc').orderBy('id', 'desc').limit(page.limit).offset(page.offset).execute()
    return { rows, total: await countContactCalls(snapshot, userId, contactId) }
  })
}

/** What memory reads of a contact's earlier calls: the analysed ones but `exceptCallId`, newest first. */
export async function memoryCalls (db: DB, userId: string, contactId: string, exceptCallId: string, limit: number) {
  return await db.selectFrom('calls')
    .select(['start_timestamp', 'call_type', 'direction', 'call_summary', 'custom_analysis_data', 'collected_data'])
    .where('contact_id', '=', contactId).where('user_id', '=', userId).where('id', '!=', exceptCallId).where('call_status', '=', 'success')
    .orderBy('start_timestamp', 'desc').orderBy('id', 'desc').limit(limit).execute()
}

export async function renameContact (db: DB, userId: string, id: string, name: string | null): Promise<ContactRow | undefined> {
  return await db.updateTable('contacts').set({ name, updated_at: new Date() }).where('user_id', '=', userId).where('id', '=', id).returningAll().executeTakeFirst()
}

/**
 * Deletes a contact; its calls stay, unlinked (ON DELETE SET NULL). The calls are locked first, in id order:
 * the analysis of one of them locks its call, then names its contact (calls' finishCall), and taking the two
 * in the same order keeps the two from waiting on each other. Answers whether there was such a contact.
 */
export async function deleteContact (db: DB, userId: string, id: string): Promise<boolean> {
  return await db.transaction().execute(async (trx) => {
    await trx.selectFrom('calls').select('id').where('contact_id', '=', id).where('user_id', '=', userId).orderBy('id').forUpdate().execute()
    const deleted = await trx.deleteFrom('contacts').where('user_id', '=', userId).where('id', '=', id).executeTakeFirst()
    return deleted.numDeletedRows > 0n
  })
}
