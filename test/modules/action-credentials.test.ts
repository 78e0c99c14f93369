import { Webhook } from 'standardwebhooks'
import t from 'tap'
import { createLogger } from '../../src/logger.ts'
import { PRIVATE_ADDRESS_REFUSED } from '../../src/net/guard.ts'
import { findCapability } from '../../src/modules/agents/queries.ts'
import { loadAgentLive } from '../helpers/live.ts'
import { createMailer } from '../../src/mail/mailer.ts'
import { addAction, createAgent } from '../helpers/calls.ts'
import { fastSetup } from '../helpers/deliveries.ts'
import { startMcpServer } from '../helpers/mcp-server.ts'
import { startReceiver } from '../helpers/receiver.ts'

// Stored credentials of actions and tools (docs/agents.md, "Stored credentials follow the URL's origin") and the
// Test button's own signing secret (docs/deliveries.md, "Signatures"): the API's side; the console's is in
// test/console/agent-capabilities.test.ts. Two receivers on 127.0.0.1 differ by port, so they are two origins.

const OWNER_KEY = 'Bearer owner-secret'

t.test('an api_call action: a new origin drops the stored header values unless the change types them; a new path keeps them', async (t) => {
  const ctx = await fastSetup(t)
  const owners = await startReceiver(t)
  const other = await startReceiver(t)
  const agent = await createAgent(ctx.app, ctx.account)
  const action = await addAction(ctx.app, ctx.account, agent._id, { name: 'CRM', url: `${owners.url}/calls`, headers: { Authorization: OWNER_KEY, 'X-Tenant': 'acme' } })
  const base = `/v1/agent/${agent._id}/actions/${action._id}`
  const patch = async (settings: Record<string, unknown>) => await ctx.app.inject({ method: 'PATCH', url: base, headers: ctx.account.headers, payload: { settings } })
  const test = async () => (await ctx.app.inject({ method: 'POST', url: `${base}/test`, headers: ctx.account.headers })).json()

  // Only the path changes: same origin, the stored values stay and are sent.
  const samePath = await patch({ url: `${owners.url}/v2/calls` })
  t.equal(samePath.statusCode, 200)
  t.same(samePath.json().settings.headers, { Authorization: '********', 'X-Tenant': '********' })
  t.match(await test(), { outcome: { ok: true } })
  t.match(owners.received.at(-1), { url: '/v2/calls', headers: { authorization: OWNER_KEY, 'x-tenant': 'acme' } })

  // Asking to keep a stored value (the mask) while the origin changes is refused, and nothing changes.
  const keep = await patch({ url: `${other.url}/hook`, headers: { Authorization: '********' } })
  t.equal(keep.statusCode, 400)
  t.match(keep.json(), { code: 'bad_request', message: /^body\.settings\.headers\.Authorization cannot keep its stored value: .*another \(scheme, host or port\)/ })
  t.match((await findCapability(ctx.db, ctx.account.user.id, { table: 'agent_actions', typeColumn: 'action_type' }, agent._id, action._id))!.settings, { url: `${owners.url}/v2/calls`, headers: { Authorization: OWNER_KEY } })

  // Only the URL changes to another origin: the stored values are dropped, and the new receiver gets none.
  const moved = await patch({ url: `${other.url}/hook` })
  t.equal(moved.statusCode, 200)
  t.same(moved.json().settings.headers, {}, 'no stored header is left')
  t.match(await test(), { outcome: { ok: true } })
  t.equal(other.received.length, 1)
  t.notOk('authorization' in other.received[0].headers, 'the owner\'s Authorization did not reach the other origin')
  t.notOk('x-tenant' in other.received[0].headers)

  // Typed again in the same change that moves the URL: sent.
  const back = await patch({ url: `${owners.url}/calls`, headers: { Authorization: 'Bearer typed-again' } })
  t.equal(back.statusCode, 200)
  t.same(back.json().settings.headers, { Authorization: '********' })
  await test()
  t.match(owners.received.at(-1), { url: '/calls', headers: { authorization: 'Bearer typed-again' } })

  // A scheme or port of its own is another origin too; {{variables}} in the host stand for themselves.
  const templated = await patch({ url: 'https://{{tenant}}.example.com/x', headers: { Authorization: 'Bearer t' } })
  t.equal(templated.statusCode, 200)
  t.same((await patch({ url: 'https://{{Tenant}}.example.com/y' })).json().settings.headers, {}, 'another variable in the host is another origin')
  await patch({ url: 'https://{{tenant}}.example.com/x', headers: { Authorization: 'Bearer t' } })
  t.same((await patch({ url: 'https://{{tenant}}.example.com/z?a={{call_id}}' })).json().settings.headers, { Authorization: '********' }, 'the same host template keeps them')
  t.same((await patch({ url: 'http://{{tenant}}.example.com/z' })).json().settings.headers, {}, 'http is another origin than https')
})

