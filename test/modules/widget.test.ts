import t from 'tap'
import { createAccount, setup, type Account } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import type { FastifyInstance } from 'fastify'

// The website widget's API (docs/widget.md): the agent's public key (create, rotate, show, delete), the widget's
// look, and web calls started with the key: only its agent's, only while the widget is on, only from the agent's
// allowed origins (none listed: refused), and at most WIDGET_CALLS_PER_ADDRESS_HOUR per client address.

const SITE = 'http://127.0.0.2:8080'

/** An agent's widget settings are set by PATCH (create does not take them). */
async function enableWidget (app: FastifyInstance, account: Account, agentId: string, settings: Record<string, unknown> = {}) {
  const res = await app.inject({ method: 'PATCH', url: `/v1/agent/${agentId}`, headers: account.headers, payload: { widget_settings: { enabled: true, allowed_origins: [SITE], ...settings } } })
  if (res.statusCode !== 200) throw new Error(res.body)
}

async function widgetAgent (app: FastifyInstance, account: Account, settings: Record<string, unknown> = {}) {
  const agent = await createAgent(app, account)
  await enableWidget(app, account, agent._id, { primary_color: '#0f766e', position: 'bottom-left', greeting: 'Questions? Call us', ...settings })
  const key = (await app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/widget-key`, headers: account.headers })).json()
  return { agent, key: key.widget_key as string }
}

/** `origin` null: a request without an Origin header (not a browser's page). */
const callWith = async (app: FastifyInstance, agentId: string, key: string | undefined, origin: string | null = SITE, remoteAddress = '127.0.0.9') =>
  await app.inject({
    method: 'POST',
    url: `/v1/widget/${agentId}/call`,
    remoteAddress,
    headers: { ...(key === undefined ? {} : { 'x-widget-key': key }), ...(origin === null ? {} : { origin }) }
  })

t.test('a widget key: none at first, created, shown, rotated (the old one stops at once), deleted', async (t) => {
  const { app, db } = await setup(t, { PUBLIC_BASE_URL: 'https://switchboard.example.com' })
  const account = await createAccount(db)
  const agent = await createAgent(app, account)
  await enableWidget(app, account, agent._id)
  const url = `/v1/agent/${agent._id}/widget-key`

  const none = await app.inject({ method: 'GET', url, headers: account.headers })
  t.equal(none.statusCode, 200)
  t.match(none.json(), { agent_id: agent._id, widget_key: null, created_at: null, snippet: /data-token-url=/ })

  const created = await app.inject({ method: 'POST', url, headers: account.headers })
  t.equal(created.statusCode, 201)
  const first = created.json()
  t.match(first, { agent_id: agent._id, widget_key: /^wk_[A-Za-z0-9]{32}$/, created_at: Number })
  t.equal(first.snippet, `<script src="https://switchboard.example.com/widget.js" data-agent-id="${agent._id}" data-widget-key="${first.widget_key}" defer></script>`)
  t.same((await app.inject({ method: 'GET', url, headers: account.headers })).json(), first, 'its own GET shows it')
  t.equal((await callWith(app, agent._id, first.widget_key)).statusCode, 201, 'the key starts calls')

  const rotated = (await app.inject({ method: 'POST', url, headers: account.headers })).json()
  t.not(rotated.widget_key, first.widget_key)
  t.match((await callWith(app, agent._id, first.widget_key)).json(), { statusCode: 403, code: 'invalid_widget_key' }, 'the rotated-out key is refused')
  t.equal((await callWith(app, agent._id, rotated.widget_key)).statusCode, 201)

  t.equal((await app.inject({ method: 'DELETE', url, headers: account.headers })).statusCode, 204)
  t.match((await app.inject({ method: 'GET', url, headers: account.headers })).json(), { widget_key: null })
  t.match((await callWith(app, agent._id, rotated.widget_key)).json(), { statusCode: 403, code: 'invalid_widget_key' }, 'a deleted key is refused')
  t.equal((await app.inject({ method: 'DELETE', url, headers: account.headers })).statusCode, 204, 'deleting again changes nothing')

  // Deleting the agent takes its key along.
  const again = (await app.inject({ method: 'POST', url, headers: account.headers })).json()
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/agent/${agent._id}`, headers: account.headers })).statusCode, 204)
  t.same(await db.selectFrom('widget_keys').selectAll().where('key', '=', again.widget_key).execute(), [])
})

