import t from 'tap'
import { setup } from '../helpers/app.ts'
import { launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { ConsoleClient, createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { poll } from '../helpers/poll.ts'

// The voice picker in real Chromium: Play plays the voice's sample (the page's <audio> advances), Stop stops it, a
// second play of the same voice comes from the kept sample; the engines' needs beside it. axe-core over each state.

const SCREENSHOTS = process.env.VOICE_PICKER_SCREENSHOTS

t.test('Play plays a voice\'s sample on the agent\'s page; the second play is the kept one', async (t) => {
  const http = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, { VOICE_ENGINE: 'cascade', STT_URL: http.url, LLM_URL: http.url, TTS_URL: http.url, DATA_DIR: t.testdir() })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const helper = new ConsoleClient(ctx.app)
  await helper.signIn(user.email, PASSWORD)
  const created = await helper.submit('/agents/new', '/agents', {
    agent_name: 'Clinic', begin_message: 'Hello.', general_prompt: 'You book appointments.', language: 'en-US', voice_id: '65a0f0000000000000000004', webhook_url: '', status: 'active'
  })
  const agentPage = String(created.headers.location).replace(/\?.*$/, '')

  const browser = await launchChromium(t, ['--autoplay-policy=no-user-gesture-required'])
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
  const { problems, axe, check } = watchPage(page)
  await signInAt(page, url, user.email, PASSWORD)
  await page.goto(`${url}${agentPage}`)

  const picker = page.getByRole('group', { name: 'Voice', exact: true })
  t.equal(await picker.getByRole('radio').count(), 6, 'the six voices the pipeline speaks')
  t.equal(await picker.getByRole('radio', { name: /^Echo/ }).isChecked(), true, 'the agent\'s voice is chosen')
  await check('the agent page with the voice picker')
  if (SCREENSHOTS !== undefined) {
    await picker.scrollIntoViewIfNeeded()
    await page.screenshot({ path: `${SCREENSHOTS}/voice-picker.png` })
    await page.locator('#engines').screenshot({ path: `${SCREENSHOTS}/engines.png` })
  }

  const audio = page.locator('#voice-preview')
  const position = async () => await audio.evaluate((element) => { const media = element as unknown as { currentTime: number, played: { length: number } }; return media.played.length > 0 ? media.currentTime : 0 })
  const play = page.locator('button[data-voice="Alloy"]')
  t.equal(await page.getByRole('button', { name: 'Play Alloy' }).count(), 1, 'each Play button names its voice')
  await play.click()
  t.equal(await play.textContent(), 'Stop', 'the pressed button stops it')
  t.equal(await play.getAttribute('aria-label'), 'Stop Alloy')
  t.ok(await poll(position, (time) => time > 0, { message: (time) => `the sample stayed at ${time} s` }) > 0, 'the sample plays')
  await check('a sample playing')
  await play.click()
  t.equal(await play.textContent(), 'Play')
  t.equal(await audio.evaluate((element) => (element as unknown as { paused: boolean }).paused), true, 'stopped')

  await play.click()
  await poll(position, (time) => time > 0)
  t.equal(http.requests.speech.length, 1, 'played twice, synthesised once')

  // A voice the provider refuses: the status line says why.
  http.failNext('speech', 500)
  await page.getByRole('button', { name: 'Play Ash' }).click()
  await page.locator('#voice-preview-status', { hasText: 'did not give the sample' }).waitFor()
  t.equal(await page.getByRole('button', { name: 'Play Ash' }).textContent(), 'Play')
  await check('a sample refused')
  if (SCREENSHOTS !== undefined) await page.getByRole('group', { name: 'Voice', exact: true }).screenshot({ path: `${SCREENSHOTS}/voice-refused.png` })

  // The voices no engine speaks, unfolded, each with why; the new agent's form has the same picker.
  await page.getByText('19 voices this installation cannot speak').click()
  await page.locator('details.unspoken li', { hasText: 'Azure: Conrad' }).waitFor()
  await check('the voices it cannot speak, unfolded')
  if (SCREENSHOTS !== undefined) await page.getByRole('group', { name: 'Voice', exact: true }).screenshot({ path: `${SCREENSHOTS}/voice-unspoken.png` })
  await page.goto(`${url}/agents/new`)
  t.equal(await page.getByRole('radio', { name: /^Alloy OpenAI/ }).isChecked(), true, 'a new agent starts with the default voice')
  await check('the new agent form')

  t.same(axe, {
    'the agent page with the voice picker': [], 'a sample playing': [], 'a sample refused': [], 'the voices it cannot speak, unfolded': [], 'the new agent form': []
  }, 'axe: no violations')
  t.same(problems.filter((problem) => !problem.startsWith('Failed to load resource')), [], 'no script errors')
})

t.test('no speech engine set up: every voice a choice, no Play, the engines\' needs say what is missing', async (t) => {
  const ctx = await setup(t, { VOICE_ENGINE: 'realtime', DATA_DIR: t.testdir() })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const browser = await launchChromium(t)
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
  const { problems, axe, check } = watchPage(page)
  await signInAt(page, url, user.email, PASSWORD)
  await page.goto(`${url}/agents/new`)
  const picker = page.getByRole('group', { name: 'Voice', exact: true })
  t.equal(await picker.getByRole('radio').count(), 25)
  t.equal(await picker.getByRole('button').count(), 0, 'no Play without text to speech')
  await picker.getByText('No speech engine is set up yet').waitFor()
  await picker.getByRole('radio', { name: /^Jenny Azure/ }).check()
  await page.getByLabel('Name').fill('Typed')
  await page.getByRole('button', { name: 'Create agent' }).click()
  await page.waitForURL(/\/agents\/[0-9a-f]{24}\?saved=1$/)
  t.equal(await page.getByRole('radio', { name: /^Jenny Azure/ }).isChecked(), true)
  await page.locator('#engines', { hasText: 'which is not fully set up' }).waitFor()
  t.equal(await page.locator('#engines .missing').count(), 4, 'every provider missing')
  await check('the agent page without speech')
  if (SCREENSHOTS !== undefined) await page.locator('#engines').screenshot({ path: `${SCREENSHOTS}/engines-missing.png` })
  t.same(axe, { 'the agent page without speech': [] })
  t.same(problems, [])
})
