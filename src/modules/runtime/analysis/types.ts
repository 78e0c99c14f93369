import type { TranscriptItem } from '../../../db/schema.ts'
import { checkFieldValue, type FieldValue } from '../../agents/data-retrieval.ts'
import type { ActionCondition } from '../../deliveries/engine.ts'

// What every analyser takes and answers, apart from the analysers themselves (analyser.ts picks one).

export type { ActionCondition }

/** One of the agent's data_retrieval fields. */
export interface RetrievalField {
  name: string
  type: 'string' | 'number' | 'boolean' | 'enum' | 'date'
  description: string
  enum_values?: string[]
  required: boolean
}

export interface AnalysisInput {
  transcript: TranscriptItem[]
  /** The agent's language tag (en-US, de-DE, …). */
  language: string
  fields: RetrievalField[]
  summary: boolean
  sentiment: boolean
  /** When the call began: relative dates ("tomorrow") are read from it. */
  callStart: Date
  conditions: ActionCondition[]
}

export interface AnalysisResult {
  summary: string | null
  sentiment: { sentiment: 'positive' | 'negative' | 'neutral', explanation: string } | null
  /** Values of the fields that were found, typed as their field says; absent fields are left out. */
  data: Record<string, string | number | boolean>
  /** Whether the call meets each condition the analyser could judge, by action id (none for the built-in analyser). */
  conditions: Record<string, boolean>
  /** Tokens the analysis itself used, by model (none for the built-in analyser). */
  usage: Record<string, { input: number, output: number }>
}

export interface Analyser {
  name: string
  analyse: (input: AnalysisInput) => Promise<AnalysisResult>
}

/** Keeps only values of the right type (and enum values of the list), whatever an analyser produced. */
export function typedValues (fields: RetrievalField[], raw: Record<string, unknown>): Record<string, FieldValue> {
  const out: Record<string, FieldValue> = {}
  for (const field of fields) {
    const checked = checkFieldValue(field, raw[field.name])
    if ('value' in checked) out[field.name] = checked.value
  }
  return out
}
