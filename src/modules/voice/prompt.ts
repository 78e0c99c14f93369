// What the session adds to an agent's prompt, and the few lines it speaks itself, in the agent's language.

interface Lines { reminder: string, timeUp: string }

const LINES: Record<string, Lines> = {
  en: { reminder: 'Are you still there?', timeUp: 'I am sorry, we have reached the time limit for this call. Goodbye!' },
  de: { reminder: 'Sind Sie noch da?', timeUp: 'Es tut mir leid, die Zeit für dieses Gespräch ist abgelaufen. Auf Wiederhören!' }
}

/** The session's own lines in the agent's language (English when it has none of its own). */
export const spokenLines = (language: string): Lines => LINES[language.slice(0, 2).toLowerCase()] ?? LINES.en

/** Appended to the agent's prompt: how to behave on a live call. */
export function callInstructions (language: string, callType: 'phone' | 'web'): string {
  return `You are speaking with a person on a live ${callType === 'phone' ? 'phone' : 'web'} call. ` +
    `Speak ${language}. Keep every answer short and conversational: one to three sentences, no lists, no markdown. ` +
    'Use your tools when they help; when the conversation is over, say goodbye and use the end_call tool if you have one.'
}
