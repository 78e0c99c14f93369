import type { Insertable, Selectable, Updateable } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { PhoneNumbersTable } from '../../db/schema.ts'
import { openSecret, sealSecret } from '../../db/secrets.ts'
import { conflict, notFound, PG, type HttpError } from '../../http/errors.ts'

// The carrier auth token and the SIP password are stored encrypted (src/db/secrets.ts): sealed here on
// write, opened here on read.

type Row = Selectable<PhoneNumbersTable>
export type PhoneNumberRow = Row
type Secrets = Pick<Row, 'carrier_auth_token' | 'sip_password'>

const SECRET_COLUMNS = ['carrier_auth_token', 'sip_password'] as const

function withSecrets<T extends Partial<Secrets>> (row: T, through: (value: string) => string): T {
  const out = { ...row }
  for (const column of SECRET_COLUMNS) {
    const value = out[column]
    if (typeof value === 'string') out[column] = through(value)
  }
  return out
}

const opened = (row: Row): Row => withSecrets(row, openSecret)

export interface PhoneNumberFilter {
  inbound_agent_id?: string
  outbound_agent_id?: string
  customer_id?: string
  workspace_id?: string
  limit?: number
  skip?: number
}

export async function listPhoneNumbers (db: DB, userId: string, filter: PhoneNumberFilter) {
  return (await db.selectFrom('phone_numbers').selectAll()
    .where('user_id', '=', userId)
    .$if(filter.inbound_agent_id !== undefined, (q) => q.where('inbound_agent_id', '=', filter.inbound_agent_id!))
    .$if(filter.outbound_agent_id !== undefined, (q) => q.where('outbound_agent_id', '=', filter.outbound_agent_id!))
    .$if(filter.customer_id !== undefined, (q) => q.where('customer_id', '=', filter.customer_id!))
    .$if(filter.workspace_id !== undefined, (q) => q.where('workspace_id', '=', filter.workspace_id!))
    .orderBy('created_at').orderBy('id')
    .limit(filter.limit ?? 100).offset(filter.skip ?? 0)
    .execute()).map(opened)
}

export async function findPhoneNumber (db: DB, userId: string, id: string) {
  const row = await db.selectFrom('phone_numbers').selectAll().where('user_id', '=', userId).where('id', '=', id).executeTakeFirst()
  return row === undefined ? undefined : opened(row)
}

/**
 * The account's number called at `phoneNumber` (E.164), for routing an inbound call to its
 * `inbound_agent_id`; undefined when the account has no such number.
 */
export async function findPhoneNumberByE164 (db: DB, userId: string, phoneNumber: string) {
  const row = await db.selectFrom('phone_numbers').selectAll().where('user_id', '=', userId).where('phone_number', '=', phoneNumber).executeTakeFirst()
  return row === undefined ? undefined : opened(row)
}

/** The number at `phoneNumber` on this installation, whichever account holds it (the number a call reached). */
export async function findNumberAnywhere (db: DB, phoneNumber: string) {
  const row = await db.selectFrom('phone_numbers').selectAll().where('phone_number', '=', phoneNumber).executeTakeFirst()
  return row === undefined ? undefined : opened(row)
}

/** The SIP number whose Twilio SIP Domain took a call (the voice webhook's SipDomainSid). */
export async function findNumberBySipDomain (db: DB, domainSid: string) {
  const row = await db.selectFrom('phone_numbers').selectAll().where('carrier', '=', 'sip').where('sip_carrier', '=', 'twilio').where('sip_domain_sid', '=', domainSid).executeTakeFirst()
  return row === undefined ? undefined : opened(row)
}

/** The SIP number whose Telnyx Call Control application took a call (the call.initiated webhook's connection_id). */
export async function findNumberByTelnyxSipApplication (db: DB, applicationId: string) {
  const row = await db.selectFrom('phone_numbers').selectAll().where('carrier', '=', 'sip').where('sip_carrier', '=', 'telnyx').where('sip_domain_sid', '=', applicationId).executeTakeFirst()
  return row === undefined ? undefined : opened(row)
}

/** The auth token kept with the numbers imported from a Twilio account, for checking that account's webhooks. */
export async function findTwilioAuthToken (db: DB, accountSid: string): Promise<string | undefined> {
  const row = await db.selectFrom('phone_numbers').select('carrier_auth_token')
    .where('carrier', '=', 'twilio').where('carrier_account_id', '=', accountSid).where('carrier_auth_token', 'is not', null)
    .orderBy('created_at', 'desc').limit(1).executeTakeFirst()
  return row?.carrier_auth_token == null ? undefined : openSecret(row.carrier_auth_token)
}

/** Who holds a number on this installation, if anyone: numbers are unique across accounts. */
export async function numberHolder (db: DB, phoneNumber: string): Promise<string | undefined> {
  const row = await db.selectFrom('phone_numbers').select('user_id').where('phone_number', '=', phoneNumber).executeTakeFirst()
  return row?.user_id
}

/** The caller's own number, added again. */
export const numberTaken = (phoneNumber: string) => conflict(`${phoneNumber} is already in your account`, 'number_taken')

function mapWriteError (err: unknown, taken: HttpError | undefined): never {
  const code = (err as { code?: string }).code
  if (code === PG.UNIQUE_VIOLATION && taken !== undefined) throw taken
  // The customer or workspace was deleted between the check and this write.
  if (code === PG.FOREIGN_KEY_VIOLATION) throw notFound('customer or workspace')
  throw err
}

/**
 * Stores a new number. `taken` is the answer when the number reached the installation meanwhile (another
 * account's number must answer as the route answers for a number it cannot see).
 */
