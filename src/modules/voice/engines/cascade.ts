import { performance } from 'node:perf_hooks'
import type { ProviderEndpoint, VoiceConfig } from '../../../config.ts'
import { bufferToPcm, resample, SAMPLE_RATE } from '../audio.ts'
import { describe, postToProvider, ProviderError } from '../providers.ts'
import { sttLanguage, sttProvider } from '../stt/index.ts'
import type { SttFactory } from '../stt/types.ts'
import type { Engine, EngineEvent, EngineFactory, EngineSetup } from './types.ts'

// The cascade: speech to text (stt/: each turn posted after it ended, or the call's audio streamed to
// OpenAI's realtime transcription or Deepgram), a chat model and text to speech, each over its
// OpenAI-compatible HTTP API (OpenAI, a local Whisper server, Ollama or vLLM, Kokoro) with undici's request,
// over kept-alive connections. The reply is spoken sentence by sentence while the model still writes, so the
// caller hears the first sentence after one sentence of latency, not after the whole reply. An early reply
// (prepare) answers the caller's stable words before the turn has ended, holding everything it produces; the
// end of turn releases it when the turn's words are the same, and throws it away otherwise.
// Without speech (`speech: false`: the engine kind `text` of test chats and scenario runs) it is the chat model
// alone: typed turns in, text out, tools as in a call.

/** OpenAI's `pcm` speech format (and Kokoro's): raw PCM16 LE mono at 24 kHz. */
const TTS_RATE = 24_000
/** A run of text without a sentence end is spoken in pieces of about this many characters. */
const LONG_RUN = 200

type Message =
  | { role: 'system' | 'user', content: string }
  | { role: 'assistant', content: string | null, tool_calls?: ToolCall[] }
  | { role: 'tool', tool_call_id: string, content: string }

interface ToolCall { id: string, type: 'function', function: { name: string, arguments: string } }

/** Where the text has complete sentences: cut them off, and a very long run without an end too. */
export function cutSentences (text: string): { sentences: string[], rest: string } {
  const sentences: string[] = []
  let rest = text
  for (;;) {
    const end = /[.!?…]+["'”’)\]]*\s|\n/.exec(rest)
    let cut = end === null ? -1 : end.index + end[0].length
    if (cut < 0 && rest.length > LONG_RUN) {
      const comma = rest.lastIndexOf(',', LONG_RUN)
      const space = rest.lastIndexOf(' ', LONG_RUN)
      cut = comma > LONG_RUN / 2 ? comma + 1 : space > LONG_RUN / 2 ? space + 1 : LONG_RUN
    }
    if (cut < 0) return { sentences, rest }
    sentences.push(rest.slice(0, cut))
    rest = rest.slice(cut)
  }
}

/** Words as the caller said them, for comparing a prepared answer's words with the turn's: case, punctuation and spacing aside. */
const sameWords = (a: string, b: string) => {
  const plain = (text: string) => text.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, ' ').trim()
  return plain(a) === plain(b)
}

/** When an answer's stages began and ended (performance.now()), for its `stages` event. */
interface Timing { transcriptionMs: number | null, llmAt: number, llmMs: number | null, ttsAt: number | undefined, given: boolean }

/** The recogniser of an engine without speech: it hears nothing. */
const deaf: SttFactory = () => ({ start: async () => {}, update: () => {}, audio: () => {}, endOfTurn: async () => '', rejoin: () => {}, forget: () => {}, close: () => {} })

