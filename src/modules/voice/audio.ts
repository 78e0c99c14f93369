// Audio inside the voice core is PCM16 mono at 16 kHz in 20 ms frames (DESIGN.md, "Voice"); transports and
// engines convert at their edge with these functions.

export const SAMPLE_RATE = 16_000
export const FRAME_MS = 20
/** Samples in one 20 ms frame at 16 kHz. */
export const FRAME_SAMPLES = SAMPLE_RATE * FRAME_MS / 1000

/** Little-endian PCM16 bytes as samples (copied, so any byte offset works). */
export function bufferToPcm (bytes: Uint8Array): Int16Array {
  const pcm = new Int16Array(bytes.length >> 1)
  const view = new DataView(bytes.buffer, bytes.byteOffset, pcm.length * 2)
  for (let i = 0; i < pcm.length; i++) pcm[i] = view.getInt16(i * 2, true)
  return pcm
}

/** Samples as little-endian PCM16 bytes. */
export function pcmToBuffer (pcm: Int16Array): Buffer {
  const bytes = Buffer.allocUnsafe(pcm.length * 2)
  for (let i = 0; i < pcm.length; i++) bytes.writeInt16LE(pcm[i], i * 2)
  return bytes
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
  const header = Buffer.alloc(44)
  header.write('RIFF', 0, 'ascii')
  header.writeUInt32LE(36 + pcm.length * 2, 4)
  header.write('WAVEfmt ', 8, 'ascii')
  header.writeUInt32LE(16, 16)
  header.writeUInt16LE(1, 20) // PCM
  header.writeUInt16LE(1, 22) // mono
  header.writeUInt32LE(rate, 24)
  header.writeUInt32LE(rate * 2, 28)
  header.writeUInt16LE(2, 32)
  header.writeUInt16LE(16, 34)
  header.write('data', 36, 'ascii')
  header.writeUInt32LE(pcm.length * 2, 40)
  return Buffer.concat([header, pcmToBuffer(pcm)])
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

export function mulawDecode (bytes: Uint8Array): Int16Array {
  const out = new Int16Array(bytes.length)
  for (let i = 0; i < bytes.length; i++) out[i] = MULAW_DECODE[bytes[i]]
  return out
}