t.test('another account\'s agent is 404 for its key; bad ids and keys are 4xx', async (t) => {
  const { app, db } = await setup(t)
  const owner = await createAccount(db)
  const other = await createAccount(db)
  const { agent, key } = await widgetAgent(app, owner)
  for (const method of ['GET', 'POST', 'DELETE'] as const) {
    t.match((await app.inject({ method, url: `/v1/agent/${agent._id}/widget-key`, headers: other.headers })).json(), { statusCode: 404, code: 'not_found' }, `${method} of another account's agent`)
    t.match((await app.inject({ method, url: '/v1/agent/nope/widget-key', headers: owner.headers })).json(), { statusCode: 400 }, `${method} with a bad id`)
    t.equal((await app.inject({ method, url: `/v1/agent/${agent._id}/widget-key` })).statusCode, 401, `${method} without an API key`)
  }
  t.match((await app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/widget-key`, headers: owner.headers })).json(), { widget_key: key }, 'the other account changed nothing')

  // The key route: no key, a malformed or unknown key, a key of another agent, a bad agent id.
  const otherAgent = await widgetAgent(app, other)
  t.match((await callWith(app, agent._id, undefined)).json(), { statusCode: 401, code: 'missing_widget_key' })
  t.match((await callWith(app, agent._id, 'nope')).json(), { statusCode: 403, code: 'invalid_widget_key' })
  t.match((await callWith(app, agent._id, `wk_${'a'.repeat(32)}`)).json(), { statusCode: 403, code: 'invalid_widget_key' })
  t.match((await callWith(app, agent._id, otherAgent.key)).json(), { statusCode: 403, code: 'invalid_widget_key' }, 'another agent\'s key')
  t.match((await callWith(app, 'nope', key)).json(), { statusCode: 400, code: 'invalid_id' })
  t.match((await callWith(app, agent._id, 'x'.repeat(300))).json(), { statusCode: 400, code: 'validation_error' })
  t.equal(await db.selectFrom('calls').select('id').execute().then((rows) => rows.length), 0, 'no call was started')
})

t.test('a key call: what the browser needs to open the stream, a call of the agent\'s account marked as the widget\'s', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const { agent, key } = await widgetAgent(app, account)
  const res = await callWith(app, agent._id, key)
  t.equal(res.statusCode, 201)
  t.equal(res.headers['access-control-allow-origin'], SITE)
  const body = res.json()
  t.match(body, { call_id: /^[0-9a-f]{24}$/, agent_id: agent._id, agent_name: 'Agent', mode: 'text', stream_path: '/web-call/stream', access_token: /^wct_/, access_token_expires_at: Number })
  const call = (await app.inject({ method: 'GET', url: `/v1/call/${body.call_id}`, headers: account.headers })).json()
  t.match(call, { call_type: 'web', agent_id: agent._id, call_status: 'started', custom_data: { source: 'widget', origin: SITE } })
  // The token joins like make-web-call's.
  t.match((await app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: body.access_token } })).json(), { call_id: body.call_id })
})

t.test('widget_settings.enabled false: the key is refused, and the widget shows nowhere', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const { agent, key } = await widgetAgent(app, account)
  await app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { widget_settings: { enabled: false } } })
  const res = await callWith(app, agent._id, key)
  t.match(res.json(), { statusCode: 403, code: 'widget_disabled', message: /widget_settings\.enabled is false/ })
  t.equal(res.headers['access-control-allow-origin'], SITE, 'the site reads why')
  t.match((await app.inject({ method: 'GET', url: `/v1/widget/${agent._id}`, headers: { origin: SITE } })).json(), { statusCode: 403, code: 'widget_disabled' })
})

t.test('origins: a site the agent does not list is refused, its preflight too; an empty list refuses every site', async (t) => {
  const { app, db } = await setup(t)
  const account = await createAccount(db)
  const { agent, key } = await widgetAgent(app, account)
  const preflight = async (origin: string) => await app.inject({
    method: 'OPTIONS', url: `/v1/widget/${agent._id}/call`, headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-widget-key' }
  })

  const allowed = await preflight(SITE)
  t.equal(allowed.statusCode, 204)
  t.match(allowed.headers, { 'access-control-allow-origin': SITE, 'access-control-allow-methods': 'POST', 'access-control-allow-headers': 'x-widget-key', vary: /origin/i })
  const refused = await preflight('http://127.0.0.3:8080')
  t.equal(refused.statusCode, 403)
  t.notOk(refused.headers['access-control-allow-origin'], 'no CORS for another site')

  const other = await callWith(app, agent._id, key, 'http://127.0.0.3:8080')
  t.match(other.json(), { statusCode: 403, code: 'origin_not_allowed' })
  t.notOk(other.headers['access-control-allow-origin'])
  t.match((await callWith(app, agent._id, key, null)).json(), { statusCode: 403, code: 'origin_not_allowed' }, 'no Origin at all')
  t.match((await app.inject({ method: 'GET', url: `/v1/widget/${agent._id}`, headers: { origin: 'http://127.0.0.3:8080' } })).json(), { statusCode: 403, code: 'origin_not_allowed' })

  const look = await app.inject({ method: 'GET', url: `/v1/widget/${agent._id}`, headers: { origin: SITE } })
  t.equal(look.headers['access-control-allow-origin'], '*')
  t.same(look.json(), { agent_id: agent._id, agent_name: 'Agent', theme: 'light', primary_color: '#0f766e', position: 'bottom-left', greeting: 'Questions? Call us', allowed_origins_set: true })

  await app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}`, headers: account.headers, payload: { widget_settings: { allowed_origins: [] } } })
  t.match((await callWith(app, agent._id, key)).json(), { statusCode: 403, code: 'widget_origins_required', message: /works on no site/ })
  t.equal((await preflight(SITE)).statusCode, 403)
  t.match((await app.inject({ method: 'GET', url: `/v1/widget/${agent._id}`, headers: { origin: SITE } })).json(), { allowed_origins_set: false }, 'the look still shows (a site with a backend needs no list)')
  t.equal(await db.selectFrom('calls').select('id').execute().then((rows) => rows.length), 0)
})

