import type { FastifyInstance } from 'fastify'
import { WebSocket } from 'ws'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { bufferToPcm, decodeWav, FRAME_SAMPLES, pcmToBuffer, rms, SAMPLE_RATE } from '../../src/modules/voice/audio.ts'
import { poll } from './poll.ts'

// A browser's side of a web call's stream (docs/voice.md, "Browser protocol"), for tests and the benchmark.

export interface VoiceEvent { type: string, [key: string]: any }

export interface WebCallClient {
  socket: WebSocket
  /** JSON events in order of arrival, each with `at` (performance.now() of arrival). */
  events: Array<VoiceEvent & { at: number }>
  /** Agent audio frames received, each with its arrival time. */
  frames: Array<{ pcm: Int16Array, at: number }>
  /** Resolves with the close code and the events so far. */
  closed: Promise<{ code: number }>
  /** Waits for an event of `type` (and `where`) after the first `after` events; fails after 30 s. */
  waitFor: (type: string, where?: (event: VoiceEvent) => boolean, after?: number) => Promise<VoiceEvent & { at: number }>
  /** Sends 16 kHz PCM16 in 20 ms frames, all at once or paced in real time. */
  sendAudio: (pcm: Int16Array, options?: { realtime?: boolean }) => Promise<void>
  sendText: (text: string) => void
  hangup: () => void
  /** Frames received whose level is above silence. */
  loudFrames: () => number
}

export interface OpenOptions { origin?: string, autoPong?: boolean }

export async function openWebCall (baseUrl: string, token: string, options: OpenOptions = {}): Promise<WebCallClient> {
  const url = `${baseUrl.replace(/^http/, 'ws')}/web-call/stream?access_token=${encodeURIComponent(token)}`
  const socket = new WebSocket(url, { headers: options.origin === undefined ? {} : { origin: options.origin }, autoPong: options.autoPong ?? true })
  const events: WebCallClient['events'] = []
  const frames: WebCallClient['frames'] = []
  socket.on('message', (data: Buffer, isBinary: boolean) => {
    const at = performance.now()
    if (isBinary) frames.push({ pcm: bufferToPcm(data), at })
    else events.push({ ...JSON.parse(data.toString('utf8')), at })
  })
  const closed = new Promise<{ code: number }>((resolve) => socket.on('close', (code) => resolve({ code })))
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve())
    socket.once('unexpected-response', (_req, res) => {
      let body = ''
      res.on('data', (chunk: Buffer) => { body += chunk.toString() })
      res.on('end', () => reject(Object.assign(new Error(`stream refused: ${res.statusCode} ${body}`), { statusCode: res.statusCode, body })))
    })
    socket.once('error', reject)
  })
  const client: WebCallClient = {
    socket,
    events,
    frames,
    closed,
    async waitFor (type, where = () => true, after = 0) {
      const found = await poll(() => events.slice(after).find((e) => e.type === type && where(e)), (e) => e !== undefined, {
        timeoutMs: 30_000,
        message: () => `no ${type} event; got ${JSON.stringify(events.map((e) => e.type === 'transcript' ? `${e.speaker}: ${e.content}` : e.type))}`
      })
      return found!
    },
    async sendAudio (pcm, { realtime = false } = {}) {
      const start = performance.now()
      for (let i = 0, n = 0; i < pcm.length; i += FRAME_SAMPLES, n++) {
        if (socket.readyState !== socket.OPEN) return
        socket.send(pcmToBuffer(pcm.subarray(i, i + FRAME_SAMPLES)))
        if (realtime) {
          const due = start + (n + 1) * 20
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())))
        }
      }
    },
    sendText (text) { socket.send(JSON.stringify({ type: 'text', text })) },
    hangup () { socket.send(JSON.stringify({ type: 'hangup' })) },
    loudFrames: () => frames.filter((f) => rms(f.pcm) > 300).length
  }
  return client
}

/** A spoken sentence (espeak-ng, test/fixtures/audio/hello.wav) from its first sound on: the speech detector hears speech, not tones. */
const SPOKEN = (() => {
  const { pcm } = decodeWav(readFileSync(path.join(import.meta.dirname, '../fixtures/audio/hello.wav')))
  let first = 0
  while (Math.abs(pcm[first]) < 64) first++
  return pcm.subarray(first)
})()

/** Where a recording's speech starts and ends (ms): the first and last sample above a whisper. */
export function speechSpan (pcm: Int16Array): [number, number] {
  let first = 0
  while (Math.abs(pcm[first]) < 64) first++
  let last = pcm.length - 1
  while (Math.abs(pcm[last]) < 64) last--
  return [first * 1000 / SAMPLE_RATE, last * 1000 / SAMPLE_RATE]
}

/**
 * Caller speech: the first `ms` of a spoken sentence ("Hello, I would like to book…"), said again as often as `ms`
 * needs, then `silenceMs` of silence.
 */
export function speech (ms: number, silenceMs = 800): Int16Array {
  const voiced = Math.round(ms * 16)
  const pcm = new Int16Array(voiced + Math.round(silenceMs * 16))
  for (let at = 0; at < voiced; at += SPOKEN.length) pcm.set(SPOKEN.subarray(0, Math.min(SPOKEN.length, voiced - at)), at)
  return pcm
}

/** How a stream's opening was refused: the HTTP status and body, or undefined when it opened. */
export async function refusal (opening: Promise<WebCallClient>): Promise<{ statusCode: number, body: string } | undefined> {
  try {
    const client = await opening
    client.socket.close()
    return undefined
  } catch (err) {
    return err as { statusCode: number, body: string }
  }
}

/** The caller speaks a turn (600 ms of speech, then silence that ends it) once the agent has finished. */
export async function say (client: WebCallClient): Promise<void> {
  await client.waitFor('agent_speaking', (e) => !e.speaking, client.events.length - 1).catch(() => {})
  await client.sendAudio(speech(600, 700))
}

/** The call once it has ended and been analysed (success or failed), as GET /v1/call/:id answers it. */
export async function finishedCall (app: FastifyInstance, headers: Record<string, string>, callId: string): Promise<any> {
  return await poll(async () => (await app.inject({ method: 'GET', url: `/v1/call/${callId}`, headers })).json(),
    (call) => call.call_status === 'success' || call.call_status === 'failed', { message: (call) => `call still ${call.call_status}` })
}

/** A web call of the agent, opened on a listening app, once the agent has greeted. */
export async function startWebCall (app: FastifyInstance, url: string, headers: Record<string, string>, agentId: string): Promise<{ callId: string, client: WebCallClient }> {
  const call = (await app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers, payload: { agent_id: agentId } })).json()
  const client = await openWebCall(url, call.access_token)
  await client.waitFor('transcript', (e) => e.speaker === 'agent')
  return { callId: call._id, client }
}

/** A typed turn once the agent has finished speaking; answers when the agent has said `answer`. */
export async function typedTurn (client: WebCallClient, text: string, answer: RegExp): Promise<void> {
  await client.waitFor('agent_speaking', (e) => !e.speaking, client.events.findLastIndex((e) => e.type === 'agent_speaking' && e.speaking))
  const from = client.events.length
  client.sendText(text)
  await client.waitFor('transcript', (e) => e.speaker === 'agent' && answer.test(e.content), from)
}
