// node scripts/turns-corpus.ts — builds the caller audio of `npm run bench:turns` (test/fixtures/turns/): speech
// clips from espeak-ng in several voices and speeds, English and German, noises from SoX, and corpus.json, which
// composes them into cases with known truths (test/fixtures/turns/README.md). Clips and noises are stored once
// and mixed by the benchmark, so a pause of any length or a noise at any SNR costs no bytes. Needs espeak-ng and
// sox (`apt-get install -y espeak-ng sox`); the same versions give the same bytes (SoX runs with -R).
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { decodeWav, encodeWav, FRAME_SAMPLES, rms, SAMPLE_RATE } from '../src/modules/voice/audio.ts'
import { readArgs } from './args.ts'
import { CORPUS_DIR, SPEECH_LEVEL, type Corpus, type TalkCase, type TurnCase } from './bench/turns-corpus.ts'

const COMMAND = {
  name: 'turns-corpus',
  usage: `usage: node scripts/turns-corpus.ts

Writes the caller audio of npm run bench:turns into test/fixtures/turns/ (speech/*.wav, noise/*.wav and
corpus.json, the cases and their truths) from espeak-ng and SoX, which must be installed
(apt-get install -y espeak-ng sox).

  -h, --help   this text`
}
readArgs(COMMAND, { options: {} })

const work = mkdtempSync(path.join(tmpdir(), 'turns-corpus-'))
const ms = (samples: number) => Math.round(samples * 1000 / SAMPLE_RATE)

/** SoX in repeatable mode (its noise generators seeded the same way every run), errors only. */
const sox = (...args: string[]) => execFileSync('sox', ['-R', '-V1', ...args], { stdio: ['ignore', 'ignore', 'inherit'] })

/** A WAV made by `make(file)`, as 16 kHz mono samples. */
function render (make: (file: string) => void): Int16Array {
  const made = path.join(work, 'made.wav')
  const converted = path.join(work, 'converted.wav')
  make(made)
  sox(made, '-r', String(SAMPLE_RATE), '-c', '1', '-b', '16', converted)
  return decodeWav(readFileSync(converted)).pcm
}

/** RMS of the 20 ms frames within 20 dB of the loudest: the level of the speech itself, pauses between words left out. */
function activeLevel (pcm: Int16Array): number {
  const frames: number[] = []
  for (let i = 0; i + FRAME_SAMPLES <= pcm.length; i += FRAME_SAMPLES) frames.push(rms(pcm.subarray(i, i + FRAME_SAMPLES)))
  const loudest = Math.max(...frames)
  const active = frames.filter((level) => level >= loudest / 10)
  return Math.sqrt(active.reduce((sum, level) => sum + level * level, 0) / active.length)
}

/** Scales the samples so that `level` (of the unscaled samples) becomes `target`, never past full scale. */
function scale (pcm: Int16Array, level: number, target: number): Int16Array {
  const peak = pcm.reduce((max, s) => Math.max(max, Math.abs(s)), 1)
  const gain = Math.min(target / level, 32_000 / peak)
  return pcm.map((s) => Math.round(s * gain))
}

const corpus: Corpus = {
  generator: `scripts/turns-corpus.ts with ${execFileSync('espeak-ng', ['--version'], { encoding: 'utf8' }).split('  ')[0].trim()} and ${execFileSync('sox', ['--version'], { encoding: 'utf8' }).trim().replace(/^sox:\s+/, '')}`,
  sample_rate: SAMPLE_RATE,
  speech_level: SPEECH_LEVEL,
  clips: {},
  noises: {},
  cases: []
}
for (const folder of ['speech', 'noise']) {
  rmSync(path.join(CORPUS_DIR, folder), { recursive: true, force: true })
  mkdirSync(path.join(CORPUS_DIR, folder), { recursive: true })
}

// Speech: espeak-ng, resampled by SoX, cut to the first and last audible sample (so a clip's end is the true end
// of its speech), at the same active level (SPEECH_LEVEL) whatever the voice.

type Language = 'en' | 'de'
interface Voice { voice: string, speed: number }
const VOICES = {
  enMan: { voice: 'en-us+m3', speed: 170 },
  enWoman: { voice: 'en-us+f3', speed: 165 },
  gbMan: { voice: 'en-gb', speed: 175 },
  gbWoman: { voice: 'en-gb+f4', speed: 160 },
  scot: { voice: 'en-gb-scotland+m2', speed: 180 },
  enSlow: { voice: 'en-us+m1', speed: 120 },
  enFast: { voice: 'en-us+f2', speed: 240 },
  deMan: { voice: 'de+m3', speed: 165 },
  deWoman: { voice: 'de+f3', speed: 160 },
  deSlow: { voice: 'de+m1', speed: 120 },
  deFast: { voice: 'de+f2', speed: 230 }
} satisfies Record<string, Voice>

