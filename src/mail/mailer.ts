import type { FastifyBaseLogger } from 'fastify'
import type { Transporter } from 'nodemailer'
import type { Config } from '../config.ts'
import type { DB } from '../db/database.ts'
import { newId } from '../db/ids.ts'

export interface MailMessage {
  /** The account the message is about; its e-mails are kept with it. */
  userId: string
  /** What the message is, for people reading the `emails` table: `workspace_invitation`, `delivery_failure`. */
  kind: string
  to: string
  subject: string
  text: string
}

export type MailStatus = 'sent' | 'recorded' | 'failed'

export interface Mailer {
  /** Sends (or, without SMTP, records) one message; never throws for a mail failure, it answers `failed`. */
  sendMail: (message: MailMessage) => Promise<{ id: string, status: MailStatus }>
  close: () => void
}

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

  async function sendMail (message: MailMessage) {
    let status: MailStatus = 'recorded'
    let error: string | null = null
    let messageId: string | null = null
    if (config.smtpUrl !== undefined) {
      try {
        const info = await (await smtp(config.smtpUrl)).sendMail({ from: config.mailFrom, to: message.to, subject: message.subject, text: message.text })
        status = 'sent'
        messageId = info.messageId
      } catch (err) {
        status = 'failed'
        error = (err as Error).message
        log.warn({ err, kind: message.kind }, 'e-mail could not be sent')
      }
    } else {
      log.info({ kind: message.kind, to: message.to, subject: message.subject }, 'e-mail recorded, not sent: SMTP_URL is not set')
    }
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

  return { sendMail, close: () => transport?.close() }
}
