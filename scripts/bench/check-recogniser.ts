// node scripts/bench/check-recogniser.ts [--details] — how well bench:turns' recogniser stand-in
// (scripts/bench/recogniser.ts) names the clips of the corpus: every case's audio as the server would send it
// (the browser's 16 kHz, and Twilio's 8 kHz µ-law resampled), fed in 100 ms messages as the Deepgram client
// sends them, without waiting. A clip counts as recognised when a clip of the same words is named within 60 ms of
// where it starts; anything else named is a false word (a noise event must give none). Not a timed test.
import { parseArgs } from 'node:util'
import { CallerAudio, eventAudio, loadCorpus, type Case } from './turns-corpus.ts'
import { phonePath, Vocabulary, type Heard } from './recogniser.ts'
import { table } from './lib.ts'

const { values } = parseArgs({ options: { details: { type: 'boolean', default: false } } })
const loaded = loadCorpus()
const vocabulary = new Vocabulary(loaded)
/** Where a talk case's event is placed, and what follows it. */
const EVENT_AT_MS = 1500
const TAIL_MS = 1500
const ONSET_MS = 60

interface Row { path: string, condition: string, clips: number, recognised: number, falseWords: number, noiseEvents: number, noiseWithWords: number, onsetErrors: number[] }
const rows = new Map<string, Row>()
const row = (path: string, condition: string) => {
  const key = `${path}/${condition}`
  if (!rows.has(key)) rows.set(key, { path, condition, clips: 0, recognised: 0, falseWords: 0, noiseEvents: 0, noiseWithWords: 0, onsetErrors: [] })
  return rows.get(key)!
}

function audioOf (c: Case): { pcm: Int16Array, expected: Array<{ clip: string, at: number }> } {
  const caller = new CallerAudio(loaded, c)
  let expected: Array<{ clip: string, at: number }>
  let ms: number
  if (c.kind === 'turn') {
    expected = c.parts.map((p) => ({ clip: p.clip, at: p.at_ms }))
    ms = c.truth.speech_end_ms + TAIL_MS
  } else {
    const pcm = eventAudio(loaded, c.event!)
    caller.place(pcm, EVENT_AT_MS)
    expected = 'clip' in c.event! ? [{ clip: c.event.clip, at: EVENT_AT_MS }] : []
    ms = EVENT_AT_MS + pcm.length / 16 + TAIL_MS
  }
  const frames = Math.ceil(ms / 20)
  const pcm = new Int16Array(frames * 320)
  for (let n = 0; n < frames; n++) pcm.set(caller.frame(n), n * 320)
  return { pcm, expected }
}

for (const c of loaded.corpus.cases) {
  if (c.kind === 'talk' && c.event === undefined) continue
  const { pcm: browser, expected } = audioOf(c)
  for (const [path, pcm] of [['browser', browser], ['twilio', phonePath(browser)]] as const) {
    const listener = vocabulary.listen(c.language)
    const heard: Heard[] = []
    for (let offset = 0; offset < pcm.length; offset += 1600) heard.push(...listener.push(pcm.subarray(offset, offset + 1600)))
    const r = row(path, c.noise === undefined ? 'clean' : `${c.noise.snr_db} dB`)
    const left = [...heard]
    for (const e of expected) {
      r.clips++
      const text = vocabulary.clips.find((clip) => clip.id === e.clip)!.text
      const i = left.findIndex((h) => h.clip.text === text && Math.abs(h.startMs - e.at) <= ONSET_MS)
      if (i >= 0) {
        r.recognised++
        r.onsetErrors.push(left[i].startMs - e.at)
        left.splice(i, 1)
      }
    }
    r.falseWords += left.length
    if (c.kind === 'talk' && expected.length === 0) {
      r.noiseEvents++
      if (heard.length > 0) r.noiseWithWords++
    }
    const ok = left.length === 0 && heard.length === expected.length
    if (values.details || !ok) {
      process.stdout.write(`${ok ? 'ok  ' : 'MISS'} ${path.padEnd(7)} ${c.id.padEnd(40)} expected ${expected.map((e) => `${e.clip}@${e.at}`).join(' ') || 'nothing'}; heard ${heard.map((h) => `${h.clip.id}@${h.startMs}`).join(' ') || 'nothing'}\n`)
    }
  }
}

const abs = (list: number[]) => list.map(Math.abs).sort((a, b) => a - b)
const all = [...rows.values()]
process.stdout.write(`\n${table([...all, {
  path: 'all', condition: 'all', clips: all.reduce((s, r) => s + r.clips, 0), recognised: all.reduce((s, r) => s + r.recognised, 0),
  falseWords: all.reduce((s, r) => s + r.falseWords, 0), noiseEvents: all.reduce((s, r) => s + r.noiseEvents, 0),
  noiseWithWords: all.reduce((s, r) => s + r.noiseWithWords, 0), onsetErrors: all.flatMap((r) => r.onsetErrors)
}].map((r) => ({
  path: r.path,
  noise: r.condition,
  'clips spoken': r.clips,
  recognised: `${r.recognised} (${(100 * r.recognised / Math.max(1, r.clips)).toFixed(1)}%)`,
  'false words': r.falseWords,
  'noise events with words': `${r.noiseWithWords}/${r.noiseEvents}`,
  'onset error p50/max ms': r.onsetErrors.length === 0 ? '-' : `${abs(r.onsetErrors)[Math.floor(r.onsetErrors.length / 2)]}/${abs(r.onsetErrors).at(-1)}`
})))}\n`)
