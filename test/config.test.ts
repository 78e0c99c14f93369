import t from 'tap'
import { ConfigError, loadConfig } from '../src/config.ts'

t.test('mail settings', async (t) => {
  const defaults = loadConfig({})
  t.equal(defaults.smtpUrl, undefined, 'without SMTP e-mails are recorded, not sent')
  t.equal(defaults.mailFrom, 'Switchboard <noreply@localhost>')
  const set = loadConfig({ SMTP_URL: 'smtps://user:pw@mail.example.com:465', MAIL_FROM: 'ops@example.com' })
  t.equal(set.smtpUrl, 'smtps://user:pw@mail.example.com:465')
  t.equal(set.mailFrom, 'ops@example.com')
  t.throws(() => loadConfig({ SMTP_URL: 'mail.example.com' }), new ConfigError('SMTP_URL must be a URL such as smtp://user:password@mail.example.com:587'))
  t.throws(() => loadConfig({ SMTP_URL: 'http://mail.example.com' }), new ConfigError('SMTP_URL must start with smtp:// or smtps://'))
  t.throws(() => loadConfig({ MAIL_FROM: 'Switchboard' }), { message: /^MAIL_FROM must be an address/ })
})

t.test('integration services and their OAuth clients', async (t) => {
  const defaults = loadConfig({}).integrations
  t.same(defaults.calendar_one, {
    api: 'https://www.googleapis.com/calendar/v3',
    authorize: 'https://accounts.google.com/o/oauth2/v2/auth',
    token: 'https://oauth2.googleapis.com/token',
    revoke: 'https://oauth2.googleapis.com/revoke'
  }, 'the real services, and no OAuth client until one is configured')
  t.same(defaults.booking_one, { api: 'https://api.cal.com/v2' })
  const configured = loadConfig({ HUBSPOT_CLIENT_ID: 'id', HUBSPOT_CLIENT_SECRET: 'secret', HUBSPOT_API_URL: 'http://127.0.0.1:9/' }).integrations.crm
  t.same([configured.clientId, configured.clientSecret, configured.api], ['id', 'secret', 'http://127.0.0.1:9'])
  t.throws(() => loadConfig({ GOOGLE_CLIENT_ID: 'id' }), new ConfigError('GOOGLE_CLIENT_ID and GOOGLE_CLIENT_SECRET are set together (the OAuth client of your app at the service)'))
  t.throws(() => loadConfig({ MICROSOFT_GRAPH_URL: 'graph.microsoft.com' }), new ConfigError('MICROSOFT_GRAPH_URL must be a URL such as https://graph.microsoft.com/v1.0'))
})

