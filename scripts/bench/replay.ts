// `npm run cli -- replay <call id> [--agent <id>]`: a stored call's caller, from the left track of its two-track
// recording, talks again in real time to the same agent or another of the account, on a server of this
// installation started in this process; what the new call does is scored against what the original did, the way
// `npm run bench:turns` scores its synthetic callers (docs/voice.md, "Replaying a call").
import { performance } from 'node:perf_hooks'
import type { Logger } from 'pino'
import { buildApp } from '../../src/app.ts'
import type { Config } from '../../src/config.ts'
import { createDb, createPool } from '../../src/db/database.ts'
import type { TranscriptItem } from '../../src/db/schema.ts'
import { createBoss } from '../../src/jobs/boss.ts'
import { createQueues } from '../../src/jobs/queues.ts'
import { findAgent } from '../../src/modules/agents/queries.ts'
import { findCallRow } from '../../src/modules/calls/queries.ts'
import { findRecording } from '../../src/modules/calls/recordings.ts'
import { startWebCall } from '../../src/modules/calls/web-calls.ts'
import { bufferToPcm, FRAME_MS, FRAME_SAMPLES, rms, SAMPLE_RATE, splitStereo } from '../../src/modules/voice/audio.ts'
import { detectionOf, SpeechDetector } from '../../src/modules/voice/vad/detector.ts'
import { WINDOW_SAMPLES } from '../../src/modules/voice/vad/silero.ts'
import { openWebCall } from '../../test/helpers/voice-client.ts'
import { table } from './lib.ts'
import { GAP_MS, HEARD_MS, percentiles, rate, scoreUtterance, spans, TURN_SLACK_MS, type Span } from './scoring.ts'

/** Why a call cannot be replayed (or the replay failed): one line for the operator. */
export class ReplayError extends Error {}

/** The caller's speech is found with Silero at its default threshold (interruption_sensitivity 0.5), whatever the agents'. */
const TRUTH_SENSITIVITY = 0.5
/** Silence inside speech shorter than this joins its two sides (the quiet between words). */
const SEGMENT_SILENCE_MS = 160
/** A replayed user turn that begins within this long of an original one reproduces its boundary. */
export const BOUNDARY_MS = 500
/** Speech over the replay's agent that leads to a `clear` within this long after it ends stopped the agent (bench:turns waits as long). */
const TALK_TAIL_MS = 2500
/** A 20 ms frame of the agent's track louder than this (RMS) is the agent talking; where it is silent the track holds zeros. */
const AGENT_RMS = 100
const WINDOW_MS = WINDOW_SAMPLES * 1000 / SAMPLE_RATE

interface Segment { start: number, end: number }

/** A user turn of the original call, on the recording's clock (ms since it began). */
interface OriginalTurn {
  at: number
  /** Its speech on the caller's track (none found: not scored, its boundary still counts). */
  speech: Segment[]
}

export interface ReplayOptions {
  /** The installation's database. */
  databaseUrl: string
  /** The installation's configuration, to run the replay's server with (CALL_RUNTIME=voice). */
  config: Config
  log: Logger
  callId: string
  agentId?: string
  /** Progress lines. */
  write: (line: string) => void
}

