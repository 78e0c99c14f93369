import type { Selectable } from 'kysely'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import type { CallRow, PhoneNumbersTable } from '../../db/schema.ts'
import type { TwilioAccount } from '../phone-numbers/carriers/twilio.ts'
import { findPhoneNumberByE164, findTwilioAuthToken } from '../phone-numbers/queries.ts'

// Which Twilio account a webhook comes from or a call goes through: the installation's own (TWILIO_*), or
// an account whose numbers were imported with their credentials.

type TwilioConfig = Pick<Config, 'twilio'>

/** The account a webhook names (its AccountSid), with the token that checks its signature. */
export async function webhookAccount (db: DB, config: TwilioConfig, accountSid: string): Promise<TwilioAccount | undefined> {
  const { apiUrl, accountSid: own, authToken } = config.twilio
  if (own !== undefined && authToken !== undefined && accountSid === own) return { apiUrl, accountSid, authToken }
  const token = /^AC[0-9a-fA-F]{32}$/.test(accountSid) ? await findTwilioAuthToken(db, accountSid) : undefined
  return token === undefined ? undefined : { apiUrl, accountSid, authToken: token }
}

/** The account a Twilio number's calls go through. */
export function numberAccount (config: TwilioConfig, number: Selectable<PhoneNumbersTable>): TwilioAccount | undefined {
  const { apiUrl, accountSid, authToken } = config.twilio
  if (number.carrier !== 'twilio' || number.carrier_account_id === null) return undefined
  if (number.carrier_auth_token !== null) return { apiUrl, accountSid: number.carrier_account_id, authToken: number.carrier_auth_token }
  if (number.carrier_account_id === accountSid && authToken !== undefined) return { apiUrl, accountSid, authToken }
  return undefined
}

/** The account's number a phone call runs on: the number called (inbound) or calling (outbound). */
export async function callNumber (db: DB, call: Pick<CallRow, 'user_id' | 'direction' | 'call_from' | 'call_to'>) {
  const ours = call.direction === 'inbound' ? call.call_to : call.call_from
  return ours === null ? undefined : await findPhoneNumberByE164(db, call.user_id, ours)
}
