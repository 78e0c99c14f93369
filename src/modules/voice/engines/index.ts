import type { Logger } from 'pino'
import type { VoiceConfig } from '../../../config.ts'
import type { LlmRow } from '../../agents/queries.ts'
import { cascadeEngine } from './cascade.ts'
import { realtimeEngine } from './realtime.ts'
import { simulatorEngine } from './simulator.ts'
import type { Engine, EngineEvent } from './types.ts'

/** `text`: the cascade's chat model without speech (test chats and scenario runs: voice/text-run.ts). */
export type EngineKind = 'realtime' | 'cascade' | 'simulator' | 'text'

/** The providers of an engine are configured (a URL or a key set); the simulator needs none. */
function engineAvailable (voice: VoiceConfig, kind: EngineKind): boolean {
  if (kind === 'realtime') return voice.realtime.configured
  if (kind === 'cascade') return voice.stt.configured && voice.llm.configured && voice.tts.configured
  if (kind === 'text') return voice.llm.configured
  return true
}

/**
 * The engine of a call: its LLM configuration's, else the installation's VOICE_ENGINE; the simulator
 * (typed turns) when that engine's providers are not configured, so that calls work offline.
 */
export function chooseEngine (voice: VoiceConfig, llm: Pick<LlmRow, 'engine'>): EngineKind {
  return availableOr(voice, llm.engine ?? voice.engine)
}

/** The engine of a typed test conversation: the chat model alone, or the simulator when none is configured. */
export const textEngine = (voice: VoiceConfig): EngineKind => availableOr(voice, 'text')

function availableOr (voice: VoiceConfig, wanted: EngineKind): EngineKind {
  return engineAvailable(voice, wanted) ? wanted : 'simulator'
}

export function createEngine (kind: EngineKind, voice: VoiceConfig, onEvent: (event: EngineEvent) => void, log: Logger): Engine {
  const factory = kind === 'realtime' ? realtimeEngine(voice) : kind === 'cascade' ? cascadeEngine(voice) : kind === 'text' ? cascadeEngine(voice, { speech: false }) : simulatorEngine
  return factory(onEvent, log)
}
