import type { Logger } from 'pino'
import WebSocket from 'ws'
import type { VoiceConfig } from '../../../config.ts'
import { SAMPLE_RATE, bufferToPcm, pcmToBuffer, resample } from '../audio.ts'
import type { Engine, EngineEvent, EngineFactory, EngineSetup } from './types.ts'

// The OpenAI Realtime API (GA protocol) over one WebSocket per call. Our own turn detection decides when the
// caller has spoken (turn_detection: null): a turn is input_audio_buffer.commit + response.create.

/** The provider's audio rate both ways (PCM16 mono); the core's 16 kHz is converted at this edge. */
const PROVIDER_RATE = 24_000
/** The API refuses to commit less than 100 ms of audio. */
const MIN_COMMIT_SAMPLES = SAMPLE_RATE / 10
/**
 * After a barge-in the input buffer is cleared of the agent's echo, but the caller's first words are in it
 * already (the session detects speech only after hearing some): the last 500 ms are appended again.
 */
const PREROLL_FRAMES = 25
/** Caller frames per input_audio_buffer.append (100 ms): a fifth of the messages, no added delay at a turn's end. */
const APPEND_FRAMES = 5
/** The answer to response.cancel when the response ended already: a race, not a failure. */
const CANCEL_RACE = 'response_cancel_not_active'

interface OutputItem { type: string, call_id?: string, name?: string, arguments?: string }

/** The server events this engine reads (others, such as conversation.item.added, are ignored). */
type ServerEvent =
  | { type: 'session.created' | 'session.updated' }
  | { type: 'response.created', response: { id: string } }
  | { type: 'response.output_audio.delta', response_id: string, item_id?: string, delta: string }
  | { type: 'response.output_audio_transcript.delta', response_id: string, delta: string }
  | {
    type: 'response.done'
    response: {
      id: string
      status?: string
      status_details?: { error?: { message?: string } } | null
      output?: OutputItem[]
      usage?: { input_tokens?: number, output_tokens?: number } | null
    }
  }
  | { type: 'conversation.item.input_audio_transcription.completed', transcript: string }
  | { type: 'conversation.item.input_audio_transcription.failed' }
  | { type: 'error', error: { message?: string, code?: string | null } }

/** One response.create of ours, from sending it to its response.done. */
interface Response {
  /** `say`: the model reads out `said`, which is what we report. */
  kind: 'answer' | 'say'
  said: string
  body: Record<string, unknown>
  /** Sent to the server (one response at a time runs there; later ones wait here). */
  sent: boolean
  /** The server's id, from response.created. */
  id: string | undefined
  /** The assistant item its audio belongs to (for conversation.item.truncate after a barge-in). */
  itemId: string | undefined
  cancelled: boolean
  transcript: string
  /** Audio samples at 24 kHz received, for speech seconds. */
  samples: number
  /** A PCM16 sample split across two deltas, and the 0–2 samples that wait for a whole 3-sample group. */
  oddByte: number | undefined
  rest: Int16Array
}

function languageOf (setup: EngineSetup): string | undefined {
  const languages = setup.sttLanguages.length > 0 ? setup.sttLanguages : [setup.language]
  // With several languages the recogniser detects which one is spoken.
  return languages.length === 1 ? languages[0].split('-')[0].toLowerCase() : undefined
}

/**
 * `transcriptionModel`: the recogniser of the caller's turns, run by the Realtime API itself
 * (REALTIME_TRANSCRIPTION_MODEL; not STT_MODEL, which names the cascade's recogniser); undefined: none.
 */
function sessionOf (setup: EngineSetup, withVoice: boolean, transcriptionModel: string | undefined): Record<string, unknown> {
  const format = { type: 'audio/pcm', rate: PROVIDER_RATE }
  const language = languageOf(setup)
  const transcription = transcriptionModel === undefined ? null : { model: transcriptionModel, ...(language === undefined ? {} : { language }) }
  return {
    type: 'realtime',
    output_modalities: ['audio'],
    instructions: setup.instructions,
    audio: {
      input: { format, transcription, turn_detection: null },
      output: { format, ...(withVoice ? { voice: setup.voice } : {}) }
    },
    tools: setup.tools.map((tool) => ({ type: 'function', name: tool.name, description: tool.description, parameters: tool.parameters })),
    tool_choice: 'auto',
    max_output_tokens: setup.maxTokens ?? 'inf'
  }
}

