import { readdir } from 'node:fs/promises'
import path from 'node:path'
import t, { type Test } from 'tap'
import { decodeWav } from '../../src/modules/voice/audio.ts'
import { setup, type TestContext } from '../helpers/app.ts'
import { ConsoleClient, createConsoleUser, PASSWORD } from '../helpers/console-client.ts'
import { SPEECH_RATE, startOpenAiHttpStandin } from '../helpers/openai-http-standin.ts'

// The agent page's voice picker (point 6 of issue 32): only voices the configured engines speak are offered, each
// plays a sample synthesised once through the text-to-speech provider and then kept; what each engine needs in words.

const ALLOY = '65a0f0000000000000000001'
const ECHO = '65a0f0000000000000000004'
const JENNY = '65a0f000000000000000000b' // Azure: no engine of this server speaks it
const FORM = { agent_name: 'Front desk', begin_message: 'Hello.', general_prompt: 'You answer.', language: 'en-US', voice_id: ECHO, webhook_url: '', status: 'active' }

async function signedIn (ctx: TestContext) {
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  return browser
}

/** The installation with the pipeline's three providers on the OpenAI-compatible stand-in, samples kept in a test folder. */
async function withPipeline (t: Test) {
  const http = await startOpenAiHttpStandin(t)
  const dataDir = t.testdir()
  const ctx = await setup(t, { VOICE_ENGINE: 'cascade', STT_URL: http.url, LLM_URL: http.url, TTS_URL: http.url, TTS_MODEL: 'tts-test', DATA_DIR: dataDir })
  return { http, dataDir, ctx, browser: await signedIn(ctx) }
}

