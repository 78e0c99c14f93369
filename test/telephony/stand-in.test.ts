import { createHmac } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { type WebSocket, WebSocketServer } from 'ws'
import { mulawDecode, mulawEncode, rms } from '../../src/modules/voice/audio.ts'
import { poll } from '../helpers/poll.ts'
import { sid, startTwilioStandIn, twilioSignature } from '../helpers/twilio-stand-in.ts'
import { tone } from '../helpers/openai-http-standin.ts'

// The Twilio stand-in against a few lines playing Switchboard's side: a webhook server and a media stream server
// on loopback, reached through the stand-in's route from the public https://voice.example.test.

const PUBLIC = 'https://voice.example.test'
const ACCOUNT = sid('AC')
const TOKEN = 'voice-auth-token'
const NUMBER = '+14155550100'
const CALLER = '+15105550123'

/** X-Twilio-Signature as Twilio's docs describe it, written apart from the stand-in's. */
function expectedSignature (url: string, form: URLSearchParams): string {
  const data = url + [...form.keys()].sort().map((key) => key + form.get(key)).join('')
  return createHmac('sha1', TOKEN).update(data).digest('base64')
}

interface Hit { path: string, url: string, form: URLSearchParams, headers: http.IncomingHttpHeaders, valid: boolean }
interface ServerSide { socket: WebSocket, url: string, headers: http.IncomingHttpHeaders, messages: any[], closed: Promise<number> }

const connectTwiml = (label: string) => '<?xml version="1.0" encoding="UTF-8"?><Response><Connect>' +
  `<Stream url="wss://voice.example.test/stream/${label}"><Parameter name="agent" value="a1"/><Parameter name="label" value="${label}"/></Stream>` +
  '</Connect><Say>Goodbye</Say></Response>'

/** Switchboard's side: answers webhooks after checking their signature, accepts media streams. */
async function switchboard (t: Test) {
  const hits: Hit[] = []
  const sockets: ServerSide[] = []
  const board = { hits, sockets, origin: '', dialAnswer: connectTwiml('after-dial') }
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'))
      const url = PUBLIC + req.url
      const valid = req.headers['x-twilio-signature'] === expectedSignature(url, form)
      const path = new URL(url).pathname
      hits.push({ path, url, form, headers: req.headers, valid })
      if (!valid) return res.writeHead(403).end()
      if (path === '/status') return res.writeHead(204).end()
      const twiml = path === '/dial-action' ? board.dialAnswer : connectTwiml(path.slice(1))
      res.writeHead(200, { 'content-type': 'text/xml' }).end(twiml)
    })
  })
  const wss = new WebSocketServer({ server })
  wss.on('connection', (socket, req) => {
    const messages: any[] = []
    socket.on('message', (data: Buffer) => messages.push(JSON.parse(data.toString('utf8'))))
    const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)))
    sockets.push({ socket, url: req.url ?? '', headers: req.headers, messages, closed })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => {
    for (const client of wss.clients) client.terminate()
    wss.close()
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  board.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return board
}

async function setup (t: Test) {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(ACCOUNT, TOKEN)
  const board = await switchboard(t)
  twilio.route(PUBLIC, board.origin)
  const rest = async (method: string, path: string, form?: Record<string, string> | Array<[string, string]>) => {
    const res = await fetch(`${twilio.url}/2010-04-01/Accounts/${ACCOUNT}${path}`, {
      method,
      headers: { authorization: `Basic ${Buffer.from(`${ACCOUNT}:${TOKEN}`).toString('base64')}` },
      body: form === undefined ? undefined : new URLSearchParams(form)
    })
    return { status: res.status, body: await res.json() as any }
  }
  const serverSide = (n: number) => poll(() => board.sockets[n], (s) => s !== undefined, { timeoutMs: 30_000, message: `no stream #${n} reached the server` })
  const serverMessage = (side: ServerSide, event: string, where: (m: any) => boolean = () => true) =>
    poll(() => side.messages.find((m) => m.event === event && where(m)), (m) => m !== undefined, { timeoutMs: 30_000, message: () => `no ${event}; got ${JSON.stringify(side.messages.map((m) => m.event))}` })
  const hit = async (path: string) =>
    (await poll(() => board.hits.find((h) => h.path === path), (h) => h !== undefined, { timeoutMs: 30_000, message: `no request to ${path}` }))!
  return { twilio, board, rest, serverSide, serverMessage, hit }
}

