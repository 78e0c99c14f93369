import t from 'tap'
import { speechSpan } from '../helpers/voice-client.ts'
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

/** The detector's turns over the samples (pushed in 20 ms frames, or as one piece), each with its time (ms). */
async function turns (pcm: Int16Array, sensitivity = 0.5, frame = FRAME_SAMPLES): Promise<Array<[Turn, number]>> {
  const events: Array<[Turn, number]> = []
  const detector = await SpeechDetector.create({ sensitivity, onTurn: (turn, at) => events.push([turn, at]), onError: (err) => { throw err } })
  for (let i = 0; i < pcm.length; i += frame) detector.push(pcm.subarray(i, i + frame))
  await detector.settled()
  return events
}

const [onset, speechEnd] = speechSpan(hello)

/** Starts and ends alternate, beginning with a start and ending with an end. */
const alternate = (events: Array<[Turn, number]>) => events.length > 0 && events.length % 2 === 0 && events.every(([turn], i) => turn === (i % 2 === 0 ? 'start' : 'end'))

t.test('speech is told where it begins and where the silence after it begins (the turn core decides how long a pause may be)', async (t) => {
  const events = await turns(hello)
  t.ok(alternate(events), `starts and ends alternate: ${JSON.stringify(events)}`)
  const startedAt = events[0][1]
  const endedAt = events.at(-1)![1]
  t.ok(startedAt >= onset - 64 && startedAt <= onset + 100, `start ${startedAt} ms, speech from ${onset} ms`)
  t.ok(endedAt >= speechEnd - 64 && endedAt <= speechEnd + 250, `end ${endedAt} ms, speech until ${speechEnd} ms`)
  t.same(await turns(hello, 0.5, hello.length), events, 'pieces of any length give the same turns')
})

t.test('sensitivity sets how sure and how long speech must be', async (t) => {
  t.same(detectionOf(0.5), { threshold: 0.5, minSpeechMs: 125 }, 'the default is Silero\'s own threshold')
  t.same(detectionOf(1), { threshold: 0.4, minSpeechMs: 0 })
  t.same(detectionOf(0), { threshold: 0.6, minSpeechMs: 250 })
  // A burst of speech 160 ms long: speech at sensitivity 1 and 0.5, too short at 0 (250 ms).
  const burst = new Int16Array(SAMPLE_RATE)
  burst.set(hello.subarray(Math.round(onset * SAMPLE_RATE / 1000), Math.round((onset + 160) * SAMPLE_RATE / 1000)), SAMPLE_RATE / 4)
  const heard = await Promise.all([1, 0.5, 0].map(async (s) => (await turns(burst, s)).some(([turn]) => turn === 'start')))
  t.same(heard, [true, true, false], 'a 160 ms burst is speech at 1 and 0.5, not at 0')
})

t.test('loud noise is not speech, and a caller in noise is heard', async (t) => {
  const loud = noise(SAMPLE_RATE * 5, 2 * rms(hello))
  for (const sensitivity of [0.05, 0.5, 1]) t.same(await turns(loud, sensitivity), [], `white noise twice as loud as the speech, sensitivity ${sensitivity}`)

  // The loudness detector learnt a steady background as its floor and then missed the caller speaking over it.
  const background = noise(SAMPLE_RATE * 8, rms(hello) / Math.sqrt(10), 3) // 10 dB under the speech
  const events = await turns(mix(background, hello, 3000))
  t.ok(alternate(events), 'speech over 10 dB SNR noise, after 3 s of the noise alone')
  t.ok(events[0][1] > 3000 + onset - 64, `not before the speech (${events[0][1]} ms)`)
  t.ok(events.at(-1)![1] > 3000 + speechEnd - 100 && events.at(-1)![1] < 3000 + speechEnd + 1000, `and it ends though the noise goes on (${events.at(-1)![1]} ms)`)
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
  t.ok(alternate(await turns(hello)))
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
