import type WebSocket from 'ws'
import type { VoiceConfig } from '../../../config.ts'
import { pcmToBuffer, SAMPLE_RATE } from '../audio.ts'
import { abandon, failStream, openSocket, release } from './socket.ts'
import type { SttFactory } from './types.ts'

// Deepgram's live transcription over one WebSocket per call:
// `<STT_STREAM_URL>?model=…&encoding=linear16&sample_rate=16000&channels=1&interim_results=true&smart_format=true&language=…`
// with `Authorization: Token <key>`. The caller's audio goes as binary messages in the core's own format (no
// conversion); `Results` come back, interim (`is_final: false`) and final, each placed in the stream by its
// `start` and `duration`. At our end of turn `Finalize` makes Deepgram finalize what it still holds; the
// turn's words are the final results that start before the turn's end, once finals reach that end.
// `KeepAlive` while no audio flows, `CloseStream` when the call ends.

/** Deepgram closes a stream that gets neither audio nor KeepAlive for 10 s (NET-0001); it advises one every 3–5 s. */
const KEEPALIVE_MS = 3000
/** Caller frames per binary message (100 ms): a fifth of the messages; the rest goes at a turn's end. */
const SEND_FRAMES = 5
/**
 * Finals that reach this close to a turn's end cover it: the turn ended in silence (our end of turn waits for
 * some), and Deepgram may send nothing for a Finalize when too little audio is left to finalize.
 */
const FINAL_SLACK_MS = 100

interface Words { text: string, startMs: number, endMs: number }

/** An ended turn, waiting until final results reach `endMs`. */
interface Waiting { endMs: number, resolve: (text: string) => void, timer: NodeJS.Timeout }

/** The messages read here (Metadata, SpeechStarted and UtteranceEnd are not needed). */
interface Results {
  type: 'Results'
  start: number
  duration: number
  is_final?: boolean
  from_finalize?: boolean
  channel?: { alternatives?: Array<{ transcript?: string }> }
}

const msOf = (samples: number) => samples * 1000 / SAMPLE_RATE
const joined = (words: Words[]) => words.map((w) => w.text).filter((text) => text !== '').join(' ')

