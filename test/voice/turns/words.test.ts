import t from 'tap'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import type { RetrievalField } from '../../../src/db/schema.ts'
import {
  endOfTurnSilenceMs, expectingOf, isBackchannel, MAX_SILENCE_MS, MIN_SILENCE_MS, SILENCE_MS, type EndOfTurnOptions
} from '../../../src/modules/voice/turns/words.ts'

// The word rules of turn-taking: how long a silence ends the caller's turn given their words, backchannels,
// and what the agent asked for (docs/voice.md, "Tuning turn-taking").

const EN: EndOfTurnOptions = { language: 'en-US', responsiveness: 0.5 }
const DE: EndOfTurnOptions = { language: 'de-DE', responsiveness: 0.5 }
const wait = (text: string, options: EndOfTurnOptions, final = false) => endOfTurnSilenceMs({ text, final }, options)

t.test('a finished sentence ends the turn after a short silence, in English and German', async (t) => {
  for (const text of ['I would like to cancel my subscription, please.', 'What time do you close on Saturday?', 'Yes!', 'He said "fine."']) {
    t.equal(wait(text, EN, true), SILENCE_MS.finished, text)
  }
  for (const text of ['Ich möchte meinen Termin absagen.', 'Wann haben Sie geöffnet?']) t.equal(wait(text, DE), SILENCE_MS.finished, text)
  t.equal(SILENCE_MS.finished, 200)
})

t.test('words that cannot end a sentence wait long', async (t) => {
  const cues: Array<[string, EndOfTurnOptions]> = [
    // conjunctions, prepositions, articles, possessives, fillers
    ['I called yesterday and', EN], ['It keeps failing because', EN], ['I would like to book a table for', EN], ['I need to talk to the', EN],
    ['I want to change my', EN], ['So I was thinking um', EN], ['Well uh', EN], ['It is broken so', EN],
    ['Ich habe gestern angerufen und', DE], ['Ich möchte einen Termin für', DE], ['Ich brauche einen', DE], ['Es geht um äh', DE],
    ['Das ist kaputt, weil', DE], ['Mein Name ist Schulz, also', DE],
    // verbs that want more
    ['My phone number is', EN], ['My last name is Meyer, that is', EN], ['I would', EN], ['Meine Telefonnummer ist', DE], ['Ich möchte', DE],
    // a clause opened and left with its subject
    ['The problem is that my internet', EN], ['It stopped when I', EN], ['Das Problem ist, dass mein Internet', DE], ['Ich rufe an, weil ich', DE],
    // a verb with its second object missing
    ['Can you tell me', EN], ['Could you send us', EN],
    // punctuation that says more follows
    ['Well,', EN], ['The options are:', EN], ['I was going to say...', EN], ['Also —', DE]
  ]
  for (const [text, options] of cues) t.equal(wait(text, options), SILENCE_MS.unfinished, text)
  t.equal(SILENCE_MS.unfinished, 1200)
})

t.test('a full stop after an article, "and" or a filler does not finish the sentence', async (t) => {
  for (const text of ['I want the.', 'Two coffees and.', 'Um.']) t.equal(wait(text, EN, true), SILENCE_MS.unfinished, text)
  t.equal(wait('Ich nehme einen.', DE, true), SILENCE_MS.unfinished)
  // A stranded preposition does: "What are you looking for?" is a whole question.
  t.equal(wait('What are you looking for?', EN), SILENCE_MS.finished)
})

t.test('an unfinished number waits long, a finished one ends short', async (t) => {
  for (const text of ['My number is five five five', 'It is 0176', 'zero one seven six', 'My number is 555-12', 'plus four nine']) {
    t.equal(wait(text, EN), SILENCE_MS.unfinished, text)
  }
  for (const text of ['Meine Nummer ist null eins fünf', 'zwo drei', 'Die Hausnummer ist dreiundzwanzig']) t.equal(wait(text, DE), SILENCE_MS.unfinished, text)
  t.equal(wait('My number is five five five one two three four.', EN), SILENCE_MS.finished)
  t.equal(wait('null eins fünf eins zwei drei vier fünf.', DE), SILENCE_MS.finished)
})