/** Replays the call and answers the report: a table per original turn, the figures, and one JSON line last. */
export async function replayCall (options: ReplayOptions): Promise<string> {
  const { callId, write } = options
  const pool = createPool(options.databaseUrl, 4)
  const db = createDb(pool)
  try {
    const call = await findCallRow(db, callId)
    if (call === undefined) throw new ReplayError(`no call ${callId}`)
    const agentId = options.agentId ?? call.agent_id
    const agent = await findAgent(db, call.user_id, agentId)
    if (agent === undefined) {
      throw new ReplayError(options.agentId === undefined
        ? `the agent of call ${callId} (${agentId}) no longer exists; name another agent of its account with --agent`
        : `agent ${agentId} is not an agent of the account of call ${callId}: a call is replayed to its own account's agents only`)
    }
    const stored = await findRecording(db, call.user_id, callId)
    if (stored === undefined) throw new ReplayError(`call ${callId} has no recording (call_settings.recording_enabled was off, or it was not a spoken call): there is nothing to replay`)
    if (stored.channels !== 2) {
      throw new ReplayError(`the recording of call ${callId} was made before calls were recorded in two tracks: both sides are mixed in one, so the caller cannot be played without the agent`)
    }
    if (call.call_status === 'started') throw new ReplayError(`call ${callId} has not ended yet: replay it once it has`)
    const { caller, agentTrack } = await tracks(await findRecording(db, call.user_id, callId, 2))

    write(`finding the caller's speech in ${(caller.length / SAMPLE_RATE).toFixed(1)} s of call ${callId}…`)
    const segments = await speechOf(caller)
    const until = Math.max(caller.length / SAMPLE_RATE * 1000, (segments.at(-1)?.end ?? 0) + HEARD_MS)
    write(`replaying it to agent ${agent.id} (${agent.agent_name}) in real time: ${(until / 1000).toFixed(1)} s; the replay is a new web call of the account`)
    const played = await play(db, options, call.user_id, agent.id, { replay_of: callId }, call.dynamic_context, caller, until)
    const transcript = call.transcription ?? []
    const replayed = played.userTurns.map(played.track)
    const offset = recordingStart(transcript, (call.joined_at ?? call.start_timestamp).getTime(), segments, turnDelay(replayed, segments))
    return report(callId, played, replayed, originalTurns(transcript, offset, segments, agentSpans(agentTrack)), segments)
  } finally {
    await pool.end()
  }
}

/** The two tracks of a stereo recording: the caller's (left) and the agent's (right). */
async function tracks (recording: Awaited<ReturnType<typeof findRecording>>) {
  const wav = Buffer.concat(await recording!.stream().toArray())
  const { left, right } = splitStereo(bufferToPcm(wav.subarray(44)))
  return { caller: left, agentTrack: right }
}

/** Where the track has speech (ms), by the server's own speech detector run over it offline. */
async function speechOf (pcm: Int16Array): Promise<Segment[]> {
  const segments: Segment[] = []
  // A start is told once enough windows were speech, an end once enough were silence: both are put back where the speech began and ended.
  const startWindows = Math.max(1, Math.ceil(detectionOf(TRUTH_SENSITIVITY).minSpeechMs / WINDOW_MS))
  const endWindows = Math.max(1, Math.ceil(SEGMENT_SILENCE_MS / WINDOW_MS))
  let failure: unknown
  const detector = await SpeechDetector.create({
    sensitivity: TRUTH_SENSITIVITY,
    endSilenceMs: SEGMENT_SILENCE_MS,
    onTurn: (turn, atMs) => {
      if (turn === 'start') segments.push({ start: atMs - startWindows * WINDOW_MS, end: Infinity })
      else segments.at(-1)!.end = atMs - endWindows * WINDOW_MS
    },
    onError: (err) => { failure = err }
  })
  // Ten seconds at a time: the windows waiting for the model stay few.
  for (let at = 0; at < pcm.length; at += 10 * SAMPLE_RATE) {
    detector.push(pcm.subarray(at, at + 10 * SAMPLE_RATE))
    await detector.settled()
  }
  if (failure !== undefined) throw new ReplayError(`the speech detector failed: ${String(failure)}`)
  const last = segments.at(-1)
  if (last !== undefined && last.end === Infinity) last.end = pcm.length * 1000 / SAMPLE_RATE
  return segments
}

/** Where the agent's track has sound (ms): its 20 ms frames above silence, breaks shorter than GAP_MS bridged. */
function agentSpans (pcm: Int16Array): Segment[] {
  const out: Segment[] = []
  for (let i = 0; i + FRAME_SAMPLES <= pcm.length; i += FRAME_SAMPLES) {
    if (rms(pcm.subarray(i, i + FRAME_SAMPLES)) < AGENT_RMS) continue
    const at = i * 1000 / SAMPLE_RATE
    const last = out.at(-1)
    if (last !== undefined && at - last.end <= GAP_MS) last.end = at + FRAME_MS
    else out.push({ start: at, end: at + FRAME_MS })
  }
  return out
}

