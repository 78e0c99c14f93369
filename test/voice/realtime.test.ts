import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { pino } from 'pino'
import t, { type Test } from 'tap'
import { loadConfig } from '../../src/config.ts'
import { FRAME_SAMPLES, SAMPLE_RATE, bufferToPcm, resample, rms } from '../../src/modules/voice/audio.ts'
import { realtimeEngine } from '../../src/modules/voice/engines/realtime.ts'
import type { Engine, EngineEvent, EngineSetup } from '../../src/modules/voice/engines/types.ts'
import { startDeepgramStandin } from '../helpers/deepgram-standin.ts'
import { poll } from '../helpers/poll.ts'
import { replyAudio, startRealtimeStandin, type ClientEvent, type RealtimeStandin } from '../helpers/realtime-standin.ts'

const KEY = 'sk-test-secret-key'
const SETUP: EngineSetup = {
  instructions: 'You are the front desk of Acme.',
  tools: [{ name: 'lookup_order', description: 'Finds an order', parameters: { type: 'object', properties: { id: { type: 'string' } } } }],
  language: 'en-US',
  sttLanguages: [],
  voice: 'alloy',
  model: 'gpt-4.1-mini',
  temperature: 0.8,
  maxTokens: null
}
const silent = pino({ level: 'silent' })

interface Harness { engine: Engine, events: EngineEvent[], of: <T extends EngineEvent['type']>(type: T) => Array<Extract<EngineEvent, { type: T }>> }

/** `react`: what the session would do at an event, at once (as it does). */
type React = (event: EngineEvent, engine: Engine, events: EngineEvent[]) => void

function harness (standin: RealtimeStandin | { url: string }, env: Record<string, string> = {}, react?: React): Harness {
  const voice = loadConfig({ REALTIME_URL: standin.url, REALTIME_API_KEY: KEY, VOICE_PROVIDER_TIMEOUT_MS: '10000', ...env }).voice
  const events: EngineEvent[] = []
  const engine: Engine = realtimeEngine(voice)((event) => {
    events.push(event)
    react?.(event, engine, events)
  }, silent)
  const of = <T extends EngineEvent['type']>(type: T) => events.filter((e): e is Extract<EngineEvent, { type: T }> => e.type === type)
  return { engine, events, of }
}

async function started (t: Test, standin: RealtimeStandin, setup: Partial<EngineSetup> = {}, env: Record<string, string> = {}, react?: React): Promise<Harness> {
  const h = harness(standin, env, react)
  await h.engine.start({ ...SETUP, ...setup })
  t.teardown(() => h.engine.close())
  return h
}

const until = async (what: string, done: () => boolean) => { await poll(() => done(), Boolean, { timeoutMs: 10_000, message: `waited for ${what}` }) }
/** The client events of one type the stand-in received, read as `T` where a test looks inside them. */
const sent = <T = ClientEvent>(standin: RealtimeStandin, type: string) => standin.events.filter((e) => e.type === type) as unknown as T[]
const joined = (pcm: Int16Array[]) => {
  const all = new Int16Array(pcm.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of pcm) { all.set(p, at); at += p.length }
  return all
}
/** Caller speech: a 300 Hz tone at 16 kHz in 20 ms frames. */
const speech = (seconds: number) => Array.from({ length: seconds * 1000 / 20 }, (_, f) =>
  Int16Array.from({ length: FRAME_SAMPLES }, (_, i) => Math.round(6000 * Math.sin(2 * Math.PI * 300 * (f * FRAME_SAMPLES + i) / SAMPLE_RATE))))

