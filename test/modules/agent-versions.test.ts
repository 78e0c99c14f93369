import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { connectIntegration } from '../../src/modules/integrations/queries.ts'
import { createAccount, setup, type Account } from '../helpers/app.ts'

interface Ctx { app: FastifyInstance, account: Account }

async function call (ctx: Ctx, method: 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'PUT', url: string, payload?: object) {
  return await ctx.app.inject({ method, url, headers: ctx.account.headers, ...(payload !== undefined && { payload }) })
}

async function newAgent (ctx: Ctx, llmId?: string): Promise<{ agent: string, llm: string }> {
  const llm = llmId ?? (await call(ctx, 'POST', '/v1/llm', { general_prompt: 'You are Ada.' })).json()._id as string
  const res = await call(ctx, 'POST', '/v1/agent', { agent_name: 'Ada', llm_id: llm })
  return { agent: res.json()._id, llm }
}

const versions = async (ctx: Ctx, agent: string) => (await call(ctx, 'GET', `/v1/agent/${agent}/versions`)).json() as Array<{ version: number, change: string, changes: string[], restored_from: number | null }>
const latest = async (ctx: Ctx, agent: string) => (await versions(ctx, agent))[0]

t.test('each change path writes one version, no-op changes and what calls do not run on write none', async (t) => {
  const { app, db } = await setup(t)
  const ctx = { app, account: await createAccount(db) }
  const { agent, llm } = await newAgent(ctx)
  const created = await call(ctx, 'GET', `/v1/agent/${agent}`)
  t.equal(created.json().version, 1, 'a new agent is version 1')
  t.match(await versions(ctx, agent), [{ version: 1, change: 'created', changes: [] }])

  const patch = await call(ctx, 'PATCH', `/v1/agent/${agent}`, { call_settings: { language: 'de-DE' } })
  t.equal(patch.json().version, 2, 'PATCH answers the new version')
  t.equal(patch.json().call_settings.language, 'de-DE', 'and takes effect at once')
  t.match(await latest(ctx, agent), { version: 2, change: 'agent', changes: ['call_settings.language'] })

  await call(ctx, 'PATCH', `/v1/agent/${agent}`, { call_settings: { language: 'de-DE' } })
  await call(ctx, 'PATCH', `/v1/agent/${agent}`, { folder: 'Sales', status: 'inactive', widget_settings: { theme: 'dark' } })
  t.equal((await latest(ctx, agent)).version, 2, 'the same value again, folder, status and widget_settings make no version')

  await call(ctx, 'PATCH', `/v1/llm/${llm}`, { general_prompt: 'You are Bea.' })
  t.match(await latest(ctx, agent), { version: 3, change: 'llm', changes: ['llm.general_prompt'] })
  await call(ctx, 'PATCH', `/v1/llm/${llm}`, { general_prompt: 'You are Bea.' })
  t.equal((await latest(ctx, agent)).version, 3, 'an LLM PATCH that changes nothing makes no version')

  const tool = await call(ctx, 'POST', `/v1/agent/${agent}/tools`, { tool_type: 'mcp', settings: { name: 'Tools', server_url: 'https://mcp.example.com/sse', headers: { Authorization: 'Bearer t' } } })
  t.equal(tool.statusCode, 201)
  t.match(await latest(ctx, agent), { version: 4, change: 'tools', changes: ['tools'] })
  // The header sent back as the mask keeps its value: nothing changed, though the stored value is sealed anew.
  await call(ctx, 'PATCH', `/v1/agent/${agent}/tools/${tool.json()._id as string}`, { settings: { headers: { Authorization: '********' } } })
  t.equal((await latest(ctx, agent)).version, 4, 'a tool PATCH that changes nothing makes no version')
  await call(ctx, 'PATCH', `/v1/agent/${agent}/tools/${tool.json()._id as string}`, { is_active: false })
  t.match(await latest(ctx, agent), { version: 5, change: 'tools' })

  const action = await call(ctx, 'POST', `/v1/agent/${agent}/actions`, { action_type: 'api_call', settings: { name: 'CRM', url: 'https://crm.example.com/hook', when: 'after_call' } })
  t.equal(action.statusCode, 201, action.body)
  t.match(await latest(ctx, agent), { version: 6, change: 'actions' })
  await call(ctx, 'PATCH', `/v1/agent/${agent}/actions/${action.json()._id as string}`, { settings: { url: 'https://crm.example.com/other' } })
  t.match(await latest(ctx, agent), { version: 7, change: 'actions' })
  t.equal((await call(ctx, 'DELETE', `/v1/agent/${agent}/actions/${action.json()._id as string}`)).statusCode, 204)
  t.match(await latest(ctx, agent), { version: 8, change: 'actions' })
  t.equal((await call(ctx, 'DELETE', `/v1/agent/${agent}/tools/${tool.json()._id as string}`)).statusCode, 204)
  t.match(await latest(ctx, agent), { version: 9, change: 'tools' })

  const all = await versions(ctx, agent)
  t.same(all.map((v) => v.version), [9, 8, 7, 6, 5, 4, 3, 2, 1], 'newest first, consecutive')
  const page = (await call(ctx, 'GET', `/v1/agent/${agent}/versions?limit=2&skip=7`)).json()
  t.same(page.map((v: { version: number }) => v.version), [2, 1], 'paged')
  t.same(page[0].changes, ['call_settings.language'], 'the oldest of a page is still compared with the one before it')
  t.equal((await call(ctx, 'GET', `/v1/agent/${agent}`)).json().version, 9)
})

