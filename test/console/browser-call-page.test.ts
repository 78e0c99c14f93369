import { readFile } from 'node:fs/promises'
import t from 'tap'
import { bookAppointment } from '../../src/modules/appointments/appointments.ts'
import { storeRecordingPart } from '../../src/modules/calls/recordings.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { launchChromium, signInAt, watchPage } from '../helpers/chromium.ts'
import { createConsoleUser, PASSWORD } from '../helpers/console-client.ts'

// A call's page in real Chromium (CSP enforced): times in the browser's zone, a transcript line that plays the
// recording from there (static/call-page.js), the line heard marked, the turn timings and the cost; axe-core.

t.test('a call\'s page: a line plays the recording from there and is marked, local times, axe', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const desk = await createAgent(ctx.app, { user, key, headers: { 'x-api-key': key } }, { agent_name: 'Front desk' })
  const start = Date.UTC(2026, 4, 1, 9, 30)
  const stat = { p50: 750, p90: 950, min: 750, max: 950, num: 2 }
  const [id] = await insertCalls(ctx.db, user.id, desk, [{
    start_timestamp: new Date(start),
    duration_ms: 20_000,
    phone_call_credits: 10,
    disconnection_reason: 'user_hangup',
    token_usage: { 'gpt-4o-mini': { input: 1200, output: 300 } },
    latency: JSON.stringify({
      e2e: stat, end_of_turn: stat, transcription: null, llm: stat, tts: null, turns: [
        { at: start + 4_000, end_of_turn_ms: 200, transcription_ms: null, llm_ms: 300, tts_ms: null, e2e_ms: 750 },
        { at: start + 11_000, end_of_turn_ms: 250, transcription_ms: null, llm_ms: 350, tts_ms: null, e2e_ms: 950 }]
    }),
    transcription: [
      { speaker: 'agent', content: 'Hello, this is the front desk.', timestamp: start + 500 },
      { speaker: 'user', content: 'A table for two tonight.', timestamp: start + 2_000 },
      { speaker: 'agent', content: 'At what time?', timestamp: start + 4_800 },
      { speaker: 'user', content: 'Eight o\'clock.', timestamp: start + 10_000 },
      { speaker: 'agent', content: 'Booked for eight.', timestamp: start + 12_000 }
    ]
  }])
  // Twenty seconds of a quiet tone, the whole call.
  const pcm = Buffer.alloc(16_000 * 2 * 20)
  for (let i = 0; i < pcm.length / 2; i++) pcm.writeInt16LE(Math.round(500 * Math.sin(i / 8)), i * 2)
  t.ok(await storeRecordingPart(ctx.db, { callId: id, userId: user.id, pcm }))

  const browser = await launchChromium(t, ['--autoplay-policy=no-user-gesture-required'])
  const context = await browser.newContext({ timezoneId: 'America/New_York', viewport: { width: 1400, height: 900 } })
  const page = await context.newPage()
  const { problems, axe, check } = watchPage(page)
  await signInAt(page, url, user.email, PASSWORD)
  await page.goto(`${url}/calls/${id}`)
  t.equal(await page.locator('h1').textContent(), 'Phone call with Front desk')
  const started = page.locator('.facts time').first()
  t.equal(await started.textContent(), '2026-05-01 05:30:00 GMT−4', 'the start in the browser\'s zone (New York, as the sv-SE format names it)')
  t.equal(await started.getAttribute('title'), '2026-05-01 09:30:00 UTC', 'the UTC time kept as its title')
  t.equal(await page.locator('.facts a', { hasText: 'Front desk' }).getAttribute('href'), `/agents/${desk._id}`, 'the agent linked')
  t.match(await page.locator('.transcript li').nth(2).textContent(), /At what time\?\s*Answered in 750 ms \(end of turn 200 ms, model 300 ms\)/)
  t.match(await page.locator('table.cost').textContent(), /Phone line \(carrier\)\s*1 started minute\s*10/)
  await check('call page')

  const currentTime = async () => await page.evaluate('document.getElementById("recording").currentTime') as number
  const pause = async () => { await page.evaluate('document.getElementById("recording").pause()') }
  t.equal(await currentTime(), 0)
  // Each line's time is a button (the keyboard's way); the line heard is marked.
  await page.getByRole('button', { name: 'Play from 0:05' }).click()
  await page.waitForFunction('document.getElementById("recording").currentTime >= 4.8')
  await page.locator('.transcript li.playing[aria-current="true"]', { hasText: 'At what time?' }).waitFor()
  t.pass('the button plays from its line, and marks it')
  await pause()
  // A click anywhere on a line does the same.
  await page.locator('.transcript li', { hasText: 'Booked for eight.' }).click()
  await page.waitForFunction('document.getElementById("recording").currentTime >= 12')
  await page.locator('.transcript li.playing', { hasText: 'Booked for eight.' }).waitFor()
  t.equal(await page.locator('.transcript li.playing').count(), 1, 'one line marked')
  await pause()
  await check('a line playing')

  // Times on every page: the API keys page (the account's key) in the browser's zone, to the minute as written.
  await page.goto(`${url}/keys`)
  t.match(await page.locator('tbody time').first().textContent(), /^\d{4}-\d{2}-\d{2} \d{2}:\d{2} GMT−[45]$/, 'a key\'s creation in New York time')
  t.match(await page.locator('tbody time').first().getAttribute('title'), /^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/)

  // A time written in its own zone (an appointment's) is not rewritten: only the UTC text of when() is.
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${desk._id}/tools`, headers: { 'x-api-key': key }, payload: { tool_type: 'appointment_booking', settings: { name: 'appointments', time_zone: 'Europe/Berlin', duration_minutes: 30 } } })
  const appointmentStart = Date.UTC(2030, 2, 4, 9)
  await bookAppointment(ctx.db, { userId: user.id, agentId: desk._id, toolId: tool.json()._id, callId: id, start: new Date(appointmentStart), end: new Date(appointmentStart + 30 * 60_000), bufferMinutes: 0, timeZone: 'Europe/Berlin', name: 'Ada', email: null, phone: null, notes: null })
  await page.goto(`${url}/appointments`)
  t.equal(await page.locator('tbody time').first().textContent(), 'Monday, 4 March 2030 at 10:00 (Europe/Berlin)', 'the appointment keeps its zone')

  // The script alone, on every form of time it meets (New York is UTC−4 in May, UTC−5 in March).
  const script = await readFile(new URL('../../src/modules/console/static/local-time.js', import.meta.url), 'utf8')
  const lone = await context.newPage()
  await lone.setContent(`<time datetime="2026-05-01T09:30:00.000Z">2026-05-01 09:30 UTC</time>
    <time datetime="2026-05-01T09:30:07.000Z">2026-05-01 09:30:07 UTC</time>
    <time datetime="2030-03-04T09:00:00.000Z">Monday, 4 March 2030 at 10:00 (Europe/Berlin)</time>
    <time datetime="2026-05-01">2026-05-01</time>
    <select><option data-datetime="2030-03-04T09:00:00.000Z">version 2, 2030-03-04 09:00 UTC: 3 passed, 0 failed</option></select>`)
  await lone.addScriptTag({ content: script })
  t.same(await lone.locator('time, option').allTextContents(), [
    '2026-05-01 05:30 GMT−4', '2026-05-01 05:30:07 GMT−4', 'Monday, 4 March 2030 at 10:00 (Europe/Berlin)', '2026-05-01',
    'version 2, 2030-03-04 04:00 GMT−5: 3 passed, 0 failed'
  ], 'UTC text rewritten at its precision, inside an option\'s words too; a time in its own zone and a day left alone')

  t.same(axe, { 'call page': [], 'a line playing': [] }, 'no accessibility violations')
  t.same(problems, [], 'no script errors and no CSP violations')
})
