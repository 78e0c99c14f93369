import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import path from 'node:path'

/** Every environment variable Switchboard reads, parsed once. No other module reads process.env. */
export interface Config {
  /** TCP port of the HTTP server; 0 picks a free one (tests). */
  port: number
  /** Interface to listen on. 127.0.0.1 keeps a development server private; the image sets 0.0.0.0. */
  host: string
  /** PostgreSQL 14+ connection string. Unset: an embedded PostgreSQL in `dataDir`. */
  databaseUrl: string | undefined
  /** Where the embedded PostgreSQL keeps its cluster and, without SECRETS_KEY, the secrets key file; kept across restarts. Also the voice picker's samples (voice-previews/, made again when missing). */
  dataDir: string
  /**
   * The 32-byte key that encrypts stored secrets (carrier tokens, SIP passwords, integration credentials,
   * header values, signing secrets). Unset: the embedded database's installation keeps one in
   * DATA_DIR/secrets.key; with DATABASE_URL it is required, since every process must hold the same key.
   */
  secretsKey: Buffer | undefined
  /** Connections in this process's pool (pg-boss keeps a few of its own). */
  databasePoolSize: number
  /** DATABASE_POOL_WAIT_MS and DATABASE_IDLE_IN_TRANSACTION_MS. */
  databasePool: { waitMs: number, idleInTransactionMs: number }
  /**
   * `all` serves the API and the browser's call streams and runs the workers; `api`, `worker` and `voice` split
   * them across processes (`voice`: the call streams and web-call routes alone, docs/voice.md).
   */
  role: 'all' | 'api' | 'worker' | 'voice'
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'
  /** `json` (one JSON object a line, for collectors) or `pretty` (readable lines and a start-up banner). Unset: pretty on a terminal, else json. */
  logFormat: 'json' | 'pretty' | undefined
  /** API key given to the owner account created on the first start; otherwise a new one is logged once. */
  bootstrapApiKey: string | undefined
  /** E-mail address of that owner account. */
  bootstrapEmail: string
  /** How long a SIGTERM waits for in-flight requests and jobs before giving up. */
  shutdownTimeoutMs: number
  /**
   * How long a job's worker may go without proving it is alive (pg-boss's heartbeat) before the job is failed and
   * retried elsewhere: a killed process's jobs are taken up within about this long, not after their 15-minute expiry.
   */
  jobHeartbeatSeconds: number
  /** `smtp://user:pass@host:587` or `smtps://…:465`. Unset: e-mails are recorded in the database and logged, not sent. */
  smtpUrl: string | undefined
  /** Sender of every e-mail: `name@example.com` or `Name <name@example.com>`. */
  mailFrom: string
  /** Where numbers are searched and bought: `sandbox` (a built-in fictional inventory), `twilio` or `telnyx`. */
  phoneCarrier: 'sandbox' | 'twilio' | 'telnyx'
  /** Twilio's REST API: the installation's account (needed for PHONE_CARRIER=twilio) and its base URL. */
  twilio: TwilioConfig
  /** Telnyx's API v2 (numbers, Call Control): the installation's account (needed for PHONE_CARRIER=telnyx). */
  telnyx: TelnyxConfig
  /**
   * Who holds outbound and web calls: `voice` (the built-in voice engine: web calls are live conversations in
   * the browser; phone calls without a carrier that places them are simulated through it), `simulator`
   * (every call a short scripted conversation, no browser needed) or `external` (a voice runtime reporting
   * through /v1/runtime). Default: voice.
   */
  callRuntime: 'voice' | 'simulator' | 'external'
  /** Seconds a simulated call lasts before the simulator ends it. */
  simulatorCallSeconds: number
  /** Multiplies the simulator's pause, the agents' maximum call durations and callback delays; tests set it small. */
  callTimeScale: number
  analyser: AnalyserConfig
  /** Credits (1 credit = 1 US cent) charged per started minute and per message. */
  prices: Prices
  /** The integrations' services: Google Calendar, Microsoft Graph, Cal.com, Calendly, HubSpot (docs/integrations.md). */
  integrations: Record<IntegrationProvider, ProviderEndpoints>
  messaging: MessagingLimits
  delivery: DeliveryConfig
  knowledgeBases: KnowledgeBaseLimits
  http: HttpLimits
  concurrency: ConcurrencyLimits
  rateLimit: RateLimitConfig
  /**
   * TRUST_PROXY: which proxies' X-Forwarded-For to believe, so that a client's address (every per-address limit)
   * is the client's and not the load balancer's. `false` (unset): none, the address is the connection's peer.
   * A number n: the last n hops, whoever connects (only when nothing but the proxies reaches this server).
   * A list: the proxies' own addresses or CIDR ranges, so that a client connecting directly cannot pose as one.
   */
  trustProxy: false | number | string[]
  /** Where people reach this server: links in e-mails (the delivery log) start with it. */
  publicBaseUrl: string
  voice: VoiceConfig
  /**
   * WIDGET_CALLS_PER_ADDRESS_HOUR: web calls one client address may start with one agent's public widget key in an
   * hour (docs/widget.md). The key is public, so this (with the agent's allowed origins) is what bounds its use.
   */
  widgetCallsPerAddressHour: number
  /** Requests an account's api_call actions may send during calls in an hour, all calls together. */
  liveRequestsPerAccountHour: number
  campaigns: CampaignConfig
}

