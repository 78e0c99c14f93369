import { randomBytes } from 'node:crypto'
import type { VoiceConfig } from '../../../config.ts'
import { encodeWav, SAMPLE_RATE } from '../audio.ts'
import { postToProvider, ProviderError } from '../providers.ts'
import type { SttFactory } from './types.ts'

// The batch recogniser: each turn, once it has ended, as one WAV to an OpenAI-compatible
// POST /audio/transcriptions (OpenAI, a local Whisper server). No connection lives between turns and no
// partial words come; what servers without a streaming API offer.

/** A turn longer than this keeps its last minute: a caller who never pauses must not grow memory without end. */
const MAX_TURN_SAMPLES = 60 * SAMPLE_RATE

/** A multipart/form-data body: the fields, and one file. */
function multipart (fields: Record<string, string>, file: { name: string, filename: string, type: string, data: Buffer }) {
  const boundary = `----switchboard${randomBytes(12).toString('hex')}`
  const parts = Object.entries(fields).map(([name, value]) => `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
  const head = `--${boundary}\r\ncontent-disposition: form-data; name="${file.name}"; filename="${file.filename}"\r\ncontent-type: ${file.type}\r\n\r\n`
  return {
    type: `multipart/form-data; boundary=${boundary}`,
    body: Buffer.concat([Buffer.from(parts.join('') + head), file.data, Buffer.from(`\r\n--${boundary}--\r\n`)])
  }
}

interface Turn { frames: Int16Array[], samples: number, aborter: AbortController }

export function batchStt (voice: VoiceConfig): SttFactory {
  return (onEvent) => {
    let language: string | undefined
    let frames: Int16Array[] = []
    let samples = 0
    /** Ended turns being recognised: rejoin() puts their audio back in front of what the caller says next. */
    let recognising: Turn[] = []

    async function transcribe (pcm: Int16Array, signal: AbortSignal): Promise<string> {
      const form = multipart(
        { model: voice.stt.model, ...(language === undefined ? {} : { language }), response_format: 'json' },
        { name: 'file', filename: 'turn.wav', type: 'audio/wav', data: encodeWav(pcm) }
      )
      const chunks: Uint8Array[] = []
      for await (const chunk of postToProvider('STT', voice.stt, '/audio/transcriptions', form, { signal, timeoutMs: voice.providerTimeoutMs })) chunks.push(chunk)
      let text: unknown
      try {
        text = JSON.parse(Buffer.concat(chunks).toString('utf8')).text
      } catch {}
      if (typeof text !== 'string') throw new ProviderError('STT provider answered without a text')
      return text.trim()
    }

    const abortAll = () => {
      for (const turn of recognising) turn.aborter.abort()
      recognising = []
    }

    return {
      start: async (setup) => { language = setup.language },
      update: (setup) => { language = setup.language },
      audio: (frame) => {
        frames.push(frame.slice())
        samples += frame.length
        while (samples > MAX_TURN_SAMPLES && frames.length > 1) samples -= frames.shift()!.length
      },
      endOfTurn: async () => {
        const turn: Turn = { frames, samples, aborter: new AbortController() }
        frames = []
        samples = 0
        if (turn.samples === 0) return ''
        recognising.push(turn)
        const pcm = new Int16Array(turn.samples)
        let offset = 0
        for (const frame of turn.frames) { pcm.set(frame, offset); offset += frame.length }
        try {
          const text = await transcribe(pcm, turn.aborter.signal)
          onEvent({ type: 'audio_seconds', seconds: turn.samples / SAMPLE_RATE })
          return text
        } catch (error) {
          if (turn.aborter.signal.aborted) return '' // rejoined or closed
          throw error
        } finally {
          recognising = recognising.filter((other) => other !== turn)
        }
      },
      forget: () => {
        frames = []
        samples = 0
      },
      rejoin: () => {
        frames = [...recognising.flatMap((turn) => turn.frames), ...frames]
        samples += recognising.reduce((sum, turn) => sum + turn.samples, 0)
        abortAll()
      },
      close: abortAll
    }
  }
}
