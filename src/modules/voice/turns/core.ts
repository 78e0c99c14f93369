import type { TurnTiming } from '../../../db/shapes.ts'
import { FRAME_MS } from '../audio.ts'
import type { SessionEvent } from '../events.ts'
import { BUFFER_MS } from '../pacer.ts'
import type { Clock, Timer } from './clock.ts'
import { Idle } from './idle.ts'
import { Utterance } from './utterance.ts'
import { endOfTurnSilenceMs, isBackchannel, type Expecting, type Heard } from './words.ts'

// The turn core (DESIGN.md, "Conversation core"): the caller's speech and words in, the agent's utterances out,
// and every decision between them: when the caller's turn ends, whether speech over the agent pauses it, becomes a
// barge-in or lets it resume, reminders when the caller is silent, and how long each answer took. It knows no
// database, socket or provider, and reads time only from its Clock (docs/voice.md, "How turns are taken").

export interface CoreOptions {
  clock: Clock
  /** interruption_sensitivity, 0 to 1; 0: the caller cannot interrupt the agent. */
  sensitivity: number
  /** The agent's BCP-47 language: chooses the word rules of the end of turn and of backchannels. */
  language: string
  /** call_settings.responsiveness, 0 to 1: how soon a turn ends after the caller's last words. */
  responsiveness: number
  /** A streaming recogniser gives the caller's words while they speak: the end of turn and barge-ins use them. */
  words: boolean
  /** The provider detects the caller's turns and answers them itself (the realtime engine's own turn detection). */
  providerTurns: boolean
  /** The answer may start on the caller's stable words before the turn is certain (only spoken once it is). */
  early: boolean
  idle: Idle['settings']
  /** The speech detector: told to take the caller's first window of speech as speech while a turn may still go on. */
  detector?: { quick: boolean }
}

/** What the core asks of the call around it. */
export interface CoreCalls {
  send: (event: SessionEvent) => void
  /** One frame of agent audio goes to the far end now; it plays from `startsAt` (clock time). */
  sendAudio: (frame: Int16Array, startsAt: number) => void
  /** The caller's turn ended: recognise and answer it. */
  answer: () => void
  /** Start answering these stable words; nothing of the answer is spoken until answer() (early replies). */
  prepare: (text: string) => void
  /** Barge-in: stop the answer; `heardMs` of its audio reached the caller. */
  cancel: (heardMs: number) => void
  /** The caller's sound since the last turn was not a turn (a backchannel, a noise): forget its audio and words. */
  forget: () => void
  remind: () => void
  /** The caller stayed silent past every reminder. */
  idle: () => void
  /** The agent stopped speaking (its last frame played). */
  quiet: () => void
  /** What the agent said in one utterance (complete, or as far as it got before a barge-in). */
  said: (content: string, at: number) => void
  timed: (timing: TurnTiming) => void
  /** The caller cut off the answer last timed (a barge-in once some of it had gone out). */
  interrupted: () => void
}

/**
 * Speech over the agent this long becomes a barge-in (without the caller's words): 800 ms at sensitivity 0.5, longer
 * than a backchannel ("okay", "genau": up to about 700 ms). The agent is paused from the first window all the same,
 * so a longer wait costs the caller nothing.
 */
export function confirmMs (sensitivity: number): number {
  return Math.round(400 + 800 * (1 - Math.min(1, Math.max(0, sensitivity))))
}

/** With a streaming recogniser, speech over the agent that brings no words within this long is taken for noise. */
export const NO_WORDS_MS = 900

/**
 * Final words followed by this long without new ones end the caller's speech though the detector still hears
 * some (babble, a television behind the caller: speech, but not the caller's, and no words of it come).
 */
export const WORDS_QUIET_MS = 600

/** A streaming recogniser's words come at most about this long after they were spoken. */
export const WORDS_LAG_MS = 200

const wordCount = (text: string) => text.split(/\s+/).filter((word) => word !== '').length