t.test('start configures the session: our turn detection, PCM 24 kHz both ways, transcription, voice, instructions, tools', async (t) => {
  const standin = await startRealtimeStandin(t)
  await started(t, standin)
  const [update] = sent(standin, 'session.update')
  t.same(update.session, {
    type: 'realtime',
    output_modalities: ['audio'],
    instructions: SETUP.instructions,
    audio: {
      input: { format: { type: 'audio/pcm', rate: 24000 }, transcription: { model: 'gpt-4o-mini-transcribe', language: 'en' }, turn_detection: null },
      output: { format: { type: 'audio/pcm', rate: 24000 }, voice: 'alloy' }
    },
    tools: [{ type: 'function', name: 'lookup_order', description: 'Finds an order', parameters: SETUP.tools[0].parameters }],
    tool_choice: 'auto',
    max_output_tokens: 'inf'
  })

  await started(t, standin, { sttLanguages: ['de-DE', 'fr'], maxTokens: 300 })
  const second = sent<{ session: { audio: { input: { transcription: unknown } }, max_output_tokens: unknown } }>(standin, 'session.update')[1].session
  t.same(second.audio.input.transcription, { model: 'gpt-4o-mini-transcribe' }, 'several languages: the recogniser detects which')
  t.equal(second.max_output_tokens, 300)
})

t.test('REALTIME_TRANSCRIPTION_MODEL names the recogniser of the caller (an Azure deployment); none turns it off', async (t) => {
  const standin = await startRealtimeStandin(t)
  await started(t, standin, {}, { REALTIME_TRANSCRIPTION_MODEL: 'my-whisper-deployment' })
  const input = (n: number) => sent<{ session: { audio: { input: { transcription: unknown } } } }>(standin, 'session.update')[n].session.audio.input
  t.same(input(0).transcription, { model: 'my-whisper-deployment', language: 'en' })

  // A local realtime server without a recogniser: no transcription asked for, and the answer does not wait for one.
  standin.replies.push({ text: 'Sure.' })
  const h = await started(t, standin, {}, { REALTIME_TRANSCRIPTION_MODEL: 'none' })
  t.equal(input(1).transcription, null)
  for (const frame of speech(0.5)) h.engine.audio(frame)
  h.engine.endOfTurn()
  await until('response_done', () => h.of('response_done').length > 0)
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'Sure.' }])
  t.equal(h.of('agent_text').map((e) => e.delta).join(''), 'Sure.', 'the agent\'s words came without waiting for a transcription')
})

t.test('the key goes in the header the configuration names, the model in the URL', async (t) => {
  const standin = await startRealtimeStandin(t)
  await started(t, standin)
  t.equal(standin.connections[0].headers.authorization, `Bearer ${KEY}`)
  t.equal(standin.connections[0].headers['api-key'], undefined)
  t.equal(standin.connections[0].url, '/v1/realtime?model=gpt-realtime')

  // Azure's GA endpoint: api-key header, its own query kept, the deployment as the model.
  await started(t, standin, {}, { REALTIME_URL: `${standin.url}?api-version=2025-08-28`, REALTIME_AUTH: 'api-key', REALTIME_MODEL: 'my-deployment' })
  t.equal(standin.connections[1].headers['api-key'], KEY)
  t.equal(standin.connections[1].headers.authorization, undefined)
  t.equal(standin.connections[1].url, '/v1/realtime?api-version=2025-08-28&model=my-deployment')

  const h = harness(standin, { REALTIME_API_KEY: '' })
  await h.engine.start(SETUP)
  t.teardown(() => h.engine.close())
  t.equal(standin.connections[2].headers.authorization, undefined, 'no key, no header (a local server)')
})

