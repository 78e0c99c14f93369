import { Type } from 'typebox'
import { CHECKED_IN_HANDLER, COMPONENT, Email } from '../../http/schemas.ts'
import { VARIABLE } from '../../templates.ts'

// The parts the settings of an agent's actions, tools (capabilities/types/) and workflow steps (workflow.ts) share,
// and the rules of their write-only header values: masked in answers, kept when a change sends the mask, dropped
// when the URL moves elsewhere. They live with the agent so that both the capabilities and the workflow use them.

/** A variable the agent collects (an agent's data_retrieval field, a workflow step's variable). */
export const DataRetrievalItem = Type.Object({
  name: Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,63}$', description: 'variable name; becomes {{name}} in actions and a key of custom_analysis_data' }),
  type: Type.Union([Type.Literal('string'), Type.Literal('number'), Type.Literal('boolean'), Type.Literal('enum'), Type.Literal('date')]),
  description: Type.Optional(Type.String({ maxLength: 1000, description: 'what to extract, for the analyser' })),
  enum_values: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { minItems: 1, maxItems: 50, uniqueItems: true, description: 'the allowed values; required for and only for type enum' })),
  required: Type.Optional(Type.Boolean({ description: 'the call\'s task counts as achieved only when it is found (default false)' })),
  keypad: Type.Optional(Type.Boolean({ description: 'type string only: the caller may type it on the phone\'s keypad, ended with `#` (a PIN, an account number); keys ended with `#` fill the first such field not collected yet (default false)' }))
}, {
  [COMPONENT]: 'DataRetrievalField',
  // Enforced by the agent routes (see CHECKED_IN_HANDLER): Ajv would strip fields through the branches' `properties`.
  [CHECKED_IN_HANDLER]: {
    oneOf: [
      { properties: { type: { const: 'enum' } }, required: ['type', 'enum_values'] },
      { properties: { type: { enum: ['string', 'number', 'boolean', 'date'] } }, not: { required: ['enum_values'] } }
    ]
  }
})

export const Name = Type.String({ minLength: 1, maxLength: 100, description: 'shown in the app and in failure e-mails' })
export const Description = Type.Optional(Type.String({ maxLength: 1000, description: 'tells the language model when to use the tool' }))
export const TimeZone = Type.String({ format: 'time-zone', description: 'IANA time zone such as Europe/Berlin' })
export const Minutes = (min: number, max: number, description: string) => Type.Integer({ minimum: min, maximum: max, description })
export const Headers = Type.Record(Type.String(), Type.String({ maxLength: 4000 }), {
  [COMPONENT]: 'RequestHeaders',
  maxProperties: 50,
  description: 'sent with every request; values are write-only: answers show `********`, and a PATCH that sends `********` keeps the stored value'
})

/** An HTTP request shaped with the call's {{variables}}: an api_call action's, and a workflow's API call step's. */
export const RequestMembers = {
  url: Type.String({ format: 'http-url-template', maxLength: 2000 }),
  method: Type.Optional(Type.Union([Type.Literal('GET'), Type.Literal('POST'), Type.Literal('PUT'), Type.Literal('PATCH'), Type.Literal('DELETE')], { description: 'default POST' })),
  headers: Type.Optional(Headers),
  query: Type.Optional(Type.Record(Type.String(), Type.String({ maxLength: 2000 }), { maxProperties: 50, description: 'query parameters; {{variables}} allowed' })),
  body: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'JSON body (query string for GET and DELETE); a value that is exactly one {{variable}} keeps its type. During the call, an empty body sends the model\'s arguments' })),
  timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 30, description: 'during the call: how long the model waits for the answer (default 10)' })),
  send_only_custom_fields: Type.Optional(Type.Boolean({ description: 'after the call: send only `query` and `body`, without the call payload (default false)' }))
}

/** How a phone call is put through to a number (call_forwarding, agent_transfer to a number). */
export const Dialling = {
  timeout_seconds: Type.Optional(Type.Integer({ minimum: 5, maximum: 120, description: 'how long the number rings before the agent takes the call back (default 30)' })),
  show_caller_number: Type.Optional(Type.Boolean({ description: "show the caller's number to the person called (default false: the agent's number)" }))
}

/** When an action acts. */
export const When = Type.Optional(Type.Union([Type.Literal('after_call'), Type.Literal('during_call'), Type.Literal('both')], {
  description: 'when the action acts: after the call (`after_call`, the default: once the call has been analysed, as a post-call delivery), during the call (`during_call`: a function the agent may use while it talks), or `both`'
}))

/** How an action's post-call deliveries are sent: the same members for every channel (one outbox, one schedule). */
export const DeliveryMembers = {
  retry_schedule: Type.Optional(Type.Array(Type.Integer({ minimum: 60, maximum: 604_800 }), {
    maxItems: 10,
    description: 'after the call: pauses in seconds before each retry; absent: the default 8-attempt schedule; [] : one send, no retries'
  })),
  notify: Type.Optional(Type.Union([Type.Literal('last_attempt'), Type.Literal('every_attempt'), Type.Literal('never')], { description: 'failure e-mails (default last_attempt)' })),
  notify_email: Type.Optional(Type.Union([Email, Type.Null()], { description: 'recipient of failure e-mails; null: the account owner' })),
  condition: Type.Optional(Type.Union([Type.String({ maxLength: 1000 }), Type.Null()], { description: 'after the call: plain-language condition that selects the calls to deliver, judged by the call analysis (ANALYSER=openai); null, or not judged: every call' }))
}

export const DeliveryOptions = Type.Object(DeliveryMembers)

/** What answers show instead of a stored header value. */
export const MASK = '********'

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
 * owner). `member` is the type's credentialsUrl; `settings` the merged result; `stored` what was there before.
 */
export function movesOrigin (member: string | undefined, stored: Settings, settings: Settings): boolean {
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