t.test('phone carrier settings', async (t) => {
  const defaults = loadConfig({})
  t.equal(defaults.phoneCarrier, 'sandbox')
  t.same(defaults.twilio, { apiUrl: 'https://api.twilio.com', accountSid: undefined, authToken: undefined, allowPrivateBaseUrl: false })
  const sid = 'AC' + 'a'.repeat(32)
  const twilio = loadConfig({ PHONE_CARRIER: 'twilio', TWILIO_ACCOUNT_SID: sid, TWILIO_AUTH_TOKEN: 'tok', TWILIO_API_URL: 'http://127.0.0.1:9999/' })
  t.same(twilio.twilio, { apiUrl: 'http://127.0.0.1:9999', accountSid: sid, authToken: 'tok', allowPrivateBaseUrl: false })
  t.equal(loadConfig({ TWILIO_ALLOW_PRIVATE_BASE_URL: 'true' }).twilio.allowPrivateBaseUrl, true)
  t.throws(() => loadConfig({ TWILIO_ALLOW_PRIVATE_BASE_URL: 'yes' }), { message: /TWILIO_ALLOW_PRIVATE_BASE_URL must be one of true, false/ })
  t.throws(() => loadConfig({ PHONE_CARRIER: 'twilio' }), new ConfigError('PHONE_CARRIER=twilio needs TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN'))
  t.throws(() => loadConfig({ PHONE_CARRIER: 'vonage' }), new ConfigError('PHONE_CARRIER must be one of sandbox, twilio, telnyx, got "vonage"'))
  t.throws(() => loadConfig({ PHONE_CARRIER: 'telnyx' }), new ConfigError('PHONE_CARRIER=telnyx needs TELNYX_API_KEY, TELNYX_CONNECTION_ID and TELNYX_PUBLIC_KEY'))
  const key = Buffer.alloc(32, 7).toString('base64')
  t.match(loadConfig({ PHONE_CARRIER: 'telnyx', TELNYX_API_KEY: 'KEY1', TELNYX_CONNECTION_ID: '1494404757140276705', TELNYX_PUBLIC_KEY: key }).telnyx,
    { apiUrl: 'https://api.telnyx.com', apiKey: 'KEY1', connectionId: '1494404757140276705', publicKey: key, signatureToleranceSeconds: 300 })
  t.throws(() => loadConfig({ TELNYX_PUBLIC_KEY: 'not-a-key' }), { message: /TELNYX_PUBLIC_KEY must be the base64 of a 32-byte Ed25519 public key/ })
  // SIP_CARRIER (docs/sip.md): Twilio unless set; Telnyx needs the installation's Telnyx account.
  t.equal(defaults.telnyx.sipCarrier, 'twilio')
  t.equal(loadConfig({ SIP_CARRIER: 'telnyx', TELNYX_API_KEY: 'KEY1', TELNYX_CONNECTION_ID: '1494404757140276705', TELNYX_PUBLIC_KEY: key }).telnyx.sipCarrier, 'telnyx')
  t.throws(() => loadConfig({ SIP_CARRIER: 'telnyx' }), { message: /SIP_CARRIER=telnyx needs TELNYX_API_KEY, TELNYX_CONNECTION_ID and TELNYX_PUBLIC_KEY/ })
  t.throws(() => loadConfig({ SIP_CARRIER: 'vonage' }), { message: /SIP_CARRIER must be one of twilio, telnyx/ })
  t.throws(() => loadConfig({ TELNYX_SIGNATURE_TOLERANCE_SECONDS: '0' }), { message: /TELNYX_SIGNATURE_TOLERANCE_SECONDS/ })
  t.throws(() => loadConfig({ TWILIO_ACCOUNT_SID: 'AC123' }), new ConfigError('TWILIO_ACCOUNT_SID must be "AC" followed by 32 hexadecimal characters'))
  t.throws(() => loadConfig({ TWILIO_API_URL: 'ftp://x' }), { message: 'TWILIO_API_URL must start with https:// or http://' })
})

t.test('export limits', async (t) => {
  t.match(loadConfig({}).concurrency, { exportsPerAccount: 2, exportsTotal: 5, exportStallMs: 30_000 })
  t.equal(loadConfig({ EXPORT_STALL_TIMEOUT_MS: '250' }).concurrency.exportStallMs, 250)
  t.throws(() => loadConfig({ EXPORT_STALL_TIMEOUT_MS: '0' }), { message: 'EXPORT_STALL_TIMEOUT_MS must be a whole number from 10 to 3600000, got "0"' })
})

