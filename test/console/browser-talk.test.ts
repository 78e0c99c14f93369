import t from 'tap'
import { setup } from '../helpers/app.ts'
import { FAKE_CALLER, launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { ConsoleClient, createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { poll } from '../helpers/poll.ts'

// "Talk to this agent" in real Chromium: the call is held on the agent's page (the console's header, the agent's
// settings below), its record is made when the button is pressed, the microphone (a fake one playing
// test/fixtures/audio/caller.wav) shows on a level meter and can be muted, the page says who is speaking, and the end
// says in words how the call ended, links the call's page and offers to call again. axe-core over every state.

const AGENT = {
  agent_name: 'Clinic', begin_message: 'Hello from the clinic, how can I help?', general_prompt: 'You book appointments.', language: 'en-US', voice_id: '65a0f0000000000000000004', webhook_url: '', status: 'active'
}

/** A console user with one agent, made through the console's own form; answers the agent's page address. */
async function withAgent (ctx: Awaited<ReturnType<typeof setup>>) {
  const user = await createConsoleUser(ctx.db)
  const helper = new ConsoleClient(ctx.app)
  await helper.signIn(user.email, PASSWORD)
  await helper.submit('/agents/new', '/agents', AGENT)
  const agent = await ctx.db.selectFrom('agents').select('id').where('user_id', '=', user.id).executeTakeFirstOrThrow()
  return { user, agentPage: `/agents/${agent.id}` }
}

t.test('a spoken test call from the agent\'s page: no record before the press, meter, mute, who speaks, the end in words, view it, call again', async (t) => {
  const http = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, { VOICE_ENGINE: 'cascade', STT_URL: http.url, LLM_URL: http.url, TTS_URL: http.url }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const { user, agentPage } = await withAgent(ctx)
  const calls = async () => await ctx.db.selectFrom('calls').select(['id', 'call_status']).where('user_id', '=', user.id).orderBy('created_at').execute()

  const browser = await launchChromium(t, FAKE_CALLER)
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
  const { problems, axe, check } = watchPage(page)
  await signInAt(page, url, user.email, PASSWORD)
  await page.goto(`${url}${agentPage}`)

  // Before the press: the button, nothing typed or live shown, and no call recorded.
  const talk = page.getByRole('button', { name: 'Talk to this agent' })
  await talk.waitFor()
  t.equal(await page.locator('header').count() > 0, true, 'the console\'s layout')
  t.equal(await page.locator('#talk-typed').isVisible(), false, 'the typed input is hidden until the call starts')
  t.equal(await page.getByRole('button', { name: 'Hang up' }).isVisible(), false, 'nothing to hang up')
  t.equal(await page.locator('#talk-mute').isVisible(), false)
  t.same(await calls(), [], 'no call record before the button is pressed')
  await check('the agent page before a call')

  // Who speaks, as the page showed it, in order.
  await page.evaluate(`{
    const states = globalThis.talkStates = []
    const state = document.getElementById('talk-state')
    new MutationObserver(() => { if (states.at(-1) !== state.dataset.state) states.push(state.dataset.state) }).observe(state, { attributes: true })
  }`)
  http.transcripts.push('Hello there.')
  await talk.click()
  await page.locator('#talk-transcript li.agent', { hasText: 'Hello from the clinic, how can I help?' }).waitFor()
  t.match(await calls(), [{ call_status: 'started' }], 'one call, made by the press')
  t.equal(new URL(page.url()).pathname, agentPage, 'still on the agent\'s page')
  t.equal(await page.locator('#talk-typed').isVisible(), true, 'typing is offered once the call is connected')

  // The microphone: its level moves with the fake caller's voice, and mute silences it.
  await page.locator('#talk-level').waitFor()
  t.equal(await page.getByLabel('Microphone').count(), 1, 'the meter is labelled')
  const level = async () => Number(await page.locator('#talk-level').evaluate((meter) => (meter as unknown as { value: number }).value))
  t.ok(await poll(level, (value) => value > 0.02, { message: (value) => `the meter stayed at ${value}` }) > 0.02, 'the meter shows the voice')
  await check('the agent page in a call')
  await page.getByRole('button', { name: 'Mute' }).click()
  t.equal(await page.locator('#talk-mute').getAttribute('aria-pressed'), 'true')
  t.equal(await poll(level, (value) => value === 0, { message: (value) => `muted, the meter shows ${value}` }), 0, 'muted: silence')
  await page.getByRole('button', { name: 'Unmute' }).click()
  t.ok(await poll(level, (value) => value > 0.02) > 0.02, 'unmuted: the voice again')

  // The caller's turn was heard and the agent answered it; the page showed it speaking and listening.
  await page.locator('#talk-transcript li.user', { hasText: 'Hello there.' }).waitFor()
  const states = await poll(async () => await page.evaluate('globalThis.talkStates') as string[], (s) => s.includes('agent') && s.includes('listening'))
  t.match(await page.locator('#talk-state').textContent(), /^The agent is (speaking|listening)|You are speaking$/)
  t.ok(states.length >= 2, `the states shown: ${states.join(', ')}`)

  // Two turns typed at once: the server takes the first and refuses the second while the agent answers it; the refused
  // words come back into the field, even though the first's transcript arrives in between.
  await page.evaluate(`{
    const field = document.querySelector('#talk-text')
    const form = document.querySelector('#talk-typed')
    field.value = 'First question?'
    form.requestSubmit()
    field.value = 'Second question?'
    form.requestSubmit()
  }`)
  await page.locator('#talk-status', { hasText: 'The agent is still answering: send this once it has finished speaking.' }).waitFor()
  await page.locator('#talk-transcript li.user', { hasText: 'First question?' }).waitFor()
  t.equal(await page.getByLabel('Say something').inputValue(), 'Second question?', 'the refused turn is back in the field')
  t.equal(await page.locator('#talk-transcript li.user', { hasText: 'Second question?' }).count(), 0, 'and was not said')

  await page.getByRole('button', { name: 'Hang up' }).click()
  await page.locator('#talk-status', { hasText: 'The call ended: you hung up.' }).waitFor()
  t.equal(await page.locator('#talk-typed').isVisible(), false, 'no typing after the end')
  t.equal(await page.getByRole('button', { name: 'Hang up' }).isVisible(), false)
  t.equal(await page.locator('#talk-level').isVisible(), false, 'no meter after the end')
  const first = (await calls())[0].id
  t.equal(await page.getByRole('link', { name: 'View this call' }).getAttribute('href'), `/calls/${first}`)
  await check('the agent page after a call')

  // Call again: a second call, a second record.
  http.transcripts.push('Hello again.')
  await page.getByRole('button', { name: 'Call again' }).click()
  await page.locator('#talk-transcript li.agent', { hasText: 'Hello from the clinic' }).waitFor()
  t.equal(await page.getByRole('link', { name: 'View this call' }).isVisible(), false, 'the previous call\'s link is gone while the new one runs')
  t.equal((await calls()).length, 2, 'a second call')
  await page.getByRole('button', { name: 'Hang up' }).click()
  await page.locator('#talk-status', { hasText: 'The call ended' }).waitFor()
  const second = (await calls())[1].id
  await page.getByRole('link', { name: 'View this call' }).click()
  await page.waitForURL(`${url}/calls/${second}`)
  t.match(await page.locator('ol.transcript li').first().textContent(), /Agent: Hello from the clinic/, 'the call\'s page with its transcript')

  t.same(problems, [], 'no script errors and no CSP violations')
  for (const [state, violations] of Object.entries(axe)) t.same(violations, [], `axe: ${state}`)
})

t.test('a typed test call (no speech providers): the field takes what is typed once connected, the agent answers, call again', async (t) => {
  const ctx = await setup(t, { VOICE_ENGINE: 'simulator' }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const { user, agentPage } = await withAgent(ctx)
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  const { problems, axe, check } = watchPage(page)
  await signInAt(page, url, user.email, PASSWORD)
  await page.goto(`${url}${agentPage}`)

  await page.getByRole('button', { name: 'Talk to this agent' }).click()
  await page.locator('#talk-status', { hasText: 'Type below' }).waitFor()
  t.equal(await page.locator('#talk-mute').isVisible(), false, 'no microphone, no mute')
  await page.getByLabel('Say something').fill('Do you have time on Tuesday?')
  await page.getByLabel('Say something').press('Enter')
  await page.locator('#talk-transcript li.user', { hasText: 'Do you have time on Tuesday?' }).waitFor()
  await page.locator('#talk-transcript li.agent').nth(1).waitFor()
  t.equal(await page.getByLabel('Say something').inputValue(), '', 'the sent turn leaves the field')
  await check('a typed call')
  await page.getByRole('button', { name: 'Hang up' }).click()
  await page.locator('#talk-status', { hasText: 'The call ended: you hung up.' }).waitFor()
  await page.getByRole('button', { name: 'Call again' }).click()
  await page.locator('#talk-status', { hasText: 'Type below' }).waitFor()
  t.equal(await page.locator('#talk-transcript li.user').count(), 0, 'a new call starts with an empty transcript')
  await page.getByRole('button', { name: 'Hang up' }).click()
  await page.locator('#talk-status', { hasText: 'The call ended' }).waitFor()
  t.equal((await ctx.db.selectFrom('calls').select('id').where('user_id', '=', user.id).execute()).length, 2)
  t.same(problems, [], 'no script errors and no CSP violations')
  for (const [state, violations] of Object.entries(axe)) t.same(violations, [], `axe: ${state}`)
})
