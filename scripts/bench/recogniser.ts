// The closed-vocabulary recogniser of bench:turns' streaming stand-in: it knows the corpus's clips (as a real
// recogniser knows its language) and tells which one is being spoken from the audio alone, so that the server
// gets each case's real words, in time. A clip's fingerprint is its short-time energy envelope in four bands
// under 4 kHz (10 ms hops, the first 400 ms, followed by silence when the clip is shorter), taken both as the
// clip is and as it comes through Twilio's path (8 kHz µ-law, resampled by the server). The incoming audio's
// envelope over the last 400 ms is compared with every fingerprint of the stream's language, each with the
// background noise measured on the stream added to it (log energies, correlation): the best one above a
// threshold, at a level near the clip's, is the clip, once 30 ms more do not find a better one. Noise alone
// (a knock, a fan, music, babble) matches no clip and is heard as no words.
import { FRAME_SAMPLES, mulawDecode, mulawEncode, resample, SAMPLE_RATE } from '../../src/modules/voice/audio.ts'
import type { DeepgramHearing, DeepgramStream } from '../../test/helpers/deepgram-standin.ts'
import type { LoadedCorpus } from './turns-corpus.ts'

/** 10 ms of audio at 16 kHz: the envelope's resolution. */
const HOP = SAMPLE_RATE / 100
/** Hops compared (400 ms): long enough to tell the clips apart, short enough to name a clip while it is spoken. */
const WINDOW = 40
/** Band centres (Hz), all under Twilio's 4 kHz. */
const BANDS = [250, 600, 1200, 2400]
const Q = 1.2
/** Energy (mean square, in samples²) under which nothing is told apart: keeps the logarithm of silence finite. */
const FLOOR = 100
/** A window correlates at least this well with a fingerprint to be its clip. */
const MATCH = 0.88
/** ...and its level is within this of the clip's (natural log of energy: 1.5 is 6.5 dB). */
const LEVEL = 1.5
/** A candidate is named once this many hops have not found a better one. */
const SETTLE_HOPS = 3
/**
 * A clip starts after a pause, not as a noise ends or between the bursts of a cough: the PRE hops (200 ms) before
 * it are at most QUIET above the noise (natural log of energy, per band on average: 1.4 is 6 dB).
 */
const PRE = 20
const QUIET = 1.4
/** Clips of other words that fit a clip's start within this are told apart over more of it, as it goes on. */
const RIVAL = 0.05
/** ...until one fits by this much better (or all of them are over). */
const MARGIN = 0.02
/** Hops of the stream kept (7 s): the longest clip and its window. */
const HISTORY = 700
/** The background noise: a low percentile of the band energies of the last hops heard outside any clip. */
const NOISE_HOPS = 300
const NOISE_PERCENTILE = 0.35
const NOISE_EVERY_HOPS = 10

