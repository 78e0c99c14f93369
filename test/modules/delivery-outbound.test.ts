import net from 'node:net'
import { Writable } from 'node:stream'
import pino from 'pino'
import { Webhook } from 'standardwebhooks'
import t from 'tap'
import { Agent, buildConnector } from 'undici'
import { enqueuePostCall } from '../../src/modules/deliveries/engine.ts'
import { isPrivateAddress } from '../../src/http/addresses.ts'
import { PRIVATE_ADDRESS_REFUSED } from '../../src/net/guard.ts'
import { displayUrl } from '../../src/modules/deliveries/render.ts'
import { send, UNREACHABLE } from '../../src/net/request.ts'
import { addAction, createAgent, insertCalls } from '../helpers/calls.ts'
import { analysedCall, fastSetup, settled } from '../helpers/deliveries.ts'
import { poll } from '../helpers/poll.ts'
import { makeCertificates, startHttpsReceiver, startReceiver, type Received } from '../helpers/receiver.ts'

// What leaves the server towards a user-given URL: which addresses it may reach (checked before any
// connection), what a failure tells the user, what survives a redirect, what is signed and what answers
// and logs show of the URL. Every request goes to 127.0.0.1: refusals of other addresses are proven on
// the pure address check.

/** A logger whose lines the test reads. */
function capturingLog () {
  const lines: string[] = []
  const log = pino({ level: 'info' }, new Writable({ write (chunk, _encoding, done) { lines.push(String(chunk)); done() } }))
  return { log, lines }
}

t.test('the address check refuses every range that is not public, in every spelling', async (t) => {
  const refused = [
    // IPv4: private, loopback, link-local and metadata, CGNAT, this network, multicast and reserved, documentation.
    '10.1.2.3', '172.16.0.1', '192.168.1.1', '127.0.0.1', '127.255.255.254', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1',
    '255.255.255.255', '192.0.2.1', '198.18.0.1',
    // IPv6: loopback, unspecified, link-local (with a zone), unique-local, site-local, multicast, documentation, discard.
    '::1', '[::1]', '::', 'fe80::1', 'fe80::1%eth0', 'fd00::1', 'fc00::1', 'fec0::1', 'ff02::1', '2001:db8::1', '100::1',
    // ::/96, IPv4-compatible: refused whatever the IPv4 address.
    '::a00:1', '::10.0.0.1', '::8.8.8.8', '::808:808',
    // ::ffff:0:0/96, IPv4-mapped: judged by the embedded IPv4 address, in every spelling.
    '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '0:0:0:0:0:ffff:a00:1', '0000:0000:0000:0000:0000:FFFF:0A00:0001', '::ffff:a9fe:a9fe',
    // 64:ff9b::/96, NAT64: judged by the embedded IPv4 address.
    '64:ff9b::a00:1', '64:ff9b::10.0.0.1', '64:ff9b::127.0.0.1', '64:ff9b::a9fe:a9fe', '64:ff9b:0:0:0:0:c0a8:101',
    // 64:ff9b:1::/48 (local-use NAT64), 2002::/16 (6to4), 2001::/32 (Teredo): refused whatever they embed.
    '64:ff9b:1::1', '64:ff9b:1:ffff::808:808', '2002:a00:1::1', '2002:808:808::1', '2001::1', '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    // Not an address at all.
    'not-an-ip', 'localhost', ''
  ]
  for (const address of refused) t.ok(isPrivateAddress(address), `${address} is refused`)
  const open = ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '2001:4860:4860::8888', '2001:1::1:0:0:0',
    '::ffff:8.8.8.8', '0:0:0:0:0:ffff:808:808', '64:ff9b::8.8.8.8', '64:ff9b::808:808', '2003::1']
  for (const address of open) t.notOk(isPrivateAddress(address), `${address} is public`)
})

