import http from 'node:http'
import type { AddressInfo } from 'node:net'
import pino from 'pino'
import t, { type Test } from 'tap'
import { loadAgentLive } from '../helpers/live.ts'
import type { LiveTool, ToolContext } from '../../src/modules/capabilities/live.ts'
import { createMailer } from '../../src/mail/mailer.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { upload } from '../helpers/documents.ts'
import { startMcpServer } from '../helpers/mcp-server.ts'
import { poll } from '../helpers/poll.ts'

const ENV = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', MCP_TIMEOUT_MS: '500' }
const SAFE_NAME = /^[a-zA-Z0-9_-]{1,64}$/

interface LogEntry { level: number, msg: string, [key: string]: unknown }

/** What a session gives the tools, with a logger whose entries the test reads. */
function toolContext (ctx: TestContext, account: Account): { tool: ToolContext, logs: LogEntry[] } {
  const logs: LogEntry[] = []
  const log = pino({ level: 'debug' }, { write: (line: string) => { logs.push(JSON.parse(line)) } })
  const mailer = createMailer(ctx.db, ctx.config, log)
  return {
    tool: { db: ctx.db, config: ctx.config, log, mailer, userId: account.user.id, callId: 'call-1', signal: new AbortController().signal, variables: () => ({}), customer: { phone: null, email: null }, language: 'en' },
    logs
  }
}

