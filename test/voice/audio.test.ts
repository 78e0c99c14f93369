import t from 'tap'
import { speechSpan } from '../helpers/voice-client.ts'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import {
  bufferToPcm, decodeWav, encodeWav, FRAME_MS, FRAME_SAMPLES, mulawDecode, mulawEncode, pcmToBuffer, Recorder, resample, rms,
  SAMPLE_RATE
} from '../../src/modules/voice/audio.ts'
import { CALLER_LAG_MS, CALLER_LEAD_MS, CallerPace } from '../../src/modules/voice/pacer.ts'

const FIXTURES = path.join(import.meta.dirname, '../fixtures/audio')
const hello = decodeWav(readFileSync(path.join(FIXTURES, 'hello.wav')))

const tone = (samples: number, amplitude: number, hz = 440) =>
  Int16Array.from({ length: samples }, (_, i) => Math.round(amplitude * Math.sin(2 * Math.PI * hz * i / SAMPLE_RATE)))

t.test('constants: 20 ms frames of 320 samples at 16 kHz', async (t) => {
  t.equal(SAMPLE_RATE, 16_000)
  t.equal(FRAME_MS, 20)
  t.equal(FRAME_SAMPLES, 320)
})

t.test('PCM16 bytes are little-endian and read from any offset', async (t) => {
  const pcm = Int16Array.from([0, 1, -1, 32767, -32768, 258])
  const bytes = pcmToBuffer(pcm)
  t.same([...bytes.subarray(0, 6)], [0, 0, 1, 0, 0xff, 0xff])
  t.same(bufferToPcm(bytes), pcm)
  const shifted = Buffer.concat([Buffer.from([9]), bytes, Buffer.from([7])]).subarray(1)
  t.same(bufferToPcm(shifted), pcm, 'an odd byte offset works')
  t.equal(bufferToPcm(Buffer.from([1, 2, 3])).length, 1, 'a trailing odd byte is ignored')
})

t.test('µ-law follows G.711', async (t) => {
  // Reference values of ITU-T G.711 (as Sun's g711.c and Python's audioop compute them).
  const encoded: Array<[number, number]> = [[0, 0xff], [1, 0xff], [100, 0xf2], [-100, 0x72], [1000, 0xce], [-1000, 0x4e], [8000, 0xa0], [32767, 0x80], [-32768, 0x00]]
  t.same([...mulawEncode(Int16Array.from(encoded.map(([sample]) => sample)))], encoded.map(([, byte]) => byte))
  const decoded: Array<[number, number]> = [[0x00, -32124], [0x0f, -16764], [0x7f, 0], [0x80, 32124], [0x8f, 16764], [0xcf, 924], [0xef, 132], [0xfe, 8], [0xff, 0]]
  t.same([...mulawDecode(Uint8Array.from(decoded.map(([byte]) => byte)))], decoded.map(([, sample]) => sample))

  // Every byte decodes to a value that encodes back to the same byte (but 0x7f, "negative zero", which is 0xff).
  const all = Uint8Array.from({ length: 256 }, (_, i) => i)
  const back = mulawEncode(mulawDecode(all))
  t.same([...back].filter((byte, i) => byte !== i), [0xff], 'bytes survive a round trip')
  // Samples come back within the step of their segment: under 1/16 of their size (+ the bias at zero).
  const samples = Int16Array.from({ length: 2000 }, (_, i) => Math.round(-32768 + i * 32.77))
  const restored = mulawDecode(mulawEncode(samples))
  const worst = samples.reduce((max, sample, i) => Math.max(max, Math.abs(restored[i] - sample) - Math.abs(sample) / 16), 0)
  t.ok(worst <= 8, `round-trip error within the G.711 step (excess ${worst})`)
})

t.test('resampling keeps the duration and the shape', async (t) => {
  const pcm = tone(SAMPLE_RATE, 10_000, 300)
  t.equal(resample(pcm, 16_000, 16_000), pcm, 'the same rate is the same array')
  t.equal(resample(new Int16Array(0), 8000, 16_000).length, 0)
  const down = resample(pcm, 16_000, 8000)
  t.equal(down.length, 8000)
  t.equal(resample(pcm, 16_000, 24_000).length, 24_000)
  t.equal(resample(Int16Array.from({ length: 160 }), 8000, 16_000).length, 320, 'a µ-law frame of 8 kHz becomes a core frame')
  t.same([...resample(Int16Array.from([0, 100, 200]), 8000, 16_000)], [0, 50, 100, 150, 200, 200], 'linear interpolation, the last sample held')
  t.same([...down.subarray(0, 4)], [pcm[0], pcm[2], pcm[4], pcm[6]], 'halving keeps every other sample')
  const up = resample(down, 8000, 16_000)
  t.ok(Math.abs(rms(up) - rms(pcm)) < 100, 'a tone keeps its level through 16 → 8 → 16 kHz')
})

