import { Type, type Static, type TSchema } from 'typebox'
import { ID_PATTERN } from '../db/ids.ts'
import { ErrorResponse } from './errors.ts'

/** Schema keyword that lower-cases a valid string in place (ids: stored lowercase, accepted in either case). */
export const LOWERCASE = 'x-lowercase'

/**
 * Schema keyword naming a schema in the OpenAPI document: every occurrence becomes a `$ref` to
 * `components.schemas.<name>` (openapi.ts). Validation and serialisation ignore it (Ajv runs with `strict: false`,
 * fast-json-stringify with `strictSchema: false`).
 */
export const COMPONENT = 'x-component'

/** Accepted in either case and lower-cased by validation, as ids are stored. */
export const ObjectId = Type.String({ pattern: ID_PATTERN, [LOWERCASE]: true, [COMPONENT]: 'ObjectId', description: '24-character hexadecimal id', examples: ['65a0f0000000000000000001'] })

export const IdParams = Type.Object({ id: ObjectId })

export const E164_PATTERN = '^\\+[1-9][0-9]{1,14}$'

export const E164 = Type.String({ pattern: E164_PATTERN, [COMPONENT]: 'E164PhoneNumber', description: 'E.164: "+", the country code and the number, at most 15 digits', examples: ['+14155550123'] })

// A call's kind, direction and status: shared by the calls and the contacts (a contact's calls).
export const CallType = Type.Union([Type.Literal('phone'), Type.Literal('web')], { [COMPONENT]: 'CallType' })
export const Direction = Type.Union([Type.Literal('inbound'), Type.Literal('outbound')], { [COMPONENT]: 'CallDirection' })
export const CallStatus = Type.Union([Type.Literal('started'), Type.Literal('pending'), Type.Literal('success'), Type.Literal('failed')], { [COMPONENT]: 'CallStatus' })

// As the server accepts e-mail addresses everywhere (BOOTSTRAP_EMAIL, the console): its own default owner@localhost included.
export const EMAIL_PATTERN = '^[^\\s@]+@[^\\s@]+$'

export const Email = Type.String({ pattern: EMAIL_PATTERN, [COMPONENT]: 'Email', maxLength: 254, description: 'an e-mail address', examples: ['ada@example.com'] })

/** The last instant a JavaScript Date holds: an input time beyond it cannot even be compared. */
export const MAX_EPOCH_MS = 8_640_000_000_000_000

/** Epoch milliseconds, as every time in the API is given. */
export const EpochMs = Type.Integer({ description: 'epoch ms' })

/**
 * Listing window. A limit over 1000 is refused rather than silently cut; a skip must stay an exact integer
 * (`1e21` would reach PostgreSQL as text it cannot read).
 */
export const Paging = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
  skip: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 }))
}

/** A filter that takes several values: `?k=a&k=b` or `?k=a,b` (see validation.ts). */
export function ListOf<T extends TSchema> (item: T, description?: string) {
  return Type.Array(item, { minItems: 1, description: `${description ?? 'values'}; repeat the key or separate values with commas` })
}

/**
 * A cross-field rule that Ajv cannot enforce without breaking (with removeAdditional 'all' a branch with
 * `properties` strips the other branches' fields): `{ [CHECKED_IN_HANDLER]: { oneOf: [...] } }` in a schema's
 * options. Validation ignores it and the handler enforces it; the OpenAPI document shows it as the plain keyword.
 */
export const CHECKED_IN_HANDLER = 'x-checked-in-handler'

/**
 * Schemas added to the app by their `$id` (see openapi.ts): the OpenAPI document names them in
 * `components.schemas` and routes point at them with `ref`. A schema with an `$id` must never be inlined
 * twice into one route schema (Ajv: "resolves to more than one schema").
 */
export const SHARED_SCHEMAS: TSchema[] = [ErrorResponse]

/** A `$ref` to a shared schema, typed as the schema itself. */
export function ref<T extends TSchema & { $id: string }> (schema: T, options: { description?: string } = {}) {
  return Type.Unsafe<Static<T>>({ $ref: schema.$id, ...options })
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Malformed id or invalid input',
  401: 'API key missing',
  403: 'API key unknown or revoked',
  404: 'Not found or not owned by the caller',
  409: 'Conflict with the current state',
  502: 'The carrier failed or refused the request',
  413: 'Payload too large',
  415: 'Unsupported media type',
  422: 'Request does not match an earlier one, or cannot be carried out as stored',
  429: 'Too many requests; retry after the `retry-after` header',
  503: 'The database is unreachable or busy; retry later'
}

/** Response schemas for the error statuses a route answers, so OpenAPI lists them and `reply.code` type-checks. */
export function errors<const S extends number> (...statuses: S[]): Record<S, ErrorSchema> {
  const out = {} as Record<S, ErrorSchema>
  for (const status of statuses) out[status] = errorSchema(status)
  return out
}

export const errorSchema = (status: number) => ref(ErrorResponse as typeof ErrorResponse & { $id: string }, { description: STATUS_TEXT[status] ?? 'Error' })
type ErrorSchema = ReturnType<typeof errorSchema>

/** The statuses every authenticated route can answer. */
export const AUTH_ERRORS = [400, 401, 403] as const

/** A value or null; `description` documents the member. */
export const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T, description?: string) =>
  Type.Union([schema, Type.Null()], description === undefined ? {} : { description })

/** The customer and workspace a new record belongs to (query of POST /v1/agent, knowledge bases, template clones). */
export const OwnerQuery = Type.Object({
  customer_id: Type.Optional(ObjectId),
  workspace_id: Type.Optional(ObjectId)
})