/** A gap this long in the caller's speech over the paused agent ends it: the agent resumes. */
export const RESUME_AFTER_MS = 250

export class TurnCore {
  readonly #options: CoreOptions
  readonly #clock: Clock
  readonly #calls: CoreCalls
  readonly #idle: Idle
  /** The agent's utterances: the first plays (or is paused), the last may still be coming from the engine. */
  #utterances: Utterance[] = []
  /** The utterance the engine's output goes to. */
  #generating: Utterance | undefined
  /** Until when the far end has agent audio to play (clock time). */
  #playingUntil = 0
  #paced = false
  #speaking = false
  framesSent = 0
  framesLate = 0
  /** The call is ending: the agent says its last words, the caller can neither interrupt nor take a turn. */
  closing = false
  #typed = false

  #callerSpeaking = false
  /** A turn of the caller has begun (speech or words) and has not been answered or forgotten. */
  #turnOpen = false
  #turnAt = 0
  /** When each ended turn whose words have not come yet began (epoch ms), oldest first. */
  #recognising: number[] = []
  #heard: Heard | undefined
  /** The caller's speech of the open turn ended at this clock time; the end of turn is pending. */
  #silenceAt: number | undefined
  #endOfTurn: Timer | undefined
  #prepared: string | undefined
  #expecting: Expecting | undefined
  /**
   * The caller spoke over the agent: the agent is paused until it is a barge-in or not. `spoken`: ms of speech
   * before the current run (which began at `runAt`; undefined in a gap, when `resume` is pending).
   */
  #paused: { spoken: number, runAt: number | undefined, confirm?: Timer, resume?: Timer } | undefined
  /** Speech over the agent was taken for noise: it no longer pauses the agent, though its words may still interrupt. */
  #ignoring = false
  /** Armed while the detector hears speech after the caller's final words: ends it if no words follow (WORDS_QUIET_MS). */
  #wordsQuiet: Timer | undefined
  /** The provider's turn detection heard the caller stop: its answer is timed from here. */
  #providerSpeechEnd: number | undefined

  constructor (options: CoreOptions, calls: CoreCalls) {
    this.#options = options
    this.#clock = options.clock
    this.#calls = calls
    this.#idle = new Idle(options.clock, options.idle, () => calls.remind(), () => calls.idle())
  }

  /** interruption_sensitivity from now on (a workflow step may have its own; 0: the caller cannot interrupt). */
  setSensitivity (sensitivity: number): void {
    this.#options.sensitivity = sensitivity
  }

  /** Whether a streaming recogniser gives the caller's words from now on (one that connected late, or failed). */
  hearWords (streaming: boolean): void {
    this.#options.words = streaming
  }

  /** The agent is speaking or about to (an answer is being prepared, or its audio plays). */
  get speaking (): boolean {
    return this.#speaking
  }

  /** Until when the far end plays agent audio (clock time). */
  get playingUntil (): number {
    return this.#playingUntil
  }