export async function insertPhoneNumber (db: DB, row: Insertable<PhoneNumbersTable>, taken: HttpError) {
  try {
    return opened(await db.insertInto('phone_numbers').values(withSecrets(row, sealSecret)).returningAll().executeTakeFirstOrThrow())
  } catch (err) {
    mapWriteError(err, taken)
  }
}

export async function updatePhoneNumber (db: DB, userId: string, id: string, change: Updateable<PhoneNumbersTable>) {
  try {
    const row = await db.updateTable('phone_numbers').set({ ...withSecrets(change, sealSecret), updated_at: new Date() })
      .where('user_id', '=', userId).where('id', '=', id)
      .returningAll().executeTakeFirst()
    if (row === undefined) throw notFound('phone number')
    return opened(row)
  } catch (err) {
    mapWriteError(err, undefined)
  }
}

export async function deletePhoneNumber (db: DB, userId: string, id: string): Promise<void> {
  await db.deleteFrom('phone_numbers').where('user_id', '=', userId).where('id', '=', id).execute()
}

/** The Twilio numbers held at a carrier account and the connected SIP numbers of either carrier (of one account here, or all), oldest first. */
export async function twilioNumbers (db: DB, userId?: string) {
  return (await db.selectFrom('phone_numbers').selectAll()
    .where((eb) => eb.or([eb.and([eb('carrier', '=', 'twilio'), eb('carrier_number_id', 'is not', null)]), eb('sip_domain_sid', 'is not', null)]))
    .$if(userId !== undefined, (q) => q.where('user_id', '=', userId!))
    .orderBy('created_at').orderBy('id').execute()).map(opened)
}

/** The account's numbers imported with the credentials of a Twilio account. */
export async function importedFrom (db: DB, userId: string, accountSid: string) {
  return await db.selectFrom('phone_numbers').select(['id', 'phone_number'])
    .where('user_id', '=', userId).where('carrier', '=', 'twilio').where('carrier_account_id', '=', accountSid).where('carrier_auth_token', 'is not', null)
    .orderBy('created_at').execute()
}

/** A new auth token (sealed) for the account's numbers imported from a Twilio account; answers how many. */
export async function setCarrierToken (db: DB, userId: string, accountSid: string, authToken: string): Promise<number> {
  const result = await db.updateTable('phone_numbers').set({ carrier_auth_token: sealSecret(authToken), updated_at: new Date() })
    .where('user_id', '=', userId).where('carrier', '=', 'twilio').where('carrier_account_id', '=', accountSid).where('carrier_auth_token', 'is not', null)
    .executeTakeFirst()
  return Number(result.numUpdatedRows)
}

/** The account's oldest number that can send text messages: a Twilio or a sandbox number (a SIP trunk carries no messages). */
export async function firstMessagingNumber (db: DB, userId: string) {
  const row = await db.selectFrom('phone_numbers').selectAll().where('user_id', '=', userId).where('carrier', 'in', ['twilio', 'sandbox'])
    .orderBy('created_at').orderBy('id').limit(1).executeTakeFirst()
  return row === undefined ? undefined : opened(row)
}

// ---- Numbers of a tenant's own Telnyx account (migrations/0044) ----

/** The caller's Telnyx account with this webhook key, from an earlier import: our id for it and its Call Control application. */
export async function findTenantTelnyxAccount (db: DB, userId: string, publicKey: string) {
  return await db.selectFrom('phone_numbers').select(['carrier_account_id', 'carrier_connection_id'])
    .where('user_id', '=', userId).where('carrier', '=', 'telnyx').where('carrier_public_key', '=', publicKey)
    .orderBy('created_at').limit(1).executeTakeFirst()
}

/** The Telnyx account a webhook URL names (our id): its public key, API key and application; undefined when no number has it. */
export async function findTelnyxAccountById (db: DB, accountId: string) {
  const row = await db.selectFrom('phone_numbers').select(['carrier_public_key', 'carrier_auth_token', 'carrier_connection_id'])
    .where('carrier', '=', 'telnyx').where('carrier_account_id', '=', accountId).where('carrier_public_key', 'is not', null)
    .orderBy('updated_at', 'desc').limit(1).executeTakeFirst()
  if (row?.carrier_public_key == null || row.carrier_auth_token === null || row.carrier_connection_id === null) return undefined
  return { publicKey: row.carrier_public_key, apiKey: openSecret(row.carrier_auth_token), connectionId: row.carrier_connection_id }
}

/** How many of the caller's numbers came from that Telnyx account. */
export async function countTelnyxAccountNumbers (db: DB, userId: string, accountId: string): Promise<number> {
  const row = await db.selectFrom('phone_numbers').select((eb) => eb.fn.countAll<string>().as('n'))
    .where('user_id', '=', userId).where('carrier', '=', 'telnyx').where('carrier_account_id', '=', accountId).where('carrier_public_key', 'is not', null)
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

/** A new API key (sealed) and/or webhook key for the caller's numbers of that Telnyx account; answers how many. */
export async function setTelnyxCredentials (db: DB, userId: string, accountId: string, change: { apiKey?: string, publicKey?: string }): Promise<number> {
  const result = await db.updateTable('phone_numbers').set({
    ...(change.apiKey !== undefined && { carrier_auth_token: sealSecret(change.apiKey) }),
    ...(change.publicKey !== undefined && { carrier_public_key: change.publicKey }),
    updated_at: new Date()
  }).where('user_id', '=', userId).where('carrier', '=', 'telnyx').where('carrier_account_id', '=', accountId).where('carrier_public_key', 'is not', null)
    .executeTakeFirst()
  return Number(result.numUpdatedRows)
}