t.test('a spoken turn: caller audio at 24 kHz, transcript, agent audio at 16 kHz, usage, response_done', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.transcripts.push('Where is my order?')
  const answer = 'It left the warehouse this morning.'
  standin.replies.push({ text: answer })
  const h = await started(t, standin)
  for (const frame of speech(0.5)) h.engine.audio(frame)
  h.engine.endOfTurn()
  await until('response_done', () => h.of('response_done').length > 0)

  t.equal(standin.commits.length, 1)
  t.equal(standin.commits[0].seconds, 0.5, 'half a second resampled to 24 kHz')
  t.ok(standin.commits[0].rms > 3000, `the provider heard the caller (RMS ${standin.commits[0].rms})`)
  t.same(sent(standin, 'input_audio_buffer.commit').length, 1)
  t.same(sent(standin, 'response.create'), [{ type: 'response.create' }])

  t.same(h.of('user_text'), [{ type: 'user_text', text: 'Where is my order?' }])
  t.ok(h.events.indexOf(h.of('user_text')[0]) < h.events.indexOf(h.of('agent_text')[0]), 'the caller\'s words come before the answer')
  t.equal(h.of('agent_text').map((e) => e.delta).join(''), 'It left the warehouse this morning.')
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'It left the warehouse this morning.' }])
  t.same(h.of('usage'), [{ type: 'usage', model: 'gpt-realtime', input: 100, output: 10 + answer.length }])

  // The stand-in cut its audio on odd bytes: what arrives is exactly its tone, at 16 kHz.
  const expected = resample(bufferToPcm(replyAudio('It left the warehouse this morning.')), 24_000, SAMPLE_RATE)
  const audio = joined(h.of('audio').map((e) => e.pcm))
  t.ok(h.of('audio').length > 1, 'streamed in several pieces')
  t.equal(audio.length, expected.length)
  let worst = 0
  for (let i = 0; i < audio.length - 1; i++) worst = Math.max(worst, Math.abs(audio[i] - expected[i]))
  t.ok(worst <= 1, `the agent's audio is intact (largest difference ${worst})`)
  t.ok(rms(audio) > 3000)
  t.same(h.of('speech'), [{ type: 'speech', recognisedSeconds: 0.5 }, { type: 'speech', synthesisedSeconds: replyAudio(answer).length / 2 / 24_000 }])
  t.equal(h.events.at(-1)?.type, 'response_done', 'response_done follows all of its audio')
})

t.test('a transcription that comes after the answer still reaches the session before the answer\'s text', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.lateTranscripts = true
  const h = await started(t, standin)
  for (const frame of speech(0.3)) h.engine.audio(frame)
  h.engine.endOfTurn()
  await until('response_done', () => h.of('response_done').length > 0)
  t.same(h.events.filter((e) => e.type !== 'audio' && e.type !== 'speech' && e.type !== 'usage' && e.type !== 'stages').map((e) => e.type), ['user_text', 'agent_text', 'agent_text', 'agent_text', 'agent_text', 'response_done'])
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'Hi, how can I help?' }])
})

t.test('a typed turn is a user message and a response', async (t) => {
  const standin = await startRealtimeStandin(t)
  const h = await started(t, standin)
  h.engine.userText('What are your opening hours?')
  await until('response_done', () => h.of('response_done').length > 0)
  t.same(sent(standin, 'conversation.item.create'), [{ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'What are your opening hours?' }] } }])
  t.equal(sent(standin, 'response.create').length, 1)
  t.same(h.of('user_text'), [], 'the session knows what was typed')
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'Hi, how can I help?' }])
  t.ok(h.of('audio').length > 0)
})

t.test('an engine started mid-call (a call taken back after forwarding) is given the conversation so far', async (t) => {
  const standin = await startRealtimeStandin(t)
  await started(t, standin, { history: [{ role: 'assistant', text: 'Hello, this is Acme.' }, { role: 'user', text: 'Sales, please.' }] })
  await until('the history', () => sent(standin, 'conversation.item.create').length === 2)
  t.same(sent(standin, 'conversation.item.create'), [
    { type: 'conversation.item.create', item: { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hello, this is Acme.' }] } },
    { type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Sales, please.' }] } }
  ])
  t.equal(sent(standin, 'response.create').length, 0, 'nothing is answered until asked')
})

t.test('say() speaks exactly the text and reports it', async (t) => {
  const standin = await startRealtimeStandin(t)
  const h = await started(t, standin)
  h.engine.say('Welcome to Acme, how may I help?')
  await until('response_done', () => h.of('response_done').length > 0)
  const [create] = sent<{ response: { instructions: string, tool_choice: string } }>(standin, 'response.create')
  t.match(create.response.instructions, /exactly.*\n\nWelcome to Acme, how may I help\?$/s)
  t.equal(create.response.tool_choice, 'none')
  t.same(h.of('agent_text'), [{ type: 'agent_text', delta: 'Welcome to Acme, how may I help?' }])
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'Welcome to Acme, how may I help?' }])
  t.ok(rms(joined(h.of('audio').map((e) => e.pcm))) > 3000)
})