  get #interruptible (): boolean {
    return this.#options.sensitivity > 0 && !this.closing
  }

  /** Some of the agent's audio has gone out or is waiting to: the caller hears it or is about to. */
  get #audible (): boolean {
    return this.#playingUntil > this.#clock.now() || this.#utterances.some((u) => u.sentMs > 0 || u.frames.length > 0)
  }

  /**
   * The detector takes one window of speech for speech while the caller's turn may go on (a pause before its end,
   * speech over the paused agent) and while the agent can be interrupted: a caller who goes on is heard at once,
   * and speech over the agent pauses it within a window (whether it is a barge-in is weighed after).
   */
  #listenClosely (): void {
    if (this.#options.detector === undefined) return
    this.#options.detector.quick = this.#silenceAt !== undefined || this.#paused !== undefined || (this.#speaking && this.#interruptible && !this.#options.providerTurns)
  }

  // The caller.

  /** The detector (or the provider) heard the caller start or stop speaking; `at`: when, in clock time. */
  speech (edge: 'start' | 'end', at: number = this.#clock.now()): void {
    if (edge === 'start') this.#speechStarted(at)
    else this.#speechEnded(at)
    this.#listenClosely()
  }

  #speechStarted (at: number): void {
    this.#callerSpeaking = true
    this.#idle.clear()
    this.#calls.send({ type: 'user_speaking', speaking: true })
    this.#holdEndOfTurn()
    if (this.#ignoring) return
    if (this.#paused !== undefined) return this.#pauseGoesOn(at)
    if (this.#speaking && this.#interruptible) {
      // The provider cancels its own answer when it hears the caller; nothing is yet audible of an answer being
      // prepared: both stop at once (the caller's turn is joined with the one being answered).
      if (this.#options.providerTurns || !this.#audible) this.#bargeIn()
      // With nothing left to send (the far end plays its last few frames) there is nothing to pause: it is a turn.
      else if (this.#utterances.some((u) => !u.done)) this.#pause(at)
    }
    this.#openTurn(at)
  }

  #speechEnded (at: number): void {
    if (!this.#callerSpeaking) return
    this.#callerSpeaking = false
    this.#wordsQuiet?.cancel()
    this.#calls.send({ type: 'user_speaking', speaking: false })
    if (this.#ignoring) {
      this.#ignoring = false
      return this.#forgetTurn()
    }
    if (this.#options.providerTurns) {
      this.#providerSpeechEnd = at
      return
    }
    if (this.#paused !== undefined) return this.#pauseGap(at)
    if (!this.#turnOpen || this.closing) return
    this.#silenceAt = at
    this.#armEndOfTurn()
  }

  /** A streaming recogniser's words for the caller's turn so far (each replaces the last). */
  words (text: string, final: boolean): void {
    if (this.closing) return
    // Words of a turn that has ended and is being recognised (a recogniser that transcribes after the end of turn).
    if (!this.#turnOpen && !this.#callerSpeaking && this.#recognising.length > 0) {
      this.#calls.send({ type: 'transcript_partial', speaker: 'user', content: text, stable: final, timestamp: this.#recognising[0] })
      return
    }
    this.#openTurn(this.#clock.now())
    this.#calls.send({ type: 'transcript_partial', speaker: 'user', content: text, stable: final, timestamp: this.#turnAt })
    const more = wordCount(text) > wordCount(this.#heard?.text ?? '')
    this.#heard = { text, final }
    // New words spoken after the silence began (the detector did not hear them start: babble behind the caller).
    if (more && this.#silenceAt !== undefined) this.#silenceAt = Math.max(this.#silenceAt, this.#clock.now() - WORDS_LAG_MS)
    this.#wordsQuiet?.cancel()
    if (final && this.#callerSpeaking && this.#options.words) {
      // The silence is counted from when it is known (the detector still hears speech, maybe the caller's resuming).
      this.#wordsQuiet = this.#clock.after(WORDS_QUIET_MS, () => { if (this.#callerSpeaking) this.#speechEnded(this.#clock.now()) })
    }
    if (text.trim() !== '' && !isBackchannel(text, this.#options.language) && this.#speaking && this.#audible && this.#interruptible) {
      this.#ignoring = false
      this.#bargeIn()
    }
    if (this.#paused !== undefined || this.#ignoring) return
    // Words that came after the detector heard the speech end (or without it hearing any): the silence began at the latest now.
    if (!this.#callerSpeaking && this.#silenceAt === undefined) this.#silenceAt = this.#clock.now()
    if (this.#silenceAt !== undefined) this.#armEndOfTurn()
    this.#listenClosely()
  }

  /**
   * The engine recognised the caller's turn: answers when it began (epoch ms: its transcript item's time). A turn
   * the engine answered unasked (the provider's turn detection) is the one open now, which this closes.
   */
  recognised (text: string): number {
    const at = this.#recognising.shift() ?? this.#closeTurn()
    // Nothing was recognised and nothing answers: the agent is not speaking after all.
    if (text === '' && this.#generating !== undefined && this.#generating.frames.length === 0 && this.#generating.sentMs === 0 && this.#generating.text === '') {
      this.#generating.state = 'cancelled'
      this.#utterances = this.#utterances.filter((u) => u !== this.#generating)
      this.#generating = undefined
      this.tick(this.#clock.now())
    }
    return at
  }

  #closeTurn (): number {
    this.#turnOpen = false
    this.#heard = undefined
    return this.#turnAt || this.#clock.wall()
  }

  /** What the agent's last words asked for (a number, an e-mail…): a caller dictating it may pause longer. */
  expect (expecting: Expecting | undefined): void {
    this.#expecting = expecting
  }

  /** A typed turn: false while the last one is being answered (one at a time); else the agent stops and answers. */
  typed (): boolean {
    if (this.#typed) return false
    this.#idle.clear()
    if (this.#speaking) this.#bargeIn()
    this.#typed = true
    return true
  }

  #openTurn (at: number): void {
    if (this.#turnOpen) return
    this.#turnOpen = true
    this.#turnAt = this.#clock.wall(at)
  }

  #forgetTurn (): void {
    this.#turnOpen = false
    this.#heard = undefined
    this.#prepared = undefined
    this.#calls.forget()
  }

  #holdEndOfTurn (): void {
    this.#endOfTurn?.cancel()
    this.#endOfTurn = undefined
    this.#silenceAt = undefined
  }

  #armEndOfTurn (): void {
    const silenceAt = this.#silenceAt!
    const wait = endOfTurnSilenceMs(this.#options.words ? this.#heard : undefined, {
      language: this.#options.language,
      responsiveness: this.#options.responsiveness,
      expecting: this.#expecting
    })
    this.#endOfTurn?.cancel()
    this.#endOfTurn = this.#clock.after(silenceAt + wait - this.#clock.now(), () => this.#turnEnded(silenceAt))
    const heard = this.#heard
    if (this.#options.early && heard !== undefined && heard.final && heard.text.trim() !== '' && heard.text !== this.#prepared) {
      this.#prepared = heard.text
      this.#calls.prepare(heard.text)
    }
  }

  #turnEnded (speechEnd: number): void {
    const decidedAt = this.#clock.now()
    this.#holdEndOfTurn()
    this.#listenClosely()
    this.#prepared = undefined
    this.#recognising.push(this.#closeTurn())
    this.#respond({ speechEnd, decidedAt, transcriptionMs: null, llmMs: null, ttsMs: null })
    this.#calls.answer()
  }

  // Interruptions.

  #pause (at: number): void {
    this.#paused = { spoken: 0, runAt: at }
    if (this.#utterances[0] !== undefined) this.#utterances[0].state = 'paused'
    this.#armConfirm()
  }

  /** Without words, speech long enough (in runs with short gaps) is a barge-in; with them, words decide, and speech that brings none is noise. */
  #armConfirm (): void {
    const paused = this.#paused!
    const after = (this.#options.words ? NO_WORDS_MS : confirmMs(this.#options.sensitivity)) - paused.spoken
    paused.confirm = this.#clock.after(paused.runAt! + after - this.#clock.now(), () => {
      if (this.#options.words) {
        this.#ignoring = true
        this.#resume(false)
      } else {
        this.#bargeIn()
      }
    })
  }

  #pauseGoesOn (at: number): void {
    const paused = this.#paused!
    paused.resume?.cancel()
    paused.runAt = at
    this.#armConfirm()
  }

  /** Over before it was a barge-in (a backchannel, a noise): unless the caller goes on soon, the agent resumes where it paused. */
  #pauseGap (at: number): void {
    const paused = this.#paused!
    paused.confirm?.cancel()
    paused.spoken += at - paused.runAt!
    paused.runAt = undefined
    paused.resume = this.#clock.after(at + RESUME_AFTER_MS - this.#clock.now(), () => this.#resume())
  }

  #endPause (): void {
    this.#paused?.confirm?.cancel()
    this.#paused?.resume?.cancel()
    this.#paused = undefined
    this.#listenClosely()
  }

  /** The agent goes on where it paused; the caller's sound is forgotten, unless it still goes on (then when it ends). */
  #resume (forget = true): void {
    this.#endPause()
    if (this.#utterances[0]?.state === 'paused') this.#utterances[0].state = 'speaking'
    if (forget) this.#forgetTurn()
    this.#pace()
  }

  /** The caller talks over the agent: its utterances stop, what the far end holds is dropped. */
  #bargeIn (): void {
    this.#endPause()
    // Turns still being recognised are joined with the caller's speech now (the engine gives one turn of them all).
    if (this.#recognising.length > 0) {
      this.#turnOpen = true
      this.#turnAt = this.#recognising[0]
      this.#recognising = []
    }
    const now = this.#clock.now()
    const playing = this.#utterances.find((u) => u.sentMs > 0 && !u.done) ?? this.#utterances[0]
    if (playing !== undefined && playing.sentMs > 0 && playing.timing !== undefined) this.#calls.interrupted()
    // What the caller heard: its audio sent, less what the far end still holds.
    this.#calls.cancel(Math.max(0, (playing?.sentMs ?? 0) - Math.max(0, this.#playingUntil - now)))
    const cut = this.#generating
    if (cut !== undefined && cut.text !== '') this.#calls.said(cut.text, cut.at)
    for (const u of this.#utterances) u.state = 'cancelled'
    this.#utterances = []
    this.#generating = undefined
    this.#playingUntil = 0
    this.#typed = false
    this.#calls.send({ type: 'clear' })
    this.#setSpeaking(false)
  }

  /** Stops the agent now (the call's time is up). */
  interrupt (): void {
    this.#idle.clear()
    if (this.#speaking) this.#bargeIn()
  }

  // The agent.

  /** A new utterance of the agent (the begin message, a reminder, an answer to typed words). */
  respond (): void {
    this.#respond(undefined)
  }

  #respond (timing: Utterance['timing']): void {
    const utterance = new Utterance(this.#clock.wall(), timing)
    if (timing === undefined && this.#providerSpeechEnd !== undefined) {
      utterance.timing = { speechEnd: this.#providerSpeechEnd, decidedAt: this.#providerSpeechEnd, transcriptionMs: null, llmMs: null, ttsMs: null }
    }
    this.#providerSpeechEnd = undefined
    this.#idle.stop()
    this.#utterances.push(utterance)
    this.#generating = utterance
    this.#setSpeaking(true)
  }

  /** The engine's share of the answer being generated: how long recognition, the model and speech took. */
  stages (stages: { transcriptionMs?: number | null, llmMs?: number | null, ttsMs?: number | null }): void {
    const timing = this.#generating?.timing
    if (timing === undefined) return
    if (stages.transcriptionMs !== undefined) timing.transcriptionMs = stages.transcriptionMs
    if (stages.llmMs !== undefined) timing.llmMs = stages.llmMs
    if (stages.ttsMs !== undefined) timing.ttsMs = stages.ttsMs
  }

  /** Agent audio from the engine (an engine may answer unasked: a turn the core thought unanswered). */
  audio (pcm: Int16Array): void {
    if (this.#generating === undefined) this.respond()
    const now = this.#clock.now()
    this.#generating!.add(pcm, now)
    this.#pace()
    this.tick(now)
  }

  text (delta: string): void {
    if (this.#generating === undefined) this.respond()
    this.#generating!.text += delta
    this.#calls.send({ type: 'agent_text', delta })
  }

  /** The engine finished the utterance (all its audio came); `text`: what it said. */
  done (text: string): void {
    const utterance = this.#generating
    if (utterance === undefined) return
    const content = text !== '' ? text : utterance.text
    if (content !== '') this.#calls.said(content, utterance.at)
    this.#generating = undefined
    const now = this.#clock.now()
    utterance.end(now)
    // Without audio (text calls) the agent has finished speaking now; otherwise when playback ends.
    this.#pace()
    this.tick(now)
  }

  #pace (): void {
    if (this.#paced) return
    this.#paced = true
    this.#clock.pace(this)
  }

  #unpace (): void {
    if (!this.#paced) return
    this.#paced = false
    this.#clock.unpace(this)
  }

  /** Sends the frames that keep the far end BUFFER_MS ahead; notices when the agent has stopped speaking. */
  tick (now: number): void {
    while (this.#utterances.length > 0 && this.#playingUntil - now < BUFFER_MS) {
      const utterance = this.#utterances[0]
      if (utterance.state === 'paused') break
      if (utterance.done) {
        this.#utterances.shift()!.state = 'finished'
        continue
      }
      const frame = utterance.frames.shift()
      if (frame === undefined) break
      // Due at the first tick after it may go (it arrived, and the far end's buffer fell under BUFFER_MS): late
      // when sent more than one frame after that.
      const due = Math.max(frame.at, this.#playingUntil - BUFFER_MS) + FRAME_MS
      if (now - due > FRAME_MS) this.framesLate++
      this.framesSent++
      const startsAt = Math.max(this.#playingUntil, now)
      if (utterance.sentMs === 0 && utterance.timing !== undefined) this.#timed(utterance.timing, startsAt)
      utterance.state = 'speaking'
      utterance.sentMs += FRAME_MS
      this.#playingUntil = startsAt + FRAME_MS
      this.#calls.sendAudio(frame.pcm, startsAt)
    }
    while (this.#utterances[0]?.done === true) this.#utterances.shift()!.state = 'finished'
    // Paced while there is audio to send; a paused agent sends none until it resumes.
    if (this.#utterances[0]?.state !== 'paused' && this.#utterances.some((u) => u.frames.length > 0)) return
    this.#unpace()
    if (this.#utterances.length === 0 && this.#speaking) {
      if (this.#playingUntil <= now) this.#stoppedSpeaking()
      else this.#clock.after(this.#playingUntil - now, () => this.tick(this.#clock.now()))
    }
  }

  #timed (timing: NonNullable<Utterance['timing']>, startsAt: number): void {
    this.#calls.timed({
      at: this.#clock.wall(timing.speechEnd),
      end_of_turn_ms: Math.round(timing.decidedAt - timing.speechEnd),
      transcription_ms: timing.transcriptionMs,
      llm_ms: timing.llmMs,
      tts_ms: timing.ttsMs,
      e2e_ms: Math.round(startsAt - timing.speechEnd)
    })
  }

  #setSpeaking (speaking: boolean): void {
    if (this.#speaking === speaking) return
    this.#speaking = speaking
    this.#listenClosely()
    this.#calls.send({ type: 'agent_speaking', speaking })
  }

  #stoppedSpeaking (): void {
    this.#typed = false
    this.#setSpeaking(false)
    // The caller's turn under way (they spoke over the agent's last words) keeps reminders off until it is answered.
    if (!this.closing && !this.#turnOpen) this.#idle.arm()
    this.#calls.quiet()
  }

  /** Waits for the caller: a reminder or the time-out if they stay silent. */
  awaitCaller (): void {
    if (!this.closing) this.#idle.arm()
  }

  /** The call is over: no timer of the core fires any more. */
  stop (): void {
    this.closing = true
    this.#idle.stop()
    this.#holdEndOfTurn()
    this.#endPause()
    this.#wordsQuiet?.cancel()
    this.#unpace()
  }
}
