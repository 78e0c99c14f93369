import { performance } from 'node:perf_hooks'
import { pace, unpace, type Paced } from '../pacer.ts'

// The turn core's only source of time (DESIGN.md, "Conversation core"): a live call uses the process's clock
// and its shared pacer; tests use a clock they move by hand, so a whole conversation runs in milliseconds.

export interface Timer { cancel: () => void }

export interface Clock {
  /** Monotonic time in ms (performance.now() on a live call). */
  now: () => number
  /** Epoch ms of `now()`: the time stored with transcript items and turn timings. */
  wall: (at?: number) => number
  /** Runs `fn` once, `ms` from now. */
  after: (ms: number, fn: () => void) => Timer
  /** `member.tick(now)` every 20 ms until unpaced (agent audio goes out at the pace it plays). */
  pace: (member: Paced) => void
  unpace: (member: Paced) => void
}

export const systemClock: Clock = {
  now: () => performance.now(),
  wall: (at = performance.now()) => Math.round(performance.timeOrigin + at),
  after (ms, fn) {
    const timer = setTimeout(fn, Math.max(0, ms))
    return { cancel: () => clearTimeout(timer) }
  },
  pace,
  unpace
}
