// npm run bench:turns [-- --transport browser|twilio|both] [--engine cascade|realtime|both] [--stt deepgram|batch] [--cases <regex>] [--smoke]
// — turn-taking, scored from outside. Synthetic callers with known truths (test/fixtures/turns/, made by
// scripts/turns-corpus.ts) phone or web-call agents of a server of its own (CALL_RUNTIME=voice) whose providers
// are stand-ins that answer at once, in real time (one 20 ms frame every 20 ms), over the browser's protocol and
// Twilio's Media Streams (µ-law 8 kHz). What the server does is read where a caller sees it: agent audio arriving
// and stopping, `clear` (the far end drops what it holds: a barge-in), and the user turns of the stored
// transcript. Figures: end-of-turn latency after the true end of speech, false cut-offs (a pause inside an
// utterance taken for its end), false barge-ins (a backchannel or a noise that stops the agent), missed
// barge-ins, barge-in reaction time, callers never heard; each without and with background noise (docs/voice.md,
// "Measuring turn-taking"). Ends with one JSON line.
import { execFileSync } from 'node:child_process'
import { performance } from 'node:perf_hooks'
import { createDb } from '../src/db/database.ts'
import type { TranscriptItem } from '../src/db/schema.ts'
import { FRAME_MS } from '../src/modules/voice/audio.ts'
import { createApiKey, createUser, findUser } from '../src/modules/users/queries.ts'
import { openWebCall } from '../test/helpers/voice-client.ts'
import { benchDatabase, quantile, startServer, table } from './bench/lib.ts'
import { percentiles, rate, round, scoreUtterance, spans } from './bench/scoring.ts'
import { CallerAudio, eventAudio, loadCorpus, type Case, type TalkCase, type TurnCase } from './bench/turns-corpus.ts'
import { apiPoster, benchTwilio, providerEnv, startStandins, type EngineName, type SttName } from './bench/voice.ts'
import { readArgs, usageError } from './args.ts'

const BENCH = {
  name: 'bench:turns',
  usage: `usage: npm run bench:turns [-- --transport browser|twilio|both] [--engine cascade|realtime|both] [--stt deepgram|batch] [--cases <regex>] [--smoke]

Turn-taking scored from outside: synthetic callers with known truths (test/fixtures/turns/) talk in real time
to agents of a server of its own whose providers answer at once; end-of-turn latency, false cut-offs, false
and missed barge-ins, barge-in reaction time and callers never heard, without and with background noise.

  --transport browser|twilio|both   the browser's WebSocket, phone calls through a Twilio stand-in, or both (default both)
  --engine cascade|realtime|both    the engine of the agents (default cascade)
  --stt deepgram|batch              the recogniser: Deepgram's live API with a stand-in that hears the corpus's
                                    words (default; the realtime engine takes only the words of it), or none
                                    streaming (the cascade's request after each turn, heard as "Hello.")
  --cases <regex>                   only the cases whose id matches (ids are in test/fixtures/turns/corpus.json)
  --smoke                           five cases, to check that the harness works (CI)
  --concurrency <n>                 calls at once (default 6)
  --details                         one line per call: what was played and what the server did
  -h, --help                        this text`
}

const { values } = readArgs(BENCH, {
  options: {
    transport: { type: 'string', default: 'both' },
    engine: { type: 'string', default: 'cascade' },
    stt: { type: 'string', default: 'deepgram' },
    cases: { type: 'string' },
    smoke: { type: 'boolean', default: false },
    concurrency: { type: 'string', default: '6' },
    details: { type: 'boolean', default: false }
  }
})
type Transport = 'browser' | 'twilio'
const both = <T extends string>(value: string, names: T[], option: string): T[] => {
  if (value === 'both') return names
  if (!(names as string[]).includes(value)) usageError(BENCH, `--${option} is ${names.join(', ')} or both, got ${value}`)
  return [value as T]
}
const transports = both<Transport>(values.transport, ['browser', 'twilio'], 'transport')
const engines = both<EngineName>(values.engine, ['cascade', 'realtime'], 'engine')
if (!['deepgram', 'batch'].includes(values.stt)) usageError(BENCH, `--stt is deepgram or batch, got ${values.stt}`)
const stt = values.stt as SttName
const concurrency = Number(values.concurrency)
if (!Number.isInteger(concurrency) || concurrency < 1) usageError(BENCH, `--concurrency is a number of calls, got ${values.concurrency}`)
let filter: RegExp | undefined
try {
  filter = values.cases === undefined ? undefined : new RegExp(values.cases)
} catch {
  usageError(BENCH, `--cases is a regular expression, got ${values.cases}`)
}

