import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { pino } from 'pino'
import t, { type Test } from 'tap'
import { loadConfig } from '../../src/config.ts'
import { FRAME_SAMPLES, resample, rms, SAMPLE_RATE } from '../../src/modules/voice/audio.ts'
import { cascadeEngine, cutSentences } from '../../src/modules/voice/engines/cascade.ts'
import type { Engine, EngineEvent, EngineSetup } from '../../src/modules/voice/engines/types.ts'
import { speechSeconds, SPEECH_RATE, startOpenAiHttpStandin, tone } from '../helpers/openai-http-standin.ts'
import { poll } from '../helpers/poll.ts'

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

async function start (t: Test, env: Record<string, string> = {}, setup: Partial<EngineSetup> = {}) {
  const standin = await startOpenAiHttpStandin(t)
  const voice = loadConfig({ STT_URL: standin.url, LLM_URL: standin.url, TTS_URL: standin.url, STT_MODEL: 'whisper-test', TTS_MODEL: 'tts-test', ...env }).voice
  const events: EngineEvent[] = []
  const engine = cascadeEngine(voice)((event) => events.push(event), pino({ level: 'silent' }))
  t.teardown(() => engine.close())
  await engine.start({ ...SETUP, ...setup })
  const of = <T extends EngineEvent['type']>(type: T, from = 0) =>
    events.slice(from).filter((e): e is Extract<EngineEvent, { type: T }> => e.type === type)
  const waitFor = async <T extends EngineEvent['type']>(type: T, count = 1, from = 0) =>
    await poll(() => of(type, from), (found) => found.length >= count, {
      message: () => `waited for ${count} ${type} events; got: ${events.map((e) => e.type).join(', ')}`
    })
  return { standin, events, engine, of, waitFor }
}

/** One second of a 300 Hz tone, as the caller's 20 ms frames. */
function say (engine: Engine, seconds = 1) {
  for (let f = 0; f < seconds * 50; f++) {
    const frame = new Int16Array(FRAME_SAMPLES)
    for (let i = 0; i < frame.length; i++) frame[i] = Math.round(6000 * Math.sin(2 * Math.PI * 300 * (f * FRAME_SAMPLES + i) / SAMPLE_RATE))
    engine.audio(frame)
  }
}

const samplesOf = (events: Array<{ pcm: Int16Array }>) => events.reduce((sum, e) => sum + e.pcm.length, 0)

