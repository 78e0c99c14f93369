import t from 'tap'
import { setup } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { csrfOf, inputValue, signedInWithKey, type ConsoleClient } from '../helpers/console-client.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'

// The whole journey in the console, as a person takes it: build a two-step agent, talk to it in the
// playground, save the conversation as a test, change the agent, see the test fail on the new version, restore the
// old version and see it pass again. The model stand-in moves to the booking step whenever it is offered and the
// caller asks to book, so what the agent does follows from its workflow alone.

async function addStep (browser: ConsoleClient, agentId: string, type: string, fields: Record<string, string>) {
  const page = await browser.get(`/agents/${agentId}/workflow/steps/new?type=${type}`)
  return await browser.post(`/agents/${agentId}/workflow/steps`, { csrf_token: csrfOf(page.body), type, transitions: '1', ...fields })
}

t.test('build a workflow, talk to it, save the talk as a test, change the agent, see the test fail, restore, see it pass', async (t) => {
  const llm = await startOpenAiHttpStandin(t)
  llm.replyTo = (body) => {
    if (body?.stream !== true) return undefined
    const messages = body.messages as Array<{ role: string, content: string | null }>
    const last = messages.at(-1)
    if (last?.role === 'tool') return { text: 'Your table is booked. Goodbye!' }
    const offered = (body.tools ?? []).some((tool: { function: { name: string } }) => tool.function.name === 'go_to_book')
    if (offered && /book/i.test(last?.content ?? '')) return { toolCalls: [{ name: 'go_to_book', arguments: {} }] }
    return { text: 'Welcome to Luigi\'s. What can I do for you?' }
  }
  const ctx = await setup(t, { LLM_URL: llm.url })
  const { account, browser } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Luigi' })
  const api = async (url: string) => (await ctx.app.inject({ method: 'GET', url, headers: account.headers })).json()

  // Build: a greeting step, and a booking step (the end) the model moves to when the caller wants to book.
  const greet = await addStep(browser, agent._id, 'conversation', { id: 'greet', name: 'Greet', global: '', instructions: 'Greet the caller.', interruption_sensitivity: '', voice_id: '', tools_mode: 'all', variables: '0' })
  t.equal(greet.statusCode, 303, greet.body)
  const book = await addStep(browser, agent._id, 'end', { id: 'book', name: 'Book', global: '', message: 'Your table is booked.', from: 'greet', from_condition: 'prompt', from_text: 'the caller wants to book a table' })
  t.equal(book.statusCode, 303, book.body)
  const workflowPage = await browser.get(`/agents/${agent._id}/workflow`)
  t.match(workflowPage.body, /<svg[\s\S]*Greet[\s\S]*Book[\s\S]*<\/svg>/, 'the graph shows both steps')
  const built = (await api(`/v1/agent/${agent._id}`)).version as number

  // Talk in the playground.
  let page = (await browser.get(`/agents/${agent._id}/playground`)).body
  const said = await browser.post(`/agents/${agent._id}/playground`, { csrf_token: csrfOf(page), conversation: inputValue(page, 'conversation'), message: 'Hello' })
  t.equal(said.statusCode, 200, said.body)
  page = said.body
  const booked = await browser.post(`/agents/${agent._id}/playground`, { csrf_token: csrfOf(page), conversation: inputValue(page, 'conversation'), message: 'I would like to book a table for two' })
  t.equal(booked.statusCode, 200, booked.body)
  page = booked.body
  t.match(page, 'Your table is booked. Goodbye!')
  t.match(page, /Step[\s\S]{0,80}Book/, 'the step entered is shown')

  // Save the conversation as a test.
  const saved = await browser.post(`/agents/${agent._id}/playground/save`, { csrf_token: csrfOf(page), conversation: inputValue(page, 'conversation'), end_reason: inputValue(page, 'end_reason'), name: 'Books a table' })
  t.equal(saved.statusCode, 303, saved.body)
  const [test] = (await api(`/v1/agent/${agent._id}/tests`)).data
  t.same(test.caller.lines, ['Hello', 'I would like to book a table for two'])
  t.match(test.expectations, [{ type: 'tool_called', tool: 'go_to_book' }, { type: 'step_path', steps: ['greet', 'book'] }], 'what happened became expectations')

  const run = async (version = '') => {
    const tests = await browser.get(`/agents/${agent._id}/tests`)
    const res = await browser.post(`/agents/${agent._id}/tests/run`, { csrf_token: csrfOf(tests.body), version })
    t.equal(res.statusCode, 303, res.body)
    const runId = res.headers.location!.split('/').at(-1)!
    t.equal((await browser.get(res.headers.location!)).statusCode, 200)
    return await api(`/v1/agent/${agent._id}/tests/runs/${runId}`)
  }
  const first = await run()
  t.match(first, { agent_version: built, passed: 1, failed: 0 }, 'the saved test passes on the version it was made with')

  // Change the agent: the booking step goes. The test fails on the new version, for the right reasons.
  const workflow = await browser.get(`/agents/${agent._id}/workflow`)
  const removed = await browser.post(`/agents/${agent._id}/workflow/steps/book/delete`, { csrf_token: csrfOf(workflow.body) })
  t.equal(removed.statusCode, 303, removed.body)
  const changed = (await api(`/v1/agent/${agent._id}`)).version as number
  t.ok(changed > built, 'the change is a new version')
  const failing = await run()
  t.match(failing, { agent_version: changed, passed: 0, failed: 1 })
  const failedChecks = failing.results[0].expectations.filter((e: { passed: boolean }) => !e.passed).map((e: { expectation: { type: string } }) => e.expectation.type)
  t.same(failedChecks.sort(), ['ended', 'step_path', 'tool_called'].sort(), 'the booking tool, the step path and the end are what fail')
  t.match(await run(String(built)), { agent_version: built, passed: 1 }, 'the old version still passes when run by number')

  // Restore the old version from the versions page: a new version, and the test passes again.
  const versions = await browser.get(`/agents/${agent._id}/versions`)
  const restored = await browser.post(`/agents/${agent._id}/versions/${built}/restore`, { csrf_token: csrfOf(versions.body) })
  t.equal(restored.statusCode, 303, restored.body)
  const now = (await api(`/v1/agent/${agent._id}`)).version as number
  t.ok(now > changed, 'a restore is a new version')
  t.match(await run(), { agent_version: now, passed: 1, failed: 0 })
  const resultsPage = await browser.get(`/agents/${agent._id}/tests`)
  const table = /<tbody><tr>([\s\S]*?)<\/tr><\/tbody>/.exec(resultsPage.body)?.[1] ?? ''
  t.match(resultsPage.body, new RegExp(`>Version ${now}</a>[\\s\\S]*>Version ${changed}</a>[\\s\\S]*>Version ${built}</a>`), 'the tests page has a column per version run')
  t.match(table, /Passed[\s\S]*Failed[\s\S]*Passed/, 'side by side: passed on the restored version, failed on the change, passed on the old one')
})
