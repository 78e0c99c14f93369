// npm run bench:voice [-- --engine realtime|cascade] [--transport browser|twilio] [--levels 10,50,100] — the voice
// engine under concurrent calls. N simulated callers talk to the server (its own process, CALL_RUNTIME=voice) over
// the browser's WebSocket protocol, or phone it through a Twilio stand-in in this process (webhook, TwiML, Media
// Streams in µ-law), as a microphone would: speech paced in real time, turn after turn. The providers are stand-ins in a
// process of their own that answer at once, so what is measured is what the server adds: from the caller's end of
// speech as our turn detection saw it (its `user_speaking` false event) to the first agent audio frame after
// it; the share of outbound frames sent over 20 ms late (the server's own count, in `ended`); the server's
// CPU and memory per call. Each level runs on a fresh server: calls ramp up, warm up, then are measured for
// BENCH_VOICE_SECONDS (20). By default levels 10, 50 and 100, then on by 50 while a level stays within the
// limits (p95 under 50 ms, late frames under 1%, no call broken), up to BENCH_VOICE_MAX_CALLS (300).
import { execFileSync } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { createDb } from '../src/db/database.ts'
import { FRAME_SAMPLES, mulawDecode, mulawEncode, resample } from '../src/modules/voice/audio.ts'
import { endOfTurnSilenceMs } from '../src/modules/voice/turns/words.ts'
import { SpeechDetector } from '../src/modules/voice/vad/detector.ts'
import { createApiKey } from '../src/modules/users/queries.ts'
import { openWebCall, speech, type VoiceEvent, type WebCallClient } from '../test/helpers/voice-client.ts'
import { benchDatabase, quantile, sampleRss, startServer, table } from './bench/lib.ts'
import { apiPoster, benchTwilio, providerEnv, startStandins } from './bench/voice.ts'
import { readArgs, usageError } from './args.ts'
import { seedAccount } from './seed-data.ts'

const BENCH = {
  name: 'bench:voice',
  usage: `usage: npm run bench:voice [-- --engine realtime|cascade] [--transport browser|twilio] [--levels 10,50,100]

The voice engine under concurrent calls: simulated callers talk to a server of its own through stand-in
providers; each level reports turn latency, late outbound frames, CPU and memory per call.

  --engine realtime|cascade   the engine the calls run on (default realtime)
  --transport browser|twilio  the browser's WebSocket, or phone calls through a Twilio stand-in (default browser)
  --levels <n,n,…>            exactly these numbers of concurrent calls (default 10, 50, 100, then on by 50)
  -h, --help                  this text
  BENCH_VOICE_SECONDS         the measured window of each level (default 20)
  BENCH_VOICE_MAX_CALLS       the most calls the levels go up to (default 300)`
}

const { values } = readArgs(BENCH, {
  options: {
    engine: { type: 'string', default: 'realtime' },
    levels: { type: 'string' },
    transport: { type: 'string', default: 'browser' }
  }
})
const engine = values.engine
if (engine !== 'cascade' && engine !== 'realtime') usageError(BENCH, `--engine is cascade or realtime, got ${engine}`)
const transport = values.transport
if (transport !== 'browser' && transport !== 'twilio') usageError(BENCH, `--transport is browser or twilio, got ${transport}`)
const fixedLevels = values.levels?.split(',').map(Number)
if (fixedLevels?.some((n) => !Number.isInteger(n) || n < 1) === true) usageError(BENCH, '--levels is a list of call counts, e.g. 5,10')

const WINDOW_SECONDS = Number(process.env.BENCH_VOICE_SECONDS ?? 20)
const MAX_CALLS = Number(process.env.BENCH_VOICE_MAX_CALLS ?? 300)
/** After the last call started: JIT, first queries and first turns settle before the window. */
const WARMUP_MS = 3000
/** Calls start evenly over this long, at most 50 a second, as a busy hour would bring them, not all in one tick. */
const rampMs = (calls: number) => Math.max(1000, calls * 20)
/** A turn whose answer has not played out after this long has stalled: that call counts as broken. */
const TURN_TIMEOUT_MS = 15_000
const LIMITS = { p95Ms: 50, lateShare: 0.01 }
const CLOCK_TICK_MS = 1000 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }))

