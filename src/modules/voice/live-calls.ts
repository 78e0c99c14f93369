import type { CallSignal } from './signals.ts'
import type { Session } from './session.ts'

/**
 * The calls this process holds, so that a shutdown ends each one properly (transcript, recording, analysis)
 * while the database is still there, rather than leaving them to the deadline job; and so that a signal about a
 * call (signals.ts: a carrier's webhook on any process) reaches its session.
 */
export class LiveCalls {
  readonly #sessions = new Set<Session>()

  add (session: Session): void {
    this.#sessions.add(session)
    void session.done.then(() => this.#sessions.delete(session))
  }

  /** Gives a signal to the session of the call, if this process holds it; answers whether it did. */
  signal (callId: string, signal: CallSignal): boolean {
    const session = [...this.#sessions].find((s) => s.call.id === callId && !s.finished)
    if (session === undefined) return false
    if (signal.type === 'answered_by') session.answeredBy(signal.answered_by)
    return true
  }

  async endAll (): Promise<void> {
    await Promise.all([...this.#sessions].map(async (session) => { await session.end('server_shutdown') }))
  }
}
