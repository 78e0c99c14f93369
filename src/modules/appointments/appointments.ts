import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import { mailFromAddress, type Mailer } from '../../mail/mailer.ts'
import { findAgent, findCapability } from '../agents/queries.ts'
import { findCallRow } from '../calls/queries.ts'
import { emailAddress, phoneNumber } from '../contacts/contacts.ts'
import { upsertContact } from '../contacts/queries.ts'
import { findMessagingSettings } from '../messaging/queries.ts'
import { emailSenderName } from '../messaging/senders.ts'
import { calendarFile } from './ics.ts'
import { cancelAppointmentRow, insertAppointment, isOverlap, lockCalendar, moveAppointment, type AppointmentRow } from './queries.ts'

// Appointments (docs/appointments.md): booking, moving and cancelling one of the built-in calendar's appointments,
// and telling the tool's notify_email and the person booked, each with an .ics file for their calendar. The free
// times are the appointment_booking tool's business (capabilities/types/appointment-booking.ts); this module keeps
// the appointments and refuses overlaps.

export interface AppointmentDeps {
  db: DB
  config: Pick<Config, 'mailFrom'>
  log: FastifyBaseLogger
  mailer: Mailer
}

const TOOLS = { table: 'agent_tools', typeColumn: 'tool_type' } as const

export interface Times { start: Date, end: Date, bufferMinutes: number, timeZone: string }

export interface NewAppointment extends Times {
  userId: string
  agentId: string
  toolId: string
  /** The call it is booked in; its contact is the appointment's. */
  callId: string | null
  name: string
  email: string | null
  phone: string | null
  notes: string | null
}

const MINUTE = 60_000
const timesOf = (times: Times) => ({
  starts_at: times.start,
  ends_at: times.end,
  blocked_until: new Date(times.end.getTime() + times.bufferMinutes * MINUTE),
  time_zone: times.timeZone
})

/** A text as a column takes it: whitespace collapsed, cut to `max`; null when nothing is left. */
const cleaned = (text: string | null, max: number) => {
  const value = text?.replace(/\s+/g, ' ').trim().slice(0, max) ?? ''
  return value === '' ? null : value
}

/**
 * Books an appointment, linked to the contact of its call, else to the contact of the number or address given
 * (found or created as a call's is: docs/contacts.md); 'taken' when another booked appointment of the tool
 * overlaps it meanwhile. The caller sends the e-mails (announce) once it has its answer.
 */
export async function bookAppointment (db: DB, input: NewAppointment): Promise<AppointmentRow | 'taken'> {
  const phone = phoneNumber(input.phone) ?? null
  const email = emailAddress(input.email) ?? null
  const [agent, found] = await Promise.all([
    findAgent(db, input.userId, input.agentId),
    input.callId === null ? undefined : findCallRow(db, input.callId)
  ])
  const call = found?.user_id === input.userId ? found : undefined
  const owner = { user_id: input.userId, customer_id: agent?.customer_id ?? null, workspace_id: agent?.workspace_id ?? null }
  const key = phone !== null ? { phone_number: phone } : email !== null ? { email } : undefined
  try {
    return await db.transaction().execute(async (trx) => {
      await lockCalendar(trx, input.toolId)
      const contactId = call?.contact_id ?? (key === undefined ? null : await upsertContact(trx, owner, key, call?.start_timestamp ?? new Date()))
      return await insertAppointment(trx, {
        id: newId(),
        user_id: input.userId,
        workspace_id: owner.workspace_id,
        agent_id: input.agentId,
        tool_id: input.toolId,
        call_id: call === undefined ? null : call.id,
        contact_id: contactId,
        ...timesOf(input),
        name: cleaned(input.name, 200) ?? 'Unknown',
        email,
        phone,
        notes: cleaned(input.notes, 2000)
      })
    })
  } catch (err) {
    if (isOverlap(err)) return 'taken'
    throw err
  }
}

/** Moves a booked appointment; undefined when there is no booked one of that id, 'taken' when the new time overlaps another. */
export async function rescheduleAppointment (db: DB, userId: string, id: string, times: Times): Promise<AppointmentRow | 'taken' | undefined> {
  return await moveAppointment(db, userId, id, timesOf(times))
}