t.test('an e-mail address being dictated waits long until its domain has come', async (t) => {
  for (const text of ['My e-mail address is john dot smith', 'john at gmail', 'it is john dot', 'john.smith@', 'john.smith@example', 'john at', 'my email is john underscore']) {
    t.equal(wait(text, EN), SILENCE_MS.unfinished, text)
  }
  t.equal(wait('Meine E-Mail ist hans punkt müller', DE), SILENCE_MS.unfinished)
  t.equal(wait('hans punkt müller ät gmx', DE), SILENCE_MS.unfinished)
  t.equal(wait('My e-mail is john dot.', EN, true), SILENCE_MS.unfinished, 'a full stop after "dot" ends no address')
  t.equal(wait('My e-mail address is john dot smith at example dot com.', EN), SILENCE_MS.finished)
  t.equal(wait('It is john.smith@example.com.', EN), SILENCE_MS.finished)
  t.equal(wait('hans punkt müller ät gmx punkt de.', DE), SILENCE_MS.finished)
  // "at" in a sentence about no address is a preposition, and a full stop after it finishes the sentence.
  t.equal(wait('I am at home.', EN), SILENCE_MS.finished)
})

t.test('a spelled name waits long, whether or not each letter has a full stop', async (t) => {
  for (const text of ['S M I', 'My last name is Meyer, that is M.', 'M. E. Y.', 'M-E-Y', 'It is spelled M.E.Y.']) t.equal(wait(text, EN), SILENCE_MS.unfinished, text)
  t.equal(wait('Mein Name ist Schulz, also S. C.', DE), SILENCE_MS.unfinished)
  // "I" and "A" alone are words.
  t.equal(wait('That is what I.', EN), SILENCE_MS.finished)
  t.equal(wait('I got an A.', EN), SILENCE_MS.finished)
  t.equal(wait('OK.', EN), SILENCE_MS.finished)
})

t.test('words without a cue either way wait in between', async (t) => {
  for (const text of ['four people on Friday', 'I would like to cancel my subscription', 'when the store opens tomorrow']) t.equal(wait(text, EN), SILENCE_MS.open, text)
  t.equal(wait('nächsten Dienstag vereinbaren', DE), SILENCE_MS.open)
  // German puts the verb last after a subordinator: there it may end the clause.
  t.equal(wait('Ich rufe an, weil es kaputt ist', DE), SILENCE_MS.open)
  t.ok(SILENCE_MS.finished < SILENCE_MS.open && SILENCE_MS.open < SILENCE_MS.unfinished)
})

t.test('while the agent asks for it, a number, address or spelling waits longest, and a full stop after it proves little', async (t) => {
  t.equal(wait('My number is five five five', { ...EN, expecting: 'number' }), SILENCE_MS.expected)
  t.equal(wait('null eins fünf', { ...DE, expecting: 'number' }), SILENCE_MS.expected)
  t.equal(wait('john dot smith', { ...EN, expecting: 'email' }), SILENCE_MS.expected)
  t.equal(wait('S M I', { ...EN, expecting: 'name' }), SILENCE_MS.expected)
  t.equal(wait('Baker Street 221', { ...EN, expecting: 'address' }), SILENCE_MS.expected)
  t.equal(wait('five five five.', { ...EN, expecting: 'number' }), SILENCE_MS.open)
  // Another kind: the cue's own wait.
  t.equal(wait('My number is five five five', { ...EN, expecting: 'name' }), SILENCE_MS.unfinished)
  t.equal(wait('Thank you.', { ...EN, expecting: 'number' }), SILENCE_MS.finished)
  t.ok(SILENCE_MS.expected > SILENCE_MS.unfinished)
})

