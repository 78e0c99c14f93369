import { sql, type Insertable, type Selectable, type Transaction } from 'kysely'
import { inOneSnapshot, type DB } from '../../db/database.ts'
import type { AppointmentsTable, Database } from '../../db/schema.ts'
import { PG } from '../../http/errors.ts'

// The appointments' SQL (docs/appointments.md). Overlaps are refused by the table's exclusion constraint
// (migrations/0031_appointments.sql), never by a read before a write: of two concurrent bookings of one time the
// second waits for the first to commit and then fails, which the functions below answer as 'taken'.

export type AppointmentRow = Selectable<AppointmentsTable>
export type NewAppointmentRow = Omit<Insertable<AppointmentsTable>, 'status' | 'sequence' | 'created_at' | 'updated_at' | 'cancelled_at' | 'cancel_reason'>

export type AppointmentStatus = 'booked' | 'cancelled'

/** Whether a write failed because another booked appointment of the tool overlaps (the exclusion constraint). */
export const isOverlap = (err: unknown) => (err as { code?: unknown }).code === PG.EXCLUSION_VIOLATION

/** Stores a booked appointment in the caller's transaction; throws an overlap error (isOverlap) when its time is taken. */
/**
 * Serialises the bookings and moves of one tool's calendar within their transactions. The exclusion constraint alone
 * refuses overlaps, but transactions inserting overlapping rows at once wait on each other's uncommitted rows and
 * deadlock (found by CI: 20 calls booking one slot); under this lock the second one simply meets the first's row.
 */
export async function lockCalendar (trx: Transaction<Database>, toolId: string): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`appointments:${toolId}`}, 0))`.execute(trx)
}

export async function insertAppointment (trx: Transaction<Database>, values: NewAppointmentRow): Promise<AppointmentRow> {
  return await trx.insertInto('appointments').values(values).returningAll().executeTakeFirstOrThrow()
}

/** Moves a booked appointment (sequence + 1); undefined when there is no such booked one, 'taken' when the new time overlaps another. */
export async function moveAppointment (db: DB, userId: string, id: string, times: { starts_at: Date, ends_at: Date, blocked_until: Date, time_zone: string }): Promise<AppointmentRow | 'taken' | undefined> {
  try {
    return await db.transaction().execute(async (trx) => {
      const current = await trx.selectFrom('appointments').select('tool_id').where('user_id', '=', userId).where('id', '=', id).executeTakeFirst()
      if (current === undefined) return undefined
      await lockCalendar(trx, current.tool_id)
      return await trx.updateTable('appointments')
        .set((eb) => ({ ...times, sequence: eb('sequence', '+', 1), updated_at: new Date() }))
        .where('user_id', '=', userId).where('id', '=', id).where('status', '=', 'booked')
        .returningAll().executeTakeFirst()
    })
  } catch (err) {
    if (isOverlap(err)) return 'taken'
    throw err
  }
}

/**
 * Cancels a booked appointment (sequence + 1) and answers it with `changed`; one cancelled before is answered
 * unchanged; undefined when there is none.
 */
export async function cancelAppointmentRow (db: DB, userId: string, id: string, reason: string | null): Promise<{ row: AppointmentRow, changed: boolean } | undefined> {
  const now = new Date()
  const row = await db.updateTable('appointments')
    .set((eb) => ({ status: 'cancelled', cancelled_at: now, cancel_reason: reason, sequence: eb('sequence', '+', 1), updated_at: now }))
    .where('user_id', '=', userId).where('id', '=', id).where('status', '=', 'booked')
    .returningAll().executeTakeFirst()
  if (row !== undefined) return { row, changed: true }
  const before = await findAppointment(db, userId, id)
  return before === undefined ? undefined : { row: before, changed: false }
}

export async function findAppointment (db: DB, userId: string, id: string): Promise<AppointmentRow | undefined> {
  return await db.selectFrom('appointments').selectAll().where('user_id', '=', userId).where('id', '=', id.toLowerCase()).executeTakeFirst()
}

/** A tool's booked appointments that overlap [from, to): the times its free slots leave out. */
export async function bookedBetween (db: DB, toolId: string, from: Date, to: Date): Promise<Array<{ id: string, starts_at: Date, ends_at: Date }>> {
  return await db.selectFrom('appointments').select(['id', 'starts_at', 'ends_at'])
    .where('tool_id', '=', toolId).where('status', '=', 'booked')
    .where(sql<boolean>`tstzrange(starts_at, blocked_until) && tstzrange(${from}, ${to})`)
    .orderBy('starts_at').execute()
}

/** Who a caller is: their number, their address, their contact (any of them finds their appointments). */
export interface Who { phone: string | null, email: string | null, contactId: string | null }

/** A tool's booked appointments of one caller that have not started at `now`, soonest first. */
export async function upcomingOf (db: DB, userId: string, toolId: string, who: Who, now: Date): Promise<AppointmentRow[]> {
  const keys = [
    who.phone !== null && sql<boolean>`phone = ${who.phone}`,
    who.email !== null && sql<boolean>`email = ${who.email}`,
    who.contactId !== null && sql<boolean>`contact_id = ${who.contactId}`
  ].filter((key) => key !== false)
  if (keys.length === 0) return []
  return await db.selectFrom('appointments').selectAll()
    .where('user_id', '=', userId).where('tool_id', '=', toolId).where('status', '=', 'booked').where('starts_at', '>', now)
    .where(sql<boolean>`(${sql.join(keys, sql` OR `)})`)
    .orderBy('starts_at').limit(20).execute()
}

export interface AppointmentFilter {
  agentId?: string
  contactId?: string
  callId?: string
  status?: AppointmentStatus
  /** Appointments that start at or after `from` and before `to`. */
  from?: Date
  to?: Date
  /** The console's workspace rule. */
  workspaceId?: string
}

/** A page of appointments by start time (soonest first), and how many match in all. */
export async function listAppointments (db: DB, userId: string, filter: AppointmentFilter, page: { limit: number, offset: number }): Promise<{ rows: AppointmentRow[], total: number }> {
  return await inOneSnapshot(db, async (snapshot) => {
    const base = snapshot.selectFrom('appointments').where('user_id', '=', userId)
      .$if(filter.agentId !== undefined, (q) => q.where('agent_id', '=', filter.agentId!.toLowerCase()))
      .$if(filter.contactId !== undefined, (q) => q.where('contact_id', '=', filter.contactId!.toLowerCase()))
      .$if(filter.callId !== undefined, (q) => q.where('call_id', '=', filter.callId!.toLowerCase()))
      .$if(filter.status !== undefined, (q) => q.where('status', '=', filter.status!))
      .$if(filter.from !== undefined, (q) => q.where('starts_at', '>=', filter.from!))
      .$if(filter.to !== undefined, (q) => q.where('starts_at', '<', filter.to!))
      .$if(filter.workspaceId !== undefined, (q) => q.where('workspace_id', '=', filter.workspaceId!))
    const rows = await base.selectAll().orderBy('starts_at').orderBy('id').limit(page.limit).offset(page.offset).execute()
    const count = await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()
    return { rows, total: Number(count.n) }
  })
}
