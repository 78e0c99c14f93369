import { Type, type Static } from 'typebox'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { E164, Nullable } from '../../http/schemas.ts'
import { findMessagingSettings, type MessagingSettingsRow, saveMessagingSettings } from './queries.ts'
import { emailFrom, ownNumber, SINGLE_EMAIL_PATTERN } from './senders.ts'

// The account's messaging settings (GET and PATCH /v1/messaging-settings): its WhatsApp sender, and the display name
// and Reply-To of its e-mails. The e-mail address itself is the installation's MAIL_FROM and cannot be set.

// A display name, not an address: no control characters, and nothing that would make it read as an address.
const FromName = Type.String({ minLength: 1, maxLength: 64, pattern: '^[^\\u0000-\\u001f\\u007f@<>"\\\\]+$', description: 'no @, <, >, " or \\ (it must not look like an address)' })

/** What a change of the settings may hold (the API's PATCH body and the console's form); null clears a setting. */
export const MessagingSettingsBody = Type.Object({
  whatsapp_sender: Type.Optional(Nullable({ ...E164, description: 'one of your Twilio numbers that Twilio has enabled for WhatsApp' })),
  email_from_name: Type.Optional(Nullable(FromName)),
  email_reply_to: Type.Optional(Nullable(Type.String({ maxLength: 254, pattern: SINGLE_EMAIL_PATTERN, description: 'one e-mail address' })))
})

export type MessagingSettingsChange = Static<typeof MessagingSettingsBody>

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
