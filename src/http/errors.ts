import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import pg from 'pg'
import { Type } from 'typebox'

/** Every `code` an error answer can carry (docs/errors.md says when); the OpenAPI document lists them as an enum. */
export const ERROR_CODES = [
  'validation_error', 'invalid_id', 'bad_request', 'invalid_text', 'json_too_deep', 'invalid_value', 'out_of_range', 'invalid_action_url', 'invalid_workflow', 'malformed_multipart', 'empty_file', 'unexpected_file_field', 'invalid_file_name',
  'carrier_credentials_required', 'carrier_rejected', 'carrier_credentials_rejected', 'carrier_disabled', 'invalid_sender',
  'missing_api_key', 'invalid_api_key', 'invalid_access_token', 'invalid_recording_link', 'recording_link_expired', 'invalid_signature', 'forbidden',
  'not_found', 'route_not_found', 'method_not_allowed', 'not_acceptable',
  'conflict', 'key_limit_reached', 'action_limit_reached', 'tool_limit_reached', 'llm_in_use', 'sender_not_available', 'integration_not_connected', 'customer_in_use', 'workspace_in_use', 'member_is_owner',
  'test_limit_reached', 'test_run_busy', 'message_required', 'do_not_call', 'dnc_limit_reached',
  'number_taken', 'number_unavailable', 'webhooks_unreachable', 'agent_inactive', 'no_inbound_agent', 'call_not_started', 'web_call_ended', 'not_a_voice_call', 'recording_not_stereo', 'origin_not_allowed', 'delivery_purged',
  'payload_too_large', 'file_too_large', 'too_many_files', 'too_many_fields',
  'unsupported_media_type', 'unsupported_file_type', 'multipart_required',
  'idempotency_key_reused', 'range_not_satisfiable', 'rate_limited', 'too_many_concurrent_uploads', 'too_many_concurrent_exports',
  'too_many_concurrent_downloads', 'too_many_pending_streams',
  'missing_widget_key', 'invalid_widget_key', 'widget_disabled', 'widget_origins_required', 'widget_rate_limited',
  'sip_credentials_required', 'sip_not_connected',
  'internal_error', 'carrier_error', 'unavailable', 'uploads_busy', 'exports_busy', 'downloads_busy', 'streams_busy',
  'integration_not_configured', 'auth_method_not_offered', 'integration_rejected', 'integration_unavailable',
  'invalid_csv', 'too_many_rows', 'no_valid_contacts', 'campaign_finished'
] as const

export type ErrorCode = typeof ERROR_CODES[number]

/** An error whose status, code and message are meant for the client. */
export class HttpError extends Error {
  readonly statusCode: number
  readonly code: ErrorCode

  constructor (statusCode: number, code: ErrorCode, message: string) {
    super(message)
    this.statusCode = statusCode
    this.code = code
  }
}

export const notFound = (what: string) => new HttpError(404, 'not_found', `${what} not found`)
export const badRequest = (message: string, code: ErrorCode = 'bad_request') => new HttpError(400, code, message)
export const conflict = (message: string, code: ErrorCode = 'conflict') => new HttpError(409, code, message)

/** PostgreSQL error codes this server maps to client errors. */
export const PG = {
  UNIQUE_VIOLATION: '23505',
  FOREIGN_KEY_VIOLATION: '23503',
  CHECK_VIOLATION: '23514',
  EXCLUSION_VIOLATION: '23P01',
  INVALID_TEXT_REPRESENTATION: '22P02',
  CHARACTER_NOT_IN_REPERTOIRE: '22021',
  UNTRANSLATABLE_CHARACTER: '22P05',
  NUMERIC_VALUE_OUT_OF_RANGE: '22003',
  DATETIME_FIELD_OVERFLOW: '22008'
} as const

/**
 * What the error handler answers for a database error that no route turned into a clearer one: the input
 * got past validation, yet it is the client's. The message is ours; PostgreSQL's detail names tables and
 * values and is never shown.
 */
const PG_CLIENT_ERRORS: Record<string, { status: number, code: ErrorCode, message: string }> = {
  [PG.UNIQUE_VIOLATION]: { status: 409, code: 'conflict', message: 'a record with these values exists already' },
  // Either a referenced record is missing or a record is still referenced: both contradict stored state.
  [PG.FOREIGN_KEY_VIOLATION]: { status: 409, code: 'conflict', message: 'the request refers to a record that does not exist, or one that other records still refer to' },
  [PG.CHECK_VIOLATION]: { status: 400, code: 'invalid_value', message: 'a value is outside what its field accepts' },
  [PG.INVALID_TEXT_REPRESENTATION]: { status: 400, code: 'invalid_value', message: 'a value could not be read as its field\'s type' },
  [PG.CHARACTER_NOT_IN_REPERTOIRE]: { status: 400, code: 'invalid_text', message: 'a text contains characters that cannot be stored' },
  [PG.UNTRANSLATABLE_CHARACTER]: { status: 400, code: 'invalid_text', message: 'a text contains characters that cannot be stored' },
  [PG.NUMERIC_VALUE_OUT_OF_RANGE]: { status: 400, code: 'out_of_range', message: 'a number is out of range' },
  [PG.DATETIME_FIELD_OVERFLOW]: { status: 400, code: 'out_of_range', message: 'a date or time is out of range' }
}