const radios = (body: string) => [...body.matchAll(/<input type="radio" name="voice_id" id="[^"]+" value="([0-9a-f]{24})"/g)].map((match) => match[1])

t.test('only the voices the configured engines speak are offered, each with Play; the others listed apart with why', async (t) => {
  const { browser } = await withPipeline(t)
  const form = await browser.get('/agents/new')
  t.equal(form.statusCode, 200)
  const offered = radios(form.body)
  t.equal(offered.length, 6, 'the six OpenAI voices')
  t.ok(offered.includes(ALLOY) && !offered.includes(JENNY), 'no Azure voice to choose')
  t.match(form.body, '<button type="button" class="play" data-preview="/voices/65a0f0000000000000000001/preview.wav" data-voice="Alloy" aria-label="Play Alloy">Play</button>')
  t.match(form.body, /<summary>19 voices this installation cannot speak<\/summary>/)
  t.match(form.body, /<li><strong>Azure<\/strong>: Conrad, Denise, [^<]*Jenny[^<]*\. This installation&#39;s engines do not speak Azure voices\.<\/li>/)
  t.match(form.body, '<script src="/console/voice-picker.js" defer></script>')

  // Chosen through the picker, the voice is saved and shown chosen on the agent's page.
  const created = await browser.submit('/agents/new', '/agents', FORM)
  t.equal(created.statusCode, 303)
  const page = await browser.get(String(created.headers.location))
  t.match(page.body, `value="${ECHO}" checked>`)

  // What each engine needs, in words: the pipeline is set up here, the realtime model is not; no setting's value shown.
  t.match(page.body, /<h2 id="engines-title">Speech engines<\/h2>/)
  t.match(page.body, 'This installation\'s default is <strong>Speech-to-text, model, text-to-speech (pipeline)</strong>.')
  t.match(page.body, /A realtime speech model[^<]*<\/td><td>[^<]*<\/td><td><span class="missing">Missing<\/span>/)
  t.match(page.body, /Text to speech: speaks them[^<]*<\/td><td>[^<]*<\/td><td><span class="ready">Set up<\/span>/)
  t.notMatch(page.body, '127.0.0.1', 'the providers\' addresses are not shown')

  const script = await browser.get('/console/voice-picker.js')
  t.equal(script.statusCode, 200)
  t.match(script.headers['content-type'], 'text/javascript')
})

t.test('an agent whose voice no engine speaks keeps it chosen, with why', async (t) => {
  const { browser } = await withPipeline(t)
  const created = await browser.submit('/agents/new', '/agents', { ...FORM, voice_id: JENNY })
  t.equal(created.statusCode, 303, 'the API accepts every catalogue voice, so the console does too')
  const page = await browser.get(String(created.headers.location))
  t.match(page.body, `id="voice_id" value="${JENNY}" checked>`)
  t.match(page.body, /<strong>Jenny<\/strong> <span class="hint">Azure · female · American · en-US<\/span> <span class="field-error">This installation&#39;s engines do not speak Azure voices\.<\/span>/)
  t.match(page.body, '<summary>18 voices this installation cannot speak</summary>')
})

t.test('a sample is synthesised once, then kept: two plays and ten at once, one request to the provider', async (t) => {
  const { http, dataDir, browser } = await withPipeline(t)
  const first = await browser.get(`/voices/${ALLOY}/preview.wav`)
  t.equal(first.statusCode, 200)
  t.equal(first.headers['content-type'], 'audio/wav')
  t.equal(first.headers['cache-control'], 'private, max-age=86400')
  const { rate, pcm } = decodeWav(first.rawPayload)
  t.equal(rate, SPEECH_RATE)
  t.ok(pcm.length > 0, 'it holds speech')
  t.equal(http.requests.speech.length, 1)
  t.match(http.requests.speech[0].body, { model: 'tts-test', voice: 'alloy', response_format: 'pcm', input: 'Hello, I\'m Alloy. How can I help you today?' })

  const second = await browser.get(`/voices/${ALLOY.toUpperCase()}/preview.wav`)
  t.equal(second.statusCode, 200)
  t.same(second.rawPayload, first.rawPayload, 'the same sample')
  t.equal(http.requests.speech.length, 1, 'the second play did not call the provider')
  t.same(await readdir(path.join(dataDir, 'voice-previews')), [(await readdir(path.join(dataDir, 'voice-previews')))[0]], 'one file kept')

  const many = await Promise.all(Array.from({ length: 10 }, async () => await browser.get(`/voices/${ECHO}/preview.wav`)))
  t.same(many.map((res) => res.statusCode), Array(10).fill(200))
  t.equal(http.requests.speech.length, 2, 'ten plays at once of a new voice: one synthesis')
  t.equal((await readdir(path.join(dataDir, 'voice-previews'))).filter((name) => name.endsWith('.wav')).length, 2)
})

t.test('refusals: an unknown voice, a voice the provider does not speak, a failing provider, no sign-in', async (t) => {
  const { http, browser, ctx } = await withPipeline(t)
  t.equal((await browser.get('/voices/65a0f00000000000000000ff/preview.wav')).statusCode, 404, 'no such voice')
  t.equal((await browser.get('/voices/nope/preview.wav')).statusCode, 404, 'not an id')

  const azure = await browser.get(`/voices/${JENNY}/preview.wav`)
  t.equal(azure.statusCode, 409)
  t.equal(azure.body, 'This installation\'s text-to-speech does not speak Azure voices.')

  http.failNext('speech', 500)
  const failed = await browser.get(`/voices/${ALLOY}/preview.wav`)
  t.equal(failed.statusCode, 502)
  t.equal(failed.body, 'The text-to-speech provider did not give the sample: try again later.')
  t.equal(failed.headers['cache-control'], 'no-store')
  t.equal((await browser.get(`/voices/${ALLOY}/preview.wav`)).statusCode, 200, 'a failure is not kept')

  const stranger = await ctx.app.inject({ method: 'GET', url: `/voices/${ALLOY}/preview.wav` })
  t.not(stranger.statusCode, 200, 'signed out: no sample')
  t.notMatch(String(stranger.headers['content-type']), /^audio\//)
})

t.test('no speech provider: every voice stays a choice, no Play, and a sample is refused in words', async (t) => {
  const ctx = await setup(t, { DATA_DIR: t.testdir() })
  const browser = await signedIn(ctx)
  const form = await browser.get('/agents/new')
  t.equal(radios(form.body).length, 25, 'the whole catalogue')
  t.notMatch(form.body, 'class="play"')
  t.match(form.body, 'No speech engine is set up yet')
  const refused = await browser.get(`/voices/${ALLOY}/preview.wav`)
  t.equal(refused.statusCode, 503)
  t.match(refused.body, 'No text-to-speech provider is set up')
})

t.test('a sample that cannot be kept (DATA_DIR not writable) is still played, and made again next time', async (t) => {
  const http = await startOpenAiHttpStandin(t)
  const dataDir = t.testdir({ 'voice-previews': 'a file where the folder should be' })
  const ctx = await setup(t, { VOICE_ENGINE: 'cascade', STT_URL: http.url, LLM_URL: http.url, TTS_URL: http.url, DATA_DIR: dataDir })
  const browser = await signedIn(ctx)
  t.equal((await browser.get(`/voices/${ALLOY}/preview.wav`)).statusCode, 200)
  t.equal((await browser.get(`/voices/${ALLOY}/preview.wav`)).statusCode, 200)
  t.equal(http.requests.speech.length, 2, 'not kept, so made for each play')
})
