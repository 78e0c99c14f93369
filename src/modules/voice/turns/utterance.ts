import { Framer } from '../audio.ts'

export type UtteranceState = 'queued' | 'speaking' | 'paused' | 'cancelled' | 'finished'

/** How an answer to a caller's turn was timed so far (clock ms); the core completes it at the answer's first frame. */
export interface AnswerTiming {
  speechEnd: number
  decidedAt: number
  transcriptionMs: number | null
  llmMs: number | null
  ttsMs: number | null
}

/**
 * One thing the agent says (an answer, the begin message, a reminder): its audio as it comes from the engine, in
 * 20 ms frames, and what of it has gone out. Queued until its first frame goes; speaking; paused while the
 * caller may be interrupting; cancelled by a barge-in; finished once its last frame went.
 */
export class Utterance {
  state: UtteranceState = 'queued'
  /** Epoch ms when it was asked for: its transcript item's time. */
  readonly at: number
  /** Its text so far. */
  text = ''
  /** The engine has given all its audio and text. */
  complete = false
  /** Frames not yet sent, each with the clock time it arrived. */
  readonly frames: Array<{ pcm: Int16Array, at: number }> = []
  /** Audio of it sent to the far end, in ms. */
  sentMs = 0
  /** Set when it answers a caller's turn. */
  timing: AnswerTiming | undefined
  readonly #framer = new Framer()

  constructor (at: number, timing?: AnswerTiming) {
    this.at = at
    this.timing = timing
  }

  add (pcm: Int16Array, now: number): void {
    for (const frame of this.#framer.push(pcm)) this.frames.push({ pcm: frame, at: now })
  }

  /** All its audio came: the last part of a frame goes out padded with silence. */
  end (now: number): void {
    this.complete = true
    const last = this.#framer.flush()
    if (last !== undefined) this.frames.push({ pcm: last, at: now })
  }

  get done (): boolean {
    return this.complete && this.frames.length === 0
  }
}
