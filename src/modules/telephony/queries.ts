import { sql } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { CallRow } from '../../db/schema.ts'
import type { Conversation } from '../../db/shapes.ts'

// The telephony side of a call's row: the carrier's id of the call, the one-time token of its media stream,
// and the conversation kept while the call is forwarded (calls.forwarding).

type Carrier = NonNullable<CallRow['carrier']>

/** The call a carrier's call id names (Twilio's CallSid, Telnyx's call_control_id). */
export async function findCarrierCall (db: DB, callSid: string, carrier: Carrier = 'twilio'): Promise<CallRow | undefined> {
  return await db.selectFrom('calls').selectAll().where('carrier', '=', carrier).where('carrier_call_id', '=', callSid).executeTakeFirst()
}

/** Records the carrier's id of an outbound call (once: a later, different id is refused). */
export async function setCarrierCallId (db: DB, callId: string, callSid: string): Promise<boolean> {
  const row = await db.updateTable('calls').set({ carrier_call_id: callSid })
    .where('id', '=', callId).where('carrier', 'is not', null)
    .where((eb) => eb.or([eb('carrier_call_id', 'is', null), eb('carrier_call_id', '=', callSid)]))
    .returning('id').executeTakeFirst()
  return row !== undefined
}

/** A new token for the call's next media stream (replacing any unspent one); false when the call has ended. */
export async function setStreamToken (db: DB, callId: string, hash: string, expires: Date): Promise<boolean> {
  const row = await db.updateTable('calls').set({ stream_token_hash: hash, stream_token_expires_at: expires })
    .where('id', '=', callId).where('call_status', '=', 'started')
    .returning('id').executeTakeFirst()
  return row !== undefined
}

/**
 * A media stream opens its call: the token is spent (one stream per token), and the conversation kept while
 * the call was forwarded is handed over (and cleared), atomically. An outbound call's stream opens once the
 * person answered: the answer is recorded here unless the status callback told it earlier.
 */
export async function takeStreamToken (db: DB, hash: string, carrier: Carrier = 'twilio'): Promise<{ call: CallRow, resume: Conversation | undefined } | undefined> {
  const result = await sql<CallRow & { held: Conversation | null }>`
    UPDATE calls c SET joined_at = coalesce(c.joined_at, now()), stream_token_hash = NULL, forwarding = NULL,
      answered_at = CASE WHEN c.direction = 'outbound' THEN coalesce(c.answered_at, now()) ELSE c.answered_at END
    FROM (SELECT id, forwarding FROM calls WHERE stream_token_hash = ${hash} FOR UPDATE) held
    WHERE c.id = held.id AND c.call_status = 'started' AND c.carrier = ${carrier} AND c.stream_token_expires_at > now()
    RETURNING c.*, held.forwarding AS held`.execute(db)
  const row = result.rows[0]
  if (row === undefined) return undefined
  const { held, ...call } = row
  return { call, resume: held ?? undefined }
}

/** Keeps the conversation with a call that is being forwarded; false when the call is no longer started. */
export async function holdForwarding (db: DB, callId: string, state: Conversation): Promise<boolean> {
  const row = await db.updateTable('calls').set({ forwarding: JSON.stringify(state) })
    .where('id', '=', callId).where('call_status', '=', 'started')
    .returning('id').executeTakeFirst()
  return row !== undefined
}

export async function clearForwarding (db: DB, callId: string): Promise<void> {
  await db.updateTable('calls').set({ forwarding: null, transfer_answered_at: null }).where('id', '=', callId).execute()
}

/** The person a forwarded Telnyx call rang answered (its transfer leg's call.answered): the first answer is kept. */
export async function recordTransferAnswer (db: DB, callId: string, at: Date): Promise<void> {
  await db.updateTable('calls').set({ transfer_answered_at: sql<Date>`coalesce(transfer_answered_at, least(${at}::timestamptz, now()))` })
    .where('id', '=', callId).where('call_status', '=', 'started').where('forwarding', 'is not', null)
    .execute()
}

/** A forwarding that nobody answered: its outcome is kept, and a token opens the stream that takes the call back. */
export async function takeBack (db: DB, callId: string, state: Conversation, hash: string, expires: Date): Promise<boolean> {
  const row = await db.updateTable('calls').set({ forwarding: JSON.stringify(state), stream_token_hash: hash, stream_token_expires_at: expires, transfer_answered_at: null })
    .where('id', '=', callId).where('call_status', '=', 'started').where('forwarding', 'is not', null)
    .returning('id').executeTakeFirst()
  return row !== undefined
}

/**
 * The carrier says when an outbound call was answered (Twilio's `answered` status callback): the earliest
 * answer known is kept, never before the call started nor after now.
 */