/** Band-pass biquads (RBJ's, 0 dB at the centre) whose state runs on across chunks. */
class BandEnergies {
  readonly #coefficients = BANDS.map((f) => {
    const w = 2 * Math.PI * f / SAMPLE_RATE
    const alpha = Math.sin(w) / (2 * Q)
    const a0 = 1 + alpha
    return { b0: alpha / a0, b2: -alpha / a0, a1: -2 * Math.cos(w) / a0, a2: (1 - alpha) / a0 }
  })

  readonly #state = BANDS.map(() => ({ x1: 0, x2: 0, y1: 0, y2: 0 }))
  readonly #sums = new Float64Array(BANDS.length)
  #count = 0

  /** The band energies of each 10 ms hop completed by these samples. */
  push (pcm: Int16Array): Float64Array[] {
    const hops: Float64Array[] = []
    for (let i = 0; i < pcm.length; i++) {
      const x = pcm[i]
      for (let b = 0; b < BANDS.length; b++) {
        const c = this.#coefficients[b]
        const s = this.#state[b]
        const y = c.b0 * x + c.b2 * s.x2 - c.a1 * s.y1 - c.a2 * s.y2
        s.x2 = s.x1
        s.x1 = x
        s.y2 = s.y1
        s.y1 = y
        this.#sums[b] += y * y
      }
      if (++this.#count === HOP) {
        hops.push(Float64Array.from(this.#sums, (sum) => sum / HOP))
        this.#sums.fill(0)
        this.#count = 0
      }
    }
    return hops
  }
}

/** The caller's audio as the server gets it from Twilio: each 20 ms frame to 8 kHz µ-law and back, as the stand-in and the server do. */
export function phonePath (pcm: Int16Array): Int16Array {
  const out = new Int16Array(pcm.length)
  for (let offset = 0; offset < pcm.length; offset += FRAME_SAMPLES) {
    const frame = pcm.subarray(offset, offset + FRAME_SAMPLES)
    const back = resample(mulawDecode(mulawEncode(resample(frame, SAMPLE_RATE, 8000))), 8000, SAMPLE_RATE)
    out.set(back.subarray(0, Math.min(back.length, out.length - offset)), offset)
  }
  return out
}

/** A clip as the recogniser knows it: its words and how long it lasts. */
export interface VocabularyClip { id: string, language: string, ms: number, text: string, words: string[] }

/** A clip heard: which, and where in the stream its audio starts and ends (ms of audio since the stream began). */
export interface Heard { clip: VocabularyClip, startMs: number, endMs: number }

/** A clip's band energies from its start to WINDOW hops after its end (silence). */
interface Fingerprint { clip: VocabularyClip, energies: Float64Array[] }

/** What a clip says: its text (espeak's phoneme notation, `[[m'hm]]`, is written as the clip's name says it). */
function wordsOf (id: string, text: string): string {
  return text.startsWith('[[') ? id.split('-').slice(2).join('-') : text
}

/** The corpus's clips and their fingerprints, made once and shared by every stream. */
export class Vocabulary {
  readonly clips: VocabularyClip[]
  readonly #fingerprints: Fingerprint[]

  constructor ({ corpus, audio }: LoadedCorpus) {
    this.clips = Object.entries(corpus.clips).map(([id, clip]) => {
      const text = wordsOf(id, clip.text)
      return { id, language: clip.language, ms: clip.ms, text, words: text.split(/\s+/) }
    })
    this.#fingerprints = this.clips.flatMap((clip) => {
      const spoken = audio(corpus.clips[clip.id].file)
      const pcm = new Int16Array(spoken.length + WINDOW * HOP)
      pcm.set(spoken)
      return [pcm, phonePath(pcm)].map((path) => ({ clip, energies: new BandEnergies().push(path) }))
    })
  }

  /** A stream's listener; `language` (en, de; anything else: all) limits the clips it knows. */
  listen (language?: string): Listener {
    const known = this.#fingerprints.filter((f) => !['en', 'de'].includes(language ?? '') || f.clip.language === language)
    return new Listener(known)
  }
}

/** A fingerprint as it sounds over the stream's noise: log energies of its first `hops` hops, centred. */
interface Template { f: Fingerprint, values: Float64Array, mean: number, norm: number }

/** A clip found, not yet told apart from its rivals (clips of other words that fit its first 400 ms almost as well). */
interface Pending { onset: number, leader: Fingerprint, rivals: Fingerprint[] }

/** One stream: audio in, clips heard out. */
export class Listener {
  readonly #fingerprints: Fingerprint[]
  readonly #bands = new BandEnergies()
  /** The log energies of the last HISTORY hops; hops so far. */
  readonly #history: Float64Array[] = []
  #hops = 0
  /** Band energies heard outside clips, for the background noise; the noise, and each fingerprint's start over it. */
  readonly #quiet: Float64Array[] = []
  #noise = new Float64Array(BANDS.length)
  #templates: Template[] = []
  /** No clip is looked for before this hop (the end of the last one heard). */
  #busyUntil = 0
  #candidate: { f: Fingerprint, onset: number, score: number, age: number, rivals: Fingerprint[] } | undefined
  #pending: Pending | undefined

  constructor (fingerprints: Fingerprint[]) {
    this.#fingerprints = fingerprints
    this.#retemplate()
  }

  /** 16 kHz audio in; the clips named by it. */
  push (pcm: Int16Array): Heard[] {
    const heard: Heard[] = []
    for (const energies of this.#bands.push(pcm)) {
      const hop = this.#hops++
      this.#history.push(energies.map((e) => Math.log(e + FLOOR)))
      if (this.#history.length > HISTORY) this.#history.shift()
      if (hop < this.#busyUntil) continue
      if (this.#pending === undefined) {
        this.#quiet.push(energies)
        if (this.#quiet.length > NOISE_HOPS) this.#quiet.shift()
        if (hop % NOISE_EVERY_HOPS === 0) this.#measureNoise()
        this.#detect(hop)
      }
      const named = this.#pending === undefined ? undefined : this.#tell(hop, this.#pending)
      if (named !== undefined) heard.push(named)
    }
    return heard
  }

  #measureNoise (): void {
    const hops = this.#quiet.slice(0, Math.max(1, this.#quiet.length - WINDOW)) // not what may be the start of a clip
    this.#noise = Float64Array.from(BANDS, (_, b) => {
      const sorted = hops.map((h) => h[b]).sort((x, y) => x - y)
      return sorted[Math.floor(sorted.length * NOISE_PERCENTILE)] ?? 0
    })
    this.#retemplate()
  }