t.test('an LLM PATCH versions every agent that uses it; deleting an agent versions the agents whose transfer it switched off', async (t) => {
  const { app, db } = await setup(t)
  const ctx = { app, account: await createAccount(db) }
  const a = await newAgent(ctx)
  const b = await newAgent(ctx, a.llm)
  const target = await newAgent(ctx)
  await call(ctx, 'POST', `/v1/agent/${b.agent}/tools`, { tool_type: 'agent_transfer', settings: { name: 'To C', agent_id: target.agent } })
  t.equal((await latest(ctx, b.agent)).version, 2)
  await call(ctx, 'PATCH', `/v1/llm/${a.llm}`, { temperature: 0.2 })
  t.match(await latest(ctx, a.agent), { version: 2, change: 'llm', changes: ['llm.temperature'] })
  t.match(await latest(ctx, b.agent), { version: 3, change: 'llm' })
  t.equal((await call(ctx, 'DELETE', `/v1/agent/${target.agent}`)).statusCode, 204)
  t.match(await latest(ctx, b.agent), { version: 4, change: 'tools', changes: ['tools'] })
  const diff = (await call(ctx, 'GET', `/v1/agent/${b.agent}/versions/4/diff`)).json()
  t.match(diff.tools.changed, [{ type: 'agent_transfer', paths: ['is_active'] }])
})

t.test('disconnecting an integration versions the agents whose tools it switched off', async (t) => {
  const { app, db } = await setup(t)
  const ctx = { app, account: await createAccount(db) }
  const { agent } = await newAgent(ctx)
  await connectIntegration(db, ctx.account.user.id, 'crm', { account_label: 'Test', method: 'api_key', credentials: { api_key: 'k' } })
  await call(ctx, 'POST', `/v1/agent/${agent}/tools`, { tool_type: 'crm', settings: { name: 'CRM', operations: ['lookup_contact'] } })
  t.equal((await latest(ctx, agent)).version, 2)
  const res = await call(ctx, 'DELETE', '/v1/integrations/crm')
  t.equal(res.json().tools_switched_off, 1)
  t.match(await latest(ctx, agent), { version: 3, change: 'tools' })
})