const database = await benchDatabase()
const db = createDb(database.pool)
const account = await seedAccount(db, 'bench-voice@localhost')
await db.updateTable('api_keys').set({ revoked_at: new Date() }).where('user_id', '=', account.userId).where('revoked_at', 'is', null).execute()
const { key } = await createApiKey(db, account.userId, { name: 'bench-voice' })
const api = apiPoster(key)

const standins = await startStandins(engine)
const NUMBER = '+14155550100'
const phone = transport === 'twilio' ? await benchTwilio([NUMBER]) : undefined
const twilio = phone?.standIn
const env: Record<string, string> = {
  DATABASE_URL: database.url,
  CALL_RUNTIME: 'voice',
  VOICE_ENGINE: engine,
  ...providerEnv(standins),
  ...(phone !== undefined && {
    ...phone.env,
    // The server's own count of late frames comes from its log line at each call's end (a phone has no `ended` event).
    LOG_LEVEL: 'info'
  })
}

/** Milliseconds of CPU (user and system) a process has used so far. */
async function cpuMs (pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8')
  // Fields after the command name, which may hold spaces: state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS
}

async function rssMb (pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024
}

const sleep = async (ms: number) => await new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))

interface Window { start: number, end: number }
interface CallerResult {
  callId?: string
  latencies: number[]
  missed: number
  framesSent: number
  framesLate: number
  /** Agent frames received, and those that came after the ones before had played out (the far end ran dry). */
  framesReceived: number
  underruns: number
  error?: string
}

/**
 * What one caller's socket said so far, updated as messages arrive (no polling: hundreds of callers share
 * this process's core with the stand-ins), and waits on it.
 */
function follow (client: WebCallClient, window: Window, result: CallerResult) {
  const state = {
    ready: false,
    agentStops: 0,
    ended: undefined as VoiceEvent | undefined,
    closed: false,
    /** When the caller sent the frame at which the server ends their turn (END_OF_TURN_FRAME): the turn's latency counts from it. */
    endOfTurn: undefined as number | undefined
  }
  /** Until when the frames of the agent's current answer play, were they played as they came. */
  let playedUntil: number | undefined
  const waiters = new Set<() => void>()
  const check = () => { for (const waiter of waiters) waiter() }
  const onEvent = (event: VoiceEvent & { at: number }) => {
    if (event.type === 'ready') state.ready = true
    else if (event.type === 'agent_speaking') {
      playedUntil = undefined
      if (event.speaking === false) state.agentStops++
    } else if (event.type === 'ended') state.ended = event
  }
  client.socket.on('message', (_data, isBinary: boolean) => {
    // openWebCall's own listener ran first and stored the message with its arrival time; only the latest
    // is kept, so that memory stays flat over a long run.
    if (isBinary) {
      const { at } = client.frames.at(-1)!
      result.framesReceived++
      if (playedUntil !== undefined && at > playedUntil) result.underruns++
      playedUntil = Math.max(playedUntil ?? at, at) + 20
      if (state.endOfTurn !== undefined) {
        if (state.endOfTurn >= window.start && state.endOfTurn < window.end) result.latencies.push(at - state.endOfTurn)
        state.endOfTurn = undefined
      }
      client.frames.length = 0
    } else {
      onEvent(client.events.at(-1)!)
      client.events.length = 0
    }
    check()
  })
  // Events that came before this listener (the stream may be ready already).
  for (const event of client.events.splice(0)) onEvent(event)
  void client.closed.then(() => { state.closed = true; check() })

  /** Resolves when `done` holds; rejects when the call ends first or after `ms`. */
  const until = async (what: string, done: () => boolean, ms: number, endsIt = false) => await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => finish(new Error(`no ${what} within ${ms} ms`)), ms)
    const finish = (error?: Error) => {
      clearTimeout(timer)
      waiters.delete(waiter)
      if (error === undefined) resolve()
      else reject(error)
    }
    const waiter = () => {
      if (done()) finish()
      else if (!endsIt && state.ended !== undefined) finish(new Error(`the call ended early: ${String(state.ended.reason)}`))
      else if (state.closed) finish(new Error(`the stream closed${state.ended === undefined ? ' without an ended event' : ''}`))
    }
    waiters.add(waiter)
    waiter()
  })
  return { state, until, missedFrame: () => state.endOfTurn !== undefined }
}