  #retemplate (): void {
    this.#templates = this.#fingerprints.map((f) => this.#template(f, WINDOW))
  }

  #template (f: Fingerprint, hops: number): Template {
    const values = new Float64Array(hops * BANDS.length)
    for (let h = 0; h < hops; h++) {
      const energies = f.energies[Math.min(h, f.energies.length - 1)]
      for (let b = 0; b < BANDS.length; b++) values[h * BANDS.length + b] = Math.log(energies[b] + this.#noise[b] + FLOOR)
    }
    return { f, ...centred(values) }
  }

  /** The stream's log energies from hop `from` to hop `to` (both included), centred. */
  #heard (from: number, to: number) {
    const first = this.#hops - this.#history.length
    const values = new Float64Array((to - from + 1) * BANDS.length)
    for (let h = from; h <= to; h++) values.set(this.#history[h - first], (h - from) * BANDS.length)
    return centred(values)
  }

  #quietBefore (onset: number): boolean {
    const first = this.#hops - this.#history.length
    let excess = 0
    for (let h = onset - PRE; h < onset; h++) for (let b = 0; b < BANDS.length; b++) excess += this.#history[h - first][b] - Math.log(this.#noise[b] + FLOOR)
    return excess / (PRE * BANDS.length) <= QUIET
  }

  /** Looks for the start of a clip: the last WINDOW hops (and PRE before them) against every fingerprint's start. */
  #detect (hop: number): void {
    const onset = hop - WINDOW + 1
    if (onset - PRE >= this.#hops - this.#history.length && onset >= this.#busyUntil && this.#quietBefore(onset)) {
      const { values, mean, norm } = this.#heard(onset, hop)
      const scores = this.#templates.flatMap((t) => {
        if (Math.abs(mean - t.mean) > LEVEL || norm === 0 || t.norm === 0) return []
        return [{ f: t.f, score: dot(values, t.values) / (norm * t.norm) }]
      })
      const best = scores.reduce<typeof scores[number] | undefined>((a, b) => b.score >= MATCH && b.score > (a?.score ?? -1) ? b : a, undefined)
      if (best !== undefined && best.score > (this.#candidate?.score ?? -1)) {
        const rivals = scores.filter((s) => s.f.clip.text !== best.f.clip.text && s.score >= best.score - RIVAL).map((s) => s.f)
        this.#candidate = { ...best, onset, age: 0, rivals }
        return
      }
    }
    if (this.#candidate !== undefined && ++this.#candidate.age >= SETTLE_HOPS) {
      const { f, onset: start, rivals } = this.#candidate
      this.#candidate = undefined
      this.#pending = { onset: start, leader: f, rivals }
    }
  }

  /** Tells a clip found from its rivals over all of it heard so far; names it once one fits clearly best, or once all are over. */
  #tell (hop: number, pending: Pending): Heard | undefined {
    const { onset, leader, rivals } = pending
    let winner = leader
    if (rivals.length > 0) {
      const hops = hop - onset + 1
      const { values, norm } = this.#heard(onset, hop)
      const scores = [leader, ...rivals].map((f) => {
        const t = this.#template(f, hops)
        return { f, score: dot(values, t.values) / (norm * t.norm) }
      }).sort((a, b) => b.score - a.score)
      const over = scores.every((s) => hops >= s.f.energies.length)
      if (scores[0].score - scores[1].score < MARGIN && !over) return undefined
      winner = scores[0].f
    }
    this.#pending = undefined
    const startMs = onset * 10
    this.#busyUntil = onset + Math.ceil(winner.clip.ms / 10)
    return { clip: winner.clip, startMs, endMs: startMs + winner.clip.ms }
  }
}

function dot (a: Float64Array, b: Float64Array): number {
  let sum = 0
  for (let i = 0; i < a.length; i++) sum += a[i] * b[i]
  return sum
}

