import { performance } from 'node:perf_hooks'
import type { Logger } from 'pino'
import WebSocket from 'ws'
import type { VoiceConfig } from '../../../config.ts'
import { SAMPLE_RATE, bufferToPcm, pcmToBuffer, resample } from '../audio.ts'
import { sttLanguage, sttProvider } from '../stt/index.ts'
import type { SpeechToText } from '../stt/types.ts'
import type { Engine, EngineEvent, EngineFactory, EngineSetup } from './types.ts'

// The OpenAI Realtime API (GA protocol) over one WebSocket per call. By default our own turn detection decides
// when the caller has spoken (turn_detection: null): a turn is input_audio_buffer.commit + response.create, and a
// turn whose answer has not started when the next one ends is joined with it (docs/voice.md, "Turn detection").
// With the LLM configuration's server_vad or semantic_vad the provider detects and answers turns itself; its
// speech events become the session's (caller_speech), so that barge-in still clears playout and truncates.

/** The provider's audio rate both ways (PCM16 mono); the core's 16 kHz is converted at this edge. */
const PROVIDER_RATE = 24_000
/** The API refuses to commit less than 100 ms of audio. */
const MIN_COMMIT_SAMPLES = SAMPLE_RATE / 10
/**
 * After a barge-in the input buffer is cleared of the agent's echo, but the caller's first words are in it
 * already (the session detects speech only after hearing some): the last 500 ms are appended again.
 */
const PREROLL_FRAMES = 25
/**
 * The caller audio kept of the input buffer and of a turn not yet answered, so that a turn can be joined with the
 * next one (30 s: longer than an utterance; what is older is the silence before it).
 */
const KEEP_FRAMES = 1500
/** Caller frames per input_audio_buffer.append (100 ms): a fifth of the messages, no added delay at a turn's end. */
const APPEND_FRAMES = 5
/** The answer to response.cancel when the response ended already: a race, not a failure. */
const CANCEL_RACE = 'response_cancel_not_active'
/** The answer to our response.create while the provider's own (turn detection) response runs: ours waits, then goes. */
const BUSY = 'conversation_already_has_active_response'
/** Our responses carry this metadata with the provider's turn detection, to tell them from the provider's own. */
const OURS = { switchboard: 'session' }
/** event_id prefix of a join's conversation.item.delete: should the provider refuse it, the call goes on. */
const JOIN_EVENT = 'switchboard_join_'

interface OutputItem { type: string, call_id?: string, name?: string, arguments?: string }

/** The server events this engine reads (others, such as conversation.item.added, are ignored). */
type ServerEvent =
  | { type: 'session.created' | 'session.updated' }
  | { type: 'response.created', response: { id: string, metadata?: Record<string, string> | null } }
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
  | { type: 'conversation.item.input_audio_transcription.completed', item_id?: string, transcript: string }
  | { type: 'conversation.item.input_audio_transcription.failed', item_id?: string }
  | { type: 'input_audio_buffer.committed', item_id: string }
  | { type: 'input_audio_buffer.speech_started', audio_start_ms?: number }
  | { type: 'input_audio_buffer.speech_stopped', audio_end_ms?: number }
  | { type: 'error', error: { message?: string, code?: string | null, event_id?: string | null } }

/** One response, from our response.create (or the provider's response.created) to its response.done. */
interface Response {
  /** `say`: the model reads out `said`, which is what we report. */
  kind: 'answer' | 'say'
  /** It starts what the agent says in a turn (not the model's continuation after tool results). */
  fresh: boolean
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
  /** When its response.create went (performance.now()), until its first audio gives the model's share of the turn. */
  sentAt: number | undefined
}

/** A committed caller turn whose user_text has not been emitted. */
interface Turn {
  /** The user item, from input_audio_buffer.committed. */
  itemId: string | undefined
  /** Its audio as appended (24 kHz PCM16, 20 ms each) and its length at 16 kHz: what a join appends again. */
  frames: Buffer[]
  samples: number
  /** Its transcription, once it came. */
  text: string | undefined
  /**
   * The turn stands: the agent has answered something since (or the provider detected it). Until then the next
   * turn may join it, so its user_text waits (the caller's words reach the session before any answer all the same).
   */
  settled: boolean
  /** Our response.create that answers it. */
  answer: Response | undefined
  /** Joined with the next turn: its item is deleted and its transcription ignored. */
  joined: boolean
}