/** One caller: starts a web call, waits for the begin message, then talks turn after turn until the window ends. */
async function caller (url: string, agentId: string, window: Window): Promise<CallerResult> {
  const result: CallerResult = { latencies: [], missed: 0, framesSent: 0, framesLate: 0, framesReceived: 0, underruns: 0 }
  let client: WebCallClient | undefined
  try {
    const call = await api(url, '/v1/call/make-web-call', { agent_id: agentId })
    result.callId = call._id
    client = await openWebCall(url, call.access_token)
    const { state, until, missedFrame } = follow(client, window, result)
    await until('ready event', () => state.ready, 30_000)
    await until('end of the begin message', () => state.agentStops > 0, 30_000)
    while (performance.now() < window.end) {
      const stops = state.agentStops
      // Frame by frame in real time, as on the phone: the end of turn is when its frame actually left.
      const started = performance.now()
      for (let i = 0; i < TURN.length / FRAME_SAMPLES; i++) {
        await sleep(started + i * 20 - performance.now())
        if (i === END_OF_TURN_FRAME) state.endOfTurn = performance.now()
        await client.sendAudio(TURN.subarray(i * FRAME_SAMPLES, (i + 1) * FRAME_SAMPLES))
      }
      await until('answer played out', () => state.agentStops > stops, TURN_TIMEOUT_MS)
      // The answer ended without a frame (nothing recognised): no latency for this turn.
      if (missedFrame()) result.missed++
      await sleep(Math.min(Math.random() * 300, window.end - performance.now()))
    }
    client.hangup()
    await until('ended event', () => state.ended !== undefined, 60_000, true)
    result.framesSent = Number(state.ended!.frames_sent)
    result.framesLate = Number(state.ended!.frames_late)
  } catch (err) {
    result.error = err instanceof Error ? err.message : String(err)
    client?.socket.close()
  }
  return result
}

/** The caller's turn (600 ms of speech, 700 ms of silence). */
const TURN = speech(600, 700)

/**
 * The frame at which our turn core ends the turn (after 500 ms of silence) as the server hears it through
 * the phone: found by running the detector on the same audio, each frame through µ-law at 8 kHz and back.
 */
async function endOfTurnFrame (): Promise<number> {
  let endAt: number | undefined
  // The detector tells where the silence after the speech began; without a streaming recogniser's words the turn ends after silence alone.
  // As the turn core does: while the end of turn is pending the detector listens closely (one window of speech is speech).
  const detector: SpeechDetector = await SpeechDetector.create({
    sensitivity: 0.5,
    onTurn: (turn, at) => {
      detector.quick = turn === 'end'
      if (turn === 'end') endAt = at + endOfTurnSilenceMs(undefined, { language: 'en-US', responsiveness: 0.5 })
    },
    onError: (err) => { throw err }
  })
  for (let i = 0; i < TURN.length; i += FRAME_SAMPLES) {
    detector.push(resample(mulawDecode(mulawEncode(resample(TURN.subarray(i, i + FRAME_SAMPLES), 16_000, 8000))), 8000, 16_000))
  }
  await detector.settled()
  if (endAt === undefined) throw new Error('the speech detector does not end the caller\'s turn')
  return Math.ceil(endAt / 20) - 1
}
const END_OF_TURN_FRAME = await endOfTurnFrame()
/** Agent audio that has played out with nothing after it for this long: the agent has finished its answer. */
const QUIET_MS = 150

/**
 * One caller on the phone: Twilio (the stand-in) posts the voice webhook, follows the TwiML, opens the media
 * stream; the caller waits for the begin message, then talks turn after turn until the window ends, and hangs
 * up. Turn latency: from the moment the caller sends the frame at which our speech detector ends the turn
 * (END_OF_TURN_FRAME) to the arrival of the first agent frame after it. Late frames: the server's own count, from its log.
 */
