import type { FastifyContextConfig, FastifyReply } from 'fastify'
import { Type, type TObject, type TSchema } from 'typebox'
import { ID_PATTERN } from '../../db/ids.ts'
import { E164_PATTERN, ObjectId } from '../../http/schemas.ts'
import type { AjvIssue } from '../../http/errors.ts'
import { KEYLESS } from '../../http/rate-limit.ts'

// What every console route shares.

/** Console routes are pages, not API: they stay out of the OpenAPI document. */
export const HIDDEN = { schema: { hide: true } }

/** A page reached without a session whose token or password costs a lookup: limited per client address first. */
export const HIDDEN_KEYLESS = { ...HIDDEN, config: KEYLESS }

/** A record id in a console URL or form (either case, as the API takes it). */
export const ID = new RegExp(ID_PATTERN)

/** The parts of a request a page reads, each a TypeBox object: checked by the route before its handler runs. */
export interface PageInput {
  /** The address's ids (idParams). */
  params?: TObject
  /** The query string; default: none (whatever is there is dropped). */
  querystring?: TObject
  /** A form's fields (formBody): strings, as the console's form parser gives them. */
  body?: TObject
}

/**
 * A console route's options: its schema, hidden from OpenAPI, checks the address's ids, the query and the form as
 * the API's routes check theirs, before the handler. A failure is a page in words (schemaProblem below, shown by
 * routes.ts's error handler); a bad id in the address is the 404 page. Each part lists every field the page reads:
 * unknown ones are dropped, so a page that reads no query gets none.
 */
export function page (input: PageInput = {}, options: { bodyLimit?: number, config?: FastifyContextConfig } = {}) {
  return { schema: { hide: true, querystring: NO_QUERY, ...input }, ...options }
}

const NO_QUERY = Type.Object({})

/** Params of ids, by name: `idParams('id', 'itemId')` (either case, lower-cased as the API does). */
export function idParams<K extends string> (...names: K[]): TObject<Record<K, typeof ObjectId>> {
  return Type.Object(Object.fromEntries(names.map((name) => [name, ObjectId])) as Record<K, typeof ObjectId>)
}

/** A form's body: its fields plus the CSRF token (which the console's preHandler checks, answering a 403 in words). */
export const formBody = <P extends Record<string, TSchema>>(fields: P) => Type.Object({ csrf_token: Type.Optional(Type.String()), ...fields })

/** An optional text field or query parameter; `title` is how a refusal names it ("The search"). */
export const text = (title: string, options: { maxLength?: number, minLength?: number } = {}) => Type.Optional(Type.String({ title, ...options }))

/**
 * A list's filter: a text, or several when repeated, which the list's own parser refuses on the page, beside the
 * filter bar that corrects it (deliveries.ts, appointments.ts).
 */
export const listFilter = (title: string) => Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { title }))

/** An optional whole number in a query (a list's `skip`). */
export const count = (title: string, maximum = Number.MAX_SAFE_INTEGER) => Type.Optional(Type.Integer({ title, minimum: 0, maximum }))

/** A route schema's refusal in words: the status (a bad id in the address is a 404) and the sentence to show. */
export function schemaProblem (context: string | undefined, issues: AjvIssue[], schema: Record<string, unknown> | undefined, input: unknown): { status: number, message: string } {
  if (context === 'params') return { status: 404, message: NOT_FOUND_TEXT }
  const issue = issues.find((one) => one.keyword !== 'anyOf') ?? issues[0]
  const path = issue.instancePath.split('/').filter(Boolean)
  if (issue.keyword === 'required') path.push(String(issue.params.missingProperty))
  const name = path[0] ?? ''
  const property = (schema?.[context ?? ''] as { properties?: Record<string, { title?: string }> } | undefined)?.properties?.[name]
  const label = property?.title ?? `“${name.replace(/_/g, ' ')}”`
  const value = (input as Record<string, unknown> | undefined)?.[name]
  const where = context === 'body' ? 'Go back to the form, correct it and send it again.' : 'Check the address (the link may be mistyped or out of date).'
  const limit = Number(issue.params.limit)
  const sentence = (() => {
    if (Array.isArray(value) && issue.keyword === 'type') return `${label} was given more than once.`
    switch (issue.keyword) {
      case 'required': return `${label} is missing.`
      case 'maxLength': return `${label} may be at most ${limit} characters long.`
      case 'minLength': return limit === 1 ? `${label} must not be empty.` : `${label} must be at least ${limit} characters long.`
      case 'minimum': return `${label} must be at least ${limit}.`
      case 'maximum': return `${label} must be at most ${limit}.`
      case 'type': return issue.params.type === 'integer' || issue.params.type === 'number' ? `${label} must be a number.` : `${label} must be a single text.`
      case 'const': case 'enum': case 'anyOf': return `${label} is not one of the choices offered.`
      case 'maxItems': return `${label} was given more than ${limit} times.`
      case 'pattern': {
        const pattern = String(issue.params.pattern)
        if (pattern === ID_PATTERN) return `${label} is not a valid id.`
        if (pattern === E164_PATTERN) return `${label} must be a phone number with its country code, such as +14155550123.`
        return `${label} is not in the expected form.`
      }
      case 'format': return `${label} is not a valid ${issue.params.format === 'email' ? 'e-mail address' : String(issue.params.format).includes('url') ? 'web address' : 'value'}.`
      default: return `${label} is not valid.`
    }
  })()
  return { status: 400, message: `${sentence.charAt(0).toUpperCase()}${sentence.slice(1)} ${where}` }
}

/** What the 404 page says. */
export const NOT_FOUND_TEXT = 'There is no page at this address: the link may be mistyped or out of date.'

export const sendPage = (reply: FastifyReply, status: number, page: string): FastifyReply =>
  reply.code(status).type('text/html; charset=utf-8').send(page)

/** The query string of a list's filters (only those set) at `skip`: the list's paging links. */
export function listQuery<F extends string> (filters: Record<F, string>, names: readonly F[], skip: number): string {
  const params = new URLSearchParams()
  for (const name of names) if (filters[name] !== '') params.set(name, filters[name])
  if (skip > 0) params.set('skip', String(skip))
  const query = params.toString()
  return query === '' ? '' : `?${query}`
}

/** A list's agents for its filter select, plus the chosen id when it is not among them (a deleted agent's filter). */
export function withChosen (agents: Array<{ id: string, name: string }>, chosen: string): Array<{ id: string, name: string }> {
  return chosen === '' || agents.some((agent) => agent.id === chosen) ? agents : [...agents, { id: chosen, name: chosen }]
}

/**
 * The body of a form whose field names are built as it is filled in (rows of a list: `expectations.0.kind`, a
 * workflow step's `transitions.1.to`): every field is kept and must be text; the handler reads the names it knows.
 */
export const openFormBody = () => Type.Object({}, { patternProperties: { '^.*$': { type: 'string' } } })