t.test('no words, or a language without rules: silence alone', async (t) => {
  t.equal(endOfTurnSilenceMs(undefined, EN), SILENCE_MS.silence)
  t.equal(endOfTurnSilenceMs({ text: '  ', final: false }, EN), SILENCE_MS.silence)
  t.equal(SILENCE_MS.silence, 500)
  for (const language of ['fr-FR', 'ja', 'es-419']) {
    t.equal(wait('Je voudrais réserver une table pour', { language, responsiveness: 0.5 }), SILENCE_MS.silence, language)
    t.equal(wait('Bonjour.', { language, responsiveness: 0.5 }), SILENCE_MS.silence, language)
  }
  // The primary subtag chooses, in any case.
  t.equal(wait('I would like a table for', { language: 'EN-gb', responsiveness: 0.5 }), SILENCE_MS.unfinished)
  t.equal(wait('Ich möchte einen Termin für', { language: 'de-AT', responsiveness: 0.5 }), SILENCE_MS.unfinished)
})

t.test('responsiveness scales every wait within bounds; higher answers sooner', async (t) => {
  const at = (responsiveness: number, text: string | undefined) => endOfTurnSilenceMs(text === undefined ? undefined : { text, final: true }, { ...EN, responsiveness, expecting: 'number' })
  const texts = [undefined, 'Thanks.', 'four people', 'a table for', 'five five five']
  for (const text of texts) {
    const values = [0, 0.25, 0.5, 0.75, 1].map((r) => at(r, text))
    t.same([...values].sort((a, b) => b - a), values, `non-increasing for ${String(text)}: ${values.join(' ')}`)
    for (const value of values) t.ok(value >= MIN_SILENCE_MS && value <= MAX_SILENCE_MS, `${value} within bounds`)
  }
  t.same(texts.map((text) => at(0, text)), [750, 300, 1050, 1800, 2000], 'slowest: ×1.5, at most 2 s')
  t.same(texts.map((text) => at(1, text)), [333, 150, 467, 800, 1067], 'quickest: ×2/3, at least 150 ms')
  // Out of range or not a number (a stored row from before the setting): clamped, or the default.
  t.equal(at(-3, 'a table for'), at(0, 'a table for'))
  t.equal(at(7, 'a table for'), at(1, 'a table for'))
  t.equal(at(Number.NaN, 'a table for'), SILENCE_MS.unfinished)
})

t.test('the bench corpus: every first part waits long, every finished last part ends short', async (t) => {
  const corpus = JSON.parse(readFileSync(path.join(import.meta.dirname, '../../fixtures/turns/corpus.json'), 'utf8')) as {
    clips: Record<string, { text: string }>
    cases: Array<{ id: string, kind: string, language: string, tags: string[], parts: Array<{ clip: string }> }>
  }
  const turns = corpus.cases.filter((c) => c.kind === 'turn')
  t.ok(turns.length > 20)
  for (const turn of turns) {
    const texts = turn.parts.map((part) => corpus.clips[part.clip].text)
    const options = { language: turn.language, responsiveness: 0.5 }
    // As a recogniser gives them: the words of the turn so far, interim (no cue of finality) or final.
    for (let i = 0; i < texts.length - 1; i++) {
      for (const final of [false, true]) t.ok(wait(texts.slice(0, i + 1).join(' '), options, final) >= 1100, `${turn.id}: "${texts.slice(0, i + 1).join(' ')}" waits long`)
    }
    const whole = wait(texts.join(' '), options, true)
    // A spelling has no end the words can show: its last letter waits as the others did.
    if (turn.tags.includes('spelled')) t.ok(whole >= 1100, `${turn.id} waits long`)
    else t.ok(whole <= 250, `${turn.id}: "${texts.join(' ')}" ends short (${whole} ms)`)
  }
})

t.test('backchannels in English and German', async (t) => {
  for (const text of ['uh-huh', 'Uh huh.', 'yeah', 'Yeah, yeah.', 'okay', 'OK', 'mm-hmm', 'Mhm.', 'hmm', 'right', 'Right, right.', 'oh okay', 'I see', 'got it', 'sure', 'all right', 'yes']) {
    t.ok(isBackchannel(text, 'en-US'), text)
  }
  for (const text of ['ja', 'Ja, ja.', 'genau', 'Ja, genau.', 'mhm', 'okay', 'alles klar', 'ach so', 'stimmt']) t.ok(isBackchannel(text, 'de-DE'), text)
})

