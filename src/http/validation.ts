import { Ajv, type Options, type ValidateFunction } from 'ajv'
import SerializerSelector from '@fastify/fast-json-stringify-compiler'
import addFormats from 'ajv-formats'
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify'
import type { TSchema } from 'typebox'
import { LOWERCASE, SHARED_SCHEMAS } from './schemas.ts'
import { HttpError } from './errors.ts'

/** Formats the route schemas name beyond ajv-formats'. */
const FORMATS: Record<string, (value: string) => boolean> = {
  /** An absolute http(s) URL with a host. */
  'http-url': (value) => isHttpUrl(value),
  /** The same, where `{{variable}}` placeholders may stand anywhere (filled in before sending). */
  'http-url-template': (value) => isHttpUrl(value.replace(/\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\}/g, 'x')),
  /** A BCP-47 language tag such as en, en-US or zh-Hant-TW. */
  'language-tag': (value) => /^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$/.test(value) && canonicalLocale(value),
  /** An IANA time zone such as Europe/Berlin. */
  'time-zone': (value) => TIME_ZONES.has(value) || value === 'UTC'
}

/** Those formats as known-but-unchecked for the answers' serializer: response schemas name them (a workflow's URL), and answers are the server's own. */
export const SERIALIZER_FORMATS: Record<string, true> = Object.fromEntries(Object.keys(FORMATS).map((name) => [name, true]))

const TIME_ZONES = new Set(Intl.supportedValuesOf('timeZone'))

function isHttpUrl (value: string): boolean {
  if (!/^https?:\/\//i.test(value)) return false
  try {
    return new URL(value).hostname !== ''
  } catch {
    return false
  }
}

function canonicalLocale (value: string): boolean {
  try {
    return Intl.getCanonicalLocales(value).length === 1
  } catch {
    return false
  }
}

function ajv (options: Options): Ajv {
  const instance = new Ajv({ allErrors: false, useDefaults: true, discriminator: true, strict: false, ...options })
  addFormats.default(instance)
  for (const [name, validate] of Object.entries(FORMATS)) instance.addFormat(name, { type: 'string', validate })
  for (const schema of SHARED_SCHEMAS) instance.addSchema(schema)
  instance.addKeyword({
    keyword: LOWERCASE,
    type: 'string',
    modifying: true,
    validate: (_schema: unknown, data: string, _parent: unknown, where?: { parentData: Record<string | number, unknown>, parentDataProperty: string | number }) => {
      if (where?.parentData !== undefined) where.parentData[where.parentDataProperty] = data.toLowerCase()
      return true
    }
  })
  return instance
}

/** How deeply a JSON body may nest: far beyond any schema here, far below what recursion anywhere minds. */
export const MAX_JSON_DEPTH = 64

/** PostgreSQL stores neither NUL nor half a surrogate pair, in text or in jsonb. */
export const storable = (text: string) => text.isWellFormed() && !text.includes('\0')

const invalidText = (field: string, what = 'must not contain') =>
  new HttpError(400, 'invalid_text', `${field} ${what} NUL characters or unpaired surrogates`)

/** A 400 naming `field` unless `text` can be stored (for values read outside route validation, e.g. multipart fields). */
export function checkText (text: string, field: string): string {
  if (!storable(text)) throw invalidText(field)
  return text
}

/**
 * Checks every string and key of one part of the input (`body`, `query`, `params`) and its depth; throws a
 * 400 naming the first bad field. The path is joined only then: a large body costs no strings.
 */
function checkInput (input: unknown, part: string): void {
  const path: Array<string | number> = [part]
  const walk = (value: unknown): void => {
    if (typeof value === 'string') {
      if (!storable(value)) throw invalidText(path.join('.'))
      return
    }
    if (value === null || typeof value !== 'object') return
    if (path.length > MAX_JSON_DEPTH) throw new HttpError(400, 'json_too_deep', `${path.slice(0, 2).join('.')} nests deeper than ${MAX_JSON_DEPTH} levels`)
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        path.push(i)
        walk(value[i])
        path.pop()
      }
      return
    }
    for (const [key, item] of Object.entries(value)) {
      if (!storable(key)) throw invalidText(path.join('.'), 'has a property name with')
      path.push(key)
      walk(item)
      path.pop()
    }
  }
  walk(input)
}

/**
 * The one JSON body parser: Fastify's own (with its prototype-poisoning rules), then every string and the
 * depth checked, so that no route can hand PostgreSQL text it refuses or recurse on a hostile body.
 */