/** Adds a speech clip (text, or espeak phonemes in [[…]]) and answers its name. */
function clip (name: string, language: Language, { voice, speed }: Voice, text: string): string {
  const pcm = render((file) => execFileSync('espeak-ng', ['-v', voice, '-s', String(speed), '-w', file, text]))
  let first = 0
  while (first < pcm.length && Math.abs(pcm[first]) < 64) first++
  let last = pcm.length - 1
  while (last > first && Math.abs(pcm[last]) < 64) last--
  const speech = pcm.slice(first, last + 1)
  const file = `speech/${name}.wav`
  writeFileSync(path.join(CORPUS_DIR, file), encodeWav(scale(speech, activeLevel(speech), SPEECH_LEVEL)))
  corpus.clips[name] = { file, text, voice, speed, language, ms: ms(speech.length) }
  return name
}

// Noises. Beds (background for whole cases) are stored at RMS SPEECH_LEVEL (0 dB SNR) and mixed at -SNR dB;
// events (sounds while the agent talks) at their own level relative to the speech.

function noise (name: string, kind: 'bed' | 'event', description: string, make: (file: string) => void, level: (pcm: Int16Array) => number, target: number): void {
  const pcm = render(make)
  const file = `noise/${name}.wav`
  writeFileSync(path.join(CORPUS_DIR, file), encodeWav(scale(pcm, level(pcm), target)))
  corpus.noises[name] = { file, kind, description, ms: ms(pcm.length) }
}

const BED_SECONDS = '4'
const synthBed = (...effects: string[]) => (file: string) => sox('-n', '-r', String(SAMPLE_RATE), '-b', '16', file, 'synth', BED_SECONDS, ...effects)
noise('white', 'bed', 'white noise (hiss)', synthBed('whitenoise'), rms, SPEECH_LEVEL)
noise('pink', 'bed', 'pink noise (a fan, rain)', synthBed('pinknoise'), rms, SPEECH_LEVEL)
noise('brown', 'bed', 'brown noise (traffic, a car)', synthBed('brownnoise', 'highpass', '60'), rms, SPEECH_LEVEL)
noise('static', 'bed', 'line static: band-limited hiss, crackling', synthBed('whitenoise', 'band', '2500', '2000', 'tremolo', '37', '100'), rms, SPEECH_LEVEL)

// Babble: five voices talking at once, as a room or a television behind the caller.
const BABBLE = [
  ['en-us+m3', 'The weather today will be mostly sunny with a light breeze from the west and highs near twenty degrees.'],
  ['en-gb+f3', 'And now the headlines: the council has approved the new bridge, and work starts in the spring.'],
  ['de+m2', 'Im Stadion war die Stimmung gut, aber die Mannschaft hat in der zweiten Halbzeit nachgelassen.'],
  ['en-us+f4', 'Could you pass me the salt, please, and did anyone see where I left my keys this morning?'],
  ['en-gb-scotland', 'We will be back after the break with more on the story and the rest of the news.']
]
noise('babble', 'bed', 'babble: five espeak-ng voices at once (a room, a television)', (file) => {
  const voices = BABBLE.map(([voice, text], i) => {
    const one = path.join(work, `babble-${i}.wav`)
    execFileSync('espeak-ng', ['-v', voice, '-s', '170', '-w', one, text])
    const trimmed = path.join(work, `babble-${i}-4s.wav`)
    sox(one, '-r', String(SAMPLE_RATE), trimmed, 'trim', String(0.3 * i), BED_SECONDS, 'pad', '0', BED_SECONDS, 'trim', '0', BED_SECONDS)
    return trimmed
  })
  sox('-m', ...voices, file)
}, rms, SPEECH_LEVEL)

