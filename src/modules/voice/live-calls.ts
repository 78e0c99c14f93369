import type { Session } from './session.ts'

/**
 * The calls this process holds, so that a shutdown ends each one properly (transcript, recording, analysis)
 * while the database is still there, rather than leaving them to the deadline job.
 */
export class LiveCalls {
  readonly #sessions = new Set<Session>()

  add (session: Session): void {
    this.#sessions.add(session)
    void session.done.then(() => this.#sessions.delete(session))
  }

  async endAll (): Promise<void> {
    await Promise.all([...this.#sessions].map(async (session) => { await session.end('server_shutdown') }))
  }
}
