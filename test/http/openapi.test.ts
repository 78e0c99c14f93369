import t from 'tap'
import { isDeepStrictEqual } from 'node:util'
import { Ajv } from 'ajv'
import Fastify from 'fastify'
import { sql } from 'kysely'
import { Type } from 'typebox'
import { ERROR_CODES } from '../../src/http/errors.ts'
import { registerOpenApi } from '../../src/http/openapi.ts'
import { COMPONENT } from '../../src/http/schemas.ts'
import { createAccount, setup } from '../helpers/app.ts'

interface Operation { operationId?: string, security?: unknown[], responses: Record<string, { content?: Record<string, { schema: unknown }> }> }

t.test('the document names shared schemas, ids every operation and lists every error it can answer', async (t) => {
  const { app } = await setup(t)
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
  t.same(doc.components.schemas.Error.properties.code.enum, [...ERROR_CODES], 'the error code is an enum of every code')
  const ids = new Set<string>()
  for (const [path, operations] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
    for (const [method, operation] of Object.entries(operations)) {
      const name = `${method.toUpperCase()} ${path}`
      t.match(operation.operationId, /^[a-z][A-Za-z0-9]*$/, `${name} has a camelCase operationId`)
      t.notOk(ids.has(operation.operationId!), `${name}: ${operation.operationId} is unique`)
      ids.add(operation.operationId!)
      // A /v1 route without a key (a signed recording link) has no 401 to declare.
      const keyless = operation.security?.length === 0
      if (path.startsWith('/v1/')) {
        for (const status of ['400', ...(keyless ? [] : ['401']), '403', '429', '503']) t.ok(operation.responses[status], `${name} declares ${status}`)
      }
      if (['post', 'patch', 'put'].includes(method)) {
        for (const status of ['413', '415']) t.ok(operation.responses[status], `${name} declares ${status}`)
      }
      for (const [status, answer] of Object.entries(operation.responses)) {
        if (Number(status) >= 400 && answer.content !== undefined) t.same(Object.keys(answer.content), ['application/json'], `${name} ${status} is JSON`)
      }
    }
  }
  t.equal(doc.paths['/v1/agent/{id}'].get.operationId, 'getAgentById')
  t.same(doc.paths['/v1/call/list/export'].get.responses['404'].content['application/json'].schema, { $ref: '#/components/schemas/Error' })
  t.ok(doc.paths['/v1/call/list/export'].get.responses['200'].content['text/csv'])

  const body = (path: string, method = 'post') => doc.paths[path][method].requestBody.content['application/json'].schema
  const component = (schema: { $ref: string }) => doc.components.schemas[schema.$ref.replace('#/components/schemas/', '')]
  t.same(body('/v1/phone-number/buy').anyOf, [{ required: ['phone_number'] }, { required: ['area_code'] }])
  t.same(body('/v1/subscription/auto-top-up', 'patch').anyOf, [{ required: ['enabled'] }, { required: ['threshold'] }])
  const carrierRules = body('/v1/phone-number/import-carrier').oneOf
  t.equal(carrierRules.length, 4, 'import-carrier: twilio only with both credentials, the sandbox and telnyx with none')
  t.notOk(JSON.stringify(doc).includes('x-checked-in-handler'), 'rules checked in handlers appear as plain keywords')
  const email = new RegExp(component(body('/v1/workspaces/{workspace_id}/invite-member').properties.email).pattern)
  t.ok(email.test('owner@localhost'), 'the e-mail pattern accepts what the server accepts')
  t.notOk(email.test('not an address'))
  t.match(body('/v1/phone-number/connect-to-sip', 'patch').properties.termination_uri, { pattern: /^\^/ })
  const dateFrom = doc.paths['/v1/call/list/export'].get.parameters.find((p: { name: string }) => p.name === 'date_from')
  t.equal(dateFrom.schema.format, 'date')
  t.same(doc.paths['/v1/webhook-deliveries'].get.responses['200'].content['application/json'].schema.properties.data.items, { $ref: '#/components/schemas/WebhookDelivery' })
  const delivery = JSON.stringify(doc.components.schemas.WebhookDelivery)
  t.match(delivery, /"enum":\["pending","delivered","failed"\]/)
  t.match(JSON.stringify(doc), /"format":"http-url","maxLength":2000,"pattern":/)
})

/** Every object of the document, with where it is. */
function * objectsOf (node: unknown, where = '#'): Generator<[string, Record<string, unknown>]> {
  if (node === null || typeof node !== 'object') return
  if (!Array.isArray(node)) yield [where, node as Record<string, unknown>]
  for (const [key, value] of Object.entries(node)) yield * objectsOf(value, `${where}/${key}`)
}

