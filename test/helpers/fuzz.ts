import { Ajv, type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import fc from 'fast-check'

/** A generated value as path text: objects (some without a prototype, so no String()) as their JSON. */
const text = (value: unknown): string => typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value)
import type { FastifyInstance } from 'fastify'

/**
 * Schema-driven fuzzing of every operation of `/openapi.json`: requests generated from the documented
 * parameters and bodies (valid ones, and ones with a field or the whole part replaced by any JSON or text),
 * sent through `app.inject`. An answer fails when it is a 5xx, a status the operation does not declare, or a
 * body outside the declared schema of its status.
 *
 * URLs are generated on 127.0.0.1 only, so that nothing a request stores or tests can reach beyond loopback.
 */

type Schema = Record<string, any>
interface Parameter { name: string, in: 'path' | 'query' | 'header', required?: boolean, schema: Schema }
interface Operation {
  operationId: string
  parameters?: Parameter[]
  requestBody?: { content: Record<string, { schema: Schema }> }
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>
}

export interface FuzzRequest { method: string, url: string, payload?: unknown }
export interface FuzzFailure { operation: string, request: FuzzRequest, status: number, reason: string, body: string }
export interface FuzzReport { operations: number, cases: number, failures: FuzzFailure[] }

export interface FuzzOptions {
  headers: Record<string, string>
  /** Ids of records of the account, used for most id-shaped values so that requests reach real rows. */
  ids: string[]
  runs: number
  seed: number
  /** Operations to leave out, by operationId. */
  skip?: string[]
}

const LOOPBACK_URLS = ['http://127.0.0.1:9/hook', 'https://127.0.0.1:9/a/b?x=1', 'http://127.0.0.1/{{call_id}}']
const TIME_ZONES = ['UTC', 'Europe/Berlin', 'America/New_York']
const LANGUAGES = ['en', 'en-US', 'de-DE', 'zh-Hant-TW']

function resolver (doc: Schema) {
  const components: Record<string, Schema> = doc.components?.schemas ?? {}
  return (schema: Schema): Schema => {
    let out = schema
    while (typeof out?.$ref === 'string') out = { ...components[out.$ref.split('/').pop()!], ...out, $ref: undefined }
    return out
  }
}

/** An arbitrary for values of the schema (valid ones, as far as the generator understands it). */
function arbitraryOf (schema: Schema, deref: (s: Schema) => Schema, ids: string[], depth = 0): fc.Arbitrary<unknown> {
  const s = deref(schema)
  if (s === undefined || depth > 6) return fc.constant(null)
  if (s.const !== undefined) return fc.constant(s.const)
  if (Array.isArray(s.enum)) return fc.constantFrom(...s.enum)
  const branches = s.oneOf ?? (s.type === undefined && s.properties === undefined ? s.anyOf : undefined)
  if (Array.isArray(branches)) return fc.oneof(...branches.map((b: Schema) => arbitraryOf({ ...s, oneOf: undefined, anyOf: undefined, ...b }, deref, ids, depth + 1)))
  if (Array.isArray(s.type)) return fc.oneof(...s.type.map((type: string) => arbitraryOf({ ...s, type }, deref, ids, depth + 1)))
  const type = s.type ?? (s.properties !== undefined ? 'object' : undefined)
  switch (type) {
    case 'null': return fc.constant(null)
    case 'boolean': return fc.boolean()
    case 'integer': return fc.oneof(
      fc.integer({ min: Math.max(s.minimum ?? -1e6, -(2 ** 31)), max: Math.min(s.maximum ?? 1e6, 2 ** 31) }),
      fc.constantFrom(...[s.minimum, s.maximum].filter((v) => typeof v === 'number'), 0)
    )
    case 'number': return fc.double({ min: s.minimum ?? -1e6, max: s.maximum ?? 1e6, noNaN: true, noDefaultInfinity: true })
    case 'string': return stringOf(s, ids)
    case 'array': {
      const items = arbitraryOf(s.items ?? {}, deref, ids, depth + 1)
      const constraints = { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 3, Math.max(s.minItems ?? 0, 3)) }
      return s.uniqueItems === true ? fc.uniqueArray(items, { ...constraints, selector: (v) => JSON.stringify(v) }) : fc.array(items, constraints)
    }
    case 'object': {
      const properties: Record<string, Schema> = s.properties ?? {}
      const record = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, arbitraryOf(v, deref, ids, depth + 1)]))
      return fc.record(record, { requiredKeys: (s.required ?? []).filter((k: string) => k in properties) })
    }
    default: return fc.jsonValue({ maxDepth: 2 })
  }
}