t.test('rms: silence 0, a full-scale square wave 32767', async (t) => {
  t.equal(rms(new Int16Array(0)), 0)
  t.equal(rms(new Int16Array(320)), 0)
  t.equal(rms(Int16Array.from({ length: 320 }, (_, i) => i % 2 === 0 ? 32767 : -32767)), 32767)
  t.ok(Math.abs(rms(tone(16_000, 10_000)) - 10_000 / Math.SQRT2) < 5)
})

t.test('WAV files round-trip, and stereo is mixed down', async (t) => {
  const pcm = Int16Array.from([0, 1000, -1000, 32767, -32768])
  const file = encodeWav(pcm)
  t.equal(file.length, 44 + 10)
  t.equal(file.toString('ascii', 0, 4), 'RIFF')
  t.equal(file.readUInt32LE(24), SAMPLE_RATE)
  t.same(decodeWav(file), { rate: SAMPLE_RATE, pcm })
  t.same(decodeWav(encodeWav(pcm, 8000)), { rate: 8000, pcm })

  // Stereo at 44.1 kHz with an extra chunk (LIST) before `fmt `, an odd-sized one, as editors write them.
  const frames = [[100, 300], [-100, -300], [32767, 32767]]
  const fmt = Buffer.alloc(24)
  fmt.write('fmt ', 0, 'ascii')
  fmt.writeUInt32LE(16, 4)
  fmt.writeUInt16LE(1, 8)
  fmt.writeUInt16LE(2, 10)
  fmt.writeUInt32LE(44_100, 12)
  fmt.writeUInt32LE(44_100 * 4, 16)
  fmt.writeUInt16LE(4, 20)
  fmt.writeUInt16LE(16, 22)
  const list = Buffer.concat([Buffer.from('LIST', 'ascii'), Buffer.from([3, 0, 0, 0, 1, 2, 3, 0])])
  const samples = pcmToBuffer(Int16Array.from(frames.flat()))
  const data = Buffer.concat([Buffer.from('data', 'ascii'), Buffer.alloc(4), samples])
  data.writeUInt32LE(samples.length, 4)
  const body = Buffer.concat([Buffer.from('WAVE', 'ascii'), list, fmt, data])
  const header = Buffer.alloc(8)
  header.write('RIFF', 0, 'ascii')
  header.writeUInt32LE(body.length, 4)
  t.same(decodeWav(Buffer.concat([header, body])), { rate: 44_100, pcm: Int16Array.from([200, -200, 32767]) })

  t.throws(() => decodeWav(Buffer.from('not a wave file at all')), /not a WAV file/)
  t.throws(() => decodeWav(file.subarray(0, 36)), /without data/)
  const float = Buffer.from(file)
  float.writeUInt16LE(3, 20) // IEEE float
  t.throws(() => decodeWav(float), /only PCM16/)
  const eightBit = Buffer.from(file)
  eightBit.writeUInt16LE(8, 34)
  t.throws(() => decodeWav(eightBit), /only PCM16/)
  const dataFirst = Buffer.concat([file.subarray(0, 12), file.subarray(36)])
  t.throws(() => decodeWav(dataFirst), /data before its format/)
})

t.test('the fixtures are 16 kHz mono speech between silences', async (t) => {
  t.equal(hello.rate, SAMPLE_RATE)
  const [onset, end] = speechSpan(hello.pcm)
  t.ok(onset > 250 && onset < 350, `hello.wav: speech starts at ~300 ms (${onset})`)
  t.ok(hello.pcm.length / 16 - end > 750, 'hello.wav: ~0.8 s of silence after it')
  const caller = decodeWav(readFileSync(path.join(FIXTURES, 'caller.wav')))
  t.equal(caller.rate, SAMPLE_RATE)
  const [callerOnset, callerEnd] = speechSpan(caller.pcm)
  t.ok(callerOnset > 950 && callerOnset < 1050, `caller.wav: 1 s of silence first (${callerOnset})`)
  t.ok(caller.pcm.length / 16 - callerEnd > 2950, 'caller.wav: 3 s of silence after the sentence')
})

