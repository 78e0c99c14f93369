import type { RetrievalField } from '../../../db/schema.ts'

// Placeholder of the word rules (replaced by the rules of EN and DE): a finished sentence ends the turn sooner.

export type Expecting = 'number' | 'email' | 'name' | 'address'
export interface Heard { text: string, final: boolean }
export interface EndOfTurnOptions { language: string, responsiveness: number, expecting?: Expecting }

export function endOfTurnSilenceMs (heard: Heard | undefined, _options: EndOfTurnOptions): number {
  if (heard === undefined || heard.text.trim() === '') return 500
  return /[.!?]\s*$/.test(heard.text) ? 200 : 1200
}

export function isBackchannel (text: string, _language: string): boolean {
  return /^\s*(uh-huh|mm-hmm|yeah|okay|right|ja|genau|mhm)[.!,]?\s*$/i.test(text)
}

export function expectingOf (_agentWords: string, _fields: RetrievalField[], _language: string): Expecting | undefined {
  return undefined
}
