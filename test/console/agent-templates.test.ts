import t from 'tap'
import { setup } from '../helpers/app.ts'
import { addAction, createAgent } from '../helpers/calls.ts'
import { signedInWithKey } from '../helpers/console-client.ts'

// The agent's life in the console (console/agent-templates.ts): New agent from a template, Duplicate, Delete, Move.

t.test('New agent offers the six templates and the empty form; a template makes the agent the API\'s clone makes', async (t) => {
  const ctx = await setup(t)
  const { account, browser } = await signedInWithKey(ctx)
  const page = await browser.get('/agents/start')
  t.equal(page.statusCode, 200)
  const templates = (await ctx.app.inject({ method: 'GET', url: '/v1/agent/agent_template/list', headers: account.headers })).json() as Array<{ _id: string, agent: { agent_name: string }, llm: { general_prompt: string } }>
  t.equal(templates.length, 6)
  for (const template of templates) t.match(page.body, `action="/agents/templates/${template._id}"`, `${template.agent.agent_name} is offered`)
  t.match(page.body, '<a href="/agents/new" aria-describedby="template-scratch">Open the empty form</a>')

  const made = await browser.submit('/agents/start', `/agents/templates/${templates[1]._id}`, {})
  t.equal(made.statusCode, 303)
  const id = /^\/agents\/([0-9a-f]{24})$/.exec(made.headers.location as string)![1]
  const agent = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${id}`, headers: account.headers })).json()
  t.equal(agent.agent_name, templates[1].agent.agent_name)
  const llm = (await ctx.app.inject({ method: 'GET', url: `/v1/llm/${agent.llm_id as string}`, headers: account.headers })).json()
  t.equal(llm.general_prompt, templates[1].llm.general_prompt)
  t.equal(agent.version, 1, 'its first version is written, as the API\'s clone writes it')

  t.equal((await browser.submit('/agents/start', '/agents/templates/65a0f10000000000000000ff', {})).statusCode, 404, 'no such template')
})

t.test('Duplicate copies the settings, a new LLM configuration, the actions and the knowledge bases', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const original = await createAgent(ctx.app, account, { agent_name: 'Front desk', interruption_sensitivity: 0.3 })
  await addAction(ctx.app, account, original._id, { url: 'https://hooks.example.test/sync', method: 'POST', headers: { authorization: 'Bearer s3cret' } })
  await ctx.db.insertInto('knowledge_bases').values({ id: '6b0000000000000000000001', user_id: user.id, name: 'Handbook', description: 'd', language: 'en', search_config: 'english' } as never).execute()
  await ctx.db.insertInto('knowledge_base_agents').values({ knowledge_base_id: '6b0000000000000000000001', agent_id: original._id, user_id: user.id }).execute()

  const page = await browser.get(`/agents/${original._id}`)
  t.match(page.body, `action="/agents/${original._id}/duplicate"`)
  const res = await browser.submit(`/agents/${original._id}`, `/agents/${original._id}/duplicate`, {})
  t.equal(res.statusCode, 303)
  const copyId = /^\/agents\/([0-9a-f]{24})$/.exec(res.headers.location as string)![1]
  t.not(copyId, original._id)
  const get = async (id: string) => (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${id}`, headers: account.headers })).json()
  const [before, copy] = [await get(original._id), await get(copyId)]
  t.equal(copy.agent_name, 'Front desk (copy)')
  t.equal(copy.interruption_sensitivity, 0.3)
  t.not(copy.llm_id, before.llm_id, 'its own LLM configuration: editing one leaves the other')
  t.same(copy.knowledge_base, before.knowledge_base)
  const actions = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${copyId}/actions`, headers: account.headers })).json()
  t.match(actions, [{ action_type: 'api_call', settings: { name: 'Sync', url: 'https://hooks.example.test/sync' } }])
  const stored = await ctx.db.selectFrom('agent_actions').select('settings').where('agent_id', '=', copyId).executeTakeFirstOrThrow()
  t.notMatch(JSON.stringify(stored.settings), 's3cret', 'the header value stays sealed in the copy')
})

t.test('Delete: a page says what goes with it; then the API\'s delete, with transfer tools of others switched off', async (t) => {
  const ctx = await setup(t)
  const { account, browser } = await signedInWithKey(ctx)
  const doomed = await createAgent(ctx.app, account, { agent_name: 'Old desk' })
  const other = await createAgent(ctx.app, account, { agent_name: 'Reception' })
  await addAction(ctx.app, account, doomed._id, { url: 'https://hooks.example.test/sync', method: 'POST' })
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${other._id}/tools`, headers: account.headers, payload: { tool_type: 'agent_transfer', settings: { name: 'to_old', agent_id: doomed._id } } })
  t.equal(tool.statusCode, 201, tool.body)

  const confirm = await browser.get(`/agents/${doomed._id}/delete`)
  t.equal(confirm.statusCode, 200)
  t.match(confirm.body, '<li>1 action</li>')
  t.match(confirm.body, 'Its calls stay')
  t.match(confirm.body, /These agents transfer calls to it: their transfer tools will be switched off\. Reception\./)
  const gone = await browser.submit(`/agents/${doomed._id}/delete`, `/agents/${doomed._id}/delete`, {})
  t.equal(gone.statusCode, 303)
  t.equal(gone.headers.location, '/agents?deleted=1')
  t.match((await browser.get('/agents?deleted=1')).body, 'The agent is deleted.')
  t.equal((await ctx.app.inject({ method: 'GET', url: `/v1/agent/${doomed._id}`, headers: account.headers })).statusCode, 404)
  const tools = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${other._id}/tools`, headers: account.headers })).json()
  t.match(tools, [{ tool_type: 'agent_transfer', is_active: false }])
  t.equal((await browser.get(`/agents/${doomed._id}/delete`)).statusCode, 404, 'a deleted agent has no delete page')
})

t.test('Move: the owner moves an agent into one of their workspaces and back; not into another\'s', async (t) => {
  const ctx = await setup(t)
  const { account, browser } = await signedInWithKey(ctx)
  const stranger = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  const noWorkspaces = await browser.get(`/agents/${agent._id}`)
  t.notMatch(noWorkspaces.body, 'move-workspace', 'no Move without workspaces')
  const created = await browser.submit('/workspaces', '/workspaces', { workspace_name: 'Sales', description: '' })
  const workspaceId = /^\/workspaces\/([0-9a-f]{24})$/.exec(created.headers.location as string)![1]
  const foreign = await stranger.browser.submit('/workspaces', '/workspaces', { workspace_name: 'Theirs', description: '' })
  const foreignId = /^\/workspaces\/([0-9a-f]{24})$/.exec(foreign.headers.location as string)![1]

  t.match((await browser.get(`/agents/${agent._id}`)).body, `<option value="${workspaceId}">Sales</option>`)
  const moved = await browser.submit(`/agents/${agent._id}`, `/agents/${agent._id}/move`, { workspace_id: workspaceId })
  t.equal(moved.statusCode, 303)
  const workspaceOf = async () => (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}`, headers: account.headers })).json().workspace_id
  t.equal(await workspaceOf(), workspaceId)
  t.match((await browser.get(`/agents/${agent._id}`)).body, `<option value="${workspaceId}" selected>Sales</option>`)
  t.equal((await browser.submit(`/agents/${agent._id}`, `/agents/${agent._id}/move`, { workspace_id: foreignId })).statusCode, 404, 'another\'s workspace')
  t.equal(await workspaceOf(), workspaceId)
  await browser.submit(`/agents/${agent._id}`, `/agents/${agent._id}/move`, { workspace_id: '' })
  t.equal(await workspaceOf(), null, 'out of the workspace')
  t.equal((await stranger.browser.submit('/agents', `/agents/${agent._id}/duplicate`, {})).statusCode, 404, 'another account\'s agent')
  const notAWorkspace = await browser.submit(`/agents/${agent._id}`, `/agents/${agent._id}/move`, { workspace_id: 'sales' })
  t.equal(notAWorkspace.statusCode, 400)
  t.match(notAWorkspace.body, 'The workspace is not one of the choices offered. Go back to the form, correct it and send it again.')
  t.equal(await workspaceOf(), null, 'not moved')
  for (const [method, url] of [['GET', '/agents/not-an-id/delete'], ['POST', '/agents/not-an-id/delete'], ['POST', '/agents/not-an-id/duplicate'], ['POST', '/agents/not-an-id/move'], ['POST', '/agents/templates/not-an-id']]) {
    const res = method === 'GET' ? await browser.get(url) : await browser.submit(`/agents/${agent._id}`, url, { workspace_id: '' })
    t.equal(res.statusCode, 404, `${method} ${url}`)
    t.match(res.body, '<h1>Page not found</h1>', `${method} ${url}: the console's 404 page`)
  }
})
