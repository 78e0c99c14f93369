import t from 'tap'
import type { Test } from 'tap'
import { decodeWav, rms } from '../../src/modules/voice/audio.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { poll } from '../helpers/poll.ts'
import { startRealtimeStandin, type RealtimeStandin } from '../helpers/realtime-standin.ts'
import { startReceiver } from '../helpers/receiver.ts'
import { mixTracks, splitTracks } from '../helpers/tracks.ts'
import { finishedCall, openWebCall, say, speech } from '../helpers/voice-client.ts'

// Spoken web calls on the realtime engine, against a stand-in of the OpenAI Realtime API (GA protocol) on
// loopback, through the browser's stream.

async function listen (t: Test) {
  const standin = await startRealtimeStandin(t)
  const ctx = await setup(t, {
    VOICE_ENGINE: 'cascade', // the LLM configuration below asks for realtime: its own choice wins
    REALTIME_URL: standin.url,
    REALTIME_API_KEY: 'sk-realtime-test',
    DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true',
    DELIVERY_TIME_SCALE: '0.001'
  }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  return { ...ctx, url, standin }
}

type Ctx = TestContext & { standin: RealtimeStandin }

/** An agent on the realtime engine and a web call of it; `prepare` changes the agent before the call is made (the call runs the version of then). */
async function start (ctx: Ctx, account: Account, body: Record<string, unknown> = {}, llmBody: Record<string, unknown> = {}, prepare?: (agentId: string) => Promise<unknown>) {
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { engine: 'realtime', begin_message: 'Hi {{name}}!', general_prompt: 'You are the clinic.', ...llmBody } })).json()
  t.equal(llm.engine, 'realtime')
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: llm._id, ...body } })).json()
  await prepare?.(agent._id)
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id, dynamic_context: { name: 'Ada' } } })).json()
  return { callId: call._id as string, token: call.access_token as string }
}

t.test('a spoken call on the realtime engine: begin message, caller audio, answer, end_call, analysed and delivered', async (t) => {
  const ctx = await listen(t)
  const receiver = await startReceiver(t)
  const account = await createAccount(ctx.db)
  const { callId, token } = await start(ctx, account, { webhook_url: receiver.url }, {}, async (id) =>
    await ctx.app.inject({ method: 'POST', url: `/v1/agent/${id}/tools`, headers: account.headers, payload: { tool_type: 'end_call', settings: { name: 'Hang up' } } }))
  ctx.standin.transcripts.push('Can I book Tuesday?', 'No, that is all.')
  ctx.standin.replies.push({ text: 'Yes, Tuesday at ten.' }, { calls: [{ name: 'Hang_up', arguments: '{}' }] }, { text: 'Goodbye!' })

  const client = await openWebCall(ctx.url, token)
  t.match(await client.waitFor('ready'), { mode: 'voice', engine: 'realtime' })
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'agent'), { content: 'Hi Ada!' })
  await poll(() => client.loudFrames(), (n) => n > 10, { message: 'the begin message is heard' })
  t.match(ctx.standin.connections[0], { url: /model=gpt-realtime/, headers: { authorization: 'Bearer sk-realtime-test' } })
  const update = ctx.standin.events.find((e) => e.type === 'session.update') as any
  t.match(update.session, { instructions: /You are the clinic/, tools: [{ type: 'function', name: 'Hang_up' }] })

  await say(client)
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'user'), { content: 'Can I book Tuesday?' })
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && /Tuesday at ten/.test(e.content))
  t.ok(ctx.standin.commits[0].rms > 500, 'the provider got the caller\'s audio')
  await say(client)
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'tool'), { tool: { type: 'end_call' } })
  t.match(await client.waitFor('ended'), { reason: 'agent_hangup' })

  const done = await finishedCall(ctx.app, account.headers, callId)
  t.match(done, { call_status: 'success', disconnection_reason: 'agent_hangup' })
  t.ok(done.tokens.by_model['gpt-realtime'].input > 0, 'tokens from response.done')
  t.ok(done.recording_url !== null)
  t.same(done.transcription.map((i: { speaker: string }) => i.speaker), ['agent', 'user', 'agent', 'user', 'tool', 'agent'])
  const [delivery] = await receiver.waitFor(1)
  t.match(delivery.json, { call_id: callId, transcription: Array })
  await poll(() => ctx.standin.openConnections(), (n) => n === 0, { message: 'the provider connection is closed' })
})