t.test('Recorder in one track (a recording begun before two tracks) mixes both sides on one timeline', async (t) => {
  const recorder = new Recorder(60_000, 0, 1)
  t.equal(recorder.durationMs, 0)
  t.same(recorder.take(Infinity).length, 0, 'nothing recorded: nothing to take')
  const caller = new Int16Array(FRAME_SAMPLES).fill(1000)
  const agent = new Int16Array(FRAME_SAMPLES).fill(-300)
  recorder.add('caller', caller, 0)
  recorder.add('caller', caller, 20)
  recorder.add('agent', agent, 10) // overlaps the caller's two frames by half each
  recorder.add('agent', agent, 100)
  t.equal(recorder.durationMs, 120)
  const pcm = recorder.take(Infinity)
  t.equal(pcm.length, 120 * 16)
  t.equal(pcm[0], 1000, 'the caller alone')
  t.equal(pcm[10 * 16], 700, 'both sides summed')
  t.equal(pcm[30 * 16 - 1], 700)
  t.equal(pcm[30 * 16], 1000, 'the caller alone again')
  t.equal(pcm[50 * 16], 0, 'silence between')
  t.equal(pcm[110 * 16], -300, 'the agent alone')

  const loud = new Int16Array(FRAME_SAMPLES).fill(30_000)
  recorder.add('caller', loud, 200)
  recorder.add('agent', loud, 200)
  recorder.add('caller', new Int16Array(FRAME_SAMPLES).fill(-30_000), 240)
  recorder.add('agent', new Int16Array(FRAME_SAMPLES).fill(-30_000), 240)
  const mixed = recorder.take(Infinity)
  t.equal(mixed.length, 140 * 16, 'what came after the first take')
  t.equal(mixed[80 * 16], 32767, 'clipped, not wrapped around')
  t.equal(mixed[120 * 16], -32768)

  // A frame that started before the call (clock skew) keeps its part after the start.
  const early = new Recorder(1000, 0, 1)
  early.add('agent', Int16Array.from({ length: FRAME_SAMPLES }, (_, i) => i), -10)
  t.equal(early.durationMs, 10)
  t.equal(early.take(Infinity)[0], 160)
})

t.test('Recorder hands its samples out a piece at a time and forgets them', async (t) => {
  const recorder = new Recorder(60_000, 0, 1)
  const frame = (value: number) => new Int16Array(FRAME_SAMPLES).fill(value)
  for (let at = 0; at < 30_000; at += 20) recorder.add('caller', frame(at / 20 % 1000), at)
  const pieces = [recorder.take(1000), recorder.take(12_345), recorder.take(12_345), recorder.take(Infinity)]
  t.same(pieces.map((p) => p.length), [1000 * 16, 11_345 * 16, 0, 17_655 * 16], 'each take goes on where the last ended')
  const all = new Int16Array(30_000 * 16)
  let at = 0
  for (const piece of pieces) { all.set(piece, at); at += piece.length }
  t.ok(all.every((sample, i) => sample === Math.floor(i / FRAME_SAMPLES) % 1000), 'the pieces join into the whole recording, across chunk borders')

  recorder.add('agent', frame(5), 29_000)
  t.equal(recorder.take(Infinity).length, 0, 'audio placed where it was taken already is dropped')
  recorder.add('agent', frame(5), 40_000)
  recorder.end(40_010)
  t.equal(recorder.durationMs, 40_010, 'the end cuts off what was placed after it')
  const rest = recorder.take(Infinity)
  t.equal(rest.length, 10_010 * 16, 'silence until the agent spoke')
  t.equal(rest.at(-1), 5)

  const resumed = new Recorder(60_000, 16_000, 1)
  t.equal(resumed.durationMs, 1000, 'a recording that goes on after one stored before')
  resumed.add('agent', frame(7), 500)
  resumed.add('agent', frame(7), 1000)
  t.same([...resumed.take(Infinity)], [...frame(7)], 'only what came after the stored second')
})

