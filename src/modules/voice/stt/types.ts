import type { Logger } from 'pino'

// One interface for every speech-to-text provider of the cascade (DESIGN.md, "Conversation core"): caller
// audio in for the whole call, the caller's words out — partial while they speak (streaming providers),
// final once a turn has ended — and the seconds of audio the provider was given. `batch.ts` posts each turn
// after it ended; `openai-realtime.ts` and `deepgram.ts` stream over their WebSocket protocols.

export interface SttSetup {
  /** ISO-639-1 language the caller speaks; undefined: several are possible, the provider detects. */
  language: string | undefined
}

export type SttEvent =
  /**
   * What the caller has said in the current turn so far; each replaces the one before. `final`: the provider
   * will not revise these words (more may follow). Times are ms of caller audio since the stream began.
   */
  | { type: 'partial', text: string, final: boolean, startMs: number, endMs: number }
  /** Seconds of caller audio given to the provider since the last such event (its usage). */
  | { type: 'audio_seconds', seconds: number }
  /** A streaming provider failed (connection lost, an error event): the call cannot go on. The message holds no key. */
  | { type: 'error', message: string }

export interface SpeechToText {
  /** Connects (streaming providers); rejects with a message naming the provider's answer (a bad key: 401). */
  start: (setup: SttSetup) => Promise<void>
  /** Agent transfer: the new agent's language (a stream that cannot change it keeps its own, and says so in the log). */
  update: (setup: SttSetup) => void
  /** One 20 ms frame of caller audio (PCM16 mono 16 kHz), given for the whole call. */
  audio: (frame: Int16Array) => void
  /**
   * Our end of turn: resolves with what the caller said since the previous turn, once it is final. A batch
   * request that fails rejects; a streaming provider's failure is an `error` event, and its turns resolve ''.
   */
  endOfTurn: () => Promise<string>
  /**
   * A barge-in cut the answer short: the turns whose words have not been given yet are not over. Their
   * promises resolve with '' and what they held becomes the start of the next turn.
   */
  rejoin: () => void
  /**
   * What the caller said since the previous turn was not a turn (a backchannel or a noise over the agent): its
   * audio and words are dropped, and words of it that come later too.
   */
  forget: () => void
  /** The call ended: closes the connection; nothing is emitted afterwards. */
  close: () => void
}

export type SttFactory = (onEvent: (event: SttEvent) => void, log: Logger) => SpeechToText
