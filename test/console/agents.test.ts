import t from 'tap'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup, type TestContext } from '../helpers/app.ts'
import { ConsoleClient, createConsoleUser, csrfOf, PASSWORD } from '../helpers/console-client.ts'

/** Echo, a voice of the catalogue other than the default, so that choosing it shows. */
const ECHO = '65a0f0000000000000000004'

const FORM = {
  agent_name: 'Front desk',
  begin_message: 'Hello, this is the front desk.',
  general_prompt: 'You answer questions about opening hours.',
  language: 'de-DE',
  voice_id: ECHO,
  webhook_url: 'https://hooks.example.test/calls',
  status: 'active'
}

async function signedIn (ctx: TestContext) {
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id, { name: 'test' })
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const api = (method: 'GET' | 'PATCH', url: string, payload?: object) =>
    ctx.app.inject({ method, url, headers: { 'x-api-key': key }, ...(payload !== undefined && { payload }) })
  return { user, browser, api }
}

/** Creates an agent through the form; answers its id. */
async function createThroughForm (browser: ConsoleClient, form: Record<string, string> = FORM): Promise<string> {
  const res = await browser.submit('/agents/new', '/agents', form)
  const id = /^\/agents\/([0-9a-f]{24})\?saved=1$/.exec(res.headers.location as string)?.[1]
  if (res.statusCode !== 303 || id === undefined) throw new Error(`not created: ${res.statusCode}\n${res.body}`)
  return id
}

t.test('create an agent in the form: it exists through the API too, with its LLM configuration', async (t) => {
  const ctx = await setup(t)
  const { browser, api } = await signedIn(ctx)

  const empty = await browser.get('/agents')
  t.equal(empty.statusCode, 200)
  t.match(empty.body, /No agents yet/)
  t.match(empty.body, /<a href="\/agents" aria-current="page">Agents<\/a>/)
  t.match(empty.body, '<a href="/agents/new">New agent</a>')

  const form = await browser.get('/agents/new')
  t.equal(form.statusCode, 200)
  for (const field of Object.keys(FORM)) t.match(form.body, `<label for="${field}">`, `${field} has a label`)
  t.match(form.body, /<option value="65a0f0000000000000000001" selected>Alloy/, 'the default voice is chosen')

  const id = await createThroughForm(browser)
  const agent = (await api('GET', `/v1/agent/${id}`)).json()
  t.match(agent, {
    agent_name: 'Front desk', voice: { voice_id: ECHO }, webhook_url: 'https://hooks.example.test/calls', status: 'active',
    call_settings: { language: 'de-DE', call_summary: true }, widget_settings: { enabled: false }, data_retrieval: []
  })
  const llm = (await api('GET', `/v1/llm/${agent.llm_id as string}`)).json()
  t.match(llm, { begin_message: 'Hello, this is the front desk.', general_prompt: 'You answer questions about opening hours.', model: 'gpt-4o-mini' })

  const page = await browser.get(`/agents/${id}?saved=1`)
  t.equal(page.statusCode, 200)
  t.match(page.body, /<h1>Front desk<\/h1>/)
  t.match(page.body, /Saved\./)
  t.match(page.body, `<option value="${ECHO}" selected>`)
  t.match(page.body, 'value="de-DE"')

  const listed = await browser.get('/agents')
  t.match(listed.body, `<a href="/agents/${id}">Front desk</a>`)
  t.match(listed.body, /<td>de-DE<\/td><td>Echo<\/td>/)

  const inactive = await createThroughForm(browser, { ...FORM, agent_name: 'Resting', webhook_url: '', begin_message: '', status: 'inactive' })
  t.match((await api('GET', `/v1/agent/${inactive}`)).json(), { status: 'inactive', webhook_url: null })
  const restingLlm = (await api('GET', `/v1/llm/${(await api('GET', `/v1/agent/${inactive}`)).json().llm_id as string}`)).json()
  t.equal(restingLlm.begin_message, null, 'an empty begin message: the agent waits')
})