/** The speech a user turn began in (the last to start before it, give or take TURN_SLACK_MS). */
const speechOfTurn = (segments: Segment[], at: number) => segments.findLast((s) => s.start <= at + TURN_SLACK_MS)

/** How long after the start of the speech the replay's server began a user turn (the median); 0 with none. */
function turnDelay (replayed: number[], segments: Segment[]): number {
  const delays = replayed.flatMap((at) => {
    const speech = speechOfTurn(segments, at)
    return speech === undefined || at - speech.start > HEARD_MS ? [] : [at - speech.start]
  }).sort((a, b) => a - b)
  return delays.length === 0 ? 0 : delays[Math.floor(delays.length / 2)]
}

/**
 * When the recording began (epoch ms). Stored is only when the caller's stream opened (joined_at), and the recording
 * starts a moment off it (by a few hundred ms, measured); so it is the start within 2 s of that which best lays the
 * original's user turns on the caller's speech, each `delay` after the speech it began in (the replay's delay, which
 * the same server's detector has on the same audio). One offset for the whole call: it cannot hide a turn split,
 * joined, missed or moved against the others.
 */
function recordingStart (transcript: TranscriptItem[], opened: number, segments: Segment[], delay: number): number {
  const users = transcript.filter((item) => item.speaker === 'user').map((item) => item.timestamp - delay)
  const cost = (start: number) => users.reduce((sum, at) => sum + Math.min(1000, ...segments.map((s) => Math.abs(at - start - s.start))), 0)
  let best = { start: opened, cost: cost(opened) }
  for (const at of users) {
    for (const s of segments) {
      const start = at - s.start
      if (Math.abs(start - opened) > 2000) continue
      const c = cost(start)
      if (c < best.cost || (c === best.cost && Math.abs(start - opened) < Math.abs(best.start - opened))) best = { start, cost: c }
    }
  }
  return best.start
}

/**
 * The original's user turns with their speech: from the speech the turn began in (at most TURN_SLACK_MS after it
 * on the stored clock) up to the original's answer to it (the agent's first sound after its transcript item) or the
 * next user turn, whichever came first.
 */
function originalTurns (transcript: TranscriptItem[], start: number, segments: Segment[], agent: Segment[]): OriginalTurn[] {
  const users = transcript.filter((item) => item.speaker === 'user').map((item) => item.timestamp - start)
  const answers = transcript.filter((item) => item.speaker === 'agent').map((item) => item.timestamp - start)
  return users.map((at, i) => {
    const next = users[i + 1] ?? Infinity
    const answered = answers.find((a) => a >= at && a < next)
    const answer = answered === undefined ? Infinity : agent.find((s) => s.start >= answered - TURN_SLACK_MS)?.start ?? Infinity
    const bound = Math.min(next - TURN_SLACK_MS, answer)
    const first = speechOfTurn(segments, at)
    // The speech it began in ended long before it (the detector offline heard nothing the server did): unscored.
    if (first === undefined || first.end < at - HEARD_MS) return { at, speech: [] }
    return { at, speech: segments.filter((s) => s.start >= first.start && (s === first || s.start < bound)) }
  })
}

interface Played {
  callId: string
  /** performance.now() of a ms of the caller's track, and back. */
  wall: (ms: number) => number
  track: (at: number) => number
  heard: Span[]
  clears: number[]
  /** The replay's user turns (performance.now()). */
  userTurns: number[]
}

/**
 * A web call of the agent on a server of this installation in this process, on a free port of 127.0.0.1, that
 * hears the caller's track as a browser sends it: frame n (ms 20n to 20n + 20) leaves at 20(n + 1) ms, as from
 * a microphone; then the caller hangs up and the call's stored transcript is read.
 */
