import type { TranscriptItem } from '../../db/schema.ts'
import type { EngineKind } from './engines/index.ts'

/** What a live call tells the far end (the browser's JSON events; the phone uses a few of them). */
export type SessionEvent =
  | { type: 'ready', call_id: string, agent_name: string, mode: 'voice' | 'text', engine: EngineKind, sample_rate: number }
  | ({ type: 'transcript' } & TranscriptItem)
  /** A streaming recogniser's words for the caller's turn so far (replaced by the next, then by its transcript). */
  | { type: 'transcript_partial', speaker: 'user', content: string, stable: boolean, timestamp: number }
  | { type: 'agent_text', delta: string }
  | { type: 'agent_speaking', speaking: boolean }
  | { type: 'user_speaking', speaking: boolean }
  | { type: 'clear' }
  /** The agent pressed keys (send_dtmf): 0-9, * and #, and w for half a second of pause. */
  | { type: 'dtmf', digits: string }
  | { type: 'ended', reason: string, frames_sent: number, frames_late: number }