/** `frames` 20 ms µ-law frames of a loud tone, base64, as the agent side sends them. */
const agentAudio = (frames: number) => {
  const pcm = new Int16Array(frames * 160)
  for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(8000 * Math.sin(2 * Math.PI * 440 * i / 8000))
  return { pcm, payloads: Array.from({ length: frames }, (_, i) => mulawEncode(pcm.subarray(i * 160, (i + 1) * 160)).toString('base64')) }
}

t.test('inbound: signed voice webhook, stream start, µ-law both ways, marks after playback and on clear, retry, hangup', async (t) => {
  const { twilio, board, rest, serverSide, serverMessage, hit } = await setup(t)
  const number = twilio.hold(ACCOUNT, NUMBER)
  const updated = await rest('POST', `/IncomingPhoneNumbers/${number.sid}.json`, { VoiceUrl: `${PUBLIC}/voice?agent=a1`, StatusCallback: `${PUBLIC}/status` })
  t.equal(updated.status, 200)
  t.match(updated.body, { sid: number.sid, voice_url: `${PUBLIC}/voice?agent=a1`, voice_method: 'POST', status_callback: `${PUBLIC}/status`, status_callback_method: 'POST' })
  t.equal(twilio.incoming(ACCOUNT)[0].voice_url, `${PUBLIC}/voice?agent=a1`)
  t.match(await rest('POST', `/IncomingPhoneNumbers/${sid('PN')}.json`, { VoiceUrl: PUBLIC }), { status: 404, body: { code: 20404 } })

  const { call, webhook } = await twilio.dialIn(CALLER, NUMBER)
  t.match(webhook, { kind: 'voice', status: 200, url: `${PUBLIC}/voice?agent=a1`, body: /<Stream/ })
  const voice = board.hits[0]
  t.ok(voice.valid, 'the voice webhook is signed over the public URL with its query')
  t.equal(voice.headers.host, 'voice.example.test', 'the tunnel keeps the public host')
  t.match(Object.fromEntries(voice.form), { AccountSid: ACCOUNT, ApiVersion: '2010-04-01', CallSid: call.sid, CallStatus: 'ringing', Direction: 'inbound', From: CALLER, To: NUMBER, Caller: CALLER, Called: NUMBER })

  const stream = await call.waitForStream()
  const side = await serverSide(0)
  t.equal(side.url, '/stream/voice')
  t.equal(side.headers['x-twilio-signature'], expectedSignature('wss://voice.example.test/stream/voice', new URLSearchParams()), 'the handshake is signed too, over the wss:// URL')
  await poll(() => side.messages.length, (n) => n >= 2)
  t.same(side.messages[0], { event: 'connected', protocol: 'Call', version: '1.0.0' })
  t.same(side.messages[1], {
    event: 'start',
    sequenceNumber: '1',
    start: { accountSid: ACCOUNT, streamSid: stream.sid, callSid: call.sid, tracks: ['inbound'], mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 }, customParameters: { agent: 'a1', label: 'voice' } },
    streamSid: stream.sid
  })
  t.equal(call.status, 'in-progress')

  // The caller speaks: 100 ms at 16 kHz are five 20 ms µ-law frames.
  await stream.sendAudio(tone(1600))
  const media = await poll(() => side.messages.filter((m) => m.event === 'media'), (m) => m.length === 5)
  t.same(media.map((m) => [m.sequenceNumber, m.media.chunk, m.media.track, m.streamSid]), [2, 3, 4, 5, 6].map((n) => [String(n), String(n - 1), 'inbound', stream.sid]))
  const stamps = media.map((m) => Number(m.media.timestamp))
  t.ok(stamps.every((s, i) => i === 0 || s >= stamps[i - 1] + 20), `timestamps step by 20 ms at least: ${stamps}`)
  const heard = media.map((m) => mulawDecode(Buffer.from(m.media.payload, 'base64')))
  t.ok(heard.every((pcm) => pcm.length === 160), '160 bytes a frame')
  t.ok(rms(heard[1]) > 1000, 'the caller is heard')

  // The agent speaks 200 ms, then a mark: it comes back once the audio has played.
  const first = agentAudio(10)
  const sentAt = performance.now()
  for (const payload of first.payloads) side.socket.send(JSON.stringify({ event: 'media', streamSid: stream.sid, media: { payload } }))
  side.socket.send(JSON.stringify({ event: 'mark', streamSid: stream.sid, mark: { name: 'first' } }))
  const echo = await serverMessage(side, 'mark')
  const playedMs = performance.now() - sentAt
  t.ok(playedMs >= 190, `echoed after playback (${playedMs.toFixed(0)} ms)`)
  t.same(echo, { event: 'mark', sequenceNumber: '7', streamSid: stream.sid, mark: { name: 'first' } })
  t.equal(stream.frames.length, 10)
  t.same(Array.from(stream.frames[3].pcm), Array.from(mulawDecode(mulawEncode(first.pcm.subarray(480, 640)))), 'µ-law decoded')
  t.equal(stream.audio16k().length, 3200)
  t.ok(rms(stream.audio16k()) > 4000)

  // Two seconds of audio, a mark, and a clear: the mark comes back at once, the rest is dropped.
  const long = agentAudio(100)
  const clearedAt = performance.now()
  for (const payload of long.payloads) side.socket.send(JSON.stringify({ event: 'media', streamSid: stream.sid, media: { payload } }))
  side.socket.send(JSON.stringify({ event: 'mark', streamSid: stream.sid, mark: { name: 'second' } }))
  t.ok(await poll(() => stream.bufferedMs(), (ms) => ms > 1500), 'queued for playback')
  side.socket.send(JSON.stringify({ event: 'clear', streamSid: stream.sid }))
  await serverMessage(side, 'mark', (m) => m.mark.name === 'second')
  t.ok(performance.now() - clearedAt < 1000, 'the clear answered the mark before its audio could have played')
  t.equal(stream.bufferedMs(), 0)
  t.ok(stream.frames.filter((f) => f.dropped).length > 80, 'the unplayed audio is dropped')
  t.same(stream.echoed.map((m) => m.name), ['first', 'second'])

  stream.sendDtmf('5')
  t.match(await serverMessage(side, 'dtmf'), { streamSid: stream.sid, sequenceNumber: '9', dtmf: { track: 'inbound_track', digit: '5' } })

  // Twilio retries a webhook as it was: same parameters, same signature, same idempotency token.
  const retry = await twilio.resend(webhook)
  t.match(retry, { status: 200, replay: true, callSid: call.sid })
  const [original, again] = board.hits.filter((h) => h.path === '/voice')
  t.equal(again.headers['x-twilio-signature'], original.headers['x-twilio-signature'])
  t.equal(again.headers['i-twilio-idempotency-token'], original.headers['i-twilio-idempotency-token'])
  t.same(Object.fromEntries(again.form), Object.fromEntries(original.form))

  t.equal(await stream.hangup(), 'completed')
  t.match(await serverMessage(side, 'stop'), { sequenceNumber: '10', streamSid: stream.sid, stop: { accountSid: ACCOUNT, callSid: call.sid } })
  t.equal(await side.closed, 1000)
  const status = await hit('/status')
  t.ok(status.valid)
  t.match(Object.fromEntries(status.form), { CallSid: call.sid, CallStatus: 'completed', Direction: 'inbound', CallbackSource: 'call-progress-events', SequenceNumber: '0', CallDuration: /^\d+$/, Duration: /^\d+$/, Timestamp: /\+0000$/ })
  t.match(twilio.webhooks.find((w) => w.kind === 'status'), { status: 204, callSid: call.sid })
  t.match(await rest('GET', `/Calls/${call.sid}.json`), { status: 200, body: { sid: call.sid, status: 'completed', direction: 'inbound', duration: /^\d+$/ } })
  t.same(twilio.errors, [])
})

