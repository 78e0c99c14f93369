import { Type } from 'typebox'
import { ID_PATTERN } from '../../db/ids.ts'
import { COMPONENT, E164, Email, ObjectId } from '../../http/schemas.ts'
import { VARIABLE } from '../../templates.ts'

// The `settings` object of each action and tool type. The specification names a few members; the rest
// are ours and documented in docs/agents.md. Write-only secrets (header values) are masked in answers.

const Name = Type.String({ minLength: 1, maxLength: 100, description: 'shown in the app and in failure e-mails' })
const Description = Type.Optional(Type.String({ maxLength: 1000, description: 'tells the language model when to use the tool' }))
const TimeZone = Type.String({ format: 'time-zone', description: 'IANA time zone such as Europe/Berlin' })
const Minutes = (min: number, max: number, description: string) => Type.Integer({ minimum: min, maximum: max, description })
const Headers = Type.Record(Type.String(), Type.String({ maxLength: 4000 }), {
  [COMPONENT]: 'RequestHeaders',
  maxProperties: 50,
  description: 'sent with every request; values are write-only: answers show `********`, and a PATCH that sends `********` keeps the stored value'
})

/** How a phone call is put through to a number (call_forwarding, agent_transfer to a number). */
const Dialling = {
  timeout_seconds: Type.Optional(Type.Integer({ minimum: 5, maximum: 120, description: 'how long the number rings before the agent takes the call back (default 30)' })),
  show_caller_number: Type.Optional(Type.Boolean({ description: "show the caller's number to the person called (default false: the agent's number)" }))
}

/** What answers show instead of a stored header value. */
export const MASK = '********'

const messageSettings = (maxLength: number, channel: string) => Type.Object({
  name: Name,
  message: Type.String({ minLength: 1, maxLength, description: `text of the ${channel}; {{variables}} are filled in after the call` }),
  send_to_customer: Type.Optional(Type.Boolean({ description: 'send to the other party of the call (default true)' })),
  direct_recipients: Type.Optional(Type.Array(E164, { maxItems: 20, description: 'further fixed recipients (default none)' }))
})

export const ACTION_SETTINGS = {
  send_email: Type.Object({
    name: Name,
    subject: Type.String({ minLength: 1, maxLength: 200 }),
    message: Type.String({ minLength: 1, maxLength: 20000 }),
    direct_recipients: Type.Array(Email, { minItems: 1, maxItems: 50 })
  }),
  send_sms: messageSettings(1600, 'SMS'),
  send_chat: messageSettings(4096, 'chat-app message'),
  api_call: Type.Object({
    name: Name,
    url: Type.String({ format: 'http-url-template', maxLength: 2000 }),
    method: Type.Optional(Type.Union([Type.Literal('GET'), Type.Literal('POST'), Type.Literal('PUT'), Type.Literal('PATCH'), Type.Literal('DELETE')], { description: 'default POST' })),
    headers: Type.Optional(Headers),
    query: Type.Optional(Type.Record(Type.String(), Type.String({ maxLength: 2000 }), { maxProperties: 50, description: 'query parameters; {{variables}} allowed' })),
    body: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'JSON body (query string for GET and DELETE); a value that is exactly one {{variable}} keeps its type' })),
    send_only_custom_fields: Type.Optional(Type.Boolean({ description: 'send only `query` and `body`, without the call payload (default false)' })),
    retry_schedule: Type.Optional(Type.Array(Type.Integer({ minimum: 60, maximum: 604_800 }), {
      maxItems: 10,
      description: 'pauses in seconds before each retry; absent: the default 8-attempt schedule; [] : one send, no retries'
    })),
    notify: Type.Optional(Type.Union([Type.Literal('last_attempt'), Type.Literal('every_attempt'), Type.Literal('never')], { description: 'failure e-mails (default last_attempt)' })),
    notify_email: Type.Optional(Type.Union([Email, Type.Null()], { description: 'recipient of failure e-mails; null: the account owner' })),
    condition: Type.Optional(Type.Union([Type.String({ maxLength: 1000 }), Type.Null()], { description: 'plain-language condition that selects the calls to deliver, judged by the call analysis (ANALYSER=openai); null, or not judged: every call' }))
  })
}

export const TOOL_SETTINGS = {
  api_rag: Type.Object({
    name: Name,
    description: Description,
    knowledge_base_ids: Type.Array(ObjectId, { minItems: 1, maxItems: 20, uniqueItems: true }),
    top_k: Type.Optional(Type.Integer({ minimum: 1, maximum: 20, description: 'passages returned per search (default 3)' }))
  }),
  appointment_booking: Type.Object({
    name: Name,
    description: Description,
    time_zone: TimeZone,
    duration_minutes: Minutes(5, 480, 'length of an appointment'),
    notify_email: Type.Optional(Type.Union([Email, Type.Null()], { description: 'told of every booking' }))
  }),
  call_forwarding: Type.Object({
    name: Name,
    description: Description,
    phone_number: E164,
    transfer_message: Type.Optional(Type.String({ maxLength: 500, description: 'said before forwarding' })),
    ...Dialling
  }),
  end_call: Type.Object({ name: Name, description: Description }),
  calendar_one: calendarSettings(),
  calendar_two: calendarSettings(),
  booking_one: bookingSettings(),
  booking_two: bookingSettings(),
  crm: Type.Object({
    name: Name,
    description: Description,
    operations: Type.Array(Type.Union([Type.Literal('lookup_contact'), Type.Literal('create_contact'), Type.Literal('update_contact'), Type.Literal('log_call')]), { minItems: 1, uniqueItems: true })
  }),
  agent_transfer: Type.Object({
    name: Name,
    description: Description,
    agent_id: Type.Optional(Type.String({ pattern: ID_PATTERN, description: 'the agent that takes over; another agent of the same account' })),
    phone_number: Type.Optional({ ...E164, description: 'or: the number of an agent elsewhere (another platform, a team) that the call is put through to' }),
    ...Dialling
  }, { anyOf: [{ required: ['agent_id'] }, { required: ['phone_number'] }] }),
  mcp: Type.Object({
    name: Name,
    description: Description,
    server_url: Type.String({ format: 'http-url', maxLength: 2000 }),
    allowed_tools: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 100, uniqueItems: true, description: 'tool names the agent may call; [] or absent: all' })),
    headers: Type.Optional(Headers)
  })
}

