import type { RetrievalField } from '../../db/schema.ts'
import { spaced } from '../capabilities/types/send-dtmf.ts'

// Keypad tones (DTMF) both ways (docs/voice.md, "Keypad"): what a key is, how a caller's run of keys reads to the
// model and in the transcript, and which data_retrieval field a run ended with `#` fills. What the agent may send is
// the send_dtmf capability's (capabilities/types/send-dtmf.ts).

/** One key the caller pressed: the twelve of a phone's keypad and the four of the tone plan's last column (A-D). */
export const KEY = /^[0-9*#A-D]$/
/** Keys the caller pressed, as a transport hands them on (one or several at once). */
export const KEYS = /^[0-9*#A-D]+$/
/**
 * A caller's run of keys holds at most this many (an account number, a PIN, a date); more keys before its end are
 * dropped, so that a stuck key or a flood of tones makes one turn of bounded size, not thousands.
 */
export const MAX_KEYPAD_RUN = 32

/** The transcript's content of a run of keys the caller pressed (its `keypad` member holds them as they are). */
export const keypadContent = (keys: string) => `[keypad] ${spaced(keys)}`

/** What the model is told of a run of keys: a caller turn, worded so that it is not read as speech. */
export function keypadTurn (keys: string, saved: string | undefined): string {
  const note = saved === undefined ? '' : ` They were saved as ${saved}.`
  return `(The caller pressed keys on their phone's keypad: ${spaced(keys)}.${note})`
}

/**
 * The data_retrieval field a run of keys ended with `#` fills: the first `keypad` field of the agent not collected yet
 * (the value is the keys before the `#`); undefined when there is none or nothing was typed before it.
 */
export function keypadField (fields: RetrievalField[], collected: Record<string, unknown>, keys: string): { field: string, value: string } | undefined {
  if (!keys.endsWith('#') || keys.length < 2) return undefined
  const field = fields.find((f) => f.keypad === true && collected[f.name] === undefined)
  return field === undefined ? undefined : { field: field.name, value: keys.slice(0, -1) }
}