t.test('at most WIDGET_CALLS_PER_ADDRESS_HOUR key calls per address and agent, however many arrive at once', async (t) => {
  const { app, db } = await setup(t, { WIDGET_CALLS_PER_ADDRESS_HOUR: '7', DATABASE_POOL_SIZE: '10' })
  const account = await createAccount(db)
  const { agent, key } = await widgetAgent(app, account)
  const answers = await Promise.all(Array.from({ length: 150 }, async () => await callWith(app, agent._id, key, SITE, '127.0.0.9')))
  const statuses = answers.map((res) => res.statusCode)
  t.equal(statuses.filter((s) => s === 201).length, 7, 'seven calls started')
  t.equal(statuses.filter((s) => s === 429).length, 143, 'the others refused')
  const limited = answers.find((res) => res.statusCode === 429)!
  t.match(limited.json(), { code: 'widget_rate_limited', message: /most calls/ })
  t.ok(Number(limited.headers['retry-after']) > 3500, 'retry after the hour')
  t.equal(limited.headers['access-control-allow-origin'], SITE, 'the site reads the refusal')
  t.equal(await db.selectFrom('calls').select('id').where('agent_id', '=', agent._id).execute().then((rows) => rows.length), 7, 'seven calls stored')

  t.equal((await callWith(app, agent._id, key, SITE, '127.0.0.10')).statusCode, 201, 'another address has its own budget')
  const second = await widgetAgent(app, account)
  t.equal((await callWith(app, second.agent._id, second.key, SITE, '127.0.0.9')).statusCode, 201, 'and another agent')

  // Once the hour is over the address starts again (the window moved back instead of waiting for it).
  await db.updateTable('hourly_budgets').set({ window_ends_at: new Date(Date.now() - 1000) }).execute()
  t.equal((await callWith(app, agent._id, key, SITE, '127.0.0.9')).statusCode, 201)
})

t.test('/widget.js: a script with caching, CORS and no sniffing; a repeat with its ETag is 304', async (t) => {
  const { app } = await setup(t)
  const res = await app.inject({ method: 'GET', url: '/widget.js' })
  t.equal(res.statusCode, 200)
  t.match(res.headers, {
    'content-type': 'text/javascript; charset=utf-8',
    'cache-control': 'public, max-age=300',
    etag: /^"[\w-]+"$/,
    'x-content-type-options': 'nosniff',
    'access-control-allow-origin': '*'
  })
  t.match(res.body, /attachShadow/)
  t.equal((await app.inject({ method: 'GET', url: '/widget.js', headers: { 'if-none-match': String(res.headers.etag) } })).statusCode, 304)
  // The client it loads answers other sites too, as modules need.
  for (const name of ['client.js', 'worklet.js']) t.equal((await app.inject({ method: 'GET', url: `/web-call/${name}` })).headers['access-control-allow-origin'], '*')
  const join = await app.inject({ method: 'OPTIONS', url: '/web-call/join', headers: { origin: SITE, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } })
  t.equal(join.statusCode, 204)
  t.match(join.headers, { 'access-control-allow-origin': '*', 'access-control-allow-headers': 'content-type' })
  t.equal((await app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: 'nope' } })).headers['access-control-allow-origin'], '*', 'refusals are readable')
})
