import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { createAccount, setup, type Account } from '../helpers/app.ts'

// Pins: a phone number (inbound and outbound), the widget, or a make-*-call request may run a chosen version of the
// agent instead of the latest; the call records the version it ran (agent_version).

const SITE = 'http://127.0.0.2:8080'

interface Ctx { app: FastifyInstance, account: Account }

async function call (ctx: Ctx, method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) {
  return await ctx.app.inject({ method, url, headers: ctx.account.headers, ...(payload !== undefined && { payload }) })
}

/** An agent with two versions: 1 says "Old prompt.", 2 says "New prompt.". */
async function agentWithVersions (ctx: Ctx): Promise<{ agent: string, llm: string }> {
  const llm = (await call(ctx, 'POST', '/v1/llm', { general_prompt: 'Old prompt.' })).json()._id as string
  const agent = (await call(ctx, 'POST', '/v1/agent', { agent_name: 'Ada', llm_id: llm })).json()._id as string
  await call(ctx, 'PATCH', `/v1/llm/${llm}`, { general_prompt: 'New prompt.' })
  return { agent, llm }
}

const callOf = async (ctx: Ctx, id: string) => (await call(ctx, 'GET', `/v1/call/${id}`)).json()

t.test('a number pins a version of its agents: checked, shown, cleared when the agent changes', async (t) => {
  const { app, db } = await setup(t)
  const ctx = { app, account: await createAccount(db) }
  const { agent } = await agentWithVersions(ctx)
  const other = (await call(ctx, 'POST', '/v1/agent', { agent_name: 'Bea', llm_id: (await call(ctx, 'POST', '/v1/llm', {})).json()._id })).json()._id as string
  const number = (await call(ctx, 'POST', '/v1/phone-number/buy', { phone_number: '+14155550123' })).json()
  const patch = async (payload: object) => await call(ctx, 'PATCH', `/v1/phone-number/${number._id as string}`, payload)

  t.match((await patch({ inbound_agent_version: 1 })).json(), { statusCode: 400, code: 'bad_request', message: /inbound_agent_version pins a version of the inbound agent, and the number has none/ })
  const pinned = await patch({ inbound_agent_id: agent, inbound_agent_version: 1, outbound_agent_id: agent, outbound_agent_version: 2 })
  t.equal(pinned.statusCode, 200)
  t.match(pinned.json(), { inbound_agent_id: agent, inbound_agent_version: 1, outbound_agent_id: agent, outbound_agent_version: 2 })
  t.match((await patch({ inbound_agent_version: 3 })).json(), { statusCode: 404, code: 'not_found', message: `version 3 of the inbound agent ${agent} (body.inbound_agent_version) not found` })
  t.match((await patch({ inbound_agent_version: 0 })).json(), { statusCode: 400 })
  t.match((await patch({ inbound_agent_version: 'x' })).json(), { statusCode: 400 })
  t.match((await patch({ inbound_agent_id: other, inbound_agent_version: 2 })).json(), { statusCode: 404, message: /version 2 of the inbound agent/ }, 'checked against the new agent')
  t.equal((await call(ctx, 'GET', `/v1/phone-number/${number._id as string}`)).json().inbound_agent_version, 1, 'a refused change changed nothing')

  t.match((await patch({ nickname: 'Desk', outbound_agent_id: agent })).json(), { inbound_agent_version: 1, outbound_agent_version: 2 }, 'the same agents keep their pins')
  t.match((await patch({ inbound_agent_id: other })).json(), { inbound_agent_id: other, inbound_agent_version: null, outbound_agent_version: 2 }, 'another agent clears the pin')
  t.match((await patch({ outbound_agent_version: null })).json(), { outbound_agent_id: agent, outbound_agent_version: null }, 'null: the latest')

  const stranger = { app, account: await createAccount(db) }
  const theirs = await agentWithVersions(stranger)
  t.match((await patch({ inbound_agent_id: theirs.agent, inbound_agent_version: 1 })).json(), { statusCode: 404 }, 'another account\'s agent')
})