/** A schema as the document compares them: descriptions and examples say where and how it is used. */
const withoutNotes = ({ description, examples, ...rest }: Record<string, unknown>) => rest

t.test('shared schemas and entity answers are named components, only ever referenced', async (t) => {
  const { app } = await setup(t)
  const res = await app.inject({ method: 'GET', url: '/openapi.json' })
  const doc = res.json()
  const schemas: Record<string, Record<string, any>> = doc.components.schemas
  const names = [
    'ObjectId', 'E164PhoneNumber', 'Email', 'Agent', 'AgentVoice', 'DataRetrievalField', 'LlmConfig', 'AgentTemplate',
    'CallType', 'CallDirection', 'CallStatus', 'CallSentiment', 'CallListItem', 'CallDetail', 'CallWorkflow', 'PhoneCallCreated', 'WebCallCreated',
    'StartedCall', 'PhoneNumber', 'AvailablePhoneNumber', 'Customer', 'Workspace', 'WorkspaceMember', 'Subscription', 'CreditEntry',
    'KnowledgeBase', 'KnowledgeBaseFile', 'KnowledgeSearchResults', 'WebhookDelivery', 'WebhookDeliveryDetail', 'DeliveryAttempt',
    'ApiKey', 'Voice', 'Integration', 'IntegrationAuthorization', 'IntegrationDisconnected', 'Appointment', 'Error', 'AgentAction', 'AgentTool', 'RequestHeaders', 'LlmConfigWrite', 'DeliveryOutcome',
    'WebhookSecret', 'IntegrationProvider', 'CostsGroupBy', 'TurnDetection', 'CallLatency', 'LatencyStat', 'TurnTiming', 'LatencyMetrics',
    'CallCallback',
    'TestCaller', 'TestScriptCaller', 'TestPersonaCaller', 'TestToolMock', 'TestExpectation', 'TestExpectationResult', 'TestScenario', 'TestScenarioResult',
    'TestRun', 'TestRunSummary', 'TestChatRequest', 'TestChatReply', 'TestConversation',
    'Contact', 'ContactCall', 'ContactDetail', 'Message', 'MessagingSettings',
    'DoNotCallEntry', 'DoNotCallSource', 'DoNotCallBulkResult', 'DoNotCallAdd',
    'AgentVersion', 'AgentVersionCapability', 'AgentVersionCapabilityChanges', 'AgentVersionChange', 'AgentVersionDiff', 'AgentVersionSummary',
    'Workflow', 'WorkflowStep', 'WorkflowConversationStep', 'WorkflowApiCallStep', 'WorkflowMessageStep', 'WorkflowTransferStep', 'WorkflowEndStep',
    'WorkflowTransition', 'WorkflowCondition',
    'Campaign', 'CampaignCreated', 'CampaignImportReport', 'CampaignProgress', 'CampaignRetrySettings', 'CallingHours'
  ]
  t.same(Object.keys(schemas).sort(), names.sort())
  t.notOk(res.body.includes(COMPONENT), 'the naming keyword is not part of the document')

  const answer = (path: string, method = 'get', status = '200') => doc.paths[path][method].responses[status].content['application/json'].schema
  t.same(answer('/v1/agent/{id}'), { $ref: '#/components/schemas/Agent' })
  t.same(answer('/v1/agent/list').items, { $ref: '#/components/schemas/Agent' })
  t.same(answer('/v1/call/{id}'), { $ref: '#/components/schemas/CallDetail' })
  t.same(answer('/v1/phone-number/{id}'), { $ref: '#/components/schemas/PhoneNumber' })
  t.same(answer('/v1/voice/list').items, { $ref: '#/components/schemas/Voice' })
  t.same(doc.paths['/v1/agent/{id}'].get.parameters[0].schema, { $ref: '#/components/schemas/ObjectId' })
  t.same(schemas.KnowledgeBase.properties.files.items, { $ref: '#/components/schemas/KnowledgeBaseFile' }, 'nested named schemas are components too')
  t.match(schemas.ObjectId, { pattern: '^[0-9a-fA-F]{24}$', 'x-lowercase': true, description: '24-character hexadecimal id' })
  // Used with descriptions of their own (the caller, the number to call): those stay beside each reference.
  t.notOk(schemas.E164PhoneNumber.description)
  const phoneCall = doc.paths['/v1/call/make-phone-call'].post.requestBody.content['application/json'].schema.properties
  t.same(phoneCall.to_number, { $ref: '#/components/schemas/E164PhoneNumber', description: 'number to call' })

  const known = Object.entries(schemas).map(([name, schema]) => [name, withoutNotes(schema)] as const)
  const unresolved: string[] = []
  const inlined: string[] = []
  for (const [where, node] of objectsOf(doc)) {
    if (typeof node.$ref === 'string') {
      if (!node.$ref.startsWith('#/components/schemas/') || schemas[node.$ref.slice('#/components/schemas/'.length)] === undefined) unresolved.push(`${where}: ${node.$ref}`)
      continue
    }
    if (where === `#/components/schemas/${where.split('/')[3]}`) continue
    const copy = known.find(([, schema]) => isDeepStrictEqual(withoutNotes(node), schema))
    if (copy !== undefined) inlined.push(`${where}: ${copy[0]}`)
  }
  t.same(unresolved, [], 'every $ref resolves')
  t.same(inlined, [], 'no schema of a component is inlined anywhere')
  const ajv = new Ajv({ strict: false, discriminator: true })
  ajv.addSchema({ $id: 'openapi', components: doc.components })
  for (const name of names) t.ok(ajv.compile({ $ref: `openapi#/components/schemas/${name}` }), `${name} compiles`)
})

