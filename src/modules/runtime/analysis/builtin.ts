import type { TranscriptItem } from '../../../db/schema.ts'
import { typedValues, type Analyser, type AnalysisInput, type RetrievalField } from './types.ts'

// The built-in analyser: deterministic, offline, English and German. It reads what people say plainly;
// for subtle conversations configure ANALYSER=openai.

const WORD = /[\p{L}\p{N}'’]+/gu
const words = (text: string) => (text.toLowerCase().match(WORD) ?? []).map((w) => w.replace(/’/g, "'"))

// Sentiment lexicon: word -> weight. English and German, common forms.
const LEXICON: Record<string, number> = Object.fromEntries([
  ...['thanks', 'thank', 'great', 'good', 'perfect', 'excellent', 'wonderful', 'happy', 'glad', 'helpful', 'love', 'awesome', 'fantastic',
    'nice', 'pleased', 'appreciate', 'amazing', 'works', 'fine', 'lovely', 'brilliant', 'satisfied', 'easy', 'quick',
    'danke', 'super', 'gut', 'toll', 'prima', 'perfekt', 'klasse', 'wunderbar', 'freundlich', 'hilfreich', 'zufrieden', 'schön',
    'gerne', 'passt', 'ausgezeichnet', 'freue', 'froh'].map((w) => [w, 1]),
  ...['bad', 'terrible', 'awful', 'angry', 'annoyed', 'unhappy', 'disappointed', 'problem', 'wrong', 'worst', 'hate', 'useless',
    'frustrated', 'frustrating', 'rude', 'slow', 'broken', 'complaint', 'cancel', 'waste', 'ridiculous', 'horrible', 'never',
    'schlecht', 'schrecklich', 'furchtbar', 'ärgerlich', 'verärgert', 'enttäuscht', 'problem', 'falsch', 'unzufrieden', 'nervig',
    'kaputt', 'beschwerde', 'stornieren', 'kündigen', 'unmöglich', 'langsam', 'unfreundlich', 'ärger'].map((w) => [w, -1])
])
const NEGATIONS = new Set(['not', "don't", "didn't", "isn't", "wasn't", "doesn't", 'no', 'never', "won't", "can't", 'nicht', 'kein', 'keine', 'keinen', 'nie', 'niemals'])
const YES = new Set(['yes', 'yeah', 'yep', 'sure', 'correct', 'right', 'absolutely', 'definitely', 'ja', 'genau', 'gerne', 'richtig', 'klar', 'sicher', 'okay', 'ok'])
const NO = new Set(['no', 'nope', 'not', 'never', "don't", 'nein', 'nicht', 'kein', 'keine', 'nie'])
const STOPWORDS = new Set(['the', 'a', 'an', 'and', 'or', 'to', 'of', 'in', 'on', 'for', 'is', 'it', 'i', 'you', 'we', 'that', 'this', 'be', 'at',
  'with', 'my', 'your', 'me', 'do', 'can', 'would', 'like', 'what', 'how', 'der', 'die', 'das', 'und', 'oder', 'ich', 'sie', 'wir', 'ist',
  'ein', 'eine', 'zu', 'mit', 'für', 'auf', 'es', 'mein', 'ihr', 'wie', 'was'])

/** Sum of word weights, a negation within three words before flipping the sign. */
export function sentimentOf (texts: string[]): { sentiment: 'positive' | 'negative' | 'neutral', explanation: string } {
  let score = 0
  const positive: string[] = []
  const negative: string[] = []
  for (const text of texts) {
    const tokens = words(text)
    tokens.forEach((token, i) => {
      const weight = LEXICON[token]
      if (weight === undefined) return
      const negated = tokens.slice(Math.max(0, i - 3), i).some((w) => NEGATIONS.has(w))
      const value = negated ? -weight : weight
      score += value;
      (value > 0 ? positive : negative).push(negated ? `not ${token}` : token)
    })
  }
  const sentiment = score > 0 ? 'positive' : score < 0 ? 'negative' : 'neutral'
  const cues = [...new Set(sentiment === 'negative' ? negative : positive)].slice(0, 4)
  const explanation = sentiment === 'neutral'
    ? 'The caller used no clearly positive or negative words.'
    : `The caller's words were mostly ${sentiment} (${cues.map((c) => `"${c}"`).join(', ')}).`
  return { sentiment, explanation }
}

const sentences = (text: string) => text.split(/(?<=[.!?])\s+/).map((s) => s.trim()).filter((s) => s !== '')

/** The two or three most informative sentences, in the order they were said, with who said them. */
export function summaryOf (transcript: TranscriptItem[]): string | null {
  const all = transcript.flatMap((item, turn) => sentences(item.content).map((text) => ({ text, turn, speaker: item.speaker })))
  if (all.length === 0) return null
  const frequency = new Map<string, number>()
  for (const { text } of all) for (const w of words(text)) if (!STOPWORDS.has(w)) frequency.set(w, (frequency.get(w) ?? 0) + 1)
  const scored = all.map((s, i) => {
    const content = words(s.text).filter((w) => !STOPWORDS.has(w))
    const score = content.reduce((n, w) => n + (frequency.get(w) ?? 0), 0) / Math.max(3, content.length) + (s.speaker === 'user' ? 0.5 : 0)
    return { ...s, i, score }
  })
  const chosen = [...scored].sort((a, b) => b.score - a.score).slice(0, all.length > 6 ? 3 : 2).sort((a, b) => a.i - b.i)
  return chosen.map((s) => `${s.speaker === 'user' ? 'Caller' : 'Agent'}: ${s.text}`).join(' ')
}

const keywordsOf = (field: RetrievalField) =>
  new Set([...field.name.toLowerCase().split('_'), ...words(field.description)].filter((w) => w.length > 2 && !STOPWORDS.has(w)))

const NUMBER_WORDS: Record<string, number> = {
  one: 1, two: 2, three: 3, four: 4, five: 5, six: 6, seven: 7, eight: 8, nine: 9, ten: 10, eleven: 11, twelve: 12, twenty: 20, hundred: 100,
  eins: 1, ein: 1, zwei: 2, drei: 3, vier: 4, fünf: 5, sechs: 6, sieben: 7, acht: 8, neun: 9, zehn: 10, elf: 11, zwölf: 12, zwanzig: 20, hundert: 100
}

function numbersIn (text: string): number[] {
  const found: number[] = []
  for (const match of text.matchAll(/-?\d+(?:[.,]\d+)?(?:\s?(k|thousand|tausend))?/gi)) {
    const base = Number(match[0].replace(/\s?(k|thousand|tausend)$/i, '').replace(',', '.'))
    if (Number.isFinite(base)) found.push(match[1] === undefined ? base : base * 1000)
  }
  for (const w of words(text)) if (NUMBER_WORDS[w] !== undefined) found.push(NUMBER_WORDS[w])
  return found
}

const MONTHS: Record<string, number> = {
  january: 1, february: 2, march: 3, april: 4, may: 5, june: 6, july: 7, august: 8, september: 9, october: 10, november: 11, december: 12,
  januar: 1, februar: 2, märz: 3, mai: 5, juni: 6, juli: 7, oktober: 10, dezember: 12
}
const WEEKDAYS: Record<string, number> = {
  sunday: 0, monday: 1, tuesday: 2, wednesday: 3, thursday: 4, friday: 5, saturday: 6,
  sonntag: 0, montag: 1, dienstag: 2, mittwoch: 3, donnerstag: 4, freitag: 5, samstag: 6
}

const isoDay = (date: Date) => date.toISOString().slice(0, 10)
const addDays = (date: Date, days: number) => new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate() + days))