t.test('calls record the version they run: a number\'s inbound and outbound pins, a request\'s pin', async (t) => {
  const { app, db } = await setup(t)
  const ctx = { app, account: await createAccount(db) }
  const { agent } = await agentWithVersions(ctx)
  const number = (await call(ctx, 'POST', '/v1/phone-number/buy', { phone_number: '+14155550123' })).json()
  await call(ctx, 'PATCH', `/v1/phone-number/${number._id as string}`, { inbound_agent_id: agent, inbound_agent_version: 1, outbound_agent_id: agent, outbound_agent_version: 1 })

  // The runtime API answers the pinned version's agent and LLM values: what it runs the call on.
  const inbound = await call(ctx, 'POST', '/v1/runtime/calls/inbound', { to_number: '+14155550123', from_number: '+4930123456' })
  t.equal(inbound.statusCode, 201)
  t.match(inbound.json(), { agent: { _id: agent, version: 1 }, llm: { general_prompt: 'Old prompt.' } })
  t.equal((await callOf(ctx, inbound.json()._id)).agent_version, 1)

  const outbound = await call(ctx, 'POST', '/v1/call/make-phone-call', { agent_id: agent, from_number: '+14155550123', to_number: '+4930123457' })
  t.equal(outbound.statusCode, 201)
  t.equal((await callOf(ctx, outbound.json()._id)).agent_version, 1, 'the number\'s outbound pin')
  const chosen = await call(ctx, 'POST', '/v1/call/make-phone-call', { agent_id: agent, agent_version: 2, from_number: '+14155550123', to_number: '+4930123458' })
  t.equal((await callOf(ctx, chosen.json()._id)).agent_version, 2, 'the request\'s pin wins')

  const web = await call(ctx, 'POST', '/v1/call/make-web-call', { agent_id: agent, agent_version: 1 })
  t.equal(web.statusCode, 201)
  t.equal((await callOf(ctx, web.json()._id)).agent_version, 1)
  const listed = (await call(ctx, 'GET', '/v1/call/list')).json() as Array<{ _id: string, agent_version: number | null }>
  t.equal(listed.find((item) => item._id === web.json()._id)?.agent_version, 1, 'the list shows it too')

  t.match((await call(ctx, 'POST', '/v1/call/make-web-call', { agent_id: agent, agent_version: 3 })).json(), { statusCode: 404, message: `version 3 of agent ${agent} (body.agent_version) not found` })
  t.match((await call(ctx, 'POST', '/v1/call/make-phone-call', { agent_id: agent, agent_version: 3, from_number: '+14155550123', to_number: '+4930123459' })).json(), { statusCode: 404 })
  t.match((await call(ctx, 'POST', '/v1/call/make-web-call', { agent_id: agent, agent_version: -1 })).json(), { statusCode: 400 })
})

t.test('the widget pins a version: checked on PATCH, run by its calls', async (t) => {
  const { app, db } = await setup(t)
  const ctx = { app, account: await createAccount(db) }
  const { agent } = await agentWithVersions(ctx)
  const refused = await call(ctx, 'PATCH', `/v1/agent/${agent}`, { widget_settings: { agent_version: 9 } })
  t.match(refused.json(), { statusCode: 404, message: `version 9 of agent ${agent} (body.widget_settings.agent_version) not found` })
  const set = await call(ctx, 'PATCH', `/v1/agent/${agent}`, { widget_settings: { enabled: true, allowed_origins: [SITE], agent_version: 1 } })
  t.equal(set.statusCode, 200)
  t.match(set.json(), { version: 2, widget_settings: { agent_version: 1 } }, 'the pin makes no version')
  const key = (await call(ctx, 'POST', `/v1/agent/${agent}/widget-key`)).json().widget_key as string
  const started = await app.inject({ method: 'POST', url: `/v1/widget/${agent}/call`, remoteAddress: '127.0.0.9', headers: { 'x-widget-key': key, origin: SITE } })
  t.equal(started.statusCode, 201)
  t.equal((await callOf(ctx, started.json().call_id)).agent_version, 1)
  t.notMatch((await app.inject({ method: 'GET', url: `/v1/widget/${agent}`, headers: { origin: SITE } })).body, /agent_version/, 'the public look does not show it')
  await call(ctx, 'PATCH', `/v1/agent/${agent}`, { widget_settings: { agent_version: null } })
  t.equal((await call(ctx, 'GET', `/v1/agent/${agent}`)).json().widget_settings.agent_version, null)
})