t.test('a spoken turn: recognised, answered, spoken', async (t) => {
  const { standin, engine, of, waitFor } = await start(t)
  standin.transcripts.push('  What time is it?  ')
  standin.replies.push({ text: 'It is noon. Anything else?', usage: { prompt_tokens: 42, completion_tokens: 7 } })
  say(engine, 1)
  engine.endOfTurn()
  const [done] = await waitFor('response_done')

  const [stt] = standin.requests.transcriptions
  t.equal(stt.model, 'whisper-test')
  t.equal(stt.language, 'en', 'the primary subtag of the only language')
  t.equal(stt.responseFormat, 'json')
  t.equal(stt.filename, 'turn.wav')
  t.equal(stt.rate, 16_000)
  t.equal(stt.audio.length, SAMPLE_RATE, 'the whole turn')
  t.ok(stt.rms > 3000, 'the audio is the caller\'s tone, not silence')
  t.same(of('speech').filter((e) => e.recognisedSeconds !== undefined), [{ type: 'speech', recognisedSeconds: 1 }])
  t.same(of('user_text'), [{ type: 'user_text', text: 'What time is it?' }])

  const [chat] = standin.requests.chat
  t.match(chat.body, { model: 'test-model', temperature: 0.4, stream: true, stream_options: { include_usage: true } })
  t.notOk('tools' in chat.body, 'no tools: none sent')
  t.notOk('max_tokens' in chat.body)
  t.same(chat.body.messages, [{ role: 'system', content: 'You are the test agent.' }, { role: 'user', content: 'What time is it?' }])

  t.equal(of('agent_text').map((e) => e.delta).join(''), 'It is noon. Anything else?')
  t.same(standin.requests.speech.map((s) => s.body), [
    { model: 'tts-test', input: 'It is noon.', voice: 'alloy', response_format: 'pcm' },
    { model: 'tts-test', input: 'Anything else?', voice: 'alloy', response_format: 'pcm' }
  ], 'spoken sentence by sentence')
  const audio = of('audio')
  const expected = standin.requests.speech.reduce((sum, s) => sum + s.samples, 0) * SAMPLE_RATE / SPEECH_RATE
  t.equal(samplesOf(audio), expected, 'as long as the tone, at 16 kHz')
  t.ok(audio.every((e) => rms(e.pcm) > 3000), 'every audio chunk is the tone')
  // The stand-in sends odd-sized chunks: the audio still joins without a seam, sentences in order.
  const joined = new Int16Array(samplesOf(audio))
  audio.reduce((offset, e) => { joined.set(e.pcm, offset); return offset + e.pcm.length }, 0)
  const whole = standin.requests.speech.flatMap((s) => [...resample(tone(s.samples), SPEECH_RATE, SAMPLE_RATE)])
  t.ok(joined.every((sample, i) => sample === whole[i]), 'the tones resampled, in order')
  t.equal(standin.requests.speech[0].samples, Math.round(speechSeconds('It is noon.') * SPEECH_RATE))
  const synthesised = of('speech').flatMap((e) => e.synthesisedSeconds ?? [])
  t.same(synthesised, standin.requests.speech.map((s) => s.samples / SPEECH_RATE))
  t.same(of('usage'), [{ type: 'usage', model: 'test-model', input: 42, output: 7 }])
  t.same(done, { type: 'response_done', text: 'It is noon. Anything else?' })

  // The answer is in the history of the next request.
  engine.userText('Thanks.')
  await waitFor('response_done', 2)
  t.same(standin.requests.chat[1].body.messages.slice(1), [
    { role: 'user', content: 'What time is it?' },
    { role: 'assistant', content: 'It is noon. Anything else?' },
    { role: 'user', content: 'Thanks.' }
  ])
})

t.test('the first sentence is spoken while the model still writes', async (t) => {
  const { standin, engine, of, waitFor } = await start(t)
  standin.replies.push({ text: 'First things first. Then the rest of it.', hold: true })
  engine.userText('Go on.')
  await waitFor('audio')
  t.equal(standin.requests.speech[0].body.input, 'First things first.')
  t.equal(standin.requests.chat[0].ended, false, 'the chat stream has not ended yet')
  t.equal(of('response_done').length, 0)
  standin.release()
  const [done] = await waitFor('response_done')
  t.equal(done.text, 'First things first. Then the rest of it.')
  t.same(standin.requests.speech.map((s) => s.body.input), ['First things first.', 'Then the rest of it.'])
})

t.test('tool calls: asked, answered, then the answer is spoken', async (t) => {
  const tools = [{ name: 'lookup_order', description: 'Finds an order', parameters: { type: 'object', properties: { id: { type: 'string' } } } }]
  const { standin, engine, events, of, waitFor } = await start(t, {}, { tools, maxTokens: 300 })
  standin.replies.push({ text: 'Let me check.', toolCalls: [{ name: 'lookup_order', arguments: { id: 'A-1' } }] })
  standin.replies.push({ text: 'Your order ships today.' })
  engine.userText('Where is order A-1?')
  const [call] = await waitFor('tool_call')
  t.match(call, { name: 'lookup_order', arguments: '{"id":"A-1"}' })
  t.ok(events.findIndex((e) => e.type === 'audio') < events.indexOf(call), 'the text before the call is spoken first')
  t.match(standin.requests.chat[0].body, { max_tokens: 300, tools: [{ type: 'function', function: tools[0] }] })
  t.equal(standin.requests.chat.length, 1, 'the model waits for the result')

  engine.toolResult(call.id, '{"status":"shipping today"}')
  const [done] = await waitFor('response_done')
  t.equal(done.text, 'Let me check. Your order ships today.')
  t.same(standin.requests.chat[1].body.messages.slice(1), [
    { role: 'user', content: 'Where is order A-1?' },
    { role: 'assistant', content: 'Let me check.', tool_calls: [{ id: call.id, type: 'function', function: { name: 'lookup_order', arguments: '{"id":"A-1"}' } }] },
    { role: 'tool', tool_call_id: call.id, content: '{"status":"shipping today"}' }
  ])
  t.same(standin.requests.speech.map((s) => s.body.input), ['Let me check.', 'Your order ships today.'])
  t.equal(of('usage').length, 2, 'usage of each model request')
})

