import t from 'tap'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup, type TestContext } from '../helpers/app.ts'
import { ConsoleClient, createConsoleUser, csrfOf, followRefusal, PASSWORD, withoutLocalTime } from '../helpers/console-client.ts'

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

/** A refused form: the POST redirects (303) to the form's page, which shows the values sent and the problems (Post/Redirect/Get). */
async function refused (browser: ConsoleClient, url: string, action: string, form: Record<string, string>) {
  const res = await browser.submit(url, action, form)
  const location = res.headers.location as string | undefined
  if (res.statusCode !== 303 || location === undefined || !new RegExp(`^${url}\\?draft=[0-9a-f]{24}#form-problems$`).test(location)) throw new Error(`not refused with a redirect: ${res.statusCode} ${location}\n${res.body}`)
  return await browser.get(location.replace(/#.*$/, ''))
}

t.test('create an agent in the form: it exists through the API too, with its LLM configuration', async (t) => {
  const ctx = await setup(t)
  const { browser, api } = await signedIn(ctx)

  const empty = await browser.get('/agents')
  t.equal(empty.statusCode, 200)
  t.match(empty.body, /No agents yet/)
  t.match(empty.body, /<a href="\/agents" aria-current="page">Agents<\/a>/)
  t.match(empty.body, '<a href="/agents/start">New agent</a>')

  const form = await browser.get('/agents/new')
  t.equal(form.statusCode, 200)
  for (const field of Object.keys(FORM)) t.match(form.body, `<label for="${field}">`, `${field} has a label`)
  t.match(form.body, /<input type="radio" name="voice_id" id="voice_id" value="65a0f0000000000000000001" checked>/, 'the default voice is chosen')

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
  t.match(page.body, `value="${ECHO}" checked>`)
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
  const res = await refused(browser, '/agents/new', '/agents', bad)
  t.equal(res.statusCode, 200)
  t.match(res.body, /<div id="form-problems" class="notice error error-summary" role="alert" tabindex="-1">\s*<h2>4 fields need another look<\/h2>/)
  t.match(res.body, '<li><a href="#agent_name">The name is required.</a></li>', 'each problem links to its field')
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

  const long = await refused(browser, '/agents/new', '/agents', { ...FORM, agent_name: 'x'.repeat(201), general_prompt: 'p'.repeat(50_001) })
  t.equal(long.statusCode, 200)
  t.match(long.body, 'The name must NOT have more than 200 characters.')
  t.match(long.body, 'The prompt must NOT have more than 50000 characters.')
  const status = await refused(browser, '/agents/new', '/agents', { ...FORM, status: 'sleeping' })
  t.equal(status.statusCode, 200)
  t.match(status.body, 'Choose active or inactive.')
  const nul = await browser.submit('/agents/new', '/agents', { ...FORM, agent_name: 'a\u0000b' })
  t.equal(nul.statusCode, 400, 'text PostgreSQL cannot store: a 400 (the console\'s form parser), not a 500')

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
    // The agent's page has scripts of its own only: the Talk button's and the form's unsaved-changes question.
    const own = ['<script type="module" src="/console/talk.js"></script>', '<script src="/console/unsaved.js" defer></script>']
    t.notMatch(own.reduce((body, script) => body.replace(script, ''), withoutLocalTime(page.body)), /<script/i, 'no other script element')
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

  const bad = await refused(browser, `/agents/${id}`, `/agents/${id}`, { ...FORM, language: '' })
  t.equal(bad.statusCode, 200)
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
  for (const url of [`/agents/${theirs}`, '/agents/ffffffffffffffffffffffff']) {
    const got = await browser.get(url)
    t.equal(got.statusCode, 404, `GET ${url}`)
    t.match(got.headers['content-type'], 'text/html')
    t.match(got.body, /You have no agent with that id/)
    t.match(got.body, /Sign out/, 'the error page keeps the signed-in layout')
    t.equal((await browser.post(url, { csrf_token: csrf, ...FORM, agent_name: 'Taken over' })).statusCode, 404, `POST ${url}`)
    t.equal((await browser.post(`${url}/talk`, { csrf_token: csrf })).statusCode, 404, `POST ${url}/talk`)
  }
  // Not an id at all: the route's schema (idParams) answers the console's 404 page.
  for (const [method, url] of [['GET', '/agents/not-an-id'], ['POST', '/agents/not-an-id'], ['POST', '/agents/not-an-id/talk'], ['POST', '/agents/not-an-id/widget-key'], ['POST', '/agents/not-an-id/widget-key/delete']]) {
    const res = method === 'GET' ? await browser.get(url) : await browser.post(url, { csrf_token: csrf, ...FORM })
    t.equal(res.statusCode, 404, `${method} ${url}`)
    t.match(res.headers['content-type'], 'text/html')
    t.match(res.body, '<h1>Page not found</h1>')
    t.match(res.body, 'There is no page at this address')
  }
  t.equal((await owner.api('GET', `/v1/agent/${theirs}`)).json().agent_name, 'Front desk')
  t.equal((await ctx.db.selectFrom('calls').select('id').execute()).length, 0, 'no call was started')
})

t.test('the agent pages\' addresses are checked by their schemas: a bad notice or draft is a 400 in words', async (t) => {
  const ctx = await setup(t)
  const { browser } = await signedIn(ctx)
  const id = await createThroughForm(browser)
  const draft = await browser.get(`/agents/${id}?draft=nope`)
  t.equal(draft.statusCode, 400)
  t.match(draft.body, 'The draft is not in the expected form. Check the address')
  const twice = await browser.get('/agents?deleted=1&deleted=1')
  t.equal(twice.statusCode, 400)
  t.match(twice.body, 'The notice of a deletion was given more than once.')
  t.equal((await browser.get(`/agents/${id.toUpperCase()}?saved=1&knowledge=saved`)).statusCode, 200, 'an id in capitals is the same agent')
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

t.test('Talk to this agent: no call until the button is pressed, then one web call and its token; an inactive agent explains', async (t) => {
  const ctx = await setup(t)
  const { user, browser, api } = await signedIn(ctx)
  const id = await createThroughForm(browser)
  const page = await browser.get(`/agents/${id}`)
  t.match(page.body, `<div id="talk-call" class="web-call" data-action="/agents/${id}/talk" data-csrf="${csrfOf(page.body)}">`)
  t.match(page.body, '<script type="module" src="/console/talk.js"></script>')
  t.match(page.headers['content-security-policy'], "connect-src 'self'", 'the page may open the call\'s stream')
  t.equal((await ctx.db.selectFrom('calls').select('id').execute()).length, 0, 'opening the agent\'s page records no call')

  // What the button's script does when pressed: one call, answered as its id and access token (JSON, not a page).
  const talk = await browser.post(`/agents/${id}/talk`, { csrf_token: csrfOf(page.body) })
  t.equal(talk.statusCode, 201)
  t.match(talk.headers['content-type'], 'application/json')
  const { call_id: callId, access_token: token } = talk.json()
  t.match(token, /^wct_[0-9A-Za-z]+$/)
  const calls = await ctx.db.selectFrom('calls').select(['id', 'agent_id', 'call_type']).where('user_id', '=', user.id).execute()
  t.match(calls, [{ id: callId, agent_id: id, call_type: 'web' }])
  t.match((await api('GET', `/v1/call/${callId}`)).json(), { _id: callId, agent_id: id, call_type: 'web', call_status: 'started' })
  const joined = await ctx.app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: token } })
  t.equal(joined.statusCode, 200, 'the token joins the call')
  t.match(joined.json(), { agent_name: 'Front desk', begin_message: 'Hello, this is the front desk.' })

  const script = await browser.get('/console/talk.js')
  t.equal(script.statusCode, 200)
  t.match(script.headers['content-type'], 'text/javascript')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/web-call/panel.js' })).statusCode, 200, 'the controls it imports')

  await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...FORM, status: 'inactive' })
  const refused = await browser.post(`/agents/${id}/talk`, { csrf_token: csrfOf(page.body) })
  t.equal(refused.statusCode, 409)
  t.same(refused.json(), { message: `No call: agent ${id} is inactive; set its status to active to place calls.` })
  t.equal((await ctx.db.selectFrom('calls').select('id').where('user_id', '=', user.id).execute()).length, 1, 'no second call')
})