/** The first date a text names, as YYYY-MM-DD, read relative to the call's start. */
export function dateIn (text: string, start: Date): string | undefined {
  const iso = /\b(\d{4})-(\d{2})-(\d{2})\b/.exec(text)
  if (iso !== null) return iso[0]
  const dotted = /\b(\d{1,2})\.(\d{1,2})\.(\d{4})?/.exec(text)
  if (dotted !== null) {
    const year = dotted[3] === undefined ? start.getUTCFullYear() : Number(dotted[3])
    return isoDay(new Date(Date.UTC(year, Number(dotted[2]) - 1, Number(dotted[1]))))
  }
  const tokens = words(text)
  for (let i = 0; i < tokens.length; i++) {
    const month = MONTHS[tokens[i]]
    if (month !== undefined) {
      const day = Number(tokens[i + 1]?.replace(/\D/g, '')) || Number(tokens[i - 1]?.replace(/\D/g, ''))
      if (day >= 1 && day <= 31) {
        let date = new Date(Date.UTC(start.getUTCFullYear(), month - 1, day))
        if (date < addDays(start, -1)) date = new Date(Date.UTC(start.getUTCFullYear() + 1, month - 1, day))
        return isoDay(date)
      }
    }
  }
  if (/day after tomorrow|übermorgen/i.test(text)) return isoDay(addDays(start, 2))
  if (/\btomorrow\b|\bmorgen\b/i.test(text)) return isoDay(addDays(start, 1))
  if (/\btoday\b|\bheute\b/i.test(text)) return isoDay(start)
  for (const token of tokens) {
    const weekday = WEEKDAYS[token]
    if (weekday !== undefined) return isoDay(addDays(start, ((weekday - start.getUTCDay() + 7) % 7) || 7))
  }
  return undefined
}

