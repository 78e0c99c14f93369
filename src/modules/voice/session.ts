import type { Logger } from 'pino'
import type { CallRow, TranscriptItem } from '../../db/schema.ts'
import type { CollectedData, Conversation, TransferRecord, TurnTiming } from '../../db/shapes.ts'
import type { DB } from '../../db/database.ts'
import type { JobSender } from '../../jobs/queues.ts'
import type { Mailer } from '../../mail/mailer.ts'
import { providerVoiceId } from '../account/queries.ts'
import type { AgentRow } from '../agents/queries.ts'
import { loadAgentConfig, type AgentConfig } from '../agents/versions.ts'
import { CALL_SETTINGS_DEFAULTS, VOICEMAIL_SETTINGS_DEFAULTS } from '../agents/schemas.ts'
import { findCallRow } from '../calls/queries.ts'
import { answeredByOf, type AnsweredBy } from './signals.ts'
import { endCall, maxDurationMinutes, toCallEnd, type CallEnd } from '../calls/lifecycle.ts'
import { findRecording, storeRecordingPart } from '../calls/recordings.ts'
import { FRAME_MS, Framer, pcmToBuffer, Recorder, SAMPLE_RATE } from './audio.ts'
import type { SessionEvent } from './events.ts'
import { chooseEngine, createEngine, type EngineKind } from './engines/index.ts'
import type { Engine, EngineEvent, EngineSetup } from './engines/types.ts'
import { CALLER_LAG_MS, CALLER_LEAD_MS, CallerPace } from './pacer.ts'
import { loadLive } from '../capabilities/load.ts'
import type { LiveTool, ToolContext, ToolOutcome } from '../capabilities/live.ts'
import { callVariables } from '../calls/variables.ts'
import { collectData } from './collect-data.ts'
import { callInstructions, collectionInstructions, spokenLines } from './prompt.ts'
import { WorkflowRun, type Entered } from '../workflows/run.ts'
import { readWorkflow } from '../workflows/steps.ts'
import { SpeechDetector } from './vad/detector.ts'
import { systemClock, type Clock, type Timer } from './turns/clock.ts'
import { TurnCore } from './turns/core.ts'
import { expectingOf } from './turns/words.ts'
import { renderText } from '../../templates.ts'
import { memoryOf } from '../contacts/contacts.ts'
import { keypadContent, keypadField, keypadTurn, MAX_KEYPAD_RUN } from './keypad.ts'
import { spaced } from '../capabilities/types/send-dtmf.ts'

// The call adapter of one live call (DESIGN.md, "Conversation core"): loads the agent, its configuration and
// tools, wires the transport, the engine, the speech detector and the turn core (turns/core.ts, which takes every
// turn-taking decision), keeps the conversation (transcript, usage, transfers, turn timings), stores the
// recording as the call goes, and handles live tools, forwarding and the duration limit. It starts from a
// `started` call and ends it only through the calls module's endCall, so analysis, credits and deliveries run as
// for every other call.

export interface SessionDeps extends JobSender { db: DB, log: Logger, mailer: Mailer }

export type { SessionEvent }

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
  /**
   * Sends keypad tones to the other side (an IVR: send_dtmf); undefined when the transport cannot. A transport that
   * must take the call off its stream to do so (Twilio's <Play digits>, `keysLeaveStream`) is given the conversation
   * to keep with the call, as `forward` is; the stream that takes the call back goes on with it.
   */
  sendDigits?: (digits: string, state: Conversation) => Promise<void>
  /** Sending tones ends this stream (the call comes back on a new one): the session hands its conversation over. */
  keysLeaveStream?: boolean
}

/** Why a session ended, as the call's disconnection_reason. */
export type EndReason = 'user_hangup' | 'agent_hangup' | 'inactivity' | 'max_duration_reached' | 'runtime_error' | 'protocol_error' | 'stream_timeout' | 'stream_dropped' | 'server_shutdown' |
  /** An answering machine answered (the agent hung up, or left its message after the beep) and a fax machine. */
  'voicemail' | 'fax_detected'

/** How a session opens: on a started call (the defaults), or as a typed test conversation (text-run.ts). */
export interface OpenOptions {
  engine?: EngineKind
  /** The conversation so far: a call taken back after forwarding (the agent says it could not put the caller through), or a test chat's next turn (`quiet`). */
  resume?: Conversation
  quiet?: boolean
  clock?: Clock
  /** The agent version to run, loaded already (default: the call's agent_version, loaded). */
  config?: AgentConfig
  /** Tool function name or capability id → the output it answers instead of running (a test's mocks). */
  mocks?: Record<string, string>
  /** Takes the conversation's end instead of the calls module (a test conversation has no call record). */
  onEnd?: (end: { reason: EndReason, conversation: Conversation }) => Promise<void>
}

export interface ForwardRequest {
  phoneNumber: string
  /** How long the number rings before the agent takes the call back. */
  timeoutSeconds: number
  /** Show the caller's own number to the person called (else the agent's number). */
  showCallerNumber: boolean
  state: Conversation
  /** A warm transfer: the person hears `summary` (in `language`) and accepts before the caller is connected. */
  warm?: { summary: string, holdMusic: boolean, language: string }
}

/** An agent's call_settings with the defaults of the members it lacks. */
const settingsOf = (agent: AgentRow) => ({ ...CALL_SETTINGS_DEFAULTS, ...agent.call_settings })

