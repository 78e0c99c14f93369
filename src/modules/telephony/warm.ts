import type { Conversation, TransferLeg } from '../../db/shapes.ts'

// Warm transfers (docs/voice.md, "Warm transfer"); on Telnyx numbers, telnyx/warm.ts. On Twilio, the caller's call
// joins a conference named for the call and waits there (hold music or silence); the agent places a call to the
// person whose TwiML says a summary of the call inside a <Gather>: one key (1) or a yes joins the person to the
// conference, which starts it and connects both; anything else, or no answer, busy, failed, and the caller is taken
// back to a new media stream, the conversation going on as after a blind forwarding nobody answered. The call to the
// person is settled by its final status callback alone (telephony/routes.ts), so that its length is Twilio's.

/** The conference of a call's warm transfer: named by the call's id (no personal data, as Twilio asks). */
export const conferenceName = (callId: string) => `transfer-${callId}`

/** How long the person has to press 1 or say yes once the summary was said. */
export const ACCEPT_TIMEOUT_SECONDS = 8

interface Lines { intro: string, ask: string, askKey: string, yes: RegExp }

const LINES: Record<string, Lines> = {
  en: { intro: 'Hello, this is the assistant with a call for you.', ask: 'To take the call, press 1 or say yes.', askKey: 'To take the call, press 1.', yes: /\b(yes|yeah|yep|sure|okay|ok)\b/i },
  de: { intro: 'Hallo, hier ist der Assistent mit einem Anruf für Sie.', ask: 'Um den Anruf anzunehmen, drücken Sie die 1 oder sagen Sie ja.', askKey: 'Um den Anruf anzunehmen, drücken Sie die 1.', yes: /\b(ja|jawohl|gerne|okay|ok)\b/i }
}

const linesOf = (language: string): Lines => LINES[language.slice(0, 2).toLowerCase()] ?? LINES.en

/** What the person hears: who calls, the agent's summary, how to accept (`keysOnly`: a carrier that hears no yes, Telnyx's gather). */
export function announcement (language: string, summary: string, keysOnly = false): string {
  const lines = linesOf(language)
  return [lines.intro, summary.trim(), keysOnly ? lines.askKey : lines.ask].filter((text) => text !== '').join(' ')
}

/** Whether the person took the call: the key 1, or a yes in any of the languages spoken here (the recogniser may hear either). */
export function accepted (digits: string | null, speech: string | null): boolean {
  if (digits !== null && digits !== '') return digits === '1'
  return speech !== null && Object.values(LINES).some((lines) => lines.yes.test(speech))
}

/** The conversation with the call to the person recorded on its transfer (the last one), the warm transfer's own state dropped. */
export function withLeg (state: Conversation, leg: TransferLeg): Conversation {
  const { warm: _warm, ...conversation } = state
  const transfers = conversation.transfers.map((transfer, i) => i < conversation.transfers.length - 1 ? transfer : { ...transfer, legs: [...transfer.legs ?? [], leg] })
  return { ...conversation, transfers }
}
