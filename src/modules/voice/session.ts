import { performance } from 'node:perf_hooks'
import type { Logger } from 'pino'
import type { CallRow, TranscriptItem } from '../../db/schema.ts'
import type { Conversation, TransferRecord } from '../../db/shapes.ts'
import type { DB } from '../../db/database.ts'
import type { JobSender } from '../../jobs/queues.ts'
import { providerVoiceId } from '../account/queries.ts'
import { findAgent, findLlm, type AgentRow, type LlmRow } from '../agents/queries.ts'
import { CALL_SETTINGS_DEFAULTS } from '../agents/schemas.ts'
import { endCall, maxDurationMinutes, toCallEnd, type CallEnd } from '../calls/lifecycle.ts'
import { findRecording, storeRecordingPart } from '../calls/recordings.ts'
import { FRAME_MS, Framer, pcmToBuffer, Recorder, SAMPLE_RATE } from './audio.ts'
import { chooseEngine, createEngine, type EngineKind } from './engines/index.ts'
import type { Engine, EngineEvent, EngineSetup } from './engines/types.ts'
import { BUFFER_MS, CALLER_LAG_MS, CallerPace, pace, unpace } from './pacer.ts'
import { loadTools } from './tools/index.ts'
import type { LiveTool, ToolOutcome } from './tools/types.ts'
import { callInstructions, spokenLines } from './prompt.ts'
import { SpeechDetector, type Turn } from './vad/detector.ts'
import { renderText } from '../deliveries/render.ts'

// One live call (DESIGN.md, "Voice"): caller audio or text in, turn detection, the engine, paced agent
// audio out, barge-in, reminders and time limits, live tools, transcript, usage and recording. It starts
// from a `started` call and ends it only through the calls module's endCall, so analysis, credits and
// deliveries run as for every other call.

export interface SessionDeps extends JobSender { db: DB, log: Logger }

/** What the session tells the far end (the browser's JSON events; the phone uses a few of them). */
export type SessionEvent =
  | { type: 'ready', call_id: string, agent_name: string, mode: 'voice' | 'text', engine: EngineKind, sample_rate: number }
  | { type: 'transcript', speaker: TranscriptItem['speaker'], content: string, timestamp: number, tool?: TranscriptItem['tool'] }
  /** A streaming recogniser's words for the caller's turn so far (replaced by the next, then by its transcript). */
  | { type: 'transcript_partial', speaker: 'user', content: string, stable: boolean, timestamp: number }
  | { type: 'agent_text', delta: string }
  | { type: 'agent_speaking', speaking: boolean }
  | { type: 'user_speaking', speaking: boolean }
  | { type: 'clear' }
  | { type: 'ended', reason: string, frames_sent: number, frames_late: number }

/** The transport of one call: frames and events to the far end, nothing else (transports/). */
export interface Transport {
  /** One 20 ms frame of agent audio (16 kHz PCM16), paced by the session. */
  sendAudio: (frame: Int16Array) => void
  send: (event: SessionEvent) => void
  /** The session ended: close the connection. */
  close: () => void
  /**
   * Puts the caller through to a phone number (the phone; a browser cannot): keeps `state` with the call
   * and dials. Throws when it could not; once it resolves the call is the carrier's until it comes back.
   */
  forward?: (request: ForwardRequest) => Promise<void>
}

/** Why a session ended, as the call's disconnection_reason. */
export type EndReason = 'user_hangup' | 'agent_hangup' | 'inactivity' | 'max_duration_reached' | 'runtime_error' | 'protocol_error' | 'stream_timeout' | 'stream_dropped' | 'server_shutdown'

export interface ForwardRequest {
  phoneNumber: string
  /** How long the number rings before the agent takes the call back. */
  timeoutSeconds: number
  /** Show the caller's own number to the person called (else the agent's number). */
  showCallerNumber: boolean
  state: Conversation
}

interface Queued { pcm: Int16Array, at: number }

/** An agent's call_settings with the defaults of the members it lacks. */
const settingsOf = (agent: AgentRow) => ({ ...CALL_SETTINGS_DEFAULTS, ...agent.call_settings })

/** How long the session waits for the agent's last words (goodbye, end_call) before it hangs up anyway. */
const LAST_WORDS_MS = 15_000
/** The recording is stored this often while the call runs (about 64 KB a time), not held until its end. */
const RECORDING_SAVE_MS = 2000
/** What is stored lies this far behind now: no audio is placed there any more (caller audio lags by CALLER_LAG_MS at most). */
const RECORDING_SETTLED_MS = CALLER_LAG_MS + 500