function centred (values: Float64Array): { values: Float64Array, mean: number, norm: number } {
  let mean = 0
  for (const v of values) mean += v
  mean /= values.length
  let norm = 0
  for (let i = 0; i < values.length; i++) {
    values[i] -= mean
    norm += values[i] * values[i]
  }
  return { values, mean, norm: Math.sqrt(norm) }
}

/** A word is recognised this long after its audio has come; a clip's final result this long after its end. */
const WORD_DELAY_MS = 100
const FINAL_DELAY_MS = 120

/** The words of a clip, spread evenly over it: `at` is the audio time (ms) by which word i has been spoken. */
function wordTimes (heard: Heard): number[] {
  const { words } = heard.clip
  return words.map((_, i) => heard.startMs + (i + 1) * heard.clip.ms / words.length)
}

/** An interim transcript has no final punctuation yet. */
const interimText = (text: string) => text.replace(/[.?!]+$/, '')

/**
 * The recogniser behind Deepgram's live protocol (test/helpers/deepgram-standin.ts gives the wire): interim
 * results word by word, each WORD_DELAY_MS after its audio has come, then the clip's final result (with its
 * punctuation, `speech_final`: a pause follows every clip) FINAL_DELAY_MS after its end. Results tile the stream as
 * Deepgram's do: the silence before a clip is an empty final result, so a clip's results start where it starts.
 * Finalize makes final at once the words whose audio has come.
 */
export function deepgramHearing (vocabulary: Vocabulary, stream: DeepgramStream): DeepgramHearing {
  const listener = vocabulary.listen(stream.language ?? undefined)
  /** Audio received, and where the last final result ended (ms of the stream). */
  let receivedMs = 0
  let finalMs = 0
  /** The clip being spoken: its words' times, how many have been scheduled, and how many are final. */
  let current: { heard: Heard, times: number[], scheduled: number, final: number, ended: boolean } | undefined

  const final = (text: string, endMs: number, fields: { speech_final: boolean, from_finalize?: boolean }) => {
    stream.result(text, { is_final: true, start: finalMs / 1000, duration: Math.max(0, endMs - finalMs) / 1000, ...fields })
    finalMs = Math.max(finalMs, endMs)
  }
  const wordsOf = (clip: NonNullable<typeof current>, to: number) => {
    const text = clip.heard.clip.words.slice(clip.final, to).join(' ')
    return to === clip.times.length ? text : interimText(text)
  }
  const later = (ms: number, fn: () => void) => { setTimeout(fn, Math.max(0, ms)) }

  const schedule = () => {
    const clip = current
    if (clip === undefined) return
    for (; clip.scheduled < clip.times.length && clip.times[clip.scheduled] <= receivedMs; clip.scheduled++) {
      const i = clip.scheduled
      const at = clip.times[i]
      later(at + WORD_DELAY_MS - receivedMs, () => {
        if (i < clip.final) return
        stream.result(interimText(wordsOf(clip, i + 1)), { is_final: false, speech_final: false, start: finalMs / 1000, duration: Math.max(0, at - finalMs) / 1000 })
      })
    }
    if (clip.scheduled === clip.times.length && !clip.ended) {
      clip.ended = true
      later(clip.heard.endMs + FINAL_DELAY_MS - receivedMs, () => {
        if (clip.final < clip.times.length) final(wordsOf(clip, clip.times.length), clip.heard.endMs, { speech_final: true })
        clip.final = clip.times.length
      })
    }
  }

  return {
    audio: (pcm) => {
      const pcm16 = stream.rate === SAMPLE_RATE ? pcm : resample(pcm, stream.rate, SAMPLE_RATE)
      receivedMs += pcm16.length * 1000 / SAMPLE_RATE
      for (const heard of listener.push(pcm16)) {
        if (heard.startMs > finalMs) final('', heard.startMs, { speech_final: false })
        current = { heard, times: wordTimes(heard), scheduled: 0, final: 0, ended: false }
      }
      schedule()
    },
    finalize: (fromFinalize) => {
      const clip = current
      let text = ''
      if (clip !== undefined && clip.final < clip.times.length) {
        const spoken = clip.times.filter((at) => at <= receivedMs).length
        if (spoken > clip.final) text = wordsOf(clip, spoken)
        clip.final = Math.max(clip.final, spoken)
      }
      final(text, receivedMs, { speech_final: false, ...(fromFinalize ? { from_finalize: true } : {}) })
    }
  }
}
