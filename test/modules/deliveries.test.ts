import { PgBoss } from 'pg-boss'
import t from 'tap'
import { createQueues } from '../../src/jobs/queues.ts'
import { createLogger } from '../../src/logger.ts'
import { createMailer } from '../../src/mail/mailer.ts'
import { registerDeliveryWorkers, type ConditionVerdicts } from '../../src/modules/deliveries/engine.ts'
import { purgeExpired } from '../../src/modules/deliveries/queries.ts'
import { guardedAgent } from '../../src/net/guard.ts'
import { UNREACHABLE } from '../../src/net/request.ts'
import { createAccount, setup } from '../helpers/app.ts'
import { addAction, createAgent } from '../helpers/calls.ts'
import { analysedCall, deliveries, FAST, fastSetup, settled } from '../helpers/deliveries.ts'
import { makeCertificates, startHttpsReceiver, startReceiver } from '../helpers/receiver.ts'

t.test('an unmet condition holds back its action only while the condition is the one the analysis judged', async (t) => {
  const ctx = await fastSetup(t)
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, ctx.account)
  const action = await addAction(ctx.app, ctx.account, agent._id, { url: `${receiver.url}/refund`, condition: 'The caller asked for a refund.' })
  const unmet = (condition: string): ConditionVerdicts => new Map([[action._id, { condition, met: false }]])
  const judged = await analysedCall(ctx, ctx.account, agent, {}, unmet('The caller asked for a refund.'))
  const edited = await analysedCall(ctx, ctx.account, agent, {}, unmet('The caller was angry.'))
  const met = await analysedCall(ctx, ctx.account, agent, {}, new Map([[action._id, { condition: 'The caller asked for a refund.', met: true }]]))
  const calls = (await settled(t, ctx, ctx.account, 2)).map((d: { call_id: string }) => d.call_id).sort()
  t.same(calls, [edited.id, met.id].sort(), 'judged unmet: no delivery; a verdict on an older condition, or met: delivered')
  t.notOk(calls.includes(judged.id))
})