export class Session {
  readonly call: CallRow
  private readonly deps: SessionDeps
  private readonly transport: Transport
  private readonly log: Logger
  private agent!: AgentRow
  private engine!: Engine
  private kind!: EngineKind
  private tools = new Map<string, LiveTool>()
  private closeTools: () => Promise<void> = async () => {}
  private readonly abort = new AbortController()
  /** When the recording starts (performance.now() time): earlier than now for a call taken back after forwarding. */
  private startedAt = performance.now()
  private readonly transcript: TranscriptItem[] = []
  private readonly tokens: Record<string, { input: number, output: number }> = {}
  private readonly speech = { recognised: 0, synthesised: 0 }
  private readonly transfers: TransferRecord[] = []
  private detector!: SpeechDetector
  /** The realtime provider detects the caller's turns (its LLM configuration's turn_detection): ours stays out. */
  private providerTurns = false
  private recorder: Recorder | undefined
  /** The recording's parts being stored, one after the other (each is appended where the last ended). */
  private recordingSaved: Promise<void> = Promise.resolve()
  /** Samples of the recording stored (by this session or, for a call taken back, before it). */
  private recordingStored = 0
  private readonly callerFrames = new Framer()
  private readonly callerPace = new CallerPace()
  /** Agent audio not yet sent, in 20 ms frames, and the remainder of a frame. */
  private queue: Queued[] = []
  private readonly agentFrames = new Framer()
  /** Until when the far end has agent audio to play (performance.now() time). */
  private playingUntil = 0
  private responding = false
  /** A typed turn is being answered (until the answer has played out): the next one waits for it. */
  private typedTurn = false
  private speaking = false
  private agentText = ''
  private responseStartedAt = 0
  /** Agent audio of the current response sent to the far end, in ms. */
  private responseSentMs = 0
  private userTurnAt = 0
  /**
   * A turn of the caller has begun (heard by the detector, or its first words came) and its words have not: the
   * turn keeps the time it began, though a streaming recogniser's words may come before the detector's start, and
   * a caller who pauses and goes on is still one turn.
   */
  private userTurnOpen = false
  private framesSent = 0
  private framesLate = 0
  private remindersSent = 0
  private silenceTimer: NodeJS.Timeout | undefined
  private readonly timers: NodeJS.Timeout[] = []
  /** Set when the call is to end (or be forwarded) once the agent's current words are out. */
  private ending: EndReason | 'forward' | undefined
  private forwardTo: (NonNullable<ToolOutcome['forwardTo']> & { reason: string | null }) | undefined
  private ended = false
  private forwarding = false
  private hungUp: EndReason | undefined
  readonly done: Promise<void>
  private resolveDone!: () => void

  private constructor (deps: SessionDeps, call: CallRow, transport: Transport) {
    this.deps = deps
    this.call = call
    this.transport = transport
    this.log = deps.log.child({ callId: call.id })
    this.done = new Promise((resolve) => { this.resolveDone = resolve })
  }

  /**
   * Opens the session of a started call on a transport; the conversation begins (engine connected, begin
   * message) in the background. Never throws: a session that cannot start ends its call `runtime_error`.
   */
  static open (deps: SessionDeps, call: CallRow, transport: Transport, options: { engine?: EngineKind, resume?: Conversation } = {}): Session {
    const session = new Session(deps, call, transport)
    session.start(options.engine, options.resume).catch(async (err: unknown) => {
      session.log.error({ err }, 'the voice session could not start')
      await session.end('runtime_error')
    })
    return session
  }

  /** The session is over: ended, or its call forwarded. */
  get finished (): boolean {
    return this.ended
  }

  /** The time scale of timers (CALL_TIME_SCALE: tests shorten reminders, time-outs and limits with it). */
  private scaled (ms: number): number {
    return Math.max(1, Math.round(ms * this.deps.config.callTimeScale))
  }

  private get settings () {
    return settingsOf(this.agent)
  }

