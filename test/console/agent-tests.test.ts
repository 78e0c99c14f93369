import t from 'tap'
import { createAccount, setup, type TestContext } from '../helpers/app.ts'
import { addAction, createAgent } from '../helpers/calls.ts'
import { ConsoleClient, createConsoleUser, csrfOf, followRefusal, inputValue, PASSWORD, signedInWithKey, unescapeHtml as unescape } from '../helpers/console-client.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { startReceiver } from '../helpers/receiver.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'

// An agent's tests in the console (docs/console.md, "Tests of an agent"): the playground, its "Save as test", the
// scenario editor, runs and their results, through app.inject with the console's cookies and CSRF tokens.

/** The transcript's lines as the page shows them, tags stripped. */
const chatLines = (body: string) => [...(/<ol class="transcript chat" id="chat">([\s\S]*?)<\/ol>/.exec(body)?.[1] ?? '').matchAll(/<li[^>]*>([\s\S]*?)<\/li>/g)]
  .map((match) => unescape(match[1].replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ').replace(/ :/g, ':').trim()))

async function agentWithTools (ctx: TestContext, account: Awaited<ReturnType<typeof createAccount>>) {
  const agent = await createAgent(ctx.app, account, { agent_name: 'Bistro' })
  await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'end_call', settings: { name: 'end' } } })
  return agent
}

/** Sends one playground turn as the page's form would; answers the page. */
async function say (browser: ConsoleClient, agentId: string, page: string, message: string, extra: Record<string, string> = {}) {
  return await browser.post(`/agents/${agentId}/playground`, { csrf_token: csrfOf(page), conversation: inputValue(page, 'conversation'), message, ...extra })
}

