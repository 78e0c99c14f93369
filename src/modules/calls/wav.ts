// The WAV container of a call's recording (and of any PCM16 mono audio the voice engine hands on).

export const WAV_HEADER_BYTES = 44

/** The 44-byte header of a PCM16 mono WAV file holding `pcmBytes` bytes of samples at `rate`. */
export function wavHeader (pcmBytes: number, rate: number): Buffer {
  const header = Buffer.alloc(WAV_HEADER_BYTES)
  header.write('RIFF', 0, 'ascii')
  header.writeUInt32LE(36 + pcmBytes, 4)
  header.write('WAVEfmt ', 8, 'ascii')
  header.writeUInt32LE(16, 16)
  header.writeUInt16LE(1, 20) // PCM
  header.writeUInt16LE(1, 22) // mono
  header.writeUInt32LE(rate, 24)
  header.writeUInt32LE(rate * 2, 28)
  header.writeUInt16LE(2, 32)
  header.writeUInt16LE(16, 34)
  header.write('data', 36, 'ascii')
  header.writeUInt32LE(pcmBytes, 40)
  return header
}
