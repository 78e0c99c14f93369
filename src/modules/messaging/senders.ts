import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import type { CallRow } from '../../db/schema.ts'
import { mailFromAddress } from '../../mail/mailer.ts'
import { callNumber } from '../phone-numbers/number-accounts.ts'
import { findPhoneNumberByE164, firstMessagingNumber, type PhoneNumberRow } from '../phone-numbers/queries.ts'
import { findMessagingSettings } from './queries.ts'

// Who a message comes from: the account's own numbers for SMS and WhatsApp, the installation's MAIL_FROM address
// (with the account's display name) for e-mail.

export const E164 = /^\+[1-9][0-9]{1,14}$/
/**
 * One e-mail address, and nothing a mail library would read as a second address or a display name (commas,
 * semicolons, angle brackets, quotes): a recipient or Reply-To must not smuggle in another.
 */
export const SINGLE_EMAIL_PATTERN = '^[^\\s@,;:<>()"\'\\\\\\[\\]]+@[^\\s@,;:<>()"\'\\\\\\[\\]]+$'

/** Who the account's e-mails are from, in words: its display name, else MAIL_FROM's, else MAIL_FROM's address. */
export function emailSenderName (config: Pick<Config, 'mailFrom'>, name: string | undefined): string {
  return name ?? (config.mailFrom.replace(/\s*<[^<>]*>\s*$/, '').replace(/^"(.*)"$/, '$1').trim() || mailFromAddress(config.mailFrom))
}

/** The From of the account's e-mails: MAIL_FROM's address, with the account's display name when it set one. */
export function emailFrom (config: Pick<Config, 'mailFrom'>, name: string | undefined): string {
  return name === undefined ? config.mailFrom : `${JSON.stringify(name)} <${mailFromAddress(config.mailFrom)}>`
}

/** The sender of an SMS: `from`, else the number the call runs on, else the account's first number that can send. */
export async function smsSender (db: DB, userId: string, from: string | undefined, call: CallRow | undefined): Promise<PhoneNumberRow | string> {
  if (from !== undefined) return await ownNumber(db, userId, from, 'sms')
  const ours = call === undefined ? undefined : await callNumber(db, call)
  if (ours !== undefined && ours.carrier !== 'sip') return ours
  return await firstMessagingNumber(db, userId) ??
    'the account has no phone number that can send SMS: buy or import one (a Twilio number sends, a sandbox number records)'
}

/** The sender of a WhatsApp message: `from`, else the account's whatsapp_sender. */
export async function chatSender (db: DB, userId: string, from: string | undefined): Promise<PhoneNumberRow | string> {
  const number = from ?? (await findMessagingSettings(db, userId))?.whatsapp_sender ?? undefined
  if (number === undefined) return 'no WhatsApp sender is set: set whatsapp_sender (PATCH /v1/messaging-settings) to one of your Twilio numbers enabled for WhatsApp'
  return await ownNumber(db, userId, number, 'chat')
}

/** One of the account's numbers that can send on the channel, or why `number` cannot. */
export async function ownNumber (db: DB, userId: string, number: string, channel: 'sms' | 'chat'): Promise<PhoneNumberRow | string> {
  if (!E164.test(number)) return `${JSON.stringify(number)} is not an E.164 phone number`
  const row = await findPhoneNumberByE164(db, userId, number)
  if (row === undefined) return `${number} is not one of your phone numbers`
  if (channel === 'chat' && row.carrier !== 'twilio') return `${number} is not a Twilio number: WhatsApp messages go through Twilio`
  if (row.carrier === 'sip') return `${number} is a SIP trunk number, which carries no text messages: use a Twilio or sandbox number`
  return row
}

/** For checks at action creation: the account's SMS-capable number `number`, or, when undefined, whether it has any; answers a problem message or undefined. */
export async function senderProblem (db: DB, userId: string, channel: 'sms' | 'chat', number?: string): Promise<string | undefined> {
  const sender = channel === 'sms' ? await smsSender(db, userId, number, undefined) : await chatSender(db, userId, number)
  return typeof sender === 'string' ? sender : undefined
}