async function play (db: ReturnType<typeof createDb>, options: ReplayOptions, userId: string, agentId: string, customData: Record<string, unknown>, dynamicContext: Record<string, unknown>, caller: Int16Array, untilMs: number): Promise<Played> {
  const { config, log } = options
  const boss = createBoss(options.databaseUrl, config)
  boss.on('error', (err) => log.error({ err }, 'job queue error'))
  await boss.start()
  const app = await buildApp(config, { db, boss, logger: log })
  try {
    await createQueues(boss, config)
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    const call = await startWebCall(db, { boss, config }, userId, { agent_id: agentId, custom_data: customData, dynamic_context: dynamicContext })
    const client = await openWebCall(url, call.access_token)
    const sent: number[] = []
    const t0 = performance.now()
    for (let n = 0; n * FRAME_MS < untilMs && client.socket.readyState === client.socket.OPEN; n++) {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, t0 + (n + 1) * FRAME_MS - performance.now())))
      const frame = caller.subarray(n * FRAME_SAMPLES, (n + 1) * FRAME_SAMPLES)
      void client.sendAudio(frame.length === FRAME_SAMPLES ? frame : new Int16Array(FRAME_SAMPLES))
      sent.push(performance.now())
    }
    if (client.socket.readyState === client.socket.OPEN) client.hangup()
    await Promise.race([client.closed, new Promise((resolve) => setTimeout(resolve, 10_000))])
    const transcript = await endedTranscript(db, call._id)
    const wall = (ms: number) => {
      const n = Math.max(0, Math.min(sent.length - 1, Math.floor(ms / FRAME_MS)))
      return sent[n] - FRAME_MS + (ms - n * FRAME_MS)
    }
    const track = (at: number) => {
      const n = Math.max(0, sent.findLastIndex((s) => s - FRAME_MS <= at))
      return n * FRAME_MS + at - (sent[n] - FRAME_MS)
    }
    return {
      callId: call._id,
      wall,
      track,
      heard: spans(client.frames.map((f) => ({ at: f.at, ms: f.pcm.length * 1000 / SAMPLE_RATE })), client.events.filter((e) => e.type === 'clear').map((e) => e.at)),
      clears: client.events.filter((e) => e.type === 'clear').map((e) => e.at),
      userTurns: transcript.filter((item) => item.speaker === 'user').map((item) => item.timestamp - performance.timeOrigin)
    }
  } finally {
    await app.close()
    await boss.stop({ graceful: false })
  }
}

