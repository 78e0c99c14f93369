import { generateKeyPairSync, sign } from 'node:crypto'
import t from 'tap'
import { newId } from '../src/db/ids.ts'
import { storeRecordingPart } from '../src/modules/calls/recordings.ts'
import { twilioSignature } from '../src/modules/telephony/signature.ts'
import { createAccount, setup } from './helpers/app.ts'
import { createAgent, insertCalls } from './helpers/calls.ts'
import { fuzzRoutes, judge, routeTable, type Sample } from './helpers/fuzz.ts'

// The routes a browser or Twilio reaches without a key or a session, every one of Fastify's route table under
// /web-call, /telephony, /v1/recordings and the website widget's (/widget.js, /v1/widget/…), fuzzed from one real request each (test/helpers/fuzz.ts): the web-call
// page, join and stream (plain requests, upgrade requests with no WebSocket behind them, and real upgrades through
// the plugin's upgrade path), signed recording links, and Twilio's webhooks unsigned, badly signed and signed. The console's keyless routes (/login, /login/link/…,
// /invitations/…) are fuzzed with the console's (test/console/fuzz.test.ts). `npm test` runs a few cases per route;
// `npm run fuzz` (FUZZ_RUNS, FUZZ_SEED) as many as asked.
const RUNS = Number(process.env.FUZZ_RUNS ?? 20)
const SEED = Number(process.env.FUZZ_SEED ?? 20240601)

/** Failures being fixed elsewhere: the run passes while they fail, and says when one no longer does. */
const KEYLESS = /^\/(web-call|telephony\/|v1\/recordings\/|widget\.js|v1\/widget\/)/
const SID = 'AC' + 'f'.repeat(32)
const AUTH_TOKEN = 'fuzz-auth-token'
const PUBLIC_BASE_URL = 'http://127.0.0.1:3000'
const TELNYX_KEYS = generateKeyPairSync('ed25519')