t.test('the agent form shows and saves call_settings.responsiveness, and refuses one out of 0 to 1', async (t) => {
  const ctx = await setup(t)
  const { browser, api } = await signedIn(ctx)
  const form = await browser.get('/agents/new')
  t.match(form.body, '<label for="call_settings-responsiveness">Responsiveness')
  t.match(form.body, 'name="call_settings.responsiveness" type="number" value="0.5" min="0" max="1" step="any"', 'the default is shown')

  const id = await createThroughForm(browser, { ...FORM, 'call_settings.responsiveness': '0.8' })
  t.match((await api('GET', `/v1/agent/${id}`)).json().call_settings, { responsiveness: 0.8 })
  t.match((await browser.get(`/agents/${id}`)).body, 'name="call_settings.responsiveness" type="number" value="0.8"')

  const edited = await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...FORM, 'call_settings.responsiveness': '0.25' })
  t.equal(edited.statusCode, 303, edited.body)
  t.match((await api('GET', `/v1/agent/${id}`)).json().call_settings, { responsiveness: 0.25, language: 'de-DE' })

  const bad = await refused(browser, `/agents/${id}`, `/agents/${id}`, { ...FORM, 'call_settings.responsiveness': '1.5' })
  t.equal(bad.statusCode, 200)
  t.match(bad.body, '<p id="call_settings-responsiveness-error" class="field-error">The responsiveness must be &lt;= 1.</p>')
  t.match((await api('GET', `/v1/agent/${id}`)).json().call_settings, { responsiveness: 0.25 }, 'nothing changed')
})

