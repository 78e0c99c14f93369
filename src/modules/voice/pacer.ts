import { performance } from 'node:perf_hooks'
import { FRAME_MS } from './audio.ts'

// Outbound audio is paced by one clock for every call of the process (DESIGN.md, "Voice"): each tick gives
// every playing call the frames that keep its far end's buffer at BUFFER_MS. One timer for all calls
// costs far less than one per call, and its drift is corrected against the start time.

/** Agent audio the far end holds ahead of what it plays: covers network jitter, adds this much delay. */
export const BUFFER_MS = 60

export interface Paced {
  /** Called every FRAME_MS with the clock's time (performance.now()). */
  tick: (now: number) => void
}

const members = new Set<Paced>()
let timer: NodeJS.Timeout | undefined
let next = 0

function run (): void {
  const now = performance.now()
  for (const member of members) member.tick(now)
  if (members.size === 0) {
    timer = undefined
    return
  }
  next += FRAME_MS
  // Far behind (a blocked event loop): start again from now rather than firing a burst of catch-up ticks.
  if (next < now - FRAME_MS) next = now + FRAME_MS
  timer = setTimeout(run, Math.max(0, next - performance.now()))
}

export function pace (member: Paced): void {
  members.add(member)
  if (timer === undefined) {
    next = performance.now() + FRAME_MS
    timer = setTimeout(run, FRAME_MS)
  }
}

export function unpace (member: Paced): void {
  members.delete(member)
}

/** Caller audio may run this far ahead of the wall clock (a client that buffers, or sends a short turn at once); more is dropped. */
export const CALLER_LEAD_MS = 2000
/** Caller audio this far behind the wall clock (the client paused, or its network stalled) starts again at now. */
export const CALLER_LAG_MS = 500

/**
 * The caller's side of the clock: where each frame of caller audio belongs on the wall clock's timeline. A
 * client that sends faster than real time gets no further than CALLER_LEAD_MS ahead: the rest is dropped, so
 * that neither the provider, the turn detector nor the recording take minutes of audio in seconds.
 */
export class CallerPace {
  #next: number | undefined
  /** Frames dropped for running ahead of the clock. */
  dropped = 0

  /** Where a frame of `ms` arriving at `now` (the clock's time) starts, or undefined when it is to be dropped. */
  place (now: number, ms: number): number | undefined {
    let at = this.#next ?? now
    if (at < now - CALLER_LAG_MS) at = now
    if (at + ms > now + CALLER_LEAD_MS) {
      this.dropped++
      return undefined
    }
    this.#next = at + ms
    return at
  }
}
