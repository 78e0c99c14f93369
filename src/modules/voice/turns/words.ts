import type { RetrievalField } from '../../../db/schema.ts'
import { CALL_SETTINGS_DEFAULTS } from '../../agents/schemas.ts'

// The caller's words as turn-taking cues (docs/voice.md, "Tuning turn-taking"): how long a silence ends the
// caller's turn given what they have said so far, whether words spoken over the agent are only a backchannel,
// and what the agent has just asked for. Pure rules on words, word classes, digits and punctuation, in English
// and German (the language tag's primary subtag chooses); other languages get silence alone.

export type Expecting = 'number' | 'email' | 'name' | 'address'

/** The caller's words of the turn so far, as a streaming recogniser gives them. */
export interface Heard {
  /** Interim results may lack punctuation. */
  text: string
  /** The recogniser will not revise these words (more may follow). */
  final: boolean
}

export interface EndOfTurnOptions {
  /** The agent's BCP-47 language, e.g. en-US, de-DE. */
  language: string
  /** call_settings.responsiveness, 0 to 1: higher answers sooner. */
  responsiveness: number
  /** What the agent has just asked for (expectingOf). */
  expecting?: Expecting
}

/**
 * Silence that ends the turn at the default responsiveness, by what the words say (docs/voice.md gives the same
 * table). `finished`: a sentence closed by . ? or !; `open`: no cue either way (an interim result without
 * punctuation); `unfinished`: a trailing conjunction, preposition, article, filler, verb that needs more, a
 * comma, or a number, e-mail address or spelling still going; `expected`: that, while the agent asked for it;
 * `silence`: no words known, or a language without rules.
 */
export const SILENCE_MS = { finished: 200, open: 700, unfinished: 1200, expected: 1600, silence: 500 } as const

/** Bounds of any wait: below, a breath between words ends turns; above, callers think they were not heard. */
export const MIN_SILENCE_MS = 150
export const MAX_SILENCE_MS = 2000

/**
 * Responsiveness scales every wait by 1.5^(1 - 2r): ×1.5 at 0, ×1 at 0.5, ×2/3 at 1 — the ratios between the
 * cues stay, so a slower agent is slower everywhere.
 */
function scaled (ms: number, responsiveness: number): number {
  const r = Number.isFinite(responsiveness) ? Math.min(1, Math.max(0, responsiveness)) : CALL_SETTINGS_DEFAULTS.responsiveness
  return Math.round(Math.min(MAX_SILENCE_MS, Math.max(MIN_SILENCE_MS, ms * 1.5 ** (1 - 2 * r))))
}

const set = (words: string) => new Set(words.split(' '))

interface Rules {
  /** Words after which a sentence cannot end: conjunctions, prepositions, articles and possessives, fillers. */
  continues: Set<string>
  /** Of those, the ones that stay unfinished even when the recogniser put a full stop after them ("the."). */
  neverLast: Set<string>
  /** Verbs that want a complement ("my number is", "meine Nummer ist", "I would"). */
  wantsMore: Set<string>
  /** German puts the verb last in a subordinate clause: there a verb of `wantsMore` may end it. */
  verbLastAfterSubordinator: boolean
  /** A subordinator followed only by a subject is an open clause: "that my internet", "because I", "weil ich". */
  subordinators: Set<string>
  determiners: Set<string>
  pronouns: Set<string>
  /** Verbs that take a second object, and the pronouns that leave it missing ("tell me", "give us"). */
  ditransitive?: { verbs: Set<string>, pronouns: Set<string> }
  numbers: RegExp
  /** Spoken parts of an e-mail address: what joins ("dot", "at"), and words that say an address is meant. */
  emailJoins: Set<string>
  emailAt: Set<string>
  emailDot: Set<string>
  emailWords: RegExp
  /** Words and phrases that only acknowledge. */
  backchannels: string[]
  /** What the agent asks for, by the words that name it, and words that make a sentence a request. */
  asks: Record<Expecting, RegExp>
  request: RegExp
}

const FILLERS = /^(u+h*m+|u+h+|e+r+m*|e+h+m*|h+m+|ä+h+m*|ö+h+m*)$/

