import { Ajv, type Options, type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import type { FastifyInstance, RouteOptions } from 'fastify'
import type { TSchema } from 'typebox'
import { SHARED_SCHEMAS } from './schemas.ts'

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
  return instance
}

const BODY_OPTIONS: Options = { removeAdditional: 'all', coerceTypes: false }
let handlerBodies: Ajv | undefined

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
  const body = ajv(BODY_OPTIONS)
  const query = ajv({ removeAdditional: 'all', coerceTypes: 'array' })
  const headers = ajv({ removeAdditional: false, coerceTypes: false })
  app.setValidatorCompiler(({ schema, httpPart, contentType }) => {
    // A multipart body is streamed by its route, which checks every part itself; its schema documents the form.
    if (httpPart === 'body' && contentType === 'multipart/form-data') return () => true
    const compiler = httpPart === 'body' ? body : httpPart === 'headers' ? headers : query
    return compiler.compile(schema)
  })
  app.addHook('onRoute', splitCommaLists)
}

/** `?k=a,b` means the same as `?k=a&k=b` for every query property whose schema is an array. */
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
      query[key] = [value].flat().flatMap((item) => item.split(',')).map((item) => item.trim()).filter((item) => item !== '')
    }
  }
  route.preValidation = [split, ...[route.preValidation ?? []].flat()]
}
