// Audio inside the voice core is PCM16 mono at 16 kHz in 20 ms frames (DESIGN.md, "Voice"); transports and
// engines convert at their edge with these functions.

import { endianness } from 'node:os'
import { WAV_HEADER_BYTES, wavHeader } from '../calls/wav.ts'

export const SAMPLE_RATE = 16_000
export const FRAME_MS = 20
/** Samples in one 20 ms frame at 16 kHz. */
export const FRAME_SAMPLES = SAMPLE_RATE * FRAME_MS / 1000

const LITTLE_ENDIAN = endianness() === 'LE'

/** Little-endian PCM16 bytes as samples (copied, so any byte offset works). */
export function bufferToPcm (bytes: Uint8Array): Int16Array {
  const pcm = new Int16Array(bytes.length >> 1)
  // One copy of the memory on little-endian machines (every frame of every call passes here).
  if (LITTLE_ENDIAN) {
    new Uint8Array(pcm.buffer).set(bytes.subarray(0, pcm.length * 2))
    return pcm
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, pcm.length * 2)
  for (let i = 0; i < pcm.length; i++) pcm[i] = view.getInt16(i * 2, true)
  return pcm
}

/** Writes the samples as little-endian PCM16 into `target` from `offset`. */
function writePcm (pcm: Int16Array, target: Buffer, offset: number): void {
  // One copy of the memory where it is little-endian already: a 15-minute recording is 29 MB.
  if (LITTLE_ENDIAN) target.set(new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength), offset)
  else for (let i = 0; i < pcm.length; i++) target.writeInt16LE(pcm[i], offset + i * 2)
}

/** Samples as little-endian PCM16 bytes. */
export function pcmToBuffer (pcm: Int16Array): Buffer {
  const bytes = Buffer.allocUnsafe(pcm.length * 2)
  writePcm(pcm, bytes, 0)
  return bytes
}

/**
 * Cuts audio that arrives in pieces of any length into 20 ms frames, keeping what is left of a frame for the
 * next piece. The frames may be views of the piece: pieces must not be written to afterwards.
 */
export class Framer {
  #rest = new Int16Array(0)