t.test('an mcp tool: a new server origin drops the stored headers, so the agent\'s calls never send them there', async (t) => {
  const ctx = await fastSetup(t)
  const owners = await startMcpServer(t)
  const other = await startMcpServer(t)
  const agent = await createAgent(ctx.app, ctx.account)
  const created = await ctx.app.inject({
    method: 'POST',
    url: `/v1/agent/${agent._id}/tools`,
    headers: ctx.account.headers,
    payload: { tool_type: 'mcp', settings: { name: 'Orders', server_url: owners.url, headers: { Authorization: OWNER_KEY } } }
  })
  t.equal(created.statusCode, 201)
  const tool = created.json()
  const toolsOf = async () => {
    const log = createLogger(ctx.config)
    const listed = await loadAgentLive({ db: ctx.db, config: ctx.config, log, mailer: createMailer(ctx.db, ctx.config, log), userId: ctx.account.user.id, callId: 'c', signal: new AbortController().signal, variables: () => ({}), customer: { phone: null, email: null }, language: 'en' }, agent._id)
    await listed.close()
    return listed.tools
  }
  t.ok((await toolsOf()).length > 0)
  t.ok(owners.requests.every((r) => r.headers.authorization === OWNER_KEY), 'the owner\'s server gets its header')

  const moved = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}/tools/${tool._id}`, headers: ctx.account.headers, payload: { settings: { server_url: other.url } } })
  t.equal(moved.statusCode, 200)
  t.same(moved.json().settings.headers, {})
  t.ok((await toolsOf()).length > 0, 'the agent lists the other server\'s tools')
  t.ok(other.requests.length > 0)
  t.ok(other.requests.every((r) => r.headers.authorization === undefined), 'without the owner\'s Authorization')
})

t.test('Test requests are signed with the account\'s test secret, never with its delivery secret', async (t) => {
  const ctx = await fastSetup(t)
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, ctx.account)
  const action = await addAction(ctx.app, ctx.account, agent._id, { name: 'Signed', url: `${receiver.url}/hook` })
  const secrets = (await ctx.app.inject({ method: 'GET', url: '/v1/webhook-secret', headers: ctx.account.headers })).json()
  t.match(secrets, { secret: /^whsec_/, test_secret: /^whsec_/ })
  t.not(secrets.test_secret, secrets.secret)
  const again = (await ctx.app.inject({ method: 'GET', url: '/v1/webhook-secret', headers: ctx.account.headers })).json()
  t.equal(again.test_secret, secrets.test_secret, 'made once, then kept')

  await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions/${action._id}/test`, headers: ctx.account.headers })
  const [request] = await receiver.waitFor(1)
  t.throws(() => new Webhook(secrets.secret).verify(request.body, request.headers as Record<string, string>), 'the delivery secret does not verify a Test request')
  t.match(new Webhook(secrets.test_secret).verify(request.body, request.headers as Record<string, string>), { call_id: '000000000000000000000000' }, 'the test secret does')

  // A rotation replaces the delivery secret only; Test requests still do not verify with any delivery secret.
  const rotated = (await ctx.app.inject({ method: 'POST', url: '/v1/webhook-secret/rotate', headers: ctx.account.headers })).json()
  t.equal(rotated.test_secret, secrets.test_secret)
  await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions/${action._id}/test`, headers: ctx.account.headers })
  const [, second] = await receiver.waitFor(2)
  for (const secret of [secrets.secret, rotated.secret]) t.throws(() => new Webhook(secret).verify(second.body, second.headers as Record<string, string>))
  t.ok(new Webhook(secrets.test_secret).verify(second.body, second.headers as Record<string, string>))
})

t.test('a Test to a private address the user typed says so and names DELIVERY_ALLOW_PRIVATE_NETWORKS', async (t) => {
  const ctx = await fastSetup(t, { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'false' })
  const receiver = await startReceiver(t)
  const port = new URL(receiver.url).port
  const agent = await createAgent(ctx.app, ctx.account)
  for (const url of [`http://127.0.0.1:${port}/by-ip`, `http://localhost:${port}/by-name`]) {
    const action = await addAction(ctx.app, ctx.account, agent._id, { name: url, url })
    const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions/${action._id}/test`, headers: ctx.account.headers })
    t.equal(res.statusCode, 200)
    t.match(res.json(), { outcome: { ok: false, error: PRIVATE_ADDRESS_REFUSED } }, url)
    t.match(res.json().outcome.error, 'DELIVERY_ALLOW_PRIVATE_NETWORKS')
    t.notMatch(res.json().outcome.error, port, 'no port in the message')
  }
  t.equal(receiver.received.length, 0, 'nothing was sent')
})
