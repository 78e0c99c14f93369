import type { CollectedData, RetrievalField } from '../../db/shapes.ts'

// What the session adds to an agent's prompt, and the few lines it speaks itself, in the agent's language.

/** `moment`: said while a tool takes longer than a second. `notForwarded`: the agent takes the call back from a forwarding that nobody answered (or that failed). */
interface Lines { reminder: string, timeUp: string, notForwarded: string, moment: string }

const LINES: Record<string, Lines> = {
  en: {
    reminder: 'Are you still there?',
    timeUp: 'I am sorry, we have reached the time limit for this call. Goodbye!',
    notForwarded: 'I am sorry, I could not reach anyone there. I am back with you: how else can I help?',
    moment: 'One moment, please.'
  },
  de: {
    reminder: 'Sind Sie noch da?',
    timeUp: 'Es tut mir leid, die Zeit für dieses Gespräch ist abgelaufen. Auf Wiederhören!',
    notForwarded: 'Es tut mir leid, dort war niemand zu erreichen. Ich bin wieder für Sie da: Wie kann ich sonst helfen?',
    moment: 'Einen Moment bitte.'
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

interface CollectionLines {
  intro: string
  required: string
  types: Record<Exclude<RetrievalField['type'], 'enum'>, string> & { enum: (values: string[]) => string }
  save: (tool: string) => string
  saved: string
}

const COLLECTION: Record<string, CollectionLines> = {
  en: {
    intro: 'During the conversation, ask the caller for these details, naturally and one or two at a time:',
    required: 'required',
    types: { string: 'text', number: 'number', boolean: 'yes or no', date: 'date', enum: (values) => `one of ${values.join(', ')}` },
    save: (tool) => `As soon as the caller gives one, save it with the ${tool} function (several at once if you have them; save again to correct one). Before the call ends, ask for any required detail still missing.`,
    saved: 'Already saved (do not ask again unless the caller corrects it):'
  },
  de: {
    intro: 'Fragen Sie im Gespräch nach und nach, natürlich und höchstens zwei auf einmal, nach diesen Angaben:',
    required: 'Pflicht',
    types: { string: 'Text', number: 'Zahl', boolean: 'ja oder nein', date: 'Datum', enum: (values) => `eines von ${values.join(', ')}` },
    save: (tool) => `Sobald der Anrufer eine Angabe nennt, speichern Sie sie mit der Funktion ${tool} (mehrere auf einmal, wenn Sie sie haben; erneut, um eine zu korrigieren). Fragen Sie vor dem Ende des Gesprächs nach fehlenden Pflichtangaben.`,
    saved: 'Bereits gespeichert (nicht erneut fragen, außer der Anrufer korrigiert es):'
  }
}

/**
 * Appended to the prompt of an agent that collects data during calls: each field (name, type, enum values, whether
 * required, description), the function that saves them, and what was saved before (a transfer, a call taken back).
 */
export function collectionInstructions (language: string, fields: RetrievalField[], tool: string, collected: CollectedData): string {
  const lines = COLLECTION[language.slice(0, 2).toLowerCase()] ?? COLLECTION.en
  const items = fields.map((field) => {
    const type = field.type === 'enum' ? lines.types.enum(field.enum_values ?? []) : lines.types[field.type]
    return `- ${field.name} (${type}${field.required ? `, ${lines.required}` : ''})${field.description === '' ? '' : `: ${field.description}`}`
  })
  const saved = Object.entries(collected).map(([name, value]) => `${name}: ${JSON.stringify(value)}`)
  return [lines.intro, ...items, lines.save(tool), ...(saved.length === 0 ? [] : [`${lines.saved} ${saved.join(', ')}`])].join('\n')
}