/** The call's transcript once it has ended (its end and the job of its analysis are stored together). */
async function endedTranscript (db: ReturnType<typeof createDb>, callId: string): Promise<TranscriptItem[]> {
  for (let i = 0; i < 300; i++) {
    const row = await findCallRow(db, callId)
    if (row !== undefined && row.call_status !== 'started') return row.transcription ?? []
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new ReplayError(`the replay call ${callId} did not end within 30 s of the hang-up`)
}

/** Scores the replay against the original and writes it out. */
function report (callId: string, played: Played, replayed: number[], turns: OriginalTurn[], segments: Segment[]): string {
  const { wall, heard } = played
  // Boundaries: each original turn takes the first replayed turn not taken yet that began within BOUNDARY_MS of it.
  const matches: Array<number | undefined> = []
  let from = 0
  for (const turn of turns) {
    const index = replayed.findIndex((at, i) => i >= from && Math.abs(at - turn.at) <= BOUNDARY_MS)
    matches.push(index === -1 ? undefined : replayed[index])
    if (index !== -1) from = index + 1
  }
  const scored = turns.map((turn) => turn.speech.length === 0
    ? undefined
    : scoreUtterance(wall(turn.speech[0].start), wall(turn.speech.at(-1)!.end), heard, played.userTurns))

  // Speech over the replay's agent: a turn's speech should stop it; speech the original made no turn of (a backchannel, a noise) should not.
  const inTurn = new Set(turns.flatMap((t) => t.speech))
  const talkOver = segments.flatMap((segment) => {
    const onset = wall(segment.start)
    if (!heard.some((s) => s.start <= onset && onset < s.end)) return []
    const clear = played.clears.find((at) => at >= onset && at <= wall(segment.end) + TALK_TAIL_MS)
    const silent = clear === undefined ? undefined : heard.findLast((s) => s.start <= clear)!.end
    return [{ segment, bargeIn: inTurn.has(segment), stopped: clear !== undefined, reactionMs: silent === undefined ? undefined : Math.max(0, silent - onset) }]
  })
  const bargeIns = talkOver.filter((o) => o.bargeIn)
  const others = talkOver.filter((o) => !o.bargeIn)
  const answered = scored.filter((s) => s !== undefined)
  const heardTurns = answered.filter((s) => s.heard)
  const figures = {
    eot_ms: percentiles(answered.flatMap((s) => s.eotMs ?? [])),
    false_cutoff_rate: rate(heardTurns.filter((s) => s.cutOff).length, heardTurns.length),
    false_barge_in_rate: rate(others.filter((o) => o.stopped).length, others.length),
    missed_barge_in_rate: rate(bargeIns.filter((o) => !o.stopped).length, bargeIns.length),
    barge_in_reaction_ms: percentiles(bargeIns.flatMap((o) => o.reactionMs ?? [])),
    unheard_rate: rate(answered.filter((s) => !s.heard).length, answered.length)
  }

  const s = (ms: number | undefined) => ms === undefined ? '-' : (ms / 1000).toFixed(2)
  const lines: string[] = []
  if (turns.length > 0) {
    lines.push('', table(turns.map((turn, i) => {
      const score = scored[i]
      return {
        turn: i + 1,
        'original s': s(turn.at),
        'replay s': s(matches[i]),
        'speech s': turn.speech.length === 0 ? 'not found' : `${s(turn.speech[0].start)}-${s(turn.speech.at(-1)!.end)}`,
        answered: score === undefined ? '-' : score.heard ? 'yes' : 'NO',
        'eot ms': score?.eotMs === undefined ? '-' : Math.round(score.eotMs),
        'cut off': score === undefined ? '-' : score.cutOff ? `YES${score.note === undefined ? '' : ` (${score.note})`}` : 'no'
      }
    })))
  }
  if (talkOver.length > 0) {
    lines.push('', table(talkOver.map((o) => ({
      'speech over the agent s': `${s(o.segment.start)}-${s(o.segment.end)}`,
      original: o.bargeIn ? 'a turn (barge-in)' : 'no turn',
      agent: o.stopped ? 'stopped' : 'went on',
      'reaction ms': o.reactionMs === undefined ? '-' : Math.round(o.reactionMs)
    }))))
  }
  const share = (r: number | null) => r === null ? '-' : `${(r * 100).toFixed(1)}%`
  lines.push('', table([{
    turns: `${turns.length} original, ${replayed.length} replayed`,
    'boundaries matched': `${matches.filter((m) => m !== undefined).length}/${turns.length}`,
    'eot p50/p90 ms': `${figures.eot_ms.p50 ?? '-'}/${figures.eot_ms.p90 ?? '-'}`,
    'cut-offs': share(figures.false_cutoff_rate),
    'false barge-ins': share(figures.false_barge_in_rate),
    'missed barge-ins': share(figures.missed_barge_in_rate),
    'reaction p50/p90 ms': `${figures.barge_in_reaction_ms.p50 ?? '-'}/${figures.barge_in_reaction_ms.p90 ?? '-'}`,
    'not heard': share(figures.unheard_rate)
  }]))
  lines.push('', JSON.stringify({
    replay: true,
    call_id: callId,
    replay_call_id: played.callId,
    ...figures,
    turns_original: turns.length,
    turns_replayed: replayed.length,
    boundaries_matched: matches.filter((m) => m !== undefined).length,
    at: new Date().toISOString()
  }))
  return lines.join('\n')
}