t.test('barge-in on the realtime engine cancels the response and clears playback', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { token } = await start(ctx, account, { interruption_sensitivity: 1 })
  const client = await openWebCall(ctx.url, token)
  await client.waitFor('agent_speaking', (e) => !e.speaking)
  ctx.standin.replies.push({ text: 'Let me tell you everything about our clinic and its long history.', holdAfter: 2 })
  await say(client)
  await poll(() => client.events.filter((e) => e.type === 'agent_speaking' && e.speaking).length, (n) => n >= 2)
  await client.sendAudio(speech(300, 0))
  await client.waitFor('clear')
  await poll(() => ctx.standin.events.some((e) => e.type === 'response.cancel'), Boolean, { message: 'response.cancel sent' })
  const truncate = ctx.standin.events.find((e) => e.type === 'conversation.item.truncate') as any
  t.match(truncate, { item_id: String, content_index: 0 }, 'the model forgets what the caller did not hear')
  t.ok(truncate.audio_end_ms > 0 && truncate.audio_end_ms < 3000, `heard ${truncate.audio_end_ms} ms`)
  client.hangup()
  await client.closed
})

t.test('the realtime provider drops mid-call: the call ends runtime_error', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { callId, token } = await start(ctx, account)
  const client = await openWebCall(ctx.url, token)
  await client.waitFor('transcript', (e) => e.speaker === 'agent')
  ctx.standin.drop()
  t.match(await client.waitFor('ended'), { reason: 'runtime_error' })
  t.match(await finishedCall(ctx.app, account.headers, callId), { call_status: 'success', disconnection_reason: 'runtime_error' })
})

t.test('a client that sends a minute of audio at once: the provider and the recording get no more than the call\'s real time', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { callId, token } = await start(ctx, account)
  const client = await openWebCall(ctx.url, token)
  await client.waitFor('agent_speaking', (e) => !e.speaking)
  const opened = performance.now()
  await client.sendAudio(speech(60_000, 0))
  // The server has read it all once it answers a message sent after it.
  client.sendText('Still there?')
  await client.waitFor('transcript', (e) => e.speaker === 'user' && e.content === 'Still there?')
  const elapsedSeconds = (performance.now() - opened) / 1000
  client.hangup()
  const done = await finishedCall(ctx.app, account.headers, callId)

  // The provider's share: what was appended (PCM16 at 24 kHz), at most the time that passed and the allowed lead.
  const appended = ctx.standin.events.filter((e) => e.type === 'input_audio_buffer.append').reduce((n, e) => n + (e.bytes as number), 0) / 2 / 24_000
  t.ok(appended <= elapsedSeconds + 2.5, `the provider got ${appended.toFixed(1)} s of caller audio in ${elapsedSeconds.toFixed(1)} s, not 60 s`)
  const recording = await ctx.db.selectFrom('call_recordings').select('duration_ms').where('call_id', '=', callId).executeTakeFirstOrThrow()
  t.ok(recording.duration_ms <= done.duration_ms + 100, `the recording (${recording.duration_ms} ms) follows the call's real length (${done.duration_ms} ms), not the audio sent`)
})

t.test('typed turns: one at a time (a burst gets one model response, the rest an error event); one too long is refused; the call goes on', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { callId, token } = await start(ctx, account)
  const client = await openWebCall(ctx.url, token)
  await client.waitFor('agent_speaking', (e) => !e.speaking)
  const before = ctx.standin.events.filter((e) => e.type === 'response.create').length

  for (let i = 0; i < 30; i++) client.sendText(`Question ${i}?`)
  await poll(() => client.events.filter((e) => e.type === 'error').length, (n) => n === 29, { message: 'each extra turn is refused' })
  t.ok(client.events.filter((e) => e.type === 'error').every((e) => e.code === 'turn_in_progress'), 'error turn_in_progress')
  await client.waitFor('agent_speaking', (e) => !e.speaking, client.events.findLastIndex((e) => e.type === 'agent_speaking' && e.speaking))
  t.equal(ctx.standin.events.filter((e) => e.type === 'response.create').length - before, 1, 'one model response for the burst')
  t.same(client.events.filter((e) => e.type === 'transcript' && e.speaker === 'user').map((e) => e.content), ['Question 0?'])

  const errors = client.events.filter((e) => e.type === 'error').length
  client.sendText('x'.repeat(2001))
  await poll(() => client.events.filter((e) => e.type === 'error').length, (n) => n > errors, { message: 'the long turn is refused' })
  t.match(client.events.at(-1), { type: 'error', code: 'text_too_long' })
  client.sendText('Once the agent has answered, the next one is taken.')
  await client.waitFor('transcript', (e) => e.speaker === 'agent', client.events.length)
  t.equal(ctx.standin.events.filter((e) => e.type === 'response.create').length - before, 2)
  client.hangup()
  t.match(await finishedCall(ctx.app, account.headers, callId), { disconnection_reason: 'user_hangup' })
})

