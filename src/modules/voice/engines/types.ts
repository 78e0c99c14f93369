import type { Logger } from 'pino'
import type { TurnDetection } from '../../../db/shapes.ts'

// One interface for every engine (DESIGN.md, "Voice"): the session gives it the caller's audio or text and
// its turn boundaries; the engine answers with agent audio, text, tool calls and usage. Audio both ways is
// PCM16 mono at 16 kHz; an engine that speaks another format to its provider converts at its edge.

import type { ToolSpec } from '../../capabilities/live.ts'

export type { ToolSpec }

export interface EngineSetup {
  /** The system prompt: the LLM configuration's general_prompt with its {{variables}} filled, plus the session's own lines. */
  instructions: string
  tools: ToolSpec[]
  /** Each tool's type (end_call, api_rag, …) by name: the simulator, which has no model, picks tools by type. */
  toolTypes?: Record<string, string>
  /** BCP-47 tag of the language the agent speaks. */
  language: string
  /** Languages the recogniser listens for; [] : `language`. */
  sttLanguages: string[]
  /** The provider's voice name (voices.provider_voice_id), e.g. `alloy`. */
  voice: string
  /** The LLM configuration's model: the cascade's chat model (the realtime engine has its own, configured). */
  model: string
  temperature: number
  maxTokens: number | null
  /**
   * Who detects the caller's turns (the LLM configuration's turn_detection; absent: ours). Only the realtime engine
   * acts on the provider's types: it then emits caller_speech and answers the turns it detects without endOfTurn.
   */
  turnDetection?: TurnDetection
  /** The caller may talk over the agent (interruption_sensitivity above 0; absent: true). */
  interruptible?: boolean
  /** What was said before this engine started (a call taken back after forwarding), oldest first. */
  history?: Array<{ role: 'user' | 'assistant', text: string }>
}

export type EngineEvent =
  /** Agent audio, any length; the session frames and paces it. */
  | { type: 'audio', pcm: Int16Array }
  /** The agent's reply text grew (live transcript). */
  | { type: 'agent_text', delta: string }
  /** The current response ended and all its audio was emitted; `text` is what the agent said in it. */
  | { type: 'response_done', text: string }
  /** What the caller said in the turn that just ended, as recognised ('' when nothing was). */
  | { type: 'user_text', text: string }
  /**
   * A streaming recogniser's words for the caller's current turn so far, each replacing the one before (the
   * cascade with STT_PROVIDER openai-realtime or deepgram). `final`: the recogniser will not revise them, though
   * more may follow. `startMs`, `endMs`: the audio they cover, in ms of caller audio since the engine started.
   */
  | { type: 'user_partial', text: string, final: boolean, startMs: number, endMs: number }
  /** The model calls a tool; the session answers with toolResult(id, …). */
  | { type: 'tool_call', id: string, name: string, arguments: string }
  /** Tokens one model request used. */
  | { type: 'usage', model: string, input: number, output: number }
  /** Seconds of caller speech recognised and of agent speech synthesised by one request. */
  | { type: 'speech', recognisedSeconds?: number, synthesisedSeconds?: number }
  /**
   * The provider's own turn detection heard the caller start or stop speaking (only with a provider turnDetection):
   * the session treats it as its own detector's start (barge-in) and end of a turn, which the provider answers.
   */
  | { type: 'caller_speech', speaking: boolean }
  /**
   * How long the answer being generated took in each provider, in ms, given before its first audio (null: a stage
   * the engine does not have): recognition after the end of turn, the model's first token, speech's first audio.
   */
  | { type: 'stages', transcriptionMs?: number | null, llmMs?: number | null, ttsMs?: number | null }
  /**
   * Whether the caller's words come while they speak (user_partial) from now on: the realtime engine's streaming
   * recogniser connected, or failed (the cascade's are there from the start with a streaming STT_PROVIDER).
   */
  | { type: 'words', streaming: boolean }
  /** The provider failed (the message is for the log, not the caller): the session ends the call. */
  | { type: 'error', message: string }

export interface Engine {
  /** Connects to the providers; resolves when input may be given, rejects when it cannot connect. */
  start: (setup: EngineSetup) => Promise<void>
  /** Caller audio: 20 ms frames, given continuously while the call runs. */
  audio: (frame: Int16Array) => void
  /**
   * Our turn detection saw the caller stop speaking: recognise the turn and answer it. A turn whose answer has not
   * started yet when the next one ends is joined with it (one user turn, one answer).
   */
  endOfTurn: () => void
  /**
   * Early reply: start answering these stable words of the caller's turn, which has not ended yet; emit nothing of
   * the answer until endOfTurn(), and use it then only if the turn's words are still these (optional).
   */
  prepare?: (text: string) => void
  /**
   * The caller's sound since the last turn was not a turn (a backchannel, a noise over the agent): forget its audio
   * and words, so that they are not part of the next turn (optional: an engine without a turn buffer).
   */
  forget?: () => void
  /** A typed turn of the caller: answer it. */
  userText: (text: string) => void
  /** Speak exactly this as the agent (begin message, reminders, goodbye), then emit response_done. */
  say: (text: string) => void
  /** The output of a tool call; the model continues once every call of its response is answered. */
  toolResult: (id: string, output: string) => void
  /** Says a short line while the model waits for tool results (a filler instead of dead air); nothing when none is awaited. */
  hold?: (text: string) => void
  /**
   * Barge-in: stop the current response at once; none of its audio follows. `heardMs`: how much of its audio
   * the caller heard (an engine whose model remembers what it said can forget the rest).
   */
  cancel: (heardMs?: number) => void
  /** Agent transfer: the new agent's instructions, tools and voice apply from the next response. */
  update: (setup: EngineSetup) => void
  close: () => void
}

export type EngineFactory = (onEvent: (event: EngineEvent) => void, log: Logger) => Engine