t.test('20 concurrent PATCHes: one version each, consecutive numbers, no lost update', async (t) => {
  const { app, db } = await setup(t)
  const ctx = { app, account: await createAccount(db) }
  const { agent } = await newAgent(ctx)
  const results = await Promise.all(Array.from({ length: 20 }, async (_, n) => await call(ctx, 'PATCH', `/v1/agent/${agent}`, { agent_name: `Name ${n}`, call_settings: { reminder_max_count: n % 6 } })))
  t.same(results.map((res) => res.statusCode), Array(20).fill(200))
  const all = await versions(ctx, agent)
  t.same(all.map((v) => v.version), Array.from({ length: 21 }, (_, n) => 21 - n), 'versions 1 to 21, one per PATCH')
  t.same(new Set(results.map((res) => res.json().version)).size, 20, 'each PATCH answered its own version')
  const final = (await call(ctx, 'GET', `/v1/agent/${agent}`)).json()
  const newest = (await call(ctx, 'GET', `/v1/agent/${agent}/versions/21`)).json()
  t.equal(newest.agent.agent_name, final.agent_name, 'the latest version is the agent as it is')
  t.equal(newest.agent.call_settings.reminder_max_count, final.call_settings.reminder_max_count)
  // Each version is the one before it plus its PATCH: the names of versions 2..21 are the 20 names, each once.
  const names = await Promise.all(Array.from({ length: 20 }, async (_, n) => (await call(ctx, 'GET', `/v1/agent/${agent}/versions/${n + 2}`)).json().agent.agent_name))
  t.same(new Set(names).size, 20, 'every PATCH is in exactly one version')
})

t.test('one version, the diff between two, errors', async (t) => {
  const { app, db } = await setup(t)
  const ctx = { app, account: await createAccount(db) }
  const { agent, llm } = await newAgent(ctx)
  const tool = (await call(ctx, 'POST', `/v1/agent/${agent}/tools`, { tool_type: 'mcp', settings: { name: 'Tools', server_url: 'https://mcp.example.com/sse', headers: { Authorization: 'Bearer secret' } } })).json()
  await call(ctx, 'PATCH', `/v1/agent/${agent}`, { agent_name: 'Bea', call_settings: { language: 'fr-FR' } })
  await call(ctx, 'PATCH', `/v1/llm/${llm}`, { general_prompt: 'You are Bea.' })
  await call(ctx, 'PATCH', `/v1/agent/${agent}/tools/${tool._id as string}`, { settings: { server_url: 'https://mcp.example.com/v2', headers: { Authorization: 'Bearer other' } } })
  await call(ctx, 'POST', `/v1/agent/${agent}/tools`, { tool_type: 'end_call', settings: { name: 'Bye' } })

  const v2 = await call(ctx, 'GET', `/v1/agent/${agent}/versions/2`)
  t.equal(v2.statusCode, 200)
  t.match(v2.json(), { agent_id: agent, version: 2, change: 'tools', agent: { agent_name: 'Ada' }, llm_id: llm, llm: { general_prompt: 'You are Ada.' }, tools: [{ _id: tool._id, type: 'mcp', is_active: true, settings: { headers: { Authorization: '********' } } }], actions: [] })
  t.notMatch(v2.body, /secret|enc:v1/, 'header values never leave, sealed or not')
  const stored = await db.selectFrom('agent_versions').select('snapshot').where('agent_id', '=', agent).where('version', '=', 2).executeTakeFirstOrThrow()
  t.match(JSON.stringify(stored.snapshot), /enc:v1:/, 'the snapshot keeps header values sealed')

  const diff = (await call(ctx, 'GET', `/v1/agent/${agent}/versions/6/diff?against=2`)).json()
  t.same(diff.agent, [{ path: 'agent_name', before: 'Ada', after: 'Bea' }, { path: 'call_settings.language', before: 'en-US', after: 'fr-FR' }])
  t.same(diff.llm, [{ path: 'general_prompt', before: 'You are Ada.', after: 'You are Bea.' }])
  t.match(diff.tools, { removed: [], changed: [{ _id: tool._id, type: 'mcp', paths: ['settings.headers.Authorization', 'settings.server_url'] }] })
  t.match(diff.tools.added, [{ type: 'end_call' }])
  t.notMatch(JSON.stringify(diff), /secret|other|enc:v1/)
  const back = (await call(ctx, 'GET', `/v1/agent/${agent}/versions/2/diff?against=6`)).json()
  t.same(back.agent[0], { path: 'agent_name', before: 'Bea', after: 'Ada' }, 'against may be the later one')
  const previous = (await call(ctx, 'GET', `/v1/agent/${agent}/versions/3/diff`)).json()
  t.match(previous, { version: 3, against: 2 }, 'against defaults to the version before')

  const other = { app, account: await createAccount(db) }
  for (const url of [`/v1/agent/${agent}/versions`, `/v1/agent/${agent}/versions/2`, `/v1/agent/${agent}/versions/2/diff`]) {
    t.equal((await call(other, 'GET', url)).statusCode, 404, `another account: ${url}`)
  }
  t.equal((await call(other, 'POST', `/v1/agent/${agent}/versions/2/restore`)).statusCode, 404)
  t.match((await call(ctx, 'GET', `/v1/agent/${agent}/versions/99`)).json(), { statusCode: 404, code: 'not_found', message: `version 99 of agent ${agent} not found` })
  t.equal((await call(ctx, 'GET', `/v1/agent/${agent}/versions/2/diff?against=99`)).statusCode, 404)
  t.equal((await call(ctx, 'POST', `/v1/agent/${agent}/versions/99/restore`)).statusCode, 404)
  for (const bad of ['0', '-1', 'abc', '1.5', '99999999999']) {
    t.equal((await call(ctx, 'GET', `/v1/agent/${agent}/versions/${bad}`)).statusCode, 400, `version ${bad}`)
  }
  t.equal((await call(ctx, 'GET', `/v1/agent/${agent}/versions/2/diff?against=0`)).statusCode, 400)
  t.match((await call(ctx, 'GET', `/v1/agent/${agent}/versions/1/diff`)).json(), { statusCode: 400, code: 'bad_request' })
})