t.test('the playground with the language model: replies and tool calls (name, arguments, answer) turn by turn; Start over', async (t) => {
  const llm = await startOpenAiHttpStandin(t)
  const receiver = await startReceiver(t)
  receiver.answers.push({ status: 200, body: '{"table":"booked","time":"19:00"}' })
  const ctx = await setup(t, { LLM_URL: llm.url, DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true' })
  const { account, browser } = await signedInWithKey(ctx)
  const agent = await agentWithTools(ctx, account)
  await addAction(ctx.app, account, agent._id, { name: 'lookup', when: 'during_call', url: `${receiver.url}/lookup`, description: 'find the booking' })

  const agentPage = await browser.get(`/agents/${agent._id}`)
  t.match(agentPage.body, `href="/agents/${agent._id}/playground"`, 'the agent page links the playground')
  t.match(agentPage.body, `href="/agents/${agent._id}/tests"`, 'and the tests')

  const empty = await browser.get(`/agents/${agent._id}/playground`)
  t.equal(empty.statusCode, 200)
  t.notMatch(empty.body, 'simulator', 'a model is configured: no notice')
  t.equal(inputValue(empty.body, 'conversation'), '', 'no conversation yet')

  llm.replies.push({ toolCalls: [{ name: 'lookup', arguments: { ref: 'A1' } }] }, { text: 'Your table is booked for 19:00.' })
  const first = await say(browser, agent._id, empty.body, 'Is my table <booked>?')
  t.equal(first.statusCode, 200, first.body)
  const lines = chatLines(first.body)
  t.match(lines, [/^Caller: Is my table <booked>\?$/, /^Tool lookup Arguments \{"ref":"A1"\} Answer .*booked.*19:00/, /^Agent: Your table is booked for 19:00\.$/], 'the caller\'s line, the tool call and the reply')
  t.match(first.body, 'Is my table &lt;booked&gt;?', 'escaped')
  t.equal(receiver.received.length, 1, 'the tool ran')
  const conversation = JSON.parse(inputValue(first.body, 'conversation'))
  t.equal(conversation.agent_id, agent._id, 'the page holds the conversation for the next turn')

  llm.replies.push({ text: 'See you then.' })
  const second = await say(browser, agent._id, first.body, 'Thanks!')
  t.equal(second.statusCode, 200, second.body)
  t.match(chatLines(second.body).slice(-2), ['Caller: Thanks!', 'Agent: See you then.'], 'the next turn follows the first')
  t.equal(chatLines(second.body).length, lines.length + 2)
  const history = llm.requests.chat.at(-1)!.body.messages as Array<{ role: string, content: string }>
  t.ok(history.some((m) => m.role === 'assistant' && m.content === 'Your table is booked for 19:00.'), 'the model hears the conversation the page sent back')

  // Refused: Post/Redirect/Get to the playground, whose draft holds the conversation so far; a reload asks nothing.
  const asked = llm.requests.chat.length
  const blank = await followRefusal(browser, await say(browser, agent._id, second.body, '  '), `/agents/${agent._id}/playground`)
  for (const view of [blank.page, await browser.get(blank.url)]) {
    t.equal(view.statusCode, 200)
    t.match(view.body, '<a href="#message">Type a message first.</a>', 'an empty message is refused, in words')
    t.same(chatLines(view.body), chatLines(second.body), 'the conversation is kept')
    t.equal(inputValue(view.body, 'conversation'), inputValue(second.body, 'conversation'), 'and carried on by the form')
  }
  t.equal(llm.requests.chat.length, asked, 'the model was asked nothing')
  llm.replies.push({ text: 'Anything else?' })
  const goesOn = await say(browser, agent._id, blank.page.body, 'One more thing')
  t.match(chatLines(goesOn.body).slice(-2), ['Caller: One more thing', 'Agent: Anything else?'], 'the conversation goes on from the page of the refusal')
  t.equal(chatLines(goesOn.body).length, chatLines(second.body).length + 2)

  t.match(second.body, `<form method="get" action="/agents/${agent._id}/playground" class="inline"><button type="submit">Start over</button></form>`, 'Start over opens the empty playground')
  t.match(second.body, 'Save as test')
  const calls = await ctx.db.selectFrom('calls').select('id').execute()
  t.same(calls, [], 'no call record')
})

t.test('without a model: the simulator\'s notice; the conversation ends; Save as test; run on the latest version: passed; results side by side', async (t) => {
  const ctx = await setup(t)
  const { account, browser } = await signedInWithKey(ctx)
  const agent = await agentWithTools(ctx, account)

  const empty = await browser.get(`/agents/${agent._id}/playground`)
  t.match(empty.body, /No language model is configured \(LLM_URL or OPENAI_API_KEY\), so the built-in simulator answers/)
  const first = await say(browser, agent._id, empty.body, 'Do you have a table on Tuesday?')
  t.equal(first.statusCode, 200, first.body)
  t.match(first.body, /simulator answers/, 'the notice stays')
  t.match(chatLines(first.body), ['Caller: Do you have a table on Tuesday?', /^Agent: Yes, Tuesday/], 'the line and the simulator\'s reply (the agent has no begin message)')
  // A workflow step entered shows by its name and kind (the conversation as the page holds it, with a step item).
  const held = JSON.parse(inputValue(first.body, 'conversation'))
  held.transcript.push({ speaker: 'step', content: 'Booking', timestamp: Date.now(), step: { id: 'booking', name: 'Booking', type: 'api_call' } })
  const stepped = await browser.post(`/agents/${agent._id}/playground`, { csrf_token: csrfOf(first.body), conversation: JSON.stringify(held), message: 'Yes please' })
  t.equal(stepped.statusCode, 200, stepped.body)
  t.match(chatLines(stepped.body)[2], 'Step Booking (API call)')
  const bye = await say(browser, agent._id, first.body, 'Thanks, goodbye')
  t.match(bye.body, 'The conversation has ended: the agent ended it.')
  t.notMatch(bye.body, 'name="message"', 'no more messages')
  t.match(chatLines(bye.body).slice(2), ['Caller: Thanks, goodbye', /^Tool end Arguments \{"reason":.*\} Answer /, /^Agent: /], 'the end_call tool with its arguments and answer')

  const saved = await browser.post(`/agents/${agent._id}/playground/save`, { csrf_token: csrfOf(bye.body), conversation: inputValue(bye.body, 'conversation'), end_reason: inputValue(bye.body, 'end_reason'), name: 'Tuesday table' })
  t.equal(saved.statusCode, 303, saved.body)
  const testId = /^\/agents\/[0-9a-f]{24}\/tests\/([0-9a-f]{24})\?saved=1$/.exec(String(saved.headers.location))?.[1]
  t.ok(testId, 'to the saved test')
  const editor = await browser.get(String(saved.headers.location))
  t.equal(editor.statusCode, 200)
  t.match(editor.body, '<h1>Test: Tuesday table</h1>')
  t.match(editor.body, /Do you have a table on Tuesday\?\nThanks, goodbye<\/textarea>/, 'the caller\'s lines are the script')
  t.match(editor.body, /<option value="ended:agent_hangup" selected>The agent ends the conversation<\/option>/, 'an expectation from how it ended, in words')

  const list = await browser.get(`/agents/${agent._id}/tests`)
  t.match(list.body, `<a href="/agents/${agent._id}/tests/${testId}">Tuesday table</a>`)
  t.match(list.body, '2 typed lines')

  const run = await browser.post(`/agents/${agent._id}/tests/run`, { csrf_token: csrfOf(list.body), version: '' })
  t.equal(run.statusCode, 303, run.body)
  const runPage = await browser.get(String(run.headers.location))
  t.equal(runPage.statusCode, 200)
  t.match(runPage.body, 'Every test passed: 1 passed, 0 failed.')
  t.match(runPage.body, /<span class="result passed">Passed<\/span> The conversation ends: the agent ended it/)
  t.match(runPage.body, 'the simulator (no language model is configured)')
  t.match(runPage.body, /<dt>Answer times<\/dt><dd>\d+ ms, \d+ ms<\/dd>/, 'the timings')
  t.match(runPage.body, 'Transcript of Tuesday table')

  // One test run again, then the two runs side by side.
  const one = await browser.post(`/agents/${agent._id}/tests/run`, { csrf_token: csrfOf(list.body), test_id: testId!, version: '' })
  t.equal(one.statusCode, 303, one.body)
  const otherId = /runs\/([0-9a-f]{24})$/.exec(String(run.headers.location))![1]
  const both = await browser.get(`${String(one.headers.location)}?with=${otherId}`)
  t.equal(both.statusCode, 200)
  t.equal(both.body.match(/<article class="test-result"/g)?.length, 2, 'both runs\' results')
  t.match(both.body, 'class="side-by-side"')
  const withVersions = await browser.get(`/agents/${agent._id}/tests`)
  t.match(withVersions.body, /<th scope="col"><a href="[^"]+">Version \d+<\/a><\/th>/, 'the list shows the latest result per version')
  t.match(withVersions.body, '<span class="result passed">Passed</span>')
})

t.test('the scenario editor: refused fields keep their text with the message under each; rows added, removed; saved; deleted', async (t) => {
  const ctx = await setup(t)
  const { account, browser } = await signedInWithKey(ctx)
  const agent = await agentWithTools(ctx, account)
  const url = `/agents/${agent._id}/tests`

  const blank = await browser.get(`${url}/new`)
  t.equal(blank.statusCode, 200)
  t.match(blank.body, '<legend>Expectation 1</legend>')
  t.match(blank.body, '<legend>Mock 1</legend>')

  const bad = await browser.post(url, {
    csrf_token: csrfOf(blank.body),
    name: 'Books <a> table',
    'caller.type': 'script',
    'caller.lines': '',
    mocks: '1',
    'mocks.0.tool': '',
    'mocks.0.output': '{"free": true}',
    expectations: '3',
    'expectations.0.kind': 'tool_called',
    'expectations.0.name': 'book',
    'expectations.0.value': '{not json',
    'expectations.1.kind': 'variable',
    'expectations.1.name': '',
    'expectations.1.value': '4',
    'expectations.2.kind': 'criterion',
    'expectations.2.value': ''
  })
  // Post/Redirect/Get: the new test's page shows the draft, again on a reload, which stores nothing.
  const refused = await followRefusal(browser, bad, `${url}/new`)
  for (const view of [refused.page, await browser.get(refused.url)]) {
    t.equal(view.statusCode, 200)
    t.match(view.body, /<h2>5 fields need another look<\/h2>/)
    t.match(view.body, '<a href="#caller-lines">Give the caller&#39;s lines, one per line.</a>', 'the summary links to the field')
    t.match(view.body, /id="caller-lines-error" class="field-error">Give the caller&#39;s lines, one per line\./)
    t.match(view.body, /id="mocks-0-tool-error" class="field-error">The tool is required\./)
    t.match(view.body, /id="expectations-0-value-error" class="field-error">The arguments must be a JSON object/)
    t.match(view.body, /id="expectations-1-name-error" class="field-error">Give the variable&#39;s name\./)
    t.match(view.body, /id="expectations-2-value-error" class="field-error">Give the statement\./)
    t.match(view.body, 'value="Books &lt;a&gt; table"', 'the text sent is kept')
    t.match(view.body, '{not json</textarea>')
  }
  const none = await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/tests`, headers: account.headers })
  t.match(none.body, /^\{"data":\[\]|^\[\]/, 'nothing stored')
  const noExpectation = await followRefusal(browser, await browser.post(url, { csrf_token: csrfOf(blank.body), name: 'x', 'caller.type': 'script', 'caller.lines': 'Hi', expectations: '0' }), `${url}/new`)
  t.match(noExpectation.page.body, '<a href="#expectations">Add at least one expectation: what the test checks.</a>', 'a group\'s problem links to its group')
  t.match(noExpectation.page.body, '<fieldset class="group" id="expectations"')

  const good = await browser.post(url, {
    csrf_token: csrfOf(blank.body),
    name: 'Books a table',
    'caller.type': 'script',
    'caller.lines': 'A table for four, please.\n\nOn Friday.',
    mocks: '2',
    'mocks.0.tool': 'book',
    'mocks.0.output': '{"booked": true}',
    'mocks.1.tool': '',
    'mocks.1.output': '',
    expectations: '4',
    'expectations.0.kind': 'tool_called',
    'expectations.0.name': 'book',
    'expectations.0.value': '{"people": 4}',
    'expectations.1.kind': 'variable',
    'expectations.1.name': 'party_size',
    'expectations.1.value': '4',
    'expectations.2.kind': 'transcript_excludes',
    'expectations.2.value': 'sorry',
    'expectations.3.kind': '',
    dynamic_context: '{"customer_name": "Ada"}'
  })
  t.equal(good.statusCode, 303, good.body)
  const api = await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/tests`, headers: account.headers })
  const [stored] = api.json().data ?? api.json()
  t.match(stored, {
    name: 'Books a table',
    caller: { type: 'script', lines: ['A table for four, please.', 'On Friday.'] },
    mocks: [{ tool: 'book', output: '{"booked": true}' }],
    expectations: [{ type: 'tool_called', tool: 'book', arguments: { people: 4 } }, { type: 'variable', name: 'party_size', value: 4 }, { type: 'transcript_excludes', text: 'sorry' }],
    dynamic_context: { customer_name: 'Ada' }
  }, 'stored as the API takes it')

  const page = await browser.get(String(good.headers.location))
  t.match(page.body, 'Saved.')
  t.match(page.body, /name="expectations\.1\.value"[^>]*>\n4<\/textarea>/, 'the variable\'s value shown as it was typed')
  // A refused edit: the test's page with the draft; the stored test unchanged.
  const badEdit = await followRefusal(browser, await browser.post(`${url}/${stored._id as string}`, {
    csrf_token: csrfOf(page.body), name: 'Renamed but refused', 'caller.type': 'persona', 'caller.persona': '', 'caller.max_turns': '5', mocks: '0', expectations: '1', 'expectations.0.kind': 'ended:agent_hangup'
  }), `${url}/${stored._id as string}`)
  for (const view of [badEdit.page, await browser.get(badEdit.url)]) {
    t.match(view.body, 'value="Renamed but refused"')
    t.match(view.body, '<a href="#caller-persona">Say who the caller is and what they want.</a>')
    t.notMatch(view.body, 'Saved.')
  }
  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/tests/${stored._id as string}`, headers: account.headers })).json(), { name: 'Books a table', caller: { type: 'script' } }, 'unchanged')
  // A persona instead; the tool expectation removed.
  const edited = await browser.post(`${url}/${stored._id as string}`, {
    csrf_token: csrfOf(page.body),
    name: 'Books a table',
    'caller.type': 'persona',
    'caller.persona': 'Ada wants a table for four on Friday.',
    'caller.max_turns': '5',
    mocks: '0',
    expectations: '2',
    'expectations.0.kind': 'tool_called',
    'expectations.0.name': 'book',
    'expectations.0.remove': 'true',
    'expectations.1.kind': 'ended:agent_hangup'
  })
  t.equal(edited.statusCode, 303, edited.body)
  t.notMatch((await browser.get(badEdit.url)).body, 'Renamed but refused', 'after a save, the old draft address shows the saved test')
  const after = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/tests/${stored._id as string}`, headers: account.headers })).json()
  t.match(after, { caller: { type: 'persona', persona: 'Ada wants a table for four on Friday.', max_turns: 5 }, mocks: [], expectations: [{ type: 'ended', reason: 'agent_hangup' }] })
  t.equal(after.expectations.length, 1)

  const deleted = await browser.post(`${url}/${stored._id as string}/delete`, { csrf_token: csrfOf(page.body) })
  t.equal(deleted.statusCode, 303)
  t.equal(deleted.headers.location, url)
  t.equal((await browser.get(`${url}/${stored._id as string}`)).statusCode, 404)
})