t.test('with private networks refused, no connection at all reaches a loopback receiver', async (t) => {
  let connections = 0
  const counter = net.createServer((socket) => { connections++; socket.destroy() })
  await new Promise<void>((resolve) => counter.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => counter.close(() => resolve())))
  const port = (counter.address() as net.AddressInfo).port

  const ctx = await fastSetup(t, { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'false' })
  const agent = await createAgent(ctx.app, ctx.account)
  const urls = [`http://127.0.0.1:${port}/by-ip`, `http://localhost:${port}/by-name`, `https://localhost:${port}/tls`, `http://[::ffff:127.0.0.1]:${port}/mapped`, `http://127.1:${port}/short`]
  const actions = []
  for (const url of urls) actions.push(await addAction(ctx.app, ctx.account, agent._id, { name: url, url, retry_schedule: [] }))
  await analysedCall(ctx, ctx.account, agent)
  const list = await settled(t, ctx, ctx.account, 5)
  t.same(list.map((d: { status: string, attempts: Array<{ error?: string }> }) => [d.status, d.attempts[0].error]), new Array(5).fill(['failed', UNREACHABLE]))

  const test = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions/${actions[0]._id}/test`, headers: ctx.account.headers })
  t.match(test.json(), { outcome: { ok: false, error: PRIVATE_ADDRESS_REFUSED } }, 'the test button says why: the typed host is private')
  t.equal(connections, 0, 'not one TCP connection was opened')

  // The counter does count: a connection of the test's own arrives.
  await new Promise<void>((resolve, reject) => net.connect(port, '127.0.0.1', resolve).on('error', reject))
  await poll(() => connections, (n) => n > 0, { timeoutMs: 5000, intervalMs: 10 })
  t.equal(connections, 1)
})

t.test('refused, not public, DNS and TLS failures show one message; the reason goes to the server log only', async (t) => {
  const ctx = await fastSetup(t)
  const certs = makeCertificates()
  const selfSigned = await startHttpsReceiver(t, certs.selfSigned)
  const agent = await createAgent(ctx.app, ctx.account)
  const refused = await addAction(ctx.app, ctx.account, agent._id, { name: 'refused', url: 'http://127.0.0.1:1/x' })
  const tls = await addAction(ctx.app, ctx.account, agent._id, { name: 'tls', url: `${selfSigned.url}/x` })
  for (const action of [refused, tls]) {
    const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions/${action._id}/test`, headers: ctx.account.headers })
    t.match(res.json(), { outcome: { ok: false, error: UNREACHABLE } }, action.settings.name)
  }

  // DNS failures and refused addresses, made by a connector of the test's own so that nothing is looked up.
  const fail = (err: Error) => new Agent({ connect: (_options, callback) => callback(err, null) })
  const failures = {
    dns: Object.assign(new Error('getaddrinfo ENOTFOUND receiver.example'), { code: 'ENOTFOUND' }),
    blocked: Object.assign(new Error('receiver.example resolves to 10.0.0.1, which is not public'), { code: 'SB_BLOCKED_ADDRESS' }),
    tls: Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' })
  }
  for (const [name, err] of Object.entries(failures)) {
    const { log, lines } = capturingLog()
    const outcome = await send(fail(err), { method: 'GET', url: 'https://receiver.example/path?key=query-secret', headers: {}, configured: {}, id: 'x' }, 2000, log)
    t.match(outcome, { ok: false, error: UNREACHABLE }, name)
    t.match(lines.join(''), err.message, 'the server log has the reason')
    t.match(lines.join(''), '"receiver":"https://receiver.example"')
    t.notMatch(lines.join(''), /query-secret|\/path/, 'and neither the path nor the query')
  }

  // A Test (typedUrl) names the refusal of the host the user typed; a host a redirect named stays unexplained.
  const request = { method: 'GET', url: 'https://receiver.example/path', headers: {}, configured: {}, id: 'x' }
  t.match(await send(fail(failures.blocked), request, 2000, capturingLog().log, { typedUrl: true }), { ok: false, error: PRIVATE_ADDRESS_REFUSED })
  t.match(await send(fail(failures.dns), request, 2000, capturingLog().log, { typedUrl: true }), { ok: false, error: UNREACHABLE }, 'other failures say what they said')
  const redirecting = await startReceiver(t)
  redirecting.answers.push({ status: 307, headers: { location: 'http://internal.example/x' } })
  const direct = buildConnector({})
  const blockedBehind = new Agent({ connect: (options, callback) => options.hostname === 'internal.example' ? callback(failures.blocked, null) : direct(options, callback) })
  t.match(await send(blockedBehind, { ...request, url: `${redirecting.url}/start` }, 2000, capturingLog().log, { typedUrl: true }), { ok: false, error: UNREACHABLE },
    'a redirect to a private address is not the user\'s input: no detail')
})