function stringOf (s: Schema, ids: string[]): fc.Arbitrary<string> {
  switch (s.format) {
    case 'date-time': return fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((d) => d.toISOString())
    case 'date': return fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10))
    case 'email': return fc.emailAddress().filter((e) => e.length <= (s.maxLength ?? 254))
    case 'uri': case 'http-url': case 'http-url-template': return fc.constantFrom(...LOOPBACK_URLS)
    case 'language-tag': return fc.constantFrom(...LANGUAGES)
    case 'time-zone': return fc.constantFrom(...TIME_ZONES)
    case 'uuid': return fc.uuid()
  }
  if (typeof s.pattern === 'string') {
    const matching = fc.stringMatching(new RegExp(s.pattern)).filter((v) => v.length >= (s.minLength ?? 0) && v.length <= (s.maxLength ?? Infinity))
    // Id-shaped strings mostly name the account's records.
    return /\{24\}\$$/.test(s.pattern) && ids.length > 0 ? fc.oneof({ arbitrary: fc.constantFrom(...ids), weight: 3 }, matching) : matching
  }
  return fc.string({ minLength: s.minLength ?? 0, maxLength: Math.min(s.maxLength ?? 40, Math.max(s.minLength ?? 0, 40)) })
}

/** Anything a client could send in place of a value: JSON of any type, odd text, edge numbers. */
const junk: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.constantFrom('', ' ', '0', '-1', '1e-50', '1e21', 'null', 'true', '[]', '{}', '../..', '%00', 'ABCDEF0123456789ABCDEF01'),
  fc.constantFrom(1e-50, 1e16, -1, 0, 2 ** 53, -(2 ** 63), 0.5)
)

/** A valid value, or the same with one property replaced by junk or dropped, or junk in its place. */
function mutated (valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.oneof(
    { arbitrary: valid, weight: 3 },
    {
      arbitrary: fc.tuple(valid, junk, fc.nat(), fc.boolean()).map(([value, replacement, n, drop]) => {
        if (value === null || typeof value !== 'object' || Array.isArray(value)) return replacement
        const keys = Object.keys(value)
        if (keys.length === 0) return { [String(n)]: replacement }
        const key = keys[n % keys.length]
        const copy: Record<string, unknown> = { ...value }
        if (drop) delete copy[key]
        else copy[key] = replacement
        return copy
      }),
      weight: 2
    },
    { arbitrary: junk, weight: 1 }
  )
}

function queryString (query: Record<string, unknown>): string {
  const parts: string[] = []
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue
    for (const item of [value].flat()) parts.push(`${encodeURIComponent(key)}=${encodeURIComponent(typeof item === 'string' ? item : JSON.stringify(item))}`)
  }
  return parts.length === 0 ? '' : `?${parts.join('&')}`
}

function requestArbitrary (path: string, method: string, operation: Operation, deref: (s: Schema) => Schema, ids: string[]): fc.Arbitrary<FuzzRequest> {
  const params = operation.parameters ?? []
  const pathParams = Object.fromEntries(params.filter((p) => p.in === 'path').map((p) => [p.name, mutated(arbitraryOf(p.schema, deref, ids))]))
  const queryParams = params.filter((p) => p.in === 'query')
  const query = fc.record(Object.fromEntries(queryParams.map((p) => [p.name, mutated(arbitraryOf(p.schema, deref, ids))])),
    { requiredKeys: queryParams.filter((p) => p.required === true).map((p) => p.name) })
  const bodySchema = operation.requestBody?.content['application/json']?.schema
  const body = bodySchema === undefined ? fc.constant(undefined) : mutated(arbitraryOf(bodySchema, deref, ids))
  return fc.record({ path: fc.record(pathParams), query, body }).map(({ path: values, query: q, body: payload }) => {
    const url = path.replace(/\{(\w+)\}/g, (_m, name: string) => encodeURIComponent(text(values[name] ?? 'x')) || 'x')
    return { method: method.toUpperCase(), url: url + queryString(q as Record<string, unknown>), ...(payload === undefined ? {} : { payload }) }
  })
}