/** A turn's answer is awaited this long after its true end before the caller hangs up. */
const TAIL_MS = 3000
/** A talk case goes on this long after its event, for a stop to show. */
const TALK_TAIL_MS = 2500
/** A talk case whose agent played this much less of its begin message than the control has been stopped. */
const SHORTFALL_MS = 200
/** The begin message's first frame must come within this long. */
const AGENT_TIMEOUT_MS = 10_000
/** One of each kind: a pause that today's detector cuts, a finished sentence, a backchannel, a barge-in, one in noise. */
const SMOKE_CASES = ['pause-en-number-700', 'finished-en-cancel', 'backchannel-en-yeah', 'barge-in-en-wait', 'finished-en-cancel-pink-10db']
/** What the agents say first (talk cases speak over it): 9-10 s on the cascade, 3 s from the realtime stand-in. */
const BEGIN_MESSAGES = {
  en: 'Thank you for calling Switchboard Dental. I can book, move or cancel an appointment for you. We are open Monday to Friday from eight to six. How can I help you today?',
  de: 'Danke für Ihren Anruf bei der Zahnarztpraxis Switchboard. Ich kann Termine für Sie buchen, verschieben oder absagen. Wir haben Montag bis Freitag von acht bis achtzehn Uhr geöffnet. Wie kann ich Ihnen helfen?'
}
const LANGUAGES = { en: 'en-US', de: 'de-DE' }

const loaded = loadCorpus()
const { corpus } = loaded
const chosen = corpus.cases.filter((c) => values.smoke ? SMOKE_CASES.includes(c.id) : filter === undefined || filter.test(c.id))
if (chosen.length === 0) usageError(BENCH, `no case matches ${values.cases}`)
const isControl = (c: Case) => c.kind === 'talk' && c.event === undefined
// Each talk case is scored against the control of its language (the whole begin message, nobody talking over it).
const controls = corpus.cases.filter((c) => isControl(c) && chosen.some((other) => other.kind === 'talk' && other.language === c.language))

const sleep = async (ms: number) => await new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))
const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: import.meta.dirname, encoding: 'utf8' }).trim()

// The account, the stand-ins, Twilio, the server, and one agent per engine, language and kind of case.

const database = await benchDatabase()
const db = createDb(database.pool)
const user = await findUser(db, 'bench-turns@localhost') ?? await createUser(db, { email: 'bench-turns@localhost', name: 'Turn-taking benchmark' })
await db.updateTable('api_keys').set({ revoked_at: new Date() }).where('user_id', '=', user.id).where('revoked_at', 'is', null).execute()
const api = apiPoster((await createApiKey(db, user.id, { name: 'bench-turns' })).key)