t.test('a redirect to another origin loses the action\'s headers; HTTPS to HTTP is refused', async (t) => {
  const certs = makeCertificates()
  const ctx = await fastSetup(t, { DELIVERY_CA_FILE: certs.caFile })
  const first = await startReceiver(t)
  const second = await startReceiver(t)
  first.answers.push({ status: 307, headers: { location: '/same-origin' } }, { status: 307, headers: { location: `${second.url}/other-origin` } })
  const secure = await startHttpsReceiver(t, certs.signed)
  const plain = await startReceiver(t)
  secure.answers.push({ status: 308, headers: { location: `${plain.url}/downgraded` } })
  const agent = await createAgent(ctx.app, ctx.account)
  const headers = { Authorization: 'Bearer receiver-secret', 'X-Custom': 'custom-secret' }
  await addAction(ctx.app, ctx.account, agent._id, { name: 'cross', url: `${first.url}/start`, headers, retry_schedule: [] })
  await addAction(ctx.app, ctx.account, agent._id, { name: 'downgrade', url: `${secure.url}/start`, headers, retry_schedule: [] })
  await analysedCall(ctx, ctx.account, agent)
  const list = await settled(t, ctx, ctx.account, 2)
  const byName = Object.fromEntries(list.map((d: { name: string }) => [d.name, d]))

  t.equal(byName.cross.status, 'delivered')
  t.same(first.received.map((r) => [r.url, r.headers.authorization, r.headers['x-custom']]),
    [['/start', 'Bearer receiver-secret', 'custom-secret'], ['/same-origin', 'Bearer receiver-secret', 'custom-secret']], 'kept within the origin')
  const [landed] = second.received
  t.equal(landed.url, '/other-origin')
  t.notOk('authorization' in landed.headers, 'no Authorization at the other origin')
  t.notOk('x-custom' in landed.headers, 'no custom header at the other origin')
  t.equal(landed.body, first.received[0].body, 'a 307 keeps the body')
  t.match(landed.headers, { 'user-agent': 'SERVICE-Webhooks/1.0', 'x-service-delivery-id': first.received[0].headers['x-service-delivery-id'] })

  t.match(byName.downgrade, { status: 'failed', attempts: [{ status_code: 308, error: 'a redirect from HTTPS to HTTP was refused' }] })
  t.equal(secure.received.length, 1)
  t.equal(plain.received.length, 0, 'nothing is sent over plain HTTP')
})

t.test('a GET delivery is signed over the path and query it sends; a tampered query fails verification', async (t) => {
  const ctx = await fastSetup(t)
  const receiver = await startReceiver(t)
  for (let i = 0; i < 3; i++) receiver.answers.push((r) => (r.url === '/post' ? { status: 303, headers: { location: '/after-303?moved=yes' } } : {}))
  const agent = await createAgent(ctx.app, ctx.account)
  await addAction(ctx.app, ctx.account, agent._id, { name: 'get', url: `${receiver.url}/get?fixed=1`, method: 'GET', query: { k: 'v' }, retry_schedule: [] })
  await addAction(ctx.app, ctx.account, agent._id, { name: 'see-other', url: `${receiver.url}/post`, retry_schedule: [] })
  const call = await analysedCall(ctx, ctx.account, agent)
  await settled(t, ctx, ctx.account, 2)
  const secret = (await ctx.app.inject({ method: 'GET', url: '/v1/webhook-secret', headers: ctx.account.headers })).json().secret
  const webhook = new Webhook(secret)
  const verifies = (payload: string, request: Received) => {
    try { webhook.verify(payload, request.headers as Record<string, string>, { jsonParse: false }); return true } catch { return false }
  }

  const get = receiver.received.find((r) => r.url.startsWith('/get'))!
  t.equal(get.method, 'GET')
  t.equal(new URL(get.url, 'http://x').searchParams.get('call_id'), call.id)
  t.ok(verifies(get.url, get), 'verifies over req.url, the path and query as sent')
  t.notOk(verifies(get.url.replace('k=v', 'k=w'), get), 'a tampered query does not')
  t.notOk(verifies(get.url.replace('/get', '/got'), get), 'nor a tampered path')
  t.notOk(verifies('', get), 'nor an empty payload, as GETs were signed before')

  const post = receiver.received.find((r) => r.url === '/post')!
  const after = receiver.received.find((r) => r.url.startsWith('/after-303'))!
  t.ok(verifies(post.body, post), 'a POST is signed over its body')
  t.equal(after.method, 'GET')
  t.ok(verifies(after.url, after), 'the GET a 303 makes is signed over its own path and query')
})