async function phoneCaller (window: Window): Promise<CallerResult> {
  const result: CallerResult = { latencies: [], missed: 0, framesSent: 0, framesLate: 0, framesReceived: 0, underruns: 0 }
  try {
    const { call } = await twilio!.dialIn(`+1415555${String(Math.floor(Math.random() * 10_000)).padStart(4, '0')}`, NUMBER)
    const stream = await call.waitForStream()
    let endOfTurn: number | undefined
    let playedUntil: number | undefined
    let answers = 0
    let quiet: NodeJS.Timeout | undefined
    const waiters = new Set<() => void>()
    stream.socket.on('message', () => {
      // The stand-in's own listener ran first; only what this caller needs is kept, so that memory stays flat.
      stream.messages.length = 0
      const frame = stream.frames.at(-1)
      if (frame === undefined) return
      stream.frames.length = 0
      result.framesReceived++
      if (playedUntil !== undefined && frame.at > playedUntil && frame.at - playedUntil < QUIET_MS) result.underruns++
      playedUntil = Math.max(playedUntil ?? frame.at, frame.at) + 20
      if (endOfTurn !== undefined) {
        if (endOfTurn >= window.start && endOfTurn < window.end) result.latencies.push(frame.at - endOfTurn)
        endOfTurn = undefined
      }
      clearTimeout(quiet)
      quiet = setTimeout(() => {
        answers++
        playedUntil = undefined
        for (const waiter of waiters) waiter()
      }, stream.bufferedMs() + QUIET_MS)
    })
    const answered = async (count: number) => await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => { waiters.delete(check); reject(new Error(`no answer played out within ${TURN_TIMEOUT_MS} ms`)) }, TURN_TIMEOUT_MS)
      const check = () => {
        if (answers < count) return
        clearTimeout(timer)
        waiters.delete(check)
        resolve()
      }
      waiters.add(check)
      check()
    })
    await answered(1)
    while (performance.now() < window.end) {
      const before = answers
      // Frame by frame in real time, so that the end of turn is when its frame actually left (this process may
      // be late too): the server cannot answer before it has that frame.
      const started = performance.now()
      for (let i = 0; i < TURN.length / FRAME_SAMPLES; i++) {
        await sleep(started + i * 20 - performance.now())
        if (i === END_OF_TURN_FRAME) endOfTurn = performance.now()
        await stream.sendAudio(TURN.subarray(i * FRAME_SAMPLES, (i + 1) * FRAME_SAMPLES))
      }
      await answered(before + 1)
      if (endOfTurn !== undefined) result.missed++
      await sleep(Math.min(Math.random() * 300, window.end - performance.now()))
    }
    clearTimeout(quiet)
    await stream.hangup()
    const row = await db.selectFrom('calls').select('id').where('carrier_call_id', '=', call.sid).executeTakeFirst()
    result.callId = row?.id
  } catch (err) {
    result.error = err instanceof Error ? err.message : String(err)
  }
  return result
}

const round = (n: number, digits = 1) => Number(n.toFixed(digits))

interface Level {
  calls: number
  turns: number
  missed: number
  p50: number
  p95: number
  p99: number
  framesSent: number
  framesLate: number
  lateShare: number
  underrunShare: number
  cpuMsPerCallSecond: number
  rssMbPerCall: number
  idleRssMb: number
  peakRssMb: number
  clientCpuShare: number
  errors: string[]
  withinLimits: boolean
}

