import type { DB } from '../../db/database.ts'
import { searchPassages, type SearchHit } from './queries.ts'

/**
 * PostgreSQL's text search configurations (all present since PostgreSQL 14) by the primary subtag of a
 * BCP-47 language tag. Every other language is searched with `simple`: words are lower-cased, not
 * stemmed, and no stop words are dropped.
 */
const CONFIGS: Record<string, string> = {
  ar: 'arabic',
  ca: 'catalan',
  da: 'danish',
  de: 'german',
  el: 'greek',
  en: 'english',
  es: 'spanish',
  eu: 'basque',
  fi: 'finnish',
  fr: 'french',
  ga: 'irish',
  hi: 'hindi',
  hu: 'hungarian',
  hy: 'armenian',
  id: 'indonesian',
  it: 'italian',
  lt: 'lithuanian',
  nb: 'norwegian',
  ne: 'nepali',
  nl: 'dutch',
  nn: 'norwegian',
  no: 'norwegian',
  pt: 'portuguese',
  ro: 'romanian',
  ru: 'russian',
  sr: 'serbian',
  sv: 'swedish',
  ta: 'tamil',
  tr: 'turkish',
  yi: 'yiddish'
}

export function searchConfigFor (language: string): string {
  return CONFIGS[language.split('-')[0].toLowerCase()] ?? 'simple'
}

/**
 * A question as a voice agent asks it ("when may a senator be elected?") as a query that matches any
 * of its words: requiring all of them, as websearch syntax does, finds nothing for most questions.
 * Ranking puts the passages that hold more of the words, closer together, first. Only letters and
 * digits pass, so no input can make a malformed query.
 */
export function anyWordQuery (text: string): string {
  return (text.match(/[\p{L}\p{N}]+/gu) ?? []).filter((word) => word.toLowerCase() !== 'or').join(' or ')
}

export async function search (db: DB, userId: string, knowledgeBaseIds: string[], text: string, limit: number): Promise<SearchHit[]> {
  return await searchPassages(db, userId, knowledgeBaseIds, anyWordQuery(text), limit)
}
