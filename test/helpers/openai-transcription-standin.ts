import http, { type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { WebSocketServer, type WebSocket } from 'ws'
import { bufferToPcm, rms } from '../../src/modules/voice/audio.ts'

// A stand-in for OpenAI's realtime transcription sessions (GA protocol) on loopback: a WebSocket at
// /v1/realtime that takes `?intent=transcription` and `Authorization: Bearer <key>`, a `session.update` of type
// `transcription` with PCM at 24 kHz, base64 audio in `input_audio_buffer.append`, and answers each commit
// (of at least 100 ms) with `input_audio_buffer.committed`, the scripted transcript word by word as
// `conversation.item.input_audio_transcription.delta`, then `.completed`. What the real API refuses, it refuses
// the same way (an `error` event; a wrong key: an error, then close code 3000).

/** A client event as received; input_audio_buffer.append is recorded as `{ type, bytes }`, without its audio. */
export interface ClientEvent { type: string, [key: string]: unknown }

export interface OpenAiTranscriptionStandin {
  /** ws://127.0.0.1:port/v1/realtime, for STT_STREAM_URL. */
  url: string
  /** The key it accepts (`Authorization: Bearer <key>`). */
  apiKey: string
  /** Every client event of every connection, in order. */
  events: ClientEvent[]
  /** Each connection: its request URL and headers, and whether it has closed (and how). */
  connections: Array<{ url: string, headers: IncomingHttpHeaders, closed: boolean, closeCode?: number }>
  /** Transcripts of the next commits, taken in order; 'Hello.' when none is left. */
  transcripts: string[]
  /** Each commit's audio at 24 kHz: its length in seconds and loudness (0 is silence). */
  commits: Array<{ seconds: number, rms: number }>
  /** Seconds of audio appended, over every connection. */
  audioSeconds: () => number
  /** Hold the transcription of the next commits until `release()` (committed is still answered). */
  hold: boolean
  release: () => void
  /** Answer the next commit with conversation.item.input_audio_transcription.failed. */
  failNext: boolean
  /**
   * Transcribe as the audio arrives, as the streaming models do (gpt-realtime-whisper, gpt-live-transcribe):
   * a delta of the next scripted word for each append that holds speech, under the item id the commit will name.
   */
  live: boolean
  openConnections: () => number
  /** Closes every open connection abruptly, as an outage would. */
  drop: () => void
}

const RATE = 24_000

/** Closes on t.teardown. */
export async function startOpenAiTranscriptionStandin (t: Test, apiKey = 'sk-stt-test'): Promise<OpenAiTranscriptionStandin> {
  let counter = 0
  const id = (prefix: string) => `${prefix}_${++counter}`
  const server = http.createServer()
  const wss = new WebSocketServer({ noServer: true })
  let appendedBytes = 0
  let held: Array<() => void> = []

  const standin: OpenAiTranscriptionStandin = {
    url: '',
    apiKey,
    events: [],
    connections: [],
    transcripts: [],
    commits: [],
    audioSeconds: () => appendedBytes / 2 / RATE,
    hold: false,
    release: () => {
      standin.hold = false
      for (const go of held.splice(0)) go()
    },
    failNext: false,
    live: false,
    openConnections: () => wss.clients.size,
    drop: () => { for (const client of wss.clients) client.terminate() }
  }

  // The handshake: only the transcription intent is a transcription session (a model would make a conversation).
  server.on('upgrade', (request, socket, head) => {
    const url = new URL(request.url ?? '/', 'http://standin')
    if (url.pathname !== '/v1/realtime' || url.searchParams.get('intent') !== 'transcription' || url.searchParams.has('model')) {
      socket.end('HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{"error":{"message":"Invalid intent.","type":"invalid_request_error"}}')
      return
    }
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request))
  })

  const send = (socket: WebSocket, event: Record<string, unknown>) => {
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify({ event_id: id('event'), ...event }))
  }
  const sendError = (socket: WebSocket, code: string, message: string) => {
    send(socket, { type: 'error', error: { type: 'invalid_request_error', code, message, param: null, event_id: null } })
  }

  wss.on('connection', (socket: WebSocket, request: http.IncomingMessage) => {
    const connection = { url: request.url ?? '', headers: request.headers, closed: false as boolean, closeCode: undefined as number | undefined }
    standin.connections.push(connection)
    socket.on('close', (code) => {
      connection.closed = true
      connection.closeCode = code
    })
    if (request.headers.authorization !== `Bearer ${apiKey}`) {
      // As the real API: the socket opens, an error names the key (masked), and it closes.
      const given = (request.headers.authorization ?? '').replace(/^Bearer /, '')
      sendError(socket, 'invalid_api_key', `Incorrect API key provided: ${given.slice(0, 3)}****${given.slice(-4)}.`)
      socket.close(3000, 'invalid_request_error.invalid_api_key')
      return
    }
    let buffer: Buffer[] = []
    let lastItem: string | null = null
    let format: { type?: string, rate?: number } = { type: 'audio/pcm', rate: RATE }

    /** The item the audio since the last commit will become, and the words of it already sent (live). */
    let item = id('item')
    let script: { words: string[], sent: number } | undefined
    const transcribe = (itemId: string, pcm: Int16Array) => {
      if (standin.live) {
        const { words, sent } = script ?? { words: (standin.transcripts.shift() ?? 'Hello.').match(/\S+\s*/g) ?? [], sent: 0 }
        script = undefined
        for (const word of words.slice(sent)) send(socket, { type: 'conversation.item.input_audio_transcription.delta', item_id: itemId, content_index: 0, delta: word })
        send(socket, { type: 'conversation.item.input_audio_transcription.completed', item_id: itemId, content_index: 0, transcript: words.join(''), usage: { type: 'duration', seconds: pcm.length / RATE } })
        return
      }
      if (standin.failNext) {
        standin.failNext = false
        send(socket, { type: 'conversation.item.input_audio_transcription.failed', item_id: itemId, content_index: 0, error: { type: 'transcription_error', code: 'audio_unintelligible', message: 'The audio could not be transcribed.' } })
        return
      }
      const transcript = standin.transcripts.shift() ?? 'Hello.'
      for (const word of transcript.match(/\S+\s*/g) ?? []) {
        send(socket, { type: 'conversation.item.input_audio_transcription.delta', item_id: itemId, content_index: 0, delta: word })
      }
      send(socket, { type: 'conversation.item.input_audio_transcription.completed', item_id: itemId, content_index: 0, transcript, usage: { type: 'duration', seconds: pcm.length / RATE } })
    }

    socket.on('message', (data) => {
      let event: ClientEvent
      try {
        event = JSON.parse(data.toString()) as ClientEvent
      } catch {
        sendError(socket, 'invalid_json', 'The event is not valid JSON.')
        return
      }
      if (event.type === 'input_audio_buffer.append') {
        const audio = Buffer.from(String(event.audio), 'base64')
        standin.events.push({ type: event.type, bytes: audio.length })
        if (audio.length % 2 !== 0) {
          sendError(socket, 'invalid_value', 'Audio must be whole 16-bit samples.')
          return
        }
        appendedBytes += audio.length
        buffer.push(audio)
        if (standin.live && rms(bufferToPcm(audio)) > 500) {
          script ??= { words: (standin.transcripts.shift() ?? 'Hello.').match(/\S+\s*/g) ?? [], sent: 0 }
          if (script.sent < script.words.length) send(socket, { type: 'conversation.item.input_audio_transcription.delta', item_id: item, content_index: 0, delta: script.words[script.sent++] })
        }
        return
      }
      standin.events.push(event)
      switch (event.type) {
        case 'session.update': {
          const session = event.session as { type?: string, audio?: { input?: { format?: { type?: string, rate?: number } } } } | undefined
          if (session?.type !== 'transcription') {
            sendError(socket, 'invalid_value', 'A transcription session takes session.type "transcription".')
            return
          }
          const given = session.audio?.input?.format
          if (given !== undefined && !(given.type === 'audio/pcm' && given.rate === RATE) && given.type !== 'audio/pcmu' && given.type !== 'audio/pcma') {
            sendError(socket, 'invalid_value', 'The PCM audio format supports only a 24kHz sample rate.')
            return
          }
          format = given ?? format
          send(socket, { type: 'session.updated', session: { object: 'realtime.session', id: id('sess'), ...session } })
          return
        }
        case 'input_audio_buffer.commit': {
          const pcm = bufferToPcm(Buffer.concat(buffer))
          buffer = []
          if (pcm.length < RATE / 10) {
            sendError(socket, 'input_audio_buffer_commit_empty', 'Error committing input audio buffer: buffer too small.')
            return
          }
          standin.commits.push({ seconds: pcm.length / RATE, rms: rms(pcm) })
          const itemId = item
          item = id('item')
          send(socket, { type: 'input_audio_buffer.committed', item_id: itemId, previous_item_id: lastItem })
          lastItem = itemId
          if (standin.hold) held.push(() => transcribe(itemId, pcm))
          else transcribe(itemId, pcm)
          return
        }
        case 'input_audio_buffer.clear':
          buffer = []
          send(socket, { type: 'input_audio_buffer.cleared' })
          return
        default:
          sendError(socket, 'invalid_value', `Invalid value: '${event.type}'.`)
      }
    })
    send(socket, { type: 'session.created', session: { object: 'realtime.session', id: id('sess'), type: 'transcription', audio: { input: { format } } } })
  })

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  standin.url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/v1/realtime`
  t.teardown(async () => {
    held = []
    for (const client of wss.clients) client.terminate()
    wss.close()
    await new Promise((resolve) => server.close(resolve))
  })
  return standin
}