const standins = await Promise.all(engines.map(async (engine) => await startStandins(engine, stt)))
interface AgentKey { engine: EngineName, language: Case['language'], kind: Case['kind'] }
const agentKeys: AgentKey[] = engines.flatMap((engine) => (['en', 'de'] as const).flatMap((language) => (['turn', 'talk'] as const).map((kind) => ({ engine, language, kind }))))
const numbers = agentKeys.map((_, i) => `+14155550${200 + i}`)
const phone = transports.includes('twilio') ? await benchTwilio(numbers) : undefined
const server = await startServer('src/main.ts', {
  DATABASE_URL: database.url,
  CALL_RUNTIME: 'voice',
  VOICE_ENGINE: engines[0],
  ...Object.assign({}, ...standins.map(providerEnv)),
  ...phone?.env
}, '/health')
phone?.route(server.url)
if (phone !== undefined) await db.deleteFrom('phone_numbers').where('phone_number', 'in', numbers).execute()
const agents = new Map<string, { id: string, number: string }>()
const keyOf = (k: AgentKey) => `${k.engine}/${k.language}/${k.kind}`
for (const [i, k] of agentKeys.entries()) {
  const llm = await api(server.url, '/v1/llm', {
    engine: k.engine,
    begin_message: k.kind === 'talk' ? BEGIN_MESSAGES[k.language] : null,
    general_prompt: 'You are a receptionist. Answer in one short sentence.'
  })
  const agent = await api(server.url, '/v1/agent', {
    agent_name: `Turn-taking benchmark (${keyOf(k)})`,
    llm_id: llm._id,
    // The default interruption_sensitivity (0.5); no reminders or limits inside a case.
    call_settings: { language: LANGUAGES[k.language], reminder_after_seconds: 120, max_call_duration_minutes: 15 }
  })
  if (phone !== undefined) await api(server.url, '/v1/phone-number/buy', { phone_number: numbers[i], inbound_agent_id: agent._id })
  agents.set(keyOf(k), { id: agent._id, number: numbers[i] })
}

// One call: the caller's line, whichever the transport.

interface Line {
  send: (frame: Int16Array) => void
  /** Agent audio received so far: arrival (performance.now()) and length of each frame. */
  agentFrames: () => Array<{ at: number, ms: number }>
  /** Arrivals of `clear`. */
  clears: () => number[]
  hangup: () => Promise<void>
  callId: () => Promise<string>
}

async function openLine (transport: Transport, agent: { id: string, number: string }): Promise<Line> {
  if (transport === 'browser') {
    const call = await api(server.url, '/v1/call/make-web-call', { agent_id: agent.id })
    const client = await openWebCall(server.url, call.access_token)
    return {
      send: (frame) => { void client.sendAudio(frame) },
      agentFrames: () => client.frames.map((f) => ({ at: f.at, ms: f.pcm.length * 1000 / 16_000 })),
      clears: () => client.events.filter((e) => e.type === 'clear').map((e) => e.at),
      hangup: async () => {
        client.hangup()
        await Promise.race([client.closed, sleep(10_000)])
      },
      callId: async () => call._id
    }
  }
  const { call } = await phone!.standIn.dialIn(`+1415555${String(Math.floor(Math.random() * 10_000)).padStart(4, '0')}`, agent.number)
  const stream = await call.waitForStream()
  return {
    send: (frame) => { void stream.sendAudio(frame) },
    agentFrames: () => stream.frames.map((f) => ({ at: f.at, ms: f.pcm.length * 1000 / 8000 })),
    clears: () => stream.messages.filter((m) => m.event === 'clear').map((m) => m.at),
    hangup: async () => { await stream.hangup() },
    callId: async () => (await db.selectFrom('calls').select('id').where('carrier_call_id', '=', call.sid).executeTakeFirstOrThrow()).id
  }
}

/** The user turns of a call's stored transcript, once it has ended: when the server heard each begin (performance.now() time), and its words. */
async function userTurns (callId: string): Promise<Array<{ at: number, words: string }>> {
  for (let i = 0; i < 300; i++) {
    const row = await db.selectFrom('calls').select(['call_status', 'transcription']).where('id', '=', callId).executeTakeFirstOrThrow()
    if (row.call_status !== 'started') {
      return ((row.transcription ?? []) as TranscriptItem[]).filter((item) => item.speaker === 'user').map((item) => ({ at: item.timestamp - performance.timeOrigin, words: item.content }))
    }
    await sleep(100)
  }
  throw new Error('the call did not end within 30 s of the hang-up')
}

interface Run { c: Case, transport: Transport, engine: EngineName }

