import { Ajv, type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import fc from 'fast-check'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { Parser } from 'htmlparser2'
import type { Test } from 'tap'

/**
 * Fuzzing through `app.inject`, with one runner for two sources of requests:
 * - `fuzz`: every operation of `/openapi.json`, requests generated from the documented parameters and bodies
 *   (valid ones, and ones with a field or the whole part replaced by any JSON or text). An answer fails when it
 *   is a 5xx, a status the operation does not declare, or a body outside the declared schema of its status.
 * - `fuzzRoutes`: routes of Fastify's route table that the document hides (the console's pages, the browser's
 *   and Twilio's keyless routes), requests drawn from samples (the forms and links of crawled pages, or requests
 *   a test gives) with path values, query keys, form fields, headers, body encodings and credentials replaced
 *   by odd values: NUL, lone surrogates, invalid %-encoding, huge text, impossible days, repeated keys, nested
 *   names and values, other accounts' ids, unknown ids. An answer fails when it is a 5xx but 503 (for pages also
 *   a 5xx that is not a page).
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

/** Text sent exactly as written, %-encoding included, valid or not (`%FF`, a lone `%`). */
export class Encoded {
  readonly text: string
  constructor (text: string) {
    this.text = text
  }

  toJSON (): string {
    return `<encoded ${this.text}>`
  }
}

/** A form field or query entry; values that are not text are sent as their JSON. */
export type Entry = [name: unknown, value: unknown]

export type FuzzBody =
  | { type: 'json', value: unknown }
  | { type: 'form', fields: Entry[] }
  | { type: 'multipart', fields: Entry[], files: Array<{ field: string, name: string, content: unknown }> }
  | { type: 'raw', contentType: string | undefined, text: string }

export interface FuzzRequest {
  method: string
  /** Path and query, %-encoded. */
  url: string
  headers?: Record<string, string>
  body?: FuzzBody
  /** Whose credentials the request carries (a key of the options' callers); none when undefined. */
  caller?: string
  /** A form's CSRF field: the caller's token (first, as a browser sends it), a wrong one, or none. */
  csrf?: 'valid' | 'wrong' | 'none'
  /** Sent as a WebSocket upgrade through the plugin's own upgrade path (`injectWS`), not as a plain request. */
  websocket?: true
}

/** Headers (a key, a session cookie), for forms the CSRF token that goes with them, or a signature of each request. */
export interface Credentials {
  headers: Record<string, string>
  csrf?: string
  sign?: (url: string, payload: string | Buffer | undefined) => Record<string, string>
}
/** Called for every request, so that each may have fresh credentials (a session the previous one signed out). */
export type Callers = Record<string, () => Credentials | Promise<Credentials>>

export interface FuzzFailure { operation: string, request: FuzzRequest, status: number, reason: string, body: string }
export interface FuzzReport {
  operations: number
  cases: number
  failures: FuzzFailure[]
  /** How often each operation answered each status: whether requests reach the handlers, not only the guards. */
  statuses: Record<string, Record<number, number>>
  ms: number
}

/** What the runner sends: a name for reports, generated requests, and the rule an answer must keep. */
interface Target {
  name: string
  requests: fc.Arbitrary<FuzzRequest>
  /** Requests sent every run besides the generated ones. */
  fixed?: FuzzRequest[]
  check: (res: LightMyRequestResponse) => string | undefined
}

// A request that takes longer than this has hung: a failure of its own, not a stalled test.
const ANSWER_TIMEOUT_MS = 15_000

const LOOPBACK_URLS = ['http://127.0.0.1:9/hook', 'https://127.0.0.1:9/a/b?x=1', 'http://127.0.0.1/{{call_id}}']
const TIME_ZONES = ['UTC', 'Europe/Berlin', 'America/New_York']
const LANGUAGES = ['en', 'en-US', 'de-DE', 'zh-Hant-TW']

/** A generated value as text: objects (some without a prototype, so no String()) as their JSON. */
const text = (value: unknown): string => typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value)

/** UTF-8, except that a lone surrogate is written as its 3-byte form (WTF-8), as a broken client would send it. */
function utf8 (value: string): Buffer {
  const parts: Buffer[] = []
  for (const ch of value) {
    const code = ch.codePointAt(0)!
    parts.push(code >= 0xd800 && code <= 0xdfff
      ? Buffer.from([0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)])
      : Buffer.from(ch))
  }
  return Buffer.concat(parts)
}

/** The bytes a value stands for: Encoded text %-decoded byte by byte (invalid escapes kept as written). */
function bytesOf (value: unknown): Buffer {
  if (!(value instanceof Encoded)) return utf8(typeof value === 'string' ? value : text(value))
  const out: number[] = []
  const source = value.text
  for (let i = 0; i < source.length; i++) {
    const hex = source.slice(i + 1, i + 3)
    if (source[i] === '%' && /^[0-9a-fA-F]{2}$/.test(hex)) {
      out.push(Number.parseInt(hex, 16))
      i += 2
    } else out.push(...utf8(source[i]))
  }
  return Buffer.from(out)
}