t.test('restore makes a new version equal to the old one; a shared LLM configuration is copied, not changed', async (t) => {
  const { app, db } = await setup(t)
  const ctx = { app, account: await createAccount(db) }
  const { agent, llm } = await newAgent(ctx)
  const sharer = await newAgent(ctx, llm)
  const tool = (await call(ctx, 'POST', `/v1/agent/${agent}/tools`, { tool_type: 'mcp', settings: { name: 'Tools', server_url: 'https://mcp.example.com/sse', headers: { Authorization: 'Bearer secret' } } })).json()
  const old = (await call(ctx, 'GET', `/v1/agent/${agent}/versions/2`)).json()
  await call(ctx, 'PATCH', `/v1/agent/${agent}`, { agent_name: 'Bea', data_retrieval: [{ name: 'email', type: 'string' }], webhook_url: 'https://hooks.example.com/a' })
  await call(ctx, 'PATCH', `/v1/llm/${llm}`, { general_prompt: 'You are Bea.', temperature: 1 })
  await call(ctx, 'DELETE', `/v1/agent/${agent}/tools/${tool._id as string}`)
  await call(ctx, 'POST', `/v1/agent/${agent}/tools`, { tool_type: 'end_call', settings: { name: 'Bye' } })
  await call(ctx, 'POST', `/v1/agent/${agent}/actions`, { action_type: 'api_call', settings: { name: 'CRM', url: 'https://crm.example.com/hook', when: 'after_call' } })
  const before = (await latest(ctx, agent)).version

  const res = await call(ctx, 'POST', `/v1/agent/${agent}/versions/2/restore`)
  t.equal(res.statusCode, 201)
  t.match(res.json(), { version: before + 1, change: 'restore', restored_from: 2 })
  const { version: _v, change: _c, restored_from: _r, created_at: _at, llm_id: newLlm, ...restored } = res.json()
  const { version: _v2, change: _c2, restored_from: _r2, created_at: _at2, llm_id: oldLlm, ...wanted } = old
  t.same(restored, wanted, 'the restored agent equals the old version\'s snapshot')
  t.not(newLlm, oldLlm, 'the shared LLM configuration was copied')
  t.match((await call(ctx, 'GET', `/v1/llm/${llm}`)).json(), { general_prompt: 'You are Bea.', temperature: 1 }, 'the other agent\'s configuration is unchanged')
  t.equal((await call(ctx, 'GET', `/v1/agent/${sharer.agent}`)).json().llm_id, llm)
  t.match((await call(ctx, 'GET', `/v1/llm/${newLlm as string}`)).json(), { general_prompt: 'You are Ada.', temperature: 0.7 })
  const agentNow = (await call(ctx, 'GET', `/v1/agent/${agent}`)).json()
  t.match(agentNow, { agent_name: 'Ada', llm_id: newLlm, data_retrieval: [], webhook_url: null, version: before + 1 })
  const tools = (await call(ctx, 'GET', `/v1/agent/${agent}/tools`)).json()
  t.match(tools, [{ _id: tool._id, tool_type: 'mcp', settings: { headers: { Authorization: '********' } } }], 'the tool is back under its id')
  t.equal(tools.length, 1)
  t.same((await call(ctx, 'GET', `/v1/agent/${agent}/actions`)).json(), [], 'the action added since is gone')
  const headers = await db.selectFrom('agent_tools').select('settings').where('id', '=', tool._id).executeTakeFirstOrThrow()
  const { openSettings } = await import('../../src/modules/agents/queries.ts')
  t.same(openSettings(headers.settings).headers, { Authorization: 'Bearer secret' }, 'its header value is back')

  const again = await call(ctx, 'POST', `/v1/agent/${agent}/versions/2/restore`)
  t.equal(again.statusCode, 200, 'restoring what the agent already is writes nothing')
  t.equal(again.json().version, before + 1)
  const diff = (await call(ctx, 'GET', `/v1/agent/${agent}/versions/${before + 1}/diff?against=2`)).json()
  t.same([diff.agent, diff.llm, diff.tools.changed, diff.tools.added, diff.tools.removed], [[], [], [], [], []], 'no difference from version 2')

  // Not shared any more: a restore now changes the agent's own configuration.
  await call(ctx, 'PATCH', `/v1/llm/${newLlm as string}`, { general_prompt: 'Changed.' })
  const own = (await call(ctx, 'POST', `/v1/agent/${agent}/versions/2/restore`)).json()
  t.equal(own.llm_id, newLlm)
  t.equal((await call(ctx, 'GET', `/v1/llm/${newLlm as string}`)).json().general_prompt, 'You are Ada.')
})

