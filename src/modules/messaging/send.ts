import type { Logger } from 'pino'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { CallRow } from '../../db/schema.ts'
import { storable } from '../../http/validation.ts'
import type { Mailer, MailOutcome } from '../../mail/mailer.ts'
import { countCallMessage } from '../calls/lifecycle.ts'
import { findCallRow } from '../calls/queries.ts'
import { CarrierError } from '../phone-numbers/carriers/carrier.ts'
import { numberAccount } from '../phone-numbers/number-accounts.ts'
import { findMessagingSettings, insertMessage, type MessageRow, reserveMessage, settleMessage } from './queries.ts'
import { chatSender, E164, emailFrom, emailSenderName, SINGLE_EMAIL_PATTERN, smsSender } from './senders.ts'
import { createTwilioMessage, retryableCarrierError, TWILIO_MAX_BODY } from './twilio.ts'

// Sending one message (docs/messaging.md): e-mail through the installation's mailer, SMS and WhatsApp through Twilio's
// Messaging API from a number the account owns. Every message is logged in `messages`, counted within the limits
// before anything leaves the server, and answered with what became of it; a provider's failure is an answer, never
// an exception.

export type Channel = 'email' | 'sms' | 'chat'

export interface OutgoingMessage {
  userId: string
  callId: string | null
  /** what sent it: 'live' (during a call; per-call and per-account limits apply), 'after_call' (a post-call delivery; account limit applies), 'test' (console/API test) */
  origin: 'live' | 'after_call' | 'test'
  actionId: string | null
  channel: Channel
  /** e-mail address, or E.164 number (without the whatsapp: prefix) */
  to: string
  /** sms/chat: the sender number (E.164) the account owns; undefined: the module picks (sms: the call's own number, else the account's first; chat: the account's whatsapp_sender) */
  from?: string
  /** e-mail only; default "Message from <the sender's name>" */
  subject?: string
  text: string
}

/**
 * `sent`: the provider took it (Twilio queued it, the SMTP server accepted it). `recorded`: stored, not sent (a sandbox
 * number, an installation without SMTP_URL). `failed`: the provider refused it or could not be reached. `refused`: a
 * limit or a rule refused it before sending (nothing left the server).
 */
export type MessageStatus = 'sent' | 'recorded' | 'failed' | 'refused'

/** `id`: the message in the log (GET /v1/messages). `retryable`: a failure that sending again may get past (5xx, network, 429). */
export interface MessageResult { id: string, status: MessageStatus, error: string | null, retryable: boolean }

export { senderProblem } from './senders.ts'

export interface MessagingDeps { db: DB, config: Config, log: Logger, mailer: Mailer }

const STORED_ID = /^[0-9a-f]{24}$/
const EMAIL_ADDRESS = new RegExp(SINGLE_EMAIL_PATTERN)
const MAX_EMAIL_ADDRESS = 254
const MAX_SUBJECT = 250
/** An e-mail's text: far beyond a message, short of what would make the log a file store. */
const MAX_EMAIL_TEXT = 100_000

/** How a message goes out once it has its place within the limits. */
type Send = () => Promise<{ status: 'sent' | 'recorded' | 'failed', error: string | null, retryable: boolean, carrierMessageId: string | null }>
/** A message ready to go (its sender chosen; an e-mail's subject as it goes out), or the rule it breaks. */
type Prepared = { sender: string, subject?: string, send: Send } | { sender: string | null, problem: string }

/** Text the log can store (PostgreSQL holds no NUL or half a surrogate pair); the message itself is refused then. */
const loggable = (text: string) => text.toWellFormed().replaceAll('\0', '\uFFFD')

async function prepareText (deps: MessagingDeps, message: OutgoingMessage, channel: 'sms' | 'chat', call: CallRow | undefined): Promise<Prepared> {
  const number = channel === 'sms' ? await smsSender(deps.db, message.userId, message.from, call) : await chatSender(deps.db, message.userId, message.from)
  if (typeof number === 'string') return { sender: message.from ?? null, problem: number }
  const sender = number.phone_number
  if (!E164.test(message.to)) return { sender, problem: `the recipient ${JSON.stringify(message.to)} is not an E.164 phone number (+, country code, number)` }
  if (message.text.length > TWILIO_MAX_BODY) {
    return { sender, problem: `the text is ${message.text.length} characters long, over the carrier's limit of ${TWILIO_MAX_BODY} (Twilio error 21617)` }
  }
  if (number.carrier === 'sandbox') return { sender, send: async () => ({ status: 'recorded', error: null, retryable: false, carrierMessageId: null }) }
  const account = numberAccount(deps.config, number)
  if (account === undefined) {
    return { sender, problem: `no Twilio credentials are kept for ${sender}: import it again with its account's SID and auth token` }
  }
  return {
    sender,
    send: async () => {
      try {
        const created = await createTwilioMessage(account, { channel, from: sender, to: message.to, body: message.text })
        return { status: 'sent', error: null, retryable: false, carrierMessageId: created.sid }
      } catch (err) {
        if (!(err instanceof CarrierError)) throw err
        return { status: 'failed', error: err.message, retryable: retryableCarrierError(err), carrierMessageId: null }
      }
    }
  }
}

