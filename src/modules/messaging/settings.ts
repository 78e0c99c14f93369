import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { findMessagingSettings, type MessagingSettingsRow, saveMessagingSettings } from './queries.ts'
import { emailFrom, ownNumber } from './senders.ts'

// The account's messaging settings (GET and PATCH /v1/messaging-settings): its WhatsApp sender, and the display name
// and Reply-To of its e-mails. The e-mail address itself is the installation's MAIL_FROM and cannot be set.

export interface MessagingSettingsChange {
  whatsapp_sender?: string | null
  email_from_name?: string | null
  email_reply_to?: string | null
}

export function messagingSettingsView (config: Pick<Config, 'mailFrom'>, row: MessagingSettingsRow | undefined) {
  return {
    whatsapp_sender: row?.whatsapp_sender ?? null,
    email_from_name: row?.email_from_name ?? null,
    email_reply_to: row?.email_reply_to ?? null,
    email_from: emailFrom(config, row?.email_from_name ?? undefined)
  }
}

export async function messagingSettings (db: DB, config: Pick<Config, 'mailFrom'>, userId: string) {
  return messagingSettingsView(config, await findMessagingSettings(db, userId))
}

/** Changes the given settings; a WhatsApp sender must be one of the account's Twilio numbers (else 400 `invalid_sender`). */
export async function changeMessagingSettings (db: DB, config: Pick<Config, 'mailFrom'>, userId: string, change: MessagingSettingsChange) {
  if (change.whatsapp_sender != null) {
    const number = await ownNumber(db, userId, change.whatsapp_sender, 'chat')
    if (typeof number === 'string') throw new HttpError(400, 'invalid_sender', `whatsapp_sender: ${number}`)
  }
  return messagingSettingsView(config, await saveMessagingSettings(db, userId, change))
}