/** %-encoding of a value's bytes; Encoded text as written. */
export function percent (value: unknown): string {
  if (value instanceof Encoded) return value.text
  let out = ''
  for (const byte of bytesOf(value)) out += /[A-Za-z0-9\-_.~]/.test(String.fromCharCode(byte)) ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  return out
}

const encodeEntries = (entries: Entry[]) => entries.map(([name, value]) => `${percent(name)}=${percent(value)}`).join('&')

function multipart (fields: Entry[], files: Array<{ field: string, name: string, content: unknown }>): { payload: Buffer, type: string } {
  const boundary = '----fuzz7d2b1c'
  const parts: Buffer[] = []
  for (const [name, value] of fields) parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="`), bytesOf(name), Buffer.from('"\r\n\r\n'), bytesOf(value), Buffer.from('\r\n'))
  for (const file of files) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${file.field}"; filename="`), bytesOf(file.name),
      Buffer.from('"\r\nContent-Type: text/plain\r\n\r\n'), bytesOf(file.content), Buffer.from('\r\n'))
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`))
  return { payload: Buffer.concat(parts), type: `multipart/form-data; boundary=${boundary}` }
}

/** The answer to a WebSocket upgrade: 101 (the socket is closed at once), or the status the server refused it with. */
async function upgrade (app: FastifyInstance, url: string, headers: Record<string, string>): Promise<LightMyRequestResponse> {
  const answer = (statusCode: number) => ({ statusCode, headers: {}, body: '' }) as unknown as LightMyRequestResponse
  try {
    const socket = await app.injectWS(url, { headers })
    socket.terminate()
    return answer(101)
  } catch (err) {
    const status = /Unexpected server response: (\d+)/.exec((err as Error).message)
    if (status === null) throw err
    return answer(Number(status[1]))
  }
}

/** Sends one request with its caller's credentials; the answer, or the reason there was none. */
async function send (app: FastifyInstance, request: FuzzRequest, callers: Callers): Promise<LightMyRequestResponse | string> {
  const credentials = request.caller === undefined ? { headers: {} } : await callers[request.caller]()
  const headers: Record<string, string> = { ...credentials.headers, ...request.headers }
  let payload: string | Buffer | undefined
  const body = request.body
  if (body !== undefined) {
    const csrf: Entry[] = request.csrf === 'valid' && credentials.csrf !== undefined ? [['csrf_token', credentials.csrf]] : request.csrf === 'wrong' ? [['csrf_token', 'AAAA' + (credentials.csrf ?? '').slice(4)]] : []
    if (body.type === 'json') {
      payload = JSON.stringify(body.value)
      headers['content-type'] ??= 'application/json'
    } else if (body.type === 'form') {
      payload = encodeEntries([...csrf, ...body.fields])
      headers['content-type'] ??= 'application/x-www-form-urlencoded'
    } else if (body.type === 'multipart') {
      const encoded = multipart([...csrf, ...body.fields], body.files)
      payload = encoded.payload
      headers['content-type'] ??= encoded.type
    } else {
      payload = body.text
      if (body.contentType !== undefined) headers['content-type'] ??= body.contentType
    }
  }
  // Signed over what is sent; the request's own headers (a forged signature) still win.
  Object.assign(headers, credentials.sign?.(request.url, payload), request.headers)
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([
      request.websocket === true ? upgrade(app, request.url, headers) : app.inject({ method: request.method as 'GET', url: request.url, headers, ...(payload === undefined ? {} : { payload }) }),
      new Promise<string>((resolve) => { timer = setTimeout(resolve, ANSWER_TIMEOUT_MS, `no answer within ${ANSWER_TIMEOUT_MS} ms`) })
    ])
  } catch (err) {
    return `the request could not be sent: ${(err as Error).message}`
  } finally {
    clearTimeout(timer)
  }
}

/** The one runner: every target's generated requests in turn, each answer checked by the target's rule. */
async function run (app: FastifyInstance, targets: Target[], options: { runs: number, seed: number, callers: Callers }): Promise<FuzzReport> {
  const failures: FuzzFailure[] = []
  const statuses: FuzzReport['statuses'] = {}
  const started = Date.now()
  let cases = 0
  for (const [index, target] of targets.entries()) {
    const counts: Record<number, number> = statuses[target.name] = {}
    for (const request of [...target.fixed ?? [], ...fc.sample(target.requests, { numRuns: options.runs, seed: options.seed + index })]) {
      cases++
      const res = await send(app, request, options.callers)
      const status = typeof res === 'string' ? 0 : res.statusCode
      counts[status] = (counts[status] ?? 0) + 1
      const reason = typeof res === 'string' ? res : target.check(res)
      if (reason !== undefined) {
        failures.push({ operation: target.name, request, status: typeof res === 'string' ? 0 : res.statusCode, reason, body: typeof res === 'string' ? '' : res.body.slice(0, 300) })
      }
    }
  }
  return { operations: targets.length, cases, failures, statuses, ms: Date.now() - started }
}