/** A tool running longer than this gets a filler line ("One moment, please."), not dead air. */
const FILLER_AFTER_MS = 1000
/** How long the session waits for the agent's last words (goodbye, end_call) before it hangs up anyway. */
const LAST_WORDS_MS = 15_000
/** The carrier's detection gives up after its own time-out (detection_timeout_seconds); a verdict that never comes counts as `unknown` this much later. */
const VERDICT_GRACE_MS = 5000
/** The recording is stored this often while the call runs (about 64 KB a time), not held until its end. */
const RECORDING_SAVE_MS = 2000
/** What is stored lies this far behind now: no audio is placed there any more (caller audio lags by CALLER_LAG_MS at most). */
const RECORDING_SETTLED_MS = CALLER_LAG_MS + 500

export class Session {
  readonly call: CallRow
  private readonly deps: SessionDeps
  private readonly transport: Transport
  private readonly log: Logger
  private readonly clock: Clock
  private agent!: AgentRow
  private version = 0
  private readonly options: OpenOptions
  private engine!: Engine
  private kind!: EngineKind
  private core!: TurnCore
  private tools = new Map<string, LiveTool>()
  /** The agent version in charge and its live tools as loaded (a workflow step offers some of them). */
  private running!: { config: AgentConfig, tools: LiveTool[], instructions: string }
  /** The call's agent's workflow (docs/workflows.md): undefined when it talks from its single prompt. */
  private workflow: WorkflowRun | undefined
  /** The workflow state of a conversation resumed with another agent in charge (after an agent_transfer): kept as it was. */
  private keptWorkflow: Conversation['workflow']
  private closeTools: () => Promise<void> = async () => {}
  private readonly abort = new AbortController()
  /** When the recording starts (clock time): earlier than now for a call taken back after forwarding. */
  private startedAt: number
  private readonly transcript: TranscriptItem[] = []
  private readonly tokens: Record<string, { input: number, output: number }> = {}
  private readonly speech = { recognised: 0, synthesised: 0 }
  private readonly transfers: TransferRecord[] = []
  private readonly turns: TurnTiming[] = []
  /** What the agent collected so far (collect-data.ts): kept across a forwarding and an agent_transfer. */
  private readonly collected: CollectedData = {}
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
  /** Caller audio given to the detector (ms) and the clock time where it ends: the detector's times map to the clock. */
  private streamMs = 0
  private streamEndsAt = 0
  private readonly timers: Timer[] = []
  /** Set when the call is to end (or be forwarded) once the agent's current words are out. */
  private ending: EndReason | 'forward' | undefined
  private forwardTo: (NonNullable<ToolOutcome['forwardTo']> & { reason: string | null, summary: string | null }) | undefined
  private ended = false
  private forwarding = false
  private hungUp: EndReason | undefined
  /** The caller's run of keypad presses being gathered (keypad), and the pause that ends it. */
  private keys = ''
  private keysTimer: Timer | undefined
  /**
   * Caller audio heard before the engine has started, kept for it: only on the stream that takes a call back after
   * the agent sent keys, where the other side (a phone menu) speaks at once; elsewhere it is dropped, as before.
   */
  private early: Int16Array[] | undefined
  private earlySamples = 0
  /**
   * The begin message held on an outbound phone call (docs/voice.md, "Waiting for hello"): until the callee has
   * said their first words (`hello`) or the wait is over (`waited`), and while answering-machine detection has no
   * verdict (`amd` pending). The callee's speech goes here, not to the turn core: a hello is no turn to answer.
   */
  private greeting: { begin: string | undefined, hello: boolean, waited: boolean, speaking: boolean, amd: boolean, timers: Timer[] } | undefined
  /** The detection's verdict as it came (a signal, or stored with the call before the session listened). */
  private verdict: AnsweredBy | undefined
  /** The session reached its greeting: a verdict is acted on at once from now on (before, the greeting takes it). */
  private greeted = false
  /** The carrier answered the call but the agent never talked with anyone (a machine): the call connected all the same. */
  private machine = false
  readonly done: Promise<void>
  private resolveDone!: () => void

  private constructor (deps: SessionDeps, call: CallRow, transport: Transport, options: OpenOptions) {
    if (options.resume?.keys_sent !== undefined) this.early = []
    this.deps = deps
    this.call = call
    this.transport = transport
    this.options = options
    const clock = options.clock ?? systemClock
    this.clock = clock
    this.startedAt = clock.now()
    this.log = deps.log.child({ callId: call.id })
    this.done = new Promise((resolve) => { this.resolveDone = resolve })
  }