t.test('tool calls: every result goes back, then the model answers', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.replies.push({ calls: [{ name: 'lookup_order', arguments: '{"id":"A1"}' }, { name: 'lookup_order', arguments: '{"id":"B2"}' }] }, { text: 'Both orders shipped.' })
  const h = await started(t, standin)
  h.engine.userText('Where are my orders?')
  await until('two tool calls', () => h.of('tool_call').length === 2)
  const calls = h.of('tool_call')
  t.match(calls, [{ name: 'lookup_order', arguments: '{"id":"A1"}', id: /^call_/ }, { name: 'lookup_order', arguments: '{"id":"B2"}', id: /^call_/ }])
  t.same(h.of('response_done'), [])

  h.engine.toolResult(calls[0].id, '{"status":"shipped"}')
  h.engine.toolResult(calls[1].id, '{"status":"shipped"}')
  await until('response_done', () => h.of('response_done').length > 0)
  const tail = standin.events.filter((e) => e.type === 'conversation.item.create' || e.type === 'response.create').slice(2)
  t.same(tail, [
    { type: 'conversation.item.create', item: { type: 'function_call_output', call_id: calls[0].id, output: '{"status":"shipped"}' } },
    { type: 'conversation.item.create', item: { type: 'function_call_output', call_id: calls[1].id, output: '{"status":"shipped"}' } },
    { type: 'response.create' }
  ], 'one response.create, after the last output')
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'Both orders shipped.' }])
  t.ok(h.of('audio').length > 0, 'the answer is spoken')
  t.equal(h.of('usage').length, 2, 'both model requests counted')
})

t.test('cancel stops the response: response.cancel, input cleared, nothing of it follows', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.replies.push({ text: 'Let me tell you all about our long list of products.', holdAfter: 1 }, { text: 'Sure.' })
  const h = await started(t, standin)
  for (const frame of speech(0.2)) h.engine.audio(frame)
  h.engine.endOfTurn()
  await until('the first audio', () => h.of('audio').length > 0)
  const heard = h.of('audio').length
  h.engine.cancel()
  await until('the cancel', () => sent(standin, 'input_audio_buffer.clear').length > 0)
  t.match(sent(standin, 'response.cancel'), [{ type: 'response.cancel', response_id: /^resp_/ }])
  t.equal(sent(standin, 'input_audio_buffer.clear').length, 1)

  // The next turn waits for the cancelled response to end on the server, then runs.
  h.engine.userText('Actually, just the opening hours.')
  await until('response_done', () => h.of('response_done').length > 0)
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'Sure.' }], 'no response_done of the cancelled response')
  t.equal(joined(h.of('audio').slice(heard).map((e) => e.pcm)).length, resample(bufferToPcm(replyAudio('Sure.')), 24_000, SAMPLE_RATE).length, 'only the new answer\'s audio')
  t.same(h.of('error'), [])
})

t.test('cancel before the server has the response: its events are dropped, the cancel race is harmless', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.replies.push({ text: 'A reply nobody hears.' }, { text: 'Yes?' })
  const h = await started(t, standin)
  h.engine.userText('Hello?')
  h.engine.cancel()
  h.engine.userText('Hello again?')
  await until('response_done', () => h.of('response_done').length > 0)
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'Yes?' }])
  t.equal(h.of('agent_text').map((e) => e.delta).join(''), 'Yes?')
  t.equal(joined(h.of('audio').map((e) => e.pcm)).length, resample(bufferToPcm(replyAudio('Yes?')), 24_000, SAMPLE_RATE).length, 'none of the cancelled audio')
  t.ok(sent(standin, 'response.cancel').length >= 1)
  t.same(h.of('error'), [], 'the server\'s "no active response" is not a failure')
})