// ---------------------------------------------------------------------------------------------------------
// The OpenAPI document's operations

export interface FuzzOptions {
  headers: Record<string, string>
  /** Ids of records of the account, used for most id-shaped values so that requests reach real rows. */
  ids: string[]
  runs: number
  seed: number
  /** Operations to leave out, by operationId. */
  skip?: string[]
}

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
    return { method: method.toUpperCase(), url: url + queryString(q as Record<string, unknown>), caller: 'key', ...(payload === undefined ? {} : { body: { type: 'json' as const, value: payload } }) }
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

/** An answer within the operation's documented responses: a declared status, content type and body. */
function documentedAnswer (operation: Operation, check: ReturnType<typeof responseValidator>) {
  return (res: LightMyRequestResponse): string | undefined => {
    const declared = operation.responses[String(res.statusCode)] ?? operation.responses.default
    if (res.statusCode >= 500 && res.statusCode !== 503) return 'server error'
    if (declared === undefined) return 'undeclared status'
    if (declared.content === undefined) return undefined
    const [type, { schema }] = Object.entries(declared.content)[0]
    if (!String(res.headers['content-type']).startsWith(type)) return `content-type ${String(res.headers['content-type'])}, declared ${type}`
    if (type !== 'application/json') return undefined
    const problem = check(schema, res.json())
    return problem === undefined ? undefined : `body outside the declared schema: ${problem}`
  }
}

/** Fuzzes every operation of the document; GETs and the other reading operations first, DELETEs last. */
export async function fuzz (app: FastifyInstance, options: FuzzOptions): Promise<FuzzReport> {
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as Schema
  const deref = resolver(doc)
  const check = responseValidator(doc)
  const order = ['get', 'post', 'put', 'patch', 'delete']
  const targets = Object.entries(doc.paths as Record<string, Record<string, Operation>>)
    .flatMap(([path, ops]) => Object.entries(ops).map(([method, operation]) => ({ path, method, operation })))
    .filter(({ operation }) => !(options.skip ?? []).includes(operation.operationId))
    .sort((a, b) => order.indexOf(a.method) - order.indexOf(b.method))
    .map(({ path, method, operation }) => ({ name: operation.operationId, requests: requestArbitrary(path, method, operation, deref, options.ids), check: documentedAnswer(operation, check) }))
  return await run(app, targets, { runs: options.runs, seed: options.seed, callers: { key: () => ({ headers: options.headers }) } })
}

// ---------------------------------------------------------------------------------------------------------
// The route table's hidden routes

export interface Route { method: string, url: string }

/** Every route of the app (HEAD, which Fastify adds for each GET, left out), read from Fastify's own route table. */
export function routeTable (app: FastifyInstance): Route[] {
  const routes: Route[] = []
  const paths: string[] = []
  // printRoutes draws a tree: each line is its parent's path plus its own part, indented by 4 per level.
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = /^([│ ]*)[└├]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line)
    if (match === null) continue
    const depth = match[1].length / 4
    const path = (depth === 0 ? '' : paths[depth - 1]) + match[2]
    paths[depth] = path
    // `:id|:workspace_id`: two routes' names for one parameter.
    const url = path.replace(/(:\w+)(\|:\w+)+/g, '$1')
    for (const method of match[3]?.split(', ') ?? []) if (method !== 'HEAD') routes.push({ method, url })
  }
  return routes
}

const patternRegExp = (url: string) => new RegExp(`^${url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:\w+/g, '([^/]+)')}$`)
const paramCount = (url: string) => (url.match(/:\w+/g) ?? []).length

/** The route a concrete path belongs to: the one with the fewest parameters (`/agents/new` before `/agents/:id`). */
export function routeOf (routes: Route[], method: string, path: string): Route | undefined {
  return routes.filter((route) => route.method === method && patternRegExp(route.url).test(path))
    .sort((a, b) => paramCount(a.url) - paramCount(b.url))[0]
}

/** What a real client sends to a route: a form or a link of a crawled page, or a request a test gives. */
export type Sample = FuzzRequest & {
  /** Other values a field offers (a select's options, a radio's values). */
  choices?: Record<string, string[]>
  /** The file fields of a multipart form. */
  fileFields?: string[]
  /** What a field holds where its value alone does not say (an empty date field): `day`, `number`. */
  kinds?: Record<string, Kind>
}

type Kind = 'day' | 'number' | 'id' | 'text'
const INPUT_KINDS: Record<string, Kind> = { date: 'day', number: 'number' }

