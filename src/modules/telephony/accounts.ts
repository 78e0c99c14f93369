import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import type { TwilioAccount } from '../phone-numbers/carriers/twilio.ts'
import { findTwilioAuthToken } from '../phone-numbers/queries.ts'

// Which Twilio account a webhook comes from: the installation's own (TWILIO_*), or an account whose numbers were
// imported with their credentials. The account a number's calls go through: phone-numbers/number-accounts.ts.

/** The account a webhook names (its AccountSid), with the token that checks its signature. */
export async function webhookAccount (db: DB, config: Pick<Config, 'twilio'>, accountSid: string): Promise<TwilioAccount | undefined> {
  const { apiUrl, accountSid: own, authToken } = config.twilio
  if (own !== undefined && authToken !== undefined && accountSid === own) return { apiUrl, accountSid, authToken }
  const token = /^AC[0-9a-fA-F]{32}$/.test(accountSid) ? await findTwilioAuthToken(db, accountSid) : undefined
  return token === undefined ? undefined : { apiUrl, accountSid, authToken: token }
}