t.test('update() changes instructions, tools and voice from the next response', async (t) => {
  const standin = await startRealtimeStandin(t)
  const h = await started(t, standin)
  h.engine.update({ ...SETUP, instructions: 'You are the billing desk.', tools: [], voice: 'verse' })
  await until('session.update', () => sent(standin, 'session.update').length === 2)
  t.match(sent(standin, 'session.update')[1], { session: { instructions: 'You are the billing desk.', tools: [], audio: { output: { voice: 'verse' } } } })

  // Once the model has spoken the API refuses a new voice: the rest still changes.
  h.engine.userText('Hi')
  await until('response_done', () => h.of('response_done').length > 0)
  h.engine.update({ ...SETUP, instructions: 'You are sales.', voice: 'ash' })
  await until('session.update', () => sent(standin, 'session.update').length === 3)
  const third = sent<{ session: { instructions: string, audio: { output: Record<string, unknown> } } }>(standin, 'session.update')[2]
  t.equal(third.session.instructions, 'You are sales.')
  t.equal(third.session.audio.output.voice, undefined)
  t.same(h.of('error'), [])
})

t.test('the provider dropping the connection mid-response is one error', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.replies.push({ text: 'This answer is cut short by an outage.', dropAfter: 1 })
  const h = await started(t, standin)
  h.engine.userText('Hi')
  await until('error', () => h.of('error').length > 0)
  t.match(h.of('error'), [{ message: /closed the connection/ }])
  t.same(h.of('response_done'), [])
  t.ok(h.of('audio').length > 0, 'the audio before the drop came through')
  const count = h.events.length
  h.engine.close()
  t.equal(h.events.length, count, 'nothing after the error')
})

t.test('an error event is one error, without the key', async (t) => {
  const standin = await startRealtimeStandin(t)
  const h = await started(t, standin)
  standin.sendError('invalid_api_key', `Incorrect API key provided: ${KEY}.`)
  await until('error', () => h.of('error').length > 0)
  t.equal(h.of('error').length, 1)
  t.match(h.of('error')[0].message, /Incorrect API key provided/)
  t.notMatch(h.of('error')[0].message, KEY)

  standin.replies.push({ error: { code: 'server_error', message: 'The server had an error.' } })
  const second = await started(t, standin)
  second.engine.userText('Hi')
  await until('error', () => second.of('error').length > 0)
  t.match(second.of('error'), [{ message: /The server had an error/ }])
})

t.test('a response that produces nothing within the provider timeout is an error', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.replies.push({ text: 'Never spoken.', holdAfter: 0 })
  const h = await started(t, standin, {}, { VOICE_PROVIDER_TIMEOUT_MS: '300' })
  h.engine.userText('Hi')
  await until('error', () => h.of('error').length > 0)
  t.match(h.of('error'), [{ message: /did not answer within 300 ms/ }])
})

t.test('start rejects when it cannot connect or the provider does not answer', async (t) => {
  const closed = http.createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const port = (closed.address() as AddressInfo).port
  await new Promise((resolve) => closed.close(resolve))
  const refused = harness({ url: `ws://127.0.0.1:${port}/v1/realtime` })
  await t.rejects(refused.engine.start(SETUP), { message: /cannot connect/ })
  t.same(refused.events, [])

  const standin = await startRealtimeStandin(t)
  standin.silent = true
  const hung = harness(standin, { VOICE_PROVIDER_TIMEOUT_MS: '300' })
  await t.rejects(hung.engine.start(SETUP), { message: /did not answer within 300 ms/ })
  t.same(hung.events, [])

  const closing = harness(standin)
  const start = closing.engine.start(SETUP)
  closing.engine.close()
  await t.rejects(start, { message: /closed before it connected/ }, 'a call hung up while connecting')
})