/** Outbound campaigns (docs/campaigns.md). */
export interface CampaignConfig {
  /** CAMPAIGN_TICK_MS: how often the dialler of an active campaign settles finished calls and dials due contacts. */
  tickMs: number
  /**
   * CAMPAIGN_ACCOUNT_MAX_CONCURRENT and CAMPAIGN_ACCOUNT_CALLS_PER_MINUTE: an account's caps on its campaigns' calls in
   * progress and new calls a minute, all its campaigns together (each campaign has its own caps too).
   */
  accountMaxConcurrent: number
  accountCallsPerMinute: number
  /** CAMPAIGN_MAX_ROWS and CAMPAIGN_MAX_FILE_MB: the most contacts one campaign takes, and the largest upload. */
  maxRows: number
  maxFileBytes: number
}

/** An OpenAI-compatible HTTP API: its base URL (ending before `/audio/…` or `/chat/…`) and key. */
export interface ProviderEndpoint {
  url: string
  apiKey: string | undefined
  /** The URL or key was set: the installation means to use it (local servers need no key). */
  configured: boolean
}

export type SttProvider = 'batch' | 'openai-realtime' | 'deepgram'

export interface VoiceConfig {
  /** VOICE_ENGINE: the engine of LLM configurations that name none. Without its providers configured, calls run the simulator engine (typed turns). */
  engine: 'realtime' | 'cascade' | 'simulator'
  /** The OpenAI Realtime API (or a compatible server, Azure OpenAI): REALTIME_URL, REALTIME_API_KEY, REALTIME_MODEL, REALTIME_AUTH. */
  realtime: ProviderEndpoint & {
    model: string
    auth: 'bearer' | 'api-key'
    /** REALTIME_TRANSCRIPTION_MODEL: the model (Azure: deployment) that transcribes the caller's turns; undefined (`none`): no input transcription. */
    transcriptionModel: string | undefined
  }
  /**
   * Speech to text (the cascade's recogniser). STT_PROVIDER: `batch` posts each turn to `url` (STT_URL)
   * + /audio/transcriptions after it ended; `openai-realtime` and `deepgram` stream the caller's audio to
   * `url` (STT_STREAM_URL, a WebSocket) for the whole call. `apiKey`: STT_API_KEY (else OPENAI_API_KEY) for
   * `batch` and `openai-realtime`, DEEPGRAM_API_KEY for Deepgram; `model`: STT_MODEL.
   */
  stt: ProviderEndpoint & { model: string, provider: SttProvider }
  /** Language model (streaming chat completions with tools): LLM_URL, LLM_API_KEY; the model is the LLM configuration's. */
  llm: ProviderEndpoint
  /** Text to speech: TTS_URL, TTS_API_KEY, TTS_MODEL. */
  tts: ProviderEndpoint & { model: string }
  /** A provider request (or the realtime connection) that has not answered after this fails the call (VOICE_PROVIDER_TIMEOUT_MS). */
  providerTimeoutMs: number
  /** A browser stream with no message and no pong for this long is ended (VOICE_STREAM_TIMEOUT_MS). */
  streamTimeoutMs: number
  /** A call stream not tied to its call this long after it opened (a Twilio stream without a valid `start`) is closed (VOICE_STREAM_START_TIMEOUT_MS). */
  streamStartTimeoutMs: number
  /** A caller's run of keypad presses ends at `#` or after this pause without a key, then goes to the agent as one turn (VOICE_KEYPAD_PAUSE_MS; scaled by CALL_TIME_SCALE). */
  keypadPauseMs: number
  /**
   * Stream sockets (browser and Twilio) not yet tied to a call, per client address (VOICE_PENDING_STREAMS_PER_ADDRESS;
   * 0: no per-address cap, for a benchmark's callers on one address) and in this process (VOICE_PENDING_STREAMS);
   * one more is refused before the upgrade (429, 503).
   */
  pendingStreamsPerAddress: number
  pendingStreams: number
  /**
   * Stream sockets this process holds at once, pending or in a call (VOICE_MAX_STREAMS); one more is refused 503.
   * Default: what the open-file limit leaves after a reserve for the database, workers and HTTP (maxStreamsFor).
   */
  maxStreams: number
  /** Largest message a browser may send on the stream (VOICE_MAX_MESSAGE_BYTES); a larger one ends the session. */
  maxMessageBytes: number
  /** An MCP server's listing or call must answer within this (MCP_TIMEOUT_MS). */
  mcpTimeoutMs: number
  /** How long a signed recording link works (RECORDING_LINK_SECONDS). */
  recordingLinkSeconds: number
}

/**
 * How many messages (e-mail, SMS, WhatsApp) may go out, so that a prompt cannot send a hundred SMS: each message is
 * counted before it is sent, under the account's lock (docs/messaging.md, "Limits").
 */
export interface MessagingLimits {
  /** MESSAGES_PER_CALL_MAX: messages one call sends while it runs (live actions). */
  perCall: number
  /** MESSAGES_PER_ACCOUNT_HOUR: messages one account sends in any rolling hour, whatever sends them. */
  perAccountHour: number
}

export interface DeliveryConfig {
  /** One attempt, redirects and answer included, must end within this. */
  timeoutMs: number
  /** Multiplies every pause of every retry schedule; tests and benchmarks set it small. */
  timeScale: number
  /** Lets deliveries reach private, loopback and link-local addresses (development, tests). */
  allowPrivateNetworks: boolean
  /** Days a failed or delivered request is kept before the retention job purges it. */
  retentionDays: number
  /** PEM file of further certificate authorities to trust (a private PKI), beside the system ones. */
  caFile: string | undefined
  /** Attempts one process sends at once. */
  concurrency: number
}

