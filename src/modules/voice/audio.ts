// Audio inside the voice core is PCM16 mono at 16 kHz in 20 ms frames (DESIGN.md, "Voice"); transports and
// engines convert at their edge with these functions.

import { endianness } from 'node:os'

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
export function rms (pcm: Int16Array): number {
  if (pcm.length === 0) return 0
  let sum = 0
  for (let i = 0; i < pcm.length; i++) sum += pcm[i] * pcm[i]
  return Math.sqrt(sum / pcm.length)
}

/** A mono PCM16 WAV file. */
export function encodeWav (pcm: Int16Array, rate = SAMPLE_RATE): Buffer {
  const file = Buffer.allocUnsafe(44 + pcm.length * 2)
  file.write('RIFF', 0, 'ascii')
  file.writeUInt32LE(36 + pcm.length * 2, 4)
  file.write('WAVEfmt ', 8, 'ascii')
  file.writeUInt32LE(16, 16)
  file.writeUInt16LE(1, 20) // PCM
  file.writeUInt16LE(1, 22) // mono
  file.writeUInt32LE(rate, 24)
  file.writeUInt32LE(rate * 2, 28)
  file.writeUInt16LE(2, 32)
  file.writeUInt16LE(16, 34)
  file.write('data', 36, 'ascii')
  file.writeUInt32LE(pcm.length * 2, 40)
  writePcm(pcm, file, 44)
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

/** Samples per chunk of a recording: 10 s (320 KB), so that a short call holds little and a long one copies nothing. */
const RECORDING_CHUNK = SAMPLE_RATE * 10

/**
 * A call's recording: both sides mixed (summed, clipped) on one 16 kHz mono timeline, each frame at its time
 * since the call started. Memory grows in chunks as the call goes on and never past `maxMs`; later audio is dropped.
 */
export class Recorder {
  readonly #maxSamples: number
  readonly #chunks: Int16Array[] = []
  #length = 0

  constructor (maxMs: number) {
    this.#maxSamples = Math.max(0, Math.floor(maxMs * SAMPLE_RATE / 1000))
  }

  /** `atMs`: when the frame's first sample was heard or said, in ms since the call started. */
  add (_side: 'caller' | 'agent', frame: Int16Array, atMs: number): void {
    const offset = Math.round(atMs * SAMPLE_RATE / 1000)
    const from = Math.max(0, -offset)
    const to = Math.min(frame.length, this.#maxSamples - offset)
    // Chunk by chunk (a frame spans at most two): the inner loop is plain mixing, run for every frame of every call.
    for (let i = from; i < to;) {
      const index = Math.floor((offset + i) / RECORDING_CHUNK)
      const start = index * RECORDING_CHUNK
      const chunk = this.#chunks[index] ??= new Int16Array(Math.min(RECORDING_CHUNK, this.#maxSamples - start))
      const end = Math.min(to, start + RECORDING_CHUNK - offset)
      for (let j = offset + i - start; i < end; i++, j++) {
        const sum = chunk[j] + frame[i]
        chunk[j] = sum > 32767 ? 32767 : sum < -32768 ? -32768 : sum
      }
    }
    if (to > from) this.#length = Math.max(this.#length, offset + to)
  }

  get durationMs (): number {
    return Math.round(this.#length * 1000 / SAMPLE_RATE)
  }

  wav (): Buffer {
    const pcm = new Int16Array(this.#length)
    this.#chunks.forEach((chunk, i) => pcm.set(chunk.subarray(0, this.#length - i * RECORDING_CHUNK), i * RECORDING_CHUNK))
    return encodeWav(pcm)
  }
}