t.test('close() ends the connection and every event', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.replies.push({ text: 'Held for a while.', holdAfter: 1 })
  const h = await started(t, standin)
  h.engine.userText('Hi')
  await until('audio', () => h.of('audio').length > 0)
  const count = h.events.length
  h.engine.close()
  await until('the stand-in to see the close', () => standin.openConnections() === 0)
  t.equal(h.events.length, count)
})

/** Caller silence in 20 ms frames. */
const quiet = (seconds: number) => Array.from({ length: seconds * 1000 / 20 }, () => new Int16Array(FRAME_SAMPLES))
const feed = (h: Harness, frames: Int16Array[]) => { for (const frame of frames) h.engine.audio(frame) }
/** The session's barge-in: the caller speaks while agent audio came, and 150 ms of it were heard. */
const bargeIn: React = (event, engine, events) => {
  if (event.type === 'caller_speech' && event.speaking && events.some((e) => e.type === 'audio')) engine.cancel(150)
}

t.test('our turn detection (the default): a turn whose answer has not started joins the next one, after a barge-in', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.transcripts.push('My number is five five five', 'My number is five five five, one two three.')
  // The first answer is still being prepared (it never starts) when the caller goes on.
  standin.replies.push({ text: 'Thanks, I have five five five.', holdAfter: 0 }, { text: 'Thanks, I have it all.' })
  const h = await started(t, standin)
  feed(h, speech(0.5))
  h.engine.endOfTurn()
  await until('the first transcription and answer', () => standin.events.filter((e) => e.type === 'response.create').length === 1 && standin.commits.length === 1)
  feed(h, speech(0.4))
  // The session's barge-in as the caller resumes: the answer is cancelled, nothing of it was heard.
  h.engine.cancel(0)
  feed(h, speech(0.3))
  h.engine.endOfTurn()
  await until('response_done', () => h.of('response_done').length > 0)

  t.same(h.of('user_text'), [{ type: 'user_text', text: 'My number is five five five, one two three.' }], 'one user turn, transcribed whole')
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'Thanks, I have it all.' }], 'one answer')
  t.equal(standin.deleted.length, 1, 'the first part\'s item is deleted')
  t.equal(standin.commits.length, 2)
  t.equal(standin.commits[1].seconds, 1.2, 'the second commit holds the first part again, then what followed')
  t.same(h.of('error'), [])
})

t.test('our turn detection: the join works without a barge-in (interruption_sensitivity 0), before the transcription came', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.lateTranscripts = true
  standin.transcripts.push('Part one', 'Part one and part two.')
  standin.replies.push({ text: 'Never heard.', holdAfter: 0 }, { text: 'Got it.' })
  const h = await started(t, standin)
  feed(h, speech(0.5))
  h.engine.endOfTurn()
  feed(h, speech(0.3))
  h.engine.endOfTurn()
  await until('response_done', () => h.of('response_done').length > 0)
  t.same(h.of('user_text'), [{ type: 'user_text', text: 'Part one and part two.' }])
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'Got it.' }])
  t.ok(sent(standin, 'response.cancel').length >= 1, 'the first answer is cancelled')
  t.equal(standin.deleted.length, 1)
  t.equal(standin.commits[1].seconds, 0.8)
  t.same(h.of('error'), [])
})

t.test('our turn detection: a turn whose answer has started stands; the next is a turn of its own', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.transcripts.push('First.', 'Second.')
  const h = await started(t, standin)
  feed(h, speech(0.3))
  h.engine.endOfTurn()
  await until('the first answer', () => h.of('response_done').length === 1)
  feed(h, speech(0.3))
  h.engine.endOfTurn()
  await until('the second answer', () => h.of('response_done').length === 2)
  t.same(h.of('user_text').map((e) => e.text), ['First.', 'Second.'])
  t.same(standin.deleted, [])
  t.same(sent(standin, 'conversation.item.delete'), [])
})

