import type { Logger } from 'pino'
import type { Test } from 'tap'
import { setup, type TestContext } from './app.ts'
import { startOpenAiHttpStandin, type OpenAiHttpStandin } from './openai-http-standin.ts'
import { startTelnyxStandIn, type TelnyxStandIn } from './telnyx-standin.ts'

// The set-up of the tests that make phone calls through Telnyx end to end on loopback: the Telnyx stand-in (Call
// Control commands, webhooks signed with its Ed25519 key, media streams) as the installation's account, with one
// number on offer, the OpenAI-compatible stand-in as speech and chat providers (cascade engine), and the server
// listening. PUBLIC_BASE_URL is a public https address that the stand-in reaches through a route to the server's
// loopback port, as Telnyx would through a tunnel.

export const PUBLIC = 'https://voice.example.test'
/** The number the installation's Telnyx account offers (buy it to take its calls). */
export const OUR_NUMBER = '+14155550100'

export type TelnyxContext = TestContext & { url: string, telnyx: TelnyxStandIn, openai: OpenAiHttpStandin }

/** The settings of an installation whose own Telnyx account is the stand-in. */
export function telnyxSettings (telnyx: TelnyxStandIn): Record<string, string> {
  return {
    PHONE_CARRIER: 'telnyx',
    TELNYX_API_URL: telnyx.url,
    TELNYX_API_KEY: telnyx.apiKey,
    TELNYX_CONNECTION_ID: telnyx.connectionId,
    TELNYX_PUBLIC_KEY: telnyx.publicKey,
    PUBLIC_BASE_URL: PUBLIC
  }
}

/** The server with workers, on Telnyx's stand-in; `env` adds or overrides settings. */
export async function listenWithTelnyx (t: Test, env: Record<string, string> = {}, options: { logger?: Logger } = {}): Promise<TelnyxContext> {
  const telnyx = await startTelnyxStandIn(t)
  telnyx.offer([{ phone_number: OUR_NUMBER }])
  const openai = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, {
    ...telnyxSettings(telnyx),
    VOICE_ENGINE: 'cascade',
    STT_URL: openai.url,
    LLM_URL: openai.url,
    TTS_URL: openai.url,
    ...env
  }, { workers: true, ...options })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  telnyx.route(PUBLIC, url)
  return { ...ctx, url, telnyx, openai }
}
