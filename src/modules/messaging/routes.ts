import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { AUTH_ERRORS, COMPONENT, E164, EpochMs, errors, Nullable, ObjectId } from '../../http/schemas.ts'
import { listMessages, type MessageRow } from './queries.ts'
import { changeMessagingSettings, messagingSettings, MessagingSettingsBody } from './settings.ts'

// The message log and the account's messaging settings (docs/messaging.md).

export interface MessagingRouteOptions { db: DB, config: Config }

const TAGS = ['messaging']

const Channel = Type.Enum(['email', 'sms', 'chat'], { description: 'email; sms; chat: WhatsApp' })
const Status = Type.Enum(['sending', 'sent', 'recorded', 'failed', 'refused'], {
  description: 'sending: on its way; sent: the provider took it (Twilio queued it, the SMTP server accepted it); recorded: stored, not sent (a sandbox number, no SMTP_URL); failed: the provider refused it or could not be reached (see error); refused: a limit or a rule refused it before anything left the server (see error)'
})

const Message = Type.Object({
  _id: ObjectId,
  call_id: Nullable(ObjectId, 'the call it was sent for'),
  action_id: Nullable(ObjectId, 'the action that sent it'),
  origin: Type.Enum(['live', 'after_call', 'test'], { description: 'live: during a call; after_call: a post-call message; test: a test' }),
  channel: Channel,
  sender: Nullable(Type.String(), 'the From number, or the From of the e-mail; null when none could be chosen'),
  recipient: Type.String({ description: 'E.164 number or e-mail address' }),
  subject: Nullable(Type.String(), 'e-mail only'),
  body: Type.String(),
  status: Status,
  error: Nullable(Type.String(), 'why it failed or was refused'),
  carrier_message_id: Nullable(Type.String(), "Twilio's message sid (SM…) or the e-mail's Message-ID"),
  created_at: EpochMs,
  updated_at: EpochMs
}, { [COMPONENT]: 'Message' })

const MessagingSettings = Type.Object({
  whatsapp_sender: Nullable(E164, 'the number WhatsApp messages come from: one of your Twilio numbers, enabled for WhatsApp at Twilio'),
  email_from_name: Nullable(Type.String(), "the display name of your e-mails' From"),
  email_reply_to: Nullable(Type.String(), 'where replies to your e-mails go'),
  email_from: Type.String({ description: "the From your e-mails carry: the installation's MAIL_FROM address with your display name (the address cannot be changed)" })
}, { [COMPONENT]: 'MessagingSettings' })

function messageView (row: MessageRow) {
  return {
    _id: row.id,
    call_id: row.call_id,
    action_id: row.action_id,
    origin: row.origin,
    channel: row.channel,
    sender: row.sender,
    recipient: row.recipient,
    subject: row.subject,
    body: row.body,
    status: row.status,
    error: row.error,
    carrier_message_id: row.carrier_message_id,
    created_at: row.created_at.getTime(),
    updated_at: row.updated_at.getTime()
  }
}

export const messagingRoutes: FastifyPluginAsyncTypebox<MessagingRouteOptions> = async (app, { db, config }) => {
  app.get('/messages', {
    schema: {
      tags: TAGS,
      summary: 'The messages your agents sent (beyond the specification)',
      description: 'E-mails, SMS and WhatsApp messages, newest first, each with what became of it (refused and failed ones too). ' +
        '`call_id` of a call (or `contact_id` of a contact) that is not yours gives an empty list. `contact_id`: the messages of the ' +
        'contact\'s calls, its communications beside GET /v1/contacts/:id. Page on with `before`: the `next_before` of the previous page.',
      querystring: Type.Object({
        call_id: Type.Optional(ObjectId),
        contact_id: Type.Optional(ObjectId),
        channel: Type.Optional(Channel),
        status: Type.Optional(Status),
        before: Type.Optional({ ...ObjectId, description: 'only messages older than this one (a message id)' }),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 }))
      }),
      response: {
        200: Type.Object({
          data: Type.Array(Message),
          next_before: Nullable(ObjectId, 'the `before` of the next page; null on the last page')
        }),
        ...errors(...AUTH_ERRORS)
      }
    }
  }, async (request) => {
    const { call_id: callId, contact_id: contactId, channel, status, before, limit = 100 } = request.query
    // One more than the page tells whether another page follows.
    const rows = await listMessages(db, request.userId, { callId, contactId, channel, status, before, limit: limit + 1 })
    const page = rows.slice(0, limit)
    return { data: page.map(messageView), next_before: rows.length > limit ? page[page.length - 1].id : null }
  })

  app.get('/messaging-settings', {
    schema: {
      tags: TAGS,
      summary: 'Your messaging settings (beyond the specification)',
      description: 'The WhatsApp sender and the display name and Reply-To of your e-mails; unset ones are null.',
      response: { 200: MessagingSettings, ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => await messagingSettings(db, config, request.userId))

  app.patch('/messaging-settings', {
    schema: {
      tags: TAGS,
      summary: 'Change your messaging settings (beyond the specification)',
      description: 'Changes the given fields; null clears one. `whatsapp_sender` must be one of your phone numbers on Twilio ' +
        '(400 `invalid_sender` otherwise); Twilio must have it enabled for WhatsApp. Your e-mails always come from the ' +
        "installation's MAIL_FROM address: you set its display name and where replies go, never the address.",
      body: MessagingSettingsBody,
      response: { 200: MessagingSettings, ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => await changeMessagingSettings(db, config, request.userId, request.body))
}