t.test('the provider\'s server_vad: session.update carries it, our commits stop, its turns are answered and reported', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.transcripts.push('Where is my order?')
  standin.replies.push({ text: 'On its way.' })
  const h = await started(t, standin, { turnDetection: { type: 'server_vad', silence_duration_ms: 300, threshold: 0.6 } })
  t.same(sent<{ session: { audio: { input: { turn_detection: unknown } } } }>(standin, 'session.update')[0].session.audio.input.turn_detection,
    { type: 'server_vad', silence_duration_ms: 300, threshold: 0.6, create_response: true, interrupt_response: true })

  feed(h, [...speech(0.5), ...quiet(0.4)])
  // The session does not end turns with the provider's detection; should it, nothing is committed.
  h.engine.endOfTurn()
  await until('response_done', () => h.of('response_done').length > 0)
  t.same(sent(standin, 'input_audio_buffer.commit'), [], 'the provider commits, not we')
  t.equal(standin.commits.length, 1)
  t.same(h.of('caller_speech'), [{ type: 'caller_speech', speaking: true }, { type: 'caller_speech', speaking: false }])
  t.same(h.of('user_text'), [{ type: 'user_text', text: 'Where is my order?' }])
  t.ok(h.events.indexOf(h.of('user_text')[0]) < h.events.indexOf(h.of('agent_text')[0]), 'the caller\'s words come before the answer')
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'On its way.' }])
  t.same(sent(standin, 'response.create'), [], 'the provider answered by itself')
  t.ok(h.of('speech').some((e) => e.recognisedSeconds !== undefined && e.recognisedSeconds >= 0.5), 'the provider\'s speech is counted')
  t.same(h.of('error'), [])

  await started(t, standin, { turnDetection: { type: 'semantic_vad', eagerness: 'low' }, interruptible: false })
  t.same(sent<{ session: { audio: { input: { turn_detection: unknown } } } }>(standin, 'session.update')[1].session.audio.input.turn_detection,
    { type: 'semantic_vad', eagerness: 'low', create_response: true, interrupt_response: false }, 'no barge-in: the provider does not interrupt either')
})

t.test('the provider\'s turn detection: speech during an answer is caller_speech; cancel truncates and keeps the input buffer', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.replies.push({ text: 'Let me tell you all about our long list of products.', holdAfter: 2 })
  const h = await started(t, standin, { turnDetection: { type: 'semantic_vad', eagerness: 'high' } }, {}, bargeIn)
  feed(h, [...speech(0.4), ...quiet(0.3)])
  await until('the answer\'s audio', () => h.of('audio').length > 0)
  feed(h, speech(0.2))
  await until('the caller speaking again', () => h.of('caller_speech').length === 3)
  t.same(h.of('caller_speech').at(-1), { type: 'caller_speech', speaking: true })
  await until('the truncate', () => sent(standin, 'conversation.item.truncate').length > 0)
  t.match(sent(standin, 'conversation.item.truncate'), [{ item_id: /^item_/, content_index: 0, audio_end_ms: 150 }])
  t.same(sent(standin, 'input_audio_buffer.clear'), [], 'the provider keeps the caller\'s words')
  t.same(h.of('response_done'), [], 'the cancelled answer reports nothing')
  t.same(h.of('error'), [], 'the provider cancelled first: our cancel is a harmless race')
})

t.test('the provider\'s turn detection: our say() that meets the provider\'s own answer waits for it, then is spoken', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.replies.push({ text: 'A long answer that the caller interrupts.', holdAfter: 1 })
  const h = await started(t, standin, { turnDetection: { type: 'server_vad' } })
  // The turn ends at the provider and, in the same moment, we ask for a reminder: ours reaches it second.
  feed(h, [...speech(0.4), ...quiet(0.6)])
  h.engine.say('Are you still there?')
  await until('the provider\'s answer', () => h.of('audio').length > 0)
  const creates = sent<{ response: { metadata?: unknown } }>(standin, 'response.create')
  t.same(creates[0].response.metadata, { switchboard: 'session' }, 'ours are marked')
  // The caller speaks again: the provider cancels its answer (the session, not speaking, lets it), then ours runs.
  feed(h, speech(0.2))
  await until('response_done', () => h.of('response_done').length === 2)
  t.same(h.of('response_done'), [{ type: 'response_done', text: 'A ' }, { type: 'response_done', text: 'Are you still there?' }], 'what the provider\'s answer said, then ours alone')
  t.equal(sent(standin, 'response.create').length, 2, 'sent again once the provider\'s answer ended')
  t.same(h.of('error'), [])
})