t.test('a bad field re-renders the form with its message and every value kept; nothing is created', async (t) => {
  const ctx = await setup(t)
  const { user, browser } = await signedIn(ctx)
  const bad = { ...FORM, agent_name: '', language: 'not a language!', webhook_url: 'ftp://files.example.test', voice_id: 'ffffffffffffffffffffffff' }
  const res = await browser.submit('/agents/new', '/agents', bad)
  t.equal(res.statusCode, 400)
  t.match(res.body, /Some fields need another look/)
  t.match(res.body, /<p id="agent_name-error" class="field-error">The name is required\.<\/p>/)
  t.match(res.body, /<p id="language-error" class="field-error">The language must be a BCP-47 language tag such as en-US\.<\/p>/)
  t.match(res.body, /<p id="webhook_url-error" class="field-error">The webhook URL must be an absolute http:\/\/ or https:\/\/ URL\.<\/p>/)
  t.match(res.body, /<p id="voice_id-error" class="field-error">Choose one of the listed voices\.<\/p>/)
  t.match(res.body, 'aria-describedby="language-hint language-error" aria-invalid="true"')
  t.match(res.body, 'value="not a language!"')
  t.match(res.body, 'value="ftp://files.example.test"')
  t.match(res.body, '>\nHello, this is the front desk.</textarea>')
  t.match(res.body, '>\nYou answer questions about opening hours.</textarea>')
  t.notMatch(res.body, /begin_message-error|general_prompt-error|status-error/, 'the good fields carry no message')

  const long = await browser.submit('/agents/new', '/agents', { ...FORM, agent_name: 'x'.repeat(201), general_prompt: 'p'.repeat(50_001) })
  t.equal(long.statusCode, 400)
  t.match(long.body, 'The name must NOT have more than 200 characters.')
  t.match(long.body, 'The prompt must NOT have more than 50000 characters.')
  const status = await browser.submit('/agents/new', '/agents', { ...FORM, status: 'sleeping' })
  t.equal(status.statusCode, 400)
  t.match(status.body, 'Choose active or inactive.')
  const nul = await browser.submit('/agents/new', '/agents', { ...FORM, agent_name: 'a\u0000b' })
  t.equal(nul.statusCode, 400, 'text PostgreSQL cannot store: a 400, not a 500')

  t.equal((await ctx.db.selectFrom('agents').select('id').where('user_id', '=', user.id).execute()).length, 0)
  t.equal((await ctx.db.selectFrom('llm_configs').select('id').where('user_id', '=', user.id).execute()).length, 0)
})

t.test('a prompt of 50,000 characters fits the form', async (t) => {
  const ctx = await setup(t)
  const { browser, api } = await signedIn(ctx)
  const prompt = 'Ü'.repeat(50_000)
  const id = await createThroughForm(browser, { ...FORM, general_prompt: prompt })
  const llmId = (await api('GET', `/v1/agent/${id}`)).json().llm_id as string
  t.equal((await api('GET', `/v1/llm/${llmId}`)).json().general_prompt, prompt)
})

t.test('names are shown as text, never as markup', async (t) => {
  const ctx = await setup(t)
  const { browser } = await signedIn(ctx)
  const evil = '<script>alert(1)</script>'
  const id = await createThroughForm(browser, { ...FORM, agent_name: evil, begin_message: `</textarea>${evil}` })
  for (const page of [await browser.get('/agents'), await browser.get(`/agents/${id}`)]) {
    t.equal(page.statusCode, 200)
    t.notMatch(page.body, /<script/i, 'no script element at all')
    t.notMatch(page.body, '</textarea><', 'the begin message does not close its textarea')
    t.match(page.body, '&lt;script&gt;alert(1)&lt;/script&gt;')
  }
})

t.test('edit: the fields change, other settings stay; the list shows the change', async (t) => {
  const ctx = await setup(t)
  const { browser, api } = await signedIn(ctx)
  const id = await createThroughForm(browser)
  // Settings the form does not show, set through the API: an edit in the console keeps them.
  t.equal((await api('PATCH', `/v1/agent/${id}`, { interruption_sensitivity: 0.9, call_settings: { call_summary: false } })).statusCode, 200)

  const edited = await browser.submit(`/agents/${id}`, `/agents/${id}`, {
    ...FORM, agent_name: 'Night desk', begin_message: 'Good evening.', language: 'en-GB', webhook_url: '', status: 'inactive'
  })
  t.equal(edited.statusCode, 303)
  t.equal(edited.headers.location, `/agents/${id}?saved=1`)
  const agent = (await api('GET', `/v1/agent/${id}`)).json()
  t.match(agent, { agent_name: 'Night desk', webhook_url: null, status: 'inactive', voice: { voice_id: ECHO }, interruption_sensitivity: 0.9, call_settings: { language: 'en-GB', call_summary: false } })
  t.equal((await api('GET', `/v1/llm/${agent.llm_id as string}`)).json().begin_message, 'Good evening.')
  t.match((await browser.get('/agents')).body, /Night desk<\/a><\/td><td>inactive<\/td>/)

  const bad = await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...FORM, language: '' })
  t.equal(bad.statusCode, 400)
  t.match(bad.body, 'The language is required.')
  t.match(bad.body, 'value="Front desk"', 'the values sent, not the stored ones')
  t.equal((await api('GET', `/v1/agent/${id}`)).json().agent_name, 'Night desk', 'nothing changed')
})