function responseValidator (doc: Schema) {
  const ajv = new Ajv({ strict: false, allErrors: false, discriminator: true })
  addFormats.default(ajv)
  for (const name of ['http-url', 'http-url-template', 'language-tag', 'time-zone', 'binary']) ajv.addFormat(name, true)
  ajv.addSchema({ $id: 'openapi', components: doc.components })
  const cache = new Map<Schema, ValidateFunction>()
  return (schema: Schema, value: unknown): string | undefined => {
    let validate = cache.get(schema)
    if (validate === undefined) {
      validate = ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi#/components/')))
      cache.set(schema, validate)
    }
    if (validate(value)) return undefined
    return ajv.errorsText(validate.errors)
  }
}

/** Fuzzes every operation of the document; GETs and the other reading operations first, DELETEs last. */
export async function fuzz (app: FastifyInstance, options: FuzzOptions): Promise<FuzzReport> {
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as Schema
  const deref = resolver(doc)
  const check = responseValidator(doc)
  const order = ['get', 'post', 'put', 'patch', 'delete']
  const operations = Object.entries(doc.paths as Record<string, Record<string, Operation>>)
    .flatMap(([path, ops]) => Object.entries(ops).map(([method, operation]) => ({ path, method, operation })))
    .filter(({ operation }) => !(options.skip ?? []).includes(operation.operationId))
    .sort((a, b) => order.indexOf(a.method) - order.indexOf(b.method))
  const failures: FuzzFailure[] = []
  let cases = 0
  for (const [index, { path, method, operation }] of operations.entries()) {
    const requests = fc.sample(requestArbitrary(path, method, operation, deref, options.ids), { numRuns: options.runs, seed: options.seed + index })
    for (const request of requests) {
      cases++
      const res = await app.inject({ method: request.method as 'GET', url: request.url, headers: options.headers, ...(request.payload === undefined ? {} : { payload: JSON.stringify(request.payload), headers: { ...options.headers, 'content-type': 'application/json' } }) })
      const fail = (reason: string) => failures.push({ operation: operation.operationId, request, status: res.statusCode, reason, body: res.body.slice(0, 300) })
      const declared = operation.responses[String(res.statusCode)] ?? operation.responses.default
      if (res.statusCode >= 500 && res.statusCode !== 503) fail('server error')
      else if (declared === undefined) fail('undeclared status')
      else if (declared.content !== undefined) {
        const [type, { schema }] = Object.entries(declared.content)[0]
        if (!String(res.headers['content-type']).startsWith(type)) fail(`content-type ${String(res.headers['content-type'])}, declared ${type}`)
        else if (type === 'application/json') {
          const problem = check(schema, res.json())
          if (problem !== undefined) fail(`body outside the declared schema: ${problem}`)
        }
      }
    }
  }
  return { operations: operations.length, cases, failures }
}

/** One line per distinct failure (operation, status, reason), with the first request that showed it. */
export function distinctFailures (failures: FuzzFailure[]): string[] {
  const seen = new Map<string, FuzzFailure>()
  for (const f of failures) {
    const key = `${f.operation} ${f.status} ${f.reason.replace(/"[^"]*"/g, '""').slice(0, 120)}`
    if (!seen.has(key)) seen.set(key, f)
  }
  return [...seen.entries()].map(([key, f]) => `${key}\n    request: ${f.request.method} ${f.request.url} ${JSON.stringify(f.request.payload) ?? ''}`.slice(0, 800) + `\n    answer: ${f.body}`)
}
