import type { Clock, Timer } from './clock.ts'

/**
 * The caller's silence between turns: a reminder after `reminderMs`, up to `reminders` times, then `timeout`
 * after `timeoutMs` (call_settings reminder_after_seconds, reminder_max_count, silence_timeout_seconds).
 * Armed when the agent stops speaking, cleared when the caller speaks (the reminders start over).
 */
export class Idle {
  readonly #clock: Clock
  readonly #settings: { reminderMs: number, reminders: number, timeoutMs: number }
  readonly #remind: () => void
  readonly #timeout: () => void
  #timer: Timer | undefined
  #sent = 0

  constructor (clock: Clock, settings: Idle['settings'], remind: () => void, timeout: () => void) {
    this.#clock = clock
    this.#settings = settings
    this.#remind = remind
    this.#timeout = timeout
  }

  get settings (): { reminderMs: number, reminders: number, timeoutMs: number } {
    return this.#settings
  }

  arm (): void {
    this.#timer?.cancel()
    if (this.#sent < this.#settings.reminders) {
      this.#timer = this.#clock.after(this.#settings.reminderMs, () => {
        this.#timer = undefined
        this.#sent++
        this.#remind()
      })
    } else {
      this.#timer = this.#clock.after(this.#settings.timeoutMs, () => {
        this.#timer = undefined
        this.#timeout()
      })
    }
  }

  /** The caller is active: no time-out runs, and the reminders start over. */
  clear (): void {
    this.stop()
    this.#sent = 0
  }

  stop (): void {
    this.#timer?.cancel()
    this.#timer = undefined
  }
}
