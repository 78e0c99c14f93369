export interface PollOptions<T> {
  /** How long to keep asking: a bound on a failing test, 60 s by default, far above what a passing test needs on a busy machine. */
  timeoutMs?: number
  /** Pause between two probes (default 20 ms). */
  intervalMs?: number
  /**
   * With a message, a time-out throws an Error with it (given the last value, to show what was there).
   * Without one the last value is returned as it is and the caller's own assertion reports the failure.
   */
  message?: string | ((last: T) => string)
}

/**
 * Calls `probe` until `done` holds for its value, and returns that value. Tests wait for background work
 * with this, never by sleeping a fixed time.
 */
export async function poll<T> (probe: () => T | Promise<T>, done: (value: T) => boolean, options: PollOptions<T> = {}): Promise<T> {
  const { timeoutMs = 60_000, intervalMs = 20, message } = options
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (done(value)) return value
    if (Date.now() > deadline) {
      if (message === undefined) return value
      throw new Error(typeof message === 'function' ? message(value) : message)
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}

/**
 * Waits until the agent's audio on a carrier's stream has stopped: more than ten frames after the first `after`,
 * none for 300 ms (and nothing left to play, for a stream that knows), and the same still at a probe 100 ms later.
 * A stalled process (a loaded machine) makes any gap look long until its sockets are read again: one probe after a
 * stall would take a pause inside the agent's sentence for its end, and the caller would speak over the agent.
 */
export async function agentQuiet (stream: { frames: ReadonlyArray<{ at: number }>, bufferedMs?: () => number }, after = 0): Promise<void> {
  let quiet: { frames: number, since: number } | undefined
  await poll(() => stream.frames.length, (frames) => {
    const last = stream.frames.at(-1)
    if (frames - after <= 10 || last === undefined || performance.now() - last.at <= 300 || (stream.bufferedMs?.() ?? 0) > 0) {
      quiet = undefined
      return false
    }
    if (quiet?.frames !== frames) quiet = { frames, since: performance.now() }
    return performance.now() - quiet.since >= 100
  }, { message: (frames) => `the agent did not speak and stop (${frames - after} frames)` })
}
