import type { Test } from 'tap'
import { bufferToPcm, splitStereo } from '../../src/modules/voice/audio.ts'

// Two-track recordings (issue 27): a stereo WAV's tracks, and the mono mix the server serves by default.

/** The caller's (left) and agent's (right) tracks of a stereo PCM16 16 kHz WAV, after checking its header. */
export function splitTracks (t: Test, wav: Buffer): { left: Int16Array, right: Int16Array } {
  t.equal(wav.toString('ascii', 0, 4), 'RIFF')
  t.equal(wav.readUInt32LE(4), wav.length - 8, 'RIFF size')
  t.equal(wav.readUInt16LE(20), 1, 'PCM')
  t.equal(wav.readUInt16LE(22), 2, 'two channels')
  t.equal(wav.readUInt32LE(24), 16_000, 'sample rate')
  t.equal(wav.readUInt32LE(28), 64_000, 'bytes a second')
  t.equal(wav.readUInt16LE(32), 4, 'bytes a frame')
  t.equal(wav.readUInt16LE(34), 16, 'bits a sample')
  t.equal(wav.readUInt32LE(40), wav.length - 44, 'data size')
  return splitStereo(bufferToPcm(wav.subarray(44)))
}

/** Interleaved stereo PCM16 bytes mixed to mono: each frame's samples summed and clipped. */
export function mixTracks (stereo: Buffer): Int16Array {
  const mono = new Int16Array(stereo.length / 4)
  for (let i = 0; i < mono.length; i++) mono[i] = Math.max(-32768, Math.min(32767, stereo.readInt16LE(4 * i) + stereo.readInt16LE(4 * i + 2)))
  return mono
}