const pgClientError = (err: unknown) => err instanceof pg.DatabaseError && err.code !== undefined ? PG_CLIENT_ERRORS[err.code] : undefined

/** Connection failures (refused, reset, unknown host) and PostgreSQL's own "cannot connect now" classes 08 and 57P. */
function databaseUnreachable (err: unknown): boolean {
  const code = (err as { code?: unknown }).code
  if (typeof code !== 'string') return false
  return ['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH'].includes(code) || code.startsWith('08') || code.startsWith('57P')
}

export const ErrorResponse = Type.Object({
  statusCode: Type.Integer({ minimum: 400, maximum: 599 }),
  error: Type.String(),
  message: Type.String(),
  code: Type.Enum(ERROR_CODES)
}, { $id: 'Error', description: 'Every error answers this shape; `code` is stable, `message` is for people.' })

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable'
}

const DEFAULT_CODES: Record<number, ErrorCode> = {
  400: 'bad_request',
  404: 'not_found',
  405: 'method_not_allowed',
  406: 'not_acceptable',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited'
}

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const

export interface AjvIssue { instancePath: string, keyword: string, message?: string, params: Record<string, unknown> }

const FORMAT_TEXT: Record<string, string> = {
  email: 'an e-mail address',
  'http-url': 'an absolute http:// or https:// URL',
  'http-url-template': 'an absolute http:// or https:// URL ({{variables}} allowed)',
  'language-tag': 'a BCP-47 language tag such as en-US',
  'time-zone': 'an IANA time zone such as Europe/Berlin'
}

// Patterns whose Ajv message ("must match pattern …") would leave a person guessing.
const PATTERN_MEANINGS: Array<{ matches: (pattern: string) => boolean, meaning: string, code: ErrorCode }> = [
  { matches: (pattern) => pattern.endsWith('{24}$'), meaning: 'a 24-character hexadecimal id', code: 'invalid_id' },
  { matches: (pattern) => pattern.startsWith('^\\+[1-9]'), meaning: 'an E.164 phone number such as +14155550123', code: 'validation_error' },
  // A display name forbids what would make it read as an address (messaging's FromName); an address pattern has `]+@[`.
  { matches: (pattern) => pattern.includes('@<>"'), meaning: 'a name without @, <, >, " or \\', code: 'validation_error' },
  { matches: (pattern) => pattern.includes(']+@['), meaning: 'an e-mail address', code: 'validation_error' }
]

/** Names the offending field: `body.call_settings.language must be string`. */
function validationMessage (context: string | undefined, issue: AjvIssue): { message: string, code: ErrorCode } {
  const where = [context === 'querystring' ? 'query' : context, ...issue.instancePath.split('/').filter(Boolean)]
  if (issue.keyword === 'required') where.push(String(issue.params.missingProperty))
  const field = where.filter(Boolean).join('.')
  const known = issue.keyword === 'pattern' ? PATTERN_MEANINGS.find((p) => p.matches(String(issue.params.pattern))) : undefined
  if (known !== undefined) return { message: `${field} must be ${known.meaning}`, code: known.code }
  if (issue.keyword === 'required') return { message: `${field} is required`, code: 'validation_error' }
  if (issue.keyword === 'additionalProperties') {
    return { message: `${field} has an unknown property "${String(issue.params.additionalProperty)}"`, code: 'validation_error' }
  }
  if (issue.keyword === 'format' && FORMAT_TEXT[String(issue.params.format)] !== undefined) {
    return { message: `${field} must be ${FORMAT_TEXT[String(issue.params.format)]}`, code: 'validation_error' }
  }
  const detail = issue.keyword === 'enum' ? ` (${(issue.params.allowedValues as unknown[]).join(', ')})` : ''
  return { message: `${field} ${issue.message ?? 'is invalid'}${detail}`, code: 'validation_error' }
}

/** `anyOf: [{ required: [a] }, { required: [b] }]` unmet: "body.a or body.b is required". */
function eitherRequired (context: string | undefined, issues: AjvIssue[]): { message: string, code: ErrorCode } | undefined {
  const last = issues.at(-1)
  if (last?.keyword !== 'anyOf' || issues.length < 3) return undefined
  const branches = issues.slice(0, -1)
  if (!branches.every((issue) => issue.keyword === 'required' && issue.instancePath === last.instancePath)) return undefined
  const fields = branches.map((issue) => validationMessage(context, issue).message.replace(/ is required$/, ''))
  return { message: `${fields.join(' or ')} is required`, code: 'validation_error' }
}