async function runLevel (calls: number, agentOf: (url: string) => Promise<string>): Promise<Level> {
  // Each call's frames sent and late, from the server's log line at its end (phone calls).
  const served = new Map<string, { sent: number, late: number }>()
  const server = await startServer('src/main.ts', env, '/health', {
    onLogLine: transport === 'twilio'
      ? (line) => {
          if (!line.includes('voice session ended')) return
          const entry = JSON.parse(line) as { callId: string, framesSent: number, framesLate: number }
          served.set(entry.callId, { sent: entry.framesSent, late: entry.framesLate })
        }
      : undefined
  })
  phone?.route(server.url)
  const pid = server.child.pid!
  try {
    const agentId = await agentOf(server.url)
    await sleep(1000)
    const idleRssMb = await rssMb(pid)
    const ramp = rampMs(calls)
    const start = performance.now()
    const window = { start: start + ramp + WARMUP_MS, end: start + ramp + WARMUP_MS + WINDOW_SECONDS * 1000 }
    const running = Array.from({ length: calls }, async (_, i) => {
      await sleep(start + (i * ramp) / calls - performance.now())
      return transport === 'twilio' ? await phoneCaller(window) : await caller(server.url, agentId, window)
    })
    await sleep(window.start - performance.now())
    const cpuBefore = await cpuMs(pid)
    const clientCpuBefore = process.cpuUsage()
    const rss = sampleRss(pid)
    await sleep(window.end - performance.now())
    const cpuUsed = await cpuMs(pid) - cpuBefore
    const clientCpu = process.cpuUsage(clientCpuBefore)
    const peakRssMb = await rss.stop()
    const results = await Promise.all(running)
    // Each call is analysed before the server stops, so that no level's work spills into the next.
    const ids = results.flatMap((r) => r.callId ?? [])
    for (let i = 0; i < 600; i++) {
      const { n } = await db.selectFrom('calls').select((eb) => eb.fn.countAll<number>().as('n'))
        .where('id', 'in', ids).where('call_status', 'in', ['started', 'pending']).executeTakeFirstOrThrow()
      if (Number(n) === 0) break
      await sleep(100)
    }
    for (const result of results) {
      const counts = result.callId === undefined ? undefined : served.get(result.callId)
      if (counts !== undefined) Object.assign(result, { framesSent: counts.sent, framesLate: counts.late })
    }

    const latencies = results.flatMap((r) => r.latencies).sort((a, b) => a - b)
    const framesSent = results.reduce((sum, r) => sum + r.framesSent, 0)
    const framesLate = results.reduce((sum, r) => sum + r.framesLate, 0)
    const errors = results.flatMap((r) => r.error ?? [])
    const level: Level = {
      calls,
      turns: latencies.length,
      missed: results.reduce((sum, r) => sum + r.missed, 0),
      p50: round(quantile(latencies, 0.5)),
      p95: round(quantile(latencies, 0.95)),
      p99: round(quantile(latencies, 0.99)),
      framesSent,
      framesLate,
      lateShare: framesSent === 0 ? NaN : round(framesLate / framesSent, 4),
      underrunShare: round(results.reduce((sum, r) => sum + r.underruns, 0) / Math.max(1, results.reduce((sum, r) => sum + r.framesReceived, 0)), 4),
      cpuMsPerCallSecond: round(cpuUsed / (calls * WINDOW_SECONDS), 2),
      rssMbPerCall: round((peakRssMb - idleRssMb) / calls, 2),
      idleRssMb: Math.round(idleRssMb),
      peakRssMb,
      clientCpuShare: round((clientCpu.user + clientCpu.system) / 1000 / (WINDOW_SECONDS * 1000), 2),
      errors,
      withinLimits: false
    }
    level.withinLimits = errors.length === 0 && latencies.length > 0 && level.p95 < LIMITS.p95Ms && level.lateShare < LIMITS.lateShare
    return level
  } finally {
    await server.stop()
  }
}

// One agent for the run, made over the API on the first level's server (the database is shared).
let agentId: string | undefined
const agentOf = async (url: string) => {
  if (agentId !== undefined) return agentId
  const llm = await api(url, '/v1/llm', { begin_message: 'Hi.', general_prompt: 'You are a receptionist. Answer in one short sentence.' })
  const agent = await api(url, '/v1/agent', {
    agent_name: 'Voice benchmark',
    llm_id: llm._id,
    // No reminders or limits inside a run; recording stays on (the default): it costs memory, and it runs.
    call_settings: { reminder_after_seconds: 120, max_call_duration_minutes: 15 }
  })
  agentId = agent._id as string
  // Phone calls reach the agent at a Twilio number of the account (bought once: the database is kept).
  if (twilio !== undefined) {
    await db.deleteFrom('phone_numbers').where('phone_number', '=', NUMBER).execute()
    await api(url, '/v1/phone-number/buy', { phone_number: NUMBER, inbound_agent_id: agentId })
  }
  return agentId
}