t.test('an ended call reaches the agent webhook and each active api_call action, with the headers and payload', async (t) => {
  const ctx = await fastSetup(t)
  const { account } = ctx
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Desk', webhook_url: `${receiver.url}/agent-hook`, data_retrieval: [{ name: 'people', type: 'number' }] })
  await addAction(ctx.app, account, agent._id, { url: `${receiver.url}/action`, headers: { Authorization: 'Bearer receiver-key' } })
  const inactive = await addAction(ctx.app, account, agent._id, { url: `${receiver.url}/inactive` })
  await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}/actions/${inactive._id}`, headers: account.headers, payload: { is_active: false } })
  await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: '+14155550123' } })
  const number = (await ctx.app.inject({ method: 'GET', url: '/v1/phone-number/list', headers: account.headers })).json()[0]
  await ctx.app.inject({ method: 'PATCH', url: `/v1/phone-number/${number._id}`, headers: account.headers, payload: { inbound_agent_id: agent._id } })

  // Through the whole lifecycle: runtime API -> analysis -> deliveries.
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/runtime/calls/inbound', headers: account.headers, payload: { to_number: '+14155550123', from_number: '+4930123456' } })).json()
  await ctx.app.inject({ method: 'POST', url: `/v1/runtime/calls/${call._id}/end`, headers: account.headers, payload: { outcome: 'completed', disconnection_reason: 'user_hangup', transcription: [{ speaker: 'agent', content: 'How many people?', timestamp: call.start_timestamp }, { speaker: 'user', content: 'Two people, thanks!', timestamp: call.start_timestamp + 1000 }] } })
  const received = await receiver.waitFor(2)
  t.same(received.map((r) => r.url).sort(), ['/action', '/agent-hook'])
  for (const request of received) {
    t.equal(request.method, 'POST')
    t.match(request.headers, { 'user-agent': 'SERVICE-Webhooks/1.0', 'x-service-attempt': '1', 'x-service-delivery-id': /^[0-9a-f-]{36}$/, 'x-correlation-id': /^[0-9a-f-]{36}$/, 'content-type': /^application\/json/ })
    t.match(request.json, {
      call_id: call._id, agent_id: agent._id, call_from: '+4930123456', call_to: '+14155550123', direction: 'inbound', call_type: 'phone',
      call_status: 'success', start_timestamp: call.start_timestamp, end_timestamp: Number, duration: Number, call_summary: String,
      transcription: Array, task_achieved: Boolean, sentiment: { sentiment: 'positive' }, custom_analysis_data: { people: 2 },
      collected_data: {}, transfer_history: [], disconnection_reason: 'user_hangup'
    })
  }
  t.equal(received.find((r) => r.url === '/action')!.headers.authorization, 'Bearer receiver-key')

  const list = await settled(t, ctx, account, 2)
  t.match(list, [{ status: 'delivered', attempts_made: 1, attempts_max: 8, call_id: call._id, agent_id: agent._id }, { status: 'delivered' }])
  t.same(list.map((d: { kind: string }) => d.kind).sort(), ['agent_webhook', 'api_call'])
  const byName = Object.fromEntries(list.map((d: { name: string }) => [d.name, d]))
  t.ok(byName.Sync && byName['Agent webhook'])
  t.notOk('next_attempt_at' in list[0], 'next_attempt_at only while pending')
  t.match(list[0].attempts, [{ n: 1, at: /Z$/, duration_ms: Number, status_code: 200, response_preview: '{"ok":true}' }])

  const detail = (await ctx.app.inject({ method: 'GET', url: `/v1/webhook-deliveries/${byName.Sync.id}`, headers: account.headers })).json()
  t.match(detail, { request: { method: 'POST', url: `${receiver.url}/action`, header_names: ['Authorization'], body: { call_id: call._id } } })
  t.notOk(JSON.stringify(detail).includes('receiver-key'), 'header values are never returned')
  const other = await createAccount(ctx.db)
  t.equal((await ctx.app.inject({ method: 'GET', url: `/v1/webhook-deliveries/${byName.Sync.id}`, headers: other.headers })).statusCode, 404)
  t.same((await deliveries(ctx, other)).data, [])
  t.match(await deliveries(ctx, account, `?call_id=${call._id}&status=delivered&limit=1&offset=1`), { total: 2, limit: 1, offset: 1, data: [{ status: 'delivered' }] })
  t.equal((await deliveries(ctx, account, '?status=failed')).total, 0)
})

t.test('every failure kind is retried with the same delivery id until a 2xx', async (t) => {
  // The default schedule at 1/10,000: pauses of 6 ms, 30 ms, 180 ms, 720 ms and 2.2 s before attempt 6.
  const ctx = await fastSetup(t, { DELIVERY_TIMEOUT_MS: '300', DELIVERY_TIME_SCALE: '0.0001' })
  const receiver = await startReceiver(t)
  receiver.answers.push({ status: 500 }, { status: 429 }, { status: 404 }, { status: 301 }, { hang: true }, { status: 204, body: '' })
  const agent = await createAgent(ctx.app, ctx.account, { webhook_url: `${receiver.url}/hook` })
  await analysedCall(ctx, ctx.account, agent)
  const [delivery] = await settled(t, ctx, ctx.account, 1)
  t.equal(delivery.status, 'delivered')
  t.same(delivery.attempts.map((a: { status_code?: number, error?: string }) => a.status_code ?? a.error),
    [500, 429, 404, 301, 'timed out after 0.3 s', 204], 'a redirect without Location is a failure like any other non-2xx')
  const requests = receiver.received
  t.equal(new Set(requests.map((r) => r.headers['x-service-delivery-id'])).size, 1, 'one delivery id on every attempt')
  t.same(requests.map((r) => r.headers['x-service-attempt']), ['1', '2', '3', '4', '5', '6'])
  t.equal(new Set(requests.map((r) => r.body)).size, 1, 'the same body on every attempt')
})

t.test('connection refused and TLS failures are logged with one message and retried; a custom schedule ends in failed', async (t) => {
  const ctx = await fastSetup(t)
  const certs = makeCertificates()
  const selfSigned = await startHttpsReceiver(t, certs.selfSigned)
  const agent = await createAgent(ctx.app, ctx.account)
  await addAction(ctx.app, ctx.account, agent._id, { name: 'refused', url: 'http://127.0.0.1:1/x', retry_schedule: [60] })
  await addAction(ctx.app, ctx.account, agent._id, { name: 'tls', url: `${selfSigned.url}/x`, retry_schedule: [] })
  await analysedCall(ctx, ctx.account, agent)
  const list = await settled(t, ctx, ctx.account, 2)
  const byName = Object.fromEntries(list.map((d: { name: string }) => [d.name, d]))
  t.match(byName.refused, { status: 'failed', attempts_made: 2, attempts_max: 2, attempts: [{ error: UNREACHABLE }, { error: UNREACHABLE }] })
  t.match(byName.tls, { status: 'failed', attempts_made: 1, attempts_max: 1, attempts: [{ error: UNREACHABLE }] })
  t.equal(selfSigned.received.length, 0, 'nothing is sent over an unverified connection')
})

t.test('HTTPS with a certificate of a trusted authority is delivered', async (t) => {
  const certs = makeCertificates()
  const ctx = await fastSetup(t, { DELIVERY_CA_FILE: certs.caFile })
  const receiver = await startHttpsReceiver(t, certs.signed)
  const agent = await createAgent(ctx.app, ctx.account, { webhook_url: `${receiver.url}/secure` })
  await analysedCall(ctx, ctx.account, agent)
  const [delivery] = await settled(t, ctx, ctx.account, 1)
  t.equal(delivery.status, 'delivered')
  t.equal(receiver.received[0].url, '/secure')
})

t.test('variables: types kept, URL encoded, missing ones empty; only custom fields or the whole payload; GET as a query', async (t) => {
  const ctx = await fastSetup(t)
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, ctx.account, { data_retrieval: [{ name: 'people', type: 'number' }, { name: 'caller_name', type: 'string' }] })
  await addAction(ctx.app, ctx.account, agent._id, {
    name: 'custom',
    url: `${receiver.url}/people/{{caller_name}}?call={{call_id}}`,
    headers: { 'X-Caller': '{{caller_name}}' },
    query: { dir: '{{call_direction}}' },
    body: { people: '{{people}}', achieved: '{{call_task_achieved}}', label: 'n={{people}}', missing: '{{nothing}}', inText: 'x{{nothing}}y', nested: { phone: '{{customer_phone}}', list: ['{{people}}'] } },
    send_only_custom_fields: true
  })
  await addAction(ctx.app, ctx.account, agent._id, { name: 'merged', url: `${receiver.url}/merged`, body: { extra: '{{call_duration}}' } })
  await addAction(ctx.app, ctx.account, agent._id, { name: 'get', url: `${receiver.url}/get`, method: 'GET', body: { custom: '{{people}}' }, query: { k: 'v' } })
  const call = await analysedCall(ctx, ctx.account, agent, { duration_ms: 61_400 })
  await receiver.waitFor(3)
  const byPath = (prefix: string) => receiver.received.find((r) => r.url.startsWith(prefix))!

  const custom = byPath('/people/')
  t.equal(custom.url, `/people/Ada%20Lovelace?call=${call.id}&dir=inbound`)
  t.equal(custom.headers['x-caller'], 'Ada Lovelace')
  t.same(custom.json, { people: 2, achieved: true, label: 'n=2', missing: '', inText: 'xy', nested: { phone: '+4930123456', list: [2] } })

  const merged = byPath('/merged')
  t.match(merged.json, { call_id: call.id, call_summary: 'Booked.', extra: 61 })

  const get = byPath('/get')
  t.equal(get.method, 'GET')
  t.equal(get.body, '')
  const query = new URL(get.url, 'http://x').searchParams
  t.equal(query.get('call_id'), call.id)
  t.equal(query.get('custom'), '2')
  t.equal(query.get('k'), 'v')
  t.equal(query.get('call_summary'), 'Booked.')
  t.notOk(query.has('transcription'), 'nested values are left out of a query string')
  t.notOk(query.has('sentiment'))
})

t.test('redirects: 307 keeps method and body, 303 turns into GET, 5 are followed, the 6th fails', async (t) => {
  const ctx = await fastSetup(t)
  const receiver = await startReceiver(t)
  receiver.answers.push(
    { status: 307, headers: { location: '/after-307' } },
    { status: 303, headers: { location: '/after-303' } }
  )
  const chain = await startReceiver(t)
  for (let i = 1; i <= 6; i++) chain.answers.push({ status: 302, headers: { location: `/hop${i}` } })
  const five = await startReceiver(t)
  for (let i = 1; i <= 5; i++) five.answers.push({ status: 308, headers: { location: `/hop${i}` } })
  const agent = await createAgent(ctx.app, ctx.account)
  await addAction(ctx.app, ctx.account, agent._id, { name: 'redirected', url: `${receiver.url}/start`, retry_schedule: [] })
  await addAction(ctx.app, ctx.account, agent._id, { name: 'too-many', url: `${chain.url}/start`, retry_schedule: [] })
  await addAction(ctx.app, ctx.account, agent._id, { name: 'five', url: `${five.url}/start`, retry_schedule: [] })
  await analysedCall(ctx, ctx.account, agent)
  const list = await settled(t, ctx, ctx.account, 3)
  const byName = Object.fromEntries(list.map((d: { name: string }) => [d.name, d]))
  t.same(receiver.received.map((r) => [r.method, r.url, r.body === '' ? 'no body' : 'body']), [['POST', '/start', 'body'], ['POST', '/after-307', 'body'], ['GET', '/after-303', 'no body']])
  t.equal(byName.redirected.status, 'delivered')
  t.equal(byName.five.status, 'delivered')
  t.equal(five.received.length, 6)
  t.match(byName['too-many'], { status: 'failed', attempts: [{ error: 'more than 5 redirects' }] })
  t.equal(chain.received.length, 6, 'the start and 5 redirects, never a 7th request')
})

t.test('a receiver on a loopback address, by IP or by name, is refused unless allowed', async (t) => {
  const ctx = await fastSetup(t, { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'false' })
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, ctx.account, { webhook_url: `${receiver.url}/hook` })
  await addAction(ctx.app, ctx.account, agent._id, { name: 'by-name', url: `http://localhost:${new URL(receiver.url).port}/x`, retry_schedule: [] })
  await ctx.db.updateTable('agent_actions').set({ settings: JSON.stringify({ name: 'x', url: `${receiver.url}/x`, retry_schedule: [] }) }).where('agent_id', '=', agent._id).execute()
  await ctx.db.updateTable('agents').set({ webhook_url: null }).where('id', '=', agent._id).execute()
  await analysedCall(ctx, ctx.account, agent)
  const [delivery] = await settled(t, ctx, ctx.account, 1)
  t.match(delivery, { status: 'failed', attempts: [{ error: UNREACHABLE }] })
  t.equal(receiver.received.length, 0)
})

