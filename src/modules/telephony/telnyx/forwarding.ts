import type { CallRow } from '../../../db/schema.ts'
import type { ForwardRequest } from '../../voice/session.ts'
import type { TelephonyDeps } from '../calls.ts'
import { clearForwarding, holdForwarding } from '../queries.ts'
import { callTelnyx, telnyxTarget } from './commands.ts'
import { warmTransferTelnyx } from './warm.ts'

/**
 * Puts a live Telnyx call through to a number (call_forwarding, agent_transfer to a number) with the transfer
 * command: the conversation is kept with the call, Telnyx rings the person on a new leg whose webhooks carry our
 * call (target_leg_client_state), then our stream is stopped. Unanswered, the new leg's call.hangup takes the call
 * back (routes.ts). A warm transfer: telnyx/warm.ts. Throws (and keeps nothing) when the call cannot be forwarded, so that the agent keeps the caller.
 */
export async function forwardTelnyxCall (deps: TelephonyDeps, call: CallRow, callControlId: string, request: ForwardRequest): Promise<void> {
  const telnyx = await callTelnyx(deps, call)
  if (telnyx === undefined) throw new Error('the call\'s number has no Telnyx account to transfer through')
  if (request.warm !== undefined) return await warmTransferTelnyx(deps, call, callControlId, request, telnyx)
  if (!await holdForwarding(deps.db, call.id, request.state)) throw new Error('the call has ended')
  const theirs = call.direction === 'inbound' ? call.call_from : call.call_to
  const from = request.showCallerNumber && theirs !== null ? theirs : telnyx.number.phone_number
  try {
    // A SIP number's person is dialled through its PBX, as its outbound calls are (docs/sip.md).
    await telnyx.calls.transfer(callControlId, { ...telnyxTarget(telnyx.trunk, request.phoneNumber), from, timeoutSeconds: request.timeoutSeconds, clientState: { call_id: call.id, leg: 'transfer' } })
  } catch (err) {
    await clearForwarding(deps.db, call.id)
    throw err
  }
  // The agent is done with this stream; a take-back opens a new one.
  await telnyx.calls.streamingStop(callControlId).catch((err: unknown) => deps.log.warn({ err, callId: call.id }, 'Telnyx could not stop the stream of a forwarded call'))
}
