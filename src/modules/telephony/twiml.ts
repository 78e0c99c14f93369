// The TwiML documents this server answers Twilio with (https://www.twilio.com/docs/voice/twiml).

const escape = (value: string) => value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
const document = (body: string) => `<?xml version="1.0" encoding="UTF-8"?><Response>${body}</Response>`

/** Connects the call to our media stream; `token` opens it once (a custom parameter: Twilio drops query strings). */
export function streamTwiml (streamUrl: string, token: string): string {
  return document(connectStream(streamUrl, token))
}

const connectStream = (streamUrl: string, token: string) =>
  `<Connect><Stream url="${escape(streamUrl)}"><Parameter name="token" value="${escape(token)}"/></Stream></Connect>`

/** Puts the caller through to `number`; Twilio posts how it went to `action`, which answers what happens next. */
export function dialTwiml (dial: { number: string, callerId: string | undefined, timeoutSeconds: number, action: string }): string {
  const callerId = dial.callerId === undefined ? '' : ` callerId="${escape(dial.callerId)}"`
  return document(`<Dial${callerId} timeout="${dial.timeoutSeconds}" action="${escape(dial.action)}" method="POST"><Number>${escape(dial.number)}</Number></Dial>`)
}

/**
 * Plays keypad tones to the other side (`w`: half a second of pause), then connects the call to our media stream
 * again (https://www.twilio.com/docs/voice/twiml/play, "digits"): how the agent sends keys, since Media Streams
 * take none.
 */
export function playDigitsTwiml (digits: string, streamUrl: string, token: string): string {
  return document(`<Play digits="${escape(digits)}"/>${connectStream(streamUrl, token)}`)
}

export const hangupTwiml = (): string => document('<Hangup/>')

/** Refuses a call before it is answered (nobody is charged for it). */
export const rejectTwiml = (): string => document('<Reject/>')
