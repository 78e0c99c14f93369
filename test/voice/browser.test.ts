import t from 'tap'
import type { Test } from 'tap'
import { createAccount, setup } from '../helpers/app.ts'
import { FAKE_CALLER, launchChromium } from '../helpers/chromium.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { poll } from '../helpers/poll.ts'
import { startRealtimeStandin } from '../helpers/realtime-standin.ts'

// The browser call in real Chromium (Debian's `chromium`, headless) with a fake microphone that plays
// test/fixtures/audio/caller.wav: the page joins, the provider stand-in receives the caller's (non-silent)
// audio, the page plays the agent and shows the transcript, hang-up ends the call. Both engines.

const launch = async (t: Test) => await launchChromium(t, FAKE_CALLER)

for (const engine of ['cascade', 'realtime'] as const) {
  t.test(`a browser call in Chromium on the ${engine} engine: microphone in, agent heard, live transcript, hang-up`, async (t) => {
    const http = await startOpenAiHttpStandin(t)
    const realtime = await startRealtimeStandin(t)
    const ctx = await setup(t, { VOICE_ENGINE: engine, STT_URL: http.url, LLM_URL: http.url, TTS_URL: http.url, REALTIME_URL: realtime.url }, { workers: true })
    const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
    const account = await createAccount(ctx.db)
    const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello from the clinic, how can I help?' } })).json()
    const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic <b>&</b>', llm_id: llm._id } })).json()
    const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id } })).json()
    http.transcripts.push('Hello there.')
    realtime.transcripts.push('Hello there.')

    const browser = await launch(t)
    const page = await browser.newPage()
    const errors: string[] = []
    page.on('pageerror', (err) => errors.push(err.message))
    await page.goto(`${url}/web-call#access_token=${call.access_token}`)
    await page.click('#start')
    await page.locator('#transcript li.agent').first().waitFor()
    t.equal(await page.locator('#transcript li.agent').first().textContent(), 'Agent Hello from the clinic, how can I help?')
    t.equal(await page.locator('#title').textContent(), 'Clinic <b>&</b>', 'the agent\'s name is shown as text')

    // The caller's voice reaches the provider: the fixture's sentence, not silence.
    const loudness = async () => engine === 'cascade' ? http.requests.transcriptions.map((r) => r.rms) : realtime.commits.map((c) => c.rms)
    const heard = await poll(loudness, (levels) => levels.some((rms) => rms > 300), { message: (levels) => `no caller audio reached the provider: ${JSON.stringify(levels)}` })
    t.ok(heard.length > 0)
    await page.locator('#transcript li.user').first().waitFor()
    t.match(await page.locator('#transcript li.user').first().textContent(), /Hello there\./)
    const played = await poll(async () => await page.evaluate(() => (globalThis as any).switchboardCall.playedSeconds as number), (s) => s > 1, { message: 'the page played no agent audio' })
    t.ok(played > 1, `the page played ${played.toFixed(1)} s of the agent`)

    await page.click('#hangup')
    await page.locator('#status', { hasText: 'The call ended: you hung up.' }).waitFor()
    const done = await poll(async () => (await ctx.app.inject({ method: 'GET', url: `/v1/call/${call._id}`, headers: account.headers })).json(),
      (c) => c.call_status === 'success' || c.call_status === 'failed')
    t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup' })
    t.ok(done.transcription.some((i: { speaker: string }) => i.speaker === 'user'))
    t.same(errors, [], 'no script errors on the page')
  })
}

t.test('the page: no inline scripts, not framable, and typed turns when no speech provider is configured', async (t) => {
  const ctx = await setup(t, { VOICE_ENGINE: 'simulator' }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const page = await ctx.app.inject({ method: 'GET', url: '/web-call' })
  t.match(page.headers, { 'content-security-policy': /script-src 'self'/, 'x-frame-options': 'DENY' })
  t.notMatch(page.body, /<script>/, 'only external scripts')
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello!' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Offline', llm_id: llm._id } })).json()
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id } })).json()

  const browser = await launch(t)
  const tab = await browser.newPage()
  await tab.goto(`${url}/web-call#access_token=${call.access_token}`)
  await tab.click('#start')
  await tab.locator('#status', { hasText: 'Type below' }).waitFor()
  await tab.fill('#text', 'Do you have time on Tuesday?')
  await tab.press('#text', 'Enter')
  await tab.locator('#transcript li.agent', { hasText: 'Tuesday at 10' }).waitFor()
  await tab.fill('#text', 'Goodbye')
  await tab.press('#text', 'Enter')
  await tab.locator('#transcript li.agent', { hasText: 'Goodbye' }).waitFor()
  await tab.click('#hangup')
  await tab.locator('#status', { hasText: 'The call ended' }).waitFor()
  t.equal(await tab.locator('#transcript li.user').count(), 2)
})