t.test('a call\'s recording is stored while the call runs, and can be downloaded before it ends', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { callId, token } = await start(ctx, account)
  const client = await openWebCall(ctx.url, token)
  await client.waitFor('agent_speaking', (e) => !e.speaking)
  const chunks = async () => await ctx.db.selectFrom('call_recording_chunks').select(['offset_bytes']).where('call_id', '=', callId).execute()
  await poll(chunks, (rows) => rows.length > 0, { message: 'a part of the recording is stored' })
  const live = await ctx.db.selectFrom('calls').select('call_status').where('id', '=', callId).executeTakeFirstOrThrow()
  t.equal(live.call_status, 'started', 'while the call runs')

  const partial = await ctx.app.inject({ method: 'GET', url: `/v1/call/${callId}/recording`, headers: account.headers })
  t.equal(partial.statusCode, 200)
  const decoded = decodeWav(partial.rawPayload)
  t.equal(decoded.pcm.length * 2 + 44, partial.rawPayload.length, 'its WAV header is right for what is stored so far')
  t.ok(rms(decoded.pcm) > 0, 'the begin message is in it')

  await client.sendAudio(speech(600, 700), { realtime: true })
  client.hangup()
  await finishedCall(ctx.app, account.headers, callId)
  const whole = await ctx.app.inject({ method: 'GET', url: `/v1/call/${callId}/recording`, headers: account.headers })
  const all = decodeWav(whole.rawPayload).pcm
  t.ok(all.length > decoded.pcm.length, 'the rest was added at the end')
  t.same(all.subarray(0, decoded.pcm.length), decoded.pcm, 'after what was stored before')
  const offsets = (await chunks()).map((row) => Number(row.offset_bytes))
  t.ok(offsets.length >= 2, `stored in ${offsets.length} parts`)

  // Two tracks: the begin message on the agent's alone, the caller's sentence on the caller's alone.
  const stereo = await ctx.app.inject({ method: 'GET', url: `/v1/call/${callId}/recording?channels=2`, headers: account.headers })
  t.equal(stereo.statusCode, 200)
  const { left, right } = splitTracks(t, stereo.rawPayload)
  t.same(mixTracks(stereo.rawPayload.subarray(44)), all, 'the mono download is the mix of the two tracks')
  const before = decoded.pcm.length
  t.ok(left.subarray(0, before).every((sample) => sample === 0), 'nothing on the caller\'s track while only the agent spoke')
  t.ok(rms(right.subarray(0, before)) > 100, `the begin message on the agent's track (rms ${Math.round(rms(right.subarray(0, before)))})`)
  const voiced = left.findIndex((sample) => sample !== 0)
  t.ok(voiced >= before, 'the caller\'s track starts where the caller spoke')
  const sentence = speech(600, 0)
  const heard = left.subarray(voiced, voiced + sentence.length)
  t.ok(Math.abs(rms(heard) - rms(sentence)) < rms(sentence) * 0.05, `the caller's sentence on its track, as sent (rms ${Math.round(rms(heard))} for ${Math.round(rms(sentence))})`)
  t.ok(rms(right.subarray(voiced, voiced + sentence.length)) < rms(sentence) * 0.01, 'and nothing of it on the agent\'s')
})

