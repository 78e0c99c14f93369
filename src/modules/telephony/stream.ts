import { parseTwilioMessage, twilioTransport } from '../voice/transports/twilio.ts'
import type { CarrierStream, StreamInput } from './carrier-stream.ts'
import { callTwilio, forwardCall, sendKeys } from './calls.ts'

// Twilio's Media Streams as a carrier stream (carrier-stream.ts): `start` names the call by its one-time token (a
// custom parameter of <Stream>), a <Dial> or a <Play digits> takes the call off the stream, and a dropped stream's
// call is ended through the Calls API.

export const twilioMedia: CarrierStream = {
  carrier: 'twilio',
  parse (data, isBinary): StreamInput {
    const input = parseTwilioMessage(data, isBinary)
    if (input.kind === 'connected') return { kind: 'connected' }
    if (input.kind !== 'start') return input
    return { kind: 'start', streamId: input.streamSid, carrierCallId: input.callSid, token: input.parameters.token }
  },
  transport: (socket, loop, streamSid, actions) => twilioTransport(socket, loop, streamSid, actions.forward, actions.sendDigits),
  forward: forwardCall,
  sendKeys,
  async hangup (deps, call, callSid) {
    const twilio = await callTwilio(deps, call)
    await twilio?.calls.update(callSid, { Status: 'completed' })
  }
}
