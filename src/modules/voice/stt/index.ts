import type { VoiceConfig } from '../../../config.ts'
import type { EngineSetup } from '../engines/types.ts'
import { batchStt } from './batch.ts'
import { deepgramStt } from './deepgram.ts'
import { openaiRealtimeStt } from './openai-realtime.ts'
import type { SttFactory } from './types.ts'

/** The recogniser STT_PROVIDER names. */
export function sttProvider (voice: VoiceConfig): SttFactory {
  switch (voice.stt.provider) {
    case 'openai-realtime': return openaiRealtimeStt(voice)
    case 'deepgram': return deepgramStt(voice)
    default: return batchStt(voice)
  }
}

/** The language to name to the recogniser: one configured language as its primary subtag; several: none (auto-detect). */
export function sttLanguage (setup: Pick<EngineSetup, 'sttLanguages' | 'language'>): string | undefined {
  if (setup.sttLanguages.length > 1) return undefined
  return (setup.sttLanguages[0] ?? setup.language).split('-')[0].toLowerCase() || undefined
}