/** What happened in one call. Times are performance.now(); `wall` turns ms of the caller's audio into them. */
interface Played {
  run: Run
  wall: (ms: number) => number
  frames: Array<{ at: number, ms: number }>
  clears: number[]
  turns: Array<{ at: number, words: string }>
  /** When the caller's audio ended. */
  end: number
  /** A talk case's event: where it was placed in the caller's audio, and its length. */
  event?: { ms: number, length: number }
}

/**
 * Plays a case in real time: frame n of the caller's audio (its ms 20n to 20n + 20) leaves once it has been
 * spoken, at t0 + 20(n + 1), as from a microphone. A talk case's event is placed once the agent's first frame
 * has come, `after_agent_ms` later; the control plays until the begin message has ended.
 */
async function play (run: Run): Promise<Played> {
  const { c } = run
  const line = await openLine(run.transport, agents.get(keyOf({ engine: run.engine, language: c.language, kind: c.kind }))!)
  const audio = new CallerAudio(loaded, c)
  const sent: number[] = []
  let endMs = c.kind === 'turn' ? c.truth.speech_end_ms + TAIL_MS : Infinity
  let event: Played['event']
  const t0 = performance.now()
  try {
    for (let n = 0; n * FRAME_MS < endMs; n++) {
      await sleep(t0 + (n + 1) * FRAME_MS - performance.now())
      if (c.kind === 'talk') {
        const frames = line.agentFrames()
        if (frames.length === 0) {
          if (n * FRAME_MS > AGENT_TIMEOUT_MS) throw new Error(`no begin message within ${AGENT_TIMEOUT_MS} ms`)
        } else if (c.event === undefined) {
          if (performance.now() - frames.at(-1)!.at > 1500 || n * FRAME_MS > 60_000) endMs = n * FRAME_MS
        } else if (event === undefined) {
          const pcm = eventAudio(loaded, c.event)
          const at = Math.max(n * FRAME_MS, Math.ceil((frames[0].at + c.event.after_agent_ms - t0) / FRAME_MS) * FRAME_MS)
          audio.place(pcm, at)
          event = { ms: at, length: pcm.length / 16 }
          endMs = at + event.length + TALK_TAIL_MS
        }
      }
      line.send(audio.frame(n))
      sent.push(performance.now())
    }
  } finally {
    await line.hangup()
  }
  const wall = (ms: number) => {
    const n = Math.min(sent.length - 1, Math.floor(ms / FRAME_MS))
    return sent[n] - FRAME_MS + (ms - n * FRAME_MS)
  }
  return { run, wall, frames: line.agentFrames(), clears: line.clears(), turns: await userTurns(await line.callId()), end: sent.at(-1)!, event }
}

// Scoring.

interface Outcome {
  run: Run
  error?: string
  /** Turn cases. */
  heard?: boolean
  cutOff?: boolean
  eotMs?: number
  turns?: number
  /** Talk cases. */
  stopped?: boolean
  /** Stopped before the event began (by the background noise). */
  early?: boolean
  paused?: boolean
  /** How much less of the begin message played than in the control: how long the agent was held. */
  pauseMs?: number
  reactionMs?: number
  /** The control: how much of the begin message played. */
  playedMs?: number
  note?: string
  /** The words of the user turns the server stored (--details). */
  said?: string[]
}

function scoreTurn (played: Played, c: TurnCase): Outcome {
  return { run: played.run, ...scoreUtterance(played.wall(c.truth.speech_start_ms), played.wall(c.truth.speech_end_ms), spans(played.frames, played.clears), played.turns.map((turn) => turn.at)) }
}