  private async start (engine: EngineKind | undefined, resume: Conversation | undefined): Promise<void> {
    const { db, config } = this.deps
    const agent = await findAgent(db, this.call.user_id, resume?.agent_id ?? this.call.agent_id)
    if (agent === undefined) throw new Error('the call\'s agent no longer exists')
    const llm = await findLlm(db, this.call.user_id, agent.llm_id)
    if (llm === undefined) throw new Error('the agent\'s LLM configuration no longer exists')
    this.agent = agent
    this.kind = engine ?? chooseEngine(config.voice, llm)
    this.detector = await SpeechDetector.create({
      sensitivity: Math.max(0.05, agent.interruption_sensitivity),
      onTurn: (turn) => this.turn(turn),
      onError: (err) => {
        this.log.error({ err }, 'speech detection failed; the call ends')
        this.hangup('runtime_error')
      }
    })
    if (this.settings.recording_enabled !== false && this.kind !== 'simulator') {
      // A call taken back after forwarding: its recording goes on after what was stored before.
      const earlier = resume === undefined || resume.recording_ms === 0 ? undefined : await findRecording(db, this.call.user_id, this.call.id)
      // Ended meanwhile (a hang-up): no timer may start after end() cleared them.
      if (this.ended) return
      this.recordingStored = earlier === undefined ? 0 : earlier.pcmBytes / 2 / earlier.channels
      this.startedAt -= this.recordingStored * 1000 / SAMPLE_RATE
      // Two tracks, unless it goes on after a mono recording stored before two tracks were recorded.
      this.recorder = new Recorder(maxDurationMinutes(agent) * 60_000 + LAST_WORDS_MS, this.recordingStored, earlier?.channels)
      this.timers.push(setInterval(() => this.saveRecording(performance.now() - this.startedAt - RECORDING_SETTLED_MS), RECORDING_SAVE_MS))
    }
    if (resume !== undefined) this.resume(resume)
    this.engine = createEngine(this.kind, config.voice, (event) => this.onEngine(event), this.log)
    const setup = await this.setup(agent, llm)
    if (this.ended) return
    await this.engine.start(resume === undefined ? setup : { ...setup, history: this.history() })
    if (this.ended) return
    this.transport.send({ type: 'ready', call_id: this.call.id, agent_name: agent.agent_name, mode: this.kind === 'simulator' ? 'text' : 'voice', engine: this.kind, sample_rate: 16_000 })
    // The limit counts from the call's start (make-web-call), as the deadline job does.
    const left = maxDurationMinutes(agent) * 60_000 - (Date.now() - this.call.start_timestamp.getTime())
    this.timers.push(setTimeout(() => this.limitReached(), this.scaled(Math.max(0, left))))
    if (resume !== undefined) return this.say(spokenLines(String(this.settings.language)).notForwarded)
    const begin = llm.begin_message === null || llm.begin_message === '' ? undefined : renderText(llm.begin_message, this.call.dynamic_context)
    if (begin !== undefined) this.say(begin)
    else this.armSilence()
  }

  /** A call taken back after a forwarding nobody answered: the conversation carries on (the recording: see start). */
  private resume (state: Conversation): void {
    this.transcript.push(...state.transcript)
    Object.assign(this.tokens, state.tokens)
    this.speech.recognised = state.speech.recognised
    this.speech.synthesised = state.speech.synthesised
    this.transfers.push(...state.transfers)
  }

  /** What was said so far, for an engine that starts mid-call. */
  private history (): NonNullable<EngineSetup['history']> {
    return this.transcript.flatMap((item) => item.speaker === 'user' || item.speaker === 'agent'
      ? [{ role: item.speaker === 'user' ? 'user' as const : 'assistant' as const, text: item.content }]
      : [])
  }

  /** The engine's setup for an agent: prompt with variables, the session's own lines, voice and live tools. */
  private async setup (agent: AgentRow, llm: LlmRow): Promise<EngineSetup> {
    const { db, config } = this.deps
    await this.closeTools()
    const loaded = await loadTools({ db, config, log: this.log, userId: this.call.user_id, callId: this.call.id, signal: this.abort.signal }, agent.id)
    this.tools = new Map(loaded.tools.map((tool) => [tool.spec.name, tool]))
    this.closeTools = loaded.close
    const settings = settingsOf(agent)
    const language = String(settings.language)
    this.providerTurns = this.kind === 'realtime' && llm.turn_detection.type !== 'switchboard'
    return {
      instructions: [renderText(llm.general_prompt, this.call.dynamic_context), callInstructions(language, this.call.call_type)].filter((s) => s !== '').join('\n\n'),
      tools: loaded.tools.map((tool) => tool.spec),
      toolTypes: Object.fromEntries(loaded.tools.map((tool) => [tool.spec.name, tool.type])),
      language,
      sttLanguages: (settings.stt_languages as string[] | undefined) ?? [],
      voice: await providerVoiceId(db, agent.voice_id) ?? 'alloy',
      model: llm.model,
      temperature: llm.temperature,
      maxTokens: llm.max_tokens,
      turnDetection: llm.turn_detection,
      interruptible: agent.interruption_sensitivity > 0
    }
  }

