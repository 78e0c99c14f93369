import { Agent, request } from 'undici'
import type { ProviderEndpoint } from '../../config.ts'

// What the clients of speech and language providers share: failures that name the provider and never
// hold its key, and the POST to an OpenAI-compatible HTTP API (engines/cascade.ts, stt/batch.ts).

/** A provider failed; the message names the provider and never holds its key. */
export class ProviderError extends Error {}

/** A network failure by its code (ECONNREFUSED), else its message. */
export function describe (error: unknown): string {
  const { code, cause } = error as { code?: string, cause?: { code?: string, message?: string } }
  return cause?.code ?? cause?.message ?? (code?.startsWith('E') === true ? code : undefined) ?? (error instanceof Error ? error.message : String(error))
}

/** `text` with the key masked: provider messages and socket errors may quote what they were sent. */
export function redact (text: string, apiKey: string | undefined): string {
  return apiKey === undefined || apiKey === '' ? text : text.replaceAll(apiKey, '…')
}

// One pool of kept-alive connections for every call of the process: three requests a turn each save a connect.
const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 256 })

/**
 * POSTs to a provider and yields its answer's body as it arrives. Fails with a ProviderError when the
 * answer is not 2xx, the provider is unreachable, or its first byte takes over `timeoutMs`; an abort
 * through `signal` (cancel, close) is thrown as it is.
 */
export async function * postToProvider (
  provider: string, endpoint: ProviderEndpoint, path: string, body: { type: string, body: string | Buffer }, options: { signal: AbortSignal, timeoutMs: number }
): AsyncGenerator<Uint8Array> {
  const { signal, timeoutMs } = options
  const silence = new AbortController()
  const timer = setTimeout(() => silence.abort(), timeoutMs)
  try {
    const response = await request(endpoint.url + path, {
      method: 'POST',
      dispatcher,
      headers: {
        'content-type': body.type,
        ...(endpoint.apiKey === undefined ? {} : { authorization: `Bearer ${endpoint.apiKey}` })
      },
      body: body.body,
      signal: AbortSignal.any([signal, silence.signal])
    })
    if (response.statusCode < 200 || response.statusCode > 299) {
      const text = await response.body.text().catch(() => '')
      throw new ProviderError(`${provider} provider answered ${response.statusCode}: ${redact(text.slice(0, 200), endpoint.apiKey)}`)
    }
    for await (const chunk of response.body) {
      // Only the first byte is timed: a model may think between two chunks for longer.
      clearTimeout(timer)
      yield chunk as Buffer
    }
  } catch (error) {
    if (signal.aborted || error instanceof ProviderError) throw error
    if (silence.signal.aborted) throw new ProviderError(`${provider} provider did not answer within ${timeoutMs} ms`)
    throw new ProviderError(`${provider} provider failed: ${redact(describe(error), endpoint.apiKey)}`)
  } finally {
    clearTimeout(timer)
  }
}