t.test('knowledge-base limits', async (t) => {
  const extraction = { memoryMb: 256, timeoutMs: 60_000, maxPassages: 5000, zip: { maxEntries: 10_000, maxUncompressedBytes: 100 * 1024 * 1024, maxRatio: 100 } }
  t.same(loadConfig({}).knowledgeBases, { maxFileBytes: 20 * 1024 * 1024, maxFiles: 100, maxFilesPerUpload: 20, extraction })
  t.match(loadConfig({ KB_MAX_FILE_MB: '5', KB_MAX_FILES: '10', KB_MAX_FILES_PER_UPLOAD: '3' }).knowledgeBases, { maxFileBytes: 5 * 1024 * 1024, maxFiles: 10, maxFilesPerUpload: 3 })
  t.same(loadConfig({
    KB_EXTRACT_MEMORY_MB: '64', KB_EXTRACT_TIMEOUT_MS: '500', KB_MAX_PASSAGES: '10', KB_ZIP_MAX_ENTRIES: '50', KB_ZIP_MAX_UNCOMPRESSED_MB: '2', KB_ZIP_MAX_RATIO: '20'
  }).knowledgeBases.extraction, { memoryMb: 64, timeoutMs: 500, maxPassages: 10, zip: { maxEntries: 50, maxUncompressedBytes: 2 * 1024 * 1024, maxRatio: 20 } })
  t.throws(() => loadConfig({ KB_EXTRACT_MEMORY_MB: '8' }), { message: 'KB_EXTRACT_MEMORY_MB must be a whole number from 16 to 65536, got "8"' })
  t.throws(() => loadConfig({ KB_MAX_FILE_MB: '0' }), new ConfigError('KB_MAX_FILE_MB must be a whole number from 1 to 1024, got "0"'))
  t.throws(() => loadConfig({ KB_MAX_FILES: 'many' }), { message: /^KB_MAX_FILES must be a whole number/ })
})

t.test('SECRETS_KEY: 32 bytes as base64 or hex; required with DATABASE_URL', async (t) => {
  const base64 = Buffer.alloc(32, 1).toString('base64')
  t.same(loadConfig({ SECRETS_KEY: base64 }).secretsKey, Buffer.alloc(32, 1))
  t.same(loadConfig({ SECRETS_KEY: 'ab'.repeat(32) }).secretsKey, Buffer.alloc(32, 0xab))
  t.same(loadConfig({ SECRETS_KEY: Buffer.alloc(32, 0xfb).toString('base64url') }).secretsKey, Buffer.alloc(32, 0xfb))
  t.equal(loadConfig({}).secretsKey, undefined, 'the embedded database keeps a key file instead')
  for (const bad of ['short', Buffer.alloc(31).toString('base64'), 'ab'.repeat(31)]) {
    t.throws(() => loadConfig({ SECRETS_KEY: bad }), new ConfigError('SECRETS_KEY must be 32 bytes as base64 (`openssl rand -base64 32`) or as 64 hexadecimal digits'))
  }
  t.throws(() => loadConfig({ DATABASE_URL: 'postgres://localhost/x' }),
    new ConfigError('DATABASE_URL needs SECRETS_KEY, the key that encrypts stored credentials on every process: make one with `openssl rand -base64 32`'))
  t.ok(loadConfig({ DATABASE_URL: 'postgres://localhost/x', SECRETS_KEY: base64 }).secretsKey)
})

t.test('TRUST_PROXY: off by default, a hop count, or the proxies\' addresses and ranges', async (t) => {
  t.equal(loadConfig({}).trustProxy, false)
  t.equal(loadConfig({ TRUST_PROXY: '0' }).trustProxy, false)
  t.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2)
  t.same(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 192.0.2.7,fd00::/8' }).trustProxy, ['10.0.0.0/8', '192.0.2.7', 'fd00::/8'])
  for (const bad of ['true', '11', '-1', '10.0.0.0/33', 'fd00::/129', 'proxy.example.com', '10.0.0.1,', '10.0.0.0/8/1']) {
    t.throws(() => loadConfig({ TRUST_PROXY: bad }), { message: /^TRUST_PROXY must be the number of proxies in front of this server \(1 for one load balancer\) or a comma-separated list/ }, bad)
  }
})