t.test('answers mask configured query values; logs carry no rendered URL', async (t) => {
  const ctx = await fastSetup(t)
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, ctx.account)
  const get = await addAction(ctx.app, ctx.account, agent._id, {
    name: 'get', method: 'GET', url: `${receiver.url}/get?api_key=url-secret`, query: { token: 'query-secret', dir: '{{call_direction}}' }, body: { pin: 'body-secret' }
  })
  await addAction(ctx.app, ctx.account, agent._id, { name: 'post', url: `${receiver.url}/post?key=post-secret`, query: { call_id: 'shadow-secret' } })
  const call = await analysedCall(ctx, ctx.account, agent)
  const list = await settled(t, ctx, ctx.account, 2)
  t.match(receiver.received.find((r) => r.url.startsWith('/get'))!.url, /api_key=url-secret.*token=query-secret/, 'the receiver gets the real values')
  const secrets = /url-secret|query-secret|body-secret|post-secret|shadow-secret/

  for (const delivery of list) {
    const detail = (await ctx.app.inject({ method: 'GET', url: `/v1/webhook-deliveries/${delivery.id}`, headers: ctx.account.headers })).json()
    const resent = (await ctx.app.inject({ method: 'POST', url: `/v1/webhook-deliveries/${delivery.id}/resend`, headers: ctx.account.headers })).json()
    t.notMatch(JSON.stringify(detail), secrets, `${delivery.name}: the detail shows no configured value`)
    t.notMatch(JSON.stringify(resent), secrets, `${delivery.name}: nor does a resend`)
    const query = new URL(detail.request.url).searchParams
    if (delivery.name === 'get') {
      t.match(Object.fromEntries(query), { api_key: '********', token: '********', dir: '********', pin: '********', call_id: call.id, call_summary: 'Booked.' },
        'the call payload\'s fields stay readable')
    } else {
      t.same(Object.fromEntries(query), { key: '********', call_id: '********' }, 'a configured parameter is masked even under a payload field\'s name')
    }
  }
  const tested = (await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions/${get._id}/test`, headers: ctx.account.headers })).json()
  t.equal(tested.outcome.ok, true)
  t.notMatch(tested.request.url, secrets, 'the test button masks them too')
  t.match(tested.request.url, /api_key=\*{8}/)
  t.equal(displayUrl('https://user:pass@receiver.example/x', 'POST', undefined), 'https://********:********@receiver.example/x', 'credentials in the URL are masked')

  // An action whose URL a variable makes invalid is logged by ids only, not with the URL and its key.
  const broken = await createAgent(ctx.app, ctx.account)
  await addAction(ctx.app, ctx.account, broken._id, { name: 'broken', url: 'https://{{caller_name}}.receiver.example/x?key=log-secret' })
  const [id] = await insertCalls(ctx.db, ctx.account.user.id, broken, [{ custom_analysis_data: JSON.stringify({ caller_name: 'Ada Lovelace' }) }])
  const row = await ctx.db.selectFrom('calls').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
  const { log, lines } = capturingLog()
  await ctx.db.transaction().execute(async (trx) => await enqueuePostCall(trx, { boss: ctx.boss, log }, row))
  t.match(lines.join(''), 'post-call action has an invalid URL')
  t.notMatch(lines.join(''), /log-secret|receiver\.example/, 'the log names no URL')
})