export function cascadeEngine (voice: VoiceConfig, { speech = true }: { speech?: boolean } = {}): EngineFactory {
  const post = (provider: 'LLM' | 'TTS', endpoint: ProviderEndpoint, path: string, body: { type: string, body: string }, signal: AbortSignal) =>
    postToProvider(provider, endpoint, path, body, { signal, timeoutMs: voice.providerTimeoutMs })
  const recogniser = speech ? sttProvider(voice) : deaf

  return (onEvent, log) => {
    let setup: EngineSetup | undefined
    const history: Message[] = []
    // Every cancel, failure or close starts a new generation: work of an older one emits nothing and changes nothing.
    let generation = 0
    let aborter = new AbortController()
    let closed = false
    // Turns, typed turns and say() run one after the other, in the order they were given.
    let tail: Promise<void> = Promise.resolve()
    let unnamedCalls = 0
    const waitingTools = new Map<string, (output: string) => void>()
    /** Speaks a line within the answer that waits for tool results (hold); undefined while none waits. */
    let holding: ((text: string) => void) | undefined
    // The response being spoken: what it said in its current model round, kept in the history if it is cut short.
    let current: { generation: number, spoken: string } | undefined
    /** An early reply: the answer to `text`, running in generation `gen`, its events held until released. */
    let early: { text: string, gen: number, held: EngineEvent[], history: number } | undefined
    /** Work given and not finished: an early reply runs only when there is none (its generation's events are all held). */
    let pending = 0

    const live = (gen: number) => gen === generation && !closed
    const emit = (gen: number, event: EngineEvent) => {
      if (!live(gen)) return
      if (early?.gen === gen) early.held.push(event)
      else onEvent(event)
    }
    const currentSetup = () => {
      if (setup === undefined) throw new Error('the cascade engine was used before start()')
      return setup
    }

    function stop () {
      // An early reply never spoken leaves nothing in the history, not even the words it answered.
      if (early !== undefined) history.length = Math.min(history.length, early.history)
      else if (current?.generation === generation && current.spoken.trim() !== '') history.push({ role: 'assistant', content: current.spoken.trim() })
      early = undefined
      current = undefined
      generation++
      aborter.abort()
      aborter = new AbortController()
      for (const release of waitingTools.values()) release('')
      waitingTools.clear()
      tail = Promise.resolve()
    }

    function fail (gen: number, error: unknown) {
      if (!live(gen)) return // cancelled or closed: the abort is no failure
      const message = error instanceof ProviderError ? error.message : `the cascade engine failed: ${describe(error)}`
      log.warn({ err: error }, message)
      stop()
      onEvent({ type: 'error', message })
    }

    // The caller's words: partial ones as they come; a streaming provider's failure ends the call.
    const stt = recogniser((event) => {
      if (closed) return
      if (event.type === 'partial') onEvent({ type: 'user_partial', text: event.text, final: event.final, startMs: event.startMs, endMs: event.endMs })
      else if (event.type === 'audio_seconds') onEvent({ type: 'speech', recognisedSeconds: event.seconds })
      else fail(generation, new ProviderError(event.message))
    }, log)

    function enqueue (work: (gen: number, signal: AbortSignal) => Promise<void>) {
      const gen = generation
      const signal = aborter.signal
      pending++
      tail = tail.then(async () => {
        try {
          if (live(gen)) await work(gen, signal)
        } catch (error) {
          fail(gen, error)
        } finally {
          pending--
        }
      })
    }

    /** The sentence as 16 kHz audio, as it arrives; `bytes` counts what came at 24 kHz. */
    async function * synthesise (text: string, signal: AbortSignal, counter: { bytes: number }): AsyncGenerator<Int16Array> {
      const { voice: name } = currentSetup()
      const body = JSON.stringify({ model: voice.tts.model, input: text, voice: name, response_format: 'pcm' })
      // Bytes not converted yet: an odd byte, or samples short of a group of three (24 kHz → 16 kHz maps 3
      // samples on 2 exactly, so chunks resampled in such groups join without a seam).
      let carry: Uint8Array = new Uint8Array(0)
      for await (const chunk of post('TTS', voice.tts, '/audio/speech', { type: 'application/json', body }, signal)) {
        counter.bytes += chunk.length
        const bytes = carry.length === 0 ? chunk : Buffer.concat([carry, chunk])
        const whole = bytes.length - bytes.length % 6
        carry = bytes.slice(whole)
        if (whole > 0) yield resample(bufferToPcm(bytes.subarray(0, whole)), TTS_RATE, SAMPLE_RATE)
      }
      if (carry.length >= 2) yield resample(bufferToPcm(carry), TTS_RATE, SAMPLE_RATE)
    }

    /**
     * Speaks sentences strictly in order. A sentence's speech request starts once the one before it is
     * being emitted, and its audio is held until that one is done; so at most two requests run at once.
     */
    function speaker (gen: number, signal: AbortSignal, timing?: Timing) {
      let emitted: Promise<void> = Promise.resolve() // every sentence given so far is emitted
      let playing: Promise<void> = Promise.resolve() // the last sentence given is the one being emitted
      return {
        say (sentence: string) {
          const text = sentence.trim()
          if (!/[\p{L}\p{N}]/u.test(text)) return // nothing to pronounce
          if (!speech) {
            if (current?.generation === gen) current.spoken += (current.spoken === '' ? '' : ' ') + text
            return
          }
          if (timing !== undefined) timing.ttsAt ??= performance.now()
          const before = emitted
          let turn = false
          const held: Int16Array[] = []
          let first = true
          const out = (pcm: Int16Array) => {
            if (!live(gen)) return
            if (first && current?.generation === gen) current.spoken += (current.spoken === '' ? '' : ' ') + text
            if (first && timing !== undefined && !timing.given) {
              timing.given = true
              emit(gen, { type: 'stages', transcriptionMs: timing.transcriptionMs, llmMs: timing.llmMs, ttsMs: Math.round(performance.now() - timing.ttsAt!) })
            }
            first = false
            emit(gen, { type: 'audio', pcm })
          }
          const myTurn = before.then(() => {
            turn = true
            for (const pcm of held.splice(0)) out(pcm)
          })
          const counter = { bytes: 0 }
          const synthesis = playing.then(async () => {
            if (!live(gen)) return
            try {
              for await (const pcm of synthesise(text, signal, counter)) {
                if (!live(gen)) return
                if (turn) out(pcm)
                else held.push(pcm)
              }
            } catch (error) {
              fail(gen, error)
            }
          })
          playing = myTurn
          emitted = Promise.all([myTurn, synthesis]).then(() => {
            emit(gen, { type: 'speech', synthesisedSeconds: counter.bytes / 2 / TTS_RATE })
          })
        },
        drain: async () => { await emitted }
      }
    }

    /** One streamed chat completion: text deltas go to `onText`; returns the whole text and the tool calls. */
    async function chat (gen: number, signal: AbortSignal, onText: (delta: string) => void): Promise<{ text: string, toolCalls: ToolCall[] }> {
      const s = currentSetup()
      const messages: Message[] = s.instructions === '' ? history : [{ role: 'system', content: s.instructions }, ...history]
      const body = JSON.stringify({
        model: s.model,
        messages,
        ...(s.tools.length === 0 ? {} : { tools: s.tools.map((tool) => ({ type: 'function', function: tool })) }),
        temperature: s.temperature,
        ...(s.maxTokens === null ? {} : { max_tokens: s.maxTokens }),
        stream: true,
        stream_options: { include_usage: true }
      })
      const malformed = () => new ProviderError('LLM provider sent a malformed stream')
      const decoder = new TextDecoder()
      let text = ''
      const calls: ToolCall[] = []
      let pending = ''
      let finished = false
      let done = false
      for await (const bytes of post('LLM', voice.llm, '/chat/completions', { type: 'application/json', body }, signal)) {
        pending += decoder.decode(bytes, { stream: true })
        for (let newline = pending.indexOf('\n'); newline >= 0; newline = pending.indexOf('\n')) {
          const line = pending.slice(0, newline).trim()
          pending = pending.slice(newline + 1)
          if (!line.startsWith('data:')) continue // blank lines, comments, event names
          const data = line.slice(5).trim()
          if (data === '[DONE]') {
            done = true
            break
          }
          let chunk: any
          try { chunk = JSON.parse(data) } catch { throw malformed() }
          if (chunk === null || typeof chunk !== 'object') throw malformed()
          if (chunk.error != null) throw new ProviderError(`LLM provider failed: ${String(chunk.error?.message ?? JSON.stringify(chunk.error)).slice(0, 200)}`)
          const choice = chunk.choices?.[0]
          const delta = choice?.delta
          if (typeof delta?.content === 'string' && delta.content !== '') {
            text += delta.content
            onText(delta.content)
            if (!live(gen)) return { text, toolCalls: [] }
          }
          for (const call of Array.isArray(delta?.tool_calls) ? delta.tool_calls : []) {
            const index = Number.isInteger(call?.index) ? call.index as number : calls.length
            calls[index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } }
            if (typeof call.id === 'string' && call.id !== '') calls[index].id = call.id
            if (typeof call.function?.name === 'string') calls[index].function.name += call.function.name
            if (typeof call.function?.arguments === 'string') calls[index].function.arguments += call.function.arguments
          }
          if (choice?.finish_reason != null) finished = true
          if (chunk.usage != null && typeof chunk.usage === 'object') {
            emit(gen, { type: 'usage', model: s.model, input: Number(chunk.usage.prompt_tokens) || 0, output: Number(chunk.usage.completion_tokens) || 0 })
          }
        }
        if (done) break
      }
      if (!done && !finished) throw new ProviderError('LLM provider ended its stream before the reply was finished')
      // Servers that leave out ids still get answers matched to their calls.
      const toolCalls = calls.filter((call) => call !== undefined).map((call) => ({ ...call, id: call.id || `call_${++unnamedCalls}` }))
      return { text, toolCalls }
    }

    /** Answers the history: model rounds until one ends without tool calls, spoken as they are written. */
    async function respond (gen: number, signal: AbortSignal, transcriptionMs: number | null = null) {
      const turn = { generation: gen, spoken: '' }
      current = turn
      const timing: Timing = { transcriptionMs, llmAt: performance.now(), llmMs: null, ttsAt: undefined, given: false }
      const voiceOut = speaker(gen, signal, timing)
      const said: string[] = []
      for (;;) {
        let unspoken = ''
        const round = await chat(gen, signal, (delta) => {
          timing.llmMs ??= Math.round(performance.now() - timing.llmAt)
          emit(gen, { type: 'agent_text', delta })
          const { sentences, rest } = cutSentences(unspoken + delta)
          unspoken = rest
          for (const sentence of sentences) voiceOut.say(sentence)
        })
        if (!live(gen)) return
        voiceOut.say(unspoken)
        await voiceOut.drain()
        if (!live(gen)) return
        const text = round.text.trim()
        if (text !== '') said.push(text)
        if (round.toolCalls.length === 0) {
          if (text !== '') history.push({ role: 'assistant', content: text })
          current = undefined
          emit(gen, { type: 'response_done', text: said.join(' ') })
          return
        }
        const outputs = round.toolCalls.map((call) => new Promise<string>((resolve) => waitingTools.set(call.id, resolve)))
        for (const call of round.toolCalls) emit(gen, { type: 'tool_call', id: call.id, name: call.function.name, arguments: call.function.arguments })
        holding = (line) => {
          emit(gen, { type: 'agent_text', delta: `${text === '' && said.length === 0 ? '' : ' '}${line}` })
          said.push(line)
          voiceOut.say(line)
        }
        const results = await Promise.all(outputs).finally(() => { holding = undefined })
        await voiceOut.drain()
        if (!live(gen)) return
        history.push({ role: 'assistant', content: text === '' ? null : text, tool_calls: round.toolCalls })
        round.toolCalls.forEach((call, i) => history.push({ role: 'tool', tool_call_id: call.id, content: results[i] }))
        turn.spoken = ''
      }
    }

    /** Answers a turn whose words are known, throwing away an early reply to other words. */
    function answer (text: string, transcriptionMs: number) {
      stop()
      onEvent({ type: 'user_text', text })
      if (text === '') return
      enqueue(async (gen, signal) => {
        history.push({ role: 'user', content: text })
        await respond(gen, signal, transcriptionMs)
      })
    }

    const engine: Engine = {
      start: async (first) => {
        setup = first
        for (const item of first.history ?? []) history.push({ role: item.role, content: item.text })
        await stt.start({ language: sttLanguage(first) })
      },
      audio: (frame) => { if (!closed) stt.audio(frame) },
      endOfTurn: () => {
        if (closed) return
        const endedAt = performance.now()
        const recognised = stt.endOfTurn()
        // A failure is the turn's work's to report; once the turn is cancelled it matters no more.
        recognised.catch(() => {})
        const prepared = early
        if (prepared !== undefined) {
          // The early reply is released if the turn's words are the ones it answers; else it goes, and the turn is answered anew.
          recognised.then((text) => {
            if (early !== prepared || !live(prepared.gen)) return
            if (!sameWords(text, prepared.text)) return answer(text, Math.round(performance.now() - endedAt))
            early = undefined
            onEvent({ type: 'user_text', text })
            onEvent({ type: 'stages', transcriptionMs: Math.round(performance.now() - endedAt) })
            for (const event of prepared.held) onEvent(event)
          }, (error: unknown) => fail(prepared.gen, error))
          return
        }
        enqueue(async (gen, signal) => {
          const text = await recognised
          emit(gen, { type: 'user_text', text })
          if (text === '' || !live(gen)) return
          history.push({ role: 'user', content: text })
          await respond(gen, signal, Math.round(performance.now() - endedAt))
        })
      },
      prepare: (text) => {
        if (closed || (early !== undefined && sameWords(early.text, text))) return
        if (early !== undefined) stop()
        else if (pending > 0) return
        const prepared = { text, gen: generation, held: [], history: Infinity }
        early = prepared
        enqueue(async (gen, signal) => {
          prepared.history = history.length
          history.push({ role: 'user', content: text })
          await respond(gen, signal)
        })
      },
      forget: () => {
        if (closed) return
        if (early !== undefined) stop()
        stt.forget()
      },
      userText: (text) => {
        enqueue(async (gen, signal) => {
          history.push({ role: 'user', content: text })
          await respond(gen, signal)
        })
      },
      say: (text) => {
        enqueue(async (gen, signal) => {
          current = { generation: gen, spoken: '' }
          const voiceOut = speaker(gen, signal)
          emit(gen, { type: 'agent_text', delta: text })
          const { sentences, rest } = cutSentences(text)
          for (const sentence of [...sentences, rest]) voiceOut.say(sentence)
          await voiceOut.drain()
          if (!live(gen)) return
          history.push({ role: 'assistant', content: text })
          current = undefined
          emit(gen, { type: 'response_done', text })
        })
      },
      hold: (text) => holding?.(text),
      toolResult: (id, output) => {
        const resolve = waitingTools.get(id)
        if (resolve === undefined) {
          log.debug({ id }, 'a tool result for no waiting call')
          return
        }
        waitingTools.delete(id)
        resolve(output)
      },
      cancel: () => {
        if (closed) return
        stop()
        // The caller only paused: what they said before the barge-in, not answered yet, opens their next turn.
        stt.rejoin()
      },
      update: (next) => {
        setup = next
        stt.update({ language: sttLanguage(next) })
      },
      close: () => {
        if (closed) return
        stop()
        closed = true
        stt.close()
      }
    }
    return engine
  }
}