t.test('forged requests: unsigned or wrongly signed dial-ins and posts', async (t) => {
  const { twilio, board } = await setup(t)
  twilio.hold(ACCOUNT, NUMBER, { voice_url: `${PUBLIC}/voice` })
  for (const signature of ['none', 'wrong'] as const) {
    const { call, webhook } = await twilio.dialIn(CALLER, NUMBER, { signature })
    t.equal(webhook.status, 403, signature)
    t.equal(await call.ended, 'failed', 'no call follows a forged request')
  }
  t.equal(board.hits[0].headers['x-twilio-signature'], undefined)
  t.equal(typeof board.hits[1].headers['x-twilio-signature'], 'string')
  t.same(twilio.calls, [])

  const params = { CallSid: sid('CA'), CallStatus: 'completed', AccountSid: ACCOUNT }
  t.equal((await twilio.post(`${PUBLIC}/status?x=1`, params, { accountSid: ACCOUNT })).status, 204)
  const replayed = await twilio.resend(twilio.webhooks.at(-1)!)
  t.equal(replayed.status, 204)
  t.equal((await twilio.post(`${PUBLIC}/status`, params, { accountSid: ACCOUNT, signature: 'wrong' })).status, 403)
  t.equal((await twilio.post(`${PUBLIC}/status`, params, { signature: 'none' })).status, 403)
  t.equal(twilioSignature(TOKEN, `${PUBLIC}/status?x=1`, params), expectedSignature(`${PUBLIC}/status?x=1`, new URLSearchParams(params)))
  t.equal(twilioSignature('t', 'u', [['b', '2'], ['a', '9'], ['a', '1'], ['B', '0']]), createHmac('sha1', 't').update('uB0a1a9b2').digest('base64'), 'names sorted case-sensitively, repeated names by value')
})