const EMAIL = /[\w.+-]+@[\w-]+(?:\.[\w-]+)+/
const PHONE = /\+?\d[\d\s()-]{6,}\d/

function nameIn (text: string): string | undefined {
  const match = /(?:my name is|this is|i am|i'm|ich heiße|mein name ist|hier ist)\s+([\p{Lu}][\p{L}'-]+(?:\s+[\p{Lu}][\p{L}'-]+)?)/iu.exec(text)
  return match?.[1]
}

/** The value of one field, from what the caller said (and what the agent confirmed), or undefined. */
function extract (field: RetrievalField, transcript: TranscriptItem[], start: Date): unknown {
  const keywords = keywordsOf(field)
  const mentions = (text: string) => words(text).some((w) => keywords.has(w))
  const user = transcript.filter((t) => t.speaker === 'user').map((t) => t.content)
  // The caller's answer right after the agent asked about the field.
  const answers = transcript.flatMap((t, i) => (t.speaker === 'agent' && mentions(t.content) && transcript[i + 1]?.speaker === 'user' ? [transcript[i + 1].content] : []))
  const relevant = [...answers, ...user.filter(mentions)]
  const about = `${field.name} ${field.description}`.toLowerCase()

  if (/e-?mail/.test(about)) return user.map((u) => EMAIL.exec(u)?.[0]).find((v) => v !== undefined)
  if (/phone|telefon|number to call/.test(about) && field.type === 'string') {
    const found = user.map((u) => PHONE.exec(u)?.[0]).find((v) => v !== undefined)
    return found?.replace(/[\s()-]/g, '')
  }
  switch (field.type) {
    case 'number':
      return [...relevant, ...(relevant.length === 0 ? user : [])].map((u) => numbersIn(u)[0]).find((v) => v !== undefined)
    case 'boolean':
      for (const answer of relevant) {
        const tokens = words(answer)
        if (tokens.some((w) => NO.has(w))) return false
        if (tokens.some((w) => YES.has(w))) return true
      }
      return undefined
    case 'enum': {
      const values = field.enum_values ?? []
      const said = [...user, ...transcript.filter((t) => t.speaker === 'agent').map((t) => t.content)]
      for (const text of said) {
        const lower = ` ${words(text).join(' ')} `
        const value = values.find((v) => lower.includes(` ${v.toLowerCase().replace(/_/g, ' ')} `))
        if (value !== undefined) return value
      }
      return undefined
    }
    case 'date': {
      const ordered = [...relevant, ...user, ...transcript.filter((t) => t.speaker === 'agent').map((t) => t.content)]
      return ordered.map((text) => dateIn(text, start)).find((v) => v !== undefined)
    }
    case 'string': {
      if (/name/.test(field.name.toLowerCase())) return user.map(nameIn).find((v) => v !== undefined)
      return relevant[0]
    }
  }
}

export function builtinAnalyser (): Analyser {
  return {
    name: 'builtin',
    analyse: async (input: AnalysisInput) => {
      const userTexts = input.transcript.filter((t) => t.speaker === 'user').map((t) => t.content)
      const raw = Object.fromEntries(input.fields.map((field) => [field.name, extract(field, input.transcript, input.callStart)]))
      return {
        summary: input.summary ? summaryOf(input.transcript) : null,
        sentiment: input.sentiment ? sentimentOf(userTexts) : null,
        data: typedValues(input.fields, raw),
        // Plain-language conditions need a language model: every action is delivered.
        conditions: {},
        usage: {}
      }
    }
  }
}
