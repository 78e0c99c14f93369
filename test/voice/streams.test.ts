import net from 'node:net'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import t from 'tap'
import type { Test } from 'tap'
import { WebSocket } from 'ws'
import { maxStreamsFor } from '../../src/config.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { poll } from '../helpers/poll.ts'
import { openWebCall, refusal } from '../helpers/voice-client.ts'

// The call streams' sockets against strangers (docs/voice.md, "Scale"): a Twilio stream must start within
// VOICE_STREAM_START_TIMEOUT_MS, pending streams are capped per address and per process, open streams per
// process, and what a client breaks in the WebSocket protocol is its fault, logged below `error`.

const TWILIO_STREAM = '/telephony/twilio/stream'

async function listen (t: Test, env: Record<string, string> = {}, logger?: pino.Logger) {
  const ctx = await setup(t, { VOICE_ENGINE: 'simulator', ...env }, logger === undefined ? {} : { logger })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  return { ...ctx, url }
}

/** A WebSocket to `path` from `localAddress` (any of 127/8 is this machine): open, or refused with its status. */
async function connect (url: string, path: string, localAddress = '127.0.0.1'): Promise<{ socket?: WebSocket, status?: number, body?: string, closed: Promise<number> }> {
  const socket = new WebSocket(`${url.replace(/^http/, 'ws')}${path}`, { localAddress })
  const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)))
  return await new Promise((resolve, reject) => {
    socket.once('open', () => resolve({ socket, closed }))
    socket.once('unexpected-response', (_req, res) => {
      let body = ''
      res.on('data', (chunk: Buffer) => { body += chunk.toString() })
      res.on('end', () => resolve({ status: res.statusCode, body, closed }))
    })
    socket.once('error', reject)
  })
}

async function webCall (ctx: TestContext, account: Account) {
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: llm._id } })).json()
  return (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id } })).json() as { _id: string, access_token: string }
}

t.test('a Twilio stream that never sends start is closed after VOICE_STREAM_START_TIMEOUT_MS', async (t) => {
  const ctx = await listen(t, { VOICE_STREAM_START_TIMEOUT_MS: '200', VOICE_STREAM_TIMEOUT_MS: '60000' })
  const quiet = await connect(ctx.url, TWILIO_STREAM)
  t.ok(quiet.socket, 'opened')
  t.equal(await quiet.closed, 4408, 'closed for want of a start')

  // One that speaks, but never a valid start (media, marks), is closed all the same.
  const chatty = await connect(ctx.url, TWILIO_STREAM)
  const sending = setInterval(() => chatty.socket!.send(JSON.stringify({ event: 'media', media: { payload: 'AAAA' } })), 20)
  t.teardown(() => clearInterval(sending))
  t.equal(await chatty.closed, 4408)
})

t.test('pending streams are capped per address (at once, under a race) while another address still connects', async (t) => {
  const ctx = await listen(t, { VOICE_PENDING_STREAMS_PER_ADDRESS: '5', VOICE_STREAM_START_TIMEOUT_MS: '60000', VOICE_STREAM_TIMEOUT_MS: '60000' })
  // 150 at once from one address: exactly 5 wait for their start, the rest are refused before the upgrade.
  const tries = await Promise.all(Array.from({ length: 150 }, async () => await connect(ctx.url, TWILIO_STREAM)))
  const open = tries.filter((c) => c.socket !== undefined)
  t.equal(open.length, 5, 'five pending streams from 127.0.0.1')
  t.ok(tries.filter((c) => c.socket === undefined).every((c) => c.status === 429 && /too_many_pending_streams/.test(c.body ?? '')), 'the others: 429 too_many_pending_streams')

  const other = await connect(ctx.url, TWILIO_STREAM, '127.0.0.2')
  t.ok(other.socket, 'another address still connects')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/health' })).statusCode, 200, '/health answers')
  const res = await fetch(`${ctx.url}/health`)
  t.equal(res.status, 200, '/health answers over the network too')

  // A place is given back when its socket closes.
  open[0].socket!.close()
  await open[0].closed
  const again = await poll(async () => await connect(ctx.url, TWILIO_STREAM), (c) => c.socket !== undefined, { message: 'the place came back' })
  for (const c of [...open.slice(1), other, again]) c.socket!.terminate()
})

