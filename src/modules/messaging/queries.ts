import { type Insertable, type Selectable, sql, type Updateable } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { MessageChannel, MessageRowStatus, MessagesTable, MessagingSettingsTable } from '../../db/schema.ts'

export type MessageRow = Selectable<MessagesTable>
export type MessagingSettingsRow = Selectable<MessagingSettingsTable>

/** The limits a message must fit: the account's rolling hour, and for a live message its call's. */
export interface MessageLimits { perAccountHour: number, perCall?: number }

/**
 * Stores a message as `sending` when it fits the limits, or as `refused` with the reason when it does not. The
 * count and the insert run under a lock of the account (a transaction-scoped advisory lock, which every process
 * shares), so concurrent sends cannot both take the last place: a count read before the send and written after it
 * would be no limit. Refused messages take no place.
 */
export async function reserveMessage (db: DB, message: Insertable<MessagesTable>, limits: MessageLimits): Promise<MessageRow> {
  return await db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`messages:${message.user_id}`}, 0))`.execute(trx)
    const taken = trx.selectFrom('messages').select((eb) => eb.fn.countAll<string>().as('n')).where('status', '<>', 'refused')
    const [hour, call] = await Promise.all([
      taken.where('user_id', '=', message.user_id).where('created_at', '>', sql<Date>`now() - interval '1 hour'`).executeTakeFirstOrThrow(),
      limits.perCall === undefined || message.call_id == null
        ? undefined
        : taken.where('call_id', '=', message.call_id).where('origin', '=', 'live').executeTakeFirstOrThrow()
    ])
    let refusal: string | undefined
    if (Number(hour.n) >= limits.perAccountHour) {
      refusal = `the account has sent ${limits.perAccountHour} messages in the last hour, its limit (MESSAGES_PER_ACCOUNT_HOUR)`
    } else if (call !== undefined && Number(call.n) >= limits.perCall!) {
      refusal = `the call has sent ${limits.perCall!} messages, its limit (MESSAGES_PER_CALL_MAX)`
    }
    return await trx.insertInto('messages')
      .values({ ...message, status: refusal === undefined ? 'sending' : 'refused', error: refusal ?? null })
      .returningAll().executeTakeFirstOrThrow()
  })
}

/** Stores a message that is refused or settled before any limit counts it. */
export async function insertMessage (db: DB, message: Insertable<MessagesTable>): Promise<MessageRow> {
  return await db.insertInto('messages').values(message).returningAll().executeTakeFirstOrThrow()
}

/** What became of a `sending` message. */
export async function settleMessage (db: DB, id: string, outcome: Pick<Updateable<MessagesTable>, 'status' | 'error' | 'carrier_message_id'>): Promise<void> {
  await db.updateTable('messages').set({ ...outcome, updated_at: new Date() }).where('id', '=', id).execute()
}

export interface MessageFilter {
  callId?: string
  /** Only the messages of a contact's calls (its "communications"). */
  contactId?: string
  channel?: MessageChannel
  status?: MessageRowStatus
  /** Only messages older than this one (its id): the next page. */
  before?: string
  limit: number
}

/** The account's messages, newest first. */
export async function listMessages (db: DB, userId: string, filter: MessageFilter): Promise<MessageRow[]> {
  return await db.selectFrom('messages').selectAll().where('user_id', '=', userId)
    .$if(filter.callId !== undefined, (q) => q.where('call_id', '=', filter.callId!))
    .$if(filter.contactId !== undefined, (q) => q.where('call_id', 'in',
      db.selectFrom('calls').select('id').where('user_id', '=', userId).where('contact_id', '=', filter.contactId!)))
    .$if(filter.channel !== undefined, (q) => q.where('channel', '=', filter.channel!))
    .$if(filter.status !== undefined, (q) => q.where('status', '=', filter.status!))
    .$if(filter.before !== undefined, (q) => q.where((eb) => eb(eb.refTuple('created_at', 'id'), '<',
      eb.selectFrom('messages as b').select(['b.created_at', 'b.id']).where('b.user_id', '=', userId).where('b.id', '=', filter.before!).$asTuple('created_at', 'id'))))
    .orderBy('created_at', 'desc').orderBy('id', 'desc').limit(filter.limit).execute()
}

export async function findMessagingSettings (db: DB, userId: string): Promise<MessagingSettingsRow | undefined> {
  return await db.selectFrom('messaging_settings').selectAll().where('user_id', '=', userId).executeTakeFirst()
}

/** Changes the given settings (a null clears one), keeping the others; answers them all. */
export async function saveMessagingSettings (db: DB, userId: string, change: Omit<Updateable<MessagingSettingsTable>, 'user_id' | 'updated_at'>): Promise<MessagingSettingsRow> {
  return await db.insertInto('messaging_settings').values({ user_id: userId, ...change })
    .onConflict((oc) => oc.column('user_id').doUpdateSet({ ...change, updated_at: new Date() }))
    .returningAll().executeTakeFirstOrThrow()
}