t.test('say() speaks exactly the text and keeps it in the history', async (t) => {
  const { standin, engine, of, waitFor } = await start(t)
  engine.say('Hello, this is Switchboard. How can I help?')
  const [done] = await waitFor('response_done')
  t.equal(done.text, 'Hello, this is Switchboard. How can I help?')
  t.same(standin.requests.speech.map((s) => s.body.input), ['Hello, this is Switchboard.', 'How can I help?'])
  t.ok(samplesOf(of('audio')) > 0)
  t.equal(standin.requests.chat.length, 0, 'no model request')
  engine.userText('Hi.')
  await waitFor('response_done', 2)
  t.same(standin.requests.chat[0].body.messages.slice(1, 2), [{ role: 'assistant', content: 'Hello, this is Switchboard. How can I help?' }])
})

t.test('cancel stops the response at once; what was said stays in the history', async (t) => {
  const { standin, engine, events, of, waitFor } = await start(t)
  standin.replies.push({ text: 'First part. Second part.', hold: true })
  engine.userText('Tell me.')
  await waitFor('audio')
  await poll(() => standin.requests.speech.length, (n) => n === 1)
  engine.cancel()
  const cancelledAt = events.length
  standin.release()
  await poll(() => standin.requests.chat[0].ended, (ended) => ended, { message: 'the held reply was not released' })

  engine.userText('Again.')
  await waitFor('response_done', 1, cancelledAt)
  const after = events.slice(cancelledAt)
  t.equal(of('response_done').length, 1, 'no response_done for the cancelled response')
  t.equal(after.filter((e) => e.type === 'agent_text').map((e) => e.delta).join(''), 'You said: Again.', 'nothing more of the old response')
  t.notOk(standin.requests.speech.some((s) => s.body.input === 'Second part.'), 'the rest was never synthesised')
  t.same(standin.requests.chat[1].body.messages.slice(1), [
    { role: 'user', content: 'Tell me.' },
    { role: 'assistant', content: 'First part.' },
    { role: 'user', content: 'Again.' }
  ])
})

t.test('close stops everything: no event after it', async (t) => {
  const { standin, engine, events, waitFor } = await start(t)
  standin.replies.push({ text: 'First part. Second part.', hold: true })
  engine.userText('Tell me.')
  await waitFor('audio')
  engine.close()
  const closedAt = events.length
  standin.release()
  await poll(() => standin.requests.chat[0].ended, (ended) => ended)
  engine.userText('Anyone there?')
  t.equal(events.length, closedAt)
  t.equal(standin.requests.chat.length, 1)
})

t.test('update: the next request has the new prompt, tools and voice; the history stays', async (t) => {
  const { standin, engine, waitFor } = await start(t)
  engine.userText('One.')
  await waitFor('response_done')
  const tools = [{ name: 'transfer', description: 'Transfers', parameters: { type: 'object' } }]
  engine.update({ ...SETUP, instructions: 'You are the billing agent.', voice: 'nova', model: 'other-model', tools })
  engine.userText('Two.')
  await waitFor('response_done', 2)
  const body = standin.requests.chat[1].body
  t.equal(body.model, 'other-model')
  t.same(body.messages[0], { role: 'system', content: 'You are the billing agent.' })
  t.same(body.messages.slice(1).map((m: any) => m.content), ['One.', 'You said: One.', 'Two.'])
  t.equal(body.tools[0].function.name, 'transfer')
  t.same(standin.requests.speech.map((s) => s.body.voice), ['alloy', 'nova'])
})

t.test('an empty transcript: user_text "" and nothing else', async (t) => {
  const { standin, engine, events, of, waitFor } = await start(t)
  standin.transcripts.push('   ')
  say(engine, 0.5)
  engine.endOfTurn()
  await waitFor('user_text')
  engine.userText('Typed.')
  await waitFor('response_done')
  t.same(of('user_text')[0], { type: 'user_text', text: '' })
  t.equal(standin.requests.chat.length, 1, 'only the typed turn reached the model')
  t.same(standin.requests.chat[0].body.messages.slice(1), [{ role: 'user', content: 'Typed.' }])
  t.notOk(events.some((e) => e.type === 'error'))
})