function scoreTalk (played: Played, c: TalkCase, controlMs: number | undefined): Outcome {
  const heard = spans(played.frames, played.clears)
  if (heard.length === 0) return { run: played.run, error: 'no agent audio' }
  const first = heard[0].start
  const clear = played.clears.find((at) => at >= first)
  const playedMs = heard.reduce((sum, s) => sum + s.ms, 0)
  if (c.event === undefined) return { run: played.run, playedMs, stopped: clear !== undefined }
  // Until the end of the call the begin message (as long as the control's) would have played, had nothing stopped it.
  const expected = Math.min(controlMs ?? Infinity, played.end - first)
  // Stopped: cleared, or its audio ended for good before then. Held and resumed is a pause, not a stop: its length is pauseMs.
  const stopped = clear !== undefined || heard.at(-1)!.end < first + expected - SHORTFALL_MS
  const paused = !stopped && heard.length > 1 && playedMs < expected - SHORTFALL_MS
  const onset = played.wall(played.event!.ms)
  // When the caller stopped hearing the agent: the end of the stretch a clear cut (or the one it came after), else the first to end after the onset.
  const silent = clear !== undefined ? heard.findLast((s) => s.start <= clear)!.end : heard.find((s) => s.end >= onset)?.end ?? heard.at(-1)!.end
  const early = stopped && silent < onset
  return {
    run: played.run,
    stopped,
    early,
    // Held and resumed: a break before the begin message had played out (what comes after it is an answer).
    paused,
    pauseMs: paused ? expected - playedMs : undefined,
    reactionMs: stopped && !early ? silent - onset : undefined,
    note: stopped ? `${clear === undefined ? 'audio stopped' : 'cleared'} ${Math.round(silent - onset)} ms after the event began` : undefined
  }
}

// The runs: the controls first (every talk case is scored against its control), then the cases.

const runsOf = (cases: Case[]) => engines.flatMap((engine) => transports.flatMap((transport) => cases.map((c) => ({ c, transport, engine }))))
const total = runsOf(chosen.filter((c) => !isControl(c))).length + runsOf(controls).length
let done = 0
async function runAll (runs: Run[], score: (played: Played) => Outcome): Promise<Outcome[]> {
  const queue = [...runs]
  const outcomes: Outcome[] = []
  await Promise.all(Array.from({ length: Math.min(concurrency, runs.length) }, async () => {
    for (let run = queue.shift(); run !== undefined; run = queue.shift()) {
      try {
        const played = await play(run)
        outcomes.push({ ...score(played), said: played.turns.map((turn) => turn.words) })
      } catch (err) {
        outcomes.push({ run, error: err instanceof Error ? err.message : String(err) })
      }
      if (++done % 20 === 0) process.stdout.write(`  ${done}/${total} calls\n`)
    }
  }))
  return outcomes
}

process.stdout.write(`bench:turns: ${total} calls (${engines.join(', ')} engine; ${transports.join(', ')}), ${Math.min(concurrency, total)} at once, in real time\n`)
const controlOutcomes = await runAll(runsOf(controls), (played) => scoreTalk(played, played.run.c as TalkCase, undefined))
const controlKey = (run: Run) => `${run.engine}/${run.transport}/${run.c.language}`
const controlMs = new Map(controlOutcomes.filter((o) => o.playedMs !== undefined).map((o) => [controlKey(o.run), o.playedMs!]))
const outcomes = await runAll(runsOf(chosen.filter((c) => !isControl(c))), (played) => played.run.c.kind === 'turn'
  ? scoreTurn(played, played.run.c)
  : scoreTalk(played, played.run.c, controlMs.get(controlKey(played.run))))

await server.stop()
for (const s of standins) s.stop()
await phone?.close()
await database.stop()

// Figures.

const has = (o: Outcome, tag: string) => o.run.c.tags.includes(tag)
const noisy = (o: Outcome) => o.run.c.noise !== undefined
const snr = (o: Outcome) => o.run.c.noise?.snr_db

