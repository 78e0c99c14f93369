import { errors, request, type Agent } from 'undici'
import { BlockedAddressError } from './network.ts'

export interface OutgoingRequest {
  method: string
  url: string
  headers: Record<string, string>
  /** JSON text, for POST, PUT and PATCH. */
  body?: string
}

export interface Outcome {
  ok: boolean
  status_code?: number
  error?: string
  duration_ms: number
  response_preview?: string
}

export const MAX_REDIRECTS = 5
/** The start of the answer kept in the log. */
const PREVIEW_BYTES = 1024
/** Read at most this much of an answer, whatever the receiver sends. */
const READ_BYTES = 8192
const REDIRECTS = new Set([301, 302, 303, 307, 308])

/** The message a failed attempt logs: what a person needs to fix the receiver. */
function describe (err: unknown, timeoutMs: number): string {
  const error = err as Error & { code?: string, cause?: Error & { code?: string } }
  if (error instanceof BlockedAddressError || error.cause instanceof BlockedAddressError) return (error.cause ?? error).message
  if (error.name === 'TimeoutError' || error.name === 'AbortError' || error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) {
    return `timed out after ${timeoutMs / 1000} s`
  }
  const code = error.code ?? error.cause?.code ?? ''
  if (code === 'ECONNREFUSED') return 'connection refused'
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'connection closed by the receiver'
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'DNS lookup failed'
  if (/CERT|TLS|SSL|SELF_SIGNED|VERIFY/i.test(code)) return `TLS error: ${code}`
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return `timed out after ${timeoutMs / 1000} s`
  return error.message === '' ? code : error.message
}

/**
 * One attempt: the request, its redirects (at most 5; 303 turns into GET as HTTP says, every other redirect
 * re-sends the same method and body), and the start of the answer, all within `timeoutMs`. A 2xx is success;
 * everything else is a failure with its status or error.
 */
export async function send (agent: Agent, outgoing: OutgoingRequest, timeoutMs: number): Promise<Outcome> {
  const started = performance.now()
  const signal = AbortSignal.timeout(timeoutMs)
  let { method, url, body } = outgoing
  let headers = outgoing.headers
  try {
    for (let hop = 0; ; hop++) {
      const response = await request(url, { method: method as 'POST', headers, body, dispatcher: agent, signal })
      const location = response.headers.location
      if (REDIRECTS.has(response.statusCode) && typeof location === 'string') {
        await response.body.dump()
        if (hop === MAX_REDIRECTS) {
          return { ok: false, status_code: response.statusCode, error: `more than ${MAX_REDIRECTS} redirects`, duration_ms: elapsed(started) }
        }
        url = new URL(location, url).toString()
        if (response.statusCode === 303 && method !== 'HEAD') {
          method = 'GET'
          body = undefined
          headers = Object.fromEntries(Object.entries(headers).filter(([name]) => name.toLowerCase() !== 'content-type'))
        }
        continue
      }
      const chunks: Buffer[] = []
      let read = 0
      for await (const chunk of response.body) {
        chunks.push(chunk as Buffer)
        read += (chunk as Buffer).length
        if (read >= READ_BYTES) break
      }
      // Breaking out of the loop destroys the rest of the answer; nothing more is read.
      const preview = Buffer.concat(chunks).subarray(0, PREVIEW_BYTES).toString('utf8')
      const ok = response.statusCode >= 200 && response.statusCode < 300
      return { ok, status_code: response.statusCode, duration_ms: elapsed(started), ...(preview === '' ? {} : { response_preview: preview }) }
    }
  } catch (err) {
    return { ok: false, error: describe(err, timeoutMs), duration_ms: elapsed(started) }
  }
}

const elapsed = (started: number) => Math.round(performance.now() - started)