t.test('a large answer is cut: 1 KiB kept, a few KiB read', async (t) => {
  const ctx = await fastSetup(t)
  const receiver = await startReceiver(t)
  receiver.answers.push({ status: 500, body: 'x'.repeat(2_000_000) })
  const agent = await createAgent(ctx.app, ctx.account, { webhook_url: `${receiver.url}/hook` })
  await analysedCall(ctx, ctx.account, agent)
  const [delivery] = await settled(t, ctx, ctx.account, 1)
  t.equal(delivery.attempts[0].response_preview.length, 1024)
  t.equal(delivery.status, 'delivered', 'retried and delivered')
})

t.test('headers are read at each attempt: a renewed receiver key lets a pending delivery arrive', async (t) => {
  const ctx = await fastSetup(t)
  const receiver = await startReceiver(t)
  for (let i = 0; i < 20; i++) receiver.answers.push((r) => ({ status: r.headers['x-api-key'] === 'new' ? 200 : 401 }))
  const agent = await createAgent(ctx.app, ctx.account)
  const action = await addAction(ctx.app, ctx.account, agent._id, { url: `${receiver.url}/x`, headers: { 'X-Api-Key': 'old' }, retry_schedule: [60, 60, 60, 600_000] })
  await analysedCall(ctx, ctx.account, agent)
  await receiver.waitFor(1)
  await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}/actions/${action._id}`, headers: ctx.account.headers, payload: { settings: { headers: { 'X-Api-Key': 'new' } } } })
  const [delivery] = await settled(t, ctx, ctx.account, 1)
  t.equal(delivery.status, 'delivered')
  t.equal(delivery.attempts.at(-1).status_code, 200)
})

t.test('resend: sends now, delivered on success, also after a success; nothing after the request is purged', async (t) => {
  const ctx = await fastSetup(t)
  const receiver = await startReceiver(t)
  receiver.answers.push({ status: 500 })
  const agent = await createAgent(ctx.app, ctx.account)
  await addAction(ctx.app, ctx.account, agent._id, { url: `${receiver.url}/x`, retry_schedule: [] })
  await analysedCall(ctx, ctx.account, agent)
  const [failed] = await settled(t, ctx, ctx.account, 1)
  t.equal(failed.status, 'failed')

  receiver.answers.push({ status: 503 })
  const stillFailing = await ctx.app.inject({ method: 'POST', url: `/v1/webhook-deliveries/${failed.id}/resend`, headers: ctx.account.headers })
  t.equal(stillFailing.statusCode, 200)
  t.match(stillFailing.json(), { outcome: { ok: false, status_code: 503 }, delivery: { status: 'failed', attempts_made: 2 } })
  const ok = await ctx.app.inject({ method: 'POST', url: `/v1/webhook-deliveries/${failed.id}/resend`, headers: ctx.account.headers })
  t.match(ok.json(), { outcome: { ok: true, status_code: 200 }, delivery: { status: 'delivered', attempts_made: 3, attempts: [{ n: 1 }, { n: 2, manual: true }, { n: 3, manual: true, status_code: 200 }] } })
  const again = await ctx.app.inject({ method: 'POST', url: `/v1/webhook-deliveries/${failed.id}/resend`, headers: ctx.account.headers })
  t.match(again.json(), { outcome: { ok: true }, delivery: { status: 'delivered', attempts_made: 4 } })
  t.same(receiver.received.map((r) => r.headers['x-service-attempt']), ['1', '2', '3', '4'])
  t.equal(new Set(receiver.received.map((r) => r.headers['x-service-delivery-id'])).size, 1)

  const other = await createAccount(ctx.db)
  t.equal((await ctx.app.inject({ method: 'POST', url: `/v1/webhook-deliveries/${failed.id}/resend`, headers: other.headers })).statusCode, 404)

  // Retention: after the kept days the request is gone; the log stays.
  t.equal(await purgeExpired(ctx.db, 30), 0, 'nothing is old enough yet')
  await ctx.db.updateTable('webhook_deliveries').set({ updated_at: new Date(Date.now() - 31 * 86_400_000) }).execute()
  t.equal(await purgeExpired(ctx.db, 30), 1)
  const purged = (await ctx.app.inject({ method: 'GET', url: `/v1/webhook-deliveries/${failed.id}`, headers: ctx.account.headers })).json()
  t.match(purged, { request: null, attempts_made: 4, status: 'delivered' })
  const gone = await ctx.app.inject({ method: 'POST', url: `/v1/webhook-deliveries/${failed.id}/resend`, headers: ctx.account.headers })
  t.equal(gone.statusCode, 409)
  t.equal(gone.json().code, 'delivery_purged')
})

t.test('the action test button sends a sample request and stores nothing', async (t) => {
  const ctx = await fastSetup(t)
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, ctx.account, { data_retrieval: [{ name: 'plan', type: 'enum', enum_values: ['basic', 'pro'] }] })
  const action = await addAction(ctx.app, ctx.account, agent._id, { url: `${receiver.url}/test/{{plan}}`, headers: { 'X-Key': 'k' } })
  const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions/${action._id}/test`, headers: ctx.account.headers })
  t.equal(res.statusCode, 200)
  t.match(res.json(), { outcome: { ok: true, status_code: 200 }, request: { method: 'POST', url: `${receiver.url}/test/basic` } })
  t.match(receiver.received[0], { url: '/test/basic', headers: { 'x-key': 'k', 'x-service-attempt': '1' }, json: { custom_analysis_data: { plan: 'basic' } } })
  t.equal((await deliveries(ctx, ctx.account)).total, 0)
  const email = (await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions`, headers: ctx.account.headers, payload: { action_type: 'send_email', settings: { name: 'n', subject: 's', message: 'm', direct_recipients: ['a@example.com'] } } })).json()
  t.equal((await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions/${email._id}/test`, headers: ctx.account.headers })).statusCode, 400)
})