/** Cancels an appointment (`changed` false: it was cancelled before, and nothing is sent again); undefined: none. */
export async function cancelAppointment (db: DB, userId: string, id: string, reason: string | null): Promise<{ row: AppointmentRow, changed: boolean } | undefined> {
  return await cancelAppointmentRow(db, userId, id, cleaned(reason, 500))
}

export type Change = 'booked' | 'moved' | 'cancelled'

/** "Tuesday, 3 November 2026 at 10:00 (Europe/Berlin)": the time in the appointment's time zone. */
export const localTime = (date: Date, timeZone: string) =>
  `${new Intl.DateTimeFormat('en-GB', { timeZone, dateStyle: 'full', timeStyle: 'short' }).format(date)} (${timeZone})`

const WORDS: Record<Change, string> = { booked: 'booked', moved: 'moved', cancelled: 'cancelled' }

/**
 * Tells of a change: the tool's notify_email (as the tool has it now; none once the tool is deleted) and the person
 * booked when their address is known, each an e-mail with the event as an .ics attachment (METHOD:REQUEST, or CANCEL).
 * From the account's e-mail display name and Reply-To (docs/messaging.md). Kept in `emails`; never throws for a mail
 * failure.
 */
export async function announce (deps: AppointmentDeps, row: AppointmentRow, change: Change): Promise<void> {
  const { db, config, mailer } = deps
  const [agent, tool, settings] = await Promise.all([
    findAgent(db, row.user_id, row.agent_id),
    findCapability(db, row.user_id, TOOLS, row.agent_id, row.tool_id),
    findMessagingSettings(db, row.user_id)
  ])
  const notify = typeof tool?.settings.notify_email === 'string' ? tool.settings.notify_email : null
  const fromName = settings?.email_from_name ?? undefined
  const business = emailSenderName(config, fromName)
  const agentName = agent?.agent_name ?? 'the agent'
  const when = localTime(row.starts_at, row.time_zone)
  const method = change === 'cancelled' ? 'CANCEL' : 'REQUEST'
  const event = (summary: string) => calendarFile({
    id: row.id,
    method,
    sequence: row.sequence,
    start: row.starts_at,
    end: row.ends_at,
    stamp: row.updated_at,
    summary,
    description: [`${change === 'cancelled' ? 'Cancelled' : 'Booked'} by ${agentName}.`, ...row.notes === null ? [] : [`Notes: ${row.notes}`]].join('\n'),
    organizer: { name: business, email: mailFromAddress(config.mailFrom) },
    attendee: row.email === null ? null : { name: row.name, email: row.email }
  })
  const attachment = (summary: string) => [{ filename: change === 'cancelled' ? 'cancel.ics' : 'invite.ics', content: event(summary), contentType: `text/calendar; charset=utf-8; method=${method}` }]
  const who = [row.name, row.email, row.phone].filter((part) => part !== null).join(', ')
  const mails = []
  if (notify !== null) {
    mails.push({
      to: notify,
      subject: `Appointment ${WORDS[change]}: ${row.name}, ${when}`,
      text: [
        `${agentName} ${WORDS[change]} an appointment.`,
        `When: ${when}`,
        `Who: ${who}`,
        ...row.notes === null ? [] : [`Notes: ${row.notes}`],
        ...row.cancel_reason === null || change !== 'cancelled' ? [] : [`Reason: ${row.cancel_reason}`],
        ...row.call_id === null ? [] : [`Call: ${row.call_id}`],
        `Appointment: ${row.id}`
      ].join('\n'),
      attachments: attachment(`Appointment: ${row.name}`)
    })
  }
  // One e-mail when the person booked is notify_email themselves (an owner trying the agent).
  if (row.email !== null && row.email !== notify?.toLowerCase()) {
    mails.push({
      to: row.email,
      subject: `Your appointment is ${WORDS[change]}: ${when}`,
      text: [
        `Hello ${row.name},`,
        '',
        change === 'cancelled' ? `your appointment on ${when} is cancelled.` : `your appointment is ${WORDS[change]} for ${when}.`,
        change === 'cancelled' ? 'The attached file removes it from your calendar.' : 'The attached file adds it to your calendar.',
        '',
        business
      ].join('\n'),
      attachments: attachment(`Appointment with ${business}`)
    })
  }
  await Promise.all(mails.map(async (mail) => await mailer.sendMail({
    ...mail,
    userId: row.user_id,
    kind: `appointment_${change}`,
    fromName,
    replyTo: settings?.email_reply_to ?? undefined
  })))
}
