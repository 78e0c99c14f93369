import type { Test } from 'tap'
import { setup, type TestContext } from './app.ts'
import { startOpenAiHttpStandin, type OpenAiHttpStandin } from './openai-http-standin.ts'
import { agentQuiet } from './poll.ts'
import { sid, startTwilioStandIn, type TwilioStandIn } from './twilio-stand-in.ts'
import type { MediaStream } from './twilio-voice.ts'
import { speech } from './voice-client.ts'

// The set-up of the tests that make phone calls through Twilio end to end on loopback: the Twilio stand-in (REST,
// signed webhooks, TwiML, Media Streams) with the installation's account and one number on offer, the
// OpenAI-compatible stand-in as speech and chat providers (cascade engine), and the server listening. PUBLIC_BASE_URL
// is a public https address that the stand-in reaches through a route to the server's loopback port, as Twilio
// would through a tunnel.

export const PUBLIC = 'https://voice.example.test'
export const ACCOUNT_SID = sid('AC')
export const AUTH_TOKEN = 'installation-auth-token'
/** The number the installation's Twilio account offers (buy it to take its calls). */
export const OUR_NUMBER = '+14155550100'
export const CALLER = '+14155550199'

export type PhoneContext = TestContext & { twilio: TwilioStandIn, openai: OpenAiHttpStandin }

/** The settings of an installation whose own Twilio account (ACCOUNT_SID) is the stand-in at `twilioUrl`. */
export function twilioSettings (twilioUrl: string): Record<string, string> {
  return {
    PHONE_CARRIER: 'twilio',
    TWILIO_ACCOUNT_SID: ACCOUNT_SID,
    TWILIO_AUTH_TOKEN: AUTH_TOKEN,
    TWILIO_API_URL: twilioUrl,
    // A name only the stand-in resolves (.test is not public): Twilio reaches it through the stand-in's route.
    TWILIO_ALLOW_PRIVATE_BASE_URL: 'true',
    PUBLIC_BASE_URL: PUBLIC
  }
}

/** The server with workers, on Twilio's stand-in; `env` adds or overrides settings. */
export async function listenWithTwilio (t: Test, env: Record<string, string> = {}): Promise<PhoneContext> {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(ACCOUNT_SID, AUTH_TOKEN)
  twilio.offer('US', [{ phone_number: OUR_NUMBER, area_code: '415', locality: 'San Francisco', region: 'CA' }])
  const openai = await startOpenAiHttpStandin(t)
  const ctx = await setup(t, {
    ...twilioSettings(twilio.url),
    VOICE_ENGINE: 'cascade',
    STT_URL: openai.url,
    LLM_URL: openai.url,
    TTS_URL: openai.url,
    DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true',
    DELIVERY_TIME_SCALE: '0.001',
    ...env
  }, { workers: true })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  twilio.route(PUBLIC, url)
  return { ...ctx, url, twilio, openai }
}

/** The caller says something once the agent has spoken after frame `after`; answers the frames heard before. */
export async function say (stream: MediaStream, after = 0): Promise<number> {
  await agentQuiet(stream, after)
  const heard = stream.frames.length
  await stream.sendAudio(speech(600, 700))
  return heard
}