t.test('every keyless route answers generated requests, never a 500', async (t) => {
  // Nothing leaves loopback: the sandbox carrier for buying, Twilio's API on a closed local port, the voice
  // runtime (web and phone calls stay started: no workers, no providers, so the simulator engine would answer).
  const { app, db } = await setup(t, {
    PHONE_CARRIER: 'sandbox', TWILIO_API_URL: 'http://127.0.0.1:9', TWILIO_ACCOUNT_SID: SID, TWILIO_AUTH_TOKEN: AUTH_TOKEN,
    TELNYX_API_URL: 'http://127.0.0.1:9', TELNYX_API_KEY: 'KEYfuzz', TELNYX_CONNECTION_ID: '1234', TELNYX_PUBLIC_KEY: Buffer.from(TELNYX_KEYS.publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64'),
    PUBLIC_BASE_URL, CALL_RUNTIME: 'voice', ANALYSER: 'builtin', DELIVERY_ALLOW_PRIVATE_NETWORKS: 'false'
  })
  const account = await createAccount(db)
  const agent = await createAgent(app, account)
  await app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { widget_settings: { enabled: true, allowed_origins: ['http://127.0.0.1:8080'] } } })
  const widgetKey = (await app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/widget-key`, headers: account.headers })).json().widget_key
  const webCall = (await app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id } })).json()
  const [recorded, phoneCall, telnyxCall] = await insertCalls(db, account.user.id, agent, [{}, { call_status: 'started', carrier: 'twilio', carrier_call_id: 'CA' + '1'.repeat(32), end_timestamp: null, duration_ms: null },
    { call_status: 'started', carrier: 'telnyx', carrier_call_id: 'v3:fuzz-call', end_timestamp: null, duration_ms: null }])
  await storeRecordingPart(db, { callId: recorded, userId: account.user.id, pcm: Buffer.alloc(3200) })
  const link = (await app.inject({ method: 'POST', url: `/v1/call/${recorded}/recording-link`, headers: account.headers })).json()
  const number = '+14155550123'
  await db.insertInto('phone_numbers').values({ id: newId(), user_id: account.user.id, phone_number: number, source: 'imported', carrier: 'twilio', carrier_account_id: SID, inbound_agent_id: agent._id }).execute()
  const other = await createAccount(db)
  const [otherCall] = await insertCalls(db, other.user.id, await createAgent(app, other), [{}])
  const values = [recorded, phoneCall, otherCall, agent._id, '0123456789abcdef01234567', webCall.access_token, 'CA' + '1'.repeat(32), SID, widgetKey]

  // Twilio signs the URL it requested (on the public address) and the form's parameters.
  const twilio = () => ({
    headers: {},
    sign: (url: string, payload: string | Buffer | undefined) => ({ 'x-twilio-signature': twilioSignature(AUTH_TOKEN, PUBLIC_BASE_URL + url, new URLSearchParams(payload?.toString() ?? '')) })
  })
  // Telnyx signs `${telnyx-timestamp}|${body}` with the account's Ed25519 key.
  const telnyx = () => ({
    headers: {},
    sign: (_url: string, payload: string | Buffer | undefined) => {
      const timestamp = String(Math.floor(Date.now() / 1000))
      return { 'telnyx-timestamp': timestamp, 'telnyx-signature-ed25519': sign(null, Buffer.from(`${timestamp}|${payload?.toString() ?? ''}`), TELNYX_KEYS.privateKey).toString('base64') }
    }
  })
  const callers = { none: () => ({ headers: {} }), twilio, telnyx }
  const telnyxEvent = (eventType: string, payload: Record<string, unknown>): Sample => ({
    method: 'POST', url: '/telephony/telnyx/webhook', caller: 'telnyx', body: { type: 'json', value: { data: { record_type: 'event', event_type: eventType, occurred_at: '2026-01-01T00:00:00Z', payload } } }
  })
  const upgrade = { connection: 'upgrade', upgrade: 'websocket', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version': '13', origin: 'http://127.0.0.1:8080' }
  const webhook = (url: string, fields: Record<string, string>): Sample => ({
    method: 'POST', url, caller: 'twilio', body: { type: 'form', fields: Object.entries({ AccountSid: SID, CallSid: 'CA' + '1'.repeat(32), ...fields }) }
  })
  // One request as a real client sends it, for each kind of route: what the console's pages are to its fuzz.
  const samples: Sample[] = [
    { method: 'GET', url: '/web-call' },
    ...['client.js', 'worklet.js', 'page.js', 'page.css', 'panel.js', 'panel.css'].map((name) => ({ method: 'GET', url: `/web-call/${name}` })),
    { method: 'POST', url: '/web-call/join', body: { type: 'json', value: { access_token: webCall.access_token } } },
    { method: 'OPTIONS', url: '/web-call/join', headers: { origin: 'http://127.0.0.1:8080', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } },
    { method: 'GET', url: '/widget.js' },
    { method: 'GET', url: `/v1/widget/${agent._id}`, headers: { origin: 'http://127.0.0.1:8080' } },
    { method: 'OPTIONS', url: `/v1/widget/${agent._id}/call`, headers: { origin: 'http://127.0.0.1:8080', 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-widget-key' } },
    { method: 'POST', url: `/v1/widget/${agent._id}/call`, headers: { origin: 'http://127.0.0.1:8080', 'x-widget-key': widgetKey } },
    { method: 'GET', url: `/web-call/stream?access_token=${webCall.access_token}` },
    { method: 'GET', url: `/web-call/stream?access_token=${webCall.access_token}`, headers: upgrade },
    { method: 'GET', url: `/web-call/stream?access_token=${webCall.access_token}`, headers: { origin: 'http://127.0.0.1:8080' }, websocket: true },
    { method: 'GET', url: new URL(link.url).pathname + new URL(link.url).search },
    { method: 'GET', url: new URL(link.url).pathname + new URL(link.url).search, headers: { range: 'bytes=0-99' } },
    webhook('/telephony/twilio/voice', { From: '+14155550100', To: number, CallStatus: 'ringing', Direction: 'inbound' }),
    webhook(`/telephony/twilio/status?call_id=${phoneCall}`, { CallStatus: 'completed', CallDuration: '12' }),
    webhook('/telephony/twilio/status', { CallStatus: 'busy' }),
    webhook(`/telephony/twilio/dial-result?call_id=${phoneCall}`, { DialCallStatus: 'no-answer', DialCallDuration: '0', CallStatus: 'in-progress' }),
    webhook(`/telephony/twilio/transfer-answer?call_id=${phoneCall}`, { CallStatus: 'in-progress', Digits: '1' }),
    webhook(`/telephony/twilio/transfer-status?call_id=${phoneCall}`, { CallStatus: 'no-answer', CallDuration: '0' }),
    webhook(`/telephony/twilio/amd?call_id=${phoneCall}`, { AnsweredBy: 'machine_end_beep', MachineDetectionDuration: '4200' }),
    { method: 'GET', url: '/telephony/twilio/stream', headers: upgrade },
    { method: 'GET', url: '/telephony/twilio/stream', websocket: true },
    telnyxEvent('call.initiated', { call_control_id: 'v3:fuzz-in', from: '+14155550100', to: number, direction: 'incoming' }),
    telnyxEvent('call.hangup', { call_control_id: 'v3:fuzz-call', hangup_cause: 'normal_clearing' }),
    telnyxEvent('call.answered', { call_control_id: 'v3:fuzz-leg', client_state: Buffer.from(JSON.stringify({ call_id: telnyxCall, leg: 'transfer' })).toString('base64') }),
    telnyxEvent('call.machine.detection.ended', { call_control_id: 'v3:fuzz-call', result: 'machine' }),
    telnyxEvent('call.gather.ended', { call_control_id: 'v3:fuzz-leg', digits: '1', status: 'valid', client_state: Buffer.from(JSON.stringify({ call_id: telnyxCall, leg: 'warm' })).toString('base64') }),
    // A tenant's own Telnyx account's URL: none is known here, so every request is refused (403) before it is read.
    { ...telnyxEvent('call.initiated', { call_control_id: 'v3:fuzz-in', from: '+14155550100', to: number, direction: 'incoming' }), url: '/telephony/telnyx/webhook/accounts/0123456789abcdef01234567' },
    { method: 'GET', url: '/telephony/telnyx/hold-music.wav' },
    { method: 'GET', url: '/telephony/telnyx/stream', headers: upgrade },
    { method: 'GET', url: '/telephony/telnyx/stream', websocket: true }
  ]

  const routes = routeTable(app).filter((route) => KEYLESS.test(route.url))
  const report = await fuzzRoutes(app, { routes, samples, values, callers, runs: RUNS, seed: SEED })
  judge(t, 'keyless fuzz', report)
  t.equal(report.withoutSamples.length, 0, 'every keyless route has a sample to start from')
})