// Music: plucked chords and a melody (hold music, a radio).
noise('music', 'bed', 'music: plucked chords with a melody (hold music, a radio)', (file) => {
  const chords = [['C3', 'E4', 'G4', 'C5'], ['A2', 'E4', 'A4', 'C5'], ['F2', 'F4', 'A4', 'C5'], ['G2', 'D4', 'G4', 'B4']]
  const parts = chords.flatMap((notes, i) => [0, 1].map((half) => {
    const part = path.join(work, `chord-${i}-${half}.wav`)
    sox('-n', '-r', String(SAMPLE_RATE), '-b', '16', part, 'synth', '0.5', ...notes.flatMap((note, n) => ['pluck', n === 3 && half === 1 ? chords[(i + 1) % 4][3] : note]), 'channels', '1')
    return part
  }))
  sox(...parts, file)
}, rms, SPEECH_LEVEL)

// Events while the agent talks: knocks and clicks at their own peak, a cough at the level of speech; the other
// noises of the corpus play from their beds at 10 dB under the speech (the cases below).
noise('knock', 'event', 'three knocks on a table (peak -6 dBFS)',
  (file) => sox('-n', '-r', String(SAMPLE_RATE), '-b', '16', file, 'synth', '0.09', 'brownnoise', 'lowpass', '700', 'fade', 'q', '0.002', '0.09', '0.08', 'pad', '0', '0.16', 'repeat', '2'),
  (pcm) => pcm.reduce((max, s) => Math.max(max, Math.abs(s)), 1), 16_384)
noise('click', 'event', 'two clicks of a pen (peak -6 dBFS)',
  (file) => sox('-n', '-r', String(SAMPLE_RATE), '-b', '16', file, 'synth', '0.006', 'whitenoise', 'highpass', '1500', 'pad', '0', '0.12', 'repeat', '1'),
  (pcm) => pcm.reduce((max, s) => Math.max(max, Math.abs(s)), 1), 16_384)
noise('cough', 'event', 'a cough: two bursts of band-passed noise (at the level of speech)',
  (file) => sox('-n', '-r', String(SAMPLE_RATE), '-b', '16', file, 'synth', '0.22', 'pinknoise', 'bandpass', '900', '1q', 'fade', 'q', '0.01', '0.22', '0.18', 'pad', '0', '0.08', 'repeat', '1'),
  activeLevel, SPEECH_LEVEL)

// Cases. Times are ms from the first frame the caller sends.

/** Silence (or background noise) before the caller's first word: the server is ready long before. */
const LEAD_IN_MS = 1500
/** When an event starts, after the first frame of the agent's speech reached the caller. */
const AFTER_AGENT_MS = 700
const PAUSES = [300, 500, 700, 1000]
const BEDS = ['white', 'pink', 'brown', 'babble', 'music', 'static']
const cases: Array<TurnCase | TalkCase> = corpus.cases

/** A turn: clips with pauses between them, from LEAD_IN_MS. */
function turn (id: string, language: Language, tags: string[], clips: Array<string | number>): TurnCase {
  const parts: TurnCase['parts'] = []
  const pauses: TurnCase['truth']['pauses'] = []
  let at = LEAD_IN_MS
  for (const item of clips) {
    if (typeof item === 'number') {
      pauses.push({ at_ms: at, ms: item })
      at += item
    } else {
      parts.push({ clip: item, at_ms: at })
      at += corpus.clips[item].ms
    }
  }
  return { id, kind: 'turn', language, tags, parts, truth: { speech_start_ms: LEAD_IN_MS, speech_end_ms: at, pauses } }
}

/** A sound while the agent talks: a speech clip, or a noise at a gain. */
function talk (id: string, language: Language, tags: string[], bargeIn: boolean, event: TalkCase['event']): TalkCase {
  return { id, kind: 'talk', language, tags, event, truth: { barge_in: bargeIn } }
}

// Mid-sentence pauses of known length at a known place.
const PAUSED: Array<[string, Language, Voice, string, string]> = [
  ['en-number', 'en', VOICES.enMan, 'My number is five five five', 'one two three four.'],
  ['en-table', 'en', VOICES.gbWoman, 'I would like to book a table for', 'four people on Friday.'],
  ['en-internet', 'en', VOICES.scot, 'The problem is that my internet', 'keeps dropping every evening.'],
  ['en-store', 'en', VOICES.enWoman, 'Can you tell me', 'when the store opens tomorrow?'],
  ['de-number', 'de', VOICES.deMan, 'Meine Nummer ist null eins fünf', 'zwei drei vier.'],
  ['de-termin', 'de', VOICES.deWoman, 'Ich möchte einen Termin für', 'nächsten Dienstag vereinbaren.']
]
const paused = PAUSED.map(([name, language, voice, first, second]) => ({
  name, language, parts: [clip(`${name}-1`, language, voice, first), clip(`${name}-2`, language, voice, second)] as [string, string]
}))
for (const { name, language, parts } of paused) {
  for (const pause of PAUSES) cases.push(turn(`pause-${name}-${pause}`, language, ['pause'], [parts[0], pause, parts[1]]))
}