interface ParsedForm { method: string, action: string, multipart: boolean, fields: Entry[], choices: Record<string, string[]>, types: Record<string, string>, fileFields: string[] }

/** The forms (their fields as the page fills them in) and the links of a page. */
function formsAndLinks (page: string): { forms: ParsedForm[], links: string[] } {
  const forms: ParsedForm[] = []
  const links: string[] = []
  let form: ParsedForm | undefined
  let select: string | undefined
  let textarea: { name: string, text: string } | undefined
  const add = (name: string, value: string) => {
    if (form === undefined) return
    if (!form.fields.some(([n]) => n === name)) form.fields.push([name, value])
    ;(form.choices[name] ??= []).push(value)
  }
  const parser = new Parser({
    onopentag (tag, attrs) {
      if (tag === 'a' && attrs.href !== undefined) links.push(attrs.href)
      if (tag === 'form') form = { method: (attrs.method ?? 'get').toUpperCase(), action: attrs.action ?? '', multipart: attrs.enctype === 'multipart/form-data', fields: [], choices: {}, types: {}, fileFields: [] }
      if (form === undefined || attrs.name === undefined) {
        if (tag === 'option' && select !== undefined) add(select, attrs.value ?? '')
        return
      }
      if (tag === 'input' && attrs.type !== undefined) form.types[attrs.name] = attrs.type
      if (tag === 'input' && attrs.type === 'file') form.fileFields.push(attrs.name)
      else if (tag === 'input' && (attrs.type === 'checkbox' || attrs.type === 'radio')) add(attrs.name, attrs.value ?? 'on')
      else if (tag === 'input' || tag === 'button') add(attrs.name, attrs.value ?? '')
      else if (tag === 'select') select = attrs.name
      else if (tag === 'textarea') textarea = { name: attrs.name, text: '' }
    },
    ontext (data) { if (textarea !== undefined) textarea.text += data },
    onclosetag (tag) {
      if (tag === 'select') select = undefined
      if (tag === 'textarea' && textarea !== undefined) {
        add(textarea.name, textarea.text.replace(/^\n/, ''))
        textarea = undefined
      }
      if (tag === 'form' && form !== undefined) {
        forms.push(form)
        form = undefined
      }
    }
  }, { decodeEntities: true })
  parser.end(page)
  return { forms, links }
}

/**
 * The samples of the pages reachable from `start` by links and forms (at most `perRoute` pages per route and
 * `max` in all), fetched with `credentials`: each form (its CSRF field left to the runner) and each link.
 */
export async function crawl (app: FastifyInstance, routes: Route[], start: string[], caller: { name: string, credentials: Credentials }, options: { perRoute?: number, max?: number } = {}): Promise<Sample[]> {
  const { credentials } = caller
  const { perRoute = 3, max = 300 } = options
  const samples: Sample[] = []
  const seen = new Set<string>()
  const fetched = new Map<string, number>()
  const formKinds = new Map<string, Record<string, Kind>>()
  const queue = [...start]
  while (queue.length > 0 && seen.size < max) {
    const url = queue.shift()!
    const path = url.split('?')[0]
    const route = routeOf(routes, 'GET', path)
    if (seen.has(url) || route === undefined || (fetched.get(route.url) ?? 0) >= perRoute) continue
    seen.add(url)
    fetched.set(route.url, (fetched.get(route.url) ?? 0) + 1)
    samples.push({ method: 'GET', url, caller: caller.name, kinds: formKinds.get(url) })
    const res = await app.inject({ method: 'GET', url, headers: credentials.headers })
    if (!String(res.headers['content-type']).startsWith('text/html')) continue
    const { forms, links } = formsAndLinks(res.body)
    const local = (href: string) => {
      const target = new URL(href, `http://page.invalid${path}`)
      return target.origin === 'http://page.invalid' ? `${target.pathname}${target.search}` : undefined
    }
    for (const link of links) {
      const target = local(link)
      if (target !== undefined) queue.push(target)
    }
    for (const form of forms) {
      const action = local(form.action === '' ? url : form.action)
      if (action === undefined) continue
      const fields = form.fields.filter(([name]) => name !== 'csrf_token')
      const kinds = Object.fromEntries(Object.entries(form.types).filter(([, type]) => INPUT_KINDS[type] !== undefined).map(([name, type]) => [name, INPUT_KINDS[type]]))
      if (form.method === 'GET') {
        const target = `${action.split('?')[0]}?${encodeEntries(fields)}`
        formKinds.set(target, kinds)
        queue.push(target)
        continue
      }
      samples.push({
        method: form.method,
        url: action,
        body: form.multipart ? { type: 'multipart', fields, files: form.fileFields.map((field) => ({ field, name: 'notes.txt', content: 'Opening hours: 9 to 5.' })) } : { type: 'form', fields },
        caller: caller.name,
        csrf: 'valid',
        kinds,
        choices: form.choices,
        fileFields: form.fileFields
      })
    }
  }
  return samples
}