  // Input from the transport.

  /** Caller audio: PCM16 mono 16 kHz of any length; cut into 20 ms frames here. */
  audio (pcm: Int16Array): void {
    if (this.ended || this.engine === undefined) return
    for (const frame of this.callerFrames.push(pcm)) this.frame(frame)
  }

  private frame (frame: Int16Array): void {
    // Placed by the wall clock: audio sent faster than real time is dropped, and the recording follows the call's real length.
    const at = this.callerPace.place(performance.now(), FRAME_MS)
    if (at === undefined) return
    this.recorder?.add('caller', frame, at - this.startedAt)
    this.engine.audio(frame)
    if (!this.providerTurns) this.detector.push(frame)
  }

  /** The caller started or stopped speaking, as our detector (a moment after the frame that decided it) or the provider's heard it. */
  private turn (turn: Turn): void {
    if (this.ended) return
    if (turn === 'start') {
      this.openUserTurn()
      this.clearSilence()
      this.transport.send({ type: 'user_speaking', speaking: true })
      if (this.speaking && this.agent.interruption_sensitivity > 0 && this.ending === undefined) this.bargeIn()
    } else if (turn === 'end') {
      this.transport.send({ type: 'user_speaking', speaking: false })
      // The provider answers the turns it detects itself.
      if (this.ending === undefined && !this.providerTurns) {
        this.startResponse()
        this.engine.endOfTurn()
      }
    }
  }

  /**
   * A typed turn of the caller; false when it is refused because the agent is still answering the last one
   * (one typed turn at a time, so that a burst of them cannot run up dozens of model responses).
   */
  text (content: string): boolean {
    if (this.ended || this.engine === undefined || this.ending !== undefined) return true
    if (this.typedTurn) return false
    this.clearSilence()
    if (this.speaking) this.bargeIn()
    // Set before the engine runs: the simulator answers within userText.
    this.typedTurn = true
    this.addTranscript({ speaker: 'user', content, timestamp: Date.now() })
    this.startResponse()
    this.engine.userText(content)
    return true
  }

  /** The caller hung up (or the connection closed); `reason` for a transport fault. */
  hangup (reason: EndReason = 'user_hangup'): void {
    // While the call is being forwarded the carrier closes the stream: the call is not over. Should the
    // forwarding fail, a real hang-up then ends it.
    if (this.forwarding) this.hungUp = reason
    else void this.end(reason)
  }

  // The engine's events.

  private onEngine (event: EngineEvent): void {
    if (this.ended) return
    // An engine may answer a turn the session thought unanswered (nothing recognised, yet the model speaks).
    if ((event.type === 'audio' || event.type === 'agent_text') && !this.responding) this.startResponse()
    switch (event.type) {
      case 'audio': return this.enqueue(event.pcm)
      case 'agent_text':
        this.agentText += event.delta
        return this.transport.send({ type: 'agent_text', delta: event.delta })
      case 'response_done': return this.responseDone(event.text)
      case 'caller_speech': return this.turn(event.speaking ? 'start' : 'end')
      case 'user_text':
        this.userTurnOpen = false
        if (event.text !== '') this.addTranscript({ speaker: 'user', content: event.text, timestamp: this.userTurnAt || Date.now() })
        else if (this.queue.length === 0 && this.agentText === '') {
          // Nothing was recognised: no answer comes, the agent is not speaking.
          this.responding = false
          this.tick(performance.now())
        }
        return
      case 'user_partial':
        this.openUserTurn()
        return this.transport.send({ type: 'transcript_partial', speaker: 'user', content: event.text, stable: event.final, timestamp: this.userTurnAt })
      case 'tool_call':
        this.runTool(event.id, event.name, event.arguments).catch((err: unknown) => this.log.error({ err }, 'a tool run failed'))
        return
      case 'usage': {
        const used = this.tokens[event.model] ?? { input: 0, output: 0 }
        this.tokens[event.model] = { input: used.input + event.input, output: used.output + event.output }
        return
      }
      case 'speech':
        this.speech.recognised += event.recognisedSeconds ?? 0
        this.speech.synthesised += event.synthesisedSeconds ?? 0
        return
      case 'error':
        this.log.error({ reason: event.message }, 'a voice provider failed; the call ends')
        this.hangup('runtime_error')
    }
  }

