import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { pino } from 'pino'
import t, { type Test } from 'tap'
import { loadConfig } from '../../src/config.ts'
import { FRAME_SAMPLES, SAMPLE_RATE } from '../../src/modules/voice/audio.ts'
import { cascadeEngine } from '../../src/modules/voice/engines/cascade.ts'
import type { Engine, EngineEvent, EngineSetup } from '../../src/modules/voice/engines/types.ts'
import { deepgramStt } from '../../src/modules/voice/stt/deepgram.ts'
import type { SttEvent } from '../../src/modules/voice/stt/types.ts'
import { startDeepgramStandin } from '../helpers/deepgram-standin.ts'
import { startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { startOpenAiTranscriptionStandin } from '../helpers/openai-transcription-standin.ts'
import { poll } from '../helpers/poll.ts'

// The cascade engine with a streaming recogniser (STT_PROVIDER openai-realtime or deepgram), each against a
// stand-in of its wire protocol on loopback; the chat model and speech against the OpenAI-compatible HTTP
// stand-in. Whole calls through the browser: web-call-streaming-stt.test.ts.

const SETUP: EngineSetup = {
  instructions: 'You are the test agent.',
  tools: [],
  language: 'en-US',
  sttLanguages: [],
  voice: 'alloy',
  model: 'test-model',
  temperature: 0.4,
  maxTokens: null
}

const silent = pino({ level: 'silent' })

async function engineWith (t: Test, env: Record<string, string>) {
  const http = await startOpenAiHttpStandin(t)
  const voice = loadConfig({ LLM_URL: http.url, TTS_URL: http.url, STT_URL: http.url, ...env }).voice
  const events: EngineEvent[] = []
  const engine = cascadeEngine(voice)((event) => events.push(event), silent)
  t.teardown(() => engine.close())
  const of = <T extends EngineEvent['type']>(type: T) => events.filter((e): e is Extract<EngineEvent, { type: T }> => e.type === type)
  const waitFor = async <T extends EngineEvent['type']>(type: T, count = 1) =>
    await poll(() => of(type), (found) => found.length >= count, {
      timeoutMs: 20_000,
      message: () => `waited for ${count} ${type} events; got: ${events.map((e) => e.type).join(', ')}`
    })
  return { http, engine, events, of, waitFor }
}

async function openai (t: Test, env: Record<string, string> = {}) {
  const stt = await startOpenAiTranscriptionStandin(t)
  const context = await engineWith(t, { STT_PROVIDER: 'openai-realtime', STT_STREAM_URL: stt.url, STT_API_KEY: stt.apiKey, ...env })
  return { stt, ...context }
}

async function deepgram (t: Test, env: Record<string, string> = {}) {
  const stt = await startDeepgramStandin(t)
  const context = await engineWith(t, { STT_PROVIDER: 'deepgram', STT_STREAM_URL: stt.url, DEEPGRAM_API_KEY: stt.apiKey, ...env })
  return { stt, ...context }
}

/** `seconds` of a 300 Hz tone (speech to the stand-ins), then `silence` seconds of silence, as 20 ms frames. */
function say (engine: Engine, seconds: number, silence = 0) {
  for (let f = 0; f < (seconds + silence) * 50; f++) {
    const frame = new Int16Array(FRAME_SAMPLES)
    if (f < seconds * 50) for (let i = 0; i < frame.length; i++) frame[i] = Math.round(6000 * Math.sin(2 * Math.PI * 300 * (f * FRAME_SAMPLES + i) / SAMPLE_RATE))
    engine.audio(frame)
  }
}

const recognised = (events: EngineEvent[]) => events.reduce((sum, e) => sum + (e.type === 'speech' ? e.recognisedSeconds ?? 0 : 0), 0)

async function closedPort (): Promise<number> {
  const server = http.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

t.test('openai-realtime: the turn is transcribed from the stream; partial words come first; usage is the audio streamed', async (t) => {
  const { stt, http, engine, events, of, waitFor } = await openai(t, { STT_MODEL: 'gpt-4o-transcribe' })
  await engine.start(SETUP)
  stt.transcripts.push('What time is it?')
  say(engine, 1, 0.5)
  engine.endOfTurn()
  await waitFor('response_done')

  t.equal(stt.connections.length, 1, 'one connection')
  const [connection] = stt.connections
  t.equal(new URL(connection.url, 'ws://x').searchParams.get('intent'), 'transcription')
  t.equal(connection.headers.authorization, `Bearer ${stt.apiKey}`)
  t.same(stt.events.find((e) => e.type === 'session.update')?.session, {
    type: 'transcription',
    audio: { input: { format: { type: 'audio/pcm', rate: 24_000 }, transcription: { model: 'gpt-4o-transcribe', language: 'en' }, turn_detection: null } }
  })
  t.equal(stt.commits.length, 1)
  t.equal(stt.commits[0].seconds, 1.5, 'the whole turn, at 24 kHz')
  t.ok(stt.commits[0].rms > 1000, 'the caller\'s tone, not silence')
  t.ok(stt.events.filter((e) => e.type === 'input_audio_buffer.append').every((e) => e.bytes === 4800), '100 ms an append')
  t.equal(http.requests.transcriptions.length, 0, 'no batch request')

  t.same(of('user_text'), [{ type: 'user_text', text: 'What time is it?' }])
  t.same(http.requests.chat[0].body.messages.at(-1), { role: 'user', content: 'What time is it?' })
  const partials = of('user_partial')
  t.same(partials.map((p) => p.text), ['What', 'What time', 'What time is', 'What time is it?', 'What time is it?'])
  t.same(partials.at(-1), { type: 'user_partial', text: 'What time is it?', final: true, startMs: 0, endMs: 1500 })
  t.ok(events.indexOf(partials.at(-1)!) < events.indexOf(of('user_text')[0]), 'partials before the turn\'s text')
  t.equal(recognised(events), 1.5, 'seconds of audio streamed')
  t.equal(stt.audioSeconds(), 1.5)

  engine.close()
  await poll(() => connection.closed, (closed) => closed, { message: 'the connection stays open' })
  t.equal(connection.closeCode, 1000)
})

t.test('openai-realtime: a model that transcribes as the audio arrives gives partial words while the caller speaks', async (t) => {
  const { stt, engine, of, waitFor } = await openai(t, { STT_MODEL: 'gpt-realtime-whisper' })
  stt.live = true
  await engine.start(SETUP)
  stt.transcripts.push('Book me in for Tuesday.')
  say(engine, 0.3)
  const partials = await waitFor('user_partial', 3)
  t.same(partials.map((p) => [p.text, p.final]), [['Book', false], ['Book me', false], ['Book me in', false]], 'before the turn ended')
  t.same(partials.map((p) => [p.startMs, p.endMs]), [[0, 300], [0, 300], [0, 300]], 'the audio streamed so far (all of it was sent at once)')
  say(engine, 0, 0.5)
  engine.endOfTurn()
  const [heard] = await waitFor('user_text')
  t.same(heard, { type: 'user_text', text: 'Book me in for Tuesday.' })
  t.same(of('user_partial').at(-1), { type: 'user_partial', text: 'Book me in for Tuesday.', final: true, startMs: 0, endMs: 800 })
})

t.test('openai-realtime: a barge-in while the turn is transcribed; what the caller said before and after is one turn', async (t) => {
  const { stt, http, engine, of, waitFor } = await openai(t)
  await engine.start(SETUP)
  stt.transcripts.push('I would like', 'an appointment.')
  stt.hold = true
  say(engine, 1, 0.5)
  engine.endOfTurn()
  await poll(() => stt.commits.length, (n) => n === 1, { message: 'the first part is committed' })
  say(engine, 0.5)
  engine.cancel()
  say(engine, 0, 0.5)
  engine.endOfTurn()
  await poll(() => stt.commits.length, (n) => n === 2, { message: 'the second part is committed' })
  stt.release()
  await waitFor('response_done')
  t.same(of('user_text'), [{ type: 'user_text', text: 'I would like an appointment.' }], 'one turn with both parts')
  t.equal(http.requests.chat.length, 1)
  t.same(http.requests.chat[0].body.messages.slice(1), [{ role: 'user', content: 'I would like an appointment.' }])
})

t.test('openai-realtime: a caller who talks for over a minute has it committed in pieces; nothing is lost', async (t) => {
  const { stt, engine, of, waitFor } = await openai(t)
  await engine.start(SETUP)
  stt.transcripts.push('First minute.', 'And a bit more.')
  say(engine, 61)
  engine.endOfTurn()
  await waitFor('user_text')
  t.same(stt.commits.map((c) => c.seconds), [60, 1])
  t.same(of('user_text'), [{ type: 'user_text', text: 'First minute. And a bit more.' }])
})

t.test('openai-realtime: the provider fails mid-call: one error event (the session ends the call runtime_error)', async (t) => {
  await t.test('the connection drops', async (t) => {
    const { stt, engine, of, waitFor } = await openai(t)
    await engine.start(SETUP)
    say(engine, 0.5)
    stt.drop()
    const [error] = await waitFor('error')
    t.match(error.message, /^STT provider closed the connection \(1006/)
    t.equal(of('error').length, 1)
  })
  await t.test('a transcription fails', async (t) => {
    const { stt, engine, of, waitFor } = await openai(t)
    await engine.start(SETUP)
    stt.failNext = true
    say(engine, 0.5, 0.5)
    engine.endOfTurn()
    const [error] = await waitFor('error')
    t.equal(error.message, 'STT provider could not transcribe the caller: The audio could not be transcribed.')
    t.equal(of('user_text').length, 0, 'the turn is not answered')
  })
  await t.test('no transcript in time', async (t) => {
    const { stt, engine, waitFor } = await openai(t, { VOICE_PROVIDER_TIMEOUT_MS: '300' })
    await engine.start(SETUP)
    stt.hold = true
    say(engine, 0.5, 0.5)
    engine.endOfTurn()
    const [error] = await waitFor('error')
    t.equal(error.message, 'STT provider sent no transcript within 300 ms')
  })
})

t.test('openai-realtime: a wrong key or no server: the engine does not start, and says why without the key', async (t) => {
  const wrong = await openai(t, { STT_API_KEY: 'sk-wrong-secret-1234' })
  const refusal = await wrong.engine.start(SETUP).then(() => undefined, (err: Error) => err.message)
  t.equal(refusal, 'STT provider error: Incorrect API key provided: sk-****1234.')
  t.notMatch(refusal, /wrong-secret/)

  const port = await closedPort()
  const none = await openai(t, { STT_STREAM_URL: `ws://127.0.0.1:${port}/v1/realtime` })
  await t.rejects(none.engine.start(SETUP), { message: 'STT provider cannot be reached: ECONNREFUSED' })
})

t.test('deepgram: the turn is transcribed from the stream; interim words while the caller speaks; usage is the audio streamed', async (t) => {
  const { stt, http, engine, events, of, waitFor } = await deepgram(t)
  await engine.start(SETUP)
  stt.transcripts.push('What time is it?')
  say(engine, 1, 0.5)
  await waitFor('user_partial')
  engine.endOfTurn()
  await waitFor('response_done')

  t.equal(stt.connections.length, 1, 'one connection')
  const [connection] = stt.connections
  t.equal(connection.headers.authorization, `Token ${stt.apiKey}`)
  t.same(Object.fromEntries(connection.url.searchParams), {
    model: 'nova-3', encoding: 'linear16', sample_rate: '16000', channels: '1', interim_results: 'true', smart_format: 'true', language: 'en'
  })
  t.equal(connection.audioSeconds, 1.5, 'the whole turn, at 16 kHz')
  t.same(connection.messages, [{ type: 'Finalize' }])
  t.equal(http.requests.transcriptions.length, 0, 'no batch request')

  t.same(of('user_text'), [{ type: 'user_text', text: 'What time is it?' }])
  const partials = of('user_partial')
  t.same(partials.map((p) => p.text), ['What', 'What time', 'What time is', 'What time is it?', 'What time is it?'], 'interim, growing, then final')
  t.same(partials.map((p) => p.final), [false, false, false, false, true])
  t.same(partials.at(-1), { type: 'user_partial', text: 'What time is it?', final: true, startMs: 0, endMs: 1300 })
  t.equal(recognised(events), 1.5, 'seconds of audio streamed')

  engine.close()
  await poll(() => connection.closed, (closed) => closed, { message: 'the stream stays open' })
  t.same(connection.messages.at(-1), { type: 'CloseStream' })
  t.equal(connection.closeCode, 1000)
})

t.test('deepgram: a Finalize left unanswered; the turn goes on once finals reach its end, or after the time-out with the interim words', async (t) => {
  await t.test('Deepgram\'s own endpoint reaches the turn\'s end', async (t) => {
    const { stt, engine, of, waitFor } = await deepgram(t)
    stt.answerFinalize = false
    await engine.start(SETUP)
    stt.transcripts.push('Hello there.')
    say(engine, 1, 0.36)
    engine.endOfTurn()
    await waitFor('response_done')
    t.same(of('user_text'), [{ type: 'user_text', text: 'Hello there.' }])
  })
  await t.test('no final at all', async (t) => {
    const { stt, engine, of, waitFor } = await deepgram(t, { VOICE_PROVIDER_TIMEOUT_MS: '300' })
    stt.answerFinalize = false
    stt.endpointingMs = 0
    await engine.start(SETUP)
    stt.transcripts.push('Hello there, how are you?')
    say(engine, 0.25, 0.5)
    engine.endOfTurn()
    await waitFor('response_done')
    t.same(of('user_text'), [{ type: 'user_text', text: 'Hello there, how' }], 'what Deepgram had heard so far')
  })
})

t.test('deepgram: a barge-in while the turn is being finalized; the caller\'s words before and after are one turn', async (t) => {
  const { stt, http, engine, of, waitFor } = await deepgram(t)
  stt.answerFinalize = false
  stt.endpointingMs = 0
  await engine.start(SETUP)
  stt.transcripts.push('I would like an appointment.')
  say(engine, 0.3, 0.5)
  engine.endOfTurn()
  await poll(() => stt.connections[0].messages.length, (n) => n === 1, { message: 'the first Finalize did not arrive' })
  say(engine, 0.2)
  engine.cancel()
  stt.answerFinalize = true
  say(engine, 0, 0.5)
  engine.endOfTurn()
  await waitFor('response_done')
  t.same(of('user_text'), [{ type: 'user_text', text: 'I would like an appointment.' }])
  t.equal(http.requests.chat.length, 1)
})

t.test('deepgram: KeepAlive while no audio flows keeps the stream open', async (t) => {
  const stt = await startDeepgramStandin(t)
  stt.idleMs = 300
  const voice = loadConfig({ STT_PROVIDER: 'deepgram', STT_STREAM_URL: stt.url, DEEPGRAM_API_KEY: stt.apiKey }).voice
  const recogniser = deepgramStt(voice, { keepAliveMs: 50 })(() => {}, silent)
  t.teardown(() => recogniser.close())
  await recogniser.start({ language: 'en' })
  const [connection] = stt.connections
  await poll(() => connection.messages.length, (n) => n >= 10, { message: 'no KeepAlive' })
  t.ok(connection.messages.every((m) => m.type === 'KeepAlive'))
  t.equal(connection.closed, false, 'open after more than idleMs without audio')
})

t.test('deepgram: the stream fails mid-call: one error event with Deepgram\'s reason', async (t) => {
  const { stt, engine, of, waitFor } = await deepgram(t)
  await engine.start(SETUP)
  say(engine, 0.5)
  stt.fail()
  const [error] = await waitFor('error')
  t.equal(error.message, 'STT provider closed the stream (1011 NET-0000 Deepgram could not process the stream)')
  t.equal(of('error').length, 1)
})

t.test('deepgram: a wrong key: the engine does not start, and says why without the key', async (t) => {
  const { engine } = await deepgram(t, { DEEPGRAM_API_KEY: 'dg-wrong-secret' })
  const refusal = await engine.start(SETUP).then(() => undefined, (err: Error) => err.message)
  t.equal(refusal, 'STT provider refused the connection: 401 Invalid credentials.')
})

t.test('deepgram: several languages: the multilingual mode; parameters in STT_STREAM_URL are kept', async (t) => {
  const stt = await startDeepgramStandin(t)
  const { engine } = await engineWith(t, { STT_PROVIDER: 'deepgram', STT_STREAM_URL: `${stt.url}?endpointing=500&keyterm=Switchboard`, DEEPGRAM_API_KEY: stt.apiKey, STT_MODEL: 'nova-2-phonecall' })
  await engine.start({ ...SETUP, sttLanguages: ['de-DE', 'en-US'] })
  const query = stt.connections[0].url.searchParams
  t.equal(query.get('language'), 'multi')
  t.equal(query.get('model'), 'nova-2-phonecall')
  t.equal(query.get('endpointing'), '500')
  t.equal(query.get('keyterm'), 'Switchboard')
})

t.test('the recogniser\'s events reach the engine only until it closes', async (t) => {
  const stt = await startDeepgramStandin(t)
  const voice = loadConfig({ STT_PROVIDER: 'deepgram', STT_STREAM_URL: stt.url, DEEPGRAM_API_KEY: stt.apiKey }).voice
  const events: SttEvent[] = []
  const recogniser = deepgramStt(voice)((event) => events.push(event), silent)
  await recogniser.start({ language: 'en' })
  recogniser.close()
  stt.fail()
  await poll(() => stt.connections[0].closed, (closed) => closed)
  t.same(events, [], 'no error after close')
  t.equal(await recogniser.endOfTurn(), '')
})
