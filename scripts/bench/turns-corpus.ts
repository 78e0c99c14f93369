// The corpus of `npm run bench:turns` (test/fixtures/turns/, made by scripts/turns-corpus.ts): its shape, and the
// caller's audio of a case mixed from its clips, events and background noise.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { decodeWav, FRAME_SAMPLES, SAMPLE_RATE } from '../../src/modules/voice/audio.ts'

export const CORPUS_DIR = path.resolve(import.meta.dirname, '../../test/fixtures/turns')

/** The active RMS of every speech clip (-20 dBFS); beds are stored at the same RMS, i.e. at 0 dB SNR. */
export const SPEECH_LEVEL = 3277

export interface Clip { file: string, text: string, voice: string, speed: number, language: string, ms: number }
export interface Noise { file: string, kind: 'bed' | 'event', description: string, ms: number }

interface CaseBase {
  id: string
  /** The agent's language (en-US or de-DE) and the caller's. */
  language: 'en' | 'de'
  /** pause, dictation, finished, backchannel, noise, barge-in, control; noisy when there is background noise. */
  tags: string[]
  /** Background noise from the first frame to the last, at `snr_db` under the speech. */
  noise?: { bed: string, snr_db: number }
}

/** The caller speaks while the agent is quiet: clips at known times, with pauses between them. */
export interface TurnCase extends CaseBase {
  kind: 'turn'
  parts: Array<{ clip: string, at_ms: number }>
  truth: {
    speech_start_ms: number
    /** The true end of speech: an answer should start right after it, and never before. */
    speech_end_ms: number
    /** The pauses inside the turn: where each starts and how long it lasts. */
    pauses: Array<{ at_ms: number, ms: number }>
  }
}

/** A sound while the agent talks (its begin message), `after_agent_ms` after its first frame reached the caller. */
export interface TalkCase extends CaseBase {
  kind: 'talk'
  /** A speech clip, or a noise at `gain_db` (its first `ms`, or all of it); none: the control, silence. */
  event: ({ clip: string } | { noise: string, gain_db: number, ms?: number }) & { after_agent_ms: number } | undefined
  /** barge_in: the agent must stop (a real interruption); otherwise it must go on. */
  truth: { barge_in: boolean }
}

export type Case = TurnCase | TalkCase

export interface Corpus {
  generator: string
  sample_rate: number
  speech_level: number
  clips: Record<string, Clip>
  noises: Record<string, Noise>
  cases: Case[]
}

const samplesOf = (ms: number) => Math.round(ms * SAMPLE_RATE / 1000)

export interface LoadedCorpus {
  corpus: Corpus
  audio: (file: string) => Int16Array
}

export function loadCorpus (): LoadedCorpus {
  const corpus = JSON.parse(readFileSync(path.join(CORPUS_DIR, 'corpus.json'), 'utf8')) as Corpus
  const files = new Map<string, Int16Array>()
  return {
    corpus,
    audio: (file) => {
      let pcm = files.get(file)
      if (pcm === undefined) {
        const wav = decodeWav(readFileSync(path.join(CORPUS_DIR, file)))
        if (wav.rate !== SAMPLE_RATE) throw new Error(`${file} is not ${SAMPLE_RATE} Hz`)
        pcm = wav.pcm
        files.set(file, pcm)
      }
      return pcm
    }
  }
}

/** The sound of a talk case's event, at its level. */
export function eventAudio ({ corpus, audio }: LoadedCorpus, event: NonNullable<TalkCase['event']>): Int16Array {
  if ('clip' in event) return audio(corpus.clips[event.clip].file)
  const pcm = audio(corpus.noises[event.noise].file)
  const gain = 10 ** (event.gain_db / 20)
  return pcm.slice(0, event.ms === undefined ? pcm.length : samplesOf(event.ms)).map((s) => Math.round(s * gain))
}

/**
 * What the caller sends, frame by frame: the background noise of the case (looped) with sounds placed on it: a
 * turn case's clips from the start, a talk case's event while the frames are being sent (once the agent speaks),
 * at any offset not sent yet.
 */
export class CallerAudio {
  readonly #bed: Int16Array | undefined
  readonly #gain: number
  readonly #sounds: Array<{ pcm: Int16Array, at: number }> = []

  constructor ({ corpus, audio }: LoadedCorpus, c: Case) {
    this.#bed = c.noise === undefined ? undefined : audio(corpus.noises[c.noise.bed].file)
    this.#gain = c.noise === undefined ? 0 : 10 ** (-c.noise.snr_db / 20)
    if (c.kind === 'turn') for (const part of c.parts) this.place(audio(corpus.clips[part.clip].file), part.at_ms)
  }

  place (pcm: Int16Array, atMs: number): void {
    this.#sounds.push({ pcm, at: samplesOf(atMs) })
  }

  /** The n-th 20 ms frame. */
  frame (n: number): Int16Array {
    const start = n * FRAME_SAMPLES
    const mixed = new Float64Array(FRAME_SAMPLES)
    const bed = this.#bed
    if (bed !== undefined) for (let i = 0; i < FRAME_SAMPLES; i++) mixed[i] = bed[(start + i) % bed.length] * this.#gain
    for (const { pcm, at } of this.#sounds) {
      for (let i = Math.max(0, at - start); i < FRAME_SAMPLES && start + i - at < pcm.length; i++) mixed[i] += pcm[start + i - at]
    }
    return Int16Array.from(mixed, (s) => Math.max(-32768, Math.min(32767, Math.round(s))))
  }
}
