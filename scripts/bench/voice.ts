// What the voice benchmarks (bench:voice, bench:turns) share: the providers' stand-ins in a process of their own,
// the server's settings for them, Twilio as a stand-in in the benchmark's process, and API calls with a key.
import { spawn } from 'node:child_process'
import path from 'node:path'
import { createTwilioStandIn, sid } from '../../test/helpers/twilio-stand-in.ts'

export type EngineName = 'cascade' | 'realtime'
/** The cascade's recogniser: today's request after each turn ("Hello."), or Deepgram's live API with the corpus's recogniser. */
export type SttName = 'batch' | 'deepgram'
export const DEEPGRAM_KEY = 'bench-deepgram-key'

/**
 * The stand-ins of an engine's providers (scripts/bench/standins.ts) in a process of their own, so that the
 * callers' load on the benchmark's process never delays their answers. They answer at once: "Hello." heard (with
 * `deepgram`, the cascade hears the corpus's words: scripts/bench/recogniser.ts), "You said: Hello." spoken (0.8 s;
 * the realtime stand-in's "Hi, how can I help?" 0.95 s).
 */
export async function startStandins (engine: EngineName, stt: SttName = 'batch'): Promise<Standins> {
  const child = spawn(process.execPath, [path.join(import.meta.dirname, 'standins.ts'), engine, stt], { stdio: ['ignore', 'pipe', 'inherit'] })
  const urls = await new Promise<{ url: string, sttStreamUrl?: string }>((resolve, reject) => {
    child.stdout.once('data', (line: Buffer) => resolve(JSON.parse(line.toString()) as { url: string, sttStreamUrl?: string }))
    child.once('exit', (code) => reject(new Error(`the stand-ins exited with ${code}`)))
  })
  return { engine, ...urls, stop: () => child.kill() }
}

export interface Standins { engine: EngineName, url: string, sttStreamUrl?: string, stop: () => void }

/** The server's provider settings for an engine's stand-ins. */
export const providerEnv = ({ engine, url, sttStreamUrl }: Standins): Record<string, string> => ({
  ...(engine === 'realtime' ? { REALTIME_URL: url } : { LLM_URL: url, TTS_URL: url, STT_URL: url }),
  ...(sttStreamUrl === undefined ? {} : { STT_PROVIDER: 'deepgram', STT_STREAM_URL: sttStreamUrl, DEEPGRAM_API_KEY: DEEPGRAM_KEY })
})

/**
 * Phone calls: Twilio is a stand-in in the benchmark's process (it is the callers' side of the line) offering
 * `numbers` for sale, reached by the server through its REST API and reaching the server at PUBLIC_BASE_URL
 * through a route (`route(serverUrl)`), as through a tunnel. Its records of requests and webhooks are emptied
 * every second, so that its memory stays flat.
 */
export async function benchTwilio (numbers: string[]) {
  const standIn = await createTwilioStandIn()
  const account = { sid: sid('AC'), token: 'bench-auth-token' }
  const publicBaseUrl = 'https://voice.bench.test'
  standIn.addAccount(account.sid, account.token)
  standIn.offer('US', numbers.map((number) => ({ phone_number: number, area_code: number.slice(2, 5), locality: 'San Francisco', region: 'CA' })))
  const timer = setInterval(() => { standIn.requests.length = 0; standIn.webhooks.length = 0 }, 1000)
  timer.unref()
  return {
    standIn,
    env: { PHONE_CARRIER: 'twilio', TWILIO_ACCOUNT_SID: account.sid, TWILIO_AUTH_TOKEN: account.token, TWILIO_API_URL: standIn.url, TWILIO_ALLOW_PRIVATE_BASE_URL: 'true', PUBLIC_BASE_URL: publicBaseUrl },
    route: (serverUrl: string) => standIn.route(publicBaseUrl, serverUrl),
    close: async () => { clearInterval(timer); await standIn.close() }
  }
}

/** POSTs to the API with an account's key; answers the body of its 201. */
export function apiPoster (key: string) {
  const headers = { 'x-api-key': key, 'content-type': 'application/json' }
  return async (url: string, path: string, body: unknown): Promise<any> => {
    const res = await fetch(url + path, { method: 'POST', headers, body: JSON.stringify(body) })
    if (res.status !== 201) throw new Error(`POST ${path} answered ${res.status}: ${await res.text()}`)
    return await res.json()
  }
}