function calendarSettings () {
  return Type.Object({
    name: Name,
    description: Description,
    calendar_id: Type.String({ minLength: 1, maxLength: 200, description: 'calendar in the connected account' }),
    time_zone: TimeZone,
    duration_minutes: Minutes(5, 480, 'length of an event')
  })
}

function bookingSettings () {
  return Type.Object({
    name: Name,
    description: Description,
    event_type_id: Type.String({ minLength: 1, maxLength: 200, description: 'event type in the connected booking account' }),
    time_zone: TimeZone
  })
}

/** Tool types that act in an external account and so need its integration connected first. */
export const NEEDS_INTEGRATION = new Set(['booking_one', 'booking_two'])

/** Headers the delivery engine sets itself or that would break the request. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'user-agent',
  'x-service-delivery-id', 'x-service-attempt', 'x-correlation-id', 'content-type'])

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/** The first problem with header names, as a message naming the field, or undefined. */
export function headerProblem (headers: Record<string, string> | undefined): string | undefined {
  for (const name of Object.keys(headers ?? {})) {
    if (!HEADER_NAME.test(name)) return `body.settings.headers has an invalid header name "${name}"`
    if (RESERVED_HEADERS.has(name.toLowerCase())) return `body.settings.headers.${name} is set by Switchboard and cannot be configured`
  }
  return undefined
}

type Settings = Record<string, unknown>

const headersOf = (settings: Settings) => settings.headers as Record<string, string> | undefined

/** Settings as answers show them: header values replaced by the mask. */
export function maskSettings (settings: Settings): Settings {
  const headers = headersOf(settings)
  if (headers === undefined) return settings
  return { ...settings, headers: Object.fromEntries(Object.keys(headers).map((name) => [name, MASK])) }
}

/**
 * Puts stored header values back where an update sends the mask. Returns the name of a masked header
 * that has no stored value, so the caller can refuse it.
 */
export function unmaskSettings (settings: Settings, stored: Settings | undefined): string | undefined {
  const headers = headersOf(settings)
  if (headers === undefined) return undefined
  const previous = stored === undefined ? {} : headersOf(stored) ?? {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== MASK) continue
    if (previous[name] === undefined) return name
    headers[name] = previous[name]
  }
  return undefined
}

/**
 * The member holding the URL that a type's stored credentials (its write-only header values) are sent to.
 * Types absent here keep no credentials.
 */
const CREDENTIALS_URL: Record<string, string> = { api_call: 'url', mcp: 'server_url' }


/**
 * The origin (scheme, host, port) of a URL that may hold {{variables}}: each variable stands for itself (its name,
 * hex-encoded so that case and spelling survive the host's lower-casing), so `https://{{a}}.example` and
 * `https://{{b}}.example` are two origins. Text that is no URL at all is its own origin.
 */
function templateOrigin (template: unknown): string {
  const text = String(template).replace(VARIABLE, (_, name: string) => `v${Buffer.from(name).toString('hex')}v`)
  return URL.parse(text)?.origin ?? text
}

/**
 * Whether a change moves a type's URL to another origin. Its stored credentials must not follow it there: they were
 * given for the old receiver, and whoever may change the URL (a workspace admin) need not be who typed them (the
 * owner). `settings` is the merged result; `stored` what was there before.
 */
export function movesOrigin (type: string, stored: Settings, settings: Settings): boolean {
  const member = CREDENTIALS_URL[type]
  return member !== undefined && templateOrigin(stored[member]) !== templateOrigin(settings[member])
}

/**
 * Drops the stored credentials of a change that moved the URL to another origin: only header values the change
 * itself sends stay (a change without `headers` keeps none). Answers the name of a header the change asked to keep
 * (sent as the mask), which cannot be honoured, so that the caller refuses it and says why.
 */
export function forgetStoredCredentials (settings: Settings, changes: Settings): string | undefined {
  if (settings.headers === undefined) return undefined
  if (!Object.hasOwn(changes, 'headers')) {
    settings.headers = {}
    return undefined
  }
  // The change's own headers (or the default, for null); anything but an object is left to the schema to refuse.
  const typed = settings.headers
  if (typed === null || typeof typed !== 'object') return undefined
  return Object.entries(typed).find(([, value]) => value === MASK)?.[0]
}
