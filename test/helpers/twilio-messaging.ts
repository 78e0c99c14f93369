import { API_VERSION, errorBody, type IncomingNumber, type RestAnswer, sid } from './twilio-voice.ts'

// Twilio's Programmable Messaging as the server under test meets it: the Messages resource of the 2010-04-01 REST
// API (POST /Accounts/{AccountSid}/Messages.json, form-encoded To, From, Body), for SMS and for WhatsApp through the
// `whatsapp:` addressing of the same resource. A created message answers 201 with the Message resource, status
// `queued`; a refusal answers Twilio's error body. The messages are kept for the tests to read.

const E164 = /^\+[1-9]\d{1,14}$/
/** "The Body parameter for an outgoing message can be up to 1,600 characters" (error 21617), on every channel. */
const MAX_BODY = 1600

/** A message Twilio accepted, as the tests read it. */
export interface SentMessage {
  sid: string
  accountSid: string
  /** As posted: `+1…` or `whatsapp:+1…`. */
  from: string
  to: string
  body: string
  channel: 'sms' | 'whatsapp'
}

const fail = (status: number, code: number, message: string): RestAnswer => ({ status, body: errorBody(status, code, message) })

export class TwilioMessaging {
  readonly messages: SentMessage[] = []
  readonly #numbers: () => IncomingNumber[]
  /** WhatsApp senders by account: numbers registered with WhatsApp Business (a Twilio number is not one by itself). */
  readonly #whatsapp = new Map<string, Set<string>>()

  constructor (numbers: () => IncomingNumber[]) {
    this.#numbers = numbers
  }

  /** Numbers that take no SMS (a landline): Twilio answers 21614, "'To' number is not a valid mobile number". */
  readonly landlines = new Set<string>()

  enableWhatsApp (accountSid: string, phoneNumber: string): void {
    const senders = this.#whatsapp.get(accountSid) ?? new Set()
    senders.add(phoneNumber)
    this.#whatsapp.set(accountSid, senders)
  }

  /** The answer to a Messages request; undefined for any other path. */
  rest (method: string, accountSid: string, path: string, form: URLSearchParams): RestAnswer | undefined {
    if (path !== '/Messages.json' || method !== 'POST') return undefined
    const rawTo = form.get('To') ?? ''
    const rawFrom = form.get('From') ?? ''
    const body = form.get('Body') ?? ''
    const whatsapp = rawFrom.startsWith('whatsapp:')
    const to = rawTo.replace(/^whatsapp:/, '')
    const from = rawFrom.replace(/^whatsapp:/, '')
    if (!E164.test(to) || rawTo.startsWith('whatsapp:') !== whatsapp) return fail(400, 21211, `Invalid 'To' Phone Number: ${rawTo}`)
    if (!whatsapp && this.landlines.has(to)) return fail(400, 21614, `'To' number ${rawTo} is not a valid mobile number`)
    if (body.length > MAX_BODY) return fail(400, 21617, 'The concatenated message body exceeds the 1600 character limit.')
    if (whatsapp) {
      if (this.#whatsapp.get(accountSid)?.has(from) !== true) return fail(400, 63007, 'Twilio could not find a Channel with the specified From address')
    } else if (!this.#numbers().some((n) => n.account_sid === accountSid && n.phone_number === from)) {
      return fail(400, 21606, `The From phone number ${rawFrom} is not a valid, SMS-capable inbound phone number or short code for your account.`)
    }
    const message: SentMessage = { sid: sid('SM'), accountSid, from: rawFrom, to: rawTo, body, channel: whatsapp ? 'whatsapp' : 'sms' }
    this.messages.push(message)
    const now = new Date().toUTCString()
    return {
      status: 201,
      body: {
        account_sid: accountSid,
        api_version: API_VERSION,
        body,
        date_created: now,
        date_sent: null,
        date_updated: now,
        direction: 'outbound-api',
        error_code: null,
        error_message: null,
        from: rawFrom,
        messaging_service_sid: null,
        num_media: '0',
        num_segments: String(Math.max(1, Math.ceil(body.length / 153))),
        price: null,
        price_unit: 'USD',
        sid: message.sid,
        status: 'queued',
        subresource_uris: { media: `/${API_VERSION}/Accounts/${accountSid}/Messages/${message.sid}/Media.json` },
        to: rawTo,
        uri: `/${API_VERSION}/Accounts/${accountSid}/Messages/${message.sid}.json`
      }
    }
  }
}