t.test('what is not a backchannel: words that take the floor', async (t) => {
  for (const text of ['yeah but I wanted', 'no stop', 'wait', 'No.', 'Sorry, wait, that is not what I asked for.', 'hold on', 'right now', 'okay so I need', 'not okay', '', '  ', 'um', 'yeah yeah yeah yeah yeah yeah']) {
    t.notOk(isBackchannel(text, 'en-US'), JSON.stringify(text))
  }
  for (const text of ['Moment', 'nein', 'Nein, warten Sie', 'ja aber', 'stopp']) t.notOk(isBackchannel(text, 'de-DE'), text)
  // Each language's own words: "ja" is no English backchannel.
  t.notOk(isBackchannel('genau', 'en-US'))
  t.notOk(isBackchannel('got it', 'de-DE'))
})

t.test('languages without rules know only the sounds every language shares', async (t) => {
  for (const text of ['mhm', 'mm-hmm', 'uh-huh', 'okay', 'hmm']) t.ok(isBackchannel(text, 'fr-FR'), text)
  for (const text of ['oui', 'yeah', 'ja', 'attendez']) t.notOk(isBackchannel(text, 'fr-FR'), text)
})

const field = (name: string, description = '', type: RetrievalField['type'] = 'string'): RetrievalField => ({ name, type, description, required: true })

t.test('expectingOf: what the agent\'s last words ask for', async (t) => {
  const asks: Array<[string, string, ReturnType<typeof expectingOf>]> = [
    ['Thanks. What is the best phone number to reach you?', 'en-US', 'number'],
    ['Could you give me your customer number, please?', 'en-US', 'number'],
    ['And your e-mail address?', 'en-US', 'email'],
    ['Please spell your last name.', 'en-US', 'name'],
    ['May I have your name?', 'en-GB', 'name'],
    ['What is your street address?', 'en-US', 'address'],
    ['Where do you live?', 'en-US', 'address'],
    ['Wie lautet Ihre Telefonnummer?', 'de-DE', 'number'],
    ['Können Sie mir Ihre E-Mail-Adresse nennen?', 'de-DE', 'email'],
    ['Bitte buchstabieren Sie Ihren Nachnamen.', 'de-DE', 'name'],
    ['Wie ist Ihre Adresse?', 'de-DE', 'address'],
    // Several asked: the last named is what the caller ends with.
    ['Can I have your name and phone number?', 'en-US', 'number'],
    ['Can I have your phone number and name?', 'en-US', 'name']
  ]
  for (const [words, language, kind] of asks) t.equal(expectingOf(words, [], language), kind, words)
})

t.test('expectingOf: nothing asked, or a language without rules', async (t) => {
  for (const words of ['I have noted your phone number. Is there anything else?', 'I will send the details to your e-mail.', 'Your number is 555.', 'How can I help you today?', '']) {
    t.equal(expectingOf(words, [], 'en-US'), undefined, words)
  }
  t.equal(expectingOf('Quel est votre numéro de téléphone ?', [], 'fr-FR'), undefined)
})

t.test('expectingOf: a data_retrieval field asked for by its name gives its kind', async (t) => {
  const fields = [field('member_id', 'The caller\'s membership number from their card'), field('contact', 'Where we send the confirmation: an e-mail address'),
    field('party_size', 'How many guests', 'number'), field('reason', 'Why they call')]
  t.equal(expectingOf('Could you read me your member ID?', fields, 'en-US'), 'number')
  t.equal(expectingOf('What contact should we use?', fields, 'en-US'), 'email')
  t.equal(expectingOf('What party size are you thinking of?', fields, 'en-US'), 'number', 'a number field')
  t.equal(expectingOf('What is the reason for your call?', fields, 'en-US'), undefined, 'a field of no dictated kind')
  t.equal(expectingOf('Wie ist Ihre Member ID?', fields, 'de-DE'), 'number')
  t.equal(expectingOf('Thanks, that is all.', fields, 'en-US'), undefined)
})
