// npm run bench:vad [-- --calls 100] [--seconds 20] — what hearing the callers costs: the speech detector (Silero
// VAD, src/modules/voice/vad/) fed 20 ms frames of a caller's line as the server feeds it, as fast as it goes.
// The line is speech (test/fixtures/audio/hello.wav) over white noise 10 dB under it, so that no window is digital
// silence and the model runs on every one: a phone line's worst case. Reported in CPU milliseconds per second of
// a call's audio, for one call alone (each window its own model run), for many calls at once (their windows run
// in batches, as in a busy server) and for digital silence (which skips the model).
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { decodeWav, FRAME_MS, FRAME_SAMPLES, SAMPLE_RATE } from '../src/modules/voice/audio.ts'
import { SpeechDetector } from '../src/modules/voice/vad/detector.ts'
import { sileroModel } from '../src/modules/voice/vad/silero.ts'
import { readArgs, usageError } from './args.ts'

const BENCH = {
  name: 'bench:vad',
  usage: `usage: npm run bench:vad [-- --calls 100] [--seconds 20]

The speech detector's CPU per second of a call's audio: one call alone, many at once, and digital silence.

  --calls <n>     the calls at once (default 100)
  --seconds <n>   the seconds of audio each call hears (default 20)
  -h, --help      this text`
}

const { values } = readArgs(BENCH, { options: { calls: { type: 'string', default: '100' }, seconds: { type: 'string', default: '20' } } })
const calls = Number(values.calls)
const seconds = Number(values.seconds)
if (!Number.isInteger(calls) || calls < 1) usageError(BENCH, `--calls is a whole number of calls, got ${values.calls}`)
if (!(seconds > 0)) usageError(BENCH, `--seconds is a positive number, got ${values.seconds}`)

/** The caller's line: the sentence again and again, over white noise 10 dB under the speech. */
function line (seconds: number, seed: number): Int16Array {
  const { pcm: sentence } = decodeWav(readFileSync(path.join(import.meta.dirname, '../test/fixtures/audio/hello.wav')))
  let energy = 0
  for (const sample of sentence) energy += sample * sample
  const level = Math.sqrt(energy / sentence.length / 10) * Math.sqrt(3)
  const out = new Int16Array(Math.round(seconds * SAMPLE_RATE))
  let state = seed
  for (let i = 0; i < out.length; i++) {
    state = (state * 1_103_515_245 + 12_345) >>> 0
    out[i] = Math.max(-32768, Math.min(32767, sentence[i % sentence.length] + Math.round(((state / 2 ** 32) * 2 - 1) * level)))
  }
  return out
}

const cpuMs = () => {
  const { user, system } = process.cpuUsage()
  return (user + system) / 1000
}
const nextTurn = async () => await new Promise((resolve) => setImmediate(resolve))

/** CPU ms per call-second of `n` detectors hearing `audio` frame by frame, one frame of each call per event-loop turn. */
async function measure (n: number, audio: Int16Array): Promise<{ cpu: number, windowsPerRun: number }> {
  const model = await sileroModel()
  const detectors = await Promise.all(Array.from({ length: n }, async () => await SpeechDetector.create({ sensitivity: 0.5, onTurn: () => {}, onError: (err) => { throw err } })))
  const { runs, windows } = model
  const started = cpuMs()
  for (let offset = 0; offset + FRAME_SAMPLES <= audio.length; offset += FRAME_SAMPLES) {
    const frame = audio.subarray(offset, offset + FRAME_SAMPLES)
    for (const detector of detectors) detector.push(frame)
    await nextTurn()
  }
  await Promise.all(detectors.map(async (detector) => await detector.settled()))
  const callSeconds = n * Math.floor(audio.length / FRAME_SAMPLES) * FRAME_MS / 1000
  return { cpu: (cpuMs() - started) / callSeconds, windowsPerRun: model.runs === runs ? 0 : (model.windows - windows) / (model.runs - runs) }
}

const audio = line(seconds, 7)
const loadStarted = performance.now()
await sileroModel()
const loadMs = performance.now() - loadStarted
await measure(1, line(2, 3)) // warm-up: JIT and the model's first runs
const alone = await measure(1, audio)
const together = await measure(calls, audio)
const silence = await measure(calls, new Int16Array(audio.length))

const f = (n: number) => Math.round(n * 100) / 100
console.log(`model loaded in ${Math.round(loadMs)} ms`)
console.log(`one call alone:         ${f(alone.cpu)} CPU ms per call-second (${f(alone.windowsPerRun)} windows per model run)`)
console.log(`${calls} calls at once:     ${f(together.cpu)} CPU ms per call-second (${f(together.windowsPerRun)} windows per model run)`)
console.log(`${calls} calls, digital silence: ${f(silence.cpu)} CPU ms per call-second (the model not run)`)
console.log(JSON.stringify({
  bench: 'vad',
  calls,
  seconds,
  cpu_ms_per_call_second: { alone: f(alone.cpu), together: f(together.cpu), silence: f(silence.cpu) },
  windows_per_run: { alone: f(alone.windowsPerRun), together: f(together.windowsPerRun) },
  model_load_ms: Math.round(loadMs)
}))
