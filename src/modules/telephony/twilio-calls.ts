import { CarrierError } from '../phone-numbers/carriers/carrier.ts'
import type { TwilioRequest } from '../phone-numbers/carriers/twilio.ts'

// Twilio's Calls resource: placing a call, changing a live one (a <Dial>, a hang-up), reading its status.

export interface TwilioCall { sid: string, status: string }

/** Digest credentials Twilio answers a SIP endpoint's challenge with. */
export interface SipAuth { username: string, password: string }

export function twilioCalls (request: TwilioRequest) {
  return {
    /**
     * Rings `to` for up to `timeoutSeconds`; the status callback hears the answer (its time) and the end. With
     * `machineDetection`, Twilio's asynchronous answering-machine detection runs while the call streams and posts
     * its AnsweredBy to the callback: at once for a person, at the end of a machine's greeting (DetectMessageEnd).
     * https://www.twilio.com/docs/voice/answering-machine-detection
     */
    async create (call: { to: string, from: string, twiml: string, statusCallback: string, timeoutSeconds: number, sipAuth?: SipAuth, machineDetection?: { callback: string, timeoutSeconds: number } }): Promise<TwilioCall> {
      const amd = call.machineDetection
      const created = await request<TwilioCall>('POST', '/Calls.json', {
        // A SIP URI in To with the digest credentials of the PBX (https://www.twilio.com/docs/voice/api/sip-making-calls).
        ...(call.sipAuth !== undefined && { SipAuthUsername: call.sipAuth.username, SipAuthPassword: call.sipAuth.password }),
        To: call.to,
        From: call.from,
        Twiml: call.twiml,
        Timeout: String(call.timeoutSeconds),
        StatusCallback: call.statusCallback,
        StatusCallbackMethod: 'POST',
        StatusCallbackEvent: ['answered', 'completed'],
        ...(amd !== undefined && {
          MachineDetection: 'DetectMessageEnd',
          AsyncAmd: 'true',
          AsyncAmdStatusCallback: amd.callback,
          AsyncAmdStatusCallbackMethod: 'POST',
          MachineDetectionTimeout: String(amd.timeoutSeconds)
        })
      })
      if (created?.sid === undefined) throw new CarrierError('failed', 'Twilio answered the new call without its sid')
      return created
    },
    /** New TwiML for a live call, or its end (`Status: completed`). */
    async update (sid: string, change: { Twiml: string } | { Status: 'completed' }): Promise<void> {
      await request('POST', `/Calls/${encodeURIComponent(sid)}.json`, change)
    }
  }
}
