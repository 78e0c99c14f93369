import { Ajv, type Options } from 'ajv'
import addFormats from 'ajv-formats'
import type { FastifyInstance, RouteOptions } from 'fastify'

function ajv (options: Options): Ajv {
  const instance = new Ajv({ allErrors: false, useDefaults: true, discriminator: true, strict: false, ...options })
  addFormats.default(instance)
  return instance
}

/**
 * One validator per request part. Bodies drop unknown properties but keep their types ("5" stays a
 * string); query strings and params also coerce ("5" -> 5, "a" -> ["a"]); headers are neither stripped
 * nor coerced, so a header schema never deletes the headers it does not name (x-api-key among them).
 */
export function registerValidation (app: FastifyInstance): void {
  const body = ajv({ removeAdditional: 'all', coerceTypes: false })
  const query = ajv({ removeAdditional: 'all', coerceTypes: 'array' })
  const headers = ajv({ removeAdditional: false, coerceTypes: false })
  app.setValidatorCompiler(({ schema, httpPart }) => {
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
