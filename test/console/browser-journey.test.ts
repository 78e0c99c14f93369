import t from 'tap'
import { setup } from '../helpers/app.ts'
import { FAKE_CALLER, launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'

// The end-to-end flow in real Chromium, as a person who knows Retell's dashboard would go through it, with
// nothing but clicks: a new agent from a template, a spoken test call on its page (a fake microphone playing
// test/fixtures/audio/caller.wav, the cascade's providers as loopback stand-ins), the finished call's page, back to
// the agent by its link, and a second call. axe-core over every page on the way.

t.test('template → talk → view the call → back to the agent → call again', async (t) => {
  const http = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, { VOICE_ENGINE: 'cascade', STT_URL: http.url, LLM_URL: http.url, TTS_URL: http.url }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const calls = async () => await ctx.db.selectFrom('calls').select(['id', 'agent_id', 'call_status']).where('user_id', '=', user.id).orderBy('created_at').execute()

  const browser = await launchChromium(t, FAKE_CALLER)
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
  const { problems, axe, check } = watchPage(page)
  await signInAt(page, url, user.email, PASSWORD)

  // From the header to a new agent: the template chooser, one button.
  await page.getByRole('navigation').getByRole('link', { name: 'Agents' }).click()
  await page.getByRole('link', { name: 'New agent' }).click()
  await page.waitForURL(`${url}/agents/start`)
  await check('the template chooser')
  await page.locator('li.template', { has: page.getByRole('heading', { name: 'Appointment booking' }) }).getByRole('button', { name: 'Use this template' }).click()
  await page.waitForURL(/\/agents\/[0-9a-f]{24}/)
  const agentPage = new URL(page.url()).pathname
  const agentId = agentPage.split('/')[2]
  t.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Appointment booking', 'the template\'s agent, with its name')
  t.same(await calls(), [], 'no call yet')
  await check('the new agent\'s page')

  // Talk: one press, the template's begin message is heard, the caller's words reach the agent, hang up.
  http.transcripts.push('I would like an appointment on Tuesday.')
  await page.getByRole('button', { name: 'Talk to this agent' }).click()
  await page.locator('#talk-transcript li.agent', { hasText: 'I can help you book, move or cancel an appointment' }).waitFor()
  await page.locator('#talk-transcript li.user', { hasText: 'I would like an appointment on Tuesday.' }).waitFor()
  await check('the agent page in a call')
  await page.getByRole('button', { name: 'Hang up' }).click()
  await page.locator('#talk-status', { hasText: 'The call ended: you hung up.' }).waitFor()
  const [first] = await calls()
  t.equal(first.agent_id, agentId, 'the call is the new agent\'s')

  // View this call: its page, with the transcript and the agent linked.
  await page.getByRole('link', { name: 'View this call' }).click()
  await page.waitForURL(`${url}/calls/${first.id}`)
  await page.locator('ol.transcript li.user', { hasText: 'I would like an appointment on Tuesday.' }).waitFor()
  t.match(await page.locator('ol.transcript li').first().textContent(), /Agent: Hello! I can help you book/, 'the transcript begins with the agent')
  await check('the call\'s page')

  // Back to the agent by its link, and a second call.
  await page.getByRole('link', { name: 'Appointment booking', exact: true }).click()
  await page.waitForURL(`${url}${agentPage}`)
  http.transcripts.push('Hello again.')
  await page.getByRole('button', { name: 'Talk to this agent' }).click()
  await page.locator('#talk-transcript li.agent', { hasText: 'I can help you book' }).waitFor()
  await page.getByRole('button', { name: 'Hang up' }).click()
  await page.locator('#talk-status', { hasText: 'The call ended' }).waitFor()
  // Call again, from where the call ended.
  await page.getByRole('button', { name: 'Call again' }).click()
  await page.locator('#talk-transcript li.agent', { hasText: 'I can help you book' }).waitFor()
  await page.getByRole('button', { name: 'Hang up' }).click()
  await page.locator('#talk-status', { hasText: 'The call ended' }).waitFor()
  const all = await calls()
  t.equal(all.length, 3, 'three calls, each made by a press')
  t.ok(all.every((call) => call.agent_id === agentId))

  t.same(problems, [], 'no script errors and no CSP violations')
  for (const [state, violations] of Object.entries(axe)) t.same(violations, [], `axe: ${state}`)
})
