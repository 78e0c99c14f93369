import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import path from 'node:path'
import type { FastifyInstance } from 'fastify'
import type { Config, VoiceConfig } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { HttpError } from '../../http/errors.ts'
import { findVoice, type listVoices } from '../account/queries.ts'
import { encodeWav } from '../voice/audio.ts'
import { postToProvider, ProviderError } from '../voice/providers.ts'
import { dataTable } from './components.ts'
import { html, type SafeHtml } from './html.ts'
import { idParams, NOT_FOUND_TEXT, page } from './reply.ts'
import { viewScope } from './scope.ts'

// The agent page's voice picker (docs/console.md, "Voices"): the catalogue's voices that this installation's engines
// can speak, each with a Play button whose short preview is synthesised once through the text-to-speech provider
// and kept as a file; and, in plain words, what each engine needs and whether the installation has it.

type VoiceRow = Awaited<ReturnType<typeof listVoices>>[number]

/** A catalogue voice as the picker shows it: `unspoken` says why no configured engine speaks it. */
export type PickerVoice = VoiceRow & { unspoken?: string }

/**
 * The voice providers each engine speaks. Both hand the voice's provider id to an OpenAI wire format (the Realtime
 * API's session voice, the speech API's `voice`), which takes OpenAI's voice names; this server has no client for
 * ElevenLabs' or Azure's own APIs, so their voices are spoken by neither.
 */
const SPOKEN = new Set(['openai'])

const PROVIDER_NAMES: Record<string, string> = { openai: 'OpenAI', elevenlabs: 'ElevenLabs', azure: 'Azure' }
const providerName = (provider: string) => PROVIDER_NAMES[provider] ?? provider

/** The engines whose providers are set up: the realtime model, or all three of the pipeline's. */
function configuredEngines (voice: VoiceConfig): { realtime: boolean, pipeline: boolean } {
  return { realtime: voice.realtime.configured, pipeline: voice.stt.configured && voice.llm.configured && voice.tts.configured }
}

/**
 * The catalogue with what no configured engine speaks marked. With no engine set up (calls are typed) nothing is
 * spoken yet, so every voice stays a choice for later.
 */
function pickerVoices (voice: VoiceConfig, catalogue: VoiceRow[]): PickerVoice[] {
  const engines = configuredEngines(voice)
  if (!engines.realtime && !engines.pipeline) return catalogue
  return catalogue.map((row) => SPOKEN.has(row.provider)
    ? row
    : { ...row, unspoken: `This installation's engines do not speak ${providerName(row.provider)} voices.` })
}

/** A preview can be synthesised: the text-to-speech provider is set up. */
const canPreview = (voice: VoiceConfig) => voice.tts.configured

/** What the picker offers, loaded once per page. */
export interface VoiceChoices {
  voices: PickerVoice[]
  /** The Play buttons are offered (canPreview). */
  previews: boolean
  /** Some engine is set up (configuredEngines): otherwise calls are typed. */
  speaking: boolean
}

export function voiceChoices (voice: VoiceConfig, catalogue: VoiceRow[]): VoiceChoices {
  const engines = configuredEngines(voice)
  return { voices: pickerVoices(voice, catalogue), previews: canPreview(voice), speaking: engines.realtime || engines.pipeline }
}

export interface VoicePickerData extends VoiceChoices {
  /** The form's voice id (either case). */
  chosen: string
  problem: string | undefined
}

/**
 * The voice field: a radio per voice this installation speaks (and the chosen one, even when it does not, with
 * why), a Play button each, and the others listed apart with the reason. The chosen radio has the id `voice_id`,
 * which error summaries link to.
 */
