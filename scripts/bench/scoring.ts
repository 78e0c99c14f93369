// How turn-taking is scored from the caller's side, the same for `npm run bench:turns` (synthetic callers) and
// `npm run cli -- replay` (a stored call's caller played again): agent audio as the far end plays it, and the
// answer to an utterance whose true start and end are known (docs/voice.md, "Measuring turn-taking").
import { quantile } from './lib.ts'

/**
 * Agent audio that does not go on within this long after the far end ran dry has stopped (or paused); a shorter
 * gap is jitter (frames late on a loaded machine), not a decision of the server.
 */
export const GAP_MS = 250
/** An answer that starts later than this after the true end did not answer the turn: the caller was not heard. */
export const HEARD_MS = 3000
/** A user turn that the server began up to this long before the speech counts as the speech's (the stored timestamp is the server's clock). */
export const TURN_SLACK_MS = 300

/** A stretch of agent audio the caller heard without a break: from its first frame's arrival until it ran out or was cleared. */
export interface Span { start: number, end: number, ms: number, cleared: boolean }

/** The agent audio as the far end plays it (each frame when it comes, or after the one before it), cut by clears. */
export function spans (frames: Array<{ at: number, ms: number }>, clears: number[]): Span[] {
  const out: Span[] = []
  let current: Span | undefined
  let playEnd = 0
  const pending = [...clears]
  const close = (at: number, cleared: boolean) => {
    if (current === undefined) return
    current.end = Math.min(playEnd, at)
    current.ms -= Math.max(0, playEnd - at)
    current.cleared = cleared && playEnd > at
    current = undefined
  }
  for (const frame of frames) {
    while (pending.length > 0 && pending[0] <= frame.at) close(pending.shift()!, true)
    if (current !== undefined && frame.at > playEnd + GAP_MS) close(playEnd, false)
    if (current === undefined) {
      current = { start: frame.at, end: 0, ms: 0, cleared: false }
      out.push(current)
      playEnd = frame.at
    }
    playEnd = Math.max(playEnd, frame.at) + frame.ms
    current.ms += frame.ms
  }
  close(pending[0] ?? playEnd, pending.length > 0)
  return out
}

export interface UtteranceScore {
  /** An answer started between the first word and HEARD_MS after the last. */
  heard: boolean
  /** An answer started before the true end (in a pause), or the server made two or more user turns of it. */
  cutOff: boolean
  /** From the true end to the first answer that starts after it (within HEARD_MS). */
  eotMs?: number
  /** User turns the server began for it. */
  turns: number
  note?: string
}

/**
 * One utterance of the caller from `start` to `end` (its true first and last audible sample), against the agent
 * audio heard and the user turns the server began (all in one clock).
 */
export function scoreUtterance (start: number, end: number, heard: Span[], userTurns: number[]): UtteranceScore {
  const answers = heard.filter((s) => s.start >= start)
  const early = answers.find((s) => s.start < end)
  const answer = answers.find((s) => s.start >= end && s.start <= end + HEARD_MS)
  const turns = userTurns.filter((at) => at >= start - TURN_SLACK_MS && at <= end).length
  return {
    heard: answers.some((s) => s.start <= end + HEARD_MS),
    cutOff: early !== undefined || turns > 1,
    eotMs: answer === undefined ? undefined : answer.start - end,
    turns,
    note: early === undefined ? undefined : `answer began ${Math.round(end - early.start)} ms before the end`
  }
}

export const round = (n: number | undefined, digits = 0) => n === undefined || Number.isNaN(n) ? null : Number(n.toFixed(digits))
/** p50 and p90 in whole ms (null when there are no values), as the JSON lines give latencies. */
export const percentiles = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  return { p50: round(quantile(sorted, 0.5)), p90: round(quantile(sorted, 0.9)) }
}
/** A share from 0 to 1 (three digits); null when nothing counted. */
export const rate = (count: number, of: number) => of === 0 ? null : round(count / of, 3)
