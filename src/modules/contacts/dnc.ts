import type { Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { Database, DoNotCallSource } from '../../db/schema.ts'
import { HttpError } from '../../http/errors.ts'
import { countAddedDoNotCall, insertDoNotCall, listedAmong, lockDoNotCallList } from './dnc-queries.ts'

// The do-not-call list (docs/contacts.md, "Do not call"): numbers the account's agents must not call. Outbound calls
// check it in the transaction that stores the call (calls/phone-calls.ts); campaigns check it at import and dialling.

type Trx = Transaction<Database>

/** Most numbers one account may list: a bound on what one account stores (each outbound call looks its number up by key). */
export const DNC_MAX_NUMBERS = 100_000
/** Most numbers one POST /v1/dnc may add. */
export const DNC_MAX_BULK = 1000
export const DNC_NOTE_MAX_LENGTH = 500

export interface DoNotCallInput { phone_number: string, source: string, call_id?: string, note?: string }

/** The numbers of `phoneNumbers` (E.164) that are on the account's do-not-call list. */
export async function doNotCallAmong (db: DB | Trx, userId: string, phoneNumbers: string[]): Promise<Set<string>> {
  return new Set(await listedAmong(db, userId, [...new Set(phoneNumbers)]))
}

/**
 * The numbers of `phoneNumbers` that must not be called, checked in the transaction that places the calls: the shared
 * lock waits for an add in progress, and holds off a new one until the calls are stored (dnc-queries.ts).
 */
export async function doNotCallForCalls (trx: Trx, userId: string, phoneNumbers: string[]): Promise<Set<string>> {
  await lockDoNotCallList(trx, userId, 'call')
  return await doNotCallAmong(trx, userId, phoneNumbers)
}

/** Whether a call to `phoneNumber` must not be placed (doNotCallForCalls of one number). */
export async function doNotCallForCall (trx: Trx, userId: string, phoneNumber: string): Promise<boolean> {
  return (await doNotCallForCalls(trx, userId, [phoneNumber])).size > 0
}

const isSource = (source: string): source is DoNotCallSource => ['api', 'console', 'call', 'campaign'].includes(source)

/**
 * Adds numbers (those listed already are left as they are); answers the numbers it added. Refused as a whole with
 * `409 dnc_limit_reached` when the list would hold more than DNC_MAX_NUMBERS.
 */
export async function addDoNotCallNumbers (db: DB | Trx, userId: string, entries: DoNotCallInput[]): Promise<string[]> {
  if (!db.isTransaction) return await db.transaction().execute(async (trx) => await addDoNotCallNumbers(trx, userId, entries))
  const trx = db as Trx
  const rows = entries.map((entry) => {
    if (!isSource(entry.source)) throw new Error(`do-not-call source ${entry.source} is none of api, console, call, campaign`)
    return { phone_number: entry.phone_number, source: entry.source, call_id: entry.call_id ?? null, note: entry.note ?? null }
  })
  await lockDoNotCallList(trx, userId, 'add')
  const added = await insertDoNotCall(trx, userId, rows)
  if (added.length > 0 && await countAddedDoNotCall(trx, userId, added.length) > DNC_MAX_NUMBERS) {
    throw new HttpError(409, 'dnc_limit_reached', `an account's do-not-call list holds at most ${DNC_MAX_NUMBERS} numbers; remove some first`)
  }
  return added
}

/** Adds a number (idempotent); `source` 'api' | 'console' | 'call' (the caller asked, through the tool) | 'campaign'. */
export async function addDoNotCall (db: DB | Trx, userId: string, entry: { phone_number: string, source: string, call_id?: string, note?: string }): Promise<void> {
  await addDoNotCallNumbers(db, userId, [entry])
}