export function realtimeEngine (voice: VoiceConfig): EngineFactory {
  const { url, apiKey, model, auth, transcriptionModel } = voice.realtime
  const timeoutMs = voice.providerTimeoutMs
  // Provider messages (and ws errors) go to the log and the session: never with the key in them.
  const redact = (message: string) => apiKey === undefined || apiKey === '' ? message : message.replaceAll(apiKey, '[key]')

  return (onEvent, log: Logger): Engine => {
    let socket: WebSocket | undefined
    let ready = false
    /** close() was called or the engine failed: nothing more is sent or emitted. */
    let ended = false
    let setup: EngineSetup | undefined
    /** The session's voice can no longer change once the model has spoken (the API refuses). */
    let voiceLocked = false
    /** Rejects a start still under way. */
    let abortStart: ((message: string) => void) | undefined

    const responses: Response[] = []
    /** Tool calls of the current turn still to be answered; the model continues when none is left. */
    const awaitedCalls = new Set<string>()
    /** What the agent said so far in the current turn (a turn with tool calls spans several responses). */
    let turnText = ''
    /** Samples (16 kHz) appended since the last commit or clear. */
    let uncommitted = 0
    const recentFrames: Buffer[] = []
    /** Caller audio not yet appended: sent APPEND_FRAMES at a time (fewer, larger messages), and at a turn's end. */
    let unsent: Buffer[] = []
    const flush = () => {
      if (unsent.length === 0) return
      send({ type: 'input_audio_buffer.append', audio: Buffer.concat(unsent).toString('base64') })
      unsent = []
    }
    /**
     * Committed turns whose transcription has not arrived. Until it does, the agent's text events wait, so
     * that the session sees the caller's words before the answer to them (audio is never held).
     */
    let transcriptions = 0
    let held: EngineEvent[] = []
    let watchdog: NodeJS.Timeout | undefined
    let transcriptionTimer: NodeJS.Timeout | undefined

    const emit = (event: EngineEvent) => { if (!ended) onEvent(event) }
    const emitInOrder = (event: EngineEvent) => { if (transcriptions > 0) held.push(event); else emit(event) }
    const send = (event: Record<string, unknown>) => {
      if (!ended && socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(event))
    }

    const stop = () => {
      ended = true
      clearTimeout(watchdog)
      clearTimeout(transcriptionTimer)
      socket?.removeAllListeners()
      // A late ws error after this must not be unhandled.
      socket?.on('error', () => {})
    }
    const fail = (message: string) => {
      if (ended) return
      const text = redact(message)
      log.warn({ err: text }, 'realtime engine failed')
      emit({ type: 'error', message: text })
      stop()
      socket?.terminate()
    }

    /** While a response runs, the server must keep talking; silence for providerTimeoutMs fails the call. */
    const watch = () => {
      clearTimeout(watchdog)
      watchdog = !ended && responses.some((r) => r.sent)
        ? setTimeout(() => fail(`the realtime provider did not answer within ${timeoutMs} ms`), timeoutMs)
        : undefined
    }

    const transcribed = (text: string) => {
      if (transcriptions === 0) return
      transcriptions--
      clearTimeout(transcriptionTimer)
      emit({ type: 'user_text', text })
      if (transcriptions > 0) {
        transcriptionTimer = setTimeout(transcriptionLate, timeoutMs)
        return
      }
      const events = held
      held = []
      for (const event of events) emit(event)
    }
    // A compatible server that does not transcribe must not stall the agent's text forever.
    const transcriptionLate = () => {
      log.warn('realtime provider sent no transcription of the caller\'s turn')
      transcribed('')
    }

    const pump = () => {
      const next = responses[0]
      if (next === undefined || next.sent) return
      next.sent = true
      send({ type: 'response.create', ...(Object.keys(next.body).length > 0 ? { response: next.body } : {}) })
      watch()
    }
    const respond = (kind: Response['kind'], said = '', body: Record<string, unknown> = {}) => {
      responses.push({ kind, said, body, sent: false, id: undefined, itemId: undefined, cancelled: false, transcript: '', samples: 0, oddByte: undefined, rest: new Int16Array(0) })
      pump()
    }

    /** 24 kHz bytes of one delta as 16 kHz samples, resampled in whole 3→2 groups so that chunks join seamlessly. */
    const decode = (response: Response, base64: string): Int16Array => {
      let bytes = Buffer.from(base64, 'base64')
      if (response.oddByte !== undefined) bytes = Buffer.concat([Buffer.of(response.oddByte), bytes])
      response.oddByte = bytes.length % 2 === 1 ? bytes[bytes.length - 1] : undefined
      const fresh = bufferToPcm(bytes)
      response.samples += fresh.length
      const samples = new Int16Array(response.rest.length + fresh.length)
      samples.set(response.rest)
      samples.set(fresh, response.rest.length)
      const whole = samples.length - samples.length % 3
      response.rest = samples.slice(whole)
      return resample(samples.subarray(0, whole), PROVIDER_RATE, SAMPLE_RATE)
    }

    const finish = (response: Response, done: Extract<ServerEvent, { type: 'response.done' }>['response']) => {
      const usage = done.usage
      // Tokens of a cancelled response were used all the same.
      if (usage != null) emit({ type: 'usage', model, input: usage.input_tokens ?? 0, output: usage.output_tokens ?? 0 })
      if (response.cancelled) return
      if (response.rest.length > 0) emit({ type: 'audio', pcm: resample(response.rest, PROVIDER_RATE, SAMPLE_RATE) })
      if (response.samples > 0) emit({ type: 'speech', synthesisedSeconds: response.samples / PROVIDER_RATE })
      if (done.status === 'failed') {
        fail(`realtime response failed: ${done.status_details?.error?.message ?? 'no reason given'}`)
        return
      }
      const spoken = response.kind === 'say' ? response.said : response.transcript
      turnText = [turnText, spoken].filter((part) => part !== '').join(' ')
      const calls = response.kind === 'answer' ? (done.output ?? []).filter((item) => item.type === 'function_call') : []
      if (calls.length === 0) {
        emitInOrder({ type: 'response_done', text: turnText })
        return
      }
      for (const call of calls) {
        awaitedCalls.add(call.call_id ?? '')
        emitInOrder({ type: 'tool_call', id: call.call_id ?? '', name: call.name ?? '', arguments: call.arguments ?? '' })
      }
    }

    const receive = (event: ServerEvent) => {
      const byId = (id: string) => responses.find((r) => r.id === id)
      switch (event.type) {
        case 'response.created': {
          const response = responses.find((r) => r.sent && r.id === undefined)
          if (response === undefined) return
          response.id = event.response.id
          // Cancelled before the server had it: cancel it now that it has an id.
          if (response.cancelled) send({ type: 'response.cancel', response_id: response.id })
          else if (response.kind === 'say') emitInOrder({ type: 'agent_text', delta: response.said })
          return
        }
        case 'response.output_audio.delta': {
          const response = byId(event.response_id)
          if (response === undefined || response.cancelled) return
          voiceLocked = true
          response.itemId ??= event.item_id
          const pcm = decode(response, event.delta)
          if (pcm.length > 0) emit({ type: 'audio', pcm })
          return
        }
        case 'response.output_audio_transcript.delta': {
          const response = byId(event.response_id)
          if (response === undefined || response.cancelled || response.kind === 'say') return
          response.transcript += event.delta
          emitInOrder({ type: 'agent_text', delta: event.delta })
          return
        }
        case 'response.done': {
          const index = responses.findIndex((r) => r.id === event.response.id)
          if (index === -1) return
          const [response] = responses.splice(index, 1)
          finish(response, event.response)
          pump()
          return
        }
        case 'conversation.item.input_audio_transcription.completed':
          transcribed(event.transcript)
          return
        case 'conversation.item.input_audio_transcription.failed':
          transcribed('')
          return
        case 'error':
          if (event.error.code === CANCEL_RACE) return
          fail(`realtime provider error: ${event.error.message ?? event.error.code ?? 'unknown'}`)
      }
    }

    return {
      start: (given) => new Promise<void>((resolve, reject) => {
        setup = given
        const address = new URL(url)
        address.searchParams.set('model', model)
        const headers: Record<string, string> = {}
        if (apiKey !== undefined && apiKey !== '') {
          if (auth === 'bearer') headers.Authorization = `Bearer ${apiKey}`
          else headers['api-key'] = apiKey
        }
        const ws = new WebSocket(address, { headers, handshakeTimeout: timeoutMs })
        socket = ws
        const refuse = (message: string) => {
          if (ready || ended) return
          clearTimeout(timer)
          stop()
          ws.terminate()
          reject(new Error(redact(message)))
        }
        abortStart = refuse
        const timer = setTimeout(() => refuse(`the realtime provider did not answer within ${timeoutMs} ms`), timeoutMs)
        ws.on('open', () => send({ type: 'session.update', session: sessionOf(given, true, transcriptionModel) }))
        ws.on('message', (data) => {
          let event: ServerEvent
          try {
            event = JSON.parse(data.toString()) as ServerEvent
          } catch {
            fail('the realtime provider sent a message that is not JSON')
            return
          }
          if (!ready) {
            if (event.type === 'error') refuse(`realtime provider error: ${event.error.message ?? event.error.code ?? 'unknown'}`)
            if (event.type !== 'session.updated') return
            ready = true
            clearTimeout(timer)
            for (const item of given.history ?? []) {
              const content = [{ type: item.role === 'user' ? 'input_text' : 'output_text', text: item.text }]
              send({ type: 'conversation.item.create', item: { type: 'message', role: item.role, content } })
            }
            resolve()
            return
          }
          receive(event)
          watch()
        })
        ws.on('error', (err) => {
          if (ready) fail(`realtime connection error: ${err.message}`)
          else refuse(`cannot connect to the realtime provider: ${err.message}`)
        })
        ws.on('close', (code) => {
          if (ready) fail(`the realtime provider closed the connection (${code})`)
          else refuse(`the realtime provider closed the connection (${code})`)
        })
      }),

      audio: (frame) => {
        if (!ready || ended) return
        const bytes = pcmToBuffer(resample(frame, SAMPLE_RATE, PROVIDER_RATE))
        recentFrames.push(bytes)
        if (recentFrames.length > PREROLL_FRAMES) recentFrames.shift()
        uncommitted += frame.length
        unsent.push(bytes)
        if (unsent.length >= APPEND_FRAMES) flush()
      },

      endOfTurn: () => {
        if (!ready || ended) return
        turnText = ''
        if (uncommitted < MIN_COMMIT_SAMPLES) {
          emit({ type: 'user_text', text: '' })
        } else {
          flush()
          send({ type: 'input_audio_buffer.commit' })
          emit({ type: 'speech', recognisedSeconds: uncommitted / SAMPLE_RATE })
          uncommitted = 0
          recentFrames.length = 0
          // Without input transcription no words of the caller come, and the agent's need not wait for them.
          if (transcriptionModel !== undefined) {
            transcriptions++
            if (transcriptions === 1) transcriptionTimer = setTimeout(transcriptionLate, timeoutMs)
          }
        }
        respond('answer')
      },

      userText: (text) => {
        if (!ready || ended) return
        turnText = ''
        send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } })
        respond('answer')
      },

      say: (text) => {
        if (!ready || ended) return
        turnText = ''
        respond('say', text, {
          instructions: `Say exactly the following text, word for word, and nothing else:\n\n${text}`,
          tool_choice: 'none'
        })
      },

      toolResult: (id, output) => {
        if (!ready || ended) return
        // Sent even after a cancel, so that the conversation holds an output for every call.
        send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: id, output } })
        if (awaitedCalls.delete(id) && awaitedCalls.size === 0) respond('answer')
      },

      cancel: (heardMs) => {
        if (!ready || ended) return
        const running = responses.find((r) => r.sent)
        // The model forgets what the caller did not hear of its answer.
        if (running?.itemId !== undefined && heardMs !== undefined) {
          send({ type: 'conversation.item.truncate', item_id: running.itemId, content_index: 0, audio_end_ms: Math.max(0, Math.round(heardMs)) })
        }
        // Responses not yet sent are dropped; the running one is cancelled and its remaining events ignored.
        responses.splice(0, responses.length, ...(running === undefined ? [] : [running]))
        if (running !== undefined && !running.cancelled) {
          running.cancelled = true
          send({ type: 'response.cancel', ...(running.id === undefined ? {} : { response_id: running.id }) })
        }
        awaitedCalls.clear()
        turnText = ''
        held = held.filter((event) => event.type === 'agent_text')
        send({ type: 'input_audio_buffer.clear' })
        unsent = [...recentFrames]
        flush()
        uncommitted = recentFrames.reduce((sum, bytes) => sum + bytes.length / 2, 0) * SAMPLE_RATE / PROVIDER_RATE
      },

      update: (given) => {
        if (!ready || ended) return
        if (voiceLocked && given.voice !== setup?.voice) log.warn({ voice: given.voice }, 'the realtime session keeps its voice: it cannot change once the model has spoken')
        setup = voiceLocked ? { ...given, voice: setup?.voice ?? given.voice } : given
        send({ type: 'session.update', session: sessionOf(setup, !voiceLocked, transcriptionModel) })
      },

      close: () => {
        if (ended) return
        abortStart?.('the engine was closed before it connected')
        stop()
        socket?.close()
      }
    }
  }
}