function registerJsonParser (app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser(app.initialConfig.onProtoPoisoning ?? 'error', app.initialConfig.onConstructorPoisoning ?? 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    parse(request, body as string, (err: Error | null, value?: unknown) => {
      if (err !== null) return done(err)
      try {
        checkInput(value, 'body')
      } catch (invalid) {
        return done(invalid as Error)
      }
      done(null, value)
    })
  })
}

/** Query strings and path parameters get the same check as bodies (fastify decodes %00 into a NUL). */
async function checkQueryAndParams (request: FastifyRequest): Promise<void> {
  checkInput(request.query, 'query')
  checkInput(request.params, 'params')
}

const BODY_OPTIONS: Options = { removeAdditional: 'all', coerceTypes: false }
let handlerBodies: Ajv | undefined
let routeCompilers: { body: Ajv, query: Ajv, headers: Ajv } | undefined
const validators = new Map<string, ValidateFunction>()

function kept<T> (cache: Map<string, T>, key: string, make: () => T): T {
  let made = cache.get(key)
  if (made === undefined) {
    made = make()
    cache.set(key, made)
  }
  return made
}

/**
 * A validator for part of a body that a route can only check once it knows more (a PATCH of settings
 * whose shape depends on the stored type). Same rules as route bodies: unknown properties are dropped.
 */
export function compileBodySchema (schema: TSchema): ValidateFunction {
  handlerBodies ??= ajv(BODY_OPTIONS)
  return handlerBodies.compile(schema)
}

/**
 * One validator per request part. Bodies drop unknown properties but keep their types ("5" stays a
 * string); query strings and params also coerce ("5" -> 5, "a" -> ["a"]); headers are neither stripped
 * nor coerced, so a header schema never deletes the headers it does not name (x-api-key among them).
 */
export function registerValidation (app: FastifyInstance): void {
  // One set per process, each validator kept by its schema's text: compiling is most of an app's start, and a
  // second app (the tests build hundreds) has the same schemas, though often as new objects.
  routeCompilers ??= {
    body: ajv(BODY_OPTIONS),
    query: ajv({ removeAdditional: 'all', coerceTypes: 'array' }),
    headers: ajv({ removeAdditional: false, coerceTypes: false })
  }
  const { body, query, headers } = routeCompilers
  app.setValidatorCompiler(({ schema, httpPart, contentType }) => {
    // A multipart body is streamed by its route, which checks every part itself; its schema documents the form.
    if (httpPart === 'body' && contentType === 'multipart/form-data') return () => true
    const compiler = httpPart === 'body' ? body : httpPart === 'headers' ? headers : query
    return kept(validators, `${httpPart === 'body' ? 'body' : httpPart === 'headers' ? 'headers' : 'query'} ${JSON.stringify(schema)}`, () => compiler.compile(schema))
  })
  app.addHook('onRoute', splitCommaLists)
  registerJsonParser(app)
  app.addHook('preValidation', checkQueryAndParams)
}

/**
 * `?k=a,b` means the same as `?k=a&k=b` for every query property whose schema is an array. Empty items are
 * dropped; a list left empty (`?k=`) is refused, as it would filter on nothing (`IN ()`) or be ignored.
 */
function splitCommaLists (route: RouteOptions): void {
  const properties = (route.schema?.querystring as { properties?: Record<string, { type?: string }> } | undefined)?.properties
  if (properties === undefined) return
  const lists = Object.keys(properties).filter((key) => properties[key].type === 'array')
  if (lists.length === 0) return
  const split = async (request: { query: unknown }) => {
    const query = request.query as Record<string, string | string[] | undefined>
    for (const key of lists) {
      const value = query[key]
      if (value === undefined) continue
      const items = [value].flat().flatMap((item) => item.split(',')).map((item) => item.trim()).filter((item) => item !== '')
      if (items.length === 0) throw new HttpError(400, 'validation_error', `query.${key} must name at least one value`)
      query[key] = items
    }
  }
  route.preValidation = [split, ...[route.preValidation ?? []].flat()]
}

const buildSerializers = SerializerSelector()
const serializers = new Map<string, SerializerSelector.Serializer>()

/**
 * Fastify's own answer serializers (fast-json-stringify), kept per response schema's text for the process, as
 * the validators are: every app here names the same external schemas (SHARED_SCHEMAS) and options.
 */
export function cachedSerializers (externalSchemas?: unknown, options?: SerializerSelector.Options): SerializerSelector.SerializerCompiler {
  const compile = buildSerializers(externalSchemas, options)
  return (route) => kept(serializers, JSON.stringify(route.schema) ?? '', () => compile(route))
}