t.test('pending streams are capped per process, open streams too (VOICE_MAX_STREAMS), on both stream routes', async (t) => {
  const ctx = await listen(t, { VOICE_PENDING_STREAMS: '2', VOICE_MAX_STREAMS: '3', VOICE_STREAM_START_TIMEOUT_MS: '60000', VOICE_STREAM_TIMEOUT_MS: '60000' })
  const a = await connect(ctx.url, TWILIO_STREAM, '127.0.0.2')
  const b = await connect(ctx.url, TWILIO_STREAM, '127.0.0.3')
  t.ok(a.socket !== undefined && b.socket !== undefined)
  t.match(await connect(ctx.url, TWILIO_STREAM, '127.0.0.4'), { status: 503, body: /streams_busy/ }, 'a third pending stream, from yet another address: 503')
  a.socket!.close()
  b.socket!.close()

  // Web calls' streams are tied to their calls once admitted: open, not pending. Three fill the process.
  const account = await createAccount(ctx.db)
  const clients = []
  for (let i = 0; i < 3; i++) {
    const call = await webCall(ctx, account)
    const client = await poll(async () => await openWebCall(ctx.url, call.access_token).catch(() => undefined), (c) => c !== undefined, { message: 'a place for the stream' })
    await client!.waitFor('ready')
    clients.push(client!)
  }
  const fourth = await webCall(ctx, account)
  t.match(await refusal(openWebCall(ctx.url, fourth.access_token)), { statusCode: 503, body: /streams_busy/ }, 'three streams open: the process is full')
  t.match(await connect(ctx.url, TWILIO_STREAM, '127.0.0.5'), { status: 503 }, 'for Twilio\'s stream too')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/health' })).statusCode, 200)

  clients[0].hangup()
  await clients[0].closed
  // The place comes back once the server's side of the connection has closed; a refused try spends no token.
  const next = await poll(async () => await openWebCall(ctx.url, fourth.access_token).catch(() => undefined), (c) => c !== undefined, { message: 'the place came back' })
  await next!.waitFor('ready')
  for (const client of [...clients.slice(1), next!]) client.hangup()
})

t.test('VOICE_MAX_STREAMS defaults to what the open-file limit leaves after the database, workers and HTTP', async (t) => {
  t.equal(maxStreamsFor(1024, 10, 50), 236)
  t.equal(maxStreamsFor(300, 10, 50), 1, 'never below one')
})

t.test('client protocol errors on the stream sockets (oversized, unmasked frames) are logged below error', async (t) => {
  const lines: Array<{ level: number, msg: string }> = []
  const sink = new Writable({ write (chunk: Buffer, _encoding, done) { lines.push(JSON.parse(chunk.toString())); done() } })
  const ctx = await listen(t, { VOICE_MAX_MESSAGE_BYTES: '1024', VOICE_STREAM_START_TIMEOUT_MS: '60000' }, pino({ level: 'info' }, sink))

  // A frame over VOICE_MAX_MESSAGE_BYTES on a web call's stream ends the call, as a protocol error.
  const account = await createAccount(ctx.db)
  const call = await webCall(ctx, account)
  const client = await openWebCall(ctx.url, call.access_token)
  await client.waitFor('ready')
  client.socket.send(Buffer.alloc(4096))
  t.equal((await client.closed).code, 1009)

  // The same on Twilio's stream.
  const big = await connect(ctx.url, TWILIO_STREAM)
  big.socket!.send('x'.repeat(4096))
  t.equal(await big.closed, 1009)

  // An unmasked frame (a client must mask every frame) on Twilio's stream, written by hand.
  const raw = net.connect(Number(new URL(ctx.url).port), '127.0.0.1')
  await new Promise((resolve) => raw.once('connect', resolve))
  raw.write(`GET ${TWILIO_STREAM} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`)
  await new Promise((resolve) => raw.once('data', resolve))
  raw.write(Buffer.concat([Buffer.of(0x81, 5), Buffer.from('hello')]))
  await new Promise((resolve) => raw.on('close', resolve))

  await poll(() => lines.filter((l) => l.msg === 'a stream client broke the WebSocket protocol').length, (n) => n >= 3, { message: 'three protocol errors logged' })
  t.same(lines.filter((l) => l.level >= 50), [], 'nothing logged as an error')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/health' })).statusCode, 200)
})
