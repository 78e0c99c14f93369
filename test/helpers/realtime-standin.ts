import http, { type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { WebSocketServer, type WebSocket } from 'ws'
import { bufferToPcm, rms } from '../../src/modules/voice/audio.ts'

// A stand-in for the OpenAI Realtime API (GA protocol) on loopback, for the realtime engine's tests, the
// end-to-end tests and the voice benchmark (up to 100 sessions at once: it keeps no audio but the
// uncommitted buffer, and answers at once unless a reply says to hold). With a session's
// audio.input.turn_detection (server_vad, semantic_vad) it detects turns as the real server does: loudness in
// the appended audio, input_audio_buffer.speech_started and speech_stopped, its own commit, and a response
// (create_response) or a cancel of the running one (interrupt_response).

/** What the model does for one response.create. */
export type Reply =
  /**
   * Speaks `text`: transcript deltas and a 440 Hz tone (PCM16 24 kHz, 50 ms a character, at most 3 s) in
   * AUDIO_CHUNKS deltas, then the done events. `holdAfter`: stop after that many audio deltas and wait for
   * response.cancel (0: the response never starts speaking). `dropAfter`: close the socket after that many.
   */
  | { text: string, holdAfter?: number, dropAfter?: number }
  /** The model calls these tools (a function_call item each) and ends the response. */
  | { calls: Array<{ name: string, arguments: string }> }
  /** An `error` event instead of a response. */
  | { error: { code: string, message: string } }

/** A client event as received; input_audio_buffer.append is recorded as `{ type, bytes }`, without its audio. */
export interface ClientEvent { type: string, [key: string]: unknown }

export interface RealtimeStandin {
  /** ws://127.0.0.1:port/v1/realtime, for REALTIME_URL. */
  url: string
  /** Every client event of every connection, in order. */
  events: ClientEvent[]
  /** Each connection's request: URL (path and query) and headers. */
  connections: Array<{ url: string, headers: IncomingHttpHeaders }>
  /** Transcripts of the next commits, taken in order; 'Hello.' when none is left. */
  transcripts: string[]
  /** Replies to the next response.create events, taken in order; `defaultReply` when none is left. */
  replies: Reply[]
  defaultReply: Reply
  /** Each commit's audio at 24 kHz (the client's, or the turn detection's): its length and RMS (0 is silence). */
  commits: Array<{ seconds: number, rms: number }>
  /** The user items the client deleted (conversation.item.delete). */
  deleted: string[]
  /** Send each transcription after the answer's events, as the real API often does, rather than at the commit. */
  lateTranscripts: boolean
  /** Leave session.update unanswered (a start that times out). */
  silent: boolean
  /** Connections open now (a benchmark checks that none leaks). */
  openConnections: () => number
  /** Closes every open connection abruptly, as a provider outage would. */
  drop: () => void
  /** Sends an `error` event on every open connection. */
  sendError: (code: string, message: string) => void
}

const RATE = 24_000
export const AUDIO_CHUNKS = 4
const TONE = Buffer.alloc(3 * RATE * 2)
for (let i = 0; i < TONE.length / 2; i++) TONE.writeInt16LE(Math.round(8000 * Math.sin(2 * Math.PI * 440 * i / RATE)), i * 2)

/** The audio (PCM16 24 kHz bytes) the stand-in speaks for `text`. */
export function replyAudio (text: string): Buffer {
  return TONE.subarray(0, Math.min(TONE.length, Math.round(text.length * 0.05 * RATE) * 2))
}

/** A text reply's audio, cut into chunks; boundaries fall on odd bytes on purpose (the protocol promises none). */
function audioChunks (text: string): Buffer[] {
  const bytes = replyAudio(text)
  const cuts = [0]
  for (let i = 1; i < AUDIO_CHUNKS; i++) cuts.push(Math.floor(i * bytes.length / AUDIO_CHUNKS) | 1)
  cuts.push(bytes.length)
  return cuts.slice(1).map((end, i) => bytes.subarray(cuts[i], end))
}

/** Loudness (RMS) of a 20 ms piece that the stand-in's voice-activity detection counts as speech. */
const SPEECH_RMS = 1000
/** Silence that ends a turn under semantic_vad, by eagerness (the real server decides with a model). */
const SEMANTIC_SILENCE_MS: Record<string, number> = { low: 1000, medium: 500, auto: 500, high: 200 }

interface TurnDetection { type: string, create_response?: boolean, interrupt_response?: boolean, silence_duration_ms?: number, prefix_padding_ms?: number, eagerness?: string }

/** Closes on t.teardown. */
export async function startRealtimeStandin (t: Test): Promise<RealtimeStandin> {
  let counter = 0
  const id = (prefix: string) => `${prefix}_${++counter}`
  const server = http.createServer()
  const wss = new WebSocketServer({ server, path: '/v1/realtime' })

  const standin: RealtimeStandin = {
    url: '',
    events: [],
    connections: [],
    transcripts: [],
    replies: [],
    defaultReply: { text: 'Hi, how can I help?' },
    commits: [],
    deleted: [],
    lateTranscripts: false,
    silent: false,
    openConnections: () => wss.clients.size,
    drop: () => { for (const client of wss.clients) client.terminate() },
    sendError: (code, message) => { for (const client of wss.clients) sendError(client, code, message) }
  }

  const send = (socket: WebSocket, event: Record<string, unknown>) => {
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify({ event_id: id('event'), ...event }))
  }
  const sendError = (socket: WebSocket, code: string, message: string) => {
    send(socket, { type: 'error', error: { type: 'invalid_request_error', code, message, param: null, event_id: null } })
  }
  const usage = (output: number) => ({ total_tokens: 100 + output, input_tokens: 100, output_tokens: output })

  wss.on('connection', (socket, request) => {
    standin.connections.push({ url: request.url ?? '', headers: request.headers })
    let buffer: Buffer[] = []
    let late: Array<Record<string, unknown>> = []
    /** The response waiting (held) for a cancel: one at a time, as on the real API. */
    let active: { id: string, item: Record<string, unknown> } | undefined
    /** The session's turn detection (null: the client commits). */
    let detection: TurnDetection | null = null
    /** Voice-activity detection over the appended audio: ms appended, the 20 ms piece being filled, the turn's state. */
    const vad = { ms: 0, piece: Buffer.alloc(0), speaking: false, silentMs: 0, itemId: '' }

    const speak = (text: string, metadata: unknown, holdAfter = Infinity, dropAfter = Infinity) => {
      const responseId = id('resp')
      const itemId = id('item')
      const item = { id: itemId, type: 'message', role: 'assistant', status: 'in_progress', content: [] as unknown[] }
      send(socket, { type: 'response.created', response: { id: responseId, object: 'realtime.response', status: 'in_progress', output: [], metadata } })
      send(socket, { type: 'response.output_item.added', response_id: responseId, output_index: 0, item })
      const chunks = audioChunks(text)
      const words = text.split(/(?<= )/)
      const at = { response_id: responseId, item_id: itemId, output_index: 0, content_index: 0 }
      for (let i = 0; i < chunks.length; i++) {
        if (i === holdAfter) {
          active = { id: responseId, item }
          return
        }
        const delta = words.slice(Math.floor(i * words.length / chunks.length), Math.floor((i + 1) * words.length / chunks.length)).join('')
        if (delta !== '') send(socket, { type: 'response.output_audio_transcript.delta', ...at, delta })
        send(socket, { type: 'response.output_audio.delta', ...at, delta: chunks[i].toString('base64') })
        if (i + 1 === dropAfter) {
          socket.terminate()
          return
        }
      }
      const done = { ...item, status: 'completed', content: [{ type: 'output_audio', transcript: text }] }
      send(socket, { type: 'response.output_audio.done', ...at })
      send(socket, { type: 'response.output_audio_transcript.done', ...at, transcript: text })
      send(socket, { type: 'response.output_item.done', response_id: responseId, output_index: 0, item: done })
      send(socket, { type: 'response.done', response: { id: responseId, object: 'realtime.response', status: 'completed', output: [done], usage: usage(10 + text.length) } })
    }

    const call = (calls: Array<{ name: string, arguments: string }>, metadata: unknown) => {
      const responseId = id('resp')
      send(socket, { type: 'response.created', response: { id: responseId, object: 'realtime.response', status: 'in_progress', output: [], metadata } })
      const items = calls.map((c, index) => {
        const item = { id: id('item'), type: 'function_call', status: 'completed', call_id: id('call'), name: c.name, arguments: c.arguments }
        send(socket, { type: 'response.output_item.added', response_id: responseId, output_index: index, item: { ...item, status: 'in_progress', arguments: '' } })
        send(socket, { type: 'response.function_call_arguments.done', response_id: responseId, item_id: item.id, output_index: index, call_id: item.call_id, name: c.name, arguments: c.arguments })
        send(socket, { type: 'response.output_item.done', response_id: responseId, output_index: index, item })
        return item
      })
      send(socket, { type: 'response.done', response: { id: responseId, object: 'realtime.response', status: 'completed', output: items, usage: usage(20) } })
    }

    /** Commits the input buffer as a user item (the client's commit, or the turn detection's with its item id). */
    const commit = (itemId = id('item')) => {
      const pcm = bufferToPcm(Buffer.concat(buffer))
      buffer = []
      if (pcm.length < RATE / 10) {
        sendError(socket, 'input_audio_buffer_commit_empty', 'Error committing input audio buffer: buffer too small.')
        return
      }
      standin.commits.push({ seconds: pcm.length / RATE, rms: rms(pcm) })
      send(socket, { type: 'input_audio_buffer.committed', item_id: itemId, previous_item_id: null })
      const transcription = {
        type: 'conversation.item.input_audio_transcription.completed',
        item_id: itemId,
        content_index: 0,
        transcript: standin.transcripts.shift() ?? 'Hello.',
        usage: { type: 'duration', seconds: pcm.length / RATE }
      }
      if (standin.lateTranscripts) late.push(transcription)
      else send(socket, transcription)
    }

    /** A response to response.create (`params` its `response`), or the turn detection's own (none). */
    const respond = (params: { instructions?: string, metadata?: unknown } | undefined) => {
      if (active !== undefined) {
        sendError(socket, 'conversation_already_has_active_response', `Conversation already has an active response in progress: ${active.id}.`)
        return
      }
      // A response with its own instructions is the engine's say(): it reads out their last paragraph.
      const instructions = params?.instructions
      const reply = instructions === undefined ? standin.replies.shift() ?? standin.defaultReply : { text: instructions.split('\n\n').at(-1) ?? '' }
      const metadata = params?.metadata ?? null
      if ('error' in reply) sendError(socket, reply.error.code, reply.error.message)
      else if ('calls' in reply) call(reply.calls, metadata)
      else speak(reply.text, metadata, reply.holdAfter, reply.dropAfter)
      for (const transcription of late) send(socket, transcription)
      late = []
    }

    const cancel = () => {
      if (active === undefined) return false
      const { id: responseId, item } = active
      active = undefined
      send(socket, { type: 'response.done', response: { id: responseId, object: 'realtime.response', status: 'cancelled', output: [{ ...item, status: 'incomplete' }], usage: usage(5) } })
      return true
    }

    /** The turn detection hears appended audio in 20 ms pieces, as the real server's VAD does. */
    const detect = (audio: Buffer) => {
      if (detection === null) return
      const turns = detection
      vad.piece = Buffer.concat([vad.piece, audio])
      const pieceBytes = RATE / 50 * 2
      while (vad.piece.length >= pieceBytes) {
        const loud = rms(bufferToPcm(vad.piece.subarray(0, pieceBytes))) > SPEECH_RMS
        vad.piece = vad.piece.subarray(pieceBytes)
        vad.ms += 20
        if (!vad.speaking && loud) {
          vad.speaking = true
          vad.silentMs = 0
          vad.itemId = id('item')
          send(socket, { type: 'input_audio_buffer.speech_started', audio_start_ms: Math.max(0, vad.ms - 20 - (turns.prefix_padding_ms ?? 300)), item_id: vad.itemId })
          if (turns.interrupt_response !== false) cancel()
        } else if (vad.speaking) {
          vad.silentMs = loud ? 0 : vad.silentMs + 20
          const enough = turns.type === 'semantic_vad' ? SEMANTIC_SILENCE_MS[turns.eagerness ?? 'auto'] : turns.silence_duration_ms ?? 500
          if (vad.silentMs < enough) continue
          vad.speaking = false
          send(socket, { type: 'input_audio_buffer.speech_stopped', audio_end_ms: vad.ms, item_id: vad.itemId })
          commit(vad.itemId)
          if (turns.create_response !== false) respond(undefined)
        }
      }
    }

    socket.on('message', (data) => {
      const event = JSON.parse(data.toString()) as ClientEvent
      if (event.type === 'input_audio_buffer.append') {
        const audio = Buffer.from(String(event.audio), 'base64')
        standin.events.push({ type: event.type, bytes: audio.length })
        buffer.push(audio)
        detect(audio)
        return
      }
      standin.events.push(event)
      switch (event.type) {
        case 'session.update': {
          const session = event.session as { audio?: { input?: { turn_detection?: TurnDetection | null } } }
          if (session.audio?.input?.turn_detection !== undefined) detection = session.audio.input.turn_detection
          if (!standin.silent) send(socket, { type: 'session.updated', session: event.session })
          return
        }
        case 'input_audio_buffer.commit':
          commit()
          return
        case 'input_audio_buffer.clear':
          buffer = []
          send(socket, { type: 'input_audio_buffer.cleared' })
          return
        case 'conversation.item.delete':
          standin.deleted.push(String(event.item_id))
          send(socket, { type: 'conversation.item.deleted', item_id: event.item_id })
          return
        case 'response.create':
          respond(event.response as { instructions?: string, metadata?: unknown } | undefined)
          return
        case 'response.cancel':
          if (!cancel()) sendError(socket, 'response_cancel_not_active', 'Cancellation failed: no active response found')
      }
    })
    send(socket, { type: 'session.created', session: { id: id('sess'), object: 'realtime.session', type: 'realtime', model: new URL(request.url ?? '/', 'ws://standin').searchParams.get('model') } })
  })

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  standin.url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/v1/realtime`
  t.teardown(async () => {
    for (const client of wss.clients) client.terminate()
    wss.close()
    await new Promise((resolve) => server.close(resolve))
  })
  return standin
}
