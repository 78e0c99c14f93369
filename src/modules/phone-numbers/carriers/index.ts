import type { Config } from '../../../config.ts'
import type { DB } from '../../../db/database.ts'
import type { CarrierName } from '../../../db/schema.ts'
import { unreachableFromInternet } from '../../../http/addresses.ts'
import { badRequest } from '../../../http/errors.ts'
import type { Carrier, NumberWebhooks } from './carrier.ts'
import { createSandboxCarrier } from './sandbox.ts'
import { createTelnyxCarrier, TELNYX_WEBHOOKS, telnyxRequester } from './telnyx.ts'
import { createTelnyxSip, type TelnyxSip } from './telnyx-sip.ts'
import { createTwilioSip, type TwilioSip } from './twilio-sip.ts'
import { createTwilioCarrier, twilioRequester, TWILIO_WEBHOOKS } from './twilio.ts'

export interface CarrierCredentials { accountSid: string, authToken: string }

export interface Carriers {
  /** Where this installation searches and buys numbers (PHONE_CARRIER). */
  readonly purchasing: CarrierName
  /** The adapter for a carrier, acting for the given account or, without one, the installation's. */
  get: (name: CarrierName, credentials?: CarrierCredentials) => Carrier
  /** Where a carrier sends the calls of this installation's numbers. */
  readonly webhooks: NumberWebhooks
  /** Why Twilio could not reach `webhooks` (PUBLIC_BASE_URL), if it could not: no number is pointed there then. */
  readonly webhooksProblem: string | undefined
  /**
   * The carrier new SIP trunk numbers are set up at (connect-to-sip; SIP_CARRIER picks it, Twilio by default): the
   * installation's Twilio or Telnyx account; undefined without that account, and under PHONE_CARRIER=sandbox, which
   * never reaches a real carrier.
   */
  readonly sip: TwilioSip | TelnyxSip | undefined
  /** Each SIP carrier this installation can reach, whether or not new SIP numbers go there (a number connected before stays where it is). */
  readonly sipCarriers: { twilio?: TwilioSip, telnyx?: TelnyxSip }
  /**
   * For numbers a tenant imports from its own Telnyx account: Telnyx's API, this server's public address (the
   * account's webhook URL is made from it) and the installation's own webhook key, which a tenant account may not give.
   */
  readonly tenantTelnyx: { apiUrl: string, publicBaseUrl: string, installationPublicKey: string | undefined }
}

/** Why Twilio could not reach this server's webhooks at PUBLIC_BASE_URL; undefined when it can, or under TWILIO_ALLOW_PRIVATE_BASE_URL. */
export function twilioWebhooksProblem (config: Pick<Config, 'twilio' | 'publicBaseUrl'>): string | undefined {
  if (config.twilio.allowPrivateBaseUrl) return undefined
  const why = unreachableFromInternet(config.publicBaseUrl)
  return why === undefined
    ? undefined
    : `PUBLIC_BASE_URL (${config.publicBaseUrl}) cannot be reached by Twilio: ${why}. Set it to this server's public https:// address; TWILIO_ALLOW_PRIVATE_BASE_URL=true lifts this for a Twilio stand-in on your own network`
}

export function createCarriers (db: DB, config: Pick<Config, 'phoneCarrier' | 'twilio' | 'telnyx' | 'publicBaseUrl'>): Carriers {
  const sandbox = createSandboxCarrier(db)
  const { apiKey, connectionId } = config.telnyx
  const telnyx = apiKey !== undefined && connectionId !== undefined ? createTelnyxCarrier({ apiUrl: config.telnyx.apiUrl, apiKey, connectionId }) : undefined
  const { apiUrl, accountSid, authToken } = config.twilio
  const own = accountSid !== undefined && authToken !== undefined ? { apiUrl, accountSid, authToken } : undefined
  const installationTwilio = own === undefined ? undefined : createTwilioCarrier(own)
  const sandboxed = config.phoneCarrier === 'sandbox'
  const sipCarriers = {
    twilio: own === undefined || sandboxed ? undefined : createTwilioSip(own.accountSid, twilioRequester(own)),
    // Its webhook is the installation's Telnyx webhook, whose signatures the installation's key checks.
    telnyx: telnyx === undefined || sandboxed ? undefined : createTelnyxSip(telnyxRequester({ apiUrl: config.telnyx.apiUrl, apiKey: apiKey! }), config.publicBaseUrl + TELNYX_WEBHOOKS.webhook)
  }
  return {
    purchasing: config.phoneCarrier,
    webhooks: { voiceUrl: config.publicBaseUrl + TWILIO_WEBHOOKS.voice, statusCallback: config.publicBaseUrl + TWILIO_WEBHOOKS.status },
    webhooksProblem: twilioWebhooksProblem(config),
    sip: sipCarriers[config.telnyx.sipCarrier],
    sipCarriers,
    tenantTelnyx: { apiUrl: config.telnyx.apiUrl, publicBaseUrl: config.publicBaseUrl, installationPublicKey: config.telnyx.publicKey },
    get (name, credentials) {
      if (name === 'sandbox') return sandbox
      // Telnyx numbers are the installation's account's (TELNYX_*): its webhooks are checked with that account's key.
      if (name === 'telnyx') {
        if (telnyx === undefined) throw badRequest('this installation has no Telnyx account (TELNYX_API_KEY, TELNYX_CONNECTION_ID)', 'carrier_disabled')
        return telnyx
      }
      if (credentials !== undefined) return createTwilioCarrier({ apiUrl, ...credentials })
      if (installationTwilio === undefined) {
        throw badRequest('this installation has no Twilio account of its own: give account_sid and auth_token', 'carrier_credentials_required')
      }
      return installationTwilio
    }
  }
}