const HUGE = 'x'.repeat(20_000)
const NESTED = '['.repeat(64) + ']'.repeat(64)
const NESTED_VALUE: unknown = Array.from({ length: 64 }).reduce((inner: unknown) => ({ a: [inner] }), 1)
/** Odd text for any field: control characters, lone surrogates, invalid %-encoding, huge, markup, nesting. */
const ODD_TEXT: unknown[] = [
  '', ' ', '\u0000', 'a\u0000b', '\uD800', 'a\uDFFFb', '\uDBFF\uDBFF', HUGE, '😀', 'ö', '\r\n', '\t', '<b>"\'&', '../..', '%', '+', '[]', '{}',
  NESTED, '{"a":{"b":{"c":[1,[2,[3]]]}}}', 'null', 'true', 'undefined', '__proto__', 'http://127.0.0.1:9/x', 'mailto:a@127.0.0.1', 'a@b', '@',
  new Encoded('%FF'), new Encoded('%E0%A4%A'), new Encoded('%'), new Encoded('%C0%80'), new Encoded('%ED%A0%80'), new Encoded('%00'), new Encoded('a%2')
]
/** Text PostgreSQL cannot store or a parser may choke on. */
const UNSTORABLE: unknown[] = ['a\u0000b', 'a\uD800b', new Encoded('%FF%FE'), NESTED]
const ODD_DAYS = ['2026-13-01', '2026-00-10', '9999-99-99', '2026-02-30', '2026-12-32', '2026-04-31', '0000-01-01', '0000-00-00', '0001-01-01',
  '-001-01-01', '+275760-09-14', '275760-09-14', '2026-1-1', '20260101', '2026-01-01T00:00:00Z', '1970-01-01', '9999-12-31']