t.test('every other setting of the API: language model, calls, behaviour, widget, call-backs and data retrieval', async (t) => {
  const ctx = await setup(t)
  const { browser, api } = await signedIn(ctx)
  const blank = await browser.get('/agents/new')
  t.notMatch(blank.body, '<legend>Field 1</legend>', 'a new form has no empty data-retrieval row')
  // "Add a field": the form comes back (Post/Redirect/Get) with the values typed and one empty row, nothing saved.
  const added = await browser.submit('/agents/new', '/agents', { ...FORM, data_retrieval: '0', data_retrieval_add: 'true' })
  t.equal(added.statusCode, 303)
  t.match(added.headers.location, /^\/agents\/new\?draft=[0-9a-f]{24}#section-data$/)
  const form = await browser.get((added.headers.location as string).replace(/#.*$/, ''))
  t.match(form.body, 'value="Front desk"', 'the values typed are kept')
  t.notMatch(form.body, 'form-problems', 'no problem shown')
  for (const id of ['llm-model', 'llm-temperature', 'llm-max_tokens', 'llm-engine', 'call_settings-max_call_duration_minutes', 'call_settings-stt_languages',
    'call_settings-recording_enabled', 'interruption_sensitivity', 'folder', 'widget_settings-primary_color', 'callback_settings-max_attempts', 'data_retrieval-0-name', 'data_retrieval-0-type']) {
    t.match(form.body, `<label for="${id}">`, `${id} has a label`)
  }
  t.match(form.body, '<legend>Call back after</legend>')
  t.match(form.body, '<legend>Voicemail</legend>')
  t.match(blank.body, 'id="call_settings-sentiment_analysis" name="call_settings.sentiment_analysis" value="true" checked', 'the defaults are shown')

  const settings = {
    ...FORM,
    'llm.model': 'gpt-4o', 'llm.temperature': '0.2', 'llm.max_tokens': '300', 'llm.engine': 'simulator',
    'call_settings.sentiment_analysis': 'false', 'call_settings.call_summary': 'true', 'call_settings.max_call_duration_minutes': '12.5',
    'call_settings.reminder_after_seconds': '20', 'call_settings.reminder_max_count': '0', 'call_settings.silence_timeout_seconds': '60',
    'call_settings.recording_enabled': 'false', 'call_settings.stt_languages': 'de-DE\nen-US',
    interruption_sensitivity: '0.8', is_data_collection_active: 'true', is_customer_memory_active: 'true', folder: 'Sales <team>',
    'widget_settings.enabled': 'true', 'widget_settings.theme': 'dark', 'widget_settings.primary_color': '#112233', 'widget_settings.position': 'bottom-left',
    'widget_settings.greeting': 'Hi!', 'widget_settings.allowed_origins': 'https://www.example.test',
    'callback_settings.enabled': 'true', 'callback_settings.max_attempts': '3', 'callback_settings.retry_delay_minutes': '15', 'callback_settings.on_outcomes': '',
    'callback_settings.on_outcomes.busy': 'true', 'callback_settings.on_outcomes.voicemail': 'true',
    'call_settings.wait_for_hello_seconds': '5',
    'voicemail_settings.detection': 'true', 'voicemail_settings.action': 'leave_message', 'voicemail_settings.message': 'Hi {{name}}, please call us back.', 'voicemail_settings.detection_timeout_seconds': '20',
    data_retrieval: '3',
    'data_retrieval.0.name': 'people', 'data_retrieval.0.type': 'number', 'data_retrieval.0.description': 'How many people', 'data_retrieval.0.required': 'true',
    'data_retrieval.1.name': 'mood', 'data_retrieval.1.type': 'enum', 'data_retrieval.1.enum_values': 'happy\nangry', 'data_retrieval.1.required': 'false',
    'data_retrieval.2.name': '', 'data_retrieval.2.type': 'string', 'data_retrieval.2.description': '', 'data_retrieval.2.required': 'false'
  }
  const created = await browser.submit('/agents/new', '/agents', settings)
  t.equal(created.statusCode, 303, created.body)
  const id = /^\/agents\/([0-9a-f]{24})/.exec(created.headers.location as string)![1]
  const agent = (await api('GET', `/v1/agent/${id}`)).json()
  t.match(agent, {
    interruption_sensitivity: 0.8, is_data_collection_active: true, is_customer_memory_active: true, folder: 'Sales <team>',
    call_settings: { language: 'de-DE', sentiment_analysis: false, call_summary: true, max_call_duration_minutes: 12.5, reminder_after_seconds: 20, reminder_max_count: 0, silence_timeout_seconds: 60, recording_enabled: false, stt_languages: ['de-DE', 'en-US'] },
    widget_settings: { enabled: true, theme: 'dark', primary_color: '#112233', position: 'bottom-left', greeting: 'Hi!', allowed_origins: ['https://www.example.test'] },
    callback_settings: { enabled: true, max_attempts: 3, retry_delay_minutes: 15, on_outcomes: ['busy', 'voicemail'] },
    voicemail_settings: { detection: true, action: 'leave_message', message: 'Hi {{name}}, please call us back.', detection_timeout_seconds: 20 }
  })
  t.equal(agent.call_settings.wait_for_hello_seconds, 5)
  t.same(agent.data_retrieval, [
    { name: 'people', type: 'number', description: 'How many people', required: true },
    { name: 'mood', type: 'enum', description: '', required: false, enum_values: ['happy', 'angry'] }
  ], 'the empty row is no field')
  t.match((await api('GET', `/v1/llm/${agent.llm_id as string}`)).json(), { model: 'gpt-4o', temperature: 0.2, max_tokens: 300, engine: 'simulator' })

  const page = await browser.get(`/agents/${id}`)
  t.match(page.body, 'value="Sales &lt;team&gt;"')
  t.match(page.body, '<legend>Field 2</legend>', 'the stored fields')
  t.notMatch(page.body, '<legend>Field 3</legend>', 'and no empty one')
  t.match(page.body, '>\nhappy\nangry</textarea>')

  // Edit: the first field removed, the members emptied where the API allows it.
  const edited = await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...settings, 'data_retrieval.0.remove': 'true', 'llm.max_tokens': '', 'llm.engine': '', folder: '', 'widget_settings.greeting': '', 'call_settings.stt_languages': '' })
  t.equal(edited.statusCode, 303, edited.body)
  const after = (await api('GET', `/v1/agent/${id}`)).json()
  t.match(after, { folder: null, widget_settings: { greeting: '' }, call_settings: { stt_languages: [] } })
  t.same(after.data_retrieval.map((f: { name: string }) => f.name), ['mood'])
  t.match((await api('GET', `/v1/llm/${agent.llm_id as string}`)).json(), { max_tokens: null, engine: null })

  const bad = await refused(browser, `/agents/${id}`, `/agents/${id}`, {
    ...settings, 'call_settings.max_call_duration_minutes': '20', 'call_settings.stt_languages': 'en-US\nnot a tag', 'widget_settings.primary_color': 'blue',
    'llm.temperature': '', 'data_retrieval.1.name': 'people'
  })
  t.equal(bad.statusCode, 200)
  t.match(bad.body, '<p id="call_settings-max_call_duration_minutes-error" class="field-error">The longest call (minutes) must be &lt;= 15.</p>')
  t.match(bad.body, 'Line 2 of the languages the speech recogniser listens for must be a BCP-47 language tag such as en-US.')
  t.match(bad.body, 'id="widget_settings-primary_color-error"')
  t.match(bad.body, 'The temperature is required.')
  const twice = await refused(browser, `/agents/${id}`, `/agents/${id}`, { ...settings, 'data_retrieval.1.name': 'people' })
  t.equal(twice.statusCode, 200)
  t.match(twice.body, '<p id="data_retrieval-1-name-error" class="field-error">The name &quot;people&quot; is used twice; names must be unique.</p>')
  const enumless = await refused(browser, `/agents/${id}`, `/agents/${id}`, { ...settings, 'data_retrieval.1.enum_values': '' })
  t.match(enumless.body, '<p id="data_retrieval-1-enum_values-error" class="field-error">The type One of the allowed values needs its allowed values, one per line.</p>')
  const keypad = await refused(browser, `/agents/${id}`, `/agents/${id}`, { ...settings, 'data_retrieval.0.keypad': 'true' })
  t.match(keypad.body, '<p id="data_retrieval-0-keypad-error" class="field-error">Only a Text field can be typed on the keypad: untick it or choose Text.</p>')
  const builtIn = await refused(browser, `/agents/${id}`, `/agents/${id}`, { ...settings, 'data_retrieval.0.name': 'call_id' })
  t.match(builtIn.body, 'is a built-in call variable')
  t.same((await api('GET', `/v1/agent/${id}`)).json().data_retrieval.map((f: { name: string }) => f.name), ['mood'], 'nothing changed')
})

t.test('turn detection: ours by default, the provider\'s with the realtime engine, refused under its field otherwise', async (t) => {
  const ctx = await setup(t)
  const { browser, api } = await signedIn(ctx)
  const form = await browser.get('/agents/new')
  for (const id of ['llm-turn_detection-type', 'llm-turn_detection-eagerness', 'llm-turn_detection-threshold', 'llm-turn_detection-silence_duration_ms', 'llm-turn_detection-prefix_padding_ms']) {
    t.match(form.body, `<label for="${id}">`, `${id} has a label`)
  }
  t.match(form.body, '<option value="switchboard" selected>', 'ours is the default')

  const created = await browser.submit('/agents/new', '/agents', { ...FORM, 'llm.engine': 'realtime', 'llm.turn_detection.type': 'semantic_vad', 'llm.turn_detection.eagerness': 'low' })
  t.equal(created.statusCode, 303, created.body)
  const id = /^\/agents\/([0-9a-f]{24})/.exec(created.headers.location as string)![1]
  const { llm_id: llmId } = (await api('GET', `/v1/agent/${id}`)).json()
  t.same((await api('GET', `/v1/llm/${llmId as string}`)).json().turn_detection, { type: 'semantic_vad', eagerness: 'low' }, 'the emptied settings are left out')
  const page = await browser.get(`/agents/${id}`)
  t.match(page.body, '<option value="semantic_vad" selected>')

  // As a browser sends the form: every field of the section.
  const turns = { 'llm.turn_detection.type': 'semantic_vad', 'llm.turn_detection.eagerness': 'low', 'llm.turn_detection.threshold': '', 'llm.turn_detection.silence_duration_ms': '', 'llm.turn_detection.prefix_padding_ms': '' }
  const cascade = await refused(browser, `/agents/${id}`, `/agents/${id}`, { ...FORM, ...turns, 'llm.engine': 'cascade' })
  t.equal(cascade.statusCode, 200)
  t.match(cascade.body, /<p id="llm-turn_detection-type-error" class="field-error">Meaning of the words \(the realtime provider&#39;s\) needs the Realtime engine, and the engine is Cascade.<\/p>/)
  const eager = await refused(browser, `/agents/${id}`, `/agents/${id}`, { ...FORM, ...turns, 'llm.engine': 'realtime', 'llm.turn_detection.type': 'server_vad' })
  t.equal(eager.statusCode, 200)
  t.match(eager.body, '<p id="llm-turn_detection-eagerness-error" class="field-error">This setting is only for Meaning of the words (the realtime provider&#39;s), not Voice activity (the realtime provider&#39;s).</p>')
  const away = await refused(browser, `/agents/${id}`, `/agents/${id}`, { ...FORM, 'llm.engine': 'cascade' })
  t.match(away.body, '<p id="llm-engine-error" class="field-error">The engine Cascade cannot use the stored turn detection, Meaning of the words (the realtime provider&#39;s): choose Switchboard under Turn detection as well.</p>', 'a form without the section: the stored one counts')
  t.same((await api('GET', `/v1/llm/${llmId as string}`)).json().turn_detection, { type: 'semantic_vad', eagerness: 'low' }, 'nothing changed')

  const ours = await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...FORM, ...turns, 'llm.engine': 'cascade', 'llm.turn_detection.type': 'switchboard', 'llm.turn_detection.eagerness': '' })
  t.equal(ours.statusCode, 303, ours.body)
  t.match((await api('GET', `/v1/llm/${llmId as string}`)).json(), { engine: 'cascade', turn_detection: { type: 'switchboard' } })
})

t.test('Post/Redirect/Get: a refused save redirects to the agent page, which shows the draft; a reload shows it again and resubmits nothing; no other session reads it; a save clears it', async (t) => {
  const ctx = await setup(t)
  const { user, browser, api } = await signedIn(ctx)
  const id = await createThroughForm(browser)
  const res = await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...FORM, agent_name: 'Typed but refused', language: '' })
  t.equal(res.statusCode, 303, 'the POST answers with a redirect, never a page at its own address')
  const draftUrl = (res.headers.location as string).replace(/#.*$/, '')
  t.match(draftUrl, new RegExp(`^/agents/${id}\\?draft=[0-9a-f]{24}$`))
  const versions = async () => (await ctx.db.selectFrom('agent_versions').select('version').where('agent_id', '=', id).execute()).length
  const before = await versions()
  for (const attempt of ['first view', 'reload']) {
    const page = await browser.get(draftUrl)
    t.equal(page.statusCode, 200, attempt)
    t.match(page.body, 'value="Typed but refused"', `${attempt}: the values sent`)
    t.match(page.body, '<a href="#language">The language is required.</a>', `${attempt}: the problem in the summary`)
  }
  t.equal(await versions(), before, 'reloading resubmits nothing')
  t.equal((await api('GET', `/v1/agent/${id}`)).json().agent_name, 'Front desk')

  // Another session of the same user: the draft is not theirs; it sees the stored agent.
  const other = new ConsoleClient(ctx.app)
  await other.signIn(user.email, PASSWORD)
  const elsewhere = await other.get(draftUrl)
  t.match(elsewhere.body, 'value="Front desk"')
  t.notMatch(elsewhere.body, 'Typed but refused')
  const saved = await browser.submit(draftUrl, `/agents/${id}`, { ...FORM, agent_name: 'Saved now' })
  t.equal(saved.statusCode, 303)
  const after = await browser.get(draftUrl)
  t.match(after.body, 'value="Saved now"', 'after a save, the old draft address shows the saved agent')
  t.notMatch(after.body, 'form-problems')
})