const EN: Rules = {
  continues: set('and or but nor so because cause cuz if whether although though while whereas unless until till than as since that ' +
    'for to of at with from about into onto between through during without towards toward via per against across upon among including ' +
    'a an the my your our their its every each these those like'),
  neverLast: set('and or a an the my your our their'),
  wantsMore: set('is are was were am be been being would could should will can must might shall want wanted need needed ' +
    "it's that's what's there's he's she's i'm you're we're they're i'd you'd we'd i'll you'll we'll i've we've"),
  verbLastAfterSubordinator: false,
  subordinators: set('that because cause if when while where whether since although though unless until which who'),
  determiners: set('a an the my your our their his her its this these those'),
  pronouns: set('i we they he she you it'),
  ditransitive: { verbs: set('tell show give send let ask remind teach bring'), pronouns: set('me us him her them') },
  numbers: /^(zero|oh|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|double|triple|plus)$/,
  emailJoins: set('dot at underscore dash hyphen'),
  emailAt: set('at'),
  emailDot: set('dot'),
  emailWords: /^(e-?mail|mail|gmail|hotmail|outlook|yahoo)$/,
  backchannels: ['yeah', 'yes', 'yep', 'yup', 'yea', 'right', 'alright', 'all right', 'sure', 'exactly', 'true', 'cool', 'great', 'nice',
    'perfect', 'fine', 'good', 'oh', 'ah', 'i see', 'got it', 'gotcha', 'makes sense'],
  asks: {
    email: /\be-?mail\b/g,
    address: /(?<!e-?mail )\b(address|street|postcode|post code|zip|where do you live)\b/g,
    number: /\b(number|digits|phone|mobile|cell|pin|code)\b/g,
    name: /\b(name|spell|spelling|spelt|spelled)\b/g
  },
  request: /\b(please|tell me|give me|may i have|can i have|could i have|what is|what's|spell|let me know|could you|can you|would you)\b/
}

const DE: Rules = {
  continues: set('und oder aber sondern denn weil dass daß ob wenn falls als obwohl damit sodass bevor nachdem während bis sowie beziehungsweise bzw also wie ' +
    'für von vom zum zur am im in beim seit wegen trotz ohne gegen zwischen neben hinter über unter per ' +
    'der die den dem des eine einen einem einer eines mein meine meinen meinem meiner meines dein deine deinen deinem deiner ' +
    'unser unsere unseren unserem unserer ihre ihren ihrem ihrer keine keinen keinem keiner'),
  neverLast: set('und oder der den dem des eine einen einem einer eines mein meine meinen meinem meiner unser unsere unseren unserem ihre ihren ihrem'),
  wantsMore: set('ist sind war waren bin bist wäre wären wird werden möchte möchten will wollen kann können muss müssen würde würden soll sollen könnte hätte'),
  verbLastAfterSubordinator: true,
  subordinators: set('dass daß weil ob wenn falls obwohl damit sodass bevor nachdem während als da wo was wie'),
  determiners: set('der die das den dem ein eine einen einem mein meine meinen meinem unser unsere ihre sein seine'),
  pronouns: set('ich wir er sie es du man ihr'),
  numbers: /^(null|eins|zwei|zwo|drei|vier|fünf|sechs|sieben|acht|neun|zehn|elf|zwölf|zwanzig|dreißig|vierzig|fünfzig|sechzig|siebzig|achtzig|neunzig|hundert|tausend|doppel|doppelt|plus|((ein|zwei|drei|vier|fünf|sechs|sieben|acht|neun)und(zwanzig|dreißig|vierzig|fünfzig|sechzig|siebzig|achtzig|neunzig)))$/,
  emailJoins: set('punkt at ät klammeraffe unterstrich bindestrich minus'),
  emailAt: set('at ät klammeraffe'),
  emailDot: set('punkt'),
  emailWords: /^(e-?mail|mail|gmail|gmx|web\.de|t-online)$/,
  backchannels: ['ja', 'jaja', 'jo', 'jap', 'jep', 'genau', 'gut', 'klar', 'alles klar', 'na klar', 'richtig', 'stimmt', 'ach so', 'achso', 'ah', 'oh',
    'super', 'prima', 'verstehe', 'ich verstehe', 'sicher', 'natürlich', 'in ordnung', 'sehr gut', 'schön'],
  asks: {
    email: /e-?mail/g,
    address: /(?<!e-?mail-?\s?)(adresse|anschrift|straße|strasse|postleitzahl|wo wohnen)/g,
    number: /(nummer|ziffern|telefon|handy|pin\b|code\b)/g,
    name: /(name|buchstabier)/g
  },
  request: /(bitte|nennen|sagen sie|geben sie|wie lautet|wie ist|wie war|buchstabieren|können sie|könnten sie|darf ich)/
}

/** Sounds and words that acknowledge in any language. */
const UNIVERSAL_BACKCHANNELS = ['u+h*[- ]?h+u+h+', 'm+[- ]?h+m+', 'm+h+m+', 'h+m+', 'm+', 'okay', 'ok', 'aha']

const RULES: Record<string, Rules> = { en: EN, de: DE }

const languageOf = (language: string) => language.split('-')[0].toLowerCase()

/** A sentence's end: . ? or ! (closing quotes aside), but not an ellipsis, which trails off. */
const closed = (text: string) => /[.?!。]["'”’)\]]*$/.test(text) && !/(\.\.\.|…)["'”’)\]]*$/.test(text)

/** Punctuation that says more follows: a comma, colon, semicolon, dash or ellipsis at the end. */
const trailingMark = (text: string) => /([,;:\-–—]|\.\.\.|…)["'”’)\]]*$/.test(text)

/** Words in lower case, without the punctuation around them (inside a word it stays: "john.smith", "it's"). */
const wordsOf = (text: string) => text.toLowerCase().replace(/[’`]/g, "'").split(/\s+/)
  .map((word) => word.replace(/^[^\p{L}\p{N}@+]+|[^\p{L}\p{N}@]+$/gu, '')).filter((word) => word !== '')

/** A number said or written: digits ("555", "0176-55", "+49") or a number word of the language. */
const isNumber = (word: string, rules: Rules) => /^\+?\d[\d\-/.()]*$/.test(word) || rules.numbers.test(word)

/** A spelled letter as recognisers write it: "M", "M.", "M-E-Y", "M.E.Y.". */
const LETTERS = /^\p{Lu}([.-]\p{Lu})*[.,]?$/u

/** Spelling: the text ends in single letters ("S M I", "that is M."). A lone "I" or "A" is a word; a letter's full stop is no sentence's end. */
function spelling (text: string): boolean {
  const tokens = text.trim().split(/\s+/)
  const run = tokens.length - 1 - tokens.findLastIndex((token) => !LETTERS.test(token))
  return run > 1 || (run === 1 && !/^[IA][.,]?$/.test(tokens.at(-1)!))
}

/**
 * An e-mail address being dictated, where the words speak of one: the last word joins parts ("dot", "at",
 * "@"), or the address's domain has not come yet ("john dot smith", "at gmail", "john.smith@example").
 */
function emailGoing (words: string[], rules: Rules, expecting: boolean): boolean {
  if (!expecting && !words.some((word) => word.includes('@') || rules.emailDot.has(word) || rules.emailWords.test(word))) return false
  const last = words.at(-1) ?? ''
  if (rules.emailJoins.has(last) || last.endsWith('@')) return true
  const dotted = (word: string) => rules.emailDot.has(word) || /\p{L}\.\p{L}/u.test(word)
  const at = words.findLastIndex((word) => rules.emailAt.has(word) || word.includes('@'))
  if (at === -1) return words.some(dotted)
  const domain = [words[at].split('@')[1] ?? '', ...words.slice(at + 1)].filter((word) => word !== '')
  const dot = domain.findIndex(dotted)
  // Complete once the domain has a dot with a part after it ("example dot com", "example.com").
  return dot === -1 || (dot === domain.length - 1 && rules.emailDot.has(domain[dot]))
}

/** A clause opened and left with only its subject: "because I", "weil ich", "that my internet", "dass mein Internet". */
function openClause (words: string[], rules: Rules): boolean {
  const [third, second, last] = words.slice(-3)
  if (second !== undefined && rules.subordinators.has(second) && (rules.pronouns.has(last) || rules.determiners.has(last))) return true
  return third !== undefined && rules.subordinators.has(third) && rules.determiners.has(second) && !rules.continues.has(last)
}

/** The words of the clause the text ends in (since its last comma or sentence end). */
const lastClause = (text: string) => wordsOf(text.split(/[,;:.?!]\s/).at(-1) ?? text)

interface Reading { ending: 'finished' | 'open' | 'unfinished', kind?: Expecting }

/** What the end of the words says about the turn. */
function read (text: string, rules: Rules, expecting: Expecting | undefined): Reading {
  if (spelling(text)) return { ending: 'unfinished', kind: 'name' }
  const words = wordsOf(text)
  const last = words.at(-1) ?? ''
  const email = emailGoing(words, rules, expecting === 'email')
  const dictation: Expecting | undefined = email ? 'email' : isNumber(last, rules) ? (expecting === 'address' ? 'address' : 'number') : undefined
  if (closed(text)) {
    if (email && rules.emailJoins.has(last)) return { ending: 'unfinished', kind: 'email' }
    // ("I got an A." ends in a letter, not in an article.)
    if ((rules.neverLast.has(last) && !LETTERS.test(text.split(/\s+/).at(-1)!)) || FILLERS.test(last)) return { ending: 'unfinished' }
    // A recogniser's full stop after digits or part of an address proves little while the agent asked for them.
    if (dictation !== undefined && dictation === expecting) return { ending: 'open', kind: dictation }
    return { ending: 'finished' }
  }
  if (dictation !== undefined) return { ending: 'unfinished', kind: dictation }
  if (trailingMark(text) || rules.continues.has(last) || FILLERS.test(last) || openClause(words, rules)) return { ending: 'unfinished' }
  const [verb, object] = words.slice(-2)
  if (rules.ditransitive !== undefined && object !== undefined && rules.ditransitive.verbs.has(verb) && rules.ditransitive.pronouns.has(object)) return { ending: 'unfinished' }
  if (rules.wantsMore.has(last) && !(rules.verbLastAfterSubordinator && lastClause(text).some((word) => rules.subordinators.has(word)))) return { ending: 'unfinished' }
  return { ending: 'open' }
}

/**
 * How long the caller's silence (from the end of their speech) must last before the turn ends. `heard` undefined
 * or '': no words known (no streaming recogniser, or none yet): silence alone. Interim and final words are read
 * alike; ask again with each new partial.
 */
export function endOfTurnSilenceMs (heard: Heard | undefined, options: EndOfTurnOptions): number {
  const text = heard?.text.trim() ?? ''
  const rules = RULES[languageOf(options.language)]
  if (text === '' || rules === undefined) return scaled(SILENCE_MS.silence, options.responsiveness)
  const { ending, kind } = read(text, rules, options.expecting)
  const level = ending === 'unfinished' && kind !== undefined && kind === options.expecting ? 'expected' : ending
  return scaled(SILENCE_MS[level], options.responsiveness)
}

/** At most this many words: more is the caller saying something. */
const BACKCHANNEL_WORDS = 5

const escape = (phrase: string) => phrase.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** Backchannels one after another ("yeah yeah", "oh okay", "ja genau"), per language; the universal ones alone for others. */
const BACKCHANNELS = new Map(['', ...Object.keys(RULES)].map((language) => {
  const phrases = [...UNIVERSAL_BACKCHANNELS, ...(RULES[language]?.backchannels ?? []).map(escape)]
  return [language, new RegExp(`^(?:(?:${phrases.join('|')})(?: |$))+$`)]
}))

/** The caller's words are only a backchannel ("uh-huh", "yeah", "okay", "ja", "genau"…), not an interruption. */
export function isBackchannel (text: string, language: string): boolean {
  const words = wordsOf(text)
  if (words.length === 0 || words.length > BACKCHANNEL_WORDS) return false
  return (BACKCHANNELS.get(languageOf(language)) ?? BACKCHANNELS.get('')!).test(words.join(' '))
}

/** Words of a data_retrieval field's name: callback_number, customerEmail → callback number, customer email. */
const nameWords = (name: string) => name.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((word) => word.length >= 2)

/** The kind the words name last (a caller answers in the order asked; the last one is where they pause). */
function kindNamed (text: string, rules: Rules): Expecting | undefined {
  let found: { kind: Expecting, at: number } | undefined
  for (const kind of Object.keys(rules.asks) as Expecting[]) {
    for (const match of text.matchAll(rules.asks[kind])) {
      if (found === undefined || match.index > found.at) found = { kind, at: match.index }
    }
  }
  return found?.kind
}

/**
 * What the agent's last words ask the caller for (a phone number, an e-mail, a spelled name, an address), helped
 * by the agent's data_retrieval fields being asked about; undefined: nothing of these, or a language without rules.
 */
export function expectingOf (agentWords: string, fields: RetrievalField[], language: string): Expecting | undefined {
  const rules = RULES[languageOf(language)]
  if (rules === undefined) return undefined
  // The agent's last sentence is what the caller answers.
  const sentences = agentWords.toLowerCase().split(/(?<=[.?!])\s+/).map((sentence) => sentence.trim()).filter((sentence) => sentence !== '')
  const asked = sentences.at(-1) ?? ''
  if (!asked.endsWith('?') && !rules.request.test(asked)) return undefined
  const named = kindNamed(asked, rules)
  if (named !== undefined) return named
  // A field asked for by its name ("your member ID?" for member_id): its kind is in its name or description.
  const words = wordsOf(asked)
  for (const field of fields) {
    const own = nameWords(field.name)
    if (own.length === 0 || !own.every((word) => words.some((heard) => heard.startsWith(word) || (word.length >= 4 && word.startsWith(heard) && heard.length >= 4)))) continue
    const about = `${nameWords(field.name).join(' ')} ${field.description}`.toLowerCase()
    const kind = kindNamed(about, EN) ?? kindNamed(about, DE) ?? (field.type === 'number' ? 'number' : undefined)
    if (kind !== undefined) return kind
  }
  return undefined
}