  push (pcm: Int16Array): Int16Array[] {
    let samples = pcm
    if (this.#rest.length > 0) {
      samples = new Int16Array(this.#rest.length + pcm.length)
      samples.set(this.#rest)
      samples.set(pcm, this.#rest.length)
    }
    const frames: Int16Array[] = []
    let offset = 0
    for (; offset + FRAME_SAMPLES <= samples.length; offset += FRAME_SAMPLES) frames.push(samples.subarray(offset, offset + FRAME_SAMPLES))
    this.#rest = samples.slice(offset)
    return frames
  }

  /** What is left, padded with silence to a whole frame (undefined when nothing is), and forgotten. */
  flush (): Int16Array | undefined {
    if (this.#rest.length === 0) return undefined
    const last = new Int16Array(FRAME_SAMPLES)
    last.set(this.#rest)
    this.#rest = new Int16Array(0)
    return last
  }

  clear (): void {
    this.#rest = new Int16Array(0)
  }
}

/** Linear-interpolation resampling; good enough for speech between 8, 16 and 24 kHz. */
export function resample (pcm: Int16Array, from: number, to: number): Int16Array {
  if (from === to || pcm.length === 0) return pcm
  const out = new Int16Array(Math.round(pcm.length * to / from))
  const step = from / to
  for (let i = 0; i < out.length; i++) {
    const position = i * step
    const left = Math.floor(position)
    const right = Math.min(left + 1, pcm.length - 1)
    const fraction = position - left
    out[i] = Math.round(pcm[left] * (1 - fraction) + pcm[right] * fraction)
  }
  return out
}

/** Root mean square of the samples, 0 (silence) to 32768 (full scale). */
/** The two tracks of interleaved stereo samples (a two-track recording: the caller left, the agent right). */
export function splitStereo (pcm: Int16Array): { left: Int16Array, right: Int16Array } {
  const left = new Int16Array(pcm.length >> 1)
  const right = new Int16Array(pcm.length >> 1)
  for (let i = 0; i < left.length; i++) {
    left[i] = pcm[2 * i]
    right[i] = pcm[2 * i + 1]
  }
  return { left, right }
}

export function rms (pcm: Int16Array): number {
  if (pcm.length === 0) return 0
  let sum = 0
  for (let i = 0; i < pcm.length; i++) sum += pcm[i] * pcm[i]
  return Math.sqrt(sum / pcm.length)
}

/** A mono PCM16 WAV file. */
export function encodeWav (pcm: Int16Array, rate = SAMPLE_RATE): Buffer {
  const file = Buffer.allocUnsafe(WAV_HEADER_BYTES + pcm.length * 2)
  wavHeader(pcm.length * 2, rate).copy(file)
  writePcm(pcm, file, WAV_HEADER_BYTES)
  return file
}

/** The samples of a PCM16 WAV file, channels mixed down to mono. Throws on anything else. */
export function decodeWav (file: Buffer): { rate: number, pcm: Int16Array } {
  if (file.length < 12 || file.toString('ascii', 0, 4) !== 'RIFF' || file.toString('ascii', 8, 12) !== 'WAVE') throw new Error('not a WAV file')
  let format: { channels: number, rate: number, bits: number, code: number } | undefined
  for (let offset = 12; offset + 8 <= file.length;) {
    const id = file.toString('ascii', offset, offset + 4)
    const size = file.readUInt32LE(offset + 4)
    const body = offset + 8
    if (id === 'fmt ') {
      format = { code: file.readUInt16LE(body), channels: file.readUInt16LE(body + 2), rate: file.readUInt32LE(body + 4), bits: file.readUInt16LE(body + 14) }
    } else if (id === 'data') {
      if (format === undefined) throw new Error('WAV data before its format')
      if (format.code !== 1 || format.bits !== 16 || format.channels < 1) throw new Error('only PCM16 WAV files are read')
      const samples = bufferToPcm(file.subarray(body, Math.min(file.length, body + size)))
      const pcm = new Int16Array(Math.floor(samples.length / format.channels))
      for (let i = 0; i < pcm.length; i++) {
        let sum = 0
        for (let c = 0; c < format.channels; c++) sum += samples[i * format.channels + c]
        pcm[i] = Math.round(sum / format.channels)
      }
      return { rate: format.rate, pcm }
    }
    offset = body + size + (size % 2)
  }
  throw new Error('WAV file without data')
}

// G.711 µ-law (Twilio's media streams), per ITU-T G.711.
const BIAS = 0x84
const CLIP = 32635

function mulawByte (sample: number): number {
  const sign = sample < 0 ? 0x80 : 0
  let magnitude = Math.min(Math.abs(sample), CLIP) + BIAS
  let exponent = 7
  for (let mask = 0x4000; (magnitude & mask) === 0 && exponent > 0; mask >>= 1) exponent--
  const mantissa = (magnitude >> (exponent + 3)) & 0x0f
  magnitude = ~(sign | (exponent << 4) | mantissa)
  return magnitude & 0xff
}

const MULAW_DECODE = new Int16Array(256)
for (let i = 0; i < 256; i++) {
  const byte = ~i & 0xff
  const exponent = (byte >> 4) & 0x07
  const magnitude = (((byte & 0x0f) << 3) + BIAS) << exponent
  MULAW_DECODE[i] = (byte & 0x80) !== 0 ? BIAS - magnitude : magnitude - BIAS
}

export function mulawEncode (pcm: Int16Array): Buffer {
  const out = Buffer.allocUnsafe(pcm.length)
  for (let i = 0; i < pcm.length; i++) out[i] = mulawByte(pcm[i])
  return out
}

/** 16 kHz PCM16 to 8 kHz µ-law in one pass: each pair of samples averaged (a plain low-pass against aliasing), then encoded. */
export function mulawEncodeHalved (pcm: Int16Array): Buffer {
  const out = Buffer.allocUnsafe(pcm.length >> 1)
  for (let i = 0; i < out.length; i++) out[i] = mulawByte((pcm[2 * i] + pcm[2 * i + 1]) >> 1)
  return out
}

export function mulawDecode (bytes: Uint8Array): Int16Array {
  const out = new Int16Array(bytes.length)
  for (let i = 0; i < bytes.length; i++) out[i] = MULAW_DECODE[bytes[i]]
  return out
}

/** Samples (per channel) per chunk of a recording held in memory: 5 s (320 KB in stereo), so that a short call holds little and a long one copies nothing. */
const RECORDING_CHUNK = SAMPLE_RATE * 5

/**
 * A call's recording at 16 kHz, each frame at its time since the call started: two tracks (interleaved stereo,
 * the caller left and the agent right), or, for a call whose recording began mono before two tracks were recorded,
 * both sides mixed (summed, clipped) on one track. It holds only what has not been taken yet: `take` hands out the
 * samples up to a point (to be stored) and forgets them, and audio placed before that point later is dropped.
 * Never past `maxMs`.
 */
export class Recorder {
  readonly #maxSamples: number
  /** Chunks from the one holding `#taken` on; earlier ones were taken and dropped. */
  readonly #chunks: Array<Int16Array | undefined> = []
  #length = 0
  #taken: number
  /** 2: the caller's track left, the agent's right; 1: both sides mixed. */
  readonly channels: 1 | 2

  /** `takenSamples` (per channel): the recording stored already (a call taken back after forwarding goes on after it). */
  constructor (maxMs: number, takenSamples = 0, channels: 1 | 2 = 2) {
    this.channels = channels
    this.#maxSamples = Math.max(0, Math.floor(maxMs * SAMPLE_RATE / 1000))
    this.#taken = Math.min(takenSamples, this.#maxSamples)
    this.#length = this.#taken
  }

  /** `atMs`: when the frame's first sample was heard or said, in ms since the call started. */
  add (side: 'caller' | 'agent', frame: Int16Array, atMs: number): void {
    const { channels } = this
    const channel = channels === 2 && side === 'agent' ? 1 : 0
    const offset = Math.round(atMs * SAMPLE_RATE / 1000)
    const from = Math.max(0, this.#taken - offset)
    const to = Math.min(frame.length, this.#maxSamples - offset)
    // Chunk by chunk (a frame spans at most two): the inner loop is plain mixing, run for every frame of every call.
    for (let i = from; i < to;) {
      const index = Math.floor((offset + i) / RECORDING_CHUNK)
      const start = index * RECORDING_CHUNK
      const chunk = this.#chunks[index] ??= new Int16Array(Math.min(RECORDING_CHUNK, this.#maxSamples - start) * channels)
      const end = Math.min(to, start + RECORDING_CHUNK - offset)
      for (let j = (offset + i - start) * channels + channel; i < end; i++, j += channels) {
        const sum = chunk[j] + frame[i]
        chunk[j] = sum > 32767 ? 32767 : sum < -32768 ? -32768 : sum
      }
    }
    if (to > from) this.#length = Math.max(this.#length, offset + to)
  }

  /** Length of the recording (stored and held), in ms. */
  get durationMs (): number {
    return Math.round(this.#length * 1000 / SAMPLE_RATE)
  }

  /**
   * The samples not taken yet up to `untilMs` (at most the recording's length; silence where nobody spoke), interleaved
   * when in stereo, which the recorder then forgets.
   */
  take (untilMs: number): Int16Array {
    const { channels } = this
    const until = Math.max(this.#taken, Math.min(this.#length, Math.round(untilMs * SAMPLE_RATE / 1000)))
    const pcm = new Int16Array((until - this.#taken) * channels)
    for (let index = Math.floor(this.#taken / RECORDING_CHUNK); index * RECORDING_CHUNK < until; index++) {
      const start = index * RECORDING_CHUNK
      const chunk = this.#chunks[index]
      if (chunk !== undefined) {
        const from = Math.max(this.#taken, start)
        const samples = chunk.length / channels
        pcm.set(chunk.subarray((from - start) * channels, (Math.min(until, start + samples) - start) * channels), (from - this.#taken) * channels)
        if (start + samples <= until) this.#chunks[index] = undefined
      }
    }
    this.#taken = until
    return pcm
  }

  /** Ends the recording at `atMs` (the call's end): audio placed after it (sent ahead of time) was never heard. */
  end (atMs: number): void {
    this.#length = Math.max(this.#taken, Math.min(this.#length, Math.round(atMs * SAMPLE_RATE / 1000)))
  }
}
