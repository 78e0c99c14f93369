import type { Selectable } from 'kysely'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import type { CallRow, PhoneNumbersTable } from '../../db/schema.ts'
import { telnyxAccountWebhook, type TelnyxAccount } from './carriers/telnyx.ts'
import type { TwilioAccount } from './carriers/twilio.ts'
import { findPhoneNumberByE164 } from './queries.ts'

// Which Twilio account a number's calls and messages go through: the installation's own (TWILIO_*), or the account
// its number was imported from with its credentials. Telephony (calls) and messaging (SMS, WhatsApp) share it.

/**
 * The account a Twilio number's calls and messages go through; for a SIP number connected through Twilio (its SIP
 * Domain, docs/sip.md), the installation's account that holds the domain: its calls only (it sends no messages).
 */
export function numberAccount (config: Pick<Config, 'twilio'>, number: Selectable<PhoneNumbersTable>): TwilioAccount | undefined {
  const { apiUrl, accountSid, authToken } = config.twilio
  if (number.carrier === 'sip') {
    return number.sip_carrier === 'twilio' && number.sip_domain_sid !== null && number.carrier_account_id === accountSid && authToken !== undefined ? { apiUrl, accountSid, authToken } : undefined
  }
  if (number.carrier !== 'twilio' || number.carrier_account_id === null) return undefined
  if (number.carrier_auth_token !== null) return { apiUrl, accountSid: number.carrier_account_id, authToken: number.carrier_auth_token }
  if (number.carrier_account_id === accountSid && authToken !== undefined) return { apiUrl, accountSid, authToken }
  return undefined
}

/**
 * The tenant's own Telnyx account a number was imported from (its API key and Call Control application), and where
 * that account's webhooks come (a path naming it); undefined for a number of the installation's Telnyx account.
 */
export function tenantTelnyxAccount (apiUrl: string, number: Selectable<PhoneNumbersTable>): (TelnyxAccount & { id: string, webhookPath: string }) | undefined {
  const { carrier_account_id: id, carrier_auth_token: apiKey, carrier_connection_id: connectionId } = number
  if (number.carrier !== 'telnyx' || number.carrier_public_key === null || id === null || apiKey === null || connectionId === null) return undefined
  return { id, apiUrl, apiKey, connectionId, webhookPath: telnyxAccountWebhook(id) }
}

/** The account's number a phone call runs on: the number called (inbound) or calling (outbound). */
export async function callNumber (db: DB, call: Pick<CallRow, 'user_id' | 'direction' | 'call_from' | 'call_to'>) {
  const ours = call.direction === 'inbound' ? call.call_to : call.call_from
  return ours === null ? undefined : await findPhoneNumberByE164(db, call.user_id, ours)
}

/**
 * A connected SIP number (its calls carried by Twilio or Telnyx: `sip_carrier`): where the agent's calls go (its
 * termination URI), and with which credentials.
 */
export function sipTrunkOf (number: Selectable<PhoneNumbersTable>): { terminationUri: string, auth: { username: string, password: string } | undefined } | undefined {
  if (number.carrier !== 'sip' || number.sip_domain_sid === null || number.sip_termination_uri === null) return undefined
  const { sip_username: username, sip_password: password } = number
  return { terminationUri: number.sip_termination_uri, auth: username === null || password === null ? undefined : { username, password } }
}