t.test('two workers on one database make each attempt once and share the load; deliveries wait out a stopped worker', async (t) => {
  const ctx = await setup(t, FAST) // no workers in the app's process: they start below
  const account = await createAccount(ctx.db)
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, account, { webhook_url: `${receiver.url}/hook` })
  for (let i = 0; i < 40; i++) await analysedCall(ctx, account, agent)
  t.equal(receiver.received.length, 0, 'nothing is sent while no worker runs')

  const workers: Array<{ boss: PgBoss, connections: number }> = []
  for (let i = 0; i < 2; i++) {
    const boss = new PgBoss({ connectionString: ctx.url, useListenNotify: true, supervise: false, schedule: false, max: 3 })
    await boss.start()
    await createQueues(boss, ctx.config)
    const agentPool = guardedAgent(ctx.config.delivery)
    const worker = { boss, connections: 0 }
    agentPool.on('connect', () => { worker.connections++ })
    const log = createLogger(ctx.config)
    await registerDeliveryWorkers({ db: ctx.db, boss, config: { ...ctx.config, delivery: { ...ctx.config.delivery, concurrency: 4 } }, log, agent: agentPool, mailer: createMailer(ctx.db, ctx.config, log) })
    boss.on('error', () => {})
    workers.push(worker)
    t.teardown(async () => { await boss.stop({ graceful: false }); await agentPool.close() })
  }
  const list = await settled(t, ctx, account, 40)
  t.ok(list.every((d: { status: string, attempts_made: number }) => d.status === 'delivered' && d.attempts_made === 1))
  const ids = receiver.received.map((r) => r.headers['x-service-delivery-id'])
  t.equal(ids.length, 40, 'each delivery sent once')
  t.equal(new Set(ids).size, 40)
  t.ok(workers.every((w) => w.connections > 0), 'both workers sent some')
})
