import t from 'tap'
import { createAccount, setup } from '../helpers/app.ts'
import { axeViolations, launchChromium } from '../helpers/chromium.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { poll } from '../helpers/poll.ts'
import { startRealtimeStandin } from '../helpers/realtime-standin.ts'
import { finishedCall, startWebCall } from '../helpers/voice-client.ts'

// The keypad of a browser call (docs/voice.md, "Keypad" and "Browser protocol"): the web-call page in real Chromium
// shows a keypad while the call is live, its keys reach the agent as the caller's keypad presses, and the agent's
// send_dtmf reaches the page as a `dtmf` event. The protocol's `dtmf` message is checked over a plain WebSocket.

t.test('the browser keypad and the dtmf message', async (t) => {
  const http = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, { VOICE_ENGINE: 'cascade', STT_URL: http.url, LLM_URL: http.url, TTS_URL: http.url }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello from the bank.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Bank', llm_id: llm._id } })).json()
  const tool = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id as string}/tools`, headers: account.headers, payload: { tool_type: 'send_dtmf', settings: { name: 'Press keys' } } })
  t.equal(tool.statusCode, 201, tool.body)

  t.test('in Chromium: keys shown only while the call is live, sent as keypad presses, the agent\'s keys shown; no accessibility violations', async (t) => {
    http.replies.push({ toolCalls: [{ name: 'Press_keys', arguments: { digits: '12' } }] }, { text: 'I pressed one and two.' })
    const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id } })).json()
    // No fake microphone: the call is keys only.
    const browser = await launchChromium(t, ['--autoplay-policy=no-user-gesture-required'])
    const page = await browser.newPage()
    const errors: string[] = []
    page.on('pageerror', (err) => errors.push(err.message))
    await page.goto(`${url}/web-call#access_token=${call.access_token as string}`)
    const keypad = page.getByRole('group', { name: 'Keypad' })
    t.notOk(await keypad.isVisible(), 'no keypad before the call')
    await page.click('#start')
    await page.locator('#transcript li.agent').first().waitFor()
    t.ok(await keypad.isVisible(), 'the keypad once the call is live')
    t.same(await keypad.getByRole('button').allTextContents(), ['1', '2', '3', '4', '5', '6', '7', '8', '9', '*', '0', '#'])
    t.same(await axeViolations(page), [], 'no accessibility violations')

    for (const key of ['4', '2', '#']) await keypad.getByRole('button', { name: key, exact: true }).click()
    await page.locator('#transcript li.user', { hasText: '[keypad] 4 2 #' }).waitFor()
    await page.locator('#status', { hasText: 'The agent pressed 1 2.' }).waitFor()
    await page.locator('#transcript li.agent', { hasText: 'I pressed one and two.' }).waitFor()
    t.same(http.requests.chat[0].body.messages.at(-1), { role: 'user', content: '(The caller pressed keys on their phone\'s keypad: 4 2 #.)' })

    await page.click('#hangup')
    await page.locator('#status', { hasText: 'The call ended: you hung up.' }).waitFor()
    t.notOk(await keypad.isVisible(), 'no keypad once the call has ended')
    const done = await finishedCall(ctx.app, account.headers, call._id)
    t.match(done.transcription.find((i: { keypad?: string }) => i.keypad !== undefined), { speaker: 'user', keypad: '42#' })
    t.match(done.transcription.find((i: { speaker: string }) => i.speaker === 'tool'), { tool: { type: 'send_dtmf', arguments: '{"digits":"12"}' } })
    t.same(errors, [], 'no script errors on the page')
  })

  t.test('the protocol: too many keys in one message are refused and the call goes on; a key that is none ends it 4400', async (t) => {
    const { callId, client } = await startWebCall(ctx.app, url, account.headers, agent._id)
    const seen = client.events.length
    client.socket.send(JSON.stringify({ type: 'dtmf', digits: '1'.repeat(10_000) }))
    t.match(await client.waitFor('error', undefined, seen), { code: 'digits_too_long' })
    client.socket.send(JSON.stringify({ type: 'dtmf', digits: '9x' }))
    t.equal((await client.closed).code, 4400)
    const done = await finishedCall(ctx.app, account.headers, callId)
    t.match(done, { disconnection_reason: 'protocol_error' })
    t.notOk(done.transcription.some((i: { keypad?: string }) => i.keypad !== undefined), 'no keys were taken')
  })
})

t.test('on the realtime engine the keys are a user item of text, answered by a response, and the agent\'s keys reach the browser', async (t) => {
  const realtime = await startRealtimeStandin(t)
  const ctx = await setup(t, { VOICE_ENGINE: 'realtime', REALTIME_URL: realtime.url }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello from the bank.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Bank', llm_id: llm._id } })).json()
  await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id as string}/tools`, headers: account.headers, payload: { tool_type: 'send_dtmf', settings: { name: 'Press keys' } } })
  realtime.replies.push({ calls: [{ name: 'Press_keys', arguments: '{"digits":"3"}' }] }, { text: 'Done.' })
  const { callId, client } = await startWebCall(ctx.app, url, account.headers, agent._id)
  await client.waitFor('agent_speaking', (e) => !e.speaking)
  const seen = client.events.length
  client.socket.send(JSON.stringify({ type: 'dtmf', digits: '7' }))
  client.socket.send(JSON.stringify({ type: 'dtmf', digits: '#' }))
  t.match(await client.waitFor('dtmf', undefined, seen), { digits: '3' })
  const item = await poll(() => realtime.events.find((e) => e.type === 'conversation.item.create' && JSON.stringify(e).includes('keypad')), (e) => e !== undefined, { message: 'no user item for the keys' })
  t.match(item, { item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: '(The caller pressed keys on their phone\'s keypad: 7 #.)' }] } })
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && e.content === 'Done.', seen)
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done.transcription.find((i: { keypad?: string }) => i.keypad !== undefined), { speaker: 'user', content: '[keypad] 7 #', keypad: '7#' })
})