export interface KnowledgeBaseLimits {
  /** Largest file accepted, in bytes (KB_MAX_FILE_MB, default 20 MB); a larger one answers 413. */
  maxFileBytes: number
  /** Most files one knowledge base holds (KB_MAX_FILES). */
  maxFiles: number
  /** Most files one upload request carries (KB_MAX_FILES_PER_UPLOAD); bounds how long its transaction runs. */
  maxFilesPerUpload: number
  /** Bounds on reading one file into passages; a file past one ends `failed` with the reason. */
  extraction: ExtractionConfig
}

export interface ExtractionConfig {
  /** Heap of the worker thread that reads one file (KB_EXTRACT_MEMORY_MB). */
  memoryMb: number
  /** That worker is ended after this (KB_EXTRACT_TIMEOUT_MS). */
  timeoutMs: number
  /** Most passages one file yields (KB_MAX_PASSAGES). */
  maxPassages: number
  /** Checked on a DOCX's ZIP directory before it is unpacked: KB_ZIP_MAX_ENTRIES, KB_ZIP_MAX_UNCOMPRESSED_MB, KB_ZIP_MAX_RATIO. */
  zip: { maxEntries: number, maxUncompressedBytes: number, maxRatio: number }
}

export interface HttpLimits {
  /** A request must arrive whole, body included, within this (HTTP_REQUEST_TIMEOUT_MS); a slower one gets 408. */
  requestTimeoutMs: number
  /**
   * A connection with no traffic either way this long is closed (HTTP_CONNECTION_TIMEOUT_MS; 0: never). This
   * also ends a download whose client stopped reading; an export is cut off sooner by EXPORT_STALL_TIMEOUT_MS.
   */
  connectionTimeoutMs: number
}

/**
 * Uploads and exports that one process runs at once. Each export holds a database connection while its
 * client reads, so their total stays below the pool size; over a per-account limit: 429, over the total: 503,
 * both with Retry-After.
 */
export interface ConcurrencyLimits {
  /** KB_UPLOADS_PER_ACCOUNT */
  uploadsPerAccount: number
  /** EXPORTS_PER_ACCOUNT */
  exportsPerAccount: number
  /** EXPORTS_MAX; default half of DATABASE_POOL_SIZE (at least 1). */
  exportsTotal: number
  /** EXPORT_STALL_TIMEOUT_MS: an export whose client takes no rows this long is ended, its connection and slot freed. */
  exportStallMs: number
  /** RECORDING_DOWNLOADS_PER_ACCOUNT: recordings of one account streamed at once (API, signed links and console). */
  recordingDownloadsPerAccount: number
  /** RECORDING_DOWNLOADS_MAX: recordings this process streams at once. */
  recordingDownloadsTotal: number
}

/** Requests a client may send per window, counted in this process; 0 lifts a limit. Over it: 429 with Retry-After. */
export interface RateLimitConfig {
  /** Per API key found active (RATE_LIMIT_PER_KEY). */
  perKey: number
  /**
   * Per client address (RATE_LIMIT_PER_ADDRESS): /v1 requests without a known key (missing, unknown, revoked), and
   * every keyless route (src/http/rate-limit.ts) in a budget of its own.
   */
  perAddress: number
  /** RATE_LIMIT_WINDOW_MS. */
  windowMs: number
}

export interface AnalyserConfig {
  /** `builtin` (offline, deterministic) or `openai` (any OpenAI-compatible chat-completions API). */
  kind: 'builtin' | 'openai'
  baseUrl: string
  apiKey: string | undefined
  model: string
  timeoutMs: number
}

export interface Prices {
  phoneMinute: number
  webMinute: number
  sms: number
  forwardingMinute: number
}

export interface TwilioConfig {
  /** `https://api.twilio.com`; tests point it at a local stand-in. */
  apiUrl: string
  /** `AC` + 32 hex characters; with the auth token, the account numbers are bought on. */
  accountSid: string | undefined
  authToken: string | undefined
  /**
   * TWILIO_ALLOW_PRIVATE_BASE_URL=true: numbers are bought, imported and repointed even when PUBLIC_BASE_URL is
   * not https:// on a public name (which Twilio cannot reach): for a Twilio stand-in on your own network, as in tests.
   */
  allowPrivateBaseUrl: boolean
}

export interface TelnyxConfig {
  /** `https://api.telnyx.com`; tests point it at a local stand-in. */
  apiUrl: string
  /** The API key (Bearer) of the installation's Telnyx account. */
  apiKey: string | undefined
  /** The Call Control application (connection) whose webhook URL is PUBLIC_BASE_URL/telephony/telnyx/webhook. */
  connectionId: string | undefined
  /** The account's Ed25519 public key (base64 of its 32 bytes, from the portal) that checks webhook signatures. */
  publicKey: string | undefined
  /** How far a webhook's telnyx-timestamp may be from now, in seconds, before it is refused as a replay. */
  signatureToleranceSeconds: number
  /**
   * SIP_CARRIER: which carrier connect-to-sip sets a SIP trunk number up at (docs/sip.md): `twilio` (a SIP Domain in
   * the installation's Twilio account; the default) or `telnyx` (a Call Control application and a credential
   * connection in its Telnyx account).
   */
  sipCarrier: 'twilio' | 'telnyx'
}

