// The WAV container of a call's recording (and of any PCM16 audio the voice engine hands on).

export const WAV_HEADER_BYTES = 44

/** The 44-byte header of a PCM16 WAV file holding `pcmBytes` bytes of samples at `rate` (interleaved when stereo). */
export function wavHeader (pcmBytes: number, rate: number, channels: 1 | 2 = 1): Buffer {
  const header = Buffer.alloc(WAV_HEADER_BYTES)
  header.write('RIFF', 0, 'ascii')
  header.writeUInt32LE(36 + pcmBytes, 4)
  header.write('WAVEfmt ', 8, 'ascii')
  header.writeUInt32LE(16, 16)
  header.writeUInt16LE(1, 20) // PCM
  header.writeUInt16LE(channels, 22)
  header.writeUInt32LE(rate, 24)
  header.writeUInt32LE(rate * 2 * channels, 28) // bytes a second
  header.writeUInt16LE(2 * channels, 32) // bytes a frame (a sample of each channel)
  header.writeUInt16LE(16, 34)
  header.write('data', 36, 'ascii')
  header.writeUInt32LE(pcmBytes, 40)
  return header
}