interface Document {
  components: { schemas: Record<string, object> }
  paths: Record<string, { get: Operation }>
}

t.test('one name stands for one schema; a description that differs between uses stays beside the reference', async (t) => {
  const build = async (first: object, second: object) => {
    const app = Fastify()
    t.teardown(() => app.close())
    await registerOpenApi(app)
    app.get('/a', { schema: { response: { 200: first } } }, async () => ({}))
    app.get('/b', { schema: { response: { 200: second } } }, async () => ({}))
    await app.ready()
    return app
  }
  const Thing = Type.Object({ n: Type.Integer() }, { [COMPONENT]: 'Thing', description: 'a thing' })
  const other = await build(Thing, Type.Object({ n: Type.String() }, { [COMPONENT]: 'Thing' }))
  t.throws(() => other.swagger(), /two different schemas are named Thing/)

  const described = await build(Thing, { ...Thing, description: 'the other thing' })
  const doc = described.swagger() as Document
  t.same(doc.components.schemas.Thing, { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } })
  t.same(doc.paths['/b'].get.responses['200'].content?.['application/json'].schema, { $ref: '#/components/schemas/Thing', description: 'the other thing' })

  const same = await build(Thing, Type.Array(Thing))
  t.same((same.swagger() as Document).components.schemas.Thing, { description: 'a thing', type: 'object', required: ['n'], properties: { n: { type: 'integer' } } })
})

t.test('a wrong method answers 405 with Allow; a non-JSON body 415; __proto__ is dropped like any unknown property', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  const wrong = await app.inject({ method: 'PUT', url: '/v1/agent/65a0f0000000000000000001', headers })
  t.equal(wrong.statusCode, 405)
  t.equal(wrong.headers.allow, 'GET, HEAD, PATCH, DELETE')
  t.match(wrong.json(), { statusCode: 405, error: 'Method Not Allowed', code: 'method_not_allowed' })
  t.equal((await app.inject({ method: 'DELETE', url: '/v1/api-keys?x=1', headers })).headers.allow, 'GET, HEAD, POST')
  t.equal((await app.inject({ method: 'GET', url: '/v1/no-such-thing', headers })).statusCode, 404)
  const long = await app.inject({ method: 'GET', url: `/v1/agent/${'a'.repeat(101)}`, headers })
  t.match(long.json(), { statusCode: 400, code: 'invalid_id' }, 'a path id too long for the router is a malformed id too')

  const text = await app.inject({ method: 'POST', url: '/v1/api-keys', headers: { ...headers, 'content-type': 'text/plain' }, payload: 'name' })
  t.equal(text.statusCode, 415)
  t.match(text.json(), { code: 'unsupported_media_type' })

  const poisoned = await app.inject({
    method: 'POST', url: '/v1/api-keys', headers: { ...headers, 'content-type': 'application/json' },
    payload: '{"name":"ci","__proto__":{"admin":true},"constructor":{"prototype":{"admin":true}}}'
  })
  t.equal(poisoned.statusCode, 201)
  t.equal(poisoned.json().name, 'ci')
  t.notOk(({} as Record<string, unknown>).admin, 'no prototype was touched')
})

t.test('an export that fails before its first byte answers the JSON error, without the attachment header', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  await sql`alter table calls rename to calls_away`.execute(db)
  const res = await app.inject({ method: 'GET', url: '/v1/call/list/export?date_from=2024-01-01&date_to=2024-01-31', headers })
  t.equal(res.statusCode, 500)
  t.match(res.headers['content-type'], /^application\/json/)
  t.notOk(res.headers['content-disposition'])
  t.match(res.json(), { statusCode: 500, code: 'internal_error' })
})
