import type { CallRow } from '../../../db/schema.ts'
import type { Conversation } from '../../../db/shapes.ts'
import { HttpError } from '../../../http/errors.ts'
import { endCall, settledTransfers, toCallEnd } from '../../calls/lifecycle.ts'
import { findCallRow } from '../../calls/queries.ts'
import { CALL_CONTROL_ID } from '../../voice/transports/telnyx.ts'
import { newStreamToken, telnyxStream, UNANSWERED, type TelephonyDeps } from '../calls.ts'
import { acceptWarm, answerWarm, takeBackWarm } from '../queries.ts'
import { ACCEPT_TIMEOUT_SECONDS, accepted, announcement, withLeg } from '../warm.ts'
import { callTelnyx } from './commands.ts'
import { HANGUP_STATUS, seconds, type TelnyxEvent } from './events.ts'
import { announcementVoice } from './warm.ts'

// The webhooks of warm transfers on Telnyx numbers (telnyx/warm.ts places them): the events of the call to the person
// (client_state leg 'warm'), and the caller hanging up meanwhile. Each is decided from the call's stored state
// (answerWarm, acceptWarm, takeBackWarm change it once), so that Telnyx's repeats change nothing.

/** The handlers, given whether a call belongs to the account an event came from (routes.ts, ofAccount). */
export function warmLegs (deps: TelephonyDeps, ofAccount: (call: CallRow, event: TelnyxEvent) => Promise<boolean>): {
  warmLeg: (event: TelnyxEvent) => Promise<void>
  warmCallerGone: (call: CallRow, state: Conversation, warm: NonNullable<Conversation['warm']>, event: TelnyxEvent) => Promise<void>
} {
  const { db, config, log } = deps

  // Warm transfers (telnyx/warm.ts): the events of the call to the person (client_state leg 'warm'), and the caller
  // hanging up meanwhile. Each is decided from the call's stored state (answerWarm, acceptWarm, takeBackWarm change it
  // once), so that Telnyx's repeats change nothing.

  /** Hangs up the call to the person (a ringing one is cancelled); its call.hangup settles the transfer. `gone`: it may have ended already. */
  async function hangUpLeg (call: CallRow, leg: string, gone = false): Promise<void> {
    const telnyx = await callTelnyx(deps, call)
    await telnyx?.calls.hangup(leg).catch((err: unknown) => { log[gone ? 'debug' : 'warn']({ err, callId: call.id }, 'the call to the person of a warm transfer could not be hung up') })
  }

  /** The person took the call and a hang-up ended it: the call ends call_transfer with the seconds from their answer. */
  async function endTransferred (call: CallRow, state: Conversation, at: Date): Promise<void> {
    const talked = call.transfer_answered_at === null ? 0 : seconds(call.transfer_answered_at, at)
    const ended = withLeg(state, { to: state.transfers.at(-1)?.to_number ?? '', outcome: 'answered', seconds: talked })
    await endCall(db, deps, call.user_id, call.id, toCallEnd(config, call.id, ended, { reason: 'call_transfer', forwarding: { outcome: 'answered', seconds: talked } }))
  }

  /** The caller hung up during a warm transfer: taken, the call was theirs and the person's; before, the person's call is hung up. */
  async function warmCallerGone (call: CallRow, state: Conversation, warm: NonNullable<Conversation['warm']>, event: TelnyxEvent): Promise<void> {
    // Bridged calls end together; the person's is hung up should it still be there.
    if (warm.call_sid !== null) await hangUpLeg(call, warm.call_sid, warm.accepted_at !== null)
    if (warm.accepted_at !== null) return await endTransferred(call, state, event.at)
    const canceled = withLeg(state, { to: state.transfers.at(-1)?.to_number ?? '', outcome: 'canceled', seconds: 0 })
    await endCall(db, deps, call.user_id, call.id, toCallEnd(config, call.id, canceled, { reason: 'user_hangup', forwarding: { outcome: 'canceled', seconds: 0 } }))
  }

  /** An event of the call to the person: answered (the announcement and its one key), the key, or its end. */
  async function warmLeg (event: TelnyxEvent): Promise<void> {
    const leg = event.callControlId
    if (!CALL_CONTROL_ID.test(leg)) throw new HttpError(400, 'bad_request', 'data.payload.call_control_id must be a Telnyx call control id')
    const found = await findCallRow(db, event.state!.call_id)
    if (found?.carrier !== 'telnyx' || !await ofAccount(found, event)) return
    const call = found
    const state = call.call_status === 'started' ? call.forwarding : null
    const warm = state?.warm
    // The event is about the person's call of the warm transfer that runs (its id is recorded once dialled or answered).
    const ours = warm !== undefined && (warm.call_sid === null || warm.call_sid === leg)
    if (event.type === 'call.answered') {
      // A person answering for a caller who is gone (or for an earlier transfer) is hung up at once.
      if (!ours) return await hangUpLeg(call, leg)
      if (!await answerWarm(db, call.id, leg, event.at)) return
      const said = warm.announcement ?? { text: announcement('en', '', true), language: 'en' }
      const telnyx = await callTelnyx(deps, call)
      try {
        await telnyx?.calls.gatherUsingSpeak(leg, { text: said.text, voice: announcementVoice(said.language), timeoutMs: ACCEPT_TIMEOUT_SECONDS * 1000 })
      } catch (err) {
        log.warn({ err, callId: call.id }, 'Telnyx could not announce the call to the person; their call is hung up and the agent takes the caller back')
        await hangUpLeg(call, leg)
      }
      return
    }
    if (!ours) return
    if (event.type === 'call.gather.ended') {
      // The person hung up while it was said: their call.hangup follows and settles it.
      if (event.payload.status === 'call_hangup' || warm.accepted_at !== null) return
      const { digits = '' } = event.payload
      if (typeof digits !== 'string') throw new HttpError(400, 'bad_request', 'data.payload.digits must be a string')
      if (!accepted(digits, null)) return await hangUpLeg(call, leg)
      if (!await acceptWarm(db, call.id, leg) || call.carrier_call_id === null) return
      const telnyx = await callTelnyx(deps, call)
      if (warm.hold_music === true) await telnyx?.calls.playbackStop(call.carrier_call_id).catch((err: unknown) => { log.warn({ err, callId: call.id }, 'Telnyx could not stop the hold music') })
      try {
        await telnyx?.calls.bridge(call.carrier_call_id, leg)
      } catch (err) {
        // The person's call is gone (or Telnyx refused): the caller is not left in silence, the agent takes them back.
        log.warn({ err, callId: call.id }, 'Telnyx could not bridge the caller to the person who took the call; the agent takes the caller back')
        await hangUpLeg(call, leg, true)
        await takeCallerBack(call, state!, leg, 'failed', new Date())
      }
      return
    }
    if (event.type !== 'call.hangup') return
    if (warm.accepted_at !== null) return await endTransferred(call, state!, event.at)
    // Nobody took it: declined once answered, else what the hang-up says.
    const outcome = call.transfer_answered_at !== null ? 'declined' : UNANSWERED[HANGUP_STATUS[String(event.payload.hangup_cause)] ?? 'failed'] ?? 'failed'
    await takeCallerBack(call, state!, leg, outcome, event.at)
  }

  /** The warm transfer did not connect: the person's leg is recorded, and the agent takes the caller back on a new stream (once). */
  async function takeCallerBack (call: CallRow, state: Conversation, leg: string, outcome: string, at: Date): Promise<void> {
    const talked = call.transfer_answered_at === null ? 0 : seconds(call.transfer_answered_at, at)
    const back = withLeg(state, { to: state.transfers.at(-1)?.to_number ?? '', outcome, seconds: talked })
    const { token, hash, expires } = newStreamToken()
    if (call.carrier_call_id === null || !await takeBackWarm(db, call.id, leg, { ...back, transfers: settledTransfers(back, outcome) }, hash, expires)) return
    const telnyx = await callTelnyx(deps, call)
    if (state.warm?.hold_music === true) await telnyx?.calls.playbackStop(call.carrier_call_id).catch((err: unknown) => { log.warn({ err, callId: call.id }, 'Telnyx could not stop the hold music') })
    await telnyx?.calls.streamingStart(call.carrier_call_id, telnyxStream(config, token)).catch((err: unknown) => {
      log.warn({ err, callId: call.id }, 'Telnyx could not stream a call taken back; its hang-up ends it')
    })
  }

  return { warmLeg, warmCallerGone }
}
