// Hears whether a caller speaks: Silero VAD's speech probability per 32 ms window, with hysteresis, instead of
// loudness (docs/voice.md, "How speech is detected"). Loudness took every noise louder than its floor for
// speech, and its adaptive floor learnt a caller speaking over background noise as the noise.

import { SAMPLE_RATE } from '../audio.ts'
import { sileroModel, SileroStream, WINDOW_SAMPLES, type SileroModel } from './silero.ts'

const WINDOW_MS = WINDOW_SAMPLES * 1000 / SAMPLE_RATE

/**
 * Windows quieter than this RMS (of 32768, about -70 dBFS) are digital silence (a muted microphone, an idle
 * phone line's zeros): no speech is that quiet, so the model is not run on them and they cost nothing. Any
 * noise, however steady, is louder and goes to the model, which tells it from speech.
 */
export const SILENCE_RMS = 10

/** How `interruption_sensitivity` (0 to 1) sets the detector; docs/voice.md gives the same table. */
export function detectionOf (sensitivity: number): { threshold: number, minSpeechMs: number } {
  const s = Math.min(1, Math.max(0, sensitivity))
  // At the default 0.5: Silero's own threshold (0.5); 1 takes less certain speech, 0 wants more.
  return { threshold: Math.round(60 - 20 * s) / 100, minSpeechMs: Math.round(250 * (1 - s)) }
}

export type Turn = 'start' | 'end'

export interface SpeechDetectorOptions {
  /** The agent's interruption_sensitivity: how sure and how long speech must be before it counts. */
  sensitivity: number
  /** Silence after speech that counts as the speech's end (96 ms: the turn core decides how long a turn's pause may be). */
  endSilenceMs?: number
  /** The caller started or stopped speaking; `atMs`: where the speech began or the silence after it, in stream time. */
  onTurn: (turn: Turn, atMs: number) => void
  /** The model failed: the caller can no longer be heard. */
  onError: (err: unknown) => void
}

/**
 * One caller's speech detector. Takes 16 kHz PCM16 in pieces of any length (the core's 20 ms frames), runs
 * the process's shared Silero model on each 32 ms window in order, and tells when a turn starts (enough
 * windows at or over the threshold in a row) and ends (`endSilenceMs` of windows under the threshold less
 * 0.15, Silero's own hysteresis). The answer for a window comes a moment later (the model runs all calls'
 * windows together once the event loop is free), so turns are told through `onTurn`.
 */
export class SpeechDetector {
  readonly #model: SileroModel
  readonly #stream = new SileroStream()
  #threshold = 0
  #endThreshold = 0
  #startWindows = 1
  readonly #endWindows: number
  readonly #onTurn: SpeechDetectorOptions['onTurn']
  readonly #onError: SpeechDetectorOptions['onError']
  /** The window being filled, scaled to [-1, 1], and its sum of squares (for the silence gate). */
  #window = new Float32Array(WINDOW_SAMPLES)
  #filled = 0
  #energy = 0
  /** Whole windows not yet decided, oldest first; the first is with the model when `#busy`. */
  readonly #queue: Float32Array[] = []
  #busy = false
  #decided = 0
  #speechRun = 0
  #silenceRun = 0
  #speaking = false
  #failed = false
  #waiting: Array<() => void> = []

  private constructor (model: SileroModel, options: SpeechDetectorOptions) {
    this.#model = model
    this.setSensitivity(options.sensitivity)
    this.#endWindows = Math.max(1, Math.ceil((options.endSilenceMs ?? 96) / WINDOW_MS))
    this.#onTurn = options.onTurn
    this.#onError = options.onError
  }

  /** How sure and how long speech must be before it counts, from now on (a workflow step may have its own). */
  setSensitivity (sensitivity: number): void {
    const { threshold, minSpeechMs } = detectionOf(sensitivity)
    this.#threshold = threshold
    this.#endThreshold = threshold - 0.15
    this.#startWindows = Math.max(1, Math.ceil(minSpeechMs / WINDOW_MS))
  }

  /**
   * Set while the caller's turn may go on (a pause before the end of turn, speech over the paused agent): one
   * window of speech starts speech again, so that the core learns at once that the caller goes on.
   */
  quick = false

  /** A detector for one caller; the first one of the process loads the model (rejects when it cannot). */
  static async create (options: SpeechDetectorOptions): Promise<SpeechDetector> {
    return new SpeechDetector(await sileroModel(), options)
  }

  /** Caller audio, 16 kHz PCM16 of any length. */
  push (pcm: Int16Array): void {
    if (this.#failed) return
    for (let i = 0; i < pcm.length; i++) {
      const sample = pcm[i] / 32768
      this.#window[this.#filled++] = sample
      this.#energy += sample * sample
      if (this.#filled === WINDOW_SAMPLES) {
        const silent = Math.sqrt(this.#energy / WINDOW_SAMPLES) * 32768 < SILENCE_RMS
        // Digital silence with nothing queued before it is decided here and now, without the model.
        if (silent && this.#queue.length === 0) {
          this.#stream.reset()
          this.#decide(0)
        } else {
          this.#queue.push(silent ? SILENT : this.#window)
          this.#window = new Float32Array(WINDOW_SAMPLES)
          this.#next()
        }
        this.#filled = 0
        this.#energy = 0
      }
    }
  }

  /** Resolves once every whole window pushed so far is decided (tests and replays; a live call never waits). */
  settled (): Promise<void> {
    if (this.#queue.length === 0) return Promise.resolve()
    return new Promise((resolve) => this.#waiting.push(resolve))
  }

  /** Hands the oldest queued window to the model, deciding digital silence on the way without it. */
  #next (): void {
    while (!this.#busy && this.#queue.length > 0) {
      const window = this.#queue[0]
      if (window === SILENT) {
        this.#queue.shift()
        this.#stream.reset()
        this.#decide(0)
        continue
      }
      this.#busy = true
      this.#model.infer({
        stream: this.#stream,
        window,
        done: (probability) => {
          this.#busy = false
          this.#queue.shift()
          this.#decide(probability)
          this.#next()
        },
        fail: (err) => {
          this.#failed = true
          this.#queue.length = 0
          for (const resolve of this.#waiting.splice(0)) resolve()
          this.#onError(err)
        }
      })
    }
    if (this.#queue.length === 0) for (const resolve of this.#waiting.splice(0)) resolve()
  }

  #decide (probability: number): void {
    this.#decided++
    if (!this.#speaking) {
      if (probability >= this.#threshold) this.#speechRun++
      else if (probability < this.#endThreshold) this.#speechRun = 0
      if (this.#speechRun >= (this.quick ? 1 : this.#startWindows)) {
        this.#speaking = true
        this.#silenceRun = 0
        this.#onTurn('start', (this.#decided - this.#speechRun) * WINDOW_MS)
      }
      return
    }
    // As Silero's VADIterator: silence starts at the first window under the lower threshold and lasts until a
    // window reaches the upper one again; windows between the two neither start nor break it.
    if (probability >= this.#threshold) this.#silenceRun = 0
    else if (probability < this.#endThreshold || this.#silenceRun > 0) this.#silenceRun++
    if (this.#silenceRun >= this.#endWindows) {
      this.#speaking = false
      this.#speechRun = 0
      this.#onTurn('end', (this.#decided - this.#silenceRun) * WINDOW_MS)
    }
  }
}

/** A queued window of digital silence (its samples are not needed). */
const SILENT = new Float32Array(0)
