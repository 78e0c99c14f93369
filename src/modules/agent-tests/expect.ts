import type { Conversation, TranscriptItem } from '../../db/shapes.ts'
import type { Expectation, ExpectationResult } from './shapes.ts'

// Checks a scenario's expectations against the conversation it had (docs/testing.md, "Expectations"). Criteria are
// not checked here: the judge reads them (judge.ts).

const same = (a: unknown, b: unknown): boolean =>
  typeof a === 'string' && typeof b === 'string' ? a.trim().toLowerCase() === b.trim().toLowerCase() : JSON.stringify(a) === JSON.stringify(b)

/** Every member of `wanted` is in `given` with the same value (objects and arrays compared whole). */
function holds (given: unknown, wanted: Record<string, unknown>): boolean {
  if (given === null || typeof given !== 'object') return false
  return Object.entries(wanted).every(([name, value]) => same((given as Record<string, unknown>)[name], value))
}

function parsed (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** The steps entered in order: the workflow's path, else the transcript's step items. */
export function stepsEntered (conversation: Conversation): Array<{ id: string, name: string }> {
  return conversation.workflow?.path ?? conversation.transcript.flatMap((item) => item.step === undefined ? [] : [item.step])
}

export const toolItems = (transcript: TranscriptItem[]) => transcript.flatMap((item) => item.speaker === 'tool' && item.tool !== undefined ? [item.tool] : [])

const agentText = (transcript: TranscriptItem[]) => transcript.filter((item) => item.speaker === 'agent').map((item) => item.content).join('\n').toLowerCase()

const result = (expectation: Expectation, passed: boolean, reason: string): ExpectationResult => ({ expectation, status: passed ? 'passed' : 'failed', reason })

/** The result of one expectation that is not a criterion. */
export function check (expectation: Exclude<Expectation, { type: 'criterion' }>, conversation: Conversation, endReason: string | null): ExpectationResult {
  const { transcript } = conversation
  switch (expectation.type) {
    case 'tool_called': {
      const calls = toolItems(transcript).filter((tool) => tool.name === expectation.tool)
      if (calls.length === 0) {
        const called = [...new Set(toolItems(transcript).map((tool) => tool.name))]
        return result(expectation, false, `${expectation.tool} was not called (${called.length === 0 ? 'no tool was' : `called: ${called.join(', ')}`})`)
      }
      if (expectation.arguments === undefined) return result(expectation, true, `called ${calls.length} time${calls.length === 1 ? '' : 's'}`)
      const wanted = expectation.arguments
      const match = calls.find((call) => holds(parsed(call.arguments), wanted))
      return match === undefined
        ? result(expectation, false, `called, but never with those arguments (given: ${calls.map((call) => call.arguments).join('; ').slice(0, 500)})`)
        : result(expectation, true, `called with ${match.arguments.slice(0, 500)}`)
    }
    case 'variable': {
      const variables: Record<string, unknown> = { ...conversation.collected_data, ...conversation.workflow?.variables }
      if (!(expectation.name in variables)) return result(expectation, false, `${expectation.name} was not collected`)
      const value = variables[expectation.name]
      return result(expectation, same(value, expectation.value), `${expectation.name} is ${JSON.stringify(value)}`)
    }
    case 'ended': {
      const reason = endReason ?? 'none'
      return result(expectation, same(reason, expectation.reason), endReason === null ? 'the conversation did not end' : `ended: ${endReason}`)
    }
    case 'transcript_contains': {
      const found = agentText(transcript).includes(expectation.text.toLowerCase())
      return result(expectation, found, found ? 'the agent said it' : 'the agent never said it')
    }
    case 'transcript_excludes': {
      const found = agentText(transcript).includes(expectation.text.toLowerCase())
      return result(expectation, !found, found ? 'the agent said it' : 'the agent never said it')
    }
    case 'step_path': {
      const path = stepsEntered(conversation)
      let at = 0
      for (const step of path) if (at < expectation.steps.length && (step.id === expectation.steps[at] || same(step.name, expectation.steps[at]))) at++
      const taken = path.map((step) => step.id).join(' → ') || 'no step'
      return result(expectation, at === expectation.steps.length, at === expectation.steps.length ? `path: ${taken}` : `${expectation.steps[at]} not entered in that order (path: ${taken})`)
    }
  }
}
