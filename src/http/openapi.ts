import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance, RouteOptions } from 'fastify'
import { isDeepStrictEqual } from 'node:util'
import { CHECKED_IN_HANDLER, COMPONENT, errorSchema, SHARED_SCHEMAS } from './schemas.ts'

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

/**
 * `/openapi.json` generated from the route schemas, and Swagger UI at `/docs` served from the package.
 * Every route gets a stable camelCase `operationId` and the error statuses any route of its kind can answer.
 */
export async function registerOpenApi (app: FastifyInstance): Promise<void> {
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema)
  app.addHook('onRoute', describeRoute)
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Switchboard API',
        version: '1',
        description: 'Voice agents, calls, knowledge bases and post-call deliveries. Every `/v1` route takes an `x-api-key` header. ' +
          'A method a path does not have answers 405 with an `Allow` header; errors always answer `application/json` in the `Error` shape.'
      },
      components: {
        securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' } }
      },
      security: [{ apiKey: [] }]
    },
    convertConstToEnum: false,
    // Shared schemas keep their `$id` as their name in components.schemas.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => typeof json.$id === 'string' ? json.$id : `def-${i}` },
    transformObject: (documentObject) => finishDocument((documentObject as { openapiObject: Document }).openapiObject) as never
  })
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { deepLinking: true } })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())
}

/** `GET /v1/agent/:id` -> `getAgentById`: stable as long as the path is, unique as paths and methods are. */
export function operationId (method: string, url: string): string {
  const words = url.replace(/^\/v1\//, '/').split('/').filter(Boolean)
    .flatMap((segment) => segment.startsWith(':') ? ['by', ...segment.slice(1).split(/[_-]/)] : segment.split(/[_-]/))
  return [method.toLowerCase(), ...words.map((w) => w.charAt(0).toUpperCase() + w.slice(1))].join('')
}

function describeRoute (route: RouteOptions): void {
  const method = [route.method].flat()[0]
  if (route.schema === undefined || route.schema.hide === true || method === 'HEAD') return
  const schema = route.schema as { operationId?: string, response?: Record<string, unknown> }
  schema.operationId ??= operationId(method, route.url)
  const response = schema.response ??= {}
  const shared = [
    ...(BODY_METHODS.has(method) ? [400, 413, 415] : []),
    // Rate-limited: the API, and the routes reached without a key (rate-limit.ts).
    ...(route.url.startsWith('/v1/') || route.config?.keyless === true ? [429] : []),
    // Any route that reads the database answers 503 when it is down or its pool stays exhausted.
    ...(route.url === '/health/live' ? [] : [503])
  ]
  for (const status of shared) response[status] ??= errorSchema(status)
}

interface Document {
  paths?: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, unknown> }> }>>
  components?: { schemas?: Record<string, unknown> }
}

/** Error answers are JSON even on routes that produce CSV; document-only cross-field rules become plain keywords. */
function finishDocument (document: Document): Document {
  for (const operations of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      for (const [status, answer] of Object.entries(operation.responses ?? {})) {
        if (Number(status) < 400 || answer.content === undefined || 'application/json' in answer.content) continue
        answer.content = { 'application/json': Object.values(answer.content)[0] }
      }
    }
  }
  return hoistComponents(finishSchemas(document) as Document)
}

/** Patterns for the server's own formats (validation.ts), so that generic clients and fuzzers can check them too. */
const FORMAT_PATTERNS: Record<string, string> = {
  'http-url': '^[Hh][Tt][Tt][Pp][Ss]?://[^/?#\\s]+',
  'http-url-template': '^[Hh][Tt][Tt][Pp][Ss]?://[^/?#\\s]+',
  'language-tag': '^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$',
  'time-zone': '^(UTC|[A-Za-z_]+(/[A-Za-z0-9_+-]+)+)$'
}
const DAY_PATTERN = '^\\d{4}-\\d{2}-\\d{2}$'

function finishSchemas (node: unknown): unknown {
  if (Array.isArray(node)) return node.map(finishSchemas)
  if (node === null || typeof node !== 'object') return node
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(node)) {
    if (key === CHECKED_IN_HANDLER) Object.assign(out, finishSchemas(value))
    else out[key] = finishSchemas(value)
  }
  if (typeof out.format === 'string' && FORMAT_PATTERNS[out.format] !== undefined) out.pattern ??= FORMAT_PATTERNS[out.format]
  if (out.pattern === DAY_PATTERN) out.format ??= 'date'
  return out
}

/**
 * Every schema named with `COMPONENT` becomes `components.schemas.<name>` and a `$ref` wherever it occurs, nested
 * ones first. Anything but the description and examples that differs between two schemas of one name fails the
 * document, so a name never stands for two different schemas. A description that differs between uses (an id
 * described as the caller's in one place) stays beside each `$ref`, as OpenAPI 3.1 allows; one shared by every
 * use that has one is the component's.
 */
function hoistComponents (document: Document): Document {
  const schemas: Record<string, Record<string, unknown>> = (document.components?.schemas ?? {}) as never
  const uses = new Map<string, Array<Record<string, unknown>>>()
  const hoist = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(hoist)
    if (node === null || typeof node !== 'object') return node
    const out: Record<string, unknown> = {}
    for (const [key, value] of Object.entries(node)) if (key !== COMPONENT) out[key] = hoist(value)
    const name = (node as Record<string, unknown>)[COMPONENT]
    if (typeof name !== 'string') return out
    const { description, examples, ...content } = out
    const known = schemas[name]
    if (known !== undefined) {
      const { examples: knownExamples, ...knownContent } = known
      if (!isDeepStrictEqual(knownContent, content) || (examples !== undefined && knownExamples !== undefined && !isDeepStrictEqual(examples, knownExamples))) {
        throw new Error(`two different schemas are named ${name}: ${JSON.stringify(known)} and ${JSON.stringify(out)}`)
      }
    }
    if (known === undefined || (examples !== undefined && known.examples === undefined)) schemas[name] = examples === undefined ? content : { ...content, examples }
    const use = { $ref: `#/components/schemas/${name}`, ...(description === undefined ? {} : { description }) }
    const list = uses.get(name) ?? []
    list.push(use)
    uses.set(name, list)
    return use
  }
  document.paths = hoist(document.paths) as Document['paths']
  for (const [name, refs] of uses) {
    const descriptions = new Set(refs.map((use) => use.description).filter((d) => d !== undefined))
    if (descriptions.size !== 1) continue
    schemas[name] = { description: [...descriptions][0], ...schemas[name] }
    for (const use of refs) delete use.description
  }
  return { ...document, components: { ...document.components, schemas } }
}