  private openUserTurn (): void {
    if (this.userTurnOpen) return
    this.userTurnOpen = true
    this.userTurnAt = Date.now()
  }

  private startResponse (): void {
    this.responding = true
    this.agentText = ''
    this.responseSentMs = 0
    this.responseStartedAt = Date.now()
    this.setSpeaking(true)
  }

  private say (text: string): void {
    this.startResponse()
    this.engine.say(text)
  }

  private responseDone (text: string): void {
    const content = text !== '' ? text : this.agentText
    if (content !== '') this.addTranscript({ speaker: 'agent', content, timestamp: this.responseStartedAt || Date.now() })
    this.agentText = ''
    this.responding = false
    // Without audio (text calls) the agent has finished speaking now; otherwise when playback ends.
    this.tick(performance.now())
  }

  // Agent audio out, paced.

  private enqueue (pcm: Int16Array): void {
    const now = performance.now()
    for (const frame of this.agentFrames.push(pcm)) this.queue.push({ pcm: frame, at: now })
    if (this.queue.length > 0) {
      pace(this)
      this.tick(now)
    }
  }

  /** Sends the frames that keep the far end BUFFER_MS ahead; notices when the agent has stopped speaking. */
  tick (now: number): void {
    if (this.ended) return
    // The response's audio ended: its last partial frame goes out padded with silence.
    const last = this.responding ? undefined : this.agentFrames.flush()
    if (last !== undefined) this.queue.push({ pcm: last, at: now })
    while (this.queue.length > 0 && this.playingUntil - now < BUFFER_MS) {
      const { pcm, at } = this.queue.shift()!
      // Due at the first tick after it may go (it arrived, and the far end's buffer fell under BUFFER_MS):
      // late when sent more than one frame after that.
      const due = Math.max(at, this.playingUntil - BUFFER_MS) + FRAME_MS
      if (now - due > FRAME_MS) this.framesLate++
      this.framesSent++
      const startsAt = Math.max(this.playingUntil, now)
      this.recorder?.add('agent', pcm, startsAt - this.startedAt)
      this.playingUntil = startsAt + FRAME_MS
      this.responseSentMs += FRAME_MS
      this.transport.sendAudio(pcm)
    }
    if (this.queue.length === 0) {
      unpace(this)
      if (!this.responding && this.speaking) {
        if (this.playingUntil <= now) this.stoppedSpeaking()
        else setTimeout(() => this.tick(performance.now()), Math.ceil(this.playingUntil - now)).unref()
      }
    }
  }

  private setSpeaking (speaking: boolean): void {
    if (this.speaking === speaking) return
    this.speaking = speaking
    this.transport.send({ type: 'agent_speaking', speaking })
  }

  private stoppedSpeaking (): void {
    this.typedTurn = false
    this.setSpeaking(false)
    if (this.ending !== undefined) this.finish()
    else this.armSilence()
  }

  /** The caller talks over the agent: stop the response, drop its queued audio here and at the far end. */
  private bargeIn (): void {
    // What the caller heard: the response's audio sent, less what the far end still holds.
    this.engine.cancel(Math.max(0, this.responseSentMs - Math.max(0, this.playingUntil - performance.now())))
    if (this.agentText !== '') this.addTranscript({ speaker: 'agent', content: this.agentText, timestamp: this.responseStartedAt })
    this.agentText = ''
    this.queue = []
    this.agentFrames.clear()
    this.playingUntil = 0
    this.responding = false
    this.typedTurn = false
    this.transport.send({ type: 'clear' })
    this.setSpeaking(false)
  }

  // Silence, reminders and the duration limit.

  private armSilence (): void {
    clearTimeout(this.silenceTimer)
    if (this.ending !== undefined || this.ended) return
    const settings = this.settings
    const reminders = Number(settings.reminder_max_count)
    if (this.remindersSent < reminders) {
      this.silenceTimer = setTimeout(() => {
        this.remindersSent++
        this.say(spokenLines(String(settings.language)).reminder)
      }, this.scaled(Number(settings.reminder_after_seconds) * 1000))
    } else {
      this.silenceTimer = setTimeout(() => { void this.end('inactivity') }, this.scaled(Number(settings.silence_timeout_seconds) * 1000))
    }
  }