t.test('the error summary\'s links lead to their place on the page, for a problem of the whole data retrieval too', async (t) => {
  const ctx = await setup(t)
  const { browser } = await signedIn(ctx)
  const id = await createThroughForm(browser)
  const rows = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [[`data_retrieval.${i}.name`, `field_${i}`], [`data_retrieval.${i}.type`, 'string'], [`data_retrieval.${i}.description`, 'x']]).flat())
  const { page } = await followRefusal(browser, await browser.submit(`/agents/${id}`, `/agents/${id}`, { ...FORM, data_retrieval: '51', ...rows }), `/agents/${id}`)
  t.match(page.body, '<a href="#data_retrieval">An agent extracts at most 50 fields.</a>')
  t.match(page.body, '<div id="data_retrieval" tabindex="-1">', 'the link\'s target, which takes focus')
})

t.test('a patterned field refused says what it takes in words, never the expression', async (t) => {
  const ctx = await setup(t)
  const { browser } = await signedIn(ctx)
  const id = await createThroughForm(browser)
  const bad = await refused(browser, `/agents/${id}`, `/agents/${id}`, {
    ...FORM, 'widget_settings.primary_color': 'blue', data_retrieval: '1', 'data_retrieval.0.name': '1st guest', 'data_retrieval.0.type': 'string'
  })
  const problems = [...bad.body.matchAll(/<p id="([\w-]+)-error" class="field-error">([^<]*)<\/p>/g)].map(([, field, text]) => ({ field, text }))
  t.same(problems.map(({ field }) => field).sort(), ['data_retrieval-0-name', 'widget_settings-primary_color'], 'both are refused')
  for (const { field, text } of problems) t.notMatch(text, /[$^[]|pattern/, `${field}: ${text}`)
  t.match(bad.body, 'The primary colour must be # and six hexadecimal digits (0-9, a-f), such as #2563eb.')
  t.match(bad.body, 'The variable may hold only letters, digits and underscores, start with a letter or an underscore, and be at most 64 characters long.')
})

t.test('the choices of the agent form read in words; the engine\'s default names the installation\'s engine', async (t) => {
  const ctx = await setup(t)
  const { browser } = await signedIn(ctx)
  const form = await browser.get('/agents/new')
  const options = (id: string) => {
    const select = new RegExp(`<select id="${id}"[^>]*>([\\s\\S]*?)</select>`).exec(form.body)
    if (select === null) throw new Error(`no select ${id}`)
    return [...select[1].matchAll(/<option value="([^"]*)"[^>]*>([^<]*)<\/option>/g)].map(([, value, label]) => `${value}: ${label}`)
  }
  t.same(options('llm-engine'), [
    ': The installation&#39;s default (Realtime)', 'realtime: Realtime: one speech-to-speech model', 'cascade: Cascade: speech-to-text, language model, text-to-speech', 'simulator: Simulator: typed turns, no providers'
  ])
  t.same(options('llm-turn_detection-type'), ['switchboard: Switchboard', 'server_vad: Voice activity (the realtime provider&#39;s)', 'semantic_vad: Meaning of the words (the realtime provider&#39;s)'])
  t.same(options('llm-turn_detection-eagerness'), [': The default (Auto)', 'low: Low', 'medium: Medium', 'high: High', 'auto: Auto (as Medium)'])
  t.same(options('widget_settings-theme'), ['light: Light', 'dark: Dark'])
  t.same(options('widget_settings-position'), ['bottom-right: Bottom right', 'bottom-left: Bottom left'])
  t.same(options('voicemail_settings-action'), ['hang_up: Hang up', 'leave_message: Leave message'])
  t.match(form.body, '<label for="callback_settings-on_outcomes-no_answer">No answer</label>')
  t.match(form.body, '<label for="callback_settings-on_outcomes-voicemail">An answering machine</label>')
  t.notMatch(form.body, />[^<]*\b(null|server_vad|semantic_vad|bottom-right)\b[^<]*</, 'no value of the API shown as a word')

  const added = await browser.submit('/agents/new', '/agents', { ...FORM, data_retrieval: '0', data_retrieval_add: 'true' })
  const row = await browser.get((added.headers.location as string).replace(/#.*$/, ''))
  t.match(row.body, '<option value="boolean">Yes or no</option>')
  t.match(row.body, '<option value="enum">One of the allowed values</option>')
  t.match(row.body, '<option value="string">Text</option>')
})

t.test('the engine\'s default follows VOICE_ENGINE', async (t) => {
  const ctx = await setup(t, { VOICE_ENGINE: 'cascade' })
  const { browser } = await signedIn(ctx)
  const form = await browser.get('/agents/new')
  t.match(form.body, /<select id="llm-engine"[^>]*>\s*<option value="" selected>The installation&#39;s default \(Cascade\)<\/option>/)
})
