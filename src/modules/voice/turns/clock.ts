import { performance } from 'node:perf_hooks'
import { pace, unpace, type Paced } from '../pacer.ts'

// The turn core's only source of time (DESIGN.md, "Conversation core"): a live call uses the process's clock
// and its shared pacer; tests and typed test conversations use a clock moved by hand, so a whole conversation runs
// in milliseconds.

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

interface Pending { at: number, fn: () => void, seq: number }

/**
 * A clock moved by hand: timers fire and paced members tick (every 20 ms) as `advance` passes their time. The turn
 * core's tests move it; a typed test conversation (text-run.ts) never moves it, so no reminder or time-out fires.
 */
export class ManualClock implements Clock {
  #now = 0
  #timers: Pending[] = []
  #seq = 0
  #paced = new Set<Paced>()
  #nextTick = 20

  now = (): number => this.#now
  wall = (at = this.#now): number => 1_000_000 + at

  after = (ms: number, fn: () => void): Timer => {
    const timer = { at: this.#now + Math.max(0, ms), fn, seq: this.#seq++ }
    this.#timers.push(timer)
    return { cancel: () => { this.#timers = this.#timers.filter((t) => t !== timer) } }
  }

  pace = (member: Paced): void => {
    if (this.#paced.size === 0) this.#nextTick = this.#now + 20
    this.#paced.add(member)
  }

  unpace = (member: Paced): void => { this.#paced.delete(member) }

  /** Moves time on by `ms`, firing timers and ticks in order. */
  advance (ms: number): void {
    const until = this.#now + ms
    for (;;) {
      const timer = this.#timers.reduce<Pending | undefined>((first, t) => first === undefined || t.at < first.at || (t.at === first.at && t.seq < first.seq) ? t : first, undefined)
      const tick = this.#paced.size > 0 ? this.#nextTick : Infinity
      const next = Math.min(timer?.at ?? Infinity, tick)
      if (next > until) break
      this.#now = next
      if (timer !== undefined && timer.at === next) {
        this.#timers = this.#timers.filter((t) => t !== timer)
        timer.fn()
      } else {
        this.#nextTick += 20
        for (const member of [...this.#paced]) member.tick(this.#now)
      }
    }
    this.#now = until
  }
}
