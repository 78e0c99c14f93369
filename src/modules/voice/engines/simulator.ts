import { COLLECT_TOOL_TYPE } from '../collect-data.ts'
import type { Engine, EngineEvent, EngineFactory, EngineSetup } from './types.ts'

// The offline engine: text in, text out, no providers. It follows a short appointment script in the
// agent's language, searches the agent's knowledge (an api_rag tool) when asked a question, saves what the
// caller states as "<field> is <value>" (the data collection function), and calls end_call when the caller
// says goodbye. Simulated calls and typed browser calls without speech
// providers run on it, through the same session as spoken calls.

interface Lines { greeting: string, offer: string, booked: string, goodbye: string, found: string, nothing: string, limits: string, noted: string, notNoted: string }

const LINES: Record<string, Lines> = {
  en: {
    greeting: 'Hello, how can I help you today?',
    offer: 'Yes, Tuesday at 10 a.m. is free. Shall I book it for you?',
    booked: 'You are welcome. Your appointment is booked. Goodbye!',
    goodbye: 'Thank you for calling. Goodbye!',
    found: 'Here is what I found: ',
    nothing: 'I could not find anything about that.',
    limits: 'I am the built-in simulator and only follow a short script. Configure speech providers to talk to a real model.',
    noted: 'Thank you, I have noted that.',
    notNoted: 'I could not note that: '
  },
  de: {
    greeting: 'Hallo, wie kann ich Ihnen helfen?',
    offer: 'Ja, Dienstag um 10 Uhr ist frei. Soll ich den Termin für Sie buchen?',
    booked: 'Gerne. Ihr Termin ist gebucht. Auf Wiederhören!',
    goodbye: 'Danke für Ihren Anruf. Auf Wiederhören!',
    found: 'Das habe ich gefunden: ',
    nothing: 'Dazu habe ich nichts gefunden.',
    limits: 'Ich bin der eingebaute Simulator und folge nur einem kurzen Skript. Richten Sie Sprachdienste ein, um mit einem echten Modell zu sprechen.',
    noted: 'Danke, das habe ich notiert.',
    notNoted: 'Das konnte ich nicht notieren: '
  }
}

/** The simulator's lines in the agent's language (English when it has none of its own). */
const simulatorLines = (language: string): Lines => LINES[language.slice(0, 2).toLowerCase()] ?? LINES.en

const GOODBYE = /\b(bye|goodbye|tschüss|wiederhören|wiedersehen)\b/i
const YES = /\b(yes|yeah|sure|ok|okay|works|ja|gerne|passt)\b/i
const QUESTION = /\?\s*$|^(what|when|where|who|how|which|do|does|is|are|can|was|wann|wo|wer|wie|welche|gibt)\b/i
const TRUE = /^(yes|true|ja)$/i
const FALSE = /^(no|false|nein)$/i

/**
 * What the caller states for the data collection function's fields (its parameters), as "<field> is <value>"
 * ("email is ada@example.com", "visit date: 2026-05-04"): a field's words as its name has them, the value up to the
 * end of the clause or an "and". Numbers and yes/no are given their type; anything else goes as said, for the function to check.
 */
function statedValues (parameters: Record<string, unknown>, text: string): Record<string, unknown> {
  const properties = (parameters.properties ?? {}) as Record<string, { type?: string }>
  const found: Record<string, unknown> = {}
  for (const [name, schema] of Object.entries(properties)) {
    const words = name.split(/_+|(?<=[a-z])(?=[A-Z])/).filter((w) => w !== '').join('[\\s_]+')
    // Names are variable names (agents' data_retrieval rule): nothing in them needs escaping.
    const match = new RegExp(`\\b${words}(?:\\s*[:=]\\s*|\\s+(?:is|ist)\\s+)([^,;!?]+)`, 'iu').exec(text)
    if (match === null) continue
    const said = match[1].split(/\.(?:\s|$)|\s(?:and|und)\s/i)[0].trim()
    if (said === '') continue
    const number = Number(said)
    found[name] = schema.type === 'number' && Number.isFinite(number)
      ? number
      : schema.type === 'boolean' && (TRUE.test(said) || FALSE.test(said)) ? TRUE.test(said) : said
  }
  return found
}

export const simulatorEngine: EngineFactory = (onEvent: (event: EngineEvent) => void): Engine => {
  let setup: EngineSetup
  let turn = 0
  let closed = false
  let pendingTool: { id: string, kind: 'search' | 'end' | 'collect' } | undefined
  let calls = 0
  const emit = (event: EngineEvent) => { if (!closed) onEvent(event) }
  const hasTool = (type: string) => setup.tools.find((t) => setup.toolTypes?.[t.name] === type)

  function speak (text: string, heard: string): void {
    // About four characters a token, as a language model would have counted.
    emit({ type: 'usage', model: 'simulator', input: 100 + Math.ceil((setup.instructions.length + heard.length) / 4), output: Math.ceil(text.length / 4) })
    emit({ type: 'agent_text', delta: text })
    emit({ type: 'response_done', text })
  }

  function toolCall (name: string, args: Record<string, unknown>, kind: 'search' | 'end' | 'collect'): void {
    const id = `sim_${++calls}`
    pendingTool = { id, kind }
    emit({ type: 'tool_call', id, name, arguments: JSON.stringify(args) })
  }

  function answer (text: string): void {
    const lines = simulatorLines(setup.language)
    turn++
    const endTool = hasTool('end_call')
    const searchTool = hasTool('api_rag')
    const collectTool = hasTool(COLLECT_TOOL_TYPE)
    const stated = collectTool === undefined ? {} : statedValues(collectTool.parameters, text)
    if (collectTool !== undefined && Object.keys(stated).length > 0) return toolCall(collectTool.name, stated, 'collect')
    if (GOODBYE.test(text)) {
      if (endTool !== undefined) return toolCall(endTool.name, { reason: 'the caller said goodbye' }, 'end')
      return speak(lines.goodbye, text)
    }
    if (searchTool !== undefined && QUESTION.test(text.trim())) return toolCall(searchTool.name, { query: text }, 'search')
    if (turn === 1) return speak(lines.offer, text)
    if (YES.test(text)) return speak(lines.booked, text)
    speak(lines.limits, text)
  }

  return {
    async start (value) {
      setup = value
      // A conversation that goes on (a test chat's next turn, a call taken back) keeps its place in the script.
      turn = (value.history ?? []).filter((item) => item.role === 'user').length
    },
    audio () {},
    // No recogniser: a spoken turn is heard as nothing.
    endOfTurn () { emit({ type: 'user_text', text: '' }) },
    userText (text) { answer(text) },
    say (text) { speak(text, '') },
    toolResult (id, output) {
      if (pendingTool?.id !== id) return
      const { kind } = pendingTool
      pendingTool = undefined
      const lines = simulatorLines(setup.language)
      if (kind === 'end') return speak(lines.goodbye, output)
      if (kind === 'collect') return speak(output.startsWith('Error: ') ? lines.notNoted + output.slice('Error: '.length) : lines.noted, output)
      let passages: Array<{ content?: string }> = []
      try {
        const parsed = JSON.parse(output) as unknown
        if (Array.isArray(parsed)) passages = parsed as typeof passages
      } catch {}
      const first = passages.find((p) => typeof p.content === 'string')?.content
      speak(first === undefined ? lines.nothing : lines.found + first.slice(0, 300), output)
    },
    cancel () { pendingTool = undefined },
    update (value) { setup = value },
    close () { closed = true }
  }
}
