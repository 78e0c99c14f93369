import type { DB } from '../../../db/database.ts'
import type { CallRow } from '../../../db/schema.ts'
import { HttpError } from '../../../http/errors.ts'
import { answeredByOf, signalCall } from '../../voice/signals.ts'
import { CALL_CONTROL_ID } from '../../voice/transports/telnyx.ts'
import { settleAnsweredBy } from '../queries.ts'
import type { TelnyxEvent } from './events.ts'

// Answering-machine detection on Telnyx numbers (docs/voice.md, "Voicemail").

/**
 * The results of Telnyx's answering-machine detection events (developers.telnyx.com/api-reference/callbacks:
 * call-machine-detection-ended, call-machine-greeting-ended and their premium kin; values from team-telnyx/telnyx-node
 * src/resources/webhooks.ts) as Twilio's AnsweredBy, which calls.answered_by keeps and voice/signals.ts answeredByOf
 * reads. A machine is acted on once its greeting ended (`machine_start` until then); a greeting whose end Telnyx is
 * not sure of is over all the same (it sends nothing more). Premium's silence is Twilio's unknown.
 */
const MACHINE_RESULTS: Record<string, Record<string, string>> = {
  'call.machine.detection.ended': { human: 'human', machine: 'machine_start', not_sure: 'unknown' },
  'call.machine.greeting.ended': { beep_detected: 'machine_end_beep', ended: 'machine_end_other', not_sure: 'machine_end_other' },
  'call.machine.premium.detection.ended': { human_residence: 'human', human_business: 'human', machine: 'machine_start', silence: 'unknown', fax_detected: 'fax', not_sure: 'unknown' },
  'call.machine.premium.greeting.ended': { beep_detected: 'machine_end_beep', no_beep_detected: 'machine_end_other' }
}

/** Whether an event type is one of answering-machine detection's. */
export const isMachineEvent = (type: string) => Object.hasOwn(MACHINE_RESULTS, type)

/**
 * A call.machine.* event of an outbound call placed with detection (telnyx/commands.ts): its verdict is kept with
 * the call in Twilio's words (MACHINE_RESULTS) and signalled to the call's session, as Twilio's /telephony/twilio/amd
 * does. Only the first decisive verdict counts (settleAnsweredBy): a repeat or a late event changes nothing.
 */
export async function machineDetected (db: DB, event: TelnyxEvent, callOf: (event: TelnyxEvent) => Promise<CallRow | undefined>): Promise<void> {
  if (!CALL_CONTROL_ID.test(event.callControlId)) throw new HttpError(400, 'bad_request', 'data.payload.call_control_id must be a Telnyx call control id')
  const results = MACHINE_RESULTS[event.type]
  const result = event.payload.result
  const kept = typeof result === 'string' && Object.hasOwn(results, result) ? results[result] : undefined
  if (kept === undefined) throw new HttpError(400, 'bad_request', `data.payload.result of ${event.type} must be one of ${Object.keys(results).join(', ')}`)
  // A call of another installation on the same account, or no longer here: nothing to do.
  const call = await callOf(event)
  if (call?.direction !== 'outbound' || !await settleAnsweredBy(db, call.id, kept)) return
  const answeredBy = answeredByOf(kept)
  if (answeredBy !== undefined) await signalCall(db, call.id, { type: 'answered_by', answered_by: answeredBy })
}