export function voicePicker ({ voices, chosen, problem, previews, speaking }: VoicePickerData): SafeHtml {
  const chosenId = chosen.toLowerCase()
  const offered = voices.filter((voice) => voice.unspoken === undefined || voice.id === chosenId)
  const others = voices.filter((voice) => !offered.includes(voice))
  const firstId = offered.find((voice) => voice.id === chosenId)?.id ?? offered[0]?.id
  const describedBy = ['voice_id-hint', problem !== undefined && 'voice_id-error'].filter(Boolean).join(' ')
  return html`<fieldset class="voice-picker" aria-describedby="${describedBy}">
  <legend>Voice</legend>
  <p id="voice_id-hint" class="hint">${!speaking
    ? 'No speech engine is set up yet: calls are typed, and the voice is used once one is (“Speech engines” on the agent’s page says what each needs).'
    : previews ? 'Play a voice to hear a short sample.' : 'Samples need a text-to-speech provider (“Speech engines” on the agent’s page says what each engine needs).'}</p>
  ${problem !== undefined && html`<p id="voice_id-error" class="field-error">${problem}</p>`}
  <ul class="voices">
  ${offered.map((voice) => html`<li>
    <input type="radio" name="voice_id" id="${voice.id === firstId ? 'voice_id' : `voice-${voice.id}`}" value="${voice.id}"${voice.id === chosenId && html` checked`}${problem !== undefined && html` aria-invalid="true"`}>
    <label for="${voice.id === firstId ? 'voice_id' : `voice-${voice.id}`}"><strong>${voice.name}</strong> <span class="hint">${providerName(voice.provider)} · ${voice.gender} · ${voice.accent} · ${voice.languages.join(', ')}</span>${voice.unspoken !== undefined && html` <span class="field-error">${voice.unspoken}</span>`}</label>
    ${previews && voice.unspoken === undefined && html`<button type="button" class="play" data-preview="/voices/${voice.id}/preview.wav" data-voice="${voice.name}" aria-label="Play ${voice.name}">Play</button>`}
  </li>`)}
  </ul>
  ${others.length > 0 && html`<details class="unspoken"><summary>${others.length} voice${others.length === 1 ? '' : 's'} this installation cannot speak</summary>
  <ul>${[...Map.groupBy(others, (voice) => voice.provider)].map(([provider, group]) => html`<li><strong>${providerName(provider)}</strong>: ${group.map((voice) => voice.name).join(', ')}. ${group[0].unspoken}</li>`)}</ul>
  </details>`}
  ${previews && html`<audio id="voice-preview" preload="none"></audio><p id="voice-preview-status" class="hint" role="status"></p>
  <script src="/console/voice-picker.js" defer></script>`}
</fieldset>`
}

interface Need { engine: string, part: string, settings: string, ready: boolean }