t.test('several recognised languages: the recogniser detects the language', async (t) => {
  const { standin, engine, waitFor } = await start(t, {}, { language: 'de-DE', sttLanguages: ['de-DE', 'en-US'] })
  say(engine, 0.2)
  engine.endOfTurn()
  await waitFor('response_done')
  t.equal(standin.requests.transcriptions[0].language, undefined)
})

t.test('a caller who never pauses: the turn keeps its last minute', async (t) => {
  const { standin, engine, waitFor } = await start(t)
  say(engine, 61)
  engine.endOfTurn()
  await waitFor('user_text')
  t.equal(standin.requests.transcriptions[0].audio.length, 60 * SAMPLE_RATE)
})

for (const [kind, provider] of [['transcriptions', 'STT'], ['chat', 'LLM'], ['speech', 'TTS']] as const) {
  t.test(`${provider} answers 500: one error event naming it`, async (t) => {
    const { standin, engine, events, of, waitFor } = await start(t)
    standin.failNext(kind, 500)
    say(engine, 0.2)
    engine.endOfTurn()
    const [error] = await waitFor('error')
    t.match(error.message, new RegExp(`^${provider} provider answered 500`))
    // The engine still answers later turns; the failed one emitted nothing more.
    engine.userText('Still there?')
    await waitFor('response_done')
    t.equal(of('error').length, 1)
    t.equal(of('response_done').length, 1)
    t.equal(events.findIndex((e) => e.type === 'response_done') > events.indexOf(error), true)
  })
}

t.test('a provider that does not answer in time: an error event', async (t) => {
  const { standin, engine, waitFor } = await start(t, { VOICE_PROVIDER_TIMEOUT_MS: '300' })
  standin.hangNext('chat')
  engine.userText('Hello?')
  const [error] = await waitFor('error')
  t.equal(error.message, 'LLM provider did not answer within 300 ms')
  t.equal(standin.requests.chat.length, 1, 'the request reached the provider')
})

t.test('an unreachable provider or a malformed stream: an error event', async (t) => {
  const closed = http.createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const port = (closed.address() as AddressInfo).port
  await new Promise((resolve) => closed.close(resolve))
  const unreachable = await start(t, { LLM_URL: `http://127.0.0.1:${port}/v1` })
  unreachable.engine.userText('Hello?')
  const [refused] = await unreachable.waitFor('error')
  t.equal(refused.message, 'LLM provider failed: ECONNREFUSED')

  const { standin, engine, waitFor } = await start(t)
  standin.replies.push({ raw: 'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\ndata: {not json\n\n' })
  standin.replies.push({ raw: 'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n' })
  engine.userText('One.')
  const [malformed] = await waitFor('error')
  t.equal(malformed.message, 'LLM provider sent a malformed stream')
  engine.userText('Two.')
  const [, cut] = await waitFor('error', 2)
  t.equal(cut.message, 'LLM provider ended its stream before the reply was finished')
})

t.test('keys are sent as Bearer tokens, only where set', async (t) => {
  const { standin, engine, events, waitFor } = await start(t, { STT_API_KEY: 'sk-stt-secret', LLM_API_KEY: 'sk-llm-secret' })
  say(engine, 0.2)
  engine.endOfTurn()
  await waitFor('response_done')
  t.equal(standin.requests.transcriptions[0].authorization, 'Bearer sk-stt-secret')
  t.equal(standin.requests.chat[0].authorization, 'Bearer sk-llm-secret')
  t.equal(standin.requests.speech[0].authorization, undefined)
  standin.failNext('chat', 401)
  engine.userText('Again.')
  const [error] = await waitFor('error')
  t.notMatch(error.message, /sk-llm-secret/)
  t.notOk(events.some((e) => JSON.stringify(e).includes('secret')))
})