  /** The caller is active: no time-out runs, and the reminders start over. */
  private clearSilence (): void {
    clearTimeout(this.silenceTimer)
    this.silenceTimer = undefined
    this.remindersSent = 0
  }

  private limitReached (): void {
    if (this.ended) return
    this.clearSilence()
    if (this.speaking) this.bargeIn()
    this.finishWith('max_duration_reached', spokenLines(String(this.settings.language)).timeUp)
  }

  /** Ends (or forwards) the call once the agent has said `words` (or at once), within LAST_WORDS_MS whatever happens. */
  private finishWith (reason: EndReason | 'forward', words?: string): void {
    this.ending = reason
    this.timers.push(setTimeout(() => this.finish(), this.scaled(LAST_WORDS_MS)))
    if (words !== undefined) this.say(words)
    else if (!this.speaking) this.finish()
  }

  private finish (): void {
    if (this.ending === 'forward') void this.forward()
    else if (this.ending !== undefined) void this.end(this.ending)
  }

  // Live tools.

  private async runTool (id: string, name: string, args: string): Promise<void> {
    const tool = this.tools.get(name)
    const event: NonNullable<TranscriptItem['tool']> = { name, type: tool?.type ?? 'unknown', arguments: args }
    let outcome: ToolOutcome | undefined
    try {
      if (tool === undefined) throw new Error(`there is no tool named ${name}`)
      let parsed: unknown
      try {
        parsed = args.trim() === '' ? {} : JSON.parse(args)
      } catch {
        throw new Error('the arguments are not valid JSON')
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('the arguments must be a JSON object')
      outcome = await tool.run(parsed as Record<string, unknown>, { db: this.deps.db, config: this.deps.config, log: this.log, userId: this.call.user_id, callId: this.call.id, signal: this.abort.signal })
      if (outcome.forwardTo !== undefined && this.transport.forward === undefined) {
        outcome = { output: 'Forwarding is not available in this call (a browser call cannot be put through to a phone). Tell the caller and offer to help otherwise.' }
      }
      if (outcome.forwardTo !== undefined && this.ending === undefined) {
        const { reason } = parsed as { reason?: unknown }
        this.forwardTo = { ...outcome.forwardTo, reason: typeof reason === 'string' ? reason : null }
      }
      if (outcome.transferTo !== undefined) outcome = { output: await this.transfer(outcome.transferTo, parsed as Record<string, unknown>) }
      event.output = outcome.output
    } catch (err) {
      event.error = err instanceof Error ? err.message : String(err)
      this.log.warn({ tool: name, reason: event.error }, 'a tool failed during the call')
    }
    if (this.ended) return
    this.addTranscript({ speaker: 'tool', content: `${name}: ${event.error === undefined ? event.output : `error: ${event.error}`}`, timestamp: Date.now(), tool: event })
    if (outcome?.endCall !== undefined) this.finishWith('agent_hangup')
    if (this.forwardTo !== undefined && this.ending === undefined) this.finishWith('forward')
    this.engine.toolResult(id, event.error === undefined ? event.output! : `Error: ${event.error}`)
  }

  /**
   * Puts the caller through to the number the tool named, once the agent has said so: the recording so far
   * is stored and the conversation kept with the call, and the session ends without ending the call. The
   * telephony layer ends the call when the person hangs up, or takes it back to a new session (resume).
   */
  private async forward (): Promise<void> {
    const target = this.forwardTo
    if (this.ended || target === undefined || this.forwarding) return
    this.forwarding = true
    clearTimeout(this.silenceTimer)
    for (const timer of this.timers.splice(0)) clearTimeout(timer)
    const transfer: TransferRecord = { type: target.type, from_agent_id: this.agent.id, to_number: target.phoneNumber, reason: target.reason, timestamp: Date.now(), outcome: 'dialing' }
    this.transfers.push(transfer)
    try {
      const recordingMs = await this.storeRecording()
      if (this.ended) return
      await this.transport.forward!({
        phoneNumber: target.phoneNumber,
        timeoutSeconds: target.timeoutSeconds,
        showCallerNumber: target.showCallerNumber,
        state: { agent_id: this.agent.id, transcript: this.transcript, tokens: this.tokens, speech: this.speech, transfers: this.transfers, recording_ms: recordingMs }
      })
    } catch (err) {
      this.log.warn({ err }, 'the call could not be forwarded; the agent keeps it')
      transfer.outcome = 'failed'
      this.forwarding = false
      this.forwardTo = undefined
      this.ending = undefined
      if (this.hungUp !== undefined) void this.end(this.hungUp)
      else if (!this.ended) this.say(spokenLines(String(this.settings.language)).notForwarded)
      return
    }
    this.ended = true
    this.abort.abort()
    unpace(this)
    this.engine.close()
    await this.closeTools()
    this.transport.close()
    this.log.info({ to: target.phoneNumber }, 'voice session forwarded the call')
    this.resolveDone()
  }

  /** agent_transfer: the session goes on with the target agent's prompt, voice and tools. */
  private async transfer (agentId: string, args: Record<string, unknown>): Promise<string> {
    const { db } = this.deps
    const target = await findAgent(db, this.call.user_id, agentId)
    const llm = target === undefined ? undefined : await findLlm(db, this.call.user_id, target.llm_id)
    if (target === undefined || llm === undefined || target.status !== 'active') throw new Error('the agent to transfer to is not available')
    const setup = await this.setup(target, llm)
    this.engine.update(setup)
    this.transfers.push({
      type: 'agent_transfer',
      from_agent_id: this.agent.id,
      to_agent_id: target.id,
      to_agent_name: target.agent_name,
      reason: typeof args.reason === 'string' ? args.reason : null,
      timestamp: Date.now(),
      outcome: 'transferred'
    })
    this.agent = target
    const begin = llm.begin_message === null || llm.begin_message === '' ? '' : ` Greet the caller with: ${renderText(llm.begin_message, this.call.dynamic_context)}`
    return `The call is now with ${target.agent_name}; you are ${target.agent_name} from now on.${begin}`
  }

  private addTranscript (item: TranscriptItem): void {
    this.transcript.push(item)
    this.transport.send({ type: 'transcript', ...item })
  }

  // The end.

  /** Ends the session and its call (once): recording stored, the call ended through the lifecycle. */
  async end (reason: EndReason): Promise<void> {
    if (this.ended) return await this.done
    this.ended = true
    this.abort.abort()
    clearTimeout(this.silenceTimer)
    for (const timer of this.timers) clearTimeout(timer)
    unpace(this)
    try {
      this.engine?.close()
      await this.closeTools()
      const end = await this.callEnd(reason)
      await endCall(this.deps.db, this.deps, this.call.user_id, this.call.id, end)
    } catch (err) {
      // The deadline job ends the call later; the caller is told now.
      this.log.error({ err }, 'the voice session could not end its call')
    }
    this.transport.send({ type: 'ended', reason, frames_sent: this.framesSent, frames_late: this.framesLate })
    this.transport.close()
    this.log.info({ reason, framesSent: this.framesSent, framesLate: this.framesLate, callerFramesDropped: this.callerPace.dropped }, 'voice session ended')
    this.resolveDone()
  }

  /** Stores the recording up to `untilMs` (since the call started) after the parts stored before it. */
  private saveRecording (untilMs: number): void {
    const pcm = this.recorder?.take(untilMs)
    if (pcm === undefined || pcm.length === 0) return
    const part = { callId: this.call.id, userId: this.call.user_id, pcm: pcmToBuffer(pcm), channels: this.recorder!.channels }
    this.recordingSaved = this.recordingSaved.then(async () => {
      if (await storeRecordingPart(this.deps.db, part)) this.recordingStored += pcm.length / part.channels
    }).catch((err: unknown) => this.log.error({ err }, 'a part of the recording could not be stored'))
  }

  /** Stores the rest of the recording (it ends now: audio sent ahead of the clock was never heard); answers its length in ms (0: none). */
  private async storeRecording (): Promise<number> {
    if (this.recorder === undefined) return 0
    this.recorder.end(Math.max(performance.now(), this.playingUntil) - this.startedAt)
    this.saveRecording(Infinity)
    await this.recordingSaved
    return Math.round(this.recordingStored * 1000 / SAMPLE_RATE)
  }

  private async callEnd (reason: EndReason): Promise<CallEnd> {
    const recordingMs = await this.storeRecording()
    const conversation = { transcript: this.transcript, tokens: this.tokens, speech: this.speech, transfers: this.transfers, recording_ms: recordingMs }
    return toCallEnd(this.deps.config, this.call.id, conversation, { reason })
  }
}
