import net from 'node:net'
import { SMTPServer } from 'smtp-server'
import t, { type Test } from 'tap'
import { createAgent } from '../helpers/calls.ts'
import { analysedCall, deliveries, fastSetup } from '../helpers/deliveries.ts'
import { poll } from '../helpers/poll.ts'
import { startInbox } from '../helpers/smtp.ts'

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