t.test('outbound: created through the REST API, Url fetched, progress callbacks signed, no-answer and busy', async (t) => {
  const { twilio, board, rest, serverSide } = await setup(t)
  twilio.hold(ACCOUNT, NUMBER)
  const callee = '+15105550111'
  t.match(await rest('POST', '/Calls.json', { To: callee, From: '+14155550999', Twiml: '<Response/>' }), { status: 400, body: { code: 21210, status: 400 } })
  t.match(await rest('POST', '/Calls.json', { To: '5105550111', From: NUMBER, Twiml: '<Response/>' }), { status: 400, body: { code: 21211 } })

  const created = await rest('POST', '/Calls.json', [['To', callee], ['From', NUMBER], ['Url', `${PUBLIC}/answer?agent=a1`], ['StatusCallback', `${PUBLIC}/status?leg=out`],
    ['StatusCallbackEvent', 'initiated'], ['StatusCallbackEvent', 'ringing'], ['StatusCallbackEvent', 'answered'], ['StatusCallbackEvent', 'completed']])
  t.equal(created.status, 201)
  t.match(created.body, { sid: /^CA[0-9a-f]{32}$/, account_sid: ACCOUNT, to: callee, from: NUMBER, status: 'queued', direction: 'outbound-api', api_version: '2010-04-01', uri: `/2010-04-01/Accounts/${ACCOUNT}/Calls/${created.body.sid}.json` })
  const call = await twilio.waitForCall(callee)
  t.equal(call.sid, created.body.sid)
  const stream = await call.waitForStream()
  const answer = board.hits.find((h) => h.path === '/answer')!
  t.ok(answer.valid)
  t.match(Object.fromEntries(answer.form), { CallSid: call.sid, CallStatus: 'in-progress', Direction: 'outbound-api', From: NUMBER, To: callee })
  t.same(stream.customParameters, { agent: 'a1', label: 'answer' })
  t.match(await rest('GET', `/Calls/${call.sid}.json`), { body: { status: 'in-progress', duration: null } })

  // The server ends the stream: Twilio goes on after </Connect> (a <Say>), then the call completes.
  ;(await serverSide(0)).socket.close(1000)
  t.equal(await call.ended, 'completed')
  t.same(call.verbs.map((v) => v.name), ['Connect', 'Say'])
  const progress = board.hits.filter((h) => h.path === '/status')
  t.ok(progress.every((h) => h.valid && h.url === `${PUBLIC}/status?leg=out`))
  t.same(progress.map((h) => [h.form.get('CallStatus'), h.form.get('SequenceNumber')]), [['initiated', '0'], ['ringing', '1'], ['in-progress', '2'], ['completed', '3']])
  t.match(Object.fromEntries(progress[3].form), { CallDuration: /^\d+$/, Direction: 'outbound-api', CallbackSource: 'call-progress-events' })

  twilio.callee('+15105550112', { answer: 'no-answer' })
  twilio.callee('+15105550113', { answer: 'busy' })
  for (const [to, outcome] of [['+15105550112', 'no-answer'], ['+15105550113', 'busy']]) {
    const placed = await rest('POST', '/Calls.json', { To: to, From: NUMBER, Twiml: connectTwiml('never'), StatusCallback: `${PUBLIC}/status` })
    const final = await poll(() => board.hits.find((h) => h.form.get('CallSid') === placed.body.sid), (h) => h !== undefined)
    t.match(Object.fromEntries(final!.form), { CallStatus: outcome, CallDuration: '0', SequenceNumber: '0' }, `${outcome}: only the final callback`)
    t.ok(final!.valid)
    await t.rejects(twilio.waitForCall(to), new RegExp(`ended ${outcome}, unanswered`))
  }
  t.equal(board.sockets.length, 1, 'no TwiML ran for them')

  twilio.callee('+15105550114', { answer: 'answer', ringMs: 60_000 })
  const ringing = await rest('POST', '/Calls.json', { To: '+15105550114', From: NUMBER, Twiml: '<Response><Hangup/></Response>', StatusCallback: `${PUBLIC}/status` })
  await poll(() => twilio.calls.find((c) => c.sid === ringing.body.sid)!.status, (s) => s === 'ringing')
  t.match(await rest('POST', `/Calls/${ringing.body.sid}.json`, { Status: 'canceled' }), { status: 200, body: { status: 'canceled' } })
  t.match(await rest('POST', `/Calls/${ringing.body.sid}.json`, { Twiml: '<Response/>' }), { status: 400, body: { code: 21220 } })
  t.match(await rest('POST', `/Calls/${sid('CA')}.json`, { Status: 'completed' }), { status: 404, body: { code: 20404 } })
  t.equal((await statusOf(board, ringing.body.sid)).form.get('CallStatus'), 'canceled')
})