const ODD_NUMBERS = ['-1', '0', '-0', '1.5', '1e400', '-1e400', 'NaN', 'Infinity', '99999999999999999999', '9007199254740993', '0x10', '1_000', ' 1', '１', '2147483648']
const ODD_NAMES = ['', 'a[b][c][d]', 'a[]', 'a.b', '__proto__', 'constructor', 'hasOwnProperty', 'x'.repeat(300), '\u0000', '\uD800', 'skip', 'limit', 'next', 'csrf_token']
/** Odd headers: foreign origins, broken ranges and cookies, an upgrade with no socket behind it, a bad signature. */
const ODD_HEADERS: Array<Record<string, string>> = [
  { origin: 'http://127.0.0.2:9' }, { origin: 'null' }, { range: 'bytes=5-1' }, { range: 'bytes=-0' }, { range: 'bytes=99999999999999999999-' },
  { range: 'bytes=0-1,2-3' }, { range: 'lines=1-2' }, { 'x-twilio-signature': 'AAAA' }, { 'x-twilio-signature': '' },
  { cookie: 'switchboard_session=%ZZ; switchboard_session=x' }, { cookie: 'switchboard_session=' + 'x'.repeat(5000) },
  { connection: 'upgrade', upgrade: 'websocket', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version': '13' },
  { 'accept-language': '*;q=abc' }, { 'content-type': 'application/x-www-form-urlencoded; charset=latin1' }
]

const DAY = /^\d{4}-\d{2}-\d{2}$/
const NUMBER = /^-?\d+(\.\d+)?$/
const ID = /^[0-9a-f]{24}$/i

/** One change to a sample; `pick` chooses among the odd values (deterministically, so a seed replays it). */
interface Change { kind: 'path' | 'query' | 'field' | 'drop' | 'repeat' | 'name' | 'choice' | 'header' | 'encoding' | 'head', index: number, pick: number, junk: unknown }

const change: fc.Arbitrary<Change> = fc.record({
  kind: fc.constantFrom('path', 'query', 'query', 'field', 'field', 'field', 'drop', 'repeat', 'name', 'choice', 'choice', 'header', 'encoding', 'head'),
  index: fc.nat(),
  pick: fc.nat(),
  junk
}) as fc.Arbitrary<Change>

export interface RouteFuzzOptions {
  /** The routes to fuzz, from `routeTable`. */
  routes: Route[]
  /** Requests that reach each route as a client would: `crawl`'s, and any a test adds. */
  samples: Sample[]
  /** Values for path parameters and id fields: the account's ids and tokens, other accounts' ids, unknown ones. */
  values: string[]
  /** The callers a request may carry (weights), the first one's the usual; `none` for no credentials. */
  callers: Callers
  weights?: Record<string, number>
  runs: number
  seed: number
  /** Pages: a 5xx must be a page (text/html) too. */
  html?: boolean
}

function pick<T> (list: T[], n: number): T {
  return list[n % list.length]
}

/** What an entry holds: as its form says, else as its value looks. */
function kindOf (sample: Sample, [name, value]: Entry, values: string[]): Kind {
  const known = sample.kinds?.[text(name)]
  if (known !== undefined) return known
  const shown = typeof value === 'string' ? value : ''
  return DAY.test(shown) ? 'day' : NUMBER.test(shown) ? 'number' : ID.test(shown) || values.includes(shown) ? 'id' : 'text'
}

/** The odd values of a kind: impossible days where a day goes, other accounts' and unknown ids where an id goes. */
const oddOf = (kind: Kind, values: string[]): unknown[] => kind === 'day' ? ODD_DAYS : kind === 'number' ? ODD_NUMBERS : kind === 'id' ? values : ODD_TEXT

/** An odd value of any kind, for an entry a sample does not have. */
const oddAny = (values: string[], c: Change): unknown => pick(pick([ODD_TEXT, ODD_NUMBERS, ODD_DAYS, values], c.pick), Math.floor(c.pick / 4))

/** Mostly an odd value of the entry's own kind, else any odd text, or junk. */
function oddFor (sample: Sample, entry: Entry, values: string[], c: Change): unknown {
  const list = pick([oddOf(kindOf(sample, entry, values), values), oddOf(kindOf(sample, entry, values), values), ODD_TEXT], c.pick)
  return c.pick % 7 === 6 ? c.junk : pick(list, Math.floor(c.pick / 3))
}

/** A request's entries (the body's fields when it has a form or an object, else the query's) and ways to replace them. */
function partsOf (request: Sample) {
  const [path, search = ''] = request.url.split('?')
  const query: Entry[] = [...new URLSearchParams(search)]
  const body = request.body
  const fields: Entry[] | undefined = body?.type === 'form' || body?.type === 'multipart'
    ? [...body.fields]
    : body?.type === 'json' && body.value !== null && typeof body.value === 'object' ? Object.entries(body.value) : undefined
  const withFields = (next: Entry[]): Sample => {
    if (body?.type === 'json') return { ...request, body: { type: 'json', value: Object.fromEntries(next.map(([k, v]) => [text(k), v])) } }
    if (body?.type === 'form' || body?.type === 'multipart') return { ...request, body: { ...body, fields: next } }
    return request
  }
  const withQuery = (next: Entry[]): Sample => ({ ...request, url: next.length === 0 ? path : `${path}?${encodeEntries(next)}` })
  return { path, search, query, entries: fields ?? query, withQuery, withEntries: fields === undefined ? withQuery : withFields }
}

/** The request with the path parameter at `position` (of the route's segments) set to `value`. */
function withPathValue (request: Sample, route: Route, position: number, value: unknown): Sample {
  const { path, search } = partsOf(request)
  const parts = path.split('/')
  parts[position] = (percent(value) || 'x') + route.url.split('/')[position].replace(/^:\w+/, '')
  return { ...request, url: parts.join('/') + (search === '' ? '' : `?${search}`) }
}

const paramPositions = (route: Route) => route.url.split('/').flatMap((part, i) => part.startsWith(':') ? [i] : [])

function applyChange (request: Sample, route: Route, c: Change, values: string[]): Sample {
  const { query, entries, withQuery, withEntries } = partsOf(request)
  switch (c.kind) {
    case 'path': {
      const positions = paramPositions(route)
      if (positions.length === 0) return withQuery([...query, [pick(ODD_NAMES, c.index), oddAny(values, c)]])
      const value = c.pick % 3 === 0 ? pick(values, c.pick) : oddFor(request, ['', pick(values, c.pick)], values, { ...c, pick: Math.floor(c.pick / 3) })
      return withPathValue(request, route, pick(positions, c.index), value)
    }
    case 'query': {
      if (query.length === 0) return withQuery([[pick(ODD_NAMES, c.index), oddAny(values, c)]])
      const i = c.index % query.length
      return withQuery(query.map((entry, j) => j === i ? [entry[0], oddFor(request, entry, values, c)] : entry))
    }
    case 'field': {
      if (entries.length === 0) return withEntries([[pick(ODD_NAMES, c.index), oddAny(values, c)]])
      const i = c.index % entries.length
      return withEntries(entries.map((entry, j) => j === i ? [entry[0], oddFor(request, entry, values, c)] : entry))
    }
    case 'drop': return entries.length === 0 ? request : withEntries(entries.filter((_e, j) => j !== c.index % entries.length))
    case 'repeat': {
      // `?a=1&a=2`: the same name twice, with its own value or an odd one.
      if (entries.length === 0) return withQuery([['a', '1'], ['a', '2']])
      const entry = pick(entries, c.index)
      return withEntries([...entries, [entry[0], c.pick % 2 === 0 ? entry[1] : oddFor(request, entry, values, c)]])
    }
    case 'name': return withEntries([...entries, [pick(ODD_NAMES, c.index), oddAny(values, c)]])
    case 'choice': {
      // Another value a select offers, or another of the account's records: valid, and often a different path.
      const named = entries.filter(([name]) => (request.choices?.[text(name)]?.length ?? 0) > 1)
      if (named.length === 0) return withEntries(entries.map((entry, j) => j === c.index % Math.max(entries.length, 1) && ID.test(text(entry[1])) ? [entry[0], pick(values, c.pick)] : entry))
      const [name] = pick(named, c.index)
      return withEntries(entries.map((entry) => entry[0] === name ? [name, pick(request.choices![text(name)], c.pick)] : entry))
    }
    case 'header': return { ...request, headers: { ...request.headers, ...pick(ODD_HEADERS, c.pick) } }
    // The HEAD route Fastify adds for every GET: the GET handler, its body dropped (a streamed file or CSV included).
    case 'head': return request.method === 'GET' && request.websocket === undefined ? { ...request, method: 'HEAD' } : request
    case 'encoding': {
      const list = entries
      const encodings: FuzzBody[] = [
        { type: 'form', fields: list },
        { type: 'multipart', fields: list, files: (request.fileFields ?? ['file']).map((field) => ({ field, name: pick(ODD_TEXT, c.index) as string, content: c.junk })) },
        { type: 'json', value: c.index % 2 === 0 ? Object.fromEntries(list.map(([k, v]) => [text(k), v])) : NESTED_VALUE },
        { type: 'raw', contentType: 'text/plain', text: text(c.junk) },
        { type: 'raw', contentType: undefined, text: encodeEntries(list) },
        { type: 'raw', contentType: 'application/x-www-form-urlencoded', text: '%' + HUGE }
      ]
      return request.websocket === true ? request : { ...request, method: route.method, body: pick(encodings, c.pick) }
    }
  }
}

/**
 * Requests that leave nothing to chance, from the route's fullest sample: every odd value of its kind in each day and
 * number of a query, with the other entries and alone (every impossible day where a day goes), and each query entry
 * left out; one odd value of its kind, in turn, in every other entry; NUL, a lone surrogate, invalid UTF-8 and deep
 * nesting in all text entries at once; an id and an odd text in each path parameter; and every entry repeated.
 */
function edgeRequests (route: Route, samples: Sample[], options: RouteFuzzOptions): FuzzRequest[] {
  const size = (s: Sample) => partsOf(s).entries.length
  const sample = [...samples].sort((a, b) => size(b) - size(a))[0]
  if (sample === undefined) return []
  const { entries, withEntries } = partsOf(sample)
  const requests: Sample[] = []
  let turn = route.url.length
  const query = route.method === 'GET'
  for (const [j, entry] of entries.entries()) {
    const kind = kindOf(sample, entry, options.values)
    const typed = kind === 'day' || kind === 'number'
    // A query's days and numbers get every odd value of their kind, a form's fields (often dozens) one in turn.
    const odd = typed && query ? oddOf(kind, options.values) : [pick(oddOf(kind, options.values), turn++)]
    for (const value of odd) requests.push(withEntries(entries.map((e, i) => i === j ? [e[0], value] : e)))
    if (!query) continue
    // Alone as well: a day or a number that other entries would have refused first (`?to=2026-13-01` without `from`).
    if (typed) for (const value of odd) requests.push(withEntries([[entry[0], value]]))
    requests.push(withEntries(entries.filter((_e, i) => i !== j)))
  }
  if (entries.length > 0) requests.push(withEntries([...entries, ...entries.map(([name], i) => [name, pick(ODD_TEXT, turn + i)] as Entry)]))
  // What no stored text may hold, in every text entry at once (a form checks each field, so none hides another).
  const texts = entries.map((entry) => kindOf(sample, entry, options.values) === 'text')
  if (texts.some(Boolean)) for (const value of UNSTORABLE) requests.push(withEntries(entries.map((e, i) => texts[i] ? [e[0], value] : e)))
  for (const position of paramPositions(route)) {
    requests.push(withPathValue(sample, route, position, pick(options.values, turn++)), withPathValue(sample, route, position, pick(ODD_TEXT, turn++)))
  }
  return requests.map(({ choices: _choices, fileFields: _fileFields, kinds: _kinds, ...request }) => ({ ...request, caller: request.caller ?? Object.keys(options.callers)[0] }))
}

/** The requests of one route: a sample (or the bare route), as it is or with a few changes, from some caller. */
function routeRequests (route: Route, samples: Sample[], options: RouteFuzzOptions): fc.Arbitrary<FuzzRequest> {
  const bare: Sample = {
    method: route.method,
    url: route.url.replace(/:\w+/g, () => options.values[0] ?? 'x'),
    ...(route.method === 'GET' ? {} : { body: { type: 'form', fields: [] }, csrf: 'valid' as const })
  }
  const callers = Object.keys(options.callers).map((name) => ({ arbitrary: fc.constant(name), weight: options.weights?.[name] ?? 1 }))
  return fc.record({
    sample: fc.constantFrom(...(samples.length === 0 ? [bare] : samples)),
    changes: fc.oneof({ arbitrary: fc.constant<Change[]>([]), weight: 1 }, { arbitrary: fc.array(change, { minLength: 1, maxLength: 3 }), weight: 4 }),
    // The sample's own caller (who saw the form) mostly, else any.
    caller: fc.oneof({ arbitrary: fc.constant(undefined), weight: 3 }, fc.oneof(...callers)),
    csrf: fc.oneof({ arbitrary: fc.constant('valid' as const), weight: 8 }, fc.constant('wrong' as const), fc.constant('none' as const))
  }).map(({ sample, changes, caller, csrf }) => {
    const { choices: _choices, fileFields: _fileFields, kinds: _kinds, ...request } = changes.reduce((r, c) => applyChange(r, route, c, options.values), sample)
    const who = caller ?? sample.caller ?? Object.keys(options.callers)[0]
    return { ...request, caller: who === 'none' ? undefined : who, csrf: sample.csrf === undefined ? undefined : csrf }
  })
}

/** Reading routes first, then the others, the ones that remove something last. */
const routeOrder = (route: Route) => route.method === 'GET' ? 0 : route.method === 'DELETE' || /\/(delete|release|remove|revoke|logout)$/.test(route.url) ? 2 : 1

/** A 5xx but 503 fails; on pages, a 5xx that is not a page fails too. */
function serverError (html: boolean) {
  return (res: LightMyRequestResponse): string | undefined => {
    if (res.statusCode >= 500 && res.statusCode !== 503) return 'server error'
    if (html && res.statusCode >= 500 && !String(res.headers['content-type']).startsWith('text/html')) return `a ${res.statusCode} that is not a page`
    return undefined
  }
}

/** Fuzzes each route with requests drawn from its samples (the bare route when it has none). */
export async function fuzzRoutes (app: FastifyInstance, options: RouteFuzzOptions): Promise<FuzzReport & { withoutSamples: string[] }> {
  const routes = [...options.routes].sort((a, b) => routeOrder(a) - routeOrder(b))
  const samplesOf = (route: Route) => options.samples.filter((s) => s.method === route.method && routeOf(options.routes, s.method, s.url.split('?')[0]) === route)
  const check = serverError(options.html === true)
  const targets = routes.map((route) => ({ name: `${route.method} ${route.url}`, requests: routeRequests(route, samplesOf(route), options), fixed: edgeRequests(route, samplesOf(route), options), check }))
  const report = await run(app, targets, options)
  return { ...report, withoutSamples: routes.filter((route) => samplesOf(route).length === 0).map((route) => `${route.method} ${route.url}`) }
}

// ---------------------------------------------------------------------------------------------------------
// Reports

const shown = (request: FuzzRequest) => {
  const body = request.body === undefined ? '' : request.body.type === 'json' ? JSON.stringify(request.body.value) : request.body.type === 'raw' ? request.body.text : encodeEntries(request.body.fields)
  return `${request.caller ?? 'anonymous'}${request.csrf === undefined ? '' : ` (csrf ${request.csrf})`}: ${request.method} ${request.url} ${JSON.stringify(request.headers ?? {})} ${request.body?.type ?? ''} ${body}`.slice(0, 800)
}

/** How many cases a handler answered with a success or a redirect: requests that got past the guards. */
const reachedHandlers = (report: FuzzReport) =>
  Object.values(report.statuses).reduce((sum, counts) => sum + Object.entries(counts).reduce((n, [status, count]) => n + (Number(status) >= 200 && Number(status) < 400 ? count : 0), 0), 0)

/** One line per distinct failure (operation, status, reason), with the first request that showed it. */
function distinctFailures (failures: FuzzFailure[]): string[] {
  const seen = new Map<string, FuzzFailure>()
  for (const f of failures) {
    const key = `${f.operation} ${f.status} ${f.reason.replace(/"[^"]*"/g, '""').slice(0, 120)}`
    if (!seen.has(key)) seen.set(key, f)
  }
  return [...seen.entries()].map(([key, f]) => `${key}\n    request: ${shown(f.request)}\n    answer: ${f.body}`)
}

/** A run's outcome on `t`: a line of figures, then every distinct failure as a failure. */
export function judge (t: Test, label: string, report: FuzzReport): void {
  const distinct = distinctFailures(report.failures)
  t.comment(`${label}: ${report.operations} routes, ${report.cases} cases (${reachedHandlers(report)} answered 2xx or 3xx) in ${report.ms} ms, ` +
    `${report.failures.length} failing cases, ${distinct.length} distinct failures`)
  for (const line of distinct) t.fail(line)
}
