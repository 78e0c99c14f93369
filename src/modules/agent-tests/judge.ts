import type { AnalyserConfig } from '../../config.ts'
import type { TranscriptItem } from '../../db/shapes.ts'
import { askForJson } from '../runtime/analysis/openai.ts'

// Plain-language criteria judged by the analysis model (ANALYSER=openai; docs/testing.md, "Criteria"): one request per
// scenario asks for a verdict and a reason per criterion. With the built-in analyser nothing can judge them: they are
// reported not judged, which is not a pass.

export interface Verdict { status: 'passed' | 'failed' | 'not_judged', reason: string }

/** The transcript as the judge reads it: lines with their speakers, tool calls with arguments and answers, steps entered. */
export function transcriptText (transcript: TranscriptItem[]): string {
  return transcript.map((item) => {
    if (item.speaker === 'tool' && item.tool !== undefined) {
      return `[tool ${item.tool.name}(${item.tool.arguments}) → ${item.tool.error === undefined ? item.tool.output ?? '' : `error: ${item.tool.error}`}]`
    }
    if (item.speaker === 'step') return `[step entered: ${item.step?.name ?? item.content}]`
    return `${item.speaker === 'user' ? 'Caller' : 'Agent'}: ${item.content}`
  }).join('\n')
}

const key = (index: number) => `c${index + 1}`

export async function judge (config: AnalyserConfig, transcript: TranscriptItem[], criteria: string[]): Promise<Verdict[]> {
  if (criteria.length === 0) return []
  if (config.kind !== 'openai') return criteria.map(() => ({ status: 'not_judged', reason: 'no analysis model is configured (ANALYSER=openai) to judge criteria' }))
  const keys = criteria.map((_, i) => key(i))
  const verdict = { type: 'object', additionalProperties: false, required: ['passed', 'reason'], properties: { passed: { type: 'boolean' }, reason: { type: 'string', description: 'one sentence: why' } } }
  const schema = {
    type: 'object',
    additionalProperties: false,
    required: ['criteria'],
    properties: { criteria: { type: 'object', additionalProperties: false, required: keys, properties: Object.fromEntries(criteria.map((criterion, i) => [keys[i], { ...verdict, description: criterion }])) } }
  }
  try {
    const { parsed } = await askForJson(config, [
      {
        role: 'system',
        content: 'You judge a test conversation between an AI phone agent and a simulated caller. For each criterion, answer passed true only when the conversation clearly meets it, with a one-sentence reason. Criteria:\n' +
          criteria.map((criterion, i) => `${keys[i]}: ${criterion}`).join('\n')
      },
      { role: 'user', content: transcriptText(transcript) }
    ], 'test_criteria', schema)
    const answers = (parsed.criteria ?? {}) as Record<string, { passed?: unknown, reason?: unknown } | undefined>
    return keys.map((name) => {
      const answer = answers[name]
      const reason = typeof answer?.reason === 'string' ? answer.reason.slice(0, 1000) : ''
      return typeof answer?.passed === 'boolean'
        ? { status: answer.passed ? 'passed' : 'failed', reason }
        : { status: 'not_judged', reason: 'the judge gave no verdict' }
    })
  } catch (error) {
    const reason = `the judge failed: ${error instanceof Error ? error.message : String(error)}`
    return criteria.map(() => ({ status: 'not_judged', reason }))
  }
}