/** The first status callback about the call. */
async function statusOf (board: { hits: Hit[] }, callSid: string) {
  return (await poll(() => board.hits.find((h) => h.path === '/status' && h.form.get('CallSid') === callSid), (h) => h !== undefined))!
}

t.test('call update with a <Dial>: stream stopped, dial answered then not, action TwiML followed', async (t) => {
  const { twilio, board, rest, serverSide, serverMessage } = await setup(t)
  twilio.hold(ACCOUNT, NUMBER, { voice_url: `${PUBLIC}/voice`, status_callback: `${PUBLIC}/status` })
  const { call } = await twilio.dialIn(CALLER, NUMBER)
  const first = await serverSide(0)
  await call.waitForStream()

  twilio.callee('+15105550199', { answer: 'answer', talkMs: 30 })
  const dial = (to: string) => `<Response><Dial callerId="${NUMBER}" timeout="20" action="${PUBLIC}/dial-action?n=${to}" method="POST"><Number>${to}</Number></Dial></Response>`
  t.match(await rest('POST', `/Calls/${call.sid}.json`, { Twiml: dial('+15105550199') }), { status: 200, body: { status: 'in-progress' } })
  t.match(await serverMessage(first, 'stop'), { stop: { callSid: call.sid } })
  t.equal(await first.closed, 1000)
  const second = await call.waitForStream(1)
  t.same(second.customParameters, { agent: 'a1', label: 'after-dial' })
  t.match(call.dials[0], { number: '+15105550199', callerId: NUMBER, timeout: 20, action: `${PUBLIC}/dial-action?n=+15105550199`, method: 'POST', status: 'completed', duration: 1 })
  const answered = board.hits.find((h) => h.path === '/dial-action')!
  t.ok(answered.valid)
  t.match(Object.fromEntries(answered.form), { CallSid: call.sid, CallStatus: 'in-progress', DialCallStatus: 'completed', DialCallDuration: '1', DialCallSid: /^CA[0-9a-f]{32}$/, Direction: 'inbound' })

  board.dialAnswer = '<Response><Hangup/></Response>'
  twilio.callee('+15105550198', { answer: 'no-answer' })
  const secondSide = await serverSide(1)
  await rest('POST', `/Calls/${call.sid}.json`, { Twiml: dial('+15105550198') })
  await serverMessage(secondSide, 'stop')
  t.equal(await call.ended, 'completed')
  const unanswered = board.hits.filter((h) => h.path === '/dial-action')[1]
  t.match(Object.fromEntries(unanswered.form), { DialCallStatus: 'no-answer' })
  t.notOk(unanswered.form.has('DialCallDuration'))
  t.equal(call.dials[1].status, 'no-answer')
  t.equal(call.twiml.length, 5, 'voice, dial, action, dial, action')
  t.same(call.verbs.map((v) => v.name), ['Connect', 'Dial', 'Connect', 'Dial', 'Hangup'])
  t.equal((await statusOf(board, call.sid)).form.get('CallStatus'), 'completed')
  t.same(twilio.errors, [])
})

