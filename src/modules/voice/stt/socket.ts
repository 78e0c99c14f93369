import type { Logger } from 'pino'
import WebSocket from 'ws'
import { ProviderError, redact } from '../providers.ts'
import type { SttEvent } from './types.ts'

/**
 * Opens a streaming recogniser's WebSocket and gives it to `attach` the moment it is open (a server's first
 * messages may come in the same packet as its handshake: listeners attached later would miss them). Rejects
 * with a ProviderError that says why it could not open: the status and body of a refused handshake (a bad
 * key: 401), the network failure, or `timeoutMs` without an answer. The key is never in the message.
 */
export async function openSocket (
  name: string, url: URL, headers: Record<string, string>, apiKey: string | undefined, timeoutMs: number, attach: (socket: WebSocket) => void
): Promise<void> {
  return await new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers, handshakeTimeout: timeoutMs })
    const refuse = (message: string) => {
      abandon(socket)
      socket.terminate()
      reject(new ProviderError(redact(`${name} ${message}`, apiKey)))
    }
    socket.once('open', () => {
      socket.removeAllListeners()
      attach(socket)
      resolve()
    })
    socket.once('unexpected-response', (request, response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => { if (body.length < 500) body += chunk })
      response.on('error', () => {})
      response.on('end', () => {
        // Deepgram names the failure in a header (dg-error) and in a JSON body ({ err_code, err_msg }).
        const header = response.headers['dg-error']
        const reason = (typeof header === 'string' ? header : '') || body.trim()
        refuse(`refused the connection: ${response.statusCode ?? 'no status'}${reason === '' ? '' : ` ${reason.slice(0, 200)}`}`)
        request.destroy()
      })
    })
    socket.once('error', (err) => {
      const code = (err as { code?: string }).code
      refuse(/timed out/i.test(err.message) ? `did not answer within ${timeoutMs} ms` : `cannot be reached: ${code ?? err.message}`)
    })
  })
}

/** Stops listening to a recogniser's socket that is done with; a late error of it must not be unhandled. */
export function abandon (socket: WebSocket | undefined): void {
  socket?.removeAllListeners()
  socket?.on('error', () => {})
}

/** Turns waiting for words that will not be given any: each resolves ''. */
export function release (turns: Array<{ resolve: (text: string) => void, timer: NodeJS.Timeout }>): void {
  for (const turn of turns) {
    clearTimeout(turn.timer)
    turn.resolve('')
  }
}

/**
 * A stream that failed: told as an `error` event (the session ends the call on it; the key is never in the
 * message) and logged, its socket dropped, and the turns waiting for its words released.
 */
export function failStream (
  message: string, apiKey: string | undefined, log: Logger, emit: (event: SttEvent) => void, socket: WebSocket | undefined, turns: Parameters<typeof release>[0]
): void {
  const error = new ProviderError(redact(message, apiKey))
  log.warn({ err: error.message }, 'the streaming recogniser failed')
  emit({ type: 'error', message: error.message })
  abandon(socket)
  socket?.terminate()
  release(turns)
}
