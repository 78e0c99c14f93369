import net from 'node:net'
import { SMTPServer } from 'smtp-server'
import t, { type Test } from 'tap'
import { createAgent } from '../helpers/calls.ts'
import { analysedCall, deliveries, fastSetup } from '../helpers/deliveries.ts'
import { poll } from '../helpers/poll.ts'
import { startInbox } from '../helpers/smtp.ts'
import { addNumber, TWILIO_SID, TWILIO_TOKEN } from '../helpers/messaging.ts'
import { startTwilioStandIn } from '../helpers/twilio-stand-in.ts'

// After-call e-mail (issue 28, section 3): a send_email action with when after_call is a post-call delivery of kind
// send_email, sent through the installation's SMTP server (the test helpers' real one on loopback), with the
// delivery engine's schedule, attempts log and resend.

const EMAIL = { name: 'Ops mail', when: 'after_call', subject: 'Call {{call_id}}', message: 'Summary: {{call_summary}}', direct_recipients: ['ops@example.com'], notify: 'never' }

async function addEmailAction (ctx: Awaited<ReturnType<typeof fastSetup>>, agentId: string, settings: Record<string, unknown> = {}) {
  const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agentId}/actions`, headers: ctx.account.headers, payload: { action_type: 'send_email', settings: { ...EMAIL, ...settings } } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json() as { _id: string }
}

/** A loopback port nothing listens on (yet). */
async function freePort (): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** An SMTP server on `port`, keeping what it receives. */
async function smtpOn (t: Test, port: number) {
  const received: string[] = []
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData (stream, _session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => { received.push(Buffer.concat(chunks).toString('utf8')); callback(null) })
    }
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return received
}

t.test('an after-call e-mail is a send_email delivery, delivered through SMTP with the call\'s variables', async (t) => {
  const inbox = await startInbox(t)
  const ctx = await fastSetup(t, { SMTP_URL: inbox.url })
  const agent = await createAgent(ctx.app, ctx.account)
  const action = await addEmailAction(ctx, agent._id)
  const call = await analysedCall(ctx, ctx.account, agent)

  const [mail] = await inbox.waitFor(1)
  t.same(mail.to, ['ops@example.com'])
  t.match(mail.raw, new RegExp(`Subject: Call ${call.id}`))
  t.match(mail.raw, /Summary: Booked\./)
  const list = await poll(() => deliveries(ctx, ctx.account), (l) => l.data.length === 1 && l.data[0].status !== 'pending')
  t.match(list.data[0], { kind: 'send_email', status: 'delivered', call_id: call.id, attempts_made: 1 })
  const messages = (await ctx.app.inject({ method: 'GET', url: `/v1/messages?call_id=${call.id}`, headers: ctx.account.headers })).json()
  t.match(messages.data, [{ action_id: action._id, origin: 'after_call', channel: 'email', recipient: 'ops@example.com', status: 'sent', subject: `Call ${call.id}` }])
})

t.test('an unreachable SMTP server: the e-mail is retried on the schedule, and resend delivers it once the server is back', async (t) => {
  const port = await freePort()
  const ctx = await fastSetup(t, { SMTP_URL: `smtp://127.0.0.1:${port}` })
  const agent = await createAgent(ctx.app, ctx.account)
  await addEmailAction(ctx, agent._id, { retry_schedule: [60, 60] })
  await analysedCall(ctx, ctx.account, agent)

  const failed = await poll(() => deliveries(ctx, ctx.account), (l) => l.data.length === 1 && l.data[0].status === 'failed',
    { message: (l) => JSON.stringify(l) })
  const [delivery] = failed.data
  t.equal(delivery.kind, 'send_email')
  t.equal(delivery.attempts_made, 3, 'every scheduled attempt was made')
  t.ok(delivery.attempts.every((a: { error?: string }) => typeof a.error === 'string' && a.error !== ''), 'each attempt logs its error')

  const received = await smtpOn(t, port)
  const resent = await ctx.app.inject({ method: 'POST', url: `/v1/webhook-deliveries/${delivery.id}/resend`, headers: ctx.account.headers })
  t.equal(resent.statusCode, 200, resent.body)
  const after = await poll(() => deliveries(ctx, ctx.account), (l) => l.data[0].status === 'delivered', { message: (l) => JSON.stringify(l) })
  t.equal(after.data[0].attempts.at(-1).manual, true)
  t.equal(received.length, 1, 'the resend reached the server')
  t.match(received[0], /Summary: Booked\./)
})

t.test('after-call SMS and WhatsApp: one delivery per recipient through Twilio, the caller\'s number included; a number the carrier refuses fails at once, not retried for days', async (t) => {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(TWILIO_SID, TWILIO_TOKEN)
  const ctx = await fastSetup(t, { TWILIO_API_URL: twilio.url })
  await addNumber(ctx.db, ctx.account.user.id, '+14155550123', 'twilio', twilio)
  twilio.enableWhatsApp(TWILIO_SID, '+14155550123')
  twilio.landlines.add('+15559990000')
  t.equal((await ctx.app.inject({ method: 'PATCH', url: '/v1/messaging-settings', headers: ctx.account.headers, payload: { whatsapp_sender: '+14155550123' } })).statusCode, 200)
  const agent = await createAgent(ctx.app, ctx.account)
  for (const [type, settings] of [
    ['send_sms', { name: 'Thanks', message: 'Thanks {{caller_name}}: {{call_summary}}', direct_recipients: ['+15551230000', '+15559990000'] }],
    ['send_chat', { name: 'Chat', message: 'Summary: {{call_summary}}', send_to_customer: false, direct_recipients: ['+15551230001'] }],
    ['send_sms', { name: 'Live only', when: 'during_call', message: 'never after the call', direct_recipients: ['+15551230009'] }]
  ] as const) {
    const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions`, headers: ctx.account.headers, payload: { action_type: type, settings: { notify: 'never', retry_schedule: [60, 60], ...settings } } })
    t.equal(res.statusCode, 201, res.body)
  }
  const call = await analysedCall(ctx, ctx.account, agent)

  const list = await poll(() => deliveries(ctx, ctx.account), (l) => l.data.length === 4 && l.data.every((d: { status: string }) => d.status !== 'pending'))
  const byName = Object.fromEntries(list.data.map((d: { name: string }) => [d.name, d]))
  t.same(Object.keys(byName).sort(), ['Chat to +15551230001', 'Thanks to +15551230000', 'Thanks to +15559990000', 'Thanks to +4930123456'], 'one per recipient, the caller included; during_call actions are not delivered')
  t.match(byName['Thanks to +4930123456'], { kind: 'send_sms', status: 'delivered', call_id: call.id, attempts_made: 1 })
  t.match(byName['Chat to +15551230001'], { kind: 'send_chat', status: 'delivered' })
  t.match(byName['Thanks to +15559990000'], { kind: 'send_sms', status: 'failed', attempts_made: 1, attempts_max: 3 }, 'a refused number: failed at the first attempt')
  t.match(twilio.messages.map((m) => [m.channel, m.to, m.body]).sort(), [
    ['sms', '+15551230000', 'Thanks Ada Lovelace: Booked.'],
    ['sms', '+4930123456', 'Thanks Ada Lovelace: Booked.'],
    ['whatsapp', '+15551230001', 'Summary: Booked.']
  ])
  const detail = (await ctx.app.inject({ method: 'GET', url: `/v1/webhook-deliveries/${byName['Thanks to +15559990000'].id}`, headers: ctx.account.headers })).json()
  t.match(detail.attempts, [{ n: 1, error: /.+/ }])
})