t.test('a barge-in truncates the last answer to what was heard even after its response ended; a new answer\'s is not', async (t) => {
  const standin = await startRealtimeStandin(t)
  const h = await started(t, standin)
  h.engine.userText('Tell me about you.')
  await until('response_done', () => h.of('response_done').length === 1)
  // The provider generates faster than the caller hears: the answer is still playing when the caller speaks.
  h.engine.cancel(120)
  await until('the truncate', () => sent(standin, 'conversation.item.truncate').length === 1)
  t.match(sent(standin, 'conversation.item.truncate'), [{ item_id: /^item_/, content_index: 0, audio_end_ms: 120 }])

  h.engine.userText('And then?')
  await until('response_done', () => h.of('response_done').length === 2)
  h.engine.cancel(60_000)
  h.engine.userText('Hello?')
  // The caller goes on before the next answer started: nothing of the answer before is cut.
  h.engine.cancel(0)
  await until('the last response.create', () => sent(standin, 'response.create').length === 3)
  t.equal(sent(standin, 'conversation.item.truncate').length, 1, 'heard whole, or not the last answer: no truncate')
  t.same(h.of('error'), [])
})

t.test('forget: a backchannel over the agent is cleared from the input buffer, the next turn commits only what came after; the answer is timed', async (t) => {
  const standin = await startRealtimeStandin(t)
  standin.transcripts.push('Where is my order?')
  standin.replies.push({ text: 'On its way.' })
  const h = await started(t, standin)
  for (const frame of speech(0.4)) h.engine.audio(frame)
  h.engine.forget!()
  await until('the clear', () => sent(standin, 'input_audio_buffer.clear').length === 1)
  for (const frame of speech(0.5)) h.engine.audio(frame)
  h.engine.endOfTurn()
  await until('response_done', () => h.of('response_done').length > 0)
  t.equal(standin.commits.length, 1)
  t.equal(standin.commits[0].seconds, 0.5, 'only the turn\'s own half second')
  const [stages] = h.of('stages')
  t.match(stages, { transcriptionMs: null, llmMs: Number, ttsMs: null }, 'the model\'s share: response.create to its first audio')
  t.ok(h.events.indexOf(stages) < h.events.indexOf(h.of('audio')[0]), 'given before the answer\'s first audio')
})

t.test('with a streaming recogniser (STT_PROVIDER deepgram) the caller\'s words come while they speak, for the turn core; its failure leaves the call on silence alone', async (t) => {
  const standin = await startRealtimeStandin(t)
  const deepgram = await startDeepgramStandin(t)
  deepgram.transcripts.push('Where is my order?')
  const h = await started(t, standin, {}, { STT_PROVIDER: 'deepgram', STT_STREAM_URL: deepgram.url, DEEPGRAM_API_KEY: deepgram.apiKey })
  t.same(h.of('words'), [{ type: 'words', streaming: true }])
  for (const frame of speech(0.6)) h.engine.audio(frame)
  await until('the caller\'s words', () => h.of('user_partial').length > 0)
  t.match(h.of('user_partial').at(-1), { type: 'user_partial', text: /^Where/ })
  h.engine.endOfTurn()
  await until('response_done', () => h.of('response_done').length > 0)
  t.equal(standin.commits.length, 1, 'the model hears the audio itself')
  t.ok(deepgram.connections[0].messages.some((m) => m.type === 'Finalize'), 'the recogniser\'s turn ends with ours')

  deepgram.fail()
  await until('the recogniser is lost', () => h.of('words').length === 2)
  t.same(h.of('words')[1], { type: 'words', streaming: false })
  t.same(h.of('error'), [], 'the call goes on')
})