// Dictated numbers, an e-mail address and spelled names: several pauses.
const en = (name: string, text: string, voice: Voice = VOICES.gbMan) => clip(name, 'en', voice, text)
const de = (name: string, text: string, voice: Voice = VOICES.deMan) => clip(name, 'de', voice, text)
cases.push(turn('dictation-en-phone', 'en', ['dictation', 'number'], [
  en('en-phone-1', 'My phone number is'), 600, en('en-phone-2', 'zero one seven six'), 700, en('en-phone-3', 'five five five'), 500, en('en-phone-4', 'one two three four.')
]))
cases.push(turn('dictation-en-email', 'en', ['dictation', 'email'], [
  en('en-email-1', 'My e-mail address is john dot smith', VOICES.enWoman), 800, en('en-email-2', 'at example dot com.', VOICES.enWoman)
]))
/** Letters spelled one by one, 400 ms apart. */
const spelled = (letters: string, say: (letter: string) => string) => [...letters].flatMap((letter, i) => i === 0 ? [say(letter)] : [400, say(letter)])
cases.push(turn('dictation-en-spelled', 'en', ['dictation', 'spelled'], [
  en('en-spelled-0', 'My last name is Meyer, that is', VOICES.enMan), 500,
  ...spelled('MEYER', (letter) => en(`en-letter-${letter.toLowerCase()}`, `${letter}.`, VOICES.enMan))
]))
cases.push(turn('dictation-de-phone', 'de', ['dictation', 'number'], [
  de('de-phone-1', 'Meine Telefonnummer ist'), 600, de('de-phone-2', 'null eins fünf eins'), 700, de('de-phone-3', 'zwei drei vier fünf.')
]))
cases.push(turn('dictation-de-spelled', 'de', ['dictation', 'spelled'], [
  de('de-spelled-0', 'Mein Name ist Schulz, also', VOICES.deWoman), 500,
  ...spelled('SCHULZ', (letter) => de(`de-letter-${letter.toLowerCase()}`, `${letter}.`, VOICES.deWoman))
]))

// Finished sentences, slow and fast speakers: the end of speech is the end of the turn.
const FINISHED: Array<[string, Language, Voice, string]> = [
  ['en-cancel', 'en', VOICES.enMan, 'I would like to cancel my subscription, please.'],
  ['en-close', 'en', VOICES.gbWoman, 'What time do you close on Saturday?'],
  ['en-slow', 'en', VOICES.enSlow, 'Can I speak to someone about my bill?'],
  ['en-fast', 'en', VOICES.enFast, 'Thanks, that is all I needed, have a nice day.'],
  ['en-short', 'en', VOICES.scot, 'Yes, please.'],
  ['de-absagen', 'de', VOICES.deMan, 'Ich möchte meinen Termin absagen.'],
  ['de-slow', 'de', VOICES.deSlow, 'Wann haben Sie am Samstag geöffnet?'],
  ['de-fast', 'de', VOICES.deFast, 'Vielen Dank, das war schon alles.']
]
for (const [name, language, voice, text] of FINISHED) cases.push(turn(`finished-${name}`, language, ['finished'], [clip(name, language, voice, text)]))

// The same turns in background noise at 20 and 10 dB SNR: pauses of 500 and 1000 ms and four finished sentences,
// each bed in turn.
const noisyTurns = cases.filter((c): c is TurnCase => c.kind === 'turn' &&
  (/^pause-.*-(500|1000)$/.test(c.id) || ['finished-en-cancel', 'finished-en-fast', 'finished-de-absagen', 'finished-de-slow'].includes(c.id)))
for (const snr of [20, 10]) {
  noisyTurns.forEach((c, i) => {
    const bed = BEDS[(i + snr / 10) % BEDS.length]
    cases.push({ ...c, id: `${c.id}-${bed}-${snr}db`, tags: [...c.tags, 'noisy'], noise: { bed, snr_db: snr } })
  })
}