t.test('drop: the connection is cut without stop, the call completes', async (t) => {
  const { twilio, board, serverSide } = await setup(t)
  twilio.hold(ACCOUNT, NUMBER, { voice_url: `${PUBLIC}/voice`, status_callback: `${PUBLIC}/status` })
  const { call } = await twilio.dialIn(CALLER, NUMBER)
  const stream = await call.waitForStream()
  const side = await serverSide(0)
  await poll(() => side.messages.length, (n) => n >= 2)
  t.equal(await stream.drop(), 'completed')
  t.equal(await side.closed, 1006)
  t.same(side.messages.map((m) => m.event), ['connected', 'start'], 'no stop')
  t.equal((await stream.closed).code, 1006)
  t.equal((await statusOf(board, call.sid)).form.get('CallStatus'), 'completed')
})

t.test('routing: only loopback targets; a URL without a route is never reached', async (t) => {
  const { twilio, board, rest } = await setup(t)
  t.throws(() => twilio.route('https://other.example.test', 'http://10.0.0.1:8080'), /only http:\/\/ on loopback/)
  t.throws(() => twilio.route('https://other.example.test', 'http://localhost:8080'), /only http:\/\/ on loopback/)
  twilio.hold(ACCOUNT, NUMBER, { voice_url: 'https://elsewhere.example.test/voice' })
  const { call, webhook } = await twilio.dialIn(CALLER, NUMBER)
  t.match(webhook, { status: 0, error: /no route to https:\/\/elsewhere\.example\.test/ })
  t.equal(await call.ended, 'completed')

  const stream = '<Response><Connect><Stream url="wss://elsewhere.example.test/stream"/></Connect></Response>'
  const placed = await rest('POST', '/Calls.json', { To: '+15105550111', From: NUMBER, Twiml: stream })
  t.equal(await twilio.calls.find((c) => c.sid === placed.body.sid)!.ended, 'completed')
  t.same(board.hits, [])
  t.same(board.sockets, [])
  t.match(twilio.errors, [/no route to https:\/\/elsewhere/, /11200/, /stream wss:\/\/elsewhere\.example\.test\/stream: no route/])
})
