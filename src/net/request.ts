import type { Logger } from 'pino'
import { errors, request, type Agent } from 'undici'
import { isBlockedAddress, PRIVATE_ADDRESS_REFUSED } from './guard.ts'

export interface OutgoingRequest {
  method: string
  url: string
  /** Switchboard's own headers (User-Agent, X-Service-*): sent on every hop. */
  headers: Record<string, string>
  /** The action's headers, the receiver's credentials: sent to the URL's origin only, never after a redirect leaves it. */
  configured: Record<string, string>
  /** JSON text, for POST, PUT and PATCH (or of `contentType`: an OAuth token request is a form). */
  body?: string
  contentType?: string
  /** Names the request in the server log (a delivery id, a call id). */
  id: string
  /** Headers that sign each hop over what it sends (deliveries/signing.ts): computed per hop, as the URL may change. */
  sign?: (url: string, body: string | undefined) => Record<string, string>
}

export interface Outcome {
  ok: boolean
  status_code?: number
  error?: string
  duration_ms: number
  response_preview?: string
  /** A 429 or 503's Retry-After in seconds (the delta form; a date is not read). */
  retry_after_s?: number
}

/** What every request Switchboard sends to a user's receiver says it is (the specification's deliveries header). */
export const USER_AGENT = 'SERVICE-Webhooks/1.0'

export const MAX_REDIRECTS = 5
/** The start of the answer kept in the log (unless the caller asks for more). */
const PREVIEW_BYTES = 1024
/** Read at most this much of an answer, whatever the receiver sends (or the preview asked for, when longer). */
const READ_BYTES = 8192
const REDIRECTS = new Set([301, 302, 303, 307, 308])

/**
 * What users see when no answer came: one text for a refused connection, an address that is not public,
 * DNS and TLS failures alike, so that the delivery log and the test button cannot map the server's network.
 * The reason is logged on the server.
 */
export const UNREACHABLE = 'the receiver could not be reached'

/** The message a failed attempt shows, and the detailed reason for the server log. */
function describe (err: unknown, timeoutMs: number): { error: string, reason: string } {
  const error = err as Error & { code?: string, cause?: Error & { code?: string } }
  const reason = [error.code ?? error.cause?.code, error.message, error.cause?.message].filter((part) => part !== undefined && part !== '').join(': ')
  const code = error.code ?? error.cause?.code ?? ''
  if (error.name === 'TimeoutError' || error.name === 'AbortError' || error instanceof errors.HeadersTimeoutError ||
    error instanceof errors.BodyTimeoutError || code === 'UND_ERR_CONNECT_TIMEOUT') {
    return { error: `timed out after ${timeoutMs / 1000} s`, reason }
  }
  // Made before anything is sent (a header value a variable made invalid): about the action, not the network.
  if (error instanceof errors.InvalidArgumentError) return { error: `the request is invalid: ${error.message}`, reason }
  return { error: UNREACHABLE, reason }
}

/**
 * One attempt: the request, its redirects (at most 5; 303 turns into GET as HTTP says, every other redirect
 * re-sends the same method and body), and the start of the answer, all within `timeoutMs`. A redirect to
 * another origin loses the action's headers; one from HTTPS to HTTP is refused. A 2xx is success;
 * everything else is a failure with its status or error. `log` gets the reason of a failure without an
 * answer, with the delivery id and the receiver's origin (never a path or query: they carry variables and keys).
 * `typedUrl` (an action's Test): a refusal of the URL's own host says that private addresses are refused.
 * `previewBytes`: how much of the answer to keep (a live request returns it to the model). `signal`: gives up early.
 */
export async function send (agent: Agent, outgoing: OutgoingRequest, timeoutMs: number, log: Pick<Logger, 'info'>, options: { typedUrl?: boolean, previewBytes?: number, signal?: AbortSignal } = {}): Promise<Outcome> {
  const started = performance.now()
  const previewBytes = options.previewBytes ?? PREVIEW_BYTES
  const readBytes = Math.max(READ_BYTES, previewBytes)
  const signal = options.signal === undefined ? AbortSignal.timeout(timeoutMs) : AbortSignal.any([AbortSignal.timeout(timeoutMs), options.signal])
  let { method, url, body, configured } = outgoing
  let hop = 0
  try {
    for (; ; hop++) {
      const headers: Record<string, string> = {
        ...configured,
        ...outgoing.sign?.(url, body),
        ...outgoing.headers,
        ...(body === undefined ? {} : { 'content-type': outgoing.contentType ?? 'application/json; charset=utf-8' })
      }
      const response = await request(url, { method: method as 'POST', headers, body, dispatcher: agent, signal })
      const location = response.headers.location
      if (REDIRECTS.has(response.statusCode) && typeof location === 'string') {
        await response.body.dump()
        const fail = (error: string) => ({ ok: false, status_code: response.statusCode, error, duration_ms: elapsed(started) })
        if (hop === MAX_REDIRECTS) return fail(`more than ${MAX_REDIRECTS} redirects`)
        const next = new URL(location, url)
        const current = new URL(url)
        if (current.protocol === 'https:' && next.protocol !== 'https:') return fail('a redirect from HTTPS to HTTP was refused')
        if (next.origin !== current.origin) configured = {}
        url = next.toString()
        if (response.statusCode === 303 && method !== 'HEAD') {
          method = 'GET'
          body = undefined
        }
        continue
      }
      const chunks: Buffer[] = []
      let read = 0
      for await (const chunk of response.body) {
        chunks.push(chunk as Buffer)
        read += (chunk as Buffer).length
        if (read >= readBytes) break
      }
      // Breaking out of the loop destroys the rest of the answer; nothing more is read.
      const preview = Buffer.concat(chunks).subarray(0, previewBytes).toString('utf8')
      const ok = response.statusCode >= 200 && response.statusCode < 300
      const retryAfter = Number(response.headers['retry-after'])
      return {
        ok,
        status_code: response.statusCode,
        duration_ms: elapsed(started),
        ...(preview === '' ? {} : { response_preview: preview }),
        ...((response.statusCode === 429 || response.statusCode === 503) && Number.isFinite(retryAfter) && retryAfter >= 0 ? { retry_after_s: retryAfter } : {})
      }
    }
  } catch (err) {
    const { error, reason } = describe(err, timeoutMs)
    log.info({ requestId: outgoing.id, receiver: originOf(url), method, reason }, 'outgoing request got no answer')
    // The URL's own host, typed by the user: saying it is not public tells them only about their input.
    const typedHostRefused = options.typedUrl === true && hop === 0 && isBlockedAddress(err)
    return { ok: false, error: typedHostRefused ? PRIVATE_ADDRESS_REFUSED : error, duration_ms: elapsed(started) }
  }
}

const originOf = (url: string) => URL.parse(url)?.origin ?? 'invalid URL'

const elapsed = (started: number) => Math.round(performance.now() - started)
