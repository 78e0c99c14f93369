import { parseTelnyxMessage, telnyxTransport } from '../../voice/transports/telnyx.ts'
import type { CarrierStream, StreamInput } from '../carrier-stream.ts'
import { callTelnyx } from './commands.ts'
import { forwardTelnyxCall } from './forwarding.ts'

// Telnyx's media streaming as a carrier stream (carrier-stream.ts): the stream's auth token (stream_auth_token of the
// dial or streaming_start, sent back as the x-telnyx-streaming-auth-token header and in the `connected` frame) opens
// its call once, at `start`, which must name the same call (call_control_id); a transfer takes the call off the
// stream, and a dropped stream's call, or one its session ended, is hung up with the hangup command.

export const telnyxMedia: CarrierStream = {
  carrier: 'telnyx',
  parse (data, isBinary): StreamInput {
    const input = parseTelnyxMessage(data, isBinary)
    if (input.kind !== 'start') return input
    return { kind: 'start', streamId: input.streamId, carrierCallId: input.callControlId, token: undefined }
  },
  transport: (socket, loop, _streamId, actions) => telnyxTransport(socket, loop, actions.forward, actions.sendDigits),
  forward: forwardTelnyxCall,
  async pressKeys (deps, call, callControlId, digits) {
    const telnyx = await callTelnyx(deps, call)
    if (telnyx === undefined) throw new Error('the call\'s number has no Telnyx account to send keys through')
    await telnyx.calls.sendDtmf(callControlId, digits)
  },
  async hangup (deps, call, callControlId) {
    const telnyx = await callTelnyx(deps, call)
    await telnyx?.calls.hangup(callControlId)
  },
  // Streaming forks the call's media: closing the stream leaves the call up
  // (developers.telnyx.com/docs/voice/programmable-voice/media-streaming).
  outlivesStream: true
}