// While the agent talks: backchannels and noises must not stop it; a real barge-in must, at once.
const BACKCHANNELS: Array<[string, Language, Voice, string]> = [
  ['en-uh-huh', 'en', VOICES.enMan, 'uh-huh'],
  ['en-yeah', 'en', VOICES.gbWoman, 'yeah'],
  ['en-okay', 'en', VOICES.enWoman, 'okay'],
  ['en-mm-hmm', 'en', VOICES.gbMan, "[[@m'h@m]]"],
  ['en-right', 'en', VOICES.scot, 'right'],
  ['de-ja', 'de', VOICES.deMan, 'ja'],
  ['de-genau', 'de', VOICES.deWoman, 'genau'],
  ['de-mhm', 'de', VOICES.deMan, "[[m'hm]]"],
  ['de-okay', 'de', VOICES.deFast, 'okay']
]
const BARGE_INS: Array<[string, Language, Voice, string]> = [
  ['en-wait', 'en', VOICES.enMan, 'Sorry, wait, that is not what I asked for.'],
  ['en-person', 'en', VOICES.gbWoman, 'No, stop, I want to talk to a person.'],
  ['en-slow', 'en', VOICES.enSlow, 'Hang on, can you repeat the opening hours?'],
  ['en-fast', 'en', VOICES.enFast, 'Actually I need to cancel, not to book.'],
  ['de-moment', 'de', VOICES.deMan, 'Moment, das stimmt so nicht.'],
  ['de-nein', 'de', VOICES.deWoman, 'Nein, warten Sie, ich möchte stornieren.']
]
const spoken = (list: Array<[string, Language, Voice, string]>, prefix: string) =>
  list.map(([name, language, voice, text]) => ({ name, language, clip: clip(`${prefix}-${name}`, language, voice, text) }))
const backchannels = spoken(BACKCHANNELS, 'backchannel')
const bargeIns = spoken(BARGE_INS, 'barge-in')
const talking: TalkCase[] = [
  talk('control-en', 'en', ['control'], false, undefined),
  talk('control-de', 'de', ['control'], false, undefined),
  ...backchannels.map(({ name, language, clip }) => talk(`backchannel-${name}`, language, ['backchannel'], false, { clip, after_agent_ms: AFTER_AGENT_MS })),
  talk('noise-knock', 'en', ['noise'], false, { noise: 'knock', gain_db: 0, after_agent_ms: AFTER_AGENT_MS }),
  talk('noise-click', 'en', ['noise'], false, { noise: 'click', gain_db: 0, after_agent_ms: AFTER_AGENT_MS }),
  talk('noise-cough', 'en', ['noise'], false, { noise: 'cough', gain_db: 0, after_agent_ms: AFTER_AGENT_MS }),
  talk('noise-fan', 'en', ['noise'], false, { noise: 'pink', gain_db: -10, ms: 2000, after_agent_ms: AFTER_AGENT_MS }),
  talk('noise-television', 'en', ['noise'], false, { noise: 'babble', gain_db: -10, ms: 1500, after_agent_ms: AFTER_AGENT_MS }),
  talk('noise-music', 'de', ['noise'], false, { noise: 'music', gain_db: -10, ms: 2000, after_agent_ms: AFTER_AGENT_MS }),
  talk('noise-static', 'de', ['noise'], false, { noise: 'static', gain_db: -10, ms: 1000, after_agent_ms: AFTER_AGENT_MS }),
  ...bargeIns.map(({ name, language, clip }) => talk(`barge-in-${name}`, language, ['barge-in'], true, { clip, after_agent_ms: AFTER_AGENT_MS }))
]
cases.push(...talking)
// Backchannels and barge-ins in background noise at 20 and 10 dB SNR.
for (const snr of [20, 10]) {
  talking.filter((c) => c.tags.includes('backchannel') || c.tags.includes('barge-in')).forEach((c, i) => {
    const bed = BEDS[(i + snr / 10) % BEDS.length]
    cases.push({ ...c, id: `${c.id}-${bed}-${snr}db`, tags: [...c.tags, 'noisy'], noise: { bed, snr_db: snr } })
  })
}

writeFileSync(path.join(CORPUS_DIR, 'corpus.json'), JSON.stringify(corpus, null, 1) + '\n')
rmSync(work, { recursive: true, force: true })
const bytes = execFileSync('du', ['-sb', CORPUS_DIR], { encoding: 'utf8' }).split('\t')[0]
process.stdout.write(`${Object.keys(corpus.clips).length} speech clips, ${Object.keys(corpus.noises).length} noises, ${cases.length} cases, ${(Number(bytes) / 1e6).toFixed(1)} MB in ${path.relative(process.cwd(), CORPUS_DIR)}\n`)
