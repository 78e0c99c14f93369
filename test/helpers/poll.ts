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