t.test('sentences are cut where they end, long runs near 200 characters', async (t) => {
  t.same(cutSentences('Hi there. How are'), { sentences: ['Hi there. '], rest: 'How are' })
  t.same(cutSentences('Really?! Yes… ok\nnext'), { sentences: ['Really?! ', 'Yes… ', 'ok\n'], rest: 'next' })
  t.same(cutSentences('It costs 3.50 dollars.'), { sentences: [], rest: 'It costs 3.50 dollars.' })
  const long = 'word, '.repeat(30) + 'word word word word word word word'
  const { sentences, rest } = cutSentences(long)
  t.equal(sentences.length, 1)
  t.ok(sentences[0].length <= 200 && sentences[0].length > 100 && sentences[0].endsWith(','), sentences[0])
  t.equal(sentences[0] + rest, long)
})

t.test('a barge-in while a turn is being recognised: the caller only paused, and the next turn holds all they said', async (t) => {
  const { standin, engine, waitFor } = await start(t)
  standin.hangNext('transcriptions')
  say(engine, 1)
  engine.endOfTurn()
  await poll(() => standin.requests.transcriptions.length, (n) => n === 1, { message: 'the first half is being recognised' })
  say(engine, 0.5)
  engine.cancel()
  engine.endOfTurn()
  await waitFor('response_done')
  const [, whole] = standin.requests.transcriptions
  t.equal(whole.audio.length, 1.5 * SAMPLE_RATE, 'both halves, in one turn')
})

t.test('an early reply: answered on the stable words before the turn ends, held, and released when the turn has the same words', async (t) => {
  const { standin, engine, events, of, waitFor } = await start(t)
  standin.replies.push({ text: 'It is noon.' })
  standin.transcripts.push('what time is it')
  engine.prepare!('What time is it?')
  await poll(() => standin.requests.speech.length, (n) => n >= 1, { message: 'the held answer is even synthesised' })
  t.same(events.filter((e) => e.type !== 'usage' && e.type !== 'speech'), [], 'nothing of it comes out before the turn ends')
  say(engine, 1)
  engine.endOfTurn()
  const [done] = await waitFor('response_done')
  t.equal(done.text, 'It is noon.')
  t.equal(of('user_text')[0].text, 'what time is it', 'the turn\'s words first')
  t.ok(events.findIndex((e) => e.type === 'user_text') < events.findIndex((e) => e.type === 'audio'))
  t.ok(samplesOf(of('audio')) > 0, 'the held audio is released')
  t.equal(standin.requests.chat.length, 1, 'one model request: the early one')
  t.match(of('stages')[0], { transcriptionMs: Number })
})

t.test('an early reply to words the caller went on from is thrown away: the turn is answered anew, the model never saw the old words', async (t) => {
  const { standin, engine, events, of, waitFor } = await start(t)
  standin.replies.push({ text: 'Early answer.' }, { text: 'It is noon in Paris.' })
  standin.transcripts.push('What time is it in Paris?')
  engine.prepare!('What time is it?')
  await poll(() => standin.requests.chat.length, (n) => n >= 1)
  say(engine, 1)
  engine.endOfTurn()
  const [done] = await waitFor('response_done')
  t.equal(done.text, 'It is noon in Paris.')
  t.notOk(events.some((e) => e.type === 'agent_text' && /Early/.test(e.delta)), 'nothing of the early answer came out')
  t.equal(standin.requests.chat.length, 2)
  const messages = standin.requests.chat[1].body.messages as Array<{ role: string, content: string }>
  t.same(messages.filter((m) => m.role !== 'system'), [{ role: 'user', content: 'What time is it in Paris?' }], 'the history holds the turn, not the early words nor their answer')
  t.equal(of('user_text').length, 1)
})

t.test('forget: the caller\'s sound since the last turn (a backchannel over the agent) is no part of the next turn', async (t) => {
  const { standin, engine, waitFor } = await start(t)
  standin.transcripts.push('Hello.')
  standin.replies.push({ text: 'Hi.' })
  say(engine, 2)
  engine.forget!()
  say(engine, 1)
  engine.endOfTurn()
  await waitFor('response_done')
  const seconds = standin.requests.transcriptions[0].audio.length / standin.requests.transcriptions[0].rate
  t.ok(Math.abs(seconds - 1) < 0.05, `only the second of speech after it was recognised (${seconds} s)`)
})
