import type { VoiceConfig } from '../../config.ts'
import type { TranscriptItem } from '../../db/shapes.ts'
import { postToProvider, ProviderError } from '../voice/providers.ts'
import { MAX_LINE_CHARS } from './shapes.ts'

// The simulated caller of a persona scenario (docs/testing.md, "Callers"): the LLM of the voice engine (LLM_URL, the
// agent's model) plays the persona, one line per turn, from the conversation so far seen from the caller's side.

/** What the persona answers to hang up. */
export const HANG_UP = '[HANG UP]'

const instructions = (persona: string) =>
  'You play a caller phoning a business\'s AI phone agent, to test the agent. Stay in your role; never say you are an AI or a test.\n' +
  `Who you are and what you want:\n${persona}\n` +
  `Answer with only what you say next, one short turn. When your goal is reached or the conversation is over, answer exactly ${HANG_UP}.`

/** The persona's next line, or null when it hangs up. Fails with a ProviderError. */
export async function personaLine (voice: VoiceConfig, model: string, persona: string, transcript: TranscriptItem[], signal: AbortSignal): Promise<string | null> {
  // The caller is the assistant here: the agent's lines are what it hears.
  const messages = [
    { role: 'system', content: instructions(persona) },
    ...transcript.filter((item) => item.speaker === 'agent' || item.speaker === 'user')
      .map((item) => ({ role: item.speaker === 'user' ? 'assistant' : 'user', content: item.content }))
  ]
  // A conversation the caller opens (no begin message) starts with a line of its own.
  if (messages.length === 1) messages.push({ role: 'user', content: '(the agent picked up and waits for you to speak)' })
  const body = JSON.stringify({ model, messages, temperature: 0.7, stream: false })
  const decoder = new TextDecoder()
  let text = ''
  for await (const chunk of postToProvider('LLM', voice.llm, '/chat/completions', { type: 'application/json', body }, { signal, timeoutMs: voice.providerTimeoutMs })) {
    text += decoder.decode(chunk, { stream: true })
  }
  let line: unknown
  try {
    line = (JSON.parse(text) as { choices?: Array<{ message?: { content?: unknown } }> }).choices?.[0]?.message?.content
  } catch {
    throw new ProviderError('LLM provider did not answer JSON for the persona caller')
  }
  if (typeof line !== 'string') throw new ProviderError('LLM provider gave the persona caller no text')
  const said = line.trim()
  return said === '' || said.includes(HANG_UP) ? null : said.slice(0, MAX_LINE_CHARS)
}