/** The benchmark's figures over some outcomes (docs/voice.md, "Measuring turn-taking"). */
function figures (list: Outcome[]) {
  const turns = list.filter((o) => o.run.c.kind === 'turn')
  // A caller never heard is not cut off: unheard_rate counts them.
  const paused = turns.filter((o) => (o.run.c as TurnCase).truth.pauses.length > 0 && o.heard)
  const talkOver = list.filter((o) => o.run.c.kind === 'talk' && !(o.run.c as TalkCase).truth.barge_in)
  const bargeIns = list.filter((o) => o.run.c.kind === 'talk' && (o.run.c as TalkCase).truth.barge_in && o.early !== true)
  return {
    eot_ms: percentiles(turns.flatMap((o) => o.eotMs ?? [])),
    false_cutoff_rate: rate(paused.filter((o) => o.cutOff).length, paused.length),
    false_barge_in_rate: rate(talkOver.filter((o) => o.stopped).length, talkOver.length),
    missed_barge_in_rate: rate(bargeIns.filter((o) => !o.stopped).length, bargeIns.length),
    barge_in_reaction_ms: percentiles(bargeIns.flatMap((o) => o.reactionMs ?? [])),
    unheard_rate: rate(turns.filter((o) => !o.heard).length, turns.length),
    pause_rate: rate(talkOver.filter((o) => o.paused).length, talkOver.length),
    pause_ms: percentiles(talkOver.flatMap((o) => o.pauseMs ?? []))
  }
}

const scored = outcomes.filter((o) => o.error === undefined)
const errors = [...controlOutcomes, ...outcomes].filter((o) => o.error !== undefined)
const fraction = (count: number, of: number) => of === 0 ? '-' : `${count}/${of}`
const ms = (values: number[], q: number) => String(round(quantile([...values].sort((a, b) => a - b), q)) ?? '-')

if (values.details) {
  process.stdout.write('\n')
  for (const o of [...controlOutcomes, ...outcomes]) {
    const what = o.error !== undefined
      ? `ERROR ${o.error}`
      : o.run.c.kind === 'turn'
        ? `${o.heard === true ? 'heard' : 'NOT HEARD'}${o.cutOff === true ? ', CUT OFF' : ''}, ${o.turns} user turn(s), eot ${o.eotMs === undefined ? '-' : Math.round(o.eotMs)} ms${o.note === undefined ? '' : ` (${o.note})`}`
        : o.playedMs !== undefined
          ? `control: ${Math.round(o.playedMs)} ms of the begin message played${o.stopped === true ? ', STOPPED' : ''}`
          : `${o.stopped === true ? (o.early === true ? 'STOPPED before the event' : 'STOPPED') : 'went on'}${o.paused === true ? ' (paused)' : ''}${o.note === undefined ? '' : ` (${o.note})`}`
    const said = o.said === undefined || o.said.length === 0 ? '' : `; heard ${o.said.map((words) => JSON.stringify(words)).join(', ')}`
    process.stdout.write(`${o.run.engine.padEnd(8)} ${o.run.transport.padEnd(7)} ${o.run.c.id.padEnd(40)} ${what}${said}\n`)
  }
}

const conditions = (list: Outcome[]) => [
  ['clean', list.filter((o) => !noisy(o))],
  ['20 dB', list.filter((o) => snr(o) === 20)],
  ['10 dB', list.filter((o) => snr(o) === 10)]
] as const
const turnGroups = (list: Outcome[]) => [
  ...[300, 500, 700, 1000].map((pause) => [`pause ${pause} ms`, list.filter((o) => has(o, 'pause') && (o.run.c as TurnCase).truth.pauses[0].ms === pause)] as const),
  ['dictation', list.filter((o) => has(o, 'dictation'))] as const,
  ['finished', list.filter((o) => has(o, 'finished'))] as const
]
const turnRows = conditions(scored.filter((o) => o.run.c.kind === 'turn')).flatMap(([condition, list]) => turnGroups(list).filter(([, group]) => group.length > 0).map(([name, group]) => ({
  turns: `${name}${condition === 'clean' ? '' : `, ${condition}`}`,
  calls: group.length,
  'cut off': has(group[0], 'finished') ? fraction(group.filter((o) => o.cutOff).length, group.length) + ' *' : fraction(group.filter((o) => o.cutOff).length, group.length),
  'not heard': fraction(group.filter((o) => !o.heard).length, group.length),
  'eot p50 ms': ms(group.flatMap((o) => o.eotMs ?? []), 0.5),
  'eot p90 ms': ms(group.flatMap((o) => o.eotMs ?? []), 0.9)
})))
const talkRows = conditions(scored.filter((o) => o.run.c.kind === 'talk')).flatMap(([condition, list]) => (['backchannel', 'noise', 'barge-in'] as const).map((tag) => [tag, list.filter((o) => has(o, tag))] as const)
  .filter(([, group]) => group.length > 0).map(([tag, group]) => ({
    'while the agent talks': `${tag}${condition === 'clean' ? '' : `, ${condition}`}`,
    calls: group.length,
    stopped: fraction(group.filter((o) => o.stopped).length, group.length),
    'stopped early': fraction(group.filter((o) => o.early).length, group.length),
    paused: fraction(group.filter((o) => o.paused).length, group.length),
    'reaction p50 ms': ms(group.flatMap((o) => o.reactionMs ?? []), 0.5),
    'reaction p90 ms': ms(group.flatMap((o) => o.reactionMs ?? []), 0.9)
  })))