t.test('a change of the workflow alone is labelled so', async (t) => {
  const { app, db } = await setup(t)
  const ctx = { app, account: await createAccount(db) }
  const { agent } = await newAgent(ctx)
  // Written as the agent's PATCH writes it (the workflow's own API is the workflow part's).
  const workflow = { start: 'greet', steps: [{ id: 'greet', name: 'Greet', type: 'end' }] }
  await db.updateTable('agents').set({ workflow: JSON.stringify(workflow) }).where('id', '=', agent).execute()
  await call(ctx, 'PATCH', `/v1/agent/${agent}`, { folder: 'Flows' })
  t.match(await latest(ctx, agent), { version: 2, change: 'workflow', changes: ['workflow'] })
  t.same((await call(ctx, 'GET', `/v1/agent/${agent}/versions/2`)).json().agent.workflow, workflow)
  await db.updateTable('agents').set({ workflow: JSON.stringify({ ...workflow, steps: [{ id: 'greet', name: 'Hello', type: 'end' }] }) }).where('id', '=', agent).execute()
  await call(ctx, 'PATCH', `/v1/agent/${agent}`, { folder: 'Flows' })
  t.match(await latest(ctx, agent), { version: 3, change: 'workflow', changes: ['workflow.steps.greet.name'] }, 'its members compared one by one, its steps by id')
  t.match((await call(ctx, 'POST', `/v1/agent/${agent}/versions/1/restore`)).json(), { version: 4, agent: { workflow: null } })
  t.equal((await db.selectFrom('agents').select('workflow').where('id', '=', agent).executeTakeFirstOrThrow()).workflow, null, 'restored: no workflow')
})

t.test('an agent from before versions gets version 1 on first use', async (t) => {
  const { app, db } = await setup(t)
  const ctx = { app, account: await createAccount(db) }
  const { agent } = await newAgent(ctx)
  await db.deleteFrom('agent_versions').where('agent_id', '=', agent).execute()
  await db.updateTable('agents').set({ version: 0 }).where('id', '=', agent).execute()
  t.match(await versions(ctx, agent), [{ version: 1, change: 'created' }])
  await db.deleteFrom('agent_versions').where('agent_id', '=', agent).execute()
  await db.updateTable('agents').set({ version: 0 }).where('id', '=', agent).execute()
  t.equal((await call(ctx, 'GET', `/v1/agent/${agent}/versions/1`)).statusCode, 200)
  t.equal((await call(ctx, 'GET', `/v1/agent/${agent}/versions/2`)).statusCode, 404)
})
