import type { AddressInfo } from 'node:net'
import net from 'node:net'
import t from 'tap'
import { sendMessage } from '../../../src/modules/messaging/send.ts'
import { messagingSetup, outgoing } from '../../helpers/messaging.ts'
import { startInbox } from '../../helpers/smtp.ts'

// E-mail through the installation's mailer, to a real SMTP server on loopback: From is MAIL_FROM's address with the
// account's display name, Reply-To the account's; the log keeps every message, and a broken server is an answer.

const MAIL_FROM = 'Switchboard <noreply@switchboard.test>'

t.test('an e-mail goes out from MAIL_FROM\'s address with the account\'s display name and Reply-To', async (t) => {
  const inbox = await startInbox(t)
  const { app, db, deps, user, headers } = await messagingSetup(t, { SMTP_URL: inbox.url, MAIL_FROM })
  const settings = await app.inject({ method: 'PATCH', url: '/v1/messaging-settings', headers, payload: { email_from_name: 'Bella Napoli', email_reply_to: 'bookings@bella.test' } })
  t.equal(settings.statusCode, 200)
  t.same(settings.json(), { whatsapp_sender: null, email_from_name: 'Bella Napoli', email_reply_to: 'bookings@bella.test', email_from: '"Bella Napoli" <noreply@switchboard.test>' })

  const result = await sendMessage(deps, outgoing(user.id, { channel: 'email', to: 'ada@example.com', subject: 'Your booking', text: 'Table for two at 8 pm.' }))
  t.same({ ...result, id: undefined }, { id: undefined, status: 'sent', error: null, retryable: false })
  const [mail] = await inbox.waitFor(1)
  t.equal(mail.from, 'noreply@switchboard.test', 'the envelope sender is the installation\'s')
  t.same(mail.to, ['ada@example.com'])
  t.match(mail.raw, /^From: Bella Napoli <noreply@switchboard\.test>\r$/m)
  t.match(mail.raw, /^Reply-To: bookings@bella\.test\r$/m)
  t.match(mail.raw, /^Subject: Your booking\r$/m)
  t.match(mail.raw, /Table for two at 8 pm\./)
  const row = await db.selectFrom('messages').selectAll().where('id', '=', result.id).executeTakeFirstOrThrow()
  t.match(row, { channel: 'email', sender: '"Bella Napoli" <noreply@switchboard.test>', recipient: 'ada@example.com', subject: 'Your booking', status: 'sent' })
  t.match(row.carrier_message_id, /^<.+@.+>$/, 'the Message-ID')
  t.same(await db.selectFrom('emails').selectAll().execute(), [], 'kept in the message log only')

  // Without settings: MAIL_FROM as it is, no Reply-To, a subject of its own.
  await app.inject({ method: 'PATCH', url: '/v1/messaging-settings', headers, payload: { email_from_name: null, email_reply_to: null } })
  const unnamed = await sendMessage(deps, outgoing(user.id, { channel: 'email', to: 'bo@example.com', text: 'Hello' }))
  const [, plain] = await inbox.waitFor(2)
  t.equal((await db.selectFrom('messages').select('subject').where('id', '=', unnamed.id).executeTakeFirstOrThrow()).subject, 'Message from Switchboard', 'the log keeps the subject sent')
  t.match(plain.raw, /^From: Switchboard <noreply@switchboard\.test>\r$/m)
  t.notMatch(plain.raw, /^Reply-To:/m)
  t.match(plain.raw, /^Subject: Message from Switchboard\r$/m)
})

t.test('a recipient that is not one address, or a subject with a line break, cannot add a recipient or a header', async (t) => {
  const inbox = await startInbox(t)
  const { deps, user } = await messagingSetup(t, { SMTP_URL: inbox.url, MAIL_FROM })
  for (const to of ['ada@example.com, eve@example.com', 'Eve <eve@example.com>', 'ada@example.com\r\nBcc: eve@example.com', 'not an address']) {
    t.match(await sendMessage(deps, outgoing(user.id, { channel: 'email', to })), { status: 'refused', error: /is not one e-mail address/ }, to)
  }
  await sendMessage(deps, outgoing(user.id, { channel: 'email', to: 'ada@example.com', subject: 'Hi\r\nBcc: eve@example.com', text: 'x' }))
  const [mail] = await inbox.waitFor(1)
  t.same(mail.to, ['ada@example.com'])
  t.notMatch(mail.raw, /^Bcc:/m)
  t.equal(inbox.messages.length, 1)
})

t.test('no SMTP_URL: the e-mail is recorded, not sent', async (t) => {
  const { deps, user } = await messagingSetup(t)
  t.match(await sendMessage(deps, outgoing(user.id, { channel: 'email', to: 'ada@example.com' })), { status: 'recorded', error: null, retryable: false })
})

t.test('an unreachable SMTP server: failed, retryable; a recipient the server refuses: failed for good', async (t) => {
  // A loopback port that was free a moment ago: nothing answers there.
  const probe = net.createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const { port } = probe.address() as AddressInfo
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  const down = await messagingSetup(t, { SMTP_URL: `smtp://127.0.0.1:${port}`, MAIL_FROM })
  const result = await sendMessage(down.deps, outgoing(down.user.id, { channel: 'email', to: 'ada@example.com' }))
  t.match(result, { status: 'failed', retryable: true, error: /ECONNREFUSED|connect/i })
  t.match(await down.db.selectFrom('messages').selectAll().where('id', '=', result.id).executeTakeFirstOrThrow(), { status: 'failed', error: /ECONNREFUSED|connect/i })

  const rejecting = await startInbox(t, { reject: true })
  const refused = await messagingSetup(t, { SMTP_URL: rejecting.url, MAIL_FROM })
  t.match(await sendMessage(refused.deps, outgoing(refused.user.id, { channel: 'email', to: 'ada@example.com' })), { status: 'failed', retryable: false, error: /mailbox unavailable/ })
})
