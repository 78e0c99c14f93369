import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { decodeWav, pcmToBuffer, rms } from '../../src/modules/voice/audio.ts'

// A local server that speaks the OpenAI-compatible HTTP wire formats the cascade engine uses:
// POST /v1/audio/transcriptions (multipart), /v1/chat/completions (SSE stream) and /v1/audio/speech (raw
// 24 kHz PCM16). It answers at once, from scripted queues or with defaults, and records every request.

export type Kind = 'transcriptions' | 'chat' | 'speech'

export interface TranscriptionRequest {
  authorization: string | undefined
  model: string | undefined
  language: string | undefined
  responseFormat: string | undefined
  filename: string | undefined
  /** The uploaded WAV decoded (mono), its rate and loudness. */
  audio: Int16Array
  rate: number
  rms: number
}

export interface ChatRequest {
  authorization: string | undefined
  body: any
  /** The reply stream was finished ([DONE] sent). */
  ended: boolean
}

export interface SpeechRequest {
  authorization: string | undefined
  body: any
  /** Samples at 24 kHz sent back. */
  samples: number
}

export interface ScriptedReply {
  text?: string
  toolCalls?: Array<{ name: string, arguments: object }>
  usage?: { prompt_tokens: number, completion_tokens: number }
  /** Stop after the text's first sentence until `release()`. */
  hold?: boolean
  /** Sent as the whole response body instead (a broken stream). */
  raw?: string
}

export interface OpenAiHttpStandin {
  /** The base URL, ending in /v1 (STT_URL, LLM_URL, TTS_URL). */
  url: string
  requests: { transcriptions: TranscriptionRequest[], chat: ChatRequest[], speech: SpeechRequest[] }
  /** Transcripts answered in turn; once used up: 'Hello.'. */
  transcripts: string[]
  /** Chat replies streamed in turn; once used up: a sentence that repeats the last user message. */
  replies: ScriptedReply[]
  /** Answers a chat request itself when it returns a reply (before the queue): a judge that reads what it is asked. */
  replyTo?: (body: any) => ScriptedReply | undefined
  /** The next request of this kind is answered with this status and an OpenAI error body. */
  failNext: (kind: Kind, status: number) => void
  /** The next request of this kind is never answered (until teardown). */
  hangNext: (kind: Kind) => void
  /** Lets every held reply go on. */
  release: () => void
}

export const SPEECH_RATE = 24_000
/** Synthesised speech lasts this long per character of input, at most MAX_SPEECH_SECONDS. */
export const SPEECH_SECONDS_PER_CHARACTER = 0.05
export const MAX_SPEECH_SECONDS = 3

/** Seconds of audio the stand-in speaks for this input. */
export const speechSeconds = (input: string) => Math.min(MAX_SPEECH_SECONDS, input.length * SPEECH_SECONDS_PER_CHARACTER)

/** The speech the stand-in sends: a 440 Hz tone at 24 kHz, loud enough to tell from silence. */
export function tone (samples: number): Int16Array {
  const pcm = new Int16Array(samples)
  for (let i = 0; i < samples; i++) pcm[i] = Math.round(8000 * Math.sin(2 * Math.PI * 440 * i / SPEECH_RATE))
  return pcm
}

function lastUserText (body: any): string {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : []
  const last = messages.findLast((m) => m?.role === 'user')
  return typeof last?.content === 'string' ? last.content : ''
}

