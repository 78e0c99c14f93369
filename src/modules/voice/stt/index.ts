import type { VoiceConfig } from '../../../config.ts'
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
