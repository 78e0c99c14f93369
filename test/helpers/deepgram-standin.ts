import { randomUUID } from 'node:crypto'
import http, { type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import type { Test } from 'tap'
import { WebSocketServer, type WebSocket } from 'ws'
import { bufferToPcm, rms } from '../../src/modules/voice/audio.ts'

// A stand-in for Deepgram's live transcription (wss://api.deepgram.com/v1/listen) on loopback. The handshake
// checks what Deepgram checks: `Authorization: Token <key>` (else 401 with a dg-error header and
// { err_code, err_msg }), and an `encoding` that comes with its `sample_rate` (else 400). Binary messages are
// the audio; it hears speech by its loudness (or, with `hearing` set, a recogniser of its own hears it and
// answers: bench:turns'). While it hears a scripted utterance it sends interim `Results`
// (one more word of the script per 100 ms of speech); it finalizes on its own after `endpointingMs` of silence
// (`is_final`, `speech_final`) and at each `Finalize` (`from_finalize`), each result placed in the stream by
// `start` and `duration`. `KeepAlive` is taken silently; `CloseStream` answers Metadata and closes; a stream
// that gets neither audio nor KeepAlive for `idleMs` is closed 1011 NET-0001, as Deepgram does after 10 s.

export interface DeepgramConnection {
  url: URL
  headers: IncomingHttpHeaders
  /** JSON messages received (KeepAlive, Finalize, CloseStream…). */
  messages: Array<{ type: string }>
  /** Seconds of audio received, at the connection's sample rate. */
  audioSeconds: number
  closed: boolean
  closeCode?: number
}

/** One stream, as a recogniser put in place of the script (`hearing`) sees it. */
export interface DeepgramStream {
  /** The stream's sample rate and `language` parameter. */
  rate: number
  language: string | null
  /** Sends a Results message; `start` and `duration` place it in the stream (seconds). */
  result: (transcript: string, fields: { is_final: boolean, speech_final: boolean, start: number, duration: number, from_finalize?: boolean }) => void
}

/** A recogniser in place of the loudness and the script: it gets the audio and answers through `DeepgramStream.result`. */
export interface DeepgramHearing {
  /** Audio as received (mono samples at the stream's rate). */
  audio: (pcm: Int16Array) => void
  /** Finalize (`fromFinalize`) or CloseStream: what it has heard, final at once. */
  finalize: (fromFinalize: boolean) => void
}

export interface DeepgramStandin {
  /** ws://127.0.0.1:port/v1/listen, for STT_STREAM_URL. */
  url: string
  apiKey: string
  connections: DeepgramConnection[]
  /** What the next utterances say, taken in order; 'Hello.' when none is left. */
  transcripts: string[]
  /** Silence after speech after which it finalizes on its own (Deepgram's endpointing); 0: never. */
  endpointingMs: number
  /** Answer Finalize with a from_finalize result (Deepgram may not when little audio is left). */
  answerFinalize: boolean
  /** A stream without audio or KeepAlive for this long is closed (Deepgram: 10 s). */
  idleMs: number
  /** When set, each stream's recogniser (the benchmark's: scripts/bench/standins.ts); `transcripts` and `endpointingMs` are not used then. */
  hearing?: (stream: DeepgramStream) => DeepgramHearing
  openConnections: () => number
  /** Closes every stream as Deepgram does on an internal failure (1011). */
  fail: (reason?: string) => void
}

/** Louder than this (RMS of 20 ms) is speech. */
const SPEECH_RMS = 500

/** Closes on t.teardown. */
export async function startDeepgramStandin (t: Test, apiKey = 'dg-test-key'): Promise<DeepgramStandin> {
  const server = http.createServer()
  const wss = new WebSocketServer({ noServer: true })
  const timers = new Set<NodeJS.Timeout>()

  const standin: DeepgramStandin = {
    url: '',
    apiKey,
    connections: [],
    transcripts: [],
    endpointingMs: 300,
    answerFinalize: true,
    idleMs: 10_000,
    openConnections: () => wss.clients.size,
    fail: (reason = 'NET-0000 Deepgram could not process the stream') => { for (const client of wss.clients) client.close(1011, reason) }
  }

  const refuse = (socket: Duplex, status: number, code: string, message: string) => {
    const body = JSON.stringify({ err_code: code, err_msg: message, request_id: randomUUID() })
    socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json\r\ndg-error: ${message}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
  }

  server.on('upgrade', (request, socket, head) => {
    const url = new URL(request.url ?? '/', 'http://standin')
    if (url.pathname !== '/v1/listen') return refuse(socket, 404, 'NOT_FOUND', 'Not found.')
    if (request.headers.authorization !== `Token ${apiKey}`) return refuse(socket, 401, 'INVALID_AUTH', 'Invalid credentials.')
    const encoding = url.searchParams.get('encoding')
    const rate = Number(url.searchParams.get('sample_rate'))
    if (encoding !== null && !(Number.isInteger(rate) && rate > 0)) return refuse(socket, 400, 'Bad Request', 'sample_rate is required when encoding is set.')
    if (encoding !== null && encoding !== 'linear16') return refuse(socket, 400, 'Bad Request', `This stand-in speaks linear16 only, not ${encoding}.`)
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request, url, rate))
  })

  wss.on('connection', (socket: WebSocket, request: http.IncomingMessage, url: URL, rate: number) => {
    const connection: DeepgramConnection = { url, headers: request.headers, messages: [], audioSeconds: 0, closed: false }
    standin.connections.push(connection)
    const requestId = randomUUID()
    const channels = Number(url.searchParams.get('channels') ?? '1')
    const endpointing = url.searchParams.get('endpointing')
    const endpointingMs = endpointing === 'false' ? 0 : endpointing !== null ? Number(endpointing) : standin.endpointingMs
    /** Samples (per channel) received; where the last final result ended. */
    let received = 0
    let finalizedAt = 0
    /** The utterance being heard: its script and how much speech of it was heard. */
    let utterance: { words: string[], spokenMs: number } | undefined
    let silenceMs = 0
    let pending = Buffer.alloc(0)
    let idle: NodeJS.Timeout | undefined
    const touch = () => {
      clearTimeout(idle)
      timers.delete(idle!)
      idle = setTimeout(() => socket.close(1011, 'NET-0001 no audio received within the timeout window'), standin.idleMs)
      timers.add(idle)
    }
    touch()
    socket.on('close', (code) => {
      connection.closed = true
      connection.closeCode = code
      clearTimeout(idle)
    })

    const send = (message: Record<string, unknown>) => { if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(message)) }
    const seconds = (samples: number) => samples / rate
    const result = (text: string, final: boolean, extra: Record<string, unknown> = {}) => send({
      type: 'Results',
      channel_index: [0, 1],
      duration: seconds(received - finalizedAt),
      start: seconds(finalizedAt),
      is_final: final,
      speech_final: final,
      channel: { alternatives: [{ transcript: text, confidence: text === '' ? 0 : 0.98, words: [] }] },
      metadata: { request_id: requestId, model_info: { name: url.searchParams.get('model') ?? 'general', version: 'stand-in', arch: 'stand-in' }, model_uuid: randomUUID() },
      ...extra
    })
    const hearing = standin.hearing?.({ rate, language: url.searchParams.get('language'), result: (text, fields) => result(text, fields.is_final, fields) })
    const heard = () => utterance === undefined ? '' : utterance.words.slice(0, Math.max(1, Math.ceil(utterance.spokenMs / 100))).join(' ')
    const finalize = (extra: Record<string, unknown> = {}) => {
      result(utterance === undefined ? '' : utterance.words.join(' '), true, extra)
      finalizedAt = received
      utterance = undefined
    }

    socket.on('message', (data: Buffer, isBinary: boolean) => {
      touch()
      if (!isBinary) {
        let message: { type?: string }
        try {
          message = JSON.parse(data.toString()) as { type?: string }
        } catch {
          socket.close(1008, 'DATA-0000 a text message must be JSON')
          return
        }
        connection.messages.push({ type: String(message.type) })
        if (message.type === 'KeepAlive') return
        if (message.type === 'Finalize') {
          if (standin.answerFinalize) {
            if (hearing === undefined) finalize({ from_finalize: true })
            else hearing.finalize(true)
          }
          return
        }
        if (message.type === 'CloseStream') {
          if (hearing !== undefined) hearing.finalize(false)
          else if (received > finalizedAt) finalize()
          send({ type: 'Metadata', transaction_key: 'deprecated', request_id: requestId, sha256: '', created: new Date().toISOString(), duration: seconds(received), channels })
          socket.close(1000)
          return
        }
        socket.close(1008, `DATA-0000 unknown message type ${String(message.type)}`)
        return
      }
      // Audio: a byte stream of 16-bit samples; a message may split a sample.
      const bytes = Buffer.concat([pending, data])
      const whole = bytes.length - bytes.length % (2 * channels)
      pending = bytes.subarray(whole)
      const pcm = bufferToPcm(bytes.subarray(0, whole))
      if (hearing !== undefined) {
        received += pcm.length / channels
        connection.audioSeconds = seconds(received)
        hearing.audio(pcm)
        return
      }
      const frame = Math.round(rate / 50) * channels
      for (let offset = 0; offset < pcm.length; offset += frame) {
        const chunk = pcm.subarray(offset, offset + frame)
        received += chunk.length / channels
        const ms = chunk.length / channels / rate * 1000
        if (rms(chunk) > SPEECH_RMS) {
          utterance ??= { words: (standin.transcripts.shift() ?? 'Hello.').split(/\s+/), spokenMs: 0 }
          utterance.spokenMs += ms
          silenceMs = 0
        } else if (utterance !== undefined) {
          silenceMs += ms
          if (endpointingMs > 0 && silenceMs >= endpointingMs) finalize()
        }
      }
      connection.audioSeconds = seconds(received)
      if (utterance !== undefined) result(heard(), false)
    })
  })

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  standin.url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/v1/listen`
  t.teardown(async () => {
    for (const timer of timers) clearTimeout(timer)
    for (const client of wss.clients) client.terminate()
    wss.close()
    await new Promise((resolve) => server.close(resolve))
  })
  return standin
}