/** A 400 for an Ajv issue found outside route validation; `context` is where the value sat (`body.settings`). */
export function invalidInput (context: string, issue: AjvIssue): HttpError {
  const { message, code } = validationMessage(context, issue)
  return new HttpError(400, code, message)
}

export function errorBody (statusCode: number, code: ErrorCode, message: string) {
  return { statusCode, error: REASONS[statusCode] ?? 'Error', message, code }
}

/**
 * Errors the router meets before any route (Fastify's `frameworkErrors`) answer the same shape: a path segment
 * over 100 characters cannot be an id (400 `invalid_id`, not Fastify's own 414), a malformed %-escape is a 400.
 */
export function frameworkError (err: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    reply.code(400).send(errorBody(400, 'invalid_id', 'a path parameter is longer than 100 characters; ids are 24 hexadecimal characters'))
    return
  }
  reply.code(400).send(errorBody(400, 'bad_request', err.message))
}

/** The page a person's browser gets for an unknown address (the console's 404 page). */
export type NotFoundPage = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>

// Addresses for programs: an unknown one answers the JSON 404 whatever the client accepts.
const API_PATHS = /^\/(v1|telephony)(\/|$)/

/**
 * The one place errors become responses. 5xx text is never shown; it is logged with the request id. An unknown
 * address outside the API asked for as HTML (a browser's address bar or link) gets `notFoundPage` when given.
 */
export function registerErrorHandler (app: FastifyInstance, notFoundPage?: NotFoundPage): void {
  app.setErrorHandler((err: FastifyError | HttpError, request, reply) => {
    // An export that fails before its first byte answers the JSON error, not under its CSV attachment header.
    // (After the first byte Fastify destroys the response: the client sees a cut-off transfer, never a complete file.)
    // A stream's headers sit on the raw response until its first byte; they would turn this JSON into an invalid CSV payload.
    reply.removeHeader('content-disposition')
    if (!reply.raw.headersSent) for (const name of ['content-type', 'content-disposition']) reply.raw.removeHeader(name)
    if (err instanceof HttpError) {
      return reply.code(err.statusCode).send(errorBody(err.statusCode, err.code, err.message))
    }
    const fastifyErr = err as FastifyError & { validation?: AjvIssue[] }
    if (fastifyErr.validation !== undefined && fastifyErr.validation.length > 0) {
      const { message, code } = eitherRequired(fastifyErr.validationContext, fastifyErr.validation) ??
        validationMessage(fastifyErr.validationContext, fastifyErr.validation[0])
      return reply.code(400).send(errorBody(400, code, message))
    }
    const database = pgClientError(err)
    if (database !== undefined) {
      // A 4xx, but one that validation should have given: logged so that it gets a schema.
      request.log.warn({ err }, 'the database refused client input')
      return reply.code(database.status).send(errorBody(database.status, database.code, database.message))
    }
    const status = fastifyErr.statusCode ?? 500
    if (status >= 400 && status < 500) {
      return reply.code(status).send(errorBody(status, DEFAULT_CODES[status] ?? 'bad_request', fastifyErr.message))
    }
    if (status === 503) {
      // Load, not a bug (no pooled connection came free within DATABASE_POOL_WAIT_MS): no stack, and a time to retry.
      request.log.warn({ reason: fastifyErr.message }, 'request refused: the server is busy')
      reply.header('retry-after', '1')
      return reply.code(503).send(errorBody(503, 'unavailable', 'the server is busy; retry in a second'))
    }
    if (databaseUnreachable(err)) {
      // An outage, not a bug in this request: logged once per request without a stack, answered with a time to retry.
      request.log.error({ reason: fastifyErr.message, code: fastifyErr.code }, 'request failed: the database is unreachable')
      reply.header('retry-after', '5')
      return reply.code(503).send(errorBody(503, 'unavailable', 'the database is unreachable; retry in a few seconds'))
    }
    request.log.error({ err }, 'request failed')
    return reply.code(status).send(errorBody(status, 'internal_error', 'Internal error; it was logged with request id ' + request.id))
  })

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]
    const allowed = METHODS.filter((method) => app.findRoute({ method, url: path }) !== null)
    if (allowed.length > 0) {
      return reply.code(405).header('allow', allowed.join(', '))
        .send(errorBody(405, 'method_not_allowed', `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`))
    }
    if (notFoundPage !== undefined && !API_PATHS.test(path) && request.headers.accept?.includes('text/html') === true) return notFoundPage(request, reply)
    return reply.code(404).send(errorBody(404, 'route_not_found', `no route ${request.method} ${path}`))
  })
}