t.test('call stream, transcription and recording download settings', async (t) => {
  const defaults = loadConfig({})
  t.match(defaults.voice, { streamStartTimeoutMs: 5000, pendingStreamsPerAddress: 20, pendingStreams: 100, realtime: { transcriptionModel: 'gpt-4o-mini-transcribe' } })
  t.ok(defaults.voice.maxStreams >= 1, 'VOICE_MAX_STREAMS comes from the open-file limit')
  t.match(defaults.concurrency, { recordingDownloadsPerAccount: 4, recordingDownloadsTotal: 32 })
  const set = loadConfig({ VOICE_STREAM_START_TIMEOUT_MS: '200', VOICE_PENDING_STREAMS_PER_ADDRESS: '0', VOICE_MAX_STREAMS: '7', REALTIME_TRANSCRIPTION_MODEL: 'none', RECORDING_DOWNLOADS_MAX: '9' })
  t.match(set.voice, { streamStartTimeoutMs: 200, pendingStreamsPerAddress: 0, maxStreams: 7, realtime: { transcriptionModel: undefined } })
  t.equal(set.concurrency.recordingDownloadsTotal, 9)
  t.throws(() => loadConfig({ VOICE_MAX_STREAMS: '0' }), new ConfigError('VOICE_MAX_STREAMS must be a whole number from 1 to 1000000, got "0"'))
  t.throws(() => loadConfig({ VOICE_STREAM_START_TIMEOUT_MS: 'soon' }), { message: /^VOICE_STREAM_START_TIMEOUT_MS must be a whole number/ })
})

t.test('speech to text: batch by default; a streaming provider with its URL, key and model; bad values stop start-up', async (t) => {
  const batch = loadConfig({ OPENAI_API_KEY: 'sk-openai' }).voice.stt
  t.same(batch, { url: 'https://api.openai.com/v1', apiKey: 'sk-openai', configured: true, model: 'gpt-4o-mini-transcribe', provider: 'batch' })

  const openai = loadConfig({ STT_PROVIDER: 'openai-realtime', OPENAI_API_KEY: 'sk-openai' }).voice.stt
  t.same(openai, { url: 'wss://api.openai.com/v1/realtime', apiKey: 'sk-openai', configured: true, model: 'gpt-4o-mini-transcribe', provider: 'openai-realtime' })
  t.match(loadConfig({ STT_PROVIDER: 'openai-realtime', STT_STREAM_URL: 'ws://127.0.0.1:9000/v1/realtime/', STT_API_KEY: 'sk-stt', STT_MODEL: 'gpt-4o-transcribe' }).voice.stt,
    { url: 'ws://127.0.0.1:9000/v1/realtime', apiKey: 'sk-stt', model: 'gpt-4o-transcribe' })

  const deepgram = loadConfig({ STT_PROVIDER: 'deepgram', DEEPGRAM_API_KEY: 'dg-key', OPENAI_API_KEY: 'sk-openai' }).voice.stt
  t.same(deepgram, { url: 'wss://api.deepgram.com/v1/listen', apiKey: 'dg-key', configured: true, model: 'nova-3', provider: 'deepgram' }, 'Deepgram never gets the OpenAI key')
  t.match(loadConfig({ STT_PROVIDER: 'deepgram', STT_STREAM_URL: 'ws://127.0.0.1:9001/v1/listen' }).voice.stt, { apiKey: undefined, configured: true }, 'a compatible server without a key')

  t.throws(() => loadConfig({ STT_PROVIDER: 'whisper' }), new ConfigError('STT_PROVIDER must be one of batch, openai-realtime, deepgram, got "whisper"'))
  t.throws(() => loadConfig({ STT_PROVIDER: 'deepgram', OPENAI_API_KEY: 'sk-openai' }), new ConfigError('STT_PROVIDER=deepgram needs DEEPGRAM_API_KEY (or STT_STREAM_URL for a compatible server without a key)'))
  t.throws(() => loadConfig({ STT_STREAM_URL: 'wss://api.deepgram.com/v1/listen' }), new ConfigError('STT_STREAM_URL is used only with STT_PROVIDER=openai-realtime or deepgram'))
  t.throws(() => loadConfig({ STT_PROVIDER: 'deepgram', STT_STREAM_URL: 'https://api.deepgram.com/v1/listen' }), new ConfigError('STT_STREAM_URL must start with wss:// or ws://'))
})