const levels: Level[] = []
const planned = fixedLevels ?? [10, 50, 100]
for (let i = 0; ; i++) {
  const calls = planned[i] ?? (fixedLevels === undefined && levels.at(-1)?.withinLimits === true ? levels.at(-1)!.calls + 50 : undefined)
  if (calls === undefined || calls > MAX_CALLS) break
  process.stdout.write(`  ${calls} calls…\n`)
  const level = await runLevel(calls, agentOf)
  levels.push(level)
  if (level.errors.length > 0) {
    const kinds = Object.entries(Object.groupBy(level.errors, (e) => e)).map(([e, list]) => `${list!.length}× ${e}`)
    process.stdout.write(`  ${level.errors.length} of ${calls} calls broke: ${kinds.join('; ')}\n`)
  }
  if (level.errors.length > calls / 2) break
}
standins.stop()
await phone?.close()

process.stdout.write(`\n${engine} engine, ${transport === 'twilio' ? 'phone calls over Twilio Media Streams' : 'browser stream'}; ${WINDOW_SECONDS} s measured per level after ${WARMUP_MS / 1000} s of warm-up; stand-ins answer at once\n\n`)
process.stdout.write(table(levels.map((l) => ({
  calls: l.calls,
  turns: l.turns,
  'p50 ms': l.p50,
  'p95 ms': l.p95,
  'p99 ms': l.p99,
  'late frames': `${(l.lateShare * 100).toFixed(2)}%`,
  underruns: `${(l.underrunShare * 100).toFixed(2)}%`,
  'CPU ms/call·s': l.cpuMsPerCallSecond,
  'RSS MB/call': l.rssMbPerCall,
  'idle/peak RSS MB': `${l.idleRssMb}/${l.peakRssMb}`,
  'bench CPU': `${Math.round(l.clientCpuShare * 100)}%`,
  broken: l.errors.length,
  'within limits': l.withinLimits ? 'yes' : 'no'
}))) + '\n\n')

const byCalls = (calls: number) => levels.find((l) => l.calls === calls)
const maxWithin = levels.filter((l) => l.withinLimits).reduce((max, l) => Math.max(max, l.calls), 0)
// Per call figures at 100 calls, or the largest level run when 100 was not.
const reference = byCalls(100) ?? levels.at(-1)!
const checks: Array<[string, boolean]> = [
  ...(byCalls(50) === undefined ? [] : [['p95 turn latency < 20 ms at 50 calls', byCalls(50)!.p95 < 20] as [string, boolean]]),
  [`at least 100 calls within the limits (p95 < ${LIMITS.p95Ms} ms, late frames < ${LIMITS.lateShare * 100}%)`, maxWithin >= 100],
  ['no call broke', levels.every((l) => l.errors.length === 0)]
]
for (const [name, ok] of checks) process.stdout.write(`${ok ? 'PASS' : 'FAIL'}  ${name}\n`)
const broken = levels.some((l) => l.errors.length > l.calls / 2)
if (broken) process.stdout.write('FAIL  most calls of a level broke: the figures above do not measure the engine\n')

process.stdout.write(JSON.stringify({
  bench: 'voice',
  at: new Date().toISOString(),
  engine,
  transport,
  window_seconds: WINDOW_SECONDS,
  turn_latency_ms: Object.fromEntries(levels.map((l) => [String(l.calls), { p50: l.p50, p95: l.p95, p99: l.p99 }])),
  late_frame_share: Object.fromEntries(levels.map((l) => [String(l.calls), l.lateShare])),
  max_calls_within_limits: maxWithin,
  cpu_ms_per_call_second: reference.cpuMsPerCallSecond,
  rss_mb_per_call: reference.rssMbPerCall,
  per_call_at: reference.calls,
  levels: levels.map((l) => ({ calls: l.calls, turns: l.turns, missed: l.missed, frames_sent: l.framesSent, frames_late: l.framesLate, underrun_share: l.underrunShare, cpu_ms_per_call_second: l.cpuMsPerCallSecond, rss_mb_per_call: l.rssMbPerCall, broken: l.errors.length })),
  checks: Object.fromEntries(checks)
}) + '\n')
await database.stop()
if (broken) process.exitCode = 1
