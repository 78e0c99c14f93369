// The voice benchmark's providers, in a process of their own: stand-ins that answer at once, whatever load the
// callers put on the benchmark's own process. Prints {"url": …} once listening (and "sttStreamUrl" with
// `deepgram`: Deepgram's live API with the corpus's recogniser, scripts/bench/recogniser.ts), then serves until
// killed; its request logs are emptied every second so that its memory stays flat.
// Usage: node standins.ts cascade|realtime [deepgram]
import type { Test } from 'tap'
import { startDeepgramStandin } from '../../test/helpers/deepgram-standin.ts'
import { startOpenAiHttpStandin } from '../../test/helpers/openai-http-standin.ts'
import { startRealtimeStandin } from '../../test/helpers/realtime-standin.ts'
import { deepgramHearing, Vocabulary } from './recogniser.ts'
import { loadCorpus } from './turns-corpus.ts'
import { DEEPGRAM_KEY } from './voice.ts'

const host = { teardown () {} } as unknown as Test

/** Deepgram's live API with the corpus's recogniser, for either engine (the realtime engine takes only words from it). */
async function recogniser (): Promise<string | undefined> {
  if (process.argv[3] !== 'deepgram') return undefined
  const deepgram = await startDeepgramStandin(host, DEEPGRAM_KEY)
  const vocabulary = new Vocabulary(loadCorpus())
  deepgram.hearing = (stream) => deepgramHearing(vocabulary, stream)
  setInterval(() => { deepgram.connections.length = 0 }, 1000)
  return deepgram.url
}

if (process.argv[2] === 'realtime') {
  const standin = await startRealtimeStandin(host)
  setInterval(() => { for (const list of [standin.events, standin.connections, standin.commits]) list.length = 0 }, 1000)
  console.log(JSON.stringify({ url: standin.url, sttStreamUrl: await recogniser() }))
} else {
  const standin = await startOpenAiHttpStandin(host)
  setInterval(() => { for (const list of Object.values(standin.requests)) list.length = 0 }, 1000)
  console.log(JSON.stringify({ url: standin.url, sttStreamUrl: await recogniser() }))
}
