import type { FastifyError, FastifyInstance } from 'fastify'
import { Type } from 'typebox'

/** An error whose status, code and message are meant for the client. */
export class HttpError extends Error {
  readonly statusCode: number
  readonly code: string

  constructor (statusCode: number, code: string, message: string) {
    super(message)
    this.statusCode = statusCode
    this.code = code
  }
}

export const notFound = (what: string) => new HttpError(404, 'not_found', `${what} not found`)
export const badRequest = (message: string, code = 'bad_request') => new HttpError(400, code, message)
export const conflict = (message: string, code = 'conflict') => new HttpError(409, code, message)

/** PostgreSQL error codes this server maps to client errors. */
export const PG = {
  UNIQUE_VIOLATION: '23505',
  FOREIGN_KEY_VIOLATION: '23503',
  INVALID_TEXT_REPRESENTATION: '22P02'
} as const

export const ErrorResponse = Type.Object({
  statusCode: Type.Integer(),
  error: Type.String(),
  message: Type.String(),
  code: Type.String()
}, { description: 'Every error answers this shape; `code` is stable, `message` is for people.' })

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

const DEFAULT_CODES: Record<number, string> = {
  400: 'bad_request',
  404: 'not_found',
  405: 'method_not_allowed',
  406: 'not_acceptable',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'too_many_requests'
}

export interface AjvIssue { instancePath: string, keyword: string, message?: string, params: Record<string, unknown> }

const FORMAT_TEXT: Record<string, string> = {
  email: 'an e-mail address',
  'http-url': 'an absolute http:// or https:// URL',
  'http-url-template': 'an absolute http:// or https:// URL ({{variables}} allowed)',
  'language-tag': 'a BCP-47 language tag such as en-US',
  'time-zone': 'an IANA time zone such as Europe/Berlin'
}

// Patterns whose Ajv message ("must match pattern …") would leave a person guessing.
const PATTERN_MEANINGS: Array<{ matches: (pattern: string) => boolean, meaning: string, code: string }> = [
  { matches: (pattern) => pattern.endsWith('{24}$'), meaning: 'a 24-character hexadecimal id', code: 'invalid_id' },
  { matches: (pattern) => pattern.startsWith('^\\+[1-9]'), meaning: 'an E.164 phone number such as +14155550123', code: 'validation_error' }
]

/** Names the offending field: `body.call_settings.language must be string`. */
function validationMessage (context: string | undefined, issue: AjvIssue): { message: string, code: string } {
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

/** A 400 for an Ajv issue found outside route validation; `context` is where the value sat (`body.settings`). */
export function invalidInput (context: string, issue: AjvIssue): HttpError {
  const { message, code } = validationMessage(context, issue)
  return new HttpError(400, code, message)
}

export function errorBody (statusCode: number, code: string, message: string) {
  return { statusCode, error: REASONS[statusCode] ?? 'Error', message, code }
}

/** The one place errors become responses. 5xx text is never shown; it is logged with the request id. */
export function registerErrorHandler (app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | HttpError, request, reply) => {
    if (err instanceof HttpError) {
      return reply.code(err.statusCode).send(errorBody(err.statusCode, err.code, err.message))
    }
    const fastifyErr = err as FastifyError & { validation?: AjvIssue[] }
    if (fastifyErr.validation !== undefined && fastifyErr.validation.length > 0) {
      const { message, code } = validationMessage(fastifyErr.validationContext, fastifyErr.validation[0])
      return reply.code(400).send(errorBody(400, code, message))
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
    request.log.error({ err }, 'request failed')
    return reply.code(status).send(errorBody(status, 'internal_error', 'Internal error; it was logged with request id ' + request.id))
  })

  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send(errorBody(404, 'route_not_found', `no route ${request.method} ${request.url.split('?')[0]}`))
  })
}
