// The TwiML documents this server answers Twilio with (https://www.twilio.com/docs/voice/twiml).

const escape = (value: string) => value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
const document = (body: string) => `<?xml version="1.0" encoding="UTF-8"?><Response>${body}</Response>`

/** Connects the call to our media stream; `token` opens it once (a custom parameter: Twilio drops query strings). */
export function streamTwiml (streamUrl: string, token: string): string {
  return document(connectStream(streamUrl, token))
}

const connectStream = (streamUrl: string, token: string) =>
  `<Connect><Stream url="${escape(streamUrl)}"><Parameter name="token" value="${escape(token)}"/></Stream></Connect>`

/**
 * Puts the caller through to `number`, or to the SIP URI `sip` (a SIP trunk's number: the PBX dials it, with its
 * credentials; https://www.twilio.com/docs/voice/twiml/sip); Twilio posts how it went to `action`, which answers what happens next.
 */
export function dialTwiml (dial: { number: string, callerId: string | undefined, timeoutSeconds: number, action: string, sip?: { uri: string, username?: string, password?: string } }): string {
  const callerId = dial.callerId === undefined ? '' : ` callerId="${escape(dial.callerId)}"`
  const { sip } = dial
  const auth = sip?.username === undefined || sip.password === undefined ? '' : ` username="${escape(sip.username)}" password="${escape(sip.password)}"`
  const noun = sip === undefined ? `<Number>${escape(dial.number)}</Number>` : `<Sip${auth}>${escape(sip.uri)}</Sip>`
  return document(`<Dial${callerId} timeout="${dial.timeoutSeconds}" action="${escape(dial.action)}" method="POST">${noun}</Dial>`)
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

// Warm transfers (telephony/warm.ts). <Conference>: https://www.twilio.com/docs/voice/twiml/conference (waitUrl: a
// URL, or the empty string for none; left out: Twilio's default hold music). <Gather>:
// https://www.twilio.com/docs/voice/twiml/gather (input `dtmf speech`, numDigits, timeout, language; the action
// hears Digits or SpeechResult; without input the next verb runs).

/**
 * Puts the call into the conference `name`. The caller (`starts` false) waits there with hold music or in silence
 * until the person who starts it joins; either leaving ends the conference, and with it the other's call.
 */
export function conferenceTwiml (conference: { name: string, starts: boolean, holdMusic?: boolean }): string {
  const wait = conference.holdMusic === false ? ' waitUrl=""' : ''
  return document(`<Dial><Conference startConferenceOnEnter="${String(conference.starts)}" endConferenceOnExit="true" beep="false"${wait}>${escape(conference.name)}</Conference></Dial>`)
}

/** Says `text` and waits for one key or a few words, posted to `action`; silence hangs up. */
export function gatherTwiml (gather: { text: string, language: string, action: string, timeoutSeconds: number }): string {
  const language = escape(gather.language)
  return document(`<Gather input="dtmf speech" numDigits="1" timeout="${gather.timeoutSeconds}" language="${language}" action="${escape(gather.action)}" method="POST">` +
    `<Say language="${language}">${escape(gather.text)}</Say></Gather><Hangup/>`)
}
