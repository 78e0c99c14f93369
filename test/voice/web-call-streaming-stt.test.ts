import { Writable } from 'node:stream'
import { pino } from 'pino'
import t from 'tap'
import type { Test } from 'tap'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { startDeepgramStandin } from '../helpers/deepgram-standin.ts'
import { startOpenAiHttpStandin, type OpenAiHttpStandin } from '../helpers/openai-http-standin.ts'
import { startOpenAiTranscriptionStandin } from '../helpers/openai-transcription-standin.ts'
import { poll } from '../helpers/poll.ts'
import { finishedCall, openWebCall, say, type WebCallClient } from '../helpers/voice-client.ts'

// Spoken web calls on the cascade engine whose recogniser streams the caller's audio for the whole call
// (STT_PROVIDER openai-realtime and deepgram), through the browser's stream, against stand-ins of each wire
// protocol on loopback. The batch recogniser: web-call-spoken.test.ts.

/** One streaming recogniser's stand-in, seen the same way for both. */
interface Recogniser {
  env: Record<string, string>
  transcripts: string[]
  /** Connections made, and open now. */
  connections: () => number
  open: () => number
  /** Seconds of caller audio it received. */
  audioSeconds: () => number
  /** Fails every open connection, as an outage would. */
  fail: () => void
}

const RECOGNISERS: Record<string, (t: Test, key?: string) => Promise<Recogniser>> = {
  'openai-realtime': async (t, key) => {
    const stt = await startOpenAiTranscriptionStandin(t)
    return {
      env: { STT_PROVIDER: 'openai-realtime', STT_STREAM_URL: stt.url, STT_API_KEY: key ?? stt.apiKey },
      transcripts: stt.transcripts,
      connections: () => stt.connections.length,
      open: () => stt.openConnections(),
      audioSeconds: () => stt.audioSeconds(),
      fail: () => stt.drop()
    }
  },
  deepgram: async (t, key) => {
    const stt = await startDeepgramStandin(t)
    return {
      env: { STT_PROVIDER: 'deepgram', STT_STREAM_URL: stt.url, DEEPGRAM_API_KEY: key ?? stt.apiKey },
      transcripts: stt.transcripts,
      connections: () => stt.connections.length,
      open: () => stt.openConnections(),
      audioSeconds: () => stt.connections.reduce((sum, c) => sum + c.audioSeconds, 0),
      fail: () => stt.fail()
    }
  }
}

type Ctx = TestContext & { url: string, http: OpenAiHttpStandin, stt: Recogniser, lines: string[] }

async function listen (t: Test, provider: string, key?: string): Promise<Ctx> {
  const http = await startOpenAiHttpStandin(t)
  const stt = await RECOGNISERS[provider](t, key)
  const lines: string[] = []
  const logger = pino({ level: 'info' }, new Writable({ write (chunk, _encoding, done) { lines.push(String(chunk)); done() } }))
  const ctx = await setup(t, {
    VOICE_ENGINE: 'cascade',
    LLM_URL: http.url,
    TTS_URL: http.url,
    ...stt.env
  }, { workers: true, logger })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  return { ...ctx, url, http, stt, lines }
}

async function start (ctx: Ctx, account: Account): Promise<{ callId: string, client: WebCallClient }> {
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hi {{name}}!', general_prompt: 'You are the clinic\'s receptionist.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: llm._id } })).json()
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id, dynamic_context: { name: 'Ada' } } })).json()
  return { callId: call._id, client: await openWebCall(ctx.url, call.access_token) }
}