t.test('another account\'s agent, or an unknown id: 404 for GET and POST, nothing changed', async (t) => {
  const ctx = await setup(t)
  const owner = await signedIn(ctx)
  const theirs = await createThroughForm(owner.browser)
  const { browser } = await signedIn(ctx)
  const page = await browser.get('/agents')
  t.notMatch(page.body, theirs, 'only one\'s own agents are listed')
  t.match(page.body, /No agents yet/)

  const csrf = csrfOf(page.body)
  for (const url of [`/agents/${theirs}`, '/agents/ffffffffffffffffffffffff', '/agents/not-an-id']) {
    const got = await browser.get(url)
    t.equal(got.statusCode, 404, `GET ${url}`)
    t.match(got.headers['content-type'], 'text/html')
    t.match(got.body, /You have no agent with that id/)
    t.match(got.body, /Sign out/, 'the error page keeps the signed-in layout')
    t.equal((await browser.post(url, { csrf_token: csrf, ...FORM, agent_name: 'Taken over' })).statusCode, 404, `POST ${url}`)
    t.equal((await browser.post(`${url}/talk`, { csrf_token: csrf })).statusCode, 404, `POST ${url}/talk`)
  }
  t.equal((await owner.api('GET', `/v1/agent/${theirs}`)).json().agent_name, 'Front desk')
  t.equal((await ctx.db.selectFrom('calls').select('id').execute()).length, 0, 'no call was started')
})

t.test('without the CSRF token, or signed out: 403, nothing created or changed', async (t) => {
  const ctx = await setup(t)
  const { user, browser, api } = await signedIn(ctx)
  const id = await createThroughForm(browser)

  const create = await browser.post('/agents', { ...FORM, agent_name: 'Forged' })
  t.equal(create.statusCode, 403)
  t.match(create.body, /This form has expired/)
  t.equal((await browser.post(`/agents/${id}`, { ...FORM, agent_name: 'Forged', csrf_token: 'wrong' })).statusCode, 403)
  t.equal((await browser.post(`/agents/${id}/talk`, {})).statusCode, 403)
  const agents = await ctx.db.selectFrom('agents').select('agent_name').where('user_id', '=', user.id).execute()
  t.same(agents.map((a) => a.agent_name), ['Front desk'])
  t.equal((await api('GET', `/v1/agent/${id}`)).json().agent_name, 'Front desk')
  t.equal((await ctx.db.selectFrom('calls').select('id').execute()).length, 0)

  const stranger = new ConsoleClient(ctx.app)
  t.equal((await stranger.get('/agents')).headers.location, '/login?next=%2Fagents')
  t.equal((await stranger.get(`/agents/${id}`)).headers.location, `/login?next=%2Fagents%2F${id}`)
  t.equal((await stranger.post('/agents', FORM)).statusCode, 403)
})

t.test('Talk to this agent: a web call, its token only in the redirect\'s fragment; an inactive agent explains', async (t) => {
  const ctx = await setup(t)
  const { user, browser, api } = await signedIn(ctx)
  const id = await createThroughForm(browser)
  const page = await browser.get(`/agents/${id}`)
  t.match(page.body, `<form method="post" action="/agents/${id}/talk">`)

  const talk = await browser.post(`/agents/${id}/talk`, { csrf_token: csrfOf(page.body) })
  t.equal(talk.statusCode, 303)
  const token = /^\/web-call#access_token=(wct_[0-9A-Za-z]+)$/.exec(talk.headers.location as string)?.[1]
  t.ok(token, `to the web-call page: ${talk.headers.location as string}`)
  const calls = await ctx.db.selectFrom('calls').select(['id', 'agent_id', 'call_type']).where('user_id', '=', user.id).execute()
  t.match(calls, [{ agent_id: id, call_type: 'web' }])
  t.match((await api('GET', `/v1/call/${calls[0].id}`)).json(), { _id: calls[0].id, agent_id: id, call_type: 'web', call_status: 'started' })
  const joined = await ctx.app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: token } })
  t.equal(joined.statusCode, 200, 'the token joins the call')
  t.match(joined.json(), { agent_name: 'Front desk', begin_message: 'Hello, this is the front desk.' })

  await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...FORM, status: 'inactive' })
  const refused = await browser.post(`/agents/${id}/talk`, { csrf_token: csrfOf(page.body) })
  t.equal(refused.statusCode, 409)
  t.match(refused.body, `No call: agent ${id} is inactive; set its status to active to place calls.`)
  t.match(refused.body, 'role="alert"')
  t.equal((await ctx.db.selectFrom('calls').select('id').where('user_id', '=', user.id).execute()).length, 1, 'no second call')
})
