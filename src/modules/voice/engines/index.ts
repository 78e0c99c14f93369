import type { Logger } from 'pino'
import type { VoiceConfig } from '../../../config.ts'
import type { LlmRow } from '../../agents/queries.ts'
import { cascadeEngine } from './cascade.ts'
import { realtimeEngine } from './realtime.ts'
import { simulatorEngine } from './simulator.ts'
import type { Engine, EngineEvent } from './types.ts'

export type EngineKind = 'realtime' | 'cascade' | 'simulator'

/** The providers of an engine are configured (a URL or a key set); the simulator needs none. */
function engineAvailable (voice: VoiceConfig, kind: EngineKind): boolean {
  if (kind === 'realtime') return voice.realtime.configured
  if (kind === 'cascade') return voice.stt.configured && voice.llm.configured && voice.tts.configured
  return true
}

/**
 * The engine of a call: its LLM configuration's, else the installation's VOICE_ENGINE; the simulator
 * (typed turns) when that engine's providers are not configured, so that calls work offline.
 */
export function chooseEngine (voice: VoiceConfig, llm: Pick<LlmRow, 'engine'>): EngineKind {
  const wanted = llm.engine ?? voice.engine
  return engineAvailable(voice, wanted) ? wanted : 'simulator'
}

export function createEngine (kind: EngineKind, voice: VoiceConfig, onEvent: (event: EngineEvent) => void, log: Logger): Engine {
  const factory = kind === 'realtime' ? realtimeEngine(voice) : kind === 'cascade' ? cascadeEngine(voice) : simulatorEngine
  return factory(onEvent, log)
}
