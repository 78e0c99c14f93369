import { EventEmitter } from 'node:events'
import t from 'tap'
import type { WebSocket } from 'ws'
import type { EndReason } from '../../src/modules/voice/session.ts'
import { CLOSE, MAX_BUFFERED_BYTES, SocketLoop, type LoopClock, type StreamCodec } from '../../src/modules/voice/socket-loop.ts'

// The socket loop both call streams share, on a fake socket and a clock the test steps: pings, the time-out,
// the start deadline, a reader that stopped reading, malformed and oversized messages, and how a close ends the
// call. The streams through real sockets are covered by web-call-simulator.test.ts, twilio-calls.test.ts and
// streams.test.ts.

class FakeSocket extends EventEmitter {
  readonly OPEN = 1
  readonly CONNECTING = 0
  readyState = 1
  bufferedAmount = 0
  pings = 0
  sent: Array<string | Buffer> = []
  closed: { code: number, reason: string } | undefined
  ping (): void { this.pings++ }
  send (data: string | Buffer): void { this.sent.push(data) }
  close (code: number, reason: string): void {
    // ws throws on a close reason over 123 bytes.
    if (Buffer.byteLength(reason) > 123) throw new RangeError('The message must not be greater than 123 bytes')
    this.closed = { code, reason }
    this.readyState = 2
  }

  /** The far end's side of the close handshake. */
  gone (code = 1005): void {
    this.readyState = 3
    this.emit('close', code)
  }
}

class FakeClock implements LoopClock {
  at = 0
  timers: Array<{ due: number, every?: number, run: () => void, cancelled: boolean }> = []
  now = () => this.at
  every = (ms: number, run: () => void) => this.#add(ms, run, ms)
  after = (ms: number, run: () => void) => this.#add(ms, run)
  #add (ms: number, run: () => void, every?: number) {
    const timer = { due: this.at + ms, every, run, cancelled: false }
    this.timers.push(timer)
    return () => { timer.cancelled = true }
  }

  /** Steps time by `ms`, running every timer due on the way in order. */
  advance (ms: number): void {
    const end = this.at + ms
    for (;;) {
      const next = this.timers.filter((x) => !x.cancelled && x.due <= end).sort((a, b) => a.due - b.due)[0]
      if (next === undefined) break
      this.at = next.due
      if (next.every === undefined) next.cancelled = true
      else next.due += next.every
      next.run()
    }
    this.at = end
  }

  get pending (): number { return this.timers.filter((x) => !x.cancelled).length }
}

function setup (receive: StreamCodec['receive'] = () => undefined, { timeoutMs = 900, startTimeoutMs = 5000 } = {}) {
  const socket = new FakeSocket()
  const clock = new FakeClock()
  const told: Array<[string, string]> = []
  const gone: EndReason[] = []
  let started = 0
  const refused: string[] = []
  const loop = new SocketLoop(socket as unknown as WebSocket, {
    receive,
    tell: (code, problem) => told.push([code, problem]),
    gone: (reason) => gone.push(reason),
    dropped: 'stream_dropped'
  }, { timeoutMs, startTimeoutMs, started: () => started++, refused: (problem) => refused.push(problem), clock })
  return { socket, clock, loop, told, gone, refused, started: () => started }
}

t.test('pings every third of the time-out while the far end answers; nothing heard for the time-out fails stream_timeout', async (t) => {
  const { socket, clock, loop, told, gone } = setup()
  loop.attach()
  for (let i = 0; i < 10; i++) {
    clock.advance(300)
    socket.emit('pong')
  }
  t.equal(socket.pings, 10, 'a ping every 300 ms')
  t.same(gone, [], 'alive while it answers')
  // Messages count as heard too.
  for (let i = 0; i < 5; i++) {
    clock.advance(300)
    socket.emit('message', Buffer.from('x'), false)
  }
  t.same(gone, [])
  clock.advance(900)
  t.same(told, [], 'not yet: the time-out is exceeded only after 900 ms')
  clock.advance(300)
  t.same(told, [['stream_timeout', 'nothing was heard from the stream for 900 ms']], 'the far end is told')
  t.same(gone, ['stream_timeout'], 'the call ends')
  t.equal(socket.closed, undefined, 'the socket waits for the session to end (its last events)')
  loop.close()
  t.same(socket.closed, { code: CLOSE.timeout, reason: 'nothing was heard from the stream for 900 ms' })
  t.equal(clock.pending, 0, 'no timer left')
  socket.gone()
  t.same(gone, ['stream_timeout'], 'the close after a fault ends nothing twice')
})

