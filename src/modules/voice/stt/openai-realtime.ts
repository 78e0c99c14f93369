import type WebSocket from 'ws'
import type { VoiceConfig } from '../../../config.ts'
import { pcmToBuffer, resample, SAMPLE_RATE } from '../audio.ts'
import { ProviderError, redact } from '../providers.ts'
import { abandon, failStream, openSocket, release } from './socket.ts'
import type { SttFactory, SttSetup } from './types.ts'

// OpenAI's realtime transcription sessions (GA protocol) over one WebSocket per call:
// `<STT_STREAM_URL>?intent=transcription`, then `session.update` with a session of type `transcription` and
// our own turn detection (`turn_detection: null`). The caller's audio is appended as it comes (PCM16 at the
// API's 24 kHz, base64, 100 ms a message); each end of turn commits the buffer, and the transcription of
// each committed item streams back (`conversation.item.input_audio_transcription.delta`, then `.completed`).

/** The only PCM rate the API takes; the core's 16 kHz is converted at this edge. */
const PROVIDER_RATE = 24_000
/** The API refuses to commit less than 100 ms of audio; less stays in the buffer for the next turn. */
const MIN_COMMIT_SAMPLES = SAMPLE_RATE / 10
/** Caller frames per input_audio_buffer.append (100 ms): a fifth of the messages, nothing held at a turn's end. */
const APPEND_FRAMES = 5
/** A caller who talks for this long without a turn's end has it committed in pieces (the buffer has a limit). */
const MAX_UNCOMMITTED_SAMPLES = 60 * SAMPLE_RATE

/** One committed stretch of audio and its transcription. */
interface Segment { itemId: string | undefined, startMs: number, endMs: number, text: string, done: boolean, forgotten?: boolean }

/** An ended turn waiting for the transcription of every segment up to `last`. */
interface Waiting { last: Segment | undefined, resolve: (text: string) => void, timer: NodeJS.Timeout }

/** The server events read here (others, such as conversation.item.added, are ignored). */
type ServerEvent =
  | { type: 'session.created' | 'session.updated' }
  | { type: 'input_audio_buffer.committed', item_id: string }
  | { type: 'conversation.item.input_audio_transcription.delta', item_id: string, delta?: string }
  | { type: 'conversation.item.input_audio_transcription.completed', item_id: string, transcript: string }
  | { type: 'conversation.item.input_audio_transcription.failed', item_id: string, error?: { message?: string, code?: string } }
  | { type: 'error', error?: { message?: string, code?: string | null } }

const msOf = (samples: number) => samples * 1000 / SAMPLE_RATE
const joined = (texts: string[]) => texts.map((text) => text.trim()).filter((text) => text !== '').join(' ')

function sessionOf (model: string, { language }: SttSetup) {
  return {
    type: 'transcription',
    audio: {
      input: {
        format: { type: 'audio/pcm', rate: PROVIDER_RATE },
        transcription: { model, ...(language === undefined ? {} : { language }) },
        turn_detection: null
      }
    }
  }
}

