import type { AnalyserConfig } from '../../../config.ts'
import { builtinAnalyser } from './builtin.ts'
import { openaiAnalyser } from './openai.ts'
import type { Analyser } from './types.ts'

export function createAnalyser (config: AnalyserConfig): Analyser {
  return config.kind === 'openai' ? openaiAnalyser(config) : builtinAnalyser()
}
