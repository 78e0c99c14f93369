import type { FastifyBaseLogger } from 'fastify'
import type { Transporter } from 'nodemailer'
import type { Config } from '../config.ts'
import type { DB } from '../db/database.ts'
import { newId } from '../db/ids.ts'

/** One e-mail as it goes out. */
export interface Envelope {
  to: string
  subject: string
  text: string
  /**
   * The display name before MAIL_FROM's address (default: MAIL_FROM's own name). Only the name: the address is always
   * the installation's, so that nobody sends as an address of their choosing through its SMTP server.
   */
  fromName?: string
  replyTo?: string
  /** Files sent with it (an appointment's .ics); `emails` keeps the text only. */
  attachments?: Array<{ filename: string, content: string, contentType: string }>
}

export interface MailMessage extends Envelope {
  /** The account the message is about; its e-mails are kept with it. */
  userId: string
  /** What the message is, for people reading the `emails` table: `workspace_invitation`, `delivery_failure`. */
  kind: string
}

export type MailStatus = 'sent' | 'recorded' | 'failed'

/** What became of one e-mail: `retryable` when the server could not be reached or refused it for now (a 4xx reply). */
export interface MailOutcome { status: MailStatus, error: string | null, retryable: boolean, messageId: string | null }

export interface Mailer {
  /** Sends (or, without SMTP, records) one message, kept in `emails`; never throws for a mail failure, it answers `failed`. */
  sendMail: (message: MailMessage) => Promise<{ id: string, status: MailStatus }>
  /** Sends one e-mail without keeping it (its caller keeps its own log: the messages); never throws for a mail failure. */
  deliver: (envelope: Envelope) => Promise<MailOutcome>
  close: () => void
}

/** MAIL_FROM's address, without its display name. */
export const mailFromAddress = (mailFrom: string) => /<([^<>]+)>\s*$/.exec(mailFrom)?.[1] ?? mailFrom

// A mail server that does not answer must not hold a request or a job for nodemailer's default 2 minutes.
const CONNECTION_TIMEOUT_MS = 10_000
const SOCKET_TIMEOUT_MS = 30_000

/**
 * The one way the server sends e-mail. Every message is stored in `emails` with its outcome, so a
 * self-hoster without SMTP (or with a broken one) can still see what would have gone out.
 */
export function createMailer (db: DB, config: Pick<Config, 'smtpUrl' | 'mailFrom'>, log: FastifyBaseLogger): Mailer {
  // nodemailer is loaded with the first message, so that installations without SMTP never carry it.
  let transport: Transporter | undefined
  async function smtp (url: string): Promise<Transporter> {
    const { default: nodemailer } = await import('nodemailer')
    transport ??= nodemailer.createTransport({ url, connectionTimeout: CONNECTION_TIMEOUT_MS, greetingTimeout: CONNECTION_TIMEOUT_MS, socketTimeout: SOCKET_TIMEOUT_MS })
    return transport
  }

  const fromAddress = mailFromAddress(config.mailFrom)

  async function deliver (envelope: Envelope): Promise<MailOutcome> {
    if (config.smtpUrl === undefined) {
      log.info({ to: envelope.to, subject: envelope.subject }, 'e-mail recorded, not sent: SMTP_URL is not set')
      return { status: 'recorded', error: null, retryable: false, messageId: null }
    }
    try {
      const info = await (await smtp(config.smtpUrl)).sendMail({
        from: envelope.fromName === undefined ? config.mailFrom : { name: envelope.fromName, address: fromAddress },
        to: envelope.to,
        subject: envelope.subject,
        text: envelope.text,
        ...(envelope.replyTo !== undefined && { replyTo: envelope.replyTo }),
        ...(envelope.attachments !== undefined && { attachments: envelope.attachments })
      })
      return { status: 'sent', error: null, retryable: false, messageId: info.messageId }
    } catch (err) {
      // nodemailer sets responseCode when the server answered: 5xx is final (no such mailbox), 4xx is for now.
      // Without one the server was not reached or the connection broke: worth another try.
      const responseCode = (err as { responseCode?: unknown }).responseCode
      log.warn({ err }, 'e-mail could not be sent')
      return { status: 'failed', error: (err as Error).message, retryable: typeof responseCode !== 'number' || responseCode < 500, messageId: null }
    }
  }

  async function sendMail (message: MailMessage) {
    const { status, error, messageId } = await deliver(message)
    const id = newId()
    await db.insertInto('emails').values({
      id,
      user_id: message.userId,
      kind: message.kind,
      to_address: message.to,
      subject: message.subject,
      body_text: message.text,
      status,
      error,
      message_id: messageId
    }).execute()
    return { id, status }
  }

  return { sendMail, deliver, close: () => transport?.close() }
}
