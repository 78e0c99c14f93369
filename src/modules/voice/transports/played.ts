import type { WebSocket } from 'ws'
import type { Transport } from '../session.ts'
import type { SocketLoop } from '../socket-loop.ts'

/** How long a close or a forwarding waits for the carrier to have played the agent's last words. */
const DRAIN_MS = 2000

/** A carrier stream's transport that knows when the carrier has played the audio sent (Twilio's and Telnyx's marks). */
export interface PlayedTransport extends Transport {
  /** The carrier played everything sent before the mark `name`. */
  marked: (name: string) => void
  /** Resolves once the carrier has played all the agent audio sent so far (at most DRAIN_MS). */
  drain: () => Promise<void>
}

/**
 * Marks on a carrier's media stream: the carrier echoes a mark once the audio before it is played, so a close (or a
 * forwarding) waits for the last one and a goodbye is not cut off. `sendMark` writes the carrier's own mark message;
 * `audioSent` is called with every frame out.
 */
export function playedMarks (socket: WebSocket, loop: SocketLoop, sendMark: (name: string) => void) {
  const pending = new Map<string, () => void>()
  let marks = 0
  let sentAudio = false
  const drain = async (): Promise<void> => {
    if (!sentAudio || !loop.open) return
    const name = `played-${++marks}`
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer)
        pending.delete(name)
        socket.off('close', done)
        resolve()
      }
      const timer = setTimeout(done, DRAIN_MS)
      pending.set(name, done)
      socket.once('close', done)
      sendMark(name)
    })
  }
  return {
    audioSent: () => { sentAudio = true },
    marked: (name: string) => { pending.get(name)?.() },
    drain,
    // A failed stream closes at once with its code; else once the agent's last words are played.
    close: () => loop.close(loop.open ? drain() : undefined)
  }
}