t.test('another account\'s agent, test or run: 404; without the CSRF token: 403; a conversation that is not one: 400', async (t) => {
  const ctx = await setup(t)
  const { account, browser } = await signedInWithKey(ctx)
  const agent = await agentWithTools(ctx, account)
  const created = await ctx.app.inject({
    method: 'POST',
    url: `/v1/agent/${agent._id}/tests`,
    headers: account.headers,
    payload: { name: 'Greets', caller: { type: 'script', lines: ['Hello'] }, expectations: [{ type: 'ended', reason: 'none' }] }
  })
  t.equal(created.statusCode, 201, created.body)
  const testId = created.json()._id as string
  const ran = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tests/run`, headers: account.headers, payload: {} })
  t.equal(ran.statusCode, 200, ran.body)
  const runId = ran.json()._id as string

  const intruder = new ConsoleClient(ctx.app)
  const other = await createConsoleUser(ctx.db)
  await createApiKey(ctx.db, other.id)
  await intruder.signIn(other.email, PASSWORD)
  const csrf = csrfOf((await intruder.get('/agents')).body)
  for (const url of [`/agents/${agent._id}/playground`, `/agents/${agent._id}/tests`, `/agents/${agent._id}/tests/new`, `/agents/${agent._id}/tests/${testId}`, `/agents/${agent._id}/tests/runs/${runId}`]) {
    t.equal((await intruder.get(url)).statusCode, 404, `GET ${url}`)
  }
  for (const url of [`/agents/${agent._id}/playground`, `/agents/${agent._id}/tests`, `/agents/${agent._id}/tests/run`, `/agents/${agent._id}/tests/${testId}`, `/agents/${agent._id}/tests/${testId}/delete`]) {
    t.equal((await intruder.post(url, { csrf_token: csrf, message: 'hi', name: 'Mine', 'caller.type': 'script', 'caller.lines': 'x', expectations: '1', 'expectations.0.kind': 'ended:none' })).statusCode, 404, `POST ${url}`)
  }
  // Their own agent with my test's or run's id.
  const theirs = await createAgent(ctx.app, { user: other, key: '', headers: { 'x-api-key': (await createApiKey(ctx.db, other.id)).key } })
  t.equal((await intruder.get(`/agents/${theirs._id}/tests/${testId}`)).statusCode, 404, 'a test of another agent')
  t.equal((await intruder.get(`/agents/${theirs._id}/tests/runs/${runId}`)).statusCode, 404, 'a run of another agent')
  t.equal((await browser.get(`/agents/${agent._id}/tests/runs/${runId}?with=${'f'.repeat(24)}`)).statusCode, 404, 'an unknown run to compare with')

  const stillThere = await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/tests/${testId}`, headers: account.headers })
  t.equal(stillThere.json().name, 'Greets', 'nothing changed')

  for (const url of [`/agents/${agent._id}/playground`, `/agents/${agent._id}/tests/run`, `/agents/${agent._id}/tests/${testId}/delete`]) {
    t.equal((await browser.post(url, { message: 'hi' })).statusCode, 403, `POST ${url} without the CSRF token`)
  }

  const page = await browser.get(`/agents/${agent._id}/playground`)
  const playground = `/agents/${agent._id}/playground`
  for (const conversation of ['{not json', '[]', '{"agent_id": 5}', JSON.stringify({ agent_id: agent._id, transcript: [{ speaker: 'user', content: 'a\u0000b', timestamp: 1 }], tokens: {}, speech: { recognised: 0, synthesised: 0 }, transfers: [], recording_ms: 0 })]) {
    const res = await followRefusal(browser, await browser.post(playground, { csrf_token: csrfOf(page.body), conversation, message: 'hi' }), playground)
    t.match(res.page.body, '<p>The conversation could not be read back. Start over.</p>', conversation)
    t.equal(inputValue(res.page.body, 'conversation'), '', 'the playground starts over')
  }
  const unsaved = await followRefusal(browser, await browser.post(`${playground}/save`, { csrf_token: csrfOf(page.body), conversation: '', name: 'Nothing' }), playground)
  t.match(unsaved.page.body, 'There is no conversation to save: type to the agent first.')
  // A long conversation is more than the console's usual 16 KB form: the playground takes it.
  const long = { agent_id: agent._id, transcript: Array.from({ length: 300 }, (_, i) => ({ speaker: i % 2 === 0 ? 'user' : 'agent', content: `line ${i} ${'x'.repeat(300)}`, timestamp: 1 + i })), tokens: {}, speech: { recognised: 0, synthesised: 0 }, transfers: [], recording_ms: 0 }
  const longTurn = await browser.post(`/agents/${agent._id}/playground`, { csrf_token: csrfOf(page.body), conversation: JSON.stringify(long), message: 'Still there?' })
  t.equal(longTurn.statusCode, 200, 'a conversation of about 100 KB')
  t.equal(chatLines(longTurn.body).length, 302, 'every item shown, and the new turn')
  const badVersion = (await followRefusal(browser, await browser.post(playground, { csrf_token: csrfOf(page.body), conversation: '', message: 'hi', version: 'latest' }), playground)).page
  t.match(badVersion.body, '<a href="#version">The version must be a whole number from 1.</a>')
  t.match(badVersion.body, 'value="latest"', 'the version typed is kept')
  const unknownVersion = await followRefusal(browser, await browser.post(playground, { csrf_token: csrfOf(page.body), conversation: '', message: 'Hello there', version: '999' }), playground)
  for (const view of [unknownVersion.page, await browser.get(unknownVersion.url)]) {
    t.match(view.body, /<div id="form-problems" class="notice error error-summary" role="alert" tabindex="-1">\s*<p>[^<]*999/, 'an unknown version, in words')
    t.match(view.body, 'value="Hello there"', 'the message typed is kept')
  }

  // A run against a version that is not one: back to the page of its form with the draft; nothing runs, on a reload neither.
  const runs = async () => (await ctx.db.selectFrom('agent_test_runs').select('id').execute()).length
  const ranBefore = await runs()
  const tests = `/agents/${agent._id}/tests`
  const notRun = await followRefusal(browser, await browser.submit(tests, `${tests}/run`, { version: 'two' }), tests)
  for (const view of [notRun.page, await browser.get(notRun.url)]) {
    t.match(view.body, '<a href="#run-version">The version must be a whole number from 1.</a>')
    t.match(view.body, /id="run-version" name="version" type="number" min="1" step="1" value="two" aria-describedby="run-version-hint run-version-error" aria-invalid="true"/)
  }
  const oneNotRun = await followRefusal(browser, await browser.submit(`${tests}/${testId}`, `${tests}/run`, { test_id: testId, version: '999' }), `${tests}/${testId}`)
  for (const view of [oneNotRun.page, await browser.get(oneNotRun.url)]) {
    t.match(view.body, /<p>Not run: [^<]*999/, 'an unknown version, in words, on the test\'s page')
    t.match(view.body, 'value="999"')
    t.match(view.body, 'value="Greets"', 'the test\'s editor shows the stored test')
  }
  t.equal(await runs(), ranBefore, 'nothing ran')

  // Save as test refused (the agent holds the most tests): the playground's draft keeps the conversation and the name.
  const turn = await say(browser, agent._id, page.body, 'Hello')
  t.equal(turn.statusCode, 200, turn.body)
  for (let i = 1; i < 50; i++) {
    await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tests`, headers: account.headers, payload: { name: `Test ${i}`, caller: { type: 'script', lines: ['Hello'] }, expectations: [{ type: 'ended', reason: 'none' }] } })
  }
  const full = await followRefusal(browser, await browser.post(`${playground}/save`, { csrf_token: csrfOf(turn.body), conversation: inputValue(turn.body, 'conversation'), name: 'The fifty-first' }), playground)
  for (const view of [full.page, await browser.get(full.url)]) {
    t.match(view.body, '<p>Not saved: An agent holds at most 50 tests.</p>')
    t.same(chatLines(view.body), chatLines(turn.body), 'the conversation is kept')
    t.match(view.body, 'id="test-name" name="name" value="The fifty-first"', 'and the name typed')
  }
  t.equal((await ctx.db.selectFrom('agent_tests').select('id').where('agent_id', '=', agent._id).execute()).length, 50, 'nothing saved')
})

t.test('a workspace member talks in the playground and runs the tests of the workspace\'s agent, but changes no test', async (t) => {
  const ctx = await setup(t)
  const owner = await signedInWithKey(ctx)
  const created = await owner.browser.submit('/workspaces', '/workspaces', { workspace_name: 'Front office', description: '' })
  const workspaceId = /^\/workspaces\/([0-9a-f]{24})$/.exec(String(created.headers.location))![1]
  const inside = await createAgent(ctx.app, owner.account, { agent_name: 'Shared' }, `?workspace_id=${workspaceId}`)
  const outside = await createAgent(ctx.app, owner.account, { agent_name: 'Private' })
  const test = await ctx.app.inject({
    method: 'POST',
    url: `/v1/agent/${inside._id}/tests`,
    headers: owner.account.headers,
    payload: { name: 'Greets', caller: { type: 'script', lines: ['Hello'] }, expectations: [{ type: 'transcript_excludes', text: 'sorry' }] }
  })
  const testId = test.json()._id as string

  const person = await createConsoleUser(ctx.db)
  await ctx.db.insertInto('workspace_members').values({ workspace_id: workspaceId, email: person.email.toLowerCase(), role: 'member', status: 'active', member_user_id: person.id, joined_at: new Date() }).execute()
  const member = new ConsoleClient(ctx.app)
  await member.signIn(person.email, PASSWORD)
  t.equal((await member.submit('/workspaces', '/workspace', { workspace_id: workspaceId })).statusCode, 303)

  t.equal((await member.get(`/agents/${outside._id}/playground`)).statusCode, 404, 'an agent outside the workspace')
  const playground = await member.get(`/agents/${inside._id}/playground`)
  t.equal(playground.statusCode, 200)
  const turn = await say(member, inside._id, playground.body, 'Hello there')
  t.equal(turn.statusCode, 200, 'a member may talk to it')
  t.notMatch(turn.body, 'Save as test', 'but not save a test')
  t.equal((await member.post(`/agents/${inside._id}/playground/save`, { csrf_token: csrfOf(turn.body), conversation: inputValue(turn.body, 'conversation'), name: 'Mine' })).statusCode, 403)

  const list = await member.get(`/agents/${inside._id}/tests`)
  t.equal(list.statusCode, 200)
  t.notMatch(list.body, 'New test')
  t.equal((await member.get(`/agents/${inside._id}/tests/new`)).statusCode, 403)
  const editor = await member.get(`/agents/${inside._id}/tests/${testId}`)
  t.match(editor.body, '<fieldset class="plain" disabled>', 'the test is shown read-only')
  t.notMatch(editor.body, 'Delete this test')
  for (const url of [`/agents/${inside._id}/tests`, `/agents/${inside._id}/tests/${testId}`, `/agents/${inside._id}/tests/${testId}/delete`]) {
    t.equal((await member.post(url, { csrf_token: csrfOf(list.body), name: 'Changed', 'caller.type': 'script', 'caller.lines': 'x', expectations: '1', 'expectations.0.kind': 'ended:none' })).statusCode, 403, `POST ${url}`)
  }
  const run = await member.post(`/agents/${inside._id}/tests/run`, { csrf_token: csrfOf(list.body), test_id: testId })
  t.equal(run.statusCode, 303, 'a member may run the tests')
  t.equal((await member.get(String(run.headers.location))).statusCode, 200)
  const stored = await ctx.app.inject({ method: 'GET', url: `/v1/agent/${inside._id}/tests/${testId}`, headers: owner.account.headers })
  t.equal(stored.json().name, 'Greets', 'nothing changed')
})
