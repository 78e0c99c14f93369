import type { AddressInfo } from 'node:net'
import { SMTPServer } from 'smtp-server'
import type { Test } from 'tap'
import { poll } from './poll.ts'

export interface ReceivedMail { from: string, to: string[], raw: string }

export interface Inbox {
  /** `smtp://127.0.0.1:<port>`, for SMTP_URL. */
  url: string
  messages: ReceivedMail[]
  /** Resolves once `count` messages have arrived; polls, never sleeps a fixed time. */
  waitFor: (count: number) => Promise<ReceivedMail[]>
}

/** A real SMTP server on a free local port, without TLS. `reject` refuses every recipient. */
export async function startInbox (t: Test, options: { reject?: boolean } = {}): Promise<Inbox> {
  const messages: ReceivedMail[] = []
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onRcptTo (_address, _session, callback) {
      callback(options.reject === true ? Object.assign(new Error('mailbox unavailable'), { responseCode: 550 }) : null)
    },
    onData (stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => {
        messages.push({
          from: session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address,
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8')
        })
        callback(null)
      })
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const { port } = server.server.address() as AddressInfo
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    async waitFor (count) {
      return await poll(() => messages, (all) => all.length >= count,
        { timeoutMs: 10_000, intervalMs: 10, message: (all) => `expected ${count} e-mails, got ${all.length}` })
    }
  }
}