for (const provider of Object.keys(RECOGNISERS)) {
  t.test(`${provider}: the caller's turns are transcribed from one stream for the whole call; partial words reach the browser; the stream closes with the call`, async (t) => {
    const ctx = await listen(t, provider)
    const account = await createAccount(ctx.db)
    ctx.stt.transcripts.push('I would like an appointment on Tuesday.', 'Thank you.')
    const { callId, client } = await start(ctx, account)
    t.match(await client.waitFor('ready'), { mode: 'voice', engine: 'cascade' })
    t.match(await client.waitFor('transcript', (e) => e.speaker === 'agent'), { content: 'Hi Ada!' })

    for (const [i, words] of [[0, 'I would like an appointment on Tuesday.'], [1, 'Thank you.']] as const) {
      const from = client.events.length
      await say(client)
      const heard = await client.waitFor('transcript', (e) => e.speaker === 'user', from)
      t.equal(heard.content, words, `turn ${i + 1} from the stream`)
      const partials = client.events.slice(from).filter((e) => e.type === 'transcript_partial')
      t.ok(partials.length > 0, 'partial words came first')
      t.ok(partials.every((e) => e.at <= heard.at && e.speaker === 'user' && typeof e.stable === 'boolean'))
      t.match(partials.at(-1), { content: words, stable: true, timestamp: heard.timestamp })
      await client.waitFor('transcript', (e) => e.speaker === 'agent' && e.content === `You said: ${words.replace(/\.$/, '')}.`, from)
    }
    t.equal(ctx.http.requests.transcriptions.length, 0, 'no batch request')
    t.equal(ctx.stt.connections(), 1, 'one connection for the whole call')

    client.hangup()
    await client.closed
    await poll(() => ctx.stt.open(), (n) => n === 0, { message: 'the recogniser\'s connection stays open after the call' })
    const done = await finishedCall(ctx.app, account.headers, callId)
    t.match(done, { call_status: 'success', disconnection_reason: 'user_hangup' })
    t.same(done.transcription.filter((i: { speaker: string }) => i.speaker === 'user').map((i: { content: string }) => i.content), ['I would like an appointment on Tuesday.', 'Thank you.'])
    // Usage is reported at each turn and each second streamed: at most the last second before the hang-up is not.
    const streamed = ctx.stt.audioSeconds()
    t.ok(streamed >= 2.5, `the caller's audio was streamed (${streamed} s)`)
    t.ok(done.speech_seconds.recognised <= streamed + 1e-9 && done.speech_seconds.recognised > streamed - 1,
      `seconds recognised: the audio streamed (${done.speech_seconds.recognised} of ${streamed} s)`)
  })

  t.test(`${provider}: the recogniser fails mid-call: the call ends runtime_error`, async (t) => {
    const ctx = await listen(t, provider)
    const account = await createAccount(ctx.db)
    const { callId, client } = await start(ctx, account)
    await client.waitFor('transcript', (e) => e.speaker === 'agent')
    await poll(() => ctx.stt.open(), (n) => n === 1)
    ctx.stt.fail()
    t.match(await client.waitFor('ended'), { reason: 'runtime_error' })
    t.match(await finishedCall(ctx.app, account.headers, callId), { disconnection_reason: 'runtime_error' })
    t.ok(ctx.lines.some((line) => /a voice provider failed; the call ends/.test(line) && /STT provider closed/.test(line)), 'the log says which provider')
  })

  t.test(`${provider}: a wrong key: the call ends runtime_error at once, and the log says why`, async (t) => {
    const ctx = await listen(t, provider, 'wrong-secret-key')
    const account = await createAccount(ctx.db)
    const { callId, client } = await start(ctx, account)
    t.match(await client.waitFor('ended'), { reason: 'runtime_error' })
    t.notOk(client.events.some((e) => e.type === 'ready'), 'the call never became ready')
    t.match(await finishedCall(ctx.app, account.headers, callId), { call_status: 'failed', disconnection_reason: 'runtime_error' })
    const refusal = ctx.lines.find((line) => /the voice session could not start/.test(line))
    t.match(refusal, provider === 'deepgram' ? /STT provider refused the connection: 401 Invalid credentials\./ : /STT provider error: Incorrect API key provided/)
    t.notMatch(refusal, /wrong-secret-key/)
  })
}
