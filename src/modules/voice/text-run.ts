import { performance } from 'node:perf_hooks'
import type { TranscriptItem } from '../../db/schema.ts'
import type { Conversation } from '../../db/shapes.ts'
import { newId } from '../../db/ids.ts'
import { notFound } from '../../http/errors.ts'
import { loadAgentConfig } from '../agents/versions.ts'
import { unstoredCall } from '../calls/lifecycle.ts'
import { textEngine } from './engines/index.ts'
import type { SessionEvent } from './events.ts'
import { Session, type EndReason, type SessionDeps } from './session.ts'
import { ManualClock } from './turns/clock.ts'

// A typed conversation with an agent version through the conversation core (DESIGN.md, "Workflows, versions,
// tests"): the same session as a call — its tools, workflow and transcript — on the text engine (the chat model
// without speech; the simulator when no model is configured) and a clock nobody moves, so no reminder or time-out
// fires while the caller is slow to type. No call record is written and no post-call delivery made; tools that are
// not mocked act for real. The test chat (one turn per request) and scenario runs build on it.

export interface TextRunOptions {
  userId: string
  agentId: string
  /** null or absent: the latest. */
  version?: number | null
  /** Go on from here (a test chat's next turn); absent: a new conversation, its begin message said. */
  conversation?: Conversation
  /** Tool function name or capability id → the output it answers instead of running. */
  mocks?: Record<string, string>
  dynamicContext?: Record<string, unknown>
}

/** What one caller line brought: the transcript items it added (the caller's line, tools, steps, the agent's answer). */
export interface TextTurn { items: TranscriptItem[], ended: boolean, endReason: string | null }

export class TextConversation {
  readonly engine: 'text' | 'simulator'
  readonly version: number
  /** ms the agent took to answer each caller line (the model and its tools), in order. */
  readonly answerTimes: number[] = []
  private readonly items: TranscriptItem[] = []
  private session!: Session
  private speaking = false
  private reason: EndReason | null = null
  private conversationAtEnd: Conversation | undefined
  /** Resolved when the agent has finished what it is doing (answered, or the conversation ended). */
  private settled: (() => void) | undefined
  private readonly ready: Promise<void>
  private resolveReady!: () => void

  private constructor (engine: 'text' | 'simulator', version: number) {
    this.engine = engine
    this.version = version
    this.ready = new Promise((resolve) => { this.resolveReady = resolve })
  }

  /** Opens the conversation; resolves once the begin message (if any) is said. 404 when the agent or version is not the account's. */
  static async open (deps: SessionDeps, options: TextRunOptions): Promise<TextConversation> {
    const agentId = options.conversation?.agent_id ?? options.agentId
    const version = options.conversation?.agent_version ?? options.version ?? null
    const config = await loadAgentConfig(deps.db, options.userId, agentId, version)
    if (config === undefined) throw notFound(version === null ? `agent ${agentId}` : `version ${version} of agent ${agentId}`)
    const engine = textEngine(deps.config.voice) === 'text' ? 'text' : 'simulator'
    const run = new TextConversation(engine, config.version)
    const call = unstoredCall({
      id: newId(),
      user_id: options.userId,
      agent_id: config.agent.id,
      agent_name: config.agent.agent_name,
      agent_version: config.version,
      start_timestamp: new Date(),
      dynamic_context: options.dynamicContext ?? {}
    })
    const transport = { sendAudio: () => {}, send: (event: SessionEvent) => run.onEvent(event), close: () => {} }
    run.session = Session.open(deps, call, transport, {
      engine,
      config,
      clock: new ManualClock(),
      resume: options.conversation,
      quiet: true,
      mocks: options.mocks,
      onEnd: async ({ reason, conversation }) => {
        run.reason = reason
        run.conversationAtEnd = conversation
      }
    })
    await run.ready
    await run.answered()
    return run
  }

  get ended (): boolean {
    return this.reason !== null
  }

  get endReason (): string | null {
    return this.reason
  }

  /** The caller types `text`; resolves when the agent has finished answering (tools, step changes and all) or the conversation ended. */
  async say (text: string): Promise<TextTurn> {
    const from = this.items.length
    if (!this.ended) {
      const started = performance.now()
      const answered = this.answered(true)
      // Refused only while the agent still answers, which say() never leaves behind.
      if (!this.session.text(text)) throw new Error('the agent is still answering the last line')
      await answered
      this.answerTimes.push(Math.round(performance.now() - started))
    }
    return { items: this.items.slice(from), ended: this.ended, endReason: this.reason }
  }

  /** Everything so far: transcript with tool and step items, tokens, workflow state, collected data. */
  conversation (): Conversation {
    return this.conversationAtEnd ?? this.session.conversationSoFar()
  }

  /** Frees the engine and the tools; nothing is stored. */
  async close (): Promise<void> {
    if (!this.session.finished) await this.session.end('user_hangup')
  }

  /** Waits until the agent is quiet and not about to end, or the conversation has ended; `asked`: a line was just typed. */
  private async answered (asked = false): Promise<void> {
    if (this.ended || (!asked && !this.speaking && !this.session.closing)) return
    await new Promise<void>((resolve) => { this.settled = resolve })
  }

  private onEvent (event: SessionEvent): void {
    if (event.type === 'ready') this.resolveReady()
    else if (event.type === 'transcript') {
      const { type, ...item } = event
      this.items.push(item)
    } else if (event.type === 'agent_speaking') {
      this.speaking = event.speaking
      // The agent ending the conversation speaks its last words, then it ends: wait for that.
      if (!event.speaking && !this.session.closing) this.settle()
    } else if (event.type === 'ended') {
      this.reason ??= event.reason as EndReason
      this.resolveReady()
      this.settle()
    }
  }

  private settle (): void {
    const settled = this.settled
    this.settled = undefined
    settled?.()
  }
}