export function openaiRealtimeStt (voice: VoiceConfig): SttFactory {
  const { url, apiKey, model } = voice.stt
  const timeoutMs = voice.providerTimeoutMs

  return (onEvent, log) => {
    let socket: WebSocket | undefined
    /** Closed or failed: nothing more is sent or emitted. */
    let ended = false
    /** Rejects a start still under way. */
    let abortStart: ((message: string) => void) | undefined
    /** Caller samples (16 kHz) sent, committed, and reported as usage. */
    let streamed = 0
    let committed = 0
    let reported = 0
    let unsent: Buffer[] = []
    /** Committed segments not yet given to a turn, in the order of their commits. */
    const segments: Segment[] = []
    /** Deltas of items not committed yet (a model that transcribes while the caller speaks). */
    const early = new Map<string, string>()
    let waiting: Waiting[] = []

    const emit: typeof onEvent = (event) => { if (!ended) onEvent(event) }
    const send = (event: Record<string, unknown>) => {
      if (!ended && socket !== undefined && socket.readyState === socket.OPEN) socket.send(JSON.stringify(event))
    }
    const flush = () => {
      if (unsent.length === 0) return
      send({ type: 'input_audio_buffer.append', audio: Buffer.concat(unsent).toString('base64') })
      unsent = []
    }
    const report = () => {
      if (streamed > reported) emit({ type: 'audio_seconds', seconds: (streamed - reported) / SAMPLE_RATE })
      reported = streamed
    }
    const commit = () => {
      flush()
      send({ type: 'input_audio_buffer.commit' })
      segments.push({ itemId: undefined, startMs: msOf(committed), endMs: msOf(streamed), text: '', done: false })
      committed = streamed
    }

    const stop = () => {
      ended = true
      abandon(socket)
    }
    const fail = (message: string) => {
      if (ended) return
      const turns = waiting
      waiting = []
      failStream(message, apiKey, log, emit, socket, turns)
      stop()
    }

    /** The words not yet given to a turn, as one partial transcript. */
    const partial = () => {
      const text = joined([...segments.filter((segment) => segment.forgotten !== true).map((segment) => segment.text), ...early.values()])
      if (text === '') return
      emit({
        type: 'partial',
        text,
        final: early.size === 0 && segments.every((segment) => segment.done),
        startMs: segments[0]?.startMs ?? msOf(committed),
        endMs: early.size > 0 ? msOf(streamed) : segments.at(-1)!.endMs
      })
    }

    /** Gives each waiting turn, oldest first, its words once every segment up to its end is transcribed. */
    const settle = () => {
      while (waiting.length > 0) {
        const turn = waiting[0]
        const upTo = turn.last === undefined ? 0 : segments.indexOf(turn.last) + 1
        if (segments.slice(0, upTo).some((segment) => !segment.done)) return
        waiting.shift()
        clearTimeout(turn.timer)
        turn.resolve(joined(segments.splice(0, upTo).filter((segment) => segment.forgotten !== true).map((segment) => segment.text)))
      }
    }

    const receive = (event: ServerEvent) => {
      const byItem = (id: string) => segments.find((segment) => segment.itemId === id)
      switch (event.type) {
        case 'input_audio_buffer.committed': {
          // Commits are answered in order: the oldest segment without an item is this one.
          const segment = segments.find((s) => s.itemId === undefined)
          if (segment === undefined) return
          segment.itemId = event.item_id
          segment.text = early.get(event.item_id) ?? ''
          early.delete(event.item_id)
          return
        }
        case 'conversation.item.input_audio_transcription.delta': {
          const segment = byItem(event.item_id)
          if (segment === undefined) early.set(event.item_id, (early.get(event.item_id) ?? '') + (event.delta ?? ''))
          else if (!segment.done) segment.text += event.delta ?? ''
          partial()
          return
        }
        case 'conversation.item.input_audio_transcription.completed': {
          const segment = byItem(event.item_id)
          if (segment === undefined) return
          segment.text = typeof event.transcript === 'string' ? event.transcript : ''
          segment.done = true
          partial()
          settle()
          return
        }
        case 'conversation.item.input_audio_transcription.failed':
          fail(`STT provider could not transcribe the caller: ${event.error?.message ?? event.error?.code ?? 'no reason given'}`)
          return
        case 'error':
          fail(`STT provider error: ${event.error?.message ?? event.error?.code ?? 'unknown'}`)
      }
    }

    return {
      start: async (setup) => {
        const address = new URL(url)
        address.searchParams.set('intent', 'transcription')
        await new Promise<void>((resolve, reject) => {
          let configured = false
          let timer: NodeJS.Timeout | undefined
          const refuse = (message: string) => {
            clearTimeout(timer)
            abortStart = undefined
            stop()
            socket?.terminate()
            reject(new ProviderError(redact(message, apiKey)))
          }
          abortStart = refuse
          openSocket('STT provider', address, apiKey === undefined ? {} : { Authorization: `Bearer ${apiKey}` }, apiKey, timeoutMs, (ws) => {
            if (ended) return ws.terminate() // closed while connecting
            socket = ws
            timer = setTimeout(() => refuse(`STT provider did not answer within ${timeoutMs} ms`), timeoutMs)
            ws.on('message', (data) => {
              let event: ServerEvent
              try {
                event = JSON.parse(data.toString()) as ServerEvent
              } catch {
                if (configured) fail('STT provider sent a message that is not JSON')
                else refuse('STT provider sent a message that is not JSON')
                return
              }
              if (configured) return receive(event)
              if (event.type === 'error') refuse(`STT provider error: ${event.error?.message ?? event.error?.code ?? 'unknown'}`)
              if (event.type !== 'session.updated') return
              configured = true
              clearTimeout(timer)
              abortStart = undefined
              resolve()
            })
            ws.on('error', (err) => {
              if (configured) fail(`STT connection error: ${err.message}`)
              else refuse(`STT connection error: ${err.message}`)
            })
            ws.on('close', (code, reason) => {
              const message = `STT provider closed the connection (${code}${reason.length > 0 ? ` ${reason.toString()}` : ''})`
              if (configured) fail(message)
              else refuse(message)
            })
            ws.send(JSON.stringify({ type: 'session.update', session: sessionOf(model, setup) }))
          }).catch(reject)
        })
      },

      update: (setup) => send({ type: 'session.update', session: sessionOf(model, setup) }),

      audio: (frame) => {
        if (ended || socket === undefined || abortStart !== undefined) return
        unsent.push(pcmToBuffer(resample(frame, SAMPLE_RATE, PROVIDER_RATE)))
        streamed += frame.length
        if (unsent.length >= APPEND_FRAMES) flush()
        if (streamed - committed >= MAX_UNCOMMITTED_SAMPLES) commit()
        if (streamed - reported >= SAMPLE_RATE) report()
      },

      endOfTurn: async () => {
        if (ended || socket === undefined || abortStart !== undefined) return ''
        if (streamed - committed >= MIN_COMMIT_SAMPLES) commit()
        else flush()
        report()
        return await new Promise<string>((resolve) => {
          const timer = setTimeout(() => fail(`STT provider sent no transcript within ${timeoutMs} ms`), timeoutMs)
          waiting.push({ last: segments.at(-1), resolve, timer })
          settle()
        })
      },

      forget: () => {
        if (ended || socket === undefined || abortStart !== undefined) return
        // Segments already committed keep their place (commits are answered in order) but give no words.
        const awaited = new Set(waiting.map((turn) => turn.last))
        const kept = segments.findLastIndex((segment) => awaited.has(segment))
        for (const segment of segments.slice(kept + 1)) segment.forgotten = true
        unsent = []
        send({ type: 'input_audio_buffer.clear' })
        committed = streamed
        early.clear()
      },

      rejoin: () => release(waiting.splice(0)),

      close: () => {
        if (ended) return
        abortStart?.('the recogniser was closed before it connected')
        const turns = waiting
        waiting = []
        stop()
        socket?.close(1000)
        release(turns)
      }
    }
  }
}
