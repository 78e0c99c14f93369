import type { IncomingMessage } from 'node:http'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { WebSocket } from 'ws'
import type { VoiceConfig } from '../../config.ts'
import { HttpError } from '../../http/errors.ts'
import { clientAddress } from '../../http/rate-limit.ts'

// What every call stream (the browser's and Twilio's) goes through before and after its upgrade, so that
// strangers cannot hold sockets: a stream counts as pending from its upgrade request until it is tied to a call
// (the browser's token spent, Twilio's `start` taken), and as open until its connection closes. Pending ones are
// capped per client address and per process, open ones per process, so that the descriptors the database and the
// workers need are never taken by sockets (docs/voice.md, "Scale").

/** Seconds a refused client is told to wait: a pending stream is decided within VOICE_STREAM_START_TIMEOUT_MS. */
const RETRY_AFTER_SECONDS = 5

interface Ticket { address: string, pending: boolean, released: boolean }

export class StreamAdmission {
  readonly #limits: Pick<VoiceConfig, 'pendingStreamsPerAddress' | 'pendingStreams' | 'maxStreams'>
  readonly #pendingByAddress = new Map<string, number>()
  readonly #tickets = new WeakMap<IncomingMessage, Ticket>()
  #open = 0
  #pending = 0

  constructor (limits: Pick<VoiceConfig, 'pendingStreamsPerAddress' | 'pendingStreams' | 'maxStreams'>) {
    this.#limits = limits
  }

  /** Streams open now (pending or in a call), and of those pending. */
  get counts (): { open: number, pending: number } {
    return { open: this.#open, pending: this.#pending }
  }

  /**
   * The onRequest hook of a stream route: reserves the stream's place before anything else runs (no lookup, no
   * upgrade), or refuses it 429 (its address has as many pending streams as allowed) or 503 (the process is full).
   * The place is given back when the connection closes, whatever became of it.
   */
  readonly admit = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    // A plain GET is not a stream: the route answers it 404.
    if (!request.ws) return
    const limits = this.#limits
    const address = clientAddress(request.ip)
    const mine = this.#pendingByAddress.get(address) ?? 0
    const addressFull = limits.pendingStreamsPerAddress > 0 && mine >= limits.pendingStreamsPerAddress
    if (this.#open >= limits.maxStreams || this.#pending >= limits.pendingStreams || addressFull) {
      reply.header('retry-after', String(RETRY_AFTER_SECONDS))
      throw addressFull
        ? new HttpError(429, 'too_many_pending_streams', `at most ${limits.pendingStreamsPerAddress} streams of one address may wait to join a call at once`)
        : new HttpError(503, 'streams_busy', `the server holds as many call streams as it can; retry in ${RETRY_AFTER_SECONDS} seconds`)
    }
    const ticket: Ticket = { address, pending: true, released: false }
    this.#open++
    this.#pending++
    this.#pendingByAddress.set(address, mine + 1)
    this.#tickets.set(request.raw, ticket)
    // The upgrade's connection: @fastify/websocket gives it to the response it makes (an injected upgrade has no
    // request socket at all).
    const connection = reply.raw.socket ?? request.raw.socket
    if (connection === null || connection === undefined || connection.destroyed) this.#release(ticket)
    else connection.once('close', () => this.#release(ticket))
  }

  /** The request's stream is tied to its call: it no longer counts as pending (it still counts as open). */
  started (request: FastifyRequest): void {
    const ticket = this.#tickets.get(request.raw)
    if (ticket !== undefined && ticket.pending && !ticket.released) this.#unpend(ticket)
  }

  #unpend (ticket: Ticket): void {
    ticket.pending = false
    this.#pending--
    const left = this.#pendingByAddress.get(ticket.address)! - 1
    if (left === 0) this.#pendingByAddress.delete(ticket.address)
    else this.#pendingByAddress.set(ticket.address, left)
  }

  #release (ticket: Ticket): void {
    if (ticket.released) return
    if (ticket.pending) this.#unpend(ticket)
    ticket.released = true
    this.#open--
  }
}

/** ws's own errors for what a client sent (a frame over VOICE_MAX_MESSAGE_BYTES, an unmasked frame, a bad opcode…). */
const isClientProtocolError = (err: Error & { code?: unknown }) => typeof err.code === 'string' && err.code.startsWith('WS_ERR_')
/** The connection went away under the socket: the client's doing, not ours. */
const CONNECTION_GONE = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT'])

/**
 * @fastify/websocket's error handler for every stream socket: what a client sent wrong is logged as a warning and
 * a connection gone as information, so that `error` keeps meaning a fault of ours; the socket is ended either way
 * (each stream's own error listener ends its call).
 */
export function streamSocketError (this: unknown, err: Error & { code?: unknown }, socket: WebSocket, request: FastifyRequest): void {
  if (isClientProtocolError(err)) request.log.warn({ err: { message: err.message, code: err.code } }, 'a stream client broke the WebSocket protocol')
  else if (typeof err.code === 'string' && CONNECTION_GONE.has(err.code)) request.log.info({ code: err.code }, 'a stream connection was lost')
  else request.log.error({ err }, 'a call stream failed')
  socket.terminate()
}