export function deepgramStt (voice: VoiceConfig, options: { keepAliveMs?: number } = {}): SttFactory {
  const { url, apiKey, model } = voice.stt
  const timeoutMs = voice.providerTimeoutMs
  const keepAliveMs = options.keepAliveMs ?? KEEPALIVE_MS

  return (onEvent, log) => {
    let socket: WebSocket | undefined
    let ended = false
    let keepAlive: NodeJS.Timeout | undefined
    let unsent: Buffer[] = []
    let sentSinceTick = false
    /** Caller samples (16 kHz) sent, and reported as usage. */
    let sent = 0
    let reported = 0
    /** Final results not yet given to a turn, in stream order; the latest interim result after them. */
    let finals: Words[] = []
    let interim: Words | undefined
    /** How far into the stream final results reach (ms). */
    let reach = 0
    /** Where the stream stood at each Finalize not yet answered (ms). */
    const finalizes: number[] = []
    let waiting: Waiting[] = []
    let lastPartial = ''
    /** Words of audio up to here (ms) were forgotten: results that end before it are dropped. */
    let forgotten = 0

    const emit: typeof onEvent = (event) => { if (!ended) onEvent(event) }
    const open = () => !ended && socket !== undefined && socket.readyState === socket.OPEN
    const flush = () => {
      if (unsent.length === 0) return
      if (open()) socket!.send(Buffer.concat(unsent))
      unsent = []
      sentSinceTick = true
    }
    const control = (type: 'KeepAlive' | 'Finalize' | 'CloseStream') => { if (open()) socket!.send(JSON.stringify({ type })) }
    const report = () => {
      if (sent > reported) emit({ type: 'audio_seconds', seconds: (sent - reported) / SAMPLE_RATE })
      reported = sent
    }

    const stop = () => {
      ended = true
      clearInterval(keepAlive)
      abandon(socket)
    }
    const fail = (message: string) => {
      if (ended) return
      const turns = waiting
      waiting = []
      failStream(message, apiKey, log, emit, socket, turns)
      stop()
    }

    const partial = () => {
      const words = interim === undefined ? finals : [...finals, interim]
      const text = joined(words)
      const key = `${interim === undefined ? 'final' : 'interim'}:${text}`
      if (text === '' || key === lastPartial) return
      lastPartial = key
      emit({ type: 'partial', text, final: interim === undefined, startMs: words[0].startMs, endMs: words.at(-1)!.endMs })
    }

    /** Gives a turn the words that start before its end; with `interimToo`, what is not final yet as well. */
    const take = (turn: Waiting, interimToo: boolean) => {
      const words = finals.filter((w) => w.startMs < turn.endMs)
      finals = finals.slice(words.length)
      if (interimToo && interim !== undefined && interim.startMs < turn.endMs) {
        words.push(interim)
        interim = undefined
      }
      lastPartial = ''
      clearTimeout(turn.timer)
      turn.resolve(joined(words))
    }
    const settle = () => {
      while (waiting.length > 0 && reach >= waiting[0].endMs - FINAL_SLACK_MS) take(waiting.shift()!, false)
    }

    const receive = (message: Results | { type: string }) => {
      if (message.type !== 'Results') return
      const result = message as Results
      const text = (result.channel?.alternatives?.[0]?.transcript ?? '').trim()
      const words = { text, startMs: result.start * 1000, endMs: (result.start + result.duration) * 1000 }
      if (result.is_final === true) {
        if (text !== '' && words.endMs > forgotten) finals.push(words)
        reach = Math.max(reach, words.endMs)
        interim = undefined
      } else {
        interim = text === '' || words.endMs <= forgotten ? undefined : words
      }
      // Finalizes are answered in order; one left unanswered makes this under-, never over-estimate the reach.
      if (result.from_finalize === true) reach = Math.max(reach, finalizes.shift() ?? 0)
      while (finalizes.length > 0 && finalizes[0] <= reach) finalizes.shift()
      partial()
      settle()
    }

    const attach = (ws: WebSocket) => {
      if (ended) return ws.terminate() // closed while connecting
      socket = ws
      ws.on('message', (data, isBinary) => {
        if (isBinary) return
        let message: { type: string }
        try {
          message = JSON.parse(data.toString()) as { type: string }
        } catch {
          fail('STT provider sent a message that is not JSON')
          return
        }
        receive(message)
      })
      ws.on('error', (err) => fail(`STT connection error: ${err.message}`))
      ws.on('close', (code, reason) => fail(`STT provider closed the stream (${code}${reason.length > 0 ? ` ${reason.toString()}` : ''})`))
      keepAlive = setInterval(() => {
        if (!sentSinceTick) control('KeepAlive')
        sentSinceTick = false
      }, keepAliveMs)
      keepAlive.unref()
    }

    return {
      start: async ({ language }) => {
        const address = new URL(url)
        const query: Record<string, string> = {
          model,
          encoding: 'linear16',
          sample_rate: String(SAMPLE_RATE),
          channels: '1',
          interim_results: 'true',
          smart_format: 'true',
          // Several languages: Deepgram's multilingual mode recognises them as they come.
          language: language ?? 'multi'
        }
        // Parameters in STT_STREAM_URL (endpointing, keyterm, …) are kept; ours fill in the rest.
        for (const [name, value] of Object.entries(query)) if (!address.searchParams.has(name)) address.searchParams.set(name, value)
        await openSocket('STT provider', address, apiKey === undefined ? {} : { Authorization: `Token ${apiKey}` }, apiKey, timeoutMs, attach)
      },

      update: () => { log.debug('a Deepgram stream keeps the language it was opened with') },

      audio: (frame) => {
        if (ended || socket === undefined) return
        unsent.push(pcmToBuffer(frame))
        sent += frame.length
        if (unsent.length >= SEND_FRAMES) flush()
        if (sent - reported >= SAMPLE_RATE) report()
      },

      endOfTurn: async () => {
        if (ended || socket === undefined) return ''
        flush()
        control('Finalize')
        report()
        const endMs = msOf(sent)
        finalizes.push(endMs)
        return await new Promise<string>((resolve) => {
          // Finals that never reach the end (a Finalize unanswered while no audio flows): the turn goes on with
          // what Deepgram has, its interim words included.
          const turn: Waiting = {
            endMs,
            resolve,
            timer: setTimeout(() => {
              log.warn({ endMs, reach }, 'Deepgram did not finalize the turn in time; its interim words are used')
              waiting = waiting.filter((other) => other !== turn)
              take(turn, true)
            }, timeoutMs)
          }
          waiting.push(turn)
          settle()
        })
      },

      forget: () => {
        forgotten = msOf(sent)
        finals = finals.filter((w) => w.endMs > forgotten)
        interim = undefined
        lastPartial = ''
      },

      rejoin: () => release(waiting.splice(0)),

      close: () => {
        if (ended) return
        control('CloseStream')
        const turns = waiting
        waiting = []
        stop()
        socket?.close(1000)
        release(turns)
      }
    }
  }
}
