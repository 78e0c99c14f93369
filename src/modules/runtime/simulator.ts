import type { TranscriptItem } from '../../db/schema.ts'
import type { CallEnd } from '../calls/lifecycle.ts'

// The built-in runtime for trying the platform without telephony: it "answers" a call and holds a short
// scripted conversation built from the agent's begin message, its language and the call's dynamic_context.
// Phone numbers ending in 0000 do not answer, so that failed calls can be tried too.

interface Lines { greeting: string, request: (context: string) => string, offer: string, accept: string, goodbye: string }

const LINES: Record<string, Lines> = {
  en: {
    greeting: 'Hello, how can I help you today?',
    request: (context) => `Hi, I am calling about an appointment${context}. Do you have time next Tuesday?`,
    offer: 'Yes, Tuesday at 10 a.m. is free. Shall I book it for you?',
    accept: 'Yes, that works for me. Thank you, that was very helpful!',
    goodbye: 'You are welcome. Your appointment is booked. Goodbye!'
  },
  de: {
    greeting: 'Hallo, wie kann ich Ihnen helfen?',
    request: (context) => `Hallo, ich rufe wegen eines Termins an${context}. Haben Sie nächsten Dienstag Zeit?`,
    offer: 'Ja, Dienstag um 10 Uhr ist frei. Soll ich den Termin für Sie buchen?',
    accept: 'Ja, das passt. Danke, das war sehr hilfreich!',
    goodbye: 'Gerne. Ihr Termin ist gebucht. Auf Wiederhören!'
  }
}

/** `{{name}}` replaced by the dynamic_context value of that name; unknown variables become empty. */
export function fillVariables (text: string, context: Record<string, unknown>): string {
  return text.replace(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g, (_, name: string) => {
    const value = context[name]
    return value === undefined || value === null ? '' : String(value)
  })
}

export interface SimulatedCall {
  callType: 'phone' | 'web'
  callTo: string | null
  start: Date
  /** When the simulator ends it (now): the turns are spread between start and end. */
  end: Date
  language: string
  beginMessage: string | null
  dynamicContext: Record<string, unknown>
}

/** The end of a simulated call: a conversation of five turns, or no answer. */
export function simulate (call: SimulatedCall): CallEnd {
  const start = call.start.getTime()
  const end = Math.max(start, call.end.getTime())
  if (call.callType === 'phone' && call.callTo?.endsWith('0000') === true) {
    return { outcome: 'failed', disconnection_reason: 'no_answer', end_timestamp: end }
  }
  const lines = LINES[call.language.slice(0, 2).toLowerCase()] ?? LINES.en
  const name = call.dynamicContext.customer_name ?? call.dynamicContext.name
  const context = name === undefined ? '' : (call.language.startsWith('de') ? ` für ${String(name)}` : ` for ${String(name)}`)
  const opening = call.beginMessage === null || call.beginMessage === '' ? lines.greeting : fillVariables(call.beginMessage, call.dynamicContext)
  const turns: Array<[TranscriptItem['speaker'], string]> = [
    ['agent', opening], ['user', lines.request(context)], ['agent', lines.offer], ['user', lines.accept], ['agent', lines.goodbye]
  ]
  const step = (end - start) / (turns.length + 1)
  const transcription = turns.map(([speaker, content], i) => ({ speaker, content, timestamp: Math.round(start + (i + 1) * step) }))
  // Roughly what a language model would have used for these turns: about four characters a token.
  const characters = turns.reduce((n, [, content]) => n + content.length, 0)
  return {
    outcome: 'completed',
    disconnection_reason: 'agent_hangup',
    end_timestamp: end,
    transcription,
    usage: { tokens: { simulator: { input: 400 + characters, output: Math.ceil(characters / 8) } } }
  }
}