/** The provider's turn detection (audio.input.turn_detection), or null: ours. */
function turnDetectionOf (setup: EngineSetup): Record<string, unknown> | null {
  const { type, ...settings } = setup.turnDetection ?? { type: 'switchboard' }
  if (type === 'switchboard') return null
  // Barge-in as the session's: the provider cancels its answer when the caller speaks only if the caller may interrupt.
  return { type, ...settings, create_response: true, interrupt_response: setup.interruptible ?? true }
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
      input: { format, transcription, turn_detection: turnDetectionOf(setup) },
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
    /** The provider detects the caller's turns and answers them (server_vad, semantic_vad). */
    const providerTurns = () => turnDetectionOf(setup!) !== null

    /** Ours first, then the provider's: the running one (sent) comes before those that wait. */
    const responses: Response[] = []
    /** Tool calls of the current turn still to be answered; the model continues when none is left. */
    const awaitedCalls = new Set<string>()
    /** What the agent said so far in the current turn (a turn with tool calls spans several responses). */
    let turnText = ''
    /** Samples (16 kHz) appended since the last commit or clear. */
    let uncommitted = 0
    /** The provider's input buffer as appended since the last commit or clear, at most KEEP_FRAMES (our turns only). */
    let buffered: Buffer[] = []
    /** Caller audio not yet appended: sent APPEND_FRAMES at a time (fewer, larger messages), and at a turn's end. */
    let unsent: Buffer[] = []
    const flush = () => {
      if (unsent.length === 0) return
      send({ type: 'input_audio_buffer.append', audio: Buffer.concat(unsent).toString('base64') })
      unsent = []
    }
    /**
     * Committed turns whose user_text has not been emitted, oldest first. Until it is, the agent's text events
     * wait, so that the session sees the caller's words before the answer to them (audio is never held).
     */
    const turns: Turn[] = []
    /** Our commits whose input_audio_buffer.committed has not come, in order (it names their item). */
    const committing: Turn[] = []
    let held: EngineEvent[] = []
    let joins = 0
    /** The latest response's spoken audio, which a barge-in truncates to what the caller heard (it may have ended already). */
    let spoken: Response | undefined
    /** Where the provider heard the caller's speech start (ms of input audio), for the seconds recognised. */
    let speechStartMs: number | undefined
    let watchdog: NodeJS.Timeout | undefined
    let transcriptionTimer: NodeJS.Timeout | undefined
    /** The turn transcriptionTimer waits for. */
    let timed: Turn | undefined

    const emit = (event: EngineEvent) => { if (!ended) onEvent(event) }
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

    /** Emits the user_text of the turns that stand and are transcribed, in order; then the agent's events they held. */
    const release = () => {
      while (turns.length > 0 && turns[0].settled && turns[0].text !== undefined) {
        const text = turns.shift()!.text!
        // No words without transcription; an empty user_text would tell the session that no answer comes.
        if (text !== '' || transcriptionModel !== undefined) emit({ type: 'user_text', text })
      }
      const awaited = turns[0]?.text === undefined ? turns[0] : undefined
      if (awaited !== timed) {
        clearTimeout(transcriptionTimer)
        timed = awaited
        // A compatible server that does not transcribe must not stall the agent's text forever.
        if (awaited !== undefined) transcriptionTimer = setTimeout(() => transcribed(awaited, '', true), timeoutMs)
      }
      if (turns.length > 0 || held.length === 0) return
      const events = held
      held = []
      for (const event of events) emit(event)
    }
    /** The agent answers: the caller's turns so far stand (none can be joined any more). */
    const settle = () => {
      if (!turns.some((turn) => !turn.settled)) return
      for (const turn of turns) turn.settled = true
      release()
    }
    const transcribed = (turn: Turn | undefined, text: string, late = false) => {
      if (turn === undefined || turn.text !== undefined) return
      if (late) log.warn('realtime provider sent no transcription of the caller\'s turn')
      turn.text = text
      release()
    }
    /** The turn a transcription event names; a joined turn's is no longer awaited. */
    const turnOf = (itemId: string | undefined) => itemId === undefined
      ? turns.find((turn) => turn.text === undefined)
      : turns.find((turn) => turn.itemId === itemId)
    /** The agent's events of an answer: they follow the caller's words. */
    const emitInOrder = (event: EngineEvent) => {
      settle()
      if (turns.length > 0) held.push(event)
      else emit(event)
    }

    const pump = () => {
      if (responses.some((r) => r.sent)) return
      const next = responses.find((r) => !r.sent)
      if (next === undefined) return
      next.sent = true
      next.sentAt = performance.now()
      // What the caller hears next is the new response's: the last one's audio, heard whole, is no longer cut.
      if (next.fresh) spoken = undefined
      const body = providerTurns() ? { ...next.body, metadata: OURS } : next.body
      send({ type: 'response.create', ...(Object.keys(body).length > 0 ? { response: body } : {}) })
      watch()
    }
    const newResponse = (kind: Response['kind'], fresh: boolean, said = '', body: Record<string, unknown> = {}): Response =>
      ({ kind, fresh, said, body, sent: false, id: undefined, itemId: undefined, cancelled: false, transcript: '', samples: 0, oddByte: undefined, rest: new Int16Array(0), sentAt: undefined })
    const respond = (...args: Parameters<typeof newResponse>): Response => {
      const response = newResponse(...args)
      responses.push(response)
      pump()
      return response
    }
    /** Stops a response: the server's is cancelled (its remaining events ignored), one not yet sent is dropped. */
    const drop = (response: Response) => {
      if (!response.sent) {
        responses.splice(responses.indexOf(response), 1)
        return
      }
      if (response.cancelled) return
      response.cancelled = true
      send({ type: 'response.cancel', ...(response.id === undefined ? {} : { response_id: response.id }) })
    }

    /** The caller went on before the answer to their last turn started: that turn and this one become one. */
    const join = (turn: Turn) => {
      turns.splice(turns.indexOf(turn), 1)
      turn.joined = true
      // Not known yet: deleted when input_audio_buffer.committed names it.
      if (turn.itemId !== undefined) send({ type: 'conversation.item.delete', event_id: `${JOIN_EVENT}${++joins}`, item_id: turn.itemId })
      if (turn.answer !== undefined && responses.includes(turn.answer)) drop(turn.answer)
      // The input buffer holds what followed the turn: it is sent again after the turn's own audio.
      unsent = []
      send({ type: 'input_audio_buffer.clear' })
      buffered = [...turn.frames, ...buffered]
      uncommitted += turn.samples
      unsent = [...buffered]
      release()
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
      const words = response.kind === 'say' ? response.said : response.transcript
      turnText = [turnText, words].filter((part) => part !== '').join(' ')
      const calls = response.kind === 'answer' ? (done.output ?? []).filter((item) => item.type === 'function_call') : []
      if (calls.length === 0) {
        emitInOrder({ type: 'response_done', text: turnText })
        // A line said while tools run (hold) is its own utterance: the answer that follows starts afresh.
        if (response.kind === 'say' && awaitedCalls.size > 0) turnText = ''
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
          // With the provider's turn detection, a response without our metadata is the provider's answer to a turn.
          const provider = providerTurns() && event.response.metadata?.switchboard !== OURS.switchboard
          const response = provider ? { ...newResponse('answer', true), sent: true } : responses.find((r) => r.sent && r.id === undefined)
          if (response === undefined) return
          // Before ours that wait: it runs now.
          if (provider) {
            responses.unshift(response)
            spoken = undefined
          }
          response.id = event.response.id
          if (response.fresh) turnText = ''
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
          spoken = response
          settle()
          if (response.sentAt !== undefined) {
            // The model hears and speaks itself: its share is the whole wait, recognition and speech have none.
            emit({ type: 'stages', transcriptionMs: null, llmMs: Math.round(performance.now() - response.sentAt), ttsMs: null })
            response.sentAt = undefined
          }
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
        case 'input_audio_buffer.committed': {
          const turn = committing.shift()
          if (turn === undefined) {
            // The provider's turn detection committed: its turn stands (the provider answers it).
            if (providerTurns()) turns.push({ itemId: event.item_id, frames: [], samples: 0, text: undefined, settled: true, answer: undefined, joined: false })
            release()
          } else if (turn.joined) send({ type: 'conversation.item.delete', event_id: `${JOIN_EVENT}${++joins}`, item_id: event.item_id })
          else turn.itemId = event.item_id
          return
        }
        case 'input_audio_buffer.speech_started':
          speechStartMs = event.audio_start_ms
          emit({ type: 'caller_speech', speaking: true })
          return
        case 'input_audio_buffer.speech_stopped':
          if (speechStartMs !== undefined && event.audio_end_ms !== undefined) emit({ type: 'speech', recognisedSeconds: Math.max(0, event.audio_end_ms - speechStartMs) / 1000 })
          speechStartMs = undefined
          emit({ type: 'caller_speech', speaking: false })
          return
        case 'conversation.item.input_audio_transcription.completed':
          transcribed(turnOf(event.item_id), event.transcript)
          return
        case 'conversation.item.input_audio_transcription.failed':
          transcribed(turnOf(event.item_id), '')
          return
        case 'error': {
          if (event.error.code === CANCEL_RACE) return
          if (event.error.event_id?.startsWith(JOIN_EVENT) === true) {
            // The first part of a joined turn stays in the model's conversation: a repetition, not a failure.
            log.warn({ reason: event.error.message }, 'realtime provider kept the first part of a joined turn')
            return
          }
          const ours = event.error.code === BUSY ? responses.find((r) => r.sent && r.id === undefined) : undefined
          if (ours !== undefined) {
            // The provider's own answer got there first: ours goes after it (or not at all, if cancelled meanwhile).
            if (ours.cancelled) responses.splice(responses.indexOf(ours), 1)
            else ours.sent = false
            return
          }
          fail(`realtime provider error: ${event.error.message ?? event.error.code ?? 'unknown'}`)
        }
      }
    }

    /**
     * With our turn detection and a streaming recogniser configured (STT_PROVIDER), the caller's words while they
     * speak come from it, for the end of turn and for telling a backchannel from a barge-in; the model hears the
     * audio itself and its own transcription is the turn's transcript. Without it, or should it fail, turns are
     * taken on silence alone and the call goes on.
     */
    let words: SpeechToText | undefined
    const listen = async (given: EngineSetup) => {
      if (voice.stt.provider === 'batch' || providerTurns()) return
      const stt = sttProvider(voice)((event) => {
        if (ended || words !== stt) return
        if (event.type === 'partial') emit({ type: 'user_partial', text: event.text, final: event.final, startMs: event.startMs, endMs: event.endMs })
        else if (event.type === 'error') {
          log.warn({ reason: event.message }, 'the streaming recogniser failed; turns are taken on silence alone')
          words = undefined
          stt.close()
          emit({ type: 'words', streaming: false })
        }
      }, log)
      try {
        await stt.start({ language: sttLanguage(given) })
        words = stt
        emit({ type: 'words', streaming: true })
      } catch (err) {
        log.warn({ err }, 'the streaming recogniser could not connect; turns are taken on silence alone')
      }
    }

    const connect = (given: EngineSetup) => new Promise<void>((resolve, reject) => {
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
    })

    return {
      start: async (given) => {
        await connect(given)
        await listen(given)
      },

      audio: (frame) => {
        if (!ready || ended) return
        words?.audio(frame)
        const bytes = pcmToBuffer(resample(frame, SAMPLE_RATE, PROVIDER_RATE))
        unsent.push(bytes)
        if (unsent.length >= APPEND_FRAMES) flush()
        if (providerTurns()) return
        buffered.push(bytes)
        // Trimmed in batches: one copy per 5 s rather than a shift per frame.
        if (buffered.length > KEEP_FRAMES + 250) buffered = buffered.slice(-KEEP_FRAMES)
        uncommitted += frame.length
      },

      endOfTurn: () => {
        if (!ready || ended || providerTurns()) return
        // The recogniser's words of the turn end here; the model's own transcription is the turn's transcript.
        words?.endOfTurn().catch(() => {})
        const last = turns.at(-1)
        if (last !== undefined && !last.settled) join(last)
        if (uncommitted < MIN_COMMIT_SAMPLES) {
          emit({ type: 'user_text', text: '' })
          respond('answer', true)
          return
        }
        flush()
        send({ type: 'input_audio_buffer.commit' })
        emit({ type: 'speech', recognisedSeconds: uncommitted / SAMPLE_RATE })
        // Without input transcription (REALTIME_TRANSCRIPTION_MODEL=none) no words of the caller come: the turn waits for none.
        const turn: Turn = { itemId: undefined, frames: buffered.slice(-KEEP_FRAMES), samples: uncommitted, text: transcriptionModel === undefined ? '' : undefined, settled: false, answer: undefined, joined: false }
        turns.push(turn)
        committing.push(turn)
        uncommitted = 0
        buffered = []
        release()
        turn.answer = respond('answer', true)
      },

      forget: () => {
        if (!ready || ended || providerTurns()) return
        words?.forget()
        send({ type: 'input_audio_buffer.clear' })
        unsent = []
        buffered = []
        uncommitted = 0
      },

      userText: (text) => {
        if (!ready || ended) return
        settle()
        send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } })
        respond('answer', true)
      },

      say: (text) => {
        if (!ready || ended) return
        respond('say', true, text, {
          instructions: `Say exactly the following text, word for word, and nothing else:\n\n${text}`,
          tool_choice: 'none'
        })
      },

      hold: (text) => {
        if (!ready || ended || awaitedCalls.size === 0) return
        respond('say', false, text, { instructions: `Say exactly the following text, word for word, and nothing else:\n\n${text}`, tool_choice: 'none' })
      },

      toolResult: (id, output) => {
        if (!ready || ended) return
        // Sent even after a cancel, so that the conversation holds an output for every call.
        send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: id, output } })
        if (awaitedCalls.delete(id) && awaitedCalls.size === 0) respond('answer', false)
      },

      cancel: (heardMs) => {
        if (!ready || ended) return
        const running = responses.find((r) => r.sent)
        words?.rejoin()
        // The model forgets what the caller did not hear of its answer (the provider refuses an end past the audio).
        const audioMs = spoken === undefined ? 0 : spoken.samples * 1000 / PROVIDER_RATE
        if (spoken?.itemId !== undefined && heardMs !== undefined && heardMs < audioMs) {
          send({ type: 'conversation.item.truncate', item_id: spoken.itemId, content_index: 0, audio_end_ms: Math.max(0, Math.round(heardMs)) })
        }
        spoken = undefined
        // Responses not yet sent are dropped; the running one is cancelled and its remaining events ignored.
        responses.splice(0, responses.length, ...(running === undefined ? [] : [running]))
        if (running !== undefined) drop(running)
        awaitedCalls.clear()
        turnText = ''
        held = held.filter((event) => event.type === 'agent_text')
        // The provider's turn detection holds the caller's words in its buffer: it stays as it is.
        if (providerTurns()) return
        send({ type: 'input_audio_buffer.clear' })
        unsent = buffered.slice(-PREROLL_FRAMES)
        buffered = [...unsent]
        flush()
        uncommitted = buffered.reduce((sum, bytes) => sum + bytes.length / 2, 0) * SAMPLE_RATE / PROVIDER_RATE
      },

      update: (given) => {
        if (!ready || ended) return
        if (voiceLocked && given.voice !== setup?.voice) log.warn({ voice: given.voice }, 'the realtime session keeps its voice: it cannot change once the model has spoken')
        setup = voiceLocked ? { ...given, voice: setup?.voice ?? given.voice } : given
        send({ type: 'session.update', session: sessionOf(setup, !voiceLocked, transcriptionModel) })
      },

      close: () => {
        if (ended) return
        words?.close()
        words = undefined
        abortStart?.('the engine was closed before it connected')
        stop()
        socket?.close()
      }
    }
  }
}