export async function startOpenAiHttpStandin (t: Test): Promise<OpenAiHttpStandin> {
  const failures = new Map<Kind, number>()
  const hangs = new Set<Kind>()
  let held: Array<() => void> = []
  let chunkId = 0

  const standin: OpenAiHttpStandin = {
    url: '',
    requests: { transcriptions: [], chat: [], speech: [] },
    transcripts: [],
    replies: [],
    failNext: (kind, status) => { failures.set(kind, status) },
    hangNext: (kind) => { hangs.add(kind) },
    release: () => {
      for (const go of held) go()
      held = []
    }
  }

  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
  }
  const write = (res: http.ServerResponse, data: string | Buffer) => { if (!res.destroyed) res.write(data) }

  async function transcription (req: http.IncomingMessage, raw: Buffer): Promise<unknown> {
    const form = await new Response(raw, { headers: { 'content-type': req.headers['content-type'] ?? '' } }).formData()
    const file = form.get('file')
    const field = (name: string) => { const value = form.get(name); return typeof value === 'string' ? value : undefined }
    const wav = typeof file === 'string' || file === null ? Buffer.alloc(0) : Buffer.from(await file.arrayBuffer())
    const { rate, pcm } = decodeWav(wav)
    standin.requests.transcriptions.push({
      authorization: req.headers.authorization,
      model: field('model'),
      language: field('language'),
      responseFormat: field('response_format'),
      filename: typeof file === 'string' || file === null ? undefined : file.name,
      audio: pcm,
      rate,
      rms: rms(pcm)
    })
    return { text: standin.transcripts.shift() ?? 'Hello.' }
  }

  async function chat (req: http.IncomingMessage, res: http.ServerResponse, body: any) {
    const record: ChatRequest = { authorization: req.headers.authorization, body, ended: false }
    standin.requests.chat.push(record)
    const reply = standin.replyTo?.(body) ?? standin.replies.shift() ?? { text: `You said: ${lastUserText(body).replace(/[.!?…\s]+$/, '')}.` }
    const text = reply.text ?? ''
    const model = typeof body?.model === 'string' ? body.model : 'stand-in'
    if (body?.stream !== true) {
      // Not streamed (the analyser, the tests' persona caller): one JSON answer.
      record.ended = true
      return json(res, 200, { id: `chatcmpl-${++chunkId}`, object: 'chat.completion', model, choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }], usage: reply.usage ?? { prompt_tokens: 1, completion_tokens: 1 } })
    }
    const chunk = (choices: unknown[], extra: object = {}) =>
      `data: ${JSON.stringify({ id: `chatcmpl-${++chunkId}`, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model, choices, ...extra })}\n\n`
    const delta = (d: object, finishReason: string | null = null) => chunk([{ index: 0, delta: d, finish_reason: finishReason }])

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    if (reply.raw !== undefined) {
      record.ended = true
      return res.end(reply.raw)
    }
    write(res, delta({ role: 'assistant', content: '' }))
    // Word by word; a held reply stops after its first sentence.
    const firstEnd = /[.!?…]\s/.exec(text)
    let holdAt = reply.hold === true && firstEnd !== null ? firstEnd.index + 1 : -1
    let sent = 0
    for (const word of text.match(/\S+\s*/g) ?? []) {
      if (holdAt >= 0 && sent > holdAt) {
        holdAt = -1
        await new Promise<void>((resolve) => held.push(resolve))
      }
      write(res, delta({ content: word }))
      sent += word.length
    }
    const calls = reply.toolCalls ?? []
    calls.forEach((call, index) => {
      const args = JSON.stringify(call.arguments)
      const half = Math.ceil(args.length / 2)
      write(res, delta({ tool_calls: [{ index, id: `call_${++chunkId}`, type: 'function', function: { name: call.name, arguments: args.slice(0, half) } }] }))
      write(res, delta({ tool_calls: [{ index, function: { arguments: args.slice(half) } }] }))
    })
    write(res, delta({}, calls.length > 0 ? 'tool_calls' : 'stop'))
    const usage = reply.usage ?? {
      prompt_tokens: Math.ceil(JSON.stringify(body?.messages ?? []).length / 4),
      completion_tokens: Math.max(1, Math.ceil(text.length / 4))
    }
    write(res, chunk([], { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } }))
    write(res, 'data: [DONE]\n\n')
    record.ended = true
    res.end()
  }

  function speech (req: http.IncomingMessage, res: http.ServerResponse, body: any) {
    const input = typeof body?.input === 'string' ? body.input : ''
    const samples = Math.round(speechSeconds(input) * SPEECH_RATE)
    standin.requests.speech.push({ authorization: req.headers.authorization, body, samples })
    const bytes = pcmToBuffer(tone(samples))
    res.writeHead(200, { 'content-type': 'audio/pcm' })
    // Several chunks, the first of an odd size, so samples straddle chunk boundaries.
    let offset = 0
    for (const size of [Math.min(1001, bytes.length), 4096]) {
      write(res, bytes.subarray(offset, offset + size))
      offset += size
    }
    for (; offset < bytes.length; offset += 9600) write(res, bytes.subarray(offset, offset + 9600))
    res.end()
  }

  const routes: Record<string, Kind> = { '/v1/audio/transcriptions': 'transcriptions', '/v1/chat/completions': 'chat', '/v1/audio/speech': 'speech' }
  const server = http.createServer((req, res) => {
    res.on('error', () => {}) // the engine aborts requests on cancel
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      void (async () => {
        const kind = routes[new URL(req.url ?? '/', 'http://stand-in').pathname]
        if (req.method !== 'POST' || kind === undefined) return json(res, 404, { error: { message: 'not found', type: 'invalid_request_error' } })
        const raw = Buffer.concat(chunks)
        const failure = failures.get(kind)
        failures.delete(kind)
        try {
          if (hangs.delete(kind)) {
            // Recorded, never answered.
            if (kind === 'transcriptions') await transcription(req, raw)
            else if (kind === 'chat') standin.requests.chat.push({ authorization: req.headers.authorization, body: JSON.parse(raw.toString('utf8')), ended: false })
            else standin.requests.speech.push({ authorization: req.headers.authorization, body: JSON.parse(raw.toString('utf8')), samples: 0 })
            return
          }
          if (failure !== undefined) return json(res, failure, { error: { message: `stand-in failure ${failure}`, type: 'server_error', code: null } })
          if (kind === 'transcriptions') return json(res, 200, await transcription(req, raw))
          const body = JSON.parse(raw.toString('utf8'))
          if (kind === 'chat') return await chat(req, res, body)
          speech(req, res, body)
        } catch (error) {
          if (!res.headersSent) json(res, 400, { error: { message: String(error), type: 'invalid_request_error' } })
          else res.destroy()
        }
      })()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => {
    standin.release()
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  standin.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
  return standin
}
