import type { Config } from '../../../config.ts'
import type { DB } from '../../../db/database.ts'
import type { CarrierName } from '../../../db/schema.ts'
import { badRequest } from '../../../http/errors.ts'
import type { Carrier, NumberWebhooks } from './carrier.ts'
import { createSandboxCarrier } from './sandbox.ts'
import { createTwilioCarrier, TWILIO_WEBHOOKS } from './twilio.ts'

export interface CarrierCredentials { accountSid: string, authToken: string }

export interface Carriers {
  /** Where this installation searches and buys numbers (PHONE_CARRIER). */
  readonly purchasing: CarrierName
  /** The adapter for a carrier, acting for the given account or, without one, the installation's. */
  get: (name: CarrierName, credentials?: CarrierCredentials) => Carrier
  /** Where a carrier sends the calls of this installation's numbers. */
  readonly webhooks: NumberWebhooks
}

export function createCarriers (db: DB, config: Pick<Config, 'phoneCarrier' | 'twilio' | 'publicBaseUrl'>): Carriers {
  const sandbox = createSandboxCarrier(db)
  const { apiUrl, accountSid, authToken } = config.twilio
  const installationTwilio = accountSid !== undefined && authToken !== undefined ? createTwilioCarrier({ apiUrl, accountSid, authToken }) : undefined
  return {
    purchasing: config.phoneCarrier,
    webhooks: { voiceUrl: config.publicBaseUrl + TWILIO_WEBHOOKS.voice, statusCallback: config.publicBaseUrl + TWILIO_WEBHOOKS.status },
    get (name, credentials) {
      if (name === 'sandbox') return sandbox
      if (credentials !== undefined) return createTwilioCarrier({ apiUrl, ...credentials })
      if (installationTwilio === undefined) {
        throw badRequest('this installation has no Twilio account of its own: give account_sid and auth_token', 'carrier_credentials_required')
      }
      return installationTwilio
    }
  }
}
