import { CarrierError } from '../phone-numbers/carriers/carrier.ts'
import { type TwilioAccount, twilioRequester } from '../phone-numbers/carriers/twilio.ts'

// Twilio's Programmable Messaging: the Messages resource of the REST API (2010-04-01), for SMS and, with the
// `whatsapp:` prefix on From and To, for WhatsApp. Twilio answers 201 with the message `queued`; what happens
// afterwards (sent, delivered, undelivered) is not followed here (docs/messaging.md).

/** "The Body parameter for an outgoing message can be up to 1,600 characters" on every channel (Twilio error 21617). */
export const TWILIO_MAX_BODY = 1600

export interface TwilioMessage { sid: string, status: string }

/** `+14155550100`, or `whatsapp:+14155550100` for WhatsApp. */
export const twilioAddress = (channel: 'sms' | 'chat', number: string) => channel === 'chat' ? `whatsapp:${number}` : number

/** Creates (sends) one message; throws CarrierError when Twilio refuses it or cannot be reached. */
export async function createTwilioMessage (account: TwilioAccount, message: { channel: 'sms' | 'chat', from: string, to: string, body: string }): Promise<TwilioMessage> {
  const created = await twilioRequester(account)<TwilioMessage>('POST', '/Messages.json', {
    To: twilioAddress(message.channel, message.to),
    From: twilioAddress(message.channel, message.from),
    Body: message.body
  })
  if (created?.sid === undefined) throw new CarrierError('failed', 'Twilio answered the new message without its sid')
  return created
}

/**
 * Whether sending again may work: Twilio failed or could not be reached (5xx, a network error), or asked to slow
 * down (429). A 4xx refusal (a bad number, a body too long, a sender not of the account) is final.
 */
export const retryableCarrierError = (err: CarrierError) => err.kind === 'failed' || err.status === 429