t.test('Recorder in two tracks (new calls): the caller left, the agent right, interleaved, in pieces across chunk borders', async (t) => {
  const recorder = new Recorder(60_000)
  t.equal(recorder.channels, 2, 'two tracks unless told otherwise')
  const frame = (value: number) => new Int16Array(FRAME_SAMPLES).fill(value)
  // The caller through 25 s (across chunk borders, every 5 s), the agent from 5 s to 30 s, overlapping.
  for (let at = 0; at < 25_000; at += 20) recorder.add('caller', frame(1 + at / 20 % 1000), at)
  for (let at = 5_000; at < 30_000; at += 20) recorder.add('agent', frame(-1 - at / 20 % 1000), at)
  recorder.add('caller', frame(30_000), 29_000)
  recorder.add('caller', frame(30_000), 29_000) // the same side twice: summed, clipped on its own track
  t.equal(recorder.durationMs, 30_000)
  const pieces = [recorder.take(1000), recorder.take(12_345), recorder.take(Infinity)]
  t.same(pieces.map((p) => p.length), [1000 * 32, 11_345 * 32, 17_655 * 32], 'two samples a frame')
  const all = new Int16Array(30_000 * 32)
  let at = 0
  for (const piece of pieces) { all.set(piece, at); at += piece.length }
  const left = all.filter((_, i) => i % 2 === 0)
  const right = all.filter((_, i) => i % 2 === 1)
  const callerAt = (i: number) => i >= 29_000 * 16 && i < 29_020 * 16 ? 32767 : i < 25_000 * 16 ? 1 + Math.floor(i / FRAME_SAMPLES) % 1000 : 0
  const agentAt = (i: number) => i >= 5_000 * 16 ? -1 - Math.floor(i / FRAME_SAMPLES) % 1000 : 0
  t.ok(left.every((sample, i) => sample === callerAt(i)), 'the left track: the caller alone')
  t.ok(right.every((sample, i) => sample === agentAt(i)), 'the right track: the agent alone')

  const resumed = new Recorder(60_000, 16_000)
  t.equal(resumed.durationMs, 1000, 'goes on after a second stored before')
  resumed.add('agent', frame(7), 500)
  resumed.add('agent', frame(7), 1000)
  resumed.end(1010)
  t.same([...resumed.take(Infinity)], Array.from({ length: 10 * 32 }, (_, i) => i % 2 === 1 ? 7 : 0), 'only what came after it, on its track')
  const straddling = new Recorder(10_000)
  straddling.add('agent', Int16Array.from({ length: FRAME_SAMPLES }, (_, i) => i + 1), 4_990)
  const across = straddling.take(Infinity).subarray(4_990 * 32)
  t.same([...across.filter((_, i) => i % 2 === 1)], Array.from({ length: FRAME_SAMPLES }, (_, i) => i + 1), 'a frame across a chunk border (5 s), on its track')
  t.ok(across.filter((_, i) => i % 2 === 0).every((sample) => sample === 0))
  const bounded = new Recorder(1000)
  bounded.add('agent', frame(9), 990)
  const tail = bounded.take(Infinity)
  t.equal(tail.length, 1000 * 32, 'never past its bound')
  t.same([tail.at(-2), tail.at(-1)], [0, 9])
})

t.test('Recorder never grows past its bound', async (t) => {
  const recorder = new Recorder(25_000, 0, 1)
  const frame = new Int16Array(FRAME_SAMPLES).fill(100)
  // Across the chunk borders (every 5 s), a frame straddling the bound, and frames after it.
  for (let at = 0; at < 40_000; at += 20) recorder.add(at % 40 === 0 ? 'caller' : 'agent', frame, at + 5)
  t.equal(recorder.durationMs, 25_000)
  const pcm = recorder.take(Infinity)
  t.equal(pcm.length, 25_000 * 16)
  t.equal(pcm[0], 0)
  t.equal(pcm[5 * 16], 100)
  t.equal(pcm[10_000 * 16 - 1], 100, 'continuous across a chunk border')
  t.equal(pcm[10_000 * 16], 100)
  t.equal(pcm.at(-1), 100)
  t.equal(pcm.filter((sample) => sample !== 100).length, 5 * 16, 'only the first 5 ms are silent')

  const late = new Recorder(1000)
  late.add('caller', frame, 5000)
  t.equal(late.durationMs, 0, 'audio after the bound is dropped')
  const none = new Recorder(0)
  none.add('caller', frame, 0)
  t.equal(none.durationMs, 0)
})

t.test('CallerPace: caller audio keeps to the wall clock (injected times, no sleeping)', async (t) => {
  // A client in real time: each frame where it belongs.
  const steady = new CallerPace()
  t.same([0, 20, 40].map((ms) => steady.place(1000 + ms, FRAME_MS)), [1000, 1020, 1040])

  // A client that sends a minute at once: CALLER_LEAD_MS of it is taken, the rest dropped.
  const burst = new CallerPace()
  const placed = Array.from({ length: 3000 }, () => burst.place(5000, FRAME_MS))
  t.equal(placed.filter((at) => at !== undefined).length, CALLER_LEAD_MS / FRAME_MS)
  t.equal(burst.dropped, 3000 - CALLER_LEAD_MS / FRAME_MS)
  t.equal(burst.place(5000 + CALLER_LEAD_MS, FRAME_MS), 5000 + CALLER_LEAD_MS, 'as the clock moves on, audio is taken again where it left off')

  // Jitter within CALLER_LAG_MS keeps the timeline; a pause longer than that (a muted client) starts again at now.
  const paused = new CallerPace()
  paused.place(0, FRAME_MS)
  t.equal(paused.place(CALLER_LAG_MS, FRAME_MS), FRAME_MS, 'a late frame stays on the timeline')
  t.equal(paused.place(10_000, FRAME_MS), 10_000, 'after a pause the audio is placed when it arrives, not right after the last frame')
})