export async function recordAnswer (db: DB, callId: string, at: Date): Promise<void> {
  await db.updateTable('calls')
    .set({ answered_at: sql<Date>`least(answered_at, greatest(start_timestamp, least(${at}::timestamptz, now())))` })
    .where('id', '=', callId).where('direction', '=', 'outbound').where('call_status', '=', 'started')
    .execute()
}

// Warm transfers (telephony/warm.ts): the call to the person is kept in calls.forwarding's `warm` member.

/** Records the Twilio id of the call placed to the person of a warm transfer. */
export async function setWarmCallSid (db: DB, callId: string, callSid: string): Promise<void> {
  await db.updateTable('calls').set({ forwarding: sql`jsonb_set(forwarding, '{warm,call_sid}', to_jsonb(${callSid}::text))` })
    .where('id', '=', callId).where('call_status', '=', 'started').where(sql<boolean>`forwarding ? 'warm'`)
    .execute()
}

/** Whether `callSid` is the call to the person of the call's warm transfer (or none was recorded yet: Twilio answered its creation late). */
const isWarmLeg = (callSid: string) => sql<boolean>`coalesce(forwarding #>> '{warm,call_sid}', ${callSid}) = ${callSid}`

/** The person took the call (once): false when the call ended, or another answer came first. */
export async function acceptWarm (db: DB, callId: string, callSid: string): Promise<boolean> {
  const row = await db.updateTable('calls').set({ forwarding: sql`jsonb_set(forwarding, '{warm,accepted_at}', to_jsonb(${Date.now()}::bigint))` })
    .where('id', '=', callId).where('call_status', '=', 'started').where(isWarmLeg(callSid))
    .where(sql<boolean>`forwarding #> '{warm,accepted_at}' = 'null'::jsonb`)
    .returning('id').executeTakeFirst()
  return row !== undefined
}

/**
 * The person of a Telnyx warm transfer answered (call.answered of their call): when they answered is kept (their
 * minutes run from then, as a blind forwarding's do) and their call recorded; false for a repeat, another call, or
 * a call no longer held.
 */
export async function answerWarm (db: DB, callId: string, callSid: string, at: Date): Promise<boolean> {
  const row = await db.updateTable('calls').set({
    transfer_answered_at: sql<Date>`least(${at}::timestamptz, now())`,
    forwarding: sql`jsonb_set(forwarding, '{warm,call_sid}', to_jsonb(${callSid}::text))`
  })
    .where('id', '=', callId).where('call_status', '=', 'started').where(sql<boolean>`forwarding ? 'warm'`).where(isWarmLeg(callSid))
    .where('transfer_answered_at', 'is', null)
    .returning('id').executeTakeFirst()
  return row !== undefined
}

/** A warm transfer nobody took: like takeBack, once (the call to the person is no longer held after it). */
export async function takeBackWarm (db: DB, callId: string, callSid: string, state: Conversation, hash: string, expires: Date): Promise<boolean> {
  const row = await db.updateTable('calls').set({ forwarding: JSON.stringify(state), stream_token_hash: hash, stream_token_expires_at: expires, transfer_answered_at: null })
    .where('id', '=', callId).where('call_status', '=', 'started').where(sql<boolean>`forwarding ? 'warm'`).where(isWarmLeg(callSid))
    .returning('id').executeTakeFirst()
  return row !== undefined
}

/** What the carrier's answering-machine detection said of a live call (the latest verdict); false when the call has ended. */
export async function recordAnsweredBy (db: DB, callId: string, answeredBy: string): Promise<boolean> {
  const row = await db.updateTable('calls').set({ answered_by: answeredBy })
    .where('id', '=', callId).where('call_status', '=', 'started')
    .returning('id').executeTakeFirst()
  return row !== undefined
}

/**
 * Keeps a detection verdict of a live call unless one that decides is already kept: Telnyx's events may repeat or
 * come out of order, and the first decisive verdict is the one its session acts on. `machine_start` (a machine, its
 * greeting still playing) is kept only where nothing is. False when nothing changed (or the call has ended).
 */
export async function settleAnsweredBy (db: DB, callId: string, answeredBy: string): Promise<boolean> {
  const row = await db.updateTable('calls').set({ answered_by: answeredBy })
    .where('id', '=', callId).where('call_status', '=', 'started')
    .where((eb) => answeredBy === 'machine_start' ? eb('answered_by', 'is', null) : eb.or([eb('answered_by', 'is', null), eb('answered_by', '=', 'machine_start')]))
    .returning('id').executeTakeFirst()
  return row !== undefined
}