const summaryRows = [...transports.map((t) => [t, scored.filter((o) => o.run.transport === t)] as const), ...(transports.length > 1 ? [['all', scored] as const] : [])]
  .flatMap(([name, list]) => ([['clean', list.filter((o) => !noisy(o))], ['noisy', list.filter(noisy)]] as const).map(([condition, group]) => {
    const f = figures(group)
    const share = (r: number | null) => r === null ? '-' : `${(r * 100).toFixed(1)}%`
    return {
      calls: `${name}, ${condition}`,
      'eot p50/p90 ms': `${f.eot_ms.p50 ?? '-'}/${f.eot_ms.p90 ?? '-'}`,
      'false cut-offs': share(f.false_cutoff_rate),
      'false barge-ins': share(f.false_barge_in_rate),
      'missed barge-ins': share(f.missed_barge_in_rate),
      'reaction p50/p90 ms': `${f.barge_in_reaction_ms.p50 ?? '-'}/${f.barge_in_reaction_ms.p90 ?? '-'}`,
      'not heard': share(f.unheard_rate)
    }
  }))

process.stdout.write(`\n${engines.join(' and ')} engine over ${transports.join(' and ')}${engines.includes('cascade') ? `, ${stt} recogniser` : ''}; commit ${commit}; providers answer at once\n`)
for (const o of controlOutcomes.filter((c) => c.error === undefined)) {
  process.stdout.write(`control (${controlKey(o.run)}): ${Math.round(o.playedMs!)} ms of the begin message heard${o.stopped === true ? ', STOPPED by silence: the figures below are wrong' : ''}\n`)
}
if (turnRows.length > 0) process.stdout.write(`\n${table(turnRows)}\n${turnRows.some((r) => r['cut off'].endsWith('*')) ? '* a finished sentence has no pause: not in the false cut-off rate\n' : ''}`)
if (talkRows.length > 0) process.stdout.write(`\n${table(talkRows)}\n`)
process.stdout.write(`\n${table(summaryRows)}\n`)
if (errors.length > 0) {
  process.stdout.write(`\n${errors.length} call(s) broke, not scored:\n`)
  for (const o of errors) process.stdout.write(`  ${o.run.engine} ${o.run.transport} ${o.run.c.id}: ${o.error}\n`)
}
process.stdout.write('\n' + JSON.stringify({
  bench: 'turns',
  ...figures(scored.filter((o) => !noisy(o))),
  noisy: figures(scored.filter(noisy)),
  by_snr: { 20: figures(scored.filter((o) => snr(o) === 20)), 10: figures(scored.filter((o) => snr(o) === 10)) },
  cases: scored.length,
  errors: errors.length,
  engine: engines.join(','),
  // The cascade's recogniser (the realtime engine hears with its own).
  stt,
  transport: transports.join(','),
  commit,
  at: new Date().toISOString()
}) + '\n')
if (errors.length > total / 2) process.exitCode = 1