t.test('a far end that stops reading fails stream_timeout', async (t) => {
  const { socket, clock, loop, gone } = setup()
  loop.attach()
  socket.bufferedAmount = MAX_BUFFERED_BYTES + 1
  clock.advance(300)
  t.same(gone, ['stream_timeout'])
  t.equal(socket.pings, 0)
})

t.test('malformed, garbage and oversized messages: told, the call ends protocol_error, closed 4400', async (t) => {
  const received: string[] = []
  const { socket, loop, told, gone, refused } = setup((data) => {
    received.push(data.toString())
    return data.toString() === 'garbage' ? 'a message must be JSON' : undefined
  })
  loop.attach()
  socket.emit('message', Buffer.from('fine'), false)
  socket.emit('message', Buffer.from('garbage'), false)
  socket.emit('message', Buffer.from('after'), false)
  t.same(received, ['fine', 'garbage'], 'nothing is taken after a fault')
  t.same(told, [['protocol_error', 'a message must be JSON']])
  t.same(refused, ['a message must be JSON'], 'logged')
  t.same(gone, ['protocol_error'])
  loop.close()
  t.equal(socket.closed?.code, CLOSE.protocol)

  // ws reports a frame over maxPayload as an error, then closes 1009.
  const big = setup()
  big.loop.attach()
  big.socket.emit('error', new Error('Max payload size exceeded'))
  big.socket.gone(CLOSE.tooLarge)
  t.same(big.gone, ['protocol_error'])
  t.same(big.told, [['protocol_error', 'the message was too large or malformed']])
  // Only the 1009 close, without the error before it, is the same fault.
  const close = setup()
  close.loop.attach()
  close.socket.gone(CLOSE.tooLarge)
  t.same(close.gone, ['protocol_error'])
})

t.test('a problem of any length closes within the 123 bytes a close reason holds', async (t) => {
  const { socket, loop } = setup(() => `unknown event ${JSON.stringify('é'.repeat(200))}`)
  socket.emit('message', Buffer.from('x'), false)
  loop.close()
  t.equal(socket.closed?.code, CLOSE.protocol, 'closed, not thrown')
  t.ok(Buffer.byteLength(socket.closed!.reason) <= 123)
  t.match(socket.closed!.reason, /^unknown event "é+$/)
})

t.test('before it is attached: closed at once on a fault, on the start deadline, or when refused; the admission is handed off once', async (t) => {
  const early = setup(() => 'a message must be JSON')
  early.socket.emit('message', Buffer.from('x'), false)
  t.equal(early.socket.closed?.code, CLOSE.protocol, 'no call to wait for')
  t.same(early.gone, [])

  const slow = setup(undefined, { startTimeoutMs: 200, timeoutMs: 60_000 })
  slow.clock.advance(199)
  t.equal(slow.socket.closed, undefined)
  slow.clock.advance(1)
  t.same(slow.socket.closed, { code: CLOSE.timeout, reason: 'no valid start within 200 ms' })
  t.equal(slow.clock.pending, 0)

  const started = setup(undefined, { startTimeoutMs: 200, timeoutMs: 60_000 })
  started.loop.attach()
  started.loop.attach()
  t.equal(started.started(), 1, 'handed off once')
  started.clock.advance(1000)
  t.equal(started.socket.closed, undefined, 'no start deadline once attached')

  const refused = setup()
  refused.loop.refuse(CLOSE.forbidden, 'invalid_access_token', 'the access token was spent by another stream')
  t.same(refused.told, [['invalid_access_token', 'the access token was spent by another stream']])
  t.equal(refused.socket.closed?.code, CLOSE.forbidden)
  t.equal(refused.started(), 0, 'still pending: its place is given back when the connection closes')
})

t.test('the close maps to the call\'s end; a stream gone while its call was opened ends that call on attach', async (t) => {
  const { socket, loop, gone } = setup()
  loop.attach()
  socket.gone(1000)
  t.same(gone, ['stream_dropped'], 'the transport\'s reason for a close without a fault')

  const before = setup()
  before.socket.gone(1001)
  t.same(before.gone, [], 'no call yet')
  before.loop.attach()
  t.same(before.gone, ['stream_dropped'])

  const timedOut = setup(undefined, { startTimeoutMs: 100, timeoutMs: 60_000 })
  timedOut.clock.advance(100)
  timedOut.loop.attach()
  t.same(timedOut.gone, ['stream_timeout'])
})

t.test('a normal close waits for the last words to be played, then 1000', async (t) => {
  const { socket, loop } = setup()
  loop.attach()
  let played!: () => void
  loop.close(new Promise<void>((resolve) => { played = resolve }))
  await Promise.resolve()
  t.equal(socket.closed, undefined)
  played()
  await new Promise((resolve) => setImmediate(resolve))
  t.same(socket.closed, { code: CLOSE.normal, reason: '' })
})