/** What each engine needs, in words, and whether this installation has it (which settings are set, never their values). */
export function engineNeeds (voice: VoiceConfig): SafeHtml {
  const engines = configuredEngines(voice)
  const realtime = 'Speech-to-speech (realtime)'
  const pipeline = 'Speech-to-text, model, text-to-speech (pipeline)'
  const recogniser = voice.stt.provider === 'deepgram' ? 'DEEPGRAM_API_KEY, or STT_STREAM_URL for a compatible server' : 'STT_API_KEY or OPENAI_API_KEY, or STT_URL for a compatible server'
  const needs: Need[] = [
    { engine: realtime, part: 'A realtime speech model (OpenAI\'s Realtime API or a compatible server)', settings: 'REALTIME_API_KEY or OPENAI_API_KEY, or REALTIME_URL for a compatible server', ready: voice.realtime.configured },
    { engine: pipeline, part: 'Speech to text: hears the caller', settings: recogniser, ready: voice.stt.configured },
    { engine: pipeline, part: 'A language model: writes the answers', settings: 'LLM_API_KEY or OPENAI_API_KEY, or LLM_URL for a compatible server', ready: voice.llm.configured },
    { engine: pipeline, part: 'Text to speech: speaks them (and the voice samples above)', settings: 'TTS_API_KEY or OPENAI_API_KEY, or TTS_URL for a compatible server', ready: voice.tts.configured }
  ]
  const fallback = { realtime, cascade: pipeline, simulator: 'typed turns (no speech)' }[voice.engine]
  const usable = voice.engine === 'simulator' || (voice.engine === 'realtime' ? engines.realtime : engines.pipeline)
  return html`<section aria-labelledby="engines-title" id="engines">
<h2 id="engines-title">Speech engines</h2>
<p>The agent hears and speaks through one of two engines. This installation's default is <strong>${fallback}</strong>${usable
  ? '.'
  : html`, which is not fully set up: until it is, calls with it are typed turns (to try the agent's words, not its voice).`}
Both speak OpenAI's voices. The settings below belong to whoever runs this server (its environment); their values are never shown here.</p>
${dataTable({
  caption: 'What each engine needs',
  columns: [
    // An engine is named on its first row only: the pipeline's three parts read as one group.
    { header: 'Engine', cell: (need: Need) => needs.find((first) => first.engine === need.engine) === need ? need.engine : '' },
    { header: 'Needs', cell: (need: Need) => need.part },
    { header: 'Settings', cell: (need: Need) => need.settings },
    { header: 'This installation', cell: (need: Need) => need.ready ? html`<span class="ready">Set up</span>` : html`<span class="missing">Missing</span>` }
  ],
  rows: needs,
  empty: ''
})}
</section>`
}

// Plays a voice's sample when its Play button is pressed.
const SCRIPT = readFileSync(new URL('./static/voice-picker.js', import.meta.url))

// The preview: one sentence, synthesised as the cascade does (raw 24 kHz PCM16, which OpenAI's speech API and
// compatible servers such as Kokoro give) and wrapped as WAV.
const PREVIEW_RATE = 24_000
/** Ten seconds of 24 kHz PCM16: a provider answering more for one sentence is refused. */
const MAX_PREVIEW_BYTES = 10 * PREVIEW_RATE * 2
const previewSentence = (name: string) => `Hello, I'm ${name}. How can I help you today?`

/**
 * GET /voices/:id/preview.wav. Kept as a file under DATA_DIR (voice-previews/) rather than a table: it is derived
 * data that can be made again at any time, so it has no place in backups, and a process that lacks the file makes
 * it once. The file's name hashes what the sound depends on (provider address, model, voice, sentence), so a change
 * of TTS settings makes new samples. Concurrent first plays in a process share one synthesis.
 */
export async function consoleVoicePreviewRoutes (app: FastifyInstance, { db, config }: { db: DB, config: Config }): Promise<void> {
  app.get('/console/voice-picker.js', page(), async (_request, reply) => {
    return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(SCRIPT)
  })

  const { tts, providerTimeoutMs } = config.voice
  const directory = path.join(config.dataDir, 'voice-previews')
  const pending = new Map<string, Promise<Buffer>>()

  async function synthesise (file: string, voice: string, input: string): Promise<Buffer> {
    const body = JSON.stringify({ model: tts.model, input, voice, response_format: 'pcm' })
    const chunks: Buffer[] = []
    let bytes = 0
    for await (const chunk of postToProvider('TTS', tts, '/audio/speech', { type: 'application/json', body }, { signal: new AbortController().signal, timeoutMs: providerTimeoutMs })) {
      bytes += chunk.byteLength
      if (bytes > MAX_PREVIEW_BYTES) throw new ProviderError('TTS provider answered more than ten seconds of speech for one sentence')
      chunks.push(Buffer.from(chunk))
    }
    const pcm = Buffer.concat(chunks)
    const wav = encodeWav(new Int16Array(pcm.buffer, pcm.byteOffset, Math.floor(pcm.byteLength / 2)), PREVIEW_RATE)
    // Written aside, then renamed: another process reading it never sees half a file. A sample that cannot be kept
    // (a full or read-only disk) is still played; the next play makes it again.
    const partial = `${file}.${process.pid}.partial`
    await mkdir(directory, { recursive: true })
      .then(async () => { await writeFile(partial, wav); await rename(partial, file) })
      .catch((error: unknown) => { app.log.warn({ err: error, directory }, 'a voice sample could not be kept') })
    return wav
  }

  async function preview (voice: { name: string, provider_voice_id: string }): Promise<Buffer> {
    const input = previewSentence(voice.name)
    const key = createHash('sha256').update([tts.url, tts.model, voice.provider_voice_id, input].join('\n')).digest('hex')
    const file = path.join(directory, `${key}.wav`)
    const kept = await readFile(file).catch(() => undefined)
    if (kept !== undefined) return kept
    let made = pending.get(key)
    if (made === undefined) {
      made = synthesise(file, voice.provider_voice_id, input).finally(() => pending.delete(key))
      pending.set(key, made)
    }
    return await made
  }

  app.get<{ Params: { id: string } }>('/voices/:id/preview.wav', page({ params: idParams('id') }), async (request, reply) => {
    // Signed in only: a sample costs a provider request. Voices are the installation's, the same for every account.
    if (viewScope(request, reply) === undefined) return reply
    const voice = await findVoice(db, request.params.id)
    if (voice === undefined) throw new HttpError(404, 'not_found', NOT_FOUND_TEXT)
    // Answers without a page: the Play button's script shows the sentence.
    const refuse = (status: number, message: string) => reply.code(status).type('text/plain; charset=utf-8').header('cache-control', 'no-store').send(message)
    if (!canPreview(config.voice)) return refuse(503, 'No text-to-speech provider is set up (TTS_API_KEY, OPENAI_API_KEY or TTS_URL), so voices cannot be played.')
    if (!SPOKEN.has(voice.provider)) return refuse(409, `This installation's text-to-speech does not speak ${providerName(voice.provider)} voices.`)
    try {
      const wav = await preview(voice)
      return reply.type('audio/wav').header('cache-control', 'private, max-age=86400').send(wav)
    } catch (error) {
      if (!(error instanceof ProviderError)) throw error
      request.log.warn({ err: error }, 'voice preview failed')
      return refuse(502, 'The text-to-speech provider did not give the sample: try again later.')
    }
  })
}