async function prepareEmail (deps: MessagingDeps, message: OutgoingMessage): Promise<Prepared> {
  const settings = await findMessagingSettings(deps.db, message.userId)
  const fromName = settings?.email_from_name ?? undefined
  const sender = emailFrom(deps.config, fromName)
  if (message.to.length > MAX_EMAIL_ADDRESS || !EMAIL_ADDRESS.test(message.to)) return { sender, problem: `the recipient ${JSON.stringify(message.to)} is not one e-mail address` }
  if ((message.subject ?? '').length > MAX_SUBJECT) return { sender, problem: `the subject is over ${MAX_SUBJECT} characters` }
  if (message.text.length > MAX_EMAIL_TEXT) return { sender, problem: `the text is over ${MAX_EMAIL_TEXT} characters` }
  const envelope = {
    to: message.to,
    subject: subjectOf(message, emailSenderName(deps.config, fromName)),
    text: message.text,
    fromName,
    replyTo: settings?.email_reply_to ?? undefined
  }
  return {
    sender,
    subject: envelope.subject,
    send: async () => {
      const outcome: MailOutcome = await deps.mailer.deliver(envelope)
      return { status: outcome.status, error: outcome.error, retryable: outcome.retryable, carrierMessageId: outcome.messageId }
    }
  }
}

// A header is one line: a line break in the subject must not start another header.
const subjectOf = (message: OutgoingMessage, name: string) =>
  (message.subject === undefined || message.subject.trim() === '' ? `Message from ${name}` : message.subject).replace(/[\r\n]+/g, ' ')

/** Sends one message (or records it, or refuses it) and logs it; never throws for a provider's failure. */
export async function sendMessage (deps: MessagingDeps, message: OutgoingMessage): Promise<MessageResult> {
  const { db, config } = deps
  const call = message.callId === null || !STORED_ID.test(message.callId) ? undefined : await findCallRow(db, message.callId)
  const callOk = call !== undefined && call.user_id === message.userId
  const logged = {
    id: newId(),
    user_id: message.userId,
    // Another account's call (or none) is not written down as this message's call.
    call_id: callOk ? call.id : null,
    action_id: message.actionId,
    origin: message.origin,
    channel: message.channel,
    recipient: loggable(message.to),
    subject: message.channel === 'email' ? loggable(message.subject ?? '') : null,
    body: loggable(message.text)
  }
  const refuse = async (sender: string | null, problem: string): Promise<MessageResult> => {
    const row = await insertMessage(db, { ...logged, sender: sender === null ? null : loggable(sender), status: 'refused', error: loggable(problem) })
    return { id: row.id, status: 'refused', error: row.error, retryable: false }
  }

  if (message.callId !== null && !callOk) return await refuse(null, `call ${message.callId} not found`)
  const unstorable = [message.to, message.subject ?? '', message.text, message.from ?? ''].some((text) => !storable(text))
  if (unstorable) return await refuse(null, 'the message holds NUL characters or unpaired surrogates')
  if (message.text.trim() === '') return await refuse(null, 'the message has no text')
  const prepared = message.channel === 'email' ? await prepareEmail(deps, message) : await prepareText(deps, message, message.channel, call)
  if ('problem' in prepared) return await refuse(prepared.sender, prepared.problem)

  const limits = { perAccountHour: config.messaging.perAccountHour, perCall: message.origin === 'live' ? config.messaging.perCall : undefined }
  const row = await reserveMessage(db, { ...logged, subject: prepared.subject ?? logged.subject, sender: prepared.sender, status: 'sending' }, limits)
  if (row.status === 'refused') return { id: row.id, status: 'refused', error: row.error, retryable: false }

  let outcome: Awaited<ReturnType<Send>>
  try {
    outcome = await prepared.send()
  } catch (err) {
    // Not a provider's answer (those are outcomes): a fault here. The message must not stay `sending`.
    deps.log.error({ err, messageId: row.id }, 'a message could not be sent')
    outcome = { status: 'failed', error: 'internal error while sending', retryable: true, carrierMessageId: null }
  }
  await settle(deps, row, outcome)
  if (outcome.status === 'failed') deps.log.warn({ messageId: row.id, channel: row.channel, error: outcome.error }, 'a message failed')
  return { id: row.id, status: outcome.status, error: outcome.error, retryable: outcome.status === 'failed' && outcome.retryable }
}

/** Stores what became of a message; a text message that went out (or was recorded) for a call counts on the call. */
async function settle (deps: MessagingDeps, row: MessageRow, outcome: Awaited<ReturnType<Send>>): Promise<void> {
  const values = { status: outcome.status, error: outcome.error, carrier_message_id: outcome.carrierMessageId }
  const counts = row.call_id !== null && row.channel !== 'email' && outcome.status !== 'failed'
  if (!counts) return await settleMessage(deps.db, row.id, values)
  await deps.db.transaction().execute(async (trx) => {
    await settleMessage(trx, row.id, values)
    await countCallMessage(trx, row.user_id, row.call_id!, deps.config.prices)
  })
}