  /**
   * Opens the session of a started call on a transport; the conversation begins (engine connected, begin
   * message) in the background. Never throws: a session that cannot start ends its call `runtime_error`.
   */
  static open (deps: SessionDeps, call: CallRow, transport: Transport, options: OpenOptions = {}): Session {
    const session = new Session(deps, call, transport, options)
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

  /** The session is over or ends once the agent's last words are out (a typed conversation then waits for `ended`). */
  get closing (): boolean {
    return this.ended || this.ending !== undefined
  }

  /** The time scale of timers (CALL_TIME_SCALE: tests shorten reminders, time-outs and limits with it). */
  private scaled (ms: number): number {
    return Math.max(1, Math.round(ms * this.deps.config.callTimeScale))
  }

  private get settings () {
    return settingsOf(this.agent)
  }

  private get language (): string {
    return String(this.settings.language)
  }

  private async start (engine: EngineKind | undefined, resume: Conversation | undefined): Promise<void> {
    const { db, config } = this.deps
    // The version the call runs (a conversation going on after an agent_transfer: the version it transferred to).
    const loaded = this.options.config ?? await loadAgentConfig(db, this.call.user_id, resume?.agent_id ?? this.call.agent_id,
      resume === undefined ? this.call.agent_version : resume.agent_version ?? null)
    if (loaded === undefined) throw new Error('the call\'s agent (or the version it runs) no longer exists')
    const { agent, llm } = loaded
    this.agent = agent
    this.version = loaded.version
    this.kind = engine ?? chooseEngine(config.voice, llm)
    const begin = llm.begin_message === null || llm.begin_message === '' ? undefined : renderText(llm.begin_message, this.call.dynamic_context)
    // A carrier's outbound call (not a simulated one): someone or something picked up, and may not have spoken yet.
    // Held from here, so that a hello heard while the engine connects is the greeting's too.
    if (this.call.call_type === 'phone' && this.call.direction === 'outbound' && this.call.carrier !== null && resume === undefined && this.options.onEnd === undefined) {
      this.greeting = { begin, hello: false, waited: false, speaking: false, amd: false, timers: [] }
    }
    this.detector = await SpeechDetector.create({
      sensitivity: Math.max(0.05, agent.interruption_sensitivity),
      onTurn: (edge, atMs) => { if (!this.ended) this.callerSpeech(edge, this.streamEndsAt - (this.streamMs - atMs)) },
      onError: (err) => {
        this.log.error({ err }, 'speech detection failed; the call ends')
        this.hangup('runtime_error')
      }
    })
    const settings = this.settings
    this.providerTurns = this.kind === 'realtime' && llm.turn_detection.type !== 'switchboard'
    const words = this.kind === 'cascade' && config.voice.stt.provider !== 'batch'
    this.core = new TurnCore({
      clock: this.clock,
      sensitivity: agent.interruption_sensitivity,
      language: this.language,
      responsiveness: Number(settings.responsiveness),
      words,
      providerTurns: this.providerTurns,
      early: words,
      detector: this.detector,
      idle: {
        reminderMs: this.scaled(Number(settings.reminder_after_seconds) * 1000),
        reminders: Number(settings.reminder_max_count),
        timeoutMs: this.scaled(Number(settings.silence_timeout_seconds) * 1000)
      }
    }, {
      send: (event) => this.transport.send(event),
      sendAudio: (frame, startsAt) => {
        this.recorder?.add('agent', frame, startsAt - this.startedAt)
        this.transport.sendAudio(frame)
      },
      answer: () => this.engine.endOfTurn(),
      prepare: (text) => this.engine.prepare?.(text),
      cancel: (heardMs) => this.engine.cancel(heardMs),
      forget: () => this.engine.forget?.(),
      remind: () => this.say(spokenLines(this.language).reminder),
      idle: () => { void this.end('inactivity') },
      quiet: () => this.finish(),
      said: (content, at) => this.addTranscript({ speaker: 'agent', content, timestamp: at }),
      timed: (timing) => this.turns.push(timing),
      // The answer cut off is the last timed one: later answers have sent nothing yet.
      interrupted: () => { const turn = this.turns.at(-1); if (turn !== undefined) turn.interrupted = true }
    })
    if (settings.recording_enabled !== false && (this.kind === 'realtime' || this.kind === 'cascade')) {
      // A call taken back after forwarding: its recording goes on after what was stored before.
      const earlier = resume === undefined || resume.recording_ms === 0 ? undefined : await findRecording(db, this.call.user_id, this.call.id)
      // Ended meanwhile (a hang-up): no timer may start after end() cleared them.
      if (this.ended) return
      this.recordingStored = earlier === undefined ? 0 : earlier.pcmBytes / 2 / earlier.channels
      this.startedAt -= this.recordingStored * 1000 / SAMPLE_RATE
      // Two tracks, unless it goes on after a mono recording stored before two tracks were recorded.
      this.recorder = new Recorder(maxDurationMinutes(agent) * 60_000 + LAST_WORDS_MS, this.recordingStored, earlier?.channels)
      this.every(RECORDING_SAVE_MS, () => this.saveRecording(this.clock.now() - this.startedAt - RECORDING_SETTLED_MS))
    }
    if (resume !== undefined) this.resume(resume)
    this.engine = createEngine(this.kind, config.voice, (event) => this.onEngine(event), this.log)
    const entered = await this.startWorkflow(agent, resume)
    const setup = await this.setup(loaded)
    for (const step of entered) this.addStep(step)
    if (this.ended) return
    // Keys the agent sent before this stream (send_dtmf on Twilio): the model is told, since its tool call was the last stream's.
    const sent = resume?.keys_sent === undefined ? [] : [{ role: 'user' as const, text: `(You sent the keys ${spaced(resume.keys_sent)} on the keypad. The other side answers next.)` }]
    await this.engine.start(resume === undefined ? setup : { ...setup, history: [...this.history(), ...sent] })
    if (this.ended) return
    const early = this.early ?? []
    this.early = undefined
    for (const pcm of early) this.audio(pcm)
    this.transport.send({ type: 'ready', call_id: this.call.id, agent_name: agent.agent_name, mode: this.kind === 'simulator' || this.kind === 'text' ? 'text' : 'voice', engine: this.kind, sample_rate: 16_000 })
    // The limit counts from the call's start (make-web-call), as the deadline job does.
    const left = maxDurationMinutes(agent) * 60_000 - (Date.now() - this.call.start_timestamp.getTime())
    this.timers.push(this.clock.after(this.scaled(Math.max(0, left)), () => this.limitReached()))
    if (resume?.keys_sent !== undefined) return this.core.awaitCaller()
    if (resume !== undefined && this.options.quiet !== true) return this.say(spokenLines(this.language).notForwarded)
    if (resume !== undefined) return this.core.awaitCaller()
    if (this.greeting !== undefined) return await this.awaitHello(this.greeting)
    this.greeted = true
    if (begin !== undefined) this.say(begin)
    else this.core.awaitCaller()
  }

  // Voicemail and the wait for hello (outbound phone calls only: docs/voice.md).

  /**
   * Holds the begin message of an outbound phone call until the callee said hello (or wait_for_hello_seconds passed)
   * and, with voicemail detection on, until the carrier's detection has a verdict (or gave up).
   */
  private async awaitHello (greeting: NonNullable<Session['greeting']>): Promise<void> {
    // Both carriers place the call with detection when it is on (telephony/calls.ts placeCall).
    const detection = this.voicemail.detection && (this.call.carrier === 'twilio' || this.call.carrier === 'telnyx')
    // Without a begin message there is nothing to hold for a hello: the callee speaks first as before.
    const waitMs = this.providerTurns || greeting.begin === undefined ? 0 : Number(this.settings.wait_for_hello_seconds) * 1000
    greeting.waited = waitMs <= 0
    greeting.amd = detection
    if (waitMs > 0) {
      greeting.timers.push(this.clock.after(this.scaled(waitMs), () => { greeting.waited = true; this.greet() }))
      // Speech that never ends (a television, a line's noise) holds the agent twice the wait at most.
      greeting.timers.push(this.clock.after(this.scaled(2 * waitMs), () => { greeting.speaking = false; this.greet() }))
    }
    if (detection) {
      greeting.timers.push(this.clock.after(this.scaled(this.voicemail.detection_timeout_seconds * 1000 + VERDICT_GRACE_MS), () => this.answeredBy('unknown')))
      // A verdict that came before this session listened (it is stored with the call before it is signalled).
      const stored = answeredByOf((await findCallRow(this.deps.db, this.call.id))?.answered_by ?? null)
      if (stored !== undefined) this.verdict ??= stored
    }
    this.greeted = true
    if (this.ended) return
    if (this.verdict !== undefined) this.actOn(this.verdict)
    else this.greet()
  }

  /** The agent's voicemail_settings (defaults for members it lacks). */
  private get voicemail () {
    return { ...VOICEMAIL_SETTINGS_DEFAULTS, ...this.agent.voicemail_settings }
  }

  /** The caller's speech: the turn core's, or the callee's hello while the greeting is held. */
  private callerSpeech (edge: 'start' | 'end', at?: number): void {
    const greeting = this.greeting
    if (greeting === undefined) return this.core.speech(edge, at)
    greeting.speaking = edge === 'start'
    if (edge === 'end') greeting.hello = true
    this.greet()
  }

  /** Speaks the begin message once nothing holds it any more. */
  private greet (): void {
    const greeting = this.greeting
    if (greeting === undefined || this.ended || !this.greeted || greeting.amd || greeting.speaking || !(greeting.hello || greeting.waited)) return
    this.releaseGreeting(greeting.begin !== undefined)
    if (greeting.begin !== undefined) return this.say(greeting.begin)
    if (!greeting.hello) return this.core.awaitCaller()
    // No begin message, and the callee spoke while the verdict was awaited: what they said is the turn to answer.
    this.core.respond()
    this.engine.endOfTurn()
  }

  /** The greeting is no longer held: its timers stop; `forget`: the callee's hello is no turn of the conversation. */
  private releaseGreeting (forget: boolean): void {
    for (const timer of this.greeting?.timers.splice(0) ?? []) timer.cancel()
    this.greeting = undefined
    if (forget) this.engine.forget?.()
  }

  /**
   * The carrier's answering-machine detection: a person (or no verdict: `unknown`) hears the agent once they said
   * hello; a machine (its greeting ended: the beep) gets the agent's message or a hang-up; a fax, a hang-up.
   */
  answeredBy (kind: AnsweredBy): void {
    if (this.ended || this.verdict !== undefined) return
    this.verdict = kind
    if (this.greeted) this.actOn(kind)
  }

  private actOn (kind: AnsweredBy): void {
    if (this.ended || this.closing) return
    const { action, message } = this.voicemail
    const text = renderText(message, this.call.dynamic_context).trim()
    const leave = kind === 'machine' && action === 'leave_message' && text !== ''
    const outcome = kind === 'machine' ? (leave ? 'leaves the message' : 'hangs up') : kind === 'fax' ? 'hangs up' : 'talks'
    this.addTranscript({
      speaker: 'tool',
      content: `answering_machine_detection: ${kind}; the agent ${outcome}`,
      timestamp: Date.now(),
      tool: { name: 'answering_machine_detection', type: 'voicemail', arguments: JSON.stringify({ answered_by: kind }), output: `the agent ${outcome}` }
    })
    if (kind === 'human' || kind === 'unknown') {
      if (this.greeting !== undefined) this.greeting.amd = false
      return this.greet()
    }
    this.machine = true
    if (this.greeting !== undefined) this.releaseGreeting(true)
    // Words already playing (a verdict after the detection's time-out) stop: a machine is no one to talk to.
    this.core.interrupt()
    this.finishWith(kind === 'fax' ? 'fax_detected' : 'voicemail', leave ? text : undefined)
  }

  /** Runs `fn` every `ms` until the session ends. */
  private every (ms: number, fn: () => void): void {
    const timer = this.clock.after(ms, () => {
      this.timers.splice(this.timers.indexOf(timer), 1)
      fn()
      if (!this.ended) this.every(ms, fn)
    })
    this.timers.push(timer)
  }

  /** A call taken back after a forwarding nobody answered: the conversation carries on (the recording: see start). */
  private resume (state: Conversation): void {
    this.transcript.push(...state.transcript)
    Object.assign(this.tokens, state.tokens)
    this.speech.recognised = state.speech.recognised
    this.speech.synthesised = state.speech.synthesised
    this.transfers.push(...state.transfers)
    this.turns.push(...state.turns ?? [])
    Object.assign(this.collected, state.collected_data)
  }

  /**
   * The workflow of the call's agent, read through its schema (a stored one that no longer matches: the call runs
   * from the single prompt, with a warning), entered at its start; a resumed conversation goes on where it was.
   */
  private async startWorkflow (agent: AgentRow, resume: Conversation | undefined): Promise<Entered[]> {
    this.keptWorkflow = resume?.workflow
    if (agent.id !== this.call.agent_id || agent.workflow === null) return []
    const workflow = readWorkflow(agent.workflow)
    if (workflow === undefined) {
      this.log.warn({ agentId: agent.id }, 'the agent\'s stored workflow does not match its schema; the call runs from the single prompt')
      return []
    }
    this.workflow = new WorkflowRun(workflow, resume?.workflow, () => Date.now())
    // A test's mocks answer API call steps by their ids too.
    this.workflow.mocks = this.options.mocks ?? {}
    if (resume?.workflow !== undefined) return []
    return (await this.workflow.enter(workflow.start, this.toolContext())).entered
  }

  /** What was said so far, for an engine that starts mid-call. */
  private history (): NonNullable<EngineSetup['history']> {
    return this.transcript.flatMap((item) => item.speaker === 'user' || item.speaker === 'agent'
      ? [{ role: item.speaker === 'user' ? 'user' as const : 'assistant' as const, text: item.content }]
      : [])
  }

  /** The engine's setup for an agent version: prompt with variables, the session's own lines, voice and live tools. */
  private async setup (config: AgentConfig): Promise<EngineSetup> {
    const { tools: toolRows, actions } = config
    await this.closeTools()
    const loaded = await loadLive(this.toolContext(), { tools: toolRows, actions })
    const mocks = this.options.mocks ?? {}
    for (const tool of loaded.tools) {
      const mock = mocks[tool.spec.name] ?? (tool.capabilityId === undefined ? undefined : mocks[tool.capabilityId])
      if (mock !== undefined) tool.run = async () => ({ output: mock })
    }
    this.closeTools = loaded.close
    for (const { type, name, arguments: args, output, error } of loaded.events) {
      this.addTranscript({ speaker: 'tool', content: `${name}: ${error === undefined ? output ?? '' : `error: ${error}`}`, timestamp: Date.now(), tool: { name, type, arguments: JSON.stringify(args), ...(error === undefined ? { output: output ?? '' } : { error }) } })
    }
    this.running = { config, tools: loaded.tools, instructions: loaded.instructions }
    return await this.engineSetup()
  }

  /** The engine's setup from the loaded tools: the agent's own, or those of the workflow step the call is in and its functions. */
  private async engineSetup (): Promise<EngineSetup> {
    const { db } = this.deps
    const { config: { agent, llm }, tools: loadedTools, instructions } = this.running
    const settings = settingsOf(agent)
    const language = String(settings.language)
    // A workflow is its own agent's: after an agent_transfer the other agent talks from its own prompt.
    const step = agent.id === this.call.agent_id ? this.workflow?.setup(loadedTools, this.toolContext().variables()) : undefined
    const agentTools = step?.tools ?? loadedTools
    // Data collection: this agent's fields are asked for; what earlier agents of the call collected stays.
    const collect = collectData(agent, language, this.collected, agentTools.map((tool) => tool.spec.name))
    const tools = collect === undefined ? agentTools : [...agentTools, collect.tool]
    this.tools = new Map(tools.map((tool) => [tool.spec.name, tool]))
    const stepCollect = step?.collect === undefined ? '' : collectionInstructions(language, step.collect.fields, step.collect.tool, this.workflow!.collected())
    const sensitivity = step?.interruptionSensitivity ?? agent.interruption_sensitivity
    // The step's (or, leaving it, the agent's) sensitivity: how speech over the agent is detected and confirmed.
    this.core.setSensitivity(sensitivity)
    this.detector.setSensitivity(Math.max(0.05, sensitivity))
    return {
      instructions: [renderText(llm.general_prompt, this.call.dynamic_context), callInstructions(language, this.call.call_type),
        await memoryOf(db, this.call, agent), instructions, collect?.instructions ?? '', step?.instructions ?? '', stepCollect].filter((s) => s !== '').join('\n\n'),
      tools: tools.map((tool) => tool.spec),
      toolTypes: Object.fromEntries(tools.map((tool) => [tool.spec.name, tool.type])),
      language,
      sttLanguages: (settings.stt_languages as string[] | undefined) ?? [],
      voice: await providerVoiceId(db, step?.voiceId ?? agent.voice_id) ?? 'alloy',
      model: llm.model,
      temperature: llm.temperature,
      maxTokens: llm.max_tokens,
      turnDetection: llm.turn_detection,
      interruptible: sensitivity > 0
    }
  }

  // Input from the transport.

  /** Caller audio: PCM16 mono 16 kHz of any length; cut into 20 ms frames here. */
  audio (pcm: Int16Array): void {
    if (this.early !== undefined && !this.ended) {
      this.early.push(pcm)
      this.earlySamples += pcm.length
      // The latest CALLER_LEAD_MS of it: given at once, what runs further ahead of the clock would be dropped anyway.
      while (this.earlySamples > CALLER_LEAD_MS * SAMPLE_RATE / 1000) this.earlySamples -= this.early.shift()!.length
      return
    }
    if (this.ended || this.engine === undefined) return
    for (const frame of this.callerFrames.push(pcm)) this.frame(frame)
  }

  private frame (frame: Int16Array): void {
    // Placed by the wall clock: audio sent faster than real time is dropped, and the recording follows the call's real length.
    const at = this.callerPace.place(this.clock.now(), FRAME_MS)
    if (at === undefined) return
    this.recorder?.add('caller', frame, at - this.startedAt)
    this.engine.audio(frame)
    if (this.providerTurns) return
    this.streamMs += FRAME_MS
    this.streamEndsAt = at + FRAME_MS
    this.detector.push(frame)
  }

  /**
   * A typed turn of the caller; false when it is refused because the agent is still answering the last one
   * (one typed turn at a time, so that a burst of them cannot run up dozens of model responses).
   */
  text (content: string): boolean {
    if (this.ended || this.engine === undefined || this.ending !== undefined) return true
    if (!this.core.typed()) return false
    this.addTranscript({ speaker: 'user', content, timestamp: Date.now() })
    // Before the engine runs: the simulator answers within userText.
    this.core.respond()
    this.engine.userText(content)
    return true
  }

  /**
   * The caller pressed keys (one or more of 0-9 * # A-D, checked by the transport), in order. A run of them is one
   * caller turn: it ends at `#` or after VOICE_KEYPAD_PAUSE_MS without a key; the first key stops the agent talking.
   */
  keypad (digits: string): void {
    if (this.ended || this.engine === undefined || this.ending !== undefined) return
    this.core.interrupt()
    for (const key of digits) {
      // Keys past the run's bound are dropped: a flood of tones is one bounded turn.
      if (this.keys.length < MAX_KEYPAD_RUN) this.keys += key
      if (key === '#') this.keysDone()
    }
    this.keysTimer?.cancel()
    if (this.keys !== '') this.keysTimer = this.clock.after(this.scaled(this.deps.config.voice.keypadPauseMs), () => this.keysDone())
  }

  /** A run of keys ended: to the transcript and the model as a caller turn; a run ended with `#` may fill a keypad field. */
  private keysDone (): void {
    this.keysTimer?.cancel()
    if (this.ended || this.keys === '') return
    // The agent is still answering the last typed turn or run: the keys wait for the next pause (and gather meanwhile).
    if (!this.core.typed()) {
      this.keysTimer = this.clock.after(this.scaled(this.deps.config.voice.keypadPauseMs), () => this.keysDone())
      return
    }
    const keys = this.keys
    this.keys = ''
    const fill = this.agent.is_data_collection_active ? keypadField(this.agent.data_retrieval, this.collected, keys) : undefined
    if (fill !== undefined) this.collected[fill.field] = fill.value
    this.addTranscript({ speaker: 'user', content: keypadContent(keys), timestamp: Date.now(), keypad: keys })
    this.core.respond()
    this.engine.userText(keypadTurn(keys, fill?.field))
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
    switch (event.type) {
      case 'audio': return this.core.audio(event.pcm)
      case 'agent_text': return this.core.text(event.delta)
      case 'response_done': return this.core.done(event.text)
      case 'caller_speech': return this.callerSpeech(event.speaking ? 'start' : 'end')
      case 'user_text': {
        const at = this.core.recognised(event.text)
        if (event.text !== '') this.addTranscript({ speaker: 'user', content: event.text, timestamp: at })
        return
      }
      case 'user_partial': return this.greeting === undefined ? this.core.words(event.text, event.final) : undefined
      case 'stages': return this.core.stages(event)
      case 'words': return this.core.hearWords(event.streaming)
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

  private say (text: string): void {
    this.core.respond()
    this.engine.say(text)
  }

  // The duration limit and the end of the agent's last words.

  private limitReached (): void {
    if (this.ended) return
    this.core.interrupt()
    this.finishWith('max_duration_reached', spokenLines(this.language).timeUp)
  }

  /** Ends (or forwards) the call once the agent has said `words` (or at once), within LAST_WORDS_MS whatever happens. */
  private finishWith (reason: EndReason | 'forward', words?: string): void {
    this.ending = reason
    this.core.closing = true
    this.timers.push(this.clock.after(this.scaled(LAST_WORDS_MS), () => this.finish()))
    if (words !== undefined) this.say(words)
    else if (!this.core.speaking) this.finish()
  }

  private finish (): void {
    if (this.ending === 'forward') void this.forward()
    else if (this.ending !== undefined) void this.end(this.ending)
  }

  // Live tools.

  /** What a live tool or action may use: the call's variables and other party as they are known now. */
  private toolContext (): ToolContext {
    // What data collection saved and the workflow's variables by their own names; the call's built-in ones keep theirs.
    const variables = () => ({ ...this.call.dynamic_context, ...this.collected, ...this.workflow?.variables, ...callVariables(this.call) })
    const { customer_email: email, customer_phone: phone } = this.call.dynamic_context
    return {
      db: this.deps.db,
      config: this.deps.config,
      log: this.log,
      mailer: this.deps.mailer,
      userId: this.call.user_id,
      callId: this.call.id,
      signal: this.abort.signal,
      language: this.language,
      variables,
      customer: {
        phone: this.call.call_type === 'phone' ? (this.call.direction === 'inbound' ? this.call.call_from : this.call.call_to) : typeof phone === 'string' && phone !== '' ? phone : null,
        email: typeof email === 'string' && email !== '' ? email : null
      }
    }
  }

  private async runTool (id: string, name: string, args: string): Promise<void> {
    const tool = this.tools.get(name)
    const event: NonNullable<TranscriptItem['tool']> = { name, type: tool?.type ?? 'unknown', arguments: args }
    let outcome: ToolOutcome | undefined
    let entered: Entered[] = []
    try {
      if (tool === undefined) throw new Error(`there is no tool named ${name}`)
      let parsed: unknown
      try {
        parsed = args.trim() === '' ? {} : JSON.parse(args)
      } catch {
        throw new Error('the arguments are not valid JSON')
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('the arguments must be a JSON object')
      const filler = this.clock.after(this.scaled(FILLER_AFTER_MS), () => {
        // Only into silence: words still playing (the answer's start) are no dead air.
        if (!this.ended && this.core.playingUntil <= this.clock.now()) this.engine.hold?.(spokenLines(this.language).moment)
      })
      try {
        outcome = await tool.run(parsed as Record<string, unknown>, this.toolContext())
      } finally {
        filler.cancel()
      }
      // A workflow's function moved the call: the next step's action steps run, and what they ask for (an end, a transfer) is done below.
      if (outcome.step !== undefined && this.workflow !== undefined && !this.ended) {
        const moved = await this.workflow.enter(outcome.step, this.toolContext())
        entered = moved.entered
        outcome = { ...moved.outcome, output: [outcome.output, moved.output].filter((text) => text !== '').join(' ') }
        this.engine.update(await this.engineSetup())
      }
      if (outcome.forwardTo !== undefined && this.transport.forward === undefined) {
        outcome = { output: 'Forwarding is not available in this call (a browser call cannot be put through to a phone). Tell the caller and offer to help otherwise.' }
      }
      if (outcome.forwardTo !== undefined && this.ending === undefined) {
        const { reason, summary } = parsed as { reason?: unknown, summary?: unknown }
        this.forwardTo = { ...outcome.forwardTo, reason: typeof reason === 'string' ? reason : null, summary: typeof summary === 'string' ? summary : null }
      }
      if (outcome.transferTo !== undefined) outcome = { output: await this.transfer(outcome.transferTo, parsed as Record<string, unknown>) }
      if (outcome.sendDigits !== undefined && this.transport.sendDigits === undefined) {
        outcome = { output: 'Sending keypad tones is not available in this call. Tell the caller.' }
      } else if (outcome.sendDigits !== undefined && this.transport.keysLeaveStream !== true) {
        await this.transport.sendDigits!(outcome.sendDigits, this.conversation(0))
      }
      event.output = outcome.output
    } catch (err) {
      event.error = err instanceof Error ? err.message : String(err)
      this.log.warn({ tool: name, reason: event.error }, 'a tool failed during the call')
    }
    if (this.ended) return
    const item: TranscriptItem = { speaker: 'tool', content: `${name}: ${event.error === undefined ? event.output : `error: ${event.error}`}`, timestamp: Date.now(), tool: event }
    this.addTranscript(item)
    for (const step of entered) this.addStep(step)
    if (outcome?.sendDigits !== undefined && event.error === undefined && this.transport.keysLeaveStream === true) return await this.sendKeysAway(id, outcome.sendDigits, item)
    if (outcome?.endCall !== undefined) this.finishWith('agent_hangup')
    if (this.forwardTo !== undefined && this.ending === undefined) this.finishWith('forward')
    this.engine.toolResult(id, event.error === undefined ? event.output! : `Error: ${event.error}`)
  }

  /** The conversation so far, without a recording (a typed test conversation's state between turns). */
  conversationSoFar (): Conversation {
    return this.conversation(0)
  }

  /** The conversation so far, as kept with a forwarded call and turned into the call's end. */
  private conversation (recordingMs: number): Conversation {
    const workflow = this.workflow?.state() ?? this.keptWorkflow
    return {
      // The agent is loaded by start(): a callee who hangs up at once ends the session before that.
      agent_id: (this.agent as AgentRow | undefined)?.id ?? this.call.agent_id, agent_version: this.version, transcript: this.transcript, tokens: this.tokens, speech: this.speech, transfers: this.transfers, turns: this.turns, recording_ms: recordingMs, collected_data: this.collected,
      ...(workflow === undefined ? {} : { workflow })
    }
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
    this.core.stop()
    for (const timer of this.timers.splice(0)) timer.cancel()
    const transfer: TransferRecord = { type: target.type, from_agent_id: this.agent.id, to_number: target.phoneNumber, reason: target.reason, timestamp: Date.now(), outcome: 'dialing', mode: target.warm === undefined ? 'blind' : 'warm' }
    this.transfers.push(transfer)
    try {
      const recordingMs = await this.storeRecording()
      if (this.ended) return
      await this.transport.forward!({
        phoneNumber: target.phoneNumber,
        timeoutSeconds: target.timeoutSeconds,
        showCallerNumber: target.showCallerNumber,
        state: this.conversation(recordingMs),
        ...(target.warm !== undefined && { warm: { summary: target.summary ?? target.reason ?? '', holdMusic: target.warm.holdMusic, language: this.language } })
      })
    } catch (err) {
      this.log.warn({ err }, 'the call could not be forwarded; the agent keeps it')
      transfer.outcome = 'failed'
      this.forwarding = false
      this.forwardTo = undefined
      this.ending = undefined
      this.core.closing = false
      if (this.hungUp !== undefined) void this.end(this.hungUp)
      else if (!this.ended) this.say(spokenLines(this.language).notForwarded)
      return
    }
    await this.leave()
    this.log.info({ to: target.phoneNumber }, 'voice session forwarded the call')
  }

  /**
   * send_dtmf on a transport whose tones take the call off its stream (Twilio): the recording so far is stored and
   * the conversation kept with the call, the carrier plays the keys, and the stream that takes the call back goes on
   * with the conversation (start, `keys_sent`). Should the carrier refuse, the model hears why and the call goes on.
   */
  private async sendKeysAway (toolCallId: string, digits: string, item: TranscriptItem): Promise<void> {
    // The tool's item says what became of the keys: the conversation handed over holds it as sent.
    const failed = (problem: string) => {
      const { name, type, arguments: args } = item.tool!
      item.tool = { name, type, arguments: args, error: problem }
      item.content = `${name}: error: ${problem}`
      this.engine.toolResult(toolCallId, `Error: ${problem}`)
    }
    if (this.forwarding) return failed('the call is being moved already')
    this.forwarding = true
    this.keysTimer?.cancel()
    try {
      const recordingMs = await this.storeRecording()
      if (this.ended) return
      await this.transport.sendDigits!(digits, { ...this.conversation(recordingMs), keys_sent: digits })
    } catch (err) {
      this.log.warn({ err }, 'the keys could not be sent; the agent keeps the call')
      this.forwarding = false
      if (this.hungUp !== undefined) return await this.end(this.hungUp)
      if (!this.ended) failed(`the keys could not be sent (${err instanceof Error ? err.message : String(err)})`)
      return
    }
    await this.leave()
    this.log.info('voice session handed the call over to send keys')
  }

  /** The call went on elsewhere (forwarded, or sending keys): this session ends without ending it. */
  private async leave (): Promise<void> {
    this.ended = true
    this.core.stop()
    for (const timer of this.timers.splice(0)) timer.cancel()
    this.keysTimer?.cancel()
    this.abort.abort()
    this.engine.close()
    await this.closeTools()
    this.transport.close()
    this.resolveDone()
  }

  /** agent_transfer: the session goes on with the target agent's prompt, voice and tools (its latest version). */
  private async transfer (agentId: string, args: Record<string, unknown>): Promise<string> {
    const config = await loadAgentConfig(this.deps.db, this.call.user_id, agentId, null)
    if (config === undefined || config.agent.status !== 'active') throw new Error('the agent to transfer to is not available')
    const { agent: target, llm } = config
    const setup = await this.setup(config)
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
    this.version = config.version
    const begin = llm.begin_message === null || llm.begin_message === '' ? '' : ` Greet the caller with: ${renderText(llm.begin_message, this.call.dynamic_context)}`
    return `The call is now with ${target.agent_name}; you are ${target.agent_name} from now on.${begin}`
  }

  /** A workflow step entered, in the transcript. */
  private addStep (step: Entered): void {
    this.addTranscript({ speaker: 'step', content: step.name, timestamp: Date.now(), step })
  }

  private addTranscript (item: TranscriptItem): void {
    this.transcript.push(item)
    this.transport.send({ type: 'transcript', ...item })
    // A caller dictating what the agent just asked for (a number, an e-mail) may pause longer.
    if (item.speaker === 'agent') this.core.expect(expectingOf(item.content, this.agent.data_retrieval, this.language))
  }

  // The end.

  /** Ends the session and its call (once): recording stored, the call ended through the lifecycle. */
  async end (reason: EndReason): Promise<void> {
    if (this.ended) return await this.done
    this.ended = true
    this.abort.abort()
    this.core?.stop()
    for (const timer of this.timers) timer.cancel()
    this.keysTimer?.cancel()
    try {
      this.engine?.close()
      await this.closeTools()
      if (this.options.onEnd !== undefined) await this.options.onEnd({ reason, conversation: this.conversation(0) })
      else await endCall(this.deps.db, this.deps, this.call.user_id, this.call.id, await this.callEnd(reason))
    } catch (err) {
      // The deadline job ends the call later; the caller is told now.
      this.log.error({ err }, 'the voice session could not end its call')
    }
    const { framesSent, framesLate } = this.core ?? { framesSent: 0, framesLate: 0 }
    this.transport.send({ type: 'ended', reason, frames_sent: framesSent, frames_late: framesLate })
    this.transport.close()
    this.log.info({ reason, framesSent, framesLate, callerFramesDropped: this.callerPace.dropped }, 'voice session ended')
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
    this.recorder.end(Math.max(this.clock.now(), this.core.playingUntil) - this.startedAt)
    this.saveRecording(Infinity)
    await this.recordingSaved
    return Math.round(this.recordingStored * 1000 / SAMPLE_RATE)
  }

  private async callEnd (reason: EndReason): Promise<CallEnd> {
    const recordingMs = await this.storeRecording()
    return toCallEnd(this.deps.config, this.call.id, this.conversation(recordingMs), { reason, answered: this.machine })
  }
}
