// What the session adds to an agent's prompt, and the few lines it speaks itself, in the agent's language.

/** `notForwarded`: the agent takes the call back from a forwarding that nobody answered (or that failed). */
interface Lines { reminder: string, timeUp: string, notForwarded: string }

const LINES: Record<string, Lines> = {
  en: {
    reminder: 'Are you still there?',
    timeUp: 'I am sorry, we have reached the time limit for this call. Goodbye!',
    notForwarded: 'I am sorry, I could not reach anyone there. I am back with you: how else can I help?'
  },
  de: {
    reminder: 'Sind Sie noch da?',
    timeUp: 'Es tut mir leid, die Zeit für dieses Gespräch ist abgelaufen. Auf Wiederhören!',
    notForwarded: 'Es tut mir leid, dort war niemand zu erreichen. Ich bin wieder für Sie da: Wie kann ich sonst helfen?'
  }
}

/** The session's own lines in the agent's language (English when it has none of its own). */
export const spokenLines = (language: string): Lines => LINES[language.slice(0, 2).toLowerCase()] ?? LINES.en

/** Appended to the agent's prompt: how to behave on a live call. */
export function callInstructions (language: string, callType: 'phone' | 'web'): string {
  return `You are speaking with a person on a live ${callType === 'phone' ? 'phone' : 'web'} call. ` +
    `Speak ${language}. Keep every answer short and conversational: one to three sentences, no lists, no markdown. ` +
    'Use your tools when they help; when the conversation is over, say goodbye and use the end_call tool if you have one.'
}