t.test('our turn detection: a caller who pauses past the end of turn and goes on before the answer plays is one turn, one answer', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { callId, token } = await start(ctx, account, { interruption_sensitivity: 1 })
  ctx.standin.transcripts.push('My number is five five five', 'My number is five five five, one two three.')
  const client = await openWebCall(ctx.url, token)
  await client.waitFor('agent_speaking', (e) => !e.speaking)
  // The answer to the first part is still being prepared (it never starts) when the caller goes on.
  ctx.standin.replies.push({ text: 'Five five five, noted.', holdAfter: 0 }, { text: 'I have all of it.' })
  await client.sendAudio(speech(600, 700))
  await poll(() => ctx.standin.commits.length, (n) => n === 1, { message: 'the first part committed' })
  // In real time, as a caller speaks: audio sent more than 2 s ahead of the clock is dropped (the turn's end with it).
  await client.sendAudio(speech(600, 700), { realtime: true })
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && e.content === 'I have all of it.')
  client.hangup()
  await client.closed

  const done = await finishedCall(ctx.app, account.headers, callId)
  const said = done.transcription.map((i: { speaker: string, content: string }) => `${i.speaker}: ${i.content}`)
  t.same(said, ['agent: Hi Ada!', 'user: My number is five five five, one two three.', 'agent: I have all of it.'], 'one user turn, one answer')
  t.equal(ctx.standin.deleted.length, 1, 'the first part\'s item left the model\'s conversation')
  t.ok(ctx.standin.commits[1].seconds > ctx.standin.commits[0].seconds + 0.5, 'the second commit holds both parts')
})

t.test('the provider\'s server_vad: it detects and answers the turns, our commits stop, user_speaking follows it', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { callId, token } = await start(ctx, account, {}, { turn_detection: { type: 'server_vad', silence_duration_ms: 400 } })
  ctx.standin.transcripts.push('Can I book Tuesday?')
  ctx.standin.replies.push({ text: 'Yes, Tuesday at ten.' })
  const client = await openWebCall(ctx.url, token)
  await client.waitFor('agent_speaking', (e) => !e.speaking)
  const update = ctx.standin.events.find((e) => e.type === 'session.update') as any
  t.same(update.session.audio.input.turn_detection, { type: 'server_vad', silence_duration_ms: 400, create_response: true, interrupt_response: true })

  await say(client)
  t.match(await client.waitFor('transcript', (e) => e.speaker === 'user'), { content: 'Can I book Tuesday?' })
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && /Tuesday at ten/.test(e.content))
  t.same(ctx.standin.events.filter((e) => e.type === 'input_audio_buffer.commit'), [], 'the provider commits, not we')
  t.equal(ctx.standin.commits.length, 1)
  t.same(client.events.filter((e) => e.type === 'user_speaking').map((e) => e.speaking), [true, false], 'from the provider\'s speech events')
  client.hangup()
  t.match(await finishedCall(ctx.app, account.headers, callId), { call_status: 'success', disconnection_reason: 'user_hangup' })
})

t.test('the provider\'s semantic_vad: its speech_started while the agent talks is a barge-in (playout cleared, answer truncated)', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const { token } = await start(ctx, account, { interruption_sensitivity: 0.5 }, { turn_detection: { type: 'semantic_vad', eagerness: 'high' } })
  const client = await openWebCall(ctx.url, token)
  await client.waitFor('agent_speaking', (e) => !e.speaking)
  ctx.standin.replies.push({ text: 'Let me tell you everything about our clinic and its long history.', holdAfter: 2 })
  await say(client)
  await poll(() => client.events.filter((e) => e.type === 'agent_speaking' && e.speaking).length, (n) => n >= 2)
  const cleared = client.events.filter((e) => e.type === 'clear').length
  await client.sendAudio(speech(300, 0))
  await client.waitFor('clear', () => true, client.events.length - 1)
  t.ok(client.events.filter((e) => e.type === 'clear').length > cleared)
  const truncate: any = await poll(() => ctx.standin.events.find((e) => e.type === 'conversation.item.truncate'), Boolean, { message: 'truncate sent' })
  t.match(truncate, { item_id: String, content_index: 0 }, 'the model forgets what the caller did not hear')
  t.ok(truncate.audio_end_ms > 0 && truncate.audio_end_ms < 3000, `heard ${truncate.audio_end_ms as number} ms`)
  t.same(ctx.standin.events.filter((e) => e.type === 'input_audio_buffer.clear'), [], 'the provider keeps the caller\'s words')
  client.hangup()
  await client.closed
})