/** The neutral names of the specification's integrations (docs/integrations.md maps them to the services). */
export type IntegrationProvider = 'calendar_one' | 'calendar_two' | 'booking_one' | 'booking_two' | 'crm'

/**
 * Where one integration's service is reached, and the installation's OAuth client there (unset: accounts connect
 * with an API key only, where the service offers one). Every URL is configurable so that tests use stand-ins.
 */
export interface ProviderEndpoints {
  api: string
  authorize?: string
  token?: string
  revoke?: string
  clientId?: string
  clientSecret?: string
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>

const API_KEY = /^sk_[0-9A-Za-z]{40}$/
const EMAIL = /^[^\s@]+@[^\s@]+$/
const MAIL_FROM = /^([^<>]*<[^\s@<>]+@[^\s@<>]+>|[^\s@<>]+@[^\s@<>]+)$/
const TWILIO_ACCOUNT_SID = /^AC[0-9a-fA-F]{32}$/

function str (env: Env, name: string, fallback: string): string {
  const value = env[name]
  return value === undefined || value === '' ? fallback : value
}

function optional (env: Env, name: string): string | undefined {
  const value = env[name]
  return value === undefined || value === '' ? undefined : value
}

function int (env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = optional(env, name)
  if (raw === undefined) return fallback
  const value = Number(raw)
  if (!/^\d+$/.test(raw) || value < min || value > max) {
    throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`)
  }
  return value
}

function oneOf<T extends string> (env: Env, name: string, fallback: T, allowed: readonly T[]): T {
  const value = str(env, name, fallback)
  if (!allowed.includes(value as T)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${value}"`)
  }
  return value as T
}

function matching (env: Env, name: string, pattern: RegExp, what: string): string | undefined {
  const value = optional(env, name)
  if (value !== undefined && !pattern.test(value)) {
    throw new ConfigError(`${name} must be ${what}`)
  }
  return value
}

function databaseUrl (env: Env): string | undefined {
  const value = optional(env, 'DATABASE_URL')
  if (value === undefined) return undefined
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new ConfigError('DATABASE_URL must be a URL such as postgres://user:password@host:5432/switchboard')
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError('DATABASE_URL must start with postgres:// or postgresql://')
  }
  return value
}

/**
 * Parses a key as 64 hexadecimal digits or base64 (standard or URL-safe) of exactly 32 bytes; undefined
 * for anything else.
 */
export function parseSecretsKey (text: string): Buffer | undefined {
  const value = text.trim()
  if (/^[0-9a-fA-F]{64}$/.test(value)) return Buffer.from(value, 'hex')
  if (!/^[A-Za-z0-9+/_-]{43}=?$/.test(value)) return undefined
  const key = Buffer.from(value, 'base64')
  return key.length === 32 ? key : undefined
}

function secretsKey (env: Env): Buffer | undefined {
  const value = optional(env, 'SECRETS_KEY')
  if (value === undefined) {
    if (optional(env, 'DATABASE_URL') !== undefined) {
      throw new ConfigError('DATABASE_URL needs SECRETS_KEY, the key that encrypts stored credentials on every process: make one with `openssl rand -base64 32`')
    }
    return undefined
  }
  const key = parseSecretsKey(value)
  if (key === undefined) throw new ConfigError('SECRETS_KEY must be 32 bytes as base64 (`openssl rand -base64 32`) or as 64 hexadecimal digits')
  return key
}