async function addTool (ctx: TestContext, account: Account, agentId: string, toolType: string, settings: Record<string, unknown>, isActive = true) {
  const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agentId}/tools`, headers: account.headers, payload: { tool_type: toolType, settings, is_active: isActive } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json() as { _id: string }
}

function named (tools: LiveTool[], name: string): LiveTool {
  const tool = tools.find((candidate) => candidate.spec.name === name)
  if (tool === undefined) throw new Error(`no tool ${name} among ${tools.map((candidate) => candidate.spec.name).join(', ')}`)
  return tool
}

async function loaded (t: Test, context: ToolContext, agentId: string) {
  const result = await loadAgentLive(context, agentId)
  t.teardown(result.close)
  return result
}

t.test('end_call, call_forwarding and agent_transfer act as the session expects; names are safe and unique', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const billing = await createAgent(ctx.app, account, { agent_name: 'Billing' })
  const retired = await createAgent(ctx.app, account, { agent_name: 'Retired' })
  const foreign = await createAgent(ctx.app, other, { agent_name: 'Foreign' })

  await addTool(ctx, account, agent._id, 'end_call', { name: 'Hang up' })
  await addTool(ctx, account, agent._id, 'end_call', { name: 'Hang up', description: 'when the caller is rude' })
  await addTool(ctx, account, agent._id, 'end_call', { name: 'Switched off' }, false)
  await addTool(ctx, account, agent._id, 'call_forwarding', { name: 'To a human!', phone_number: '+4930123456', transfer_message: 'One moment please', timeout_seconds: 20, show_caller_number: true })
  await addTool(ctx, account, agent._id, 'call_forwarding', { name: 'Büro', phone_number: '+4930999999' })
  await addTool(ctx, account, agent._id, 'agent_transfer', { name: 'Billing', agent_id: billing._id })
  await addTool(ctx, account, agent._id, 'agent_transfer', { name: 'Retired', agent_id: retired._id })
  const stolen = await addTool(ctx, account, agent._id, 'agent_transfer', { name: 'Foreign', agent_id: retired._id })
  await addTool(ctx, account, agent._id, 'agent_transfer', { name: 'Elsewhere', phone_number: '+4930555000' })
  // Actions of every `when`.
  for (const when of ['after_call', 'during_call', 'both', undefined]) {
    const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions`, headers: account.headers, payload: { action_type: 'api_call', settings: { name: `Hook ${when ?? 'default'}`, url: 'https://hooks.example.test/x', ...(when === undefined ? {} : { when }) } } })
    t.equal(res.statusCode, 201, res.body)
  }
  // The API refuses another account's agent; a row changed behind its back must still not reach it.
  await ctx.db.updateTable('agent_tools').set({ settings: JSON.stringify({ name: 'Foreign', agent_id: foreign._id }) }).where('id', '=', stolen._id).execute()
  const patch = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${retired._id}`, headers: account.headers, payload: { status: 'inactive' } })
  t.equal(patch.statusCode, 200, patch.body)

  const { tool: context } = toolContext(ctx, account)
  const { tools } = await loaded(t, context, agent._id)
  t.same(tools.map((tool) => [tool.type, tool.spec.name]), [
    ['end_call', 'Hang_up'], ['end_call', 'Hang_up_2'], ['call_forwarding', 'To_a_human'], ['call_forwarding', 'B_ro'],
    ['agent_transfer', 'Billing'], ['agent_transfer', 'Retired'], ['agent_transfer', 'Foreign'], ['agent_transfer', 'Elsewhere'],
    ['api_call', 'Hook_during_call'], ['api_call', 'Hook_both']
  ], 'actions are offered when their `when` includes the call; after_call (the default) are not')
  t.ok(tools.every((tool) => SAFE_NAME.test(tool.spec.name)))

  const hangUp = named(tools, 'Hang_up')
  t.match(hangUp.spec, { description: /conversation is over/, parameters: { type: 'object', properties: { reason: { type: 'string' } } } })
  t.equal(named(tools, 'Hang_up_2').spec.description, 'when the caller is rude')
  t.same(await hangUp.run({ reason: 'goodbye' }, context), { output: 'The call is ending.', endCall: {} })

  t.same(await named(tools, 'To_a_human').run({}, context), {
    output: 'The call is put through to a person as soon as you have finished speaking: say exactly this to the caller: One moment please',
    forwardTo: { type: 'call_forwarding', phoneNumber: '+4930123456', timeoutSeconds: 20, showCallerNumber: true }
  })
  t.same((await named(tools, 'B_ro').run({ reason: 'billing' }, context)).forwardTo, { type: 'call_forwarding', phoneNumber: '+4930999999', timeoutSeconds: 30, showCallerNumber: false })
  t.same((await named(tools, 'Elsewhere').run({}, context)).forwardTo, { type: 'agent_transfer', phoneNumber: '+4930555000', timeoutSeconds: 30, showCallerNumber: false })

  t.same(await named(tools, 'Billing').run({ reason: 'invoice question' }, context), { output: 'The call is being transferred to Billing.', transferTo: billing._id })
  await t.rejects(named(tools, 'Retired').run({}, context), /not active/)
  await t.rejects(named(tools, 'Foreign').run({}, context), /does not exist/)
})

t.test('api_rag answers with passages of the tool\'s own knowledge bases', async (t) => {
  const ctx = await setup(t, ENV, { workers: true })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const kbOf = async (name: string, content: string) => {
    const res = await upload(ctx.app, '/v1/knowledge-base', account.headers, { name, description: name }, [{ name: `${name}.txt`, content, type: 'text/plain' }])
    if (res.statusCode !== 200) throw new Error(res.body)
    const id = res.json()._id as string
    const kb = await poll(async () => (await ctx.app.inject({ method: 'GET', url: `/v1/knowledge-base/${id}`, headers: account.headers })).json(),
      (body) => body.files.every((file: { status: string }) => file.status === 'ready'), { message: (body) => JSON.stringify(body.files) })
    return kb._id as string
  }
  const shipping = await kbOf('shipping', 'Parcels to Norway take five working days and cost twelve euros.\n\nReturns are free within thirty days of delivery.')
  await kbOf('unrelated', 'Parcels to Iceland travel by ship and take three weeks.')
  await addTool(ctx, account, agent._id, 'api_rag', { name: 'Search shipping', knowledge_base_ids: [shipping], top_k: 1 })

  const { tool: context } = toolContext(ctx, account)
  const { tools } = await loaded(t, context, agent._id)
  const tool = named(tools, 'Search_shipping')
  t.match(tool.spec, { description: /knowledge base/, parameters: { required: ['query'], properties: { query: { type: 'string' } } } })

  const found = JSON.parse((await tool.run({ query: 'How long does a parcel to Norway take?' }, context)).output)
  t.equal(found.length, 1, 'top_k bounds the passages')
  t.match(found[0], { content: /Norway take five working days/, file: 'shipping.txt' })
  t.notOk(JSON.stringify(found).includes('Iceland'), 'only the tool\'s own knowledge bases are searched')
  t.match((await tool.run({ query: 'submarine' }, context)).output, /^Nothing was found/)
  await t.rejects(tool.run({}, context), /query is required/)
})

t.test('mcp offers the allowed tools of its server and calls them with the configured headers', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const server = await startMcpServer(t)
  // A closed port, and a server that takes the connection and never answers.
  const closed = http.createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const closedUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/mcp`
  await new Promise<void>((resolve) => closed.close(() => resolve()))
  const silent = http.createServer(() => {})
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { silent.closeAllConnections(); silent.close() })

  await addTool(ctx, account, agent._id, 'mcp', {
    name: 'Orders', server_url: server.url, allowed_tools: ['lookup_order', 'fails', 'slow', 'orders.status'], headers: { Authorization: 'Bearer s3cret' }
  })
  await addTool(ctx, account, agent._id, 'mcp', { name: 'Unreachable', server_url: closedUrl })
  await addTool(ctx, account, agent._id, 'mcp', { name: 'Silent', server_url: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/mcp` })
  await addTool(ctx, account, agent._id, 'mcp', { name: 'Everything', description: 'The order system', server_url: server.url })
  await addTool(ctx, account, agent._id, 'end_call', { name: 'slow' })

  const { tool: context, logs } = toolContext(ctx, account)
  const { tools } = await loaded(t, context, agent._id)
  t.same(tools.map((tool) => [tool.type, tool.spec.name]), [
    ['mcp', 'lookup_order'], ['mcp', 'fails'], ['mcp', 'slow'], ['mcp', 'orders_status'],
    ['mcp', 'lookup_order_2'], ['mcp', 'fails_2'], ['mcp', 'slow_2'], ['mcp', 'secret_tool'], ['mcp', 'orders_status_2'],
    ['end_call', 'slow_3']
  ])
  t.same(logs.filter((entry) => entry.level === 40).map((entry) => entry.msg), [
    'mcp skipped: it could not be prepared for the call', 'mcp skipped: it could not be prepared for the call'
  ], 'the unreachable and the silent server are skipped')

  const lookup = named(tools, 'lookup_order')
  t.match(lookup.spec, { description: 'Looks up an order', parameters: { type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'] } })
  t.equal(await lookup.run({ order_id: 'A17' }, context).then((outcome) => outcome.output), 'Order A17 ships tomorrow')
  t.same(server.calls.at(-1), { name: 'lookup_order', arguments: { order_id: 'A17' } })
  t.equal((await named(tools, 'orders_status').run({}, context)).output, 'All systems go', 'called by its server name')
  t.same(server.calls.at(-1), { name: 'orders.status', arguments: {} })

  const first = server.requests.filter((request) => request.headers.authorization === 'Bearer s3cret')
  const second = server.requests.filter((request) => request.headers.authorization === undefined)
  t.ok(first.length >= 3, 'the configured header arrives with every request of its tool')
  t.equal(first.length + second.length, server.requests.length, 'and with no other tool\'s')

  await t.rejects(named(tools, 'fails').run({}, context), /The order system is down/)
  await t.rejects(named(tools, 'slow').run({}, context), /the tool slow did not answer within 500 ms/)
  t.same(server.calls.at(-1), { name: 'slow', arguments: {} })
  server.release()
})

t.test('an MCP server on a refused address is skipped before any connection is opened', async (t) => {
  const ctx = await setup(t, { MCP_TIMEOUT_MS: '500' })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const server = await startMcpServer(t)
  await addTool(ctx, account, agent._id, 'mcp', { name: 'By address', server_url: server.url })
  await addTool(ctx, account, agent._id, 'mcp', { name: 'By name', server_url: server.url.replace('127.0.0.1', 'localhost') })
  await addTool(ctx, account, agent._id, 'end_call', { name: 'Hang up' })

  const { tool: context, logs } = toolContext(ctx, account)
  const { tools } = await loaded(t, context, agent._id)
  t.same(tools.map((tool) => tool.spec.name), ['Hang_up'], 'the call goes on without the servers')
  const warnings = logs.filter((entry) => entry.level === 40)
  t.equal(warnings.length, 2)
  t.ok(warnings.every((entry) => /not public/.test(JSON.stringify(entry.err))), 'refused by the address rules')
  t.equal(server.connections, 0, 'no connection reached the server')
  t.same(server.requests, [])
})

t.test('an MCP server that redirects to another origin or answers too much is skipped', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  const server = await startMcpServer(t)
  const listen = async (handler: http.RequestListener) => {
    const stub = http.createServer(handler)
    await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve))
    t.teardown(() => { stub.closeAllConnections(); stub.close() })
    return `http://127.0.0.1:${(stub.address() as AddressInfo).port}/mcp`
  }
  const redirecting = await listen((_req, res) => { res.writeHead(307, { location: server.url }).end() })
  // Valid JSON-RPC answers, the first padded past the limit on what one answer may carry.
  const huge = await listen((req, res) => {
    let body = ''
    req.on('data', (chunk) => { body += chunk })
    req.on('end', () => {
      const message = JSON.parse(body)
      if (message.id === undefined) return res.writeHead(202).end()
      const result = message.method === 'initialize'
        ? { protocolVersion: message.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'huge', version: '1' }, instructions: 'a'.repeat(5 * 1024 * 1024) }
        : { tools: [] }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }))
    })
  })
  await addTool(ctx, account, agent._id, 'mcp', { name: 'Redirecting', server_url: redirecting, headers: { Authorization: 'Bearer s3cret' } })
  await addTool(ctx, account, agent._id, 'mcp', { name: 'Huge', server_url: huge })

  const { tool: context, logs } = toolContext(ctx, account)
  const { tools } = await loaded(t, context, agent._id)
  t.same(tools, [])
  const reasons = logs.filter((entry) => entry.level === 40).map((entry) => JSON.stringify(entry.err))
  t.match(reasons, [/redirected to another origin/, /answer passed 4194304 bytes/])
  t.same(server.requests, [], 'the redirect was not followed, so the credentials stayed home')
})
