import t from 'tap'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { decodeWav, FRAME_SAMPLES, rms, SAMPLE_RATE } from '../../src/modules/voice/audio.ts'
import { detectionOf, SpeechDetector, type Turn } from '../../src/modules/voice/vad/detector.ts'
import { sileroModel } from '../../src/modules/voice/vad/silero.ts'

// The caller's speech detector (Silero VAD) on real speech (espeak-ng fixtures), loud noise and digital silence.

const FIXTURES = path.join(import.meta.dirname, '../fixtures/audio')
const hello = decodeWav(readFileSync(path.join(FIXTURES, 'hello.wav'))).pcm

/** Deterministic white noise of about the given RMS (a fixed LCG: the same noise on every run). */
function noise (samples: number, level: number, seed = 1): Int16Array {
  const out = new Int16Array(samples)
  let state = seed
  for (let i = 0; i < samples; i++) {
    state = (state * 1_103_515_245 + 12_345) >>> 0
    out[i] = Math.round(((state / 2 ** 32) * 2 - 1) * level * Math.sqrt(3))
  }
  return out
}

/** `speech` added onto `background` from `atMs`, clipped. */
function mix (background: Int16Array, speech: Int16Array, atMs: number): Int16Array {
  const out = background.slice()
  const offset = atMs * SAMPLE_RATE / 1000
  for (let i = 0; i < speech.length && offset + i < out.length; i++) out[offset + i] = Math.max(-32768, Math.min(32767, out[offset + i] + speech[i]))
  return out
}

/** Where the fixture's speech starts and ends (ms): the first and last sample above a whisper. */
function speechSpan (pcm: Int16Array): [number, number] {
  let first = 0
  while (Math.abs(pcm[first]) < 64) first++
  let last = pcm.length - 1
  while (Math.abs(pcm[last]) < 64) last--
  return [first * 1000 / SAMPLE_RATE, last * 1000 / SAMPLE_RATE]
}

/** The detector's turns over the samples (pushed in 20 ms frames, or as one piece), each with its time (ms). */
async function turns (pcm: Int16Array, sensitivity = 0.5, frame = FRAME_SAMPLES): Promise<Array<[Turn, number]>> {
  const events: Array<[Turn, number]> = []
  const detector = await SpeechDetector.create({ sensitivity, onTurn: (turn, at) => events.push([turn, at]), onError: (err) => { throw err } })
  for (let i = 0; i < pcm.length; i += frame) detector.push(pcm.subarray(i, i + frame))
  await detector.settled()
  return events
}

const [onset, speechEnd] = speechSpan(hello)

t.test('a turn starts near the speech onset and ends 500 ms of silence after it', async (t) => {
  const events = await turns(hello)
  t.same(events.map(([turn]) => turn), ['start', 'end'], 'one turn, the pauses between words inside it')
  const [[, startedAt], [, endedAt]] = events
  t.ok(startedAt > onset && startedAt <= onset + 250, `start ${startedAt} ms, speech from ${onset} ms`)
  t.ok(endedAt >= speechEnd + 500 && endedAt <= speechEnd + 650, `end ${endedAt} ms: 500 ms after the speech (${speechEnd} ms)`)
  t.same(await turns(hello, 0.5, hello.length), events, 'pieces of any length give the same turns')
})

t.test('sensitivity sets how sure and how long speech must be', async (t) => {
  t.same(detectionOf(0.5), { threshold: 0.5, minSpeechMs: 125 }, 'the default is Silero\'s own threshold')
  t.same(detectionOf(1), { threshold: 0.4, minSpeechMs: 0 })
  t.same(detectionOf(0), { threshold: 0.6, minSpeechMs: 250 })
  const starts = await Promise.all([1, 0.5, 0].map(async (s) => (await turns(hello, s)).find(([turn]) => turn === 'start')?.[1]))
  t.ok(starts[0]! <= onset + 100, `sensitivity 1: the first speech window (${starts[0]} ms)`)
  t.ok(starts[0]! < starts[1]! && starts[1]! < starts[2]!, `1 → 0.5 → 0 start later: ${starts.join(', ')}`)
})

t.test('loud noise is not speech, and a caller in noise is heard', async (t) => {
  const loud = noise(SAMPLE_RATE * 5, 2 * rms(hello))
  for (const sensitivity of [0.05, 0.5, 1]) t.same(await turns(loud, sensitivity), [], `white noise twice as loud as the speech, sensitivity ${sensitivity}`)

  // The loudness detector learnt a steady background as its floor and then missed the caller speaking over it.
  const background = noise(SAMPLE_RATE * 8, rms(hello) / Math.sqrt(10), 3) // 10 dB under the speech
  const events = await turns(mix(background, hello, 3000))
  t.same(events.map(([turn]) => turn), ['start', 'end'], 'speech over 10 dB SNR noise, after 3 s of the noise alone')
  t.ok(events[0][1] > 3000 + onset, `not before the speech (${events[0][1]} ms)`)
  t.ok(events[1][1] > 3000 + speechEnd && events[1][1] < 3000 + speechEnd + 1000, `and the noise after it ends the turn (${events[1][1]} ms)`)
})

t.test('digital silence costs nothing; any noise goes to the model', async (t) => {
  const model = await sileroModel()
  const before = model.windows
  const silence = new Int16Array(SAMPLE_RATE * 10)
  for (let i = 0; i < silence.length; i += 7) silence[i] = (i % 2) * 4 - 2 // a dither of ±2, still digital silence
  t.same(await turns(silence), [])
  t.equal(model.windows, before, '10 s of digital silence ran the model on no window')

  const hiss = noise(SAMPLE_RATE * 2, 30) // -60 dBFS: the quietest line noise, yet not silence
  t.same(await turns(hiss), [])
  t.equal(model.windows, before + Math.floor(hiss.length / 512), 'every window of hiss was heard by the model')

  // Speech framed by digital silence: the model runs on the speech only, and the turn is the same as ever.
  const windows = model.windows
  t.same((await turns(hello)).map(([turn]) => turn), ['start', 'end'])
  t.ok(model.windows - windows < (speechEnd - onset) / 32 + 4, `only the speech's windows ran (${model.windows - windows})`)
})

t.test('calls at once share the model and keep their own state', async (t) => {
  const model = await sileroModel()
  const alone = await turns(hello)
  const runs = model.runs
  const windows = model.windows
  const together = await Promise.all(Array.from({ length: 20 }, () => turns(hello)))
  for (const events of together) t.same(events, alone)
  t.ok((model.windows - windows) / (model.runs - runs) > 10, `windows ran in batches (${model.windows - windows} windows in ${model.runs - runs} runs)`)
})