function endpoint (env: Env, name: string, protocols: string[], example: string): string | undefined {
  const value = optional(env, name)
  if (value === undefined) return undefined
  let parsed: URL
  try {
    parsed = new URL(value)
  } catch {
    throw new ConfigError(`${name} must be a URL such as ${example}`)
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must start with ${protocols.map((p) => p + '//').join(' or ')}`)
  }
  return value
}

/** A service's URL variable: its default, or the configured one without a trailing slash. */
function serviceUrl (env: Env, name: string, fallback: string): string {
  return (endpoint(env, name, ['https:', 'http:'], fallback) ?? fallback).replace(/\/+$/, '')
}

/** An OAuth client: both halves or neither. */
function oauthClient (env: Env, prefix: string): Pick<ProviderEndpoints, 'clientId' | 'clientSecret'> {
  const clientId = optional(env, `${prefix}_CLIENT_ID`)
  const clientSecret = optional(env, `${prefix}_CLIENT_SECRET`)
  if ((clientId === undefined) !== (clientSecret === undefined)) {
    throw new ConfigError(`${prefix}_CLIENT_ID and ${prefix}_CLIENT_SECRET are set together (the OAuth client of your app at the service)`)
  }
  return clientId === undefined ? {} : { clientId, clientSecret }
}

function integrations (env: Env): Record<IntegrationProvider, ProviderEndpoints> {
  return Object.freeze({
    calendar_one: Object.freeze({
      api: serviceUrl(env, 'GOOGLE_CALENDAR_API_URL', 'https://www.googleapis.com/calendar/v3'),
      authorize: serviceUrl(env, 'GOOGLE_AUTHORIZE_URL', 'https://accounts.google.com/o/oauth2/v2/auth'),
      token: serviceUrl(env, 'GOOGLE_TOKEN_URL', 'https://oauth2.googleapis.com/token'),
      revoke: serviceUrl(env, 'GOOGLE_REVOKE_URL', 'https://oauth2.googleapis.com/revoke'),
      ...oauthClient(env, 'GOOGLE')
    }),
    calendar_two: Object.freeze({
      api: serviceUrl(env, 'MICROSOFT_GRAPH_URL', 'https://graph.microsoft.com/v1.0'),
      authorize: serviceUrl(env, 'MICROSOFT_AUTHORIZE_URL', 'https://login.microsoftonline.com/common/oauth2/v2.0/authorize'),
      token: serviceUrl(env, 'MICROSOFT_TOKEN_URL', 'https://login.microsoftonline.com/common/oauth2/v2.0/token'),
      ...oauthClient(env, 'MICROSOFT')
    }),
    booking_one: Object.freeze({
      api: serviceUrl(env, 'CALCOM_API_URL', 'https://api.cal.com/v2')
    }),
    booking_two: Object.freeze({
      api: serviceUrl(env, 'CALENDLY_API_URL', 'https://api.calendly.com'),
      authorize: serviceUrl(env, 'CALENDLY_AUTHORIZE_URL', 'https://auth.calendly.com/oauth/authorize'),
      token: serviceUrl(env, 'CALENDLY_TOKEN_URL', 'https://auth.calendly.com/oauth/token'),
      revoke: serviceUrl(env, 'CALENDLY_REVOKE_URL', 'https://auth.calendly.com/oauth/revoke'),
      ...oauthClient(env, 'CALENDLY')
    }),
    crm: Object.freeze({
      api: serviceUrl(env, 'HUBSPOT_API_URL', 'https://api.hubapi.com'),
      authorize: serviceUrl(env, 'HUBSPOT_AUTHORIZE_URL', 'https://app.hubspot.com/oauth/authorize'),
      token: serviceUrl(env, 'HUBSPOT_TOKEN_URL', 'https://api.hubapi.com/oauth/v1/token'),
      ...oauthClient(env, 'HUBSPOT')
    })
  })
}

function twilio (env: Env, carrier: Config['phoneCarrier']): TwilioConfig {
  const config = {
    apiUrl: (endpoint(env, 'TWILIO_API_URL', ['https:', 'http:'], 'https://api.twilio.com') ?? 'https://api.twilio.com').replace(/\/+$/, ''),
    accountSid: matching(env, 'TWILIO_ACCOUNT_SID', TWILIO_ACCOUNT_SID, '"AC" followed by 32 hexadecimal characters'),
    authToken: optional(env, 'TWILIO_AUTH_TOKEN'),
    allowPrivateBaseUrl: oneOf(env, 'TWILIO_ALLOW_PRIVATE_BASE_URL', 'false', ['true', 'false'] as const) === 'true'
  }
  if (carrier === 'twilio' && (config.accountSid === undefined || config.authToken === undefined)) {
    throw new ConfigError('PHONE_CARRIER=twilio needs TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN')
  }
  return Object.freeze(config)
}

function telnyx (env: Env, carrier: Config['phoneCarrier']): TelnyxConfig {
  const publicKey = optional(env, 'TELNYX_PUBLIC_KEY')
  if (publicKey !== undefined && (!/^[A-Za-z0-9+/]{43}=$/.test(publicKey) || Buffer.from(publicKey, 'base64').length !== 32)) {
    throw new ConfigError('TELNYX_PUBLIC_KEY must be the base64 of a 32-byte Ed25519 public key (Mission Control: Keys & Credentials, Public Key)')
  }
  const config = {
    apiUrl: (endpoint(env, 'TELNYX_API_URL', ['https:', 'http:'], 'https://api.telnyx.com') ?? 'https://api.telnyx.com').replace(/\/+$/, ''),
    apiKey: optional(env, 'TELNYX_API_KEY'),
    connectionId: matching(env, 'TELNYX_CONNECTION_ID', /^[A-Za-z0-9-]{1,64}$/, 'the id of a Call Control application (letters, digits and dashes)'),
    publicKey,
    // Telnyx's SDKs allow 5 minutes (developers.telnyx.com/docs/development/api-fundamentals/webhooks).
    signatureToleranceSeconds: int(env, 'TELNYX_SIGNATURE_TOLERANCE_SECONDS', 300, 1, 3600),
    sipCarrier: oneOf(env, 'SIP_CARRIER', 'twilio', ['twilio', 'telnyx'] as const)
  }
  if (carrier === 'telnyx' && (config.apiKey === undefined || config.connectionId === undefined || config.publicKey === undefined)) {
    throw new ConfigError('PHONE_CARRIER=telnyx needs TELNYX_API_KEY, TELNYX_CONNECTION_ID and TELNYX_PUBLIC_KEY')
  }
  if (config.sipCarrier === 'telnyx' && (config.apiKey === undefined || config.connectionId === undefined || config.publicKey === undefined)) {
    throw new ConfigError('SIP_CARRIER=telnyx needs TELNYX_API_KEY, TELNYX_CONNECTION_ID and TELNYX_PUBLIC_KEY: SIP trunk numbers are then set up in that Telnyx account')
  }
  return Object.freeze(config)
}

const TRUST_PROXY_HELP = 'TRUST_PROXY must be the number of proxies in front of this server (1 for one load balancer) or a comma-separated list of their addresses or CIDR ranges (10.0.0.0/8, fd00::/8)'

function trustProxy (env: Env): false | number | string[] {
  const raw = optional(env, 'TRUST_PROXY')
  if (raw === undefined) return false
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw)
    if (hops > 10) throw new ConfigError(`${TRUST_PROXY_HELP}, got "${raw}"`)
    return hops === 0 ? false : hops
  }
  const ranges = raw.split(',').map((entry) => entry.trim())
  for (const range of ranges) {
    const [address, prefix, ...rest] = range.split('/')
    const family = isIP(address)
    const bits = family === 4 ? 32 : 128
    if (family === 0 || rest.length > 0 || (prefix !== undefined && !(/^\d+$/.test(prefix) && Number(prefix) <= bits))) {
      throw new ConfigError(`${TRUST_PROXY_HELP}, got "${range}"`)
    }
  }
  return ranges
}

function positive (env: Env, name: string, fallback: number, max: number): number {
  const raw = optional(env, name)
  if (raw === undefined) return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value <= 0 || value > max) throw new ConfigError(`${name} must be a number above 0 and at most ${max}, got "${raw}"`)
  return value
}

function analyser (env: Env): AnalyserConfig {
  const kind = oneOf(env, 'ANALYSER', 'builtin', ['builtin', 'openai'] as const)
  const config = {
    kind,
    baseUrl: (endpoint(env, 'ANALYSER_BASE_URL', ['https:', 'http:'], 'https://api.openai.com/v1') ?? 'https://api.openai.com/v1').replace(/\/+$/, ''),
    apiKey: optional(env, 'ANALYSER_API_KEY'),
    model: str(env, 'ANALYSER_MODEL', 'gpt-4o-mini'),
    timeoutMs: int(env, 'ANALYSER_TIMEOUT_MS', 30_000, 1000, 600_000)
  }
  if (kind === 'openai' && config.apiKey === undefined) throw new ConfigError('ANALYSER=openai needs ANALYSER_API_KEY')
  return Object.freeze(config)
}

const OPENAI_URL = 'https://api.openai.com/v1'

/** A provider's URL and key: its own variables, else OPENAI_API_KEY and OpenAI's address. */
function provider (env: Env, prefix: string, fallbackUrl: string): ProviderEndpoint {
  const url = endpoint(env, `${prefix}_URL`, fallbackUrl.startsWith('wss:') ? ['wss:', 'ws:'] : ['https:', 'http:'], fallbackUrl)
  const apiKey = optional(env, `${prefix}_API_KEY`) ?? optional(env, 'OPENAI_API_KEY')
  return { url: (url ?? fallbackUrl).replace(/\/+$/, ''), apiKey, configured: url !== undefined || apiKey !== undefined }
}

/** The process's soft limit on open files (Linux: /proc/self/limits); undefined where it cannot be read. */
function openFileLimit (): number | undefined {
  try {
    const line = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))
    return line === null ? undefined : Number(line[1])
  } catch {
    return undefined
  }
}

/**
 * The default of VOICE_MAX_STREAMS: descriptors left by the open-file limit after a reserve for the database pool,
 * pg-boss, deliveries and plain HTTP (256 beside those), at 3 a stream (its socket, the provider's connection, one
 * for a tool or the cascade's second provider). At `ulimit -n 1024` that is 236 streams, more than a process holds
 * within the voice benchmark's limits; without a readable limit 1024 descriptors are assumed.
 */
export function maxStreamsFor (openFiles: number, databasePoolSize: number, deliveryConcurrency: number): number {
  return Math.max(1, Math.floor((openFiles - 256 - databasePoolSize - deliveryConcurrency) / 3))
}

/** Each streaming recogniser's WebSocket and model unless STT_STREAM_URL and STT_MODEL say otherwise. */
const STT_STREAMS = {
  'openai-realtime': { url: 'wss://api.openai.com/v1/realtime', model: 'gpt-4o-mini-transcribe' },
  deepgram: { url: 'wss://api.deepgram.com/v1/listen', model: 'nova-3' }
} as const

function stt (env: Env): VoiceConfig['stt'] {
  const kind = oneOf(env, 'STT_PROVIDER', 'batch', ['batch', 'openai-realtime', 'deepgram'] as const)
  const streamUrl = endpoint(env, 'STT_STREAM_URL', ['wss:', 'ws:'], STT_STREAMS.deepgram.url)
  if (kind === 'batch') {
    if (streamUrl !== undefined) throw new ConfigError('STT_STREAM_URL is used only with STT_PROVIDER=openai-realtime or deepgram')
    return Object.freeze({ ...provider(env, 'STT', OPENAI_URL), model: str(env, 'STT_MODEL', 'gpt-4o-mini-transcribe'), provider: kind })
  }
  // Deepgram gets its own key only: OPENAI_API_KEY (STT_API_KEY's fallback) must never be sent to it.
  const apiKey = kind === 'deepgram' ? optional(env, 'DEEPGRAM_API_KEY') : optional(env, 'STT_API_KEY') ?? optional(env, 'OPENAI_API_KEY')
  if (kind === 'deepgram' && apiKey === undefined && streamUrl === undefined) {
    throw new ConfigError('STT_PROVIDER=deepgram needs DEEPGRAM_API_KEY (or STT_STREAM_URL for a compatible server without a key)')
  }
  return Object.freeze({
    url: (streamUrl ?? STT_STREAMS[kind].url).replace(/\/+$/, ''),
    apiKey,
    configured: streamUrl !== undefined || apiKey !== undefined,
    model: str(env, 'STT_MODEL', STT_STREAMS[kind].model),
    provider: kind
  })
}

function voice (env: Env): VoiceConfig {
  const transcription = str(env, 'REALTIME_TRANSCRIPTION_MODEL', 'gpt-4o-mini-transcribe')
  const derivedMaxStreams = maxStreamsFor(openFileLimit() ?? 1024, int(env, 'DATABASE_POOL_SIZE', 10, 1, 1000), int(env, 'DELIVERY_CONCURRENCY', 50, 1, 500))
  return Object.freeze({
    engine: oneOf(env, 'VOICE_ENGINE', 'realtime', ['realtime', 'cascade', 'simulator'] as const),
    realtime: Object.freeze({
      ...provider(env, 'REALTIME', 'wss://api.openai.com/v1/realtime'),
      model: str(env, 'REALTIME_MODEL', 'gpt-realtime'),
      auth: oneOf(env, 'REALTIME_AUTH', 'bearer', ['bearer', 'api-key'] as const),
      // `none`: a compatible server that cannot transcribe (the transcript then holds the agent's side only).
      transcriptionModel: transcription === 'none' ? undefined : transcription
    }),
    stt: stt(env),
    llm: Object.freeze(provider(env, 'LLM', OPENAI_URL)),
    tts: Object.freeze({ ...provider(env, 'TTS', OPENAI_URL), model: str(env, 'TTS_MODEL', 'gpt-4o-mini-tts') }),
    providerTimeoutMs: int(env, 'VOICE_PROVIDER_TIMEOUT_MS', 15_000, 100, 600_000),
    streamTimeoutMs: int(env, 'VOICE_STREAM_TIMEOUT_MS', 15_000, 100, 600_000),
    streamStartTimeoutMs: int(env, 'VOICE_STREAM_START_TIMEOUT_MS', 5000, 10, 60_000),
    // Callers type an account number at about two keys a second; 2.5 s without a key is a finished entry.
    keypadPauseMs: int(env, 'VOICE_KEYPAD_PAUSE_MS', 2500, 100, 30_000),
    pendingStreamsPerAddress: int(env, 'VOICE_PENDING_STREAMS_PER_ADDRESS', 20, 0, 100_000),
    pendingStreams: int(env, 'VOICE_PENDING_STREAMS', 100, 1, 100_000),
    maxStreams: int(env, 'VOICE_MAX_STREAMS', derivedMaxStreams, 1, 1_000_000),
    maxMessageBytes: int(env, 'VOICE_MAX_MESSAGE_BYTES', 64 * 1024, 1024, 16 * 1024 * 1024),
    mcpTimeoutMs: int(env, 'MCP_TIMEOUT_MS', 10_000, 100, 600_000),
    recordingLinkSeconds: int(env, 'RECORDING_LINK_SECONDS', 3600, 10, 30 * 86_400)
  })
}

export function loadConfig (env: Env = process.env): Config {
  const phoneCarrier = oneOf(env, 'PHONE_CARRIER', 'sandbox', ['sandbox', 'twilio', 'telnyx'] as const)
  return Object.freeze({
    port: int(env, 'PORT', 3000, 0, 65535),
    host: str(env, 'HOST', '127.0.0.1'),
    databaseUrl: databaseUrl(env),
    dataDir: path.resolve(str(env, 'DATA_DIR', './data')),
    secretsKey: secretsKey(env),
    databasePoolSize: int(env, 'DATABASE_POOL_SIZE', 10, 1, 1000),
    databasePool: Object.freeze({
      waitMs: int(env, 'DATABASE_POOL_WAIT_MS', 5000, 0, 600_000),
      idleInTransactionMs: int(env, 'DATABASE_IDLE_IN_TRANSACTION_MS', 60_000, 0, 3_600_000)
    }),
    role: oneOf(env, 'ROLE', 'all', ['all', 'api', 'worker', 'voice'] as const),
    logLevel: oneOf(env, 'LOG_LEVEL', 'info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const),
    logFormat: optional(env, 'LOG_FORMAT') === undefined ? undefined : oneOf(env, 'LOG_FORMAT', 'json', ['json', 'pretty'] as const),
    bootstrapApiKey: matching(env, 'BOOTSTRAP_API_KEY', API_KEY, '"sk_" followed by 40 letters or digits'),
    bootstrapEmail: matching(env, 'BOOTSTRAP_EMAIL', EMAIL, 'an e-mail address') ?? 'owner@localhost',
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    // pg-boss takes 10 seconds at the least.
    jobHeartbeatSeconds: int(env, 'JOB_HEARTBEAT_SECONDS', 30, 10, 3600),
    smtpUrl: endpoint(env, 'SMTP_URL', ['smtp:', 'smtps:'], 'smtp://user:password@mail.example.com:587'),
    mailFrom: matching(env, 'MAIL_FROM', MAIL_FROM, 'an address such as "Switchboard <noreply@example.com>"') ?? 'Switchboard <noreply@localhost>',
    phoneCarrier,
    twilio: twilio(env, phoneCarrier),
    telnyx: telnyx(env, phoneCarrier),
    callRuntime: oneOf(env, 'CALL_RUNTIME', 'voice', ['voice', 'simulator', 'external'] as const),
    simulatorCallSeconds: int(env, 'SIMULATOR_CALL_SECONDS', 5, 0, 3600),
    callTimeScale: positive(env, 'CALL_TIME_SCALE', 1, 1),
    analyser: analyser(env),
    publicBaseUrl: (endpoint(env, 'PUBLIC_BASE_URL', ['https:', 'http:'], 'https://switchboard.example.com') ??
      `http://${['0.0.0.0', '::', '127.0.0.1'].includes(str(env, 'HOST', '127.0.0.1')) ? 'localhost' : str(env, 'HOST', '127.0.0.1')}:${int(env, 'PORT', 3000, 0, 65535)}`).replace(/\/+$/, ''),
    voice: voice(env),
    widgetCallsPerAddressHour: int(env, 'WIDGET_CALLS_PER_ADDRESS_HOUR', 10, 1, 100_000),
    liveRequestsPerAccountHour: int(env, 'LIVE_REQUESTS_PER_ACCOUNT_HOUR', 1000, 1, 1_000_000),
    campaigns: Object.freeze({
      tickMs: int(env, 'CAMPAIGN_TICK_MS', 5000, 50, 600_000),
      accountMaxConcurrent: int(env, 'CAMPAIGN_ACCOUNT_MAX_CONCURRENT', 20, 1, 100_000),
      accountCallsPerMinute: int(env, 'CAMPAIGN_ACCOUNT_CALLS_PER_MINUTE', 60, 1, 1_000_000),
      maxRows: int(env, 'CAMPAIGN_MAX_ROWS', 50_000, 1, 1_000_000),
      maxFileBytes: int(env, 'CAMPAIGN_MAX_FILE_MB', 10, 1, 1024) * 1024 * 1024
    }),
    delivery: Object.freeze({
      timeoutMs: int(env, 'DELIVERY_TIMEOUT_MS', 30_000, 100, 300_000),
      timeScale: positive(env, 'DELIVERY_TIME_SCALE', 1, 1),
      allowPrivateNetworks: oneOf(env, 'DELIVERY_ALLOW_PRIVATE_NETWORKS', 'false', ['true', 'false'] as const) === 'true',
      retentionDays: int(env, 'DELIVERY_RETENTION_DAYS', 30, 1, 3650),
      caFile: optional(env, 'DELIVERY_CA_FILE'),
      concurrency: int(env, 'DELIVERY_CONCURRENCY', 50, 1, 500)
    }),
    integrations: integrations(env),
    prices: Object.freeze({
      phoneMinute: int(env, 'CREDITS_PHONE_MINUTE', 10, 0, 100_000),
      webMinute: int(env, 'CREDITS_WEB_MINUTE', 5, 0, 100_000),
      sms: int(env, 'CREDITS_SMS', 2, 0, 100_000),
      forwardingMinute: int(env, 'CREDITS_FORWARDING_MINUTE', 8, 0, 100_000)
    }),
    messaging: Object.freeze({
      perCall: int(env, 'MESSAGES_PER_CALL_MAX', 10, 1, 10_000),
      perAccountHour: int(env, 'MESSAGES_PER_ACCOUNT_HOUR', 200, 1, 1_000_000)
    }),
    http: Object.freeze({
      requestTimeoutMs: int(env, 'HTTP_REQUEST_TIMEOUT_MS', 120_000, 100, 3_600_000),
      connectionTimeoutMs: int(env, 'HTTP_CONNECTION_TIMEOUT_MS', 60_000, 0, 3_600_000)
    }),
    concurrency: Object.freeze({
      uploadsPerAccount: int(env, 'KB_UPLOADS_PER_ACCOUNT', 2, 1, 1000),
      exportsPerAccount: int(env, 'EXPORTS_PER_ACCOUNT', 2, 1, 1000),
      exportsTotal: int(env, 'EXPORTS_MAX', Math.max(1, Math.floor(int(env, 'DATABASE_POOL_SIZE', 10, 1, 1000) / 2)), 1, 1000),
      exportStallMs: int(env, 'EXPORT_STALL_TIMEOUT_MS', 30_000, 10, 3_600_000),
      recordingDownloadsPerAccount: int(env, 'RECORDING_DOWNLOADS_PER_ACCOUNT', 4, 1, 1000),
      recordingDownloadsTotal: int(env, 'RECORDING_DOWNLOADS_MAX', 32, 1, 10_000)
    }),
    rateLimit: Object.freeze({
      perKey: int(env, 'RATE_LIMIT_PER_KEY', 3000, 0, 10_000_000),
      perAddress: int(env, 'RATE_LIMIT_PER_ADDRESS', 120, 0, 10_000_000),
      windowMs: int(env, 'RATE_LIMIT_WINDOW_MS', 60_000, 100, 3_600_000)
    }),
    trustProxy: trustProxy(env),
    knowledgeBases: Object.freeze({
      maxFileBytes: int(env, 'KB_MAX_FILE_MB', 20, 1, 1024) * 1024 * 1024,
      maxFiles: int(env, 'KB_MAX_FILES', 100, 1, 10_000),
      maxFilesPerUpload: int(env, 'KB_MAX_FILES_PER_UPLOAD', 20, 1, 1000),
      extraction: Object.freeze({
        memoryMb: int(env, 'KB_EXTRACT_MEMORY_MB', 256, 16, 65_536),
        timeoutMs: int(env, 'KB_EXTRACT_TIMEOUT_MS', 60_000, 1, 3_600_000),
        maxPassages: int(env, 'KB_MAX_PASSAGES', 5000, 1, 10_000_000),
        zip: Object.freeze({
          maxEntries: int(env, 'KB_ZIP_MAX_ENTRIES', 10_000, 1, 1_000_000),
          maxUncompressedBytes: int(env, 'KB_ZIP_MAX_UNCOMPRESSED_MB', 100, 1, 65_536) * 1024 * 1024,
          maxRatio: int(env, 'KB_ZIP_MAX_RATIO', 100, 2, 1_000_000)
        })
      })
    })
  })
}
