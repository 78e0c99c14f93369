import type { AnalyserConfig } from '../../../config.ts'
import { typedValues, type ActionCondition, type Analyser, type AnalysisInput, type RetrievalField } from './types.ts'

// Any OpenAI-compatible chat-completions API (OpenAI, Azure OpenAI, vLLM, Ollama, LiteLLM …), asked for
// structured JSON output so that the answer parses into typed fields.

const FIELD_TYPES: Record<RetrievalField['type'], object> = {
  string: { type: ['string', 'null'] },
  number: { type: ['number', 'null'] },
  boolean: { type: ['boolean', 'null'] },
  date: { type: ['string', 'null'], description: 'YYYY-MM-DD' },
  enum: { type: ['string', 'null'] }
}

// Conditions are asked as c1, c2, … rather than by action id, so that the names stay plain schema keys.
const conditionKey = (index: number) => `c${index + 1}`

function responseSchema (fields: RetrievalField[], conditions: ActionCondition[]) {
  const data = Object.fromEntries(fields.map((f) => [f.name, {
    ...FIELD_TYPES[f.type],
    ...(f.type === 'enum' ? { enum: [...(f.enum_values ?? []), null] } : {}),
    description: f.description || f.name
  }]))
  const keys = conditions.map((_, i) => conditionKey(i))
  const met = Object.fromEntries(conditions.map((c, i) => [keys[i], { type: 'boolean', description: c.condition }]))
  // Asked only when an action has a condition: strict schemas want every object to name its properties.
  const asked = conditions.length === 0 ? {} : { conditions: { type: 'object', additionalProperties: false, required: keys, properties: met, description: 'for each condition: true when the call meets it' } }
  return {
    type: 'object',
    additionalProperties: false,
    required: ['summary', 'sentiment', 'explanation', 'data', ...Object.keys(asked)],
    properties: {
      summary: { type: 'string', description: 'two or three sentences on what the call was about and how it ended' },
      sentiment: { type: 'string', enum: ['positive', 'negative', 'neutral'], description: "the caller's sentiment" },
      explanation: { type: 'string', description: 'one sentence explaining the sentiment' },
      data: { type: 'object', additionalProperties: false, required: fields.map((f) => f.name), properties: data },
      ...asked
    }
  }
}

export class AnalyserError extends Error {}

export interface JsonAnswer {
  parsed: Record<string, unknown>
  usage: Record<string, { input: number, output: number }>
}

/**
 * One chat completion of the analysis model asked for JSON of `schema` (strict structured output): the call
 * analysis and the tests' judge (agent-tests/judge.ts) both ask through it. Fails with an AnalyserError.
 */
export async function askForJson (config: AnalyserConfig, messages: Array<{ role: 'system' | 'user', content: string }>, name: string, schema: object): Promise<JsonAnswer> {
  const response = await fetch(`${config.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${config.apiKey}` },
    signal: AbortSignal.timeout(config.timeoutMs),
    body: JSON.stringify({ model: config.model, temperature: 0, messages, response_format: { type: 'json_schema', json_schema: { name, strict: true, schema } } })
  })
  if (!response.ok) throw new AnalyserError(`the analyser answered ${response.status}: ${(await response.text()).slice(0, 200)}`)
  const body = await response.json() as {
    model?: string
    choices?: Array<{ message?: { content?: string | null, refusal?: string | null } }>
    usage?: { prompt_tokens?: number, completion_tokens?: number }
  }
  const message = body.choices?.[0]?.message
  if (message?.refusal != null) throw new AnalyserError(`the analyser refused: ${message.refusal}`)
  let parsed: unknown
  try {
    parsed = JSON.parse(message?.content ?? '')
  } catch {
    throw new AnalyserError('the analyser did not answer JSON')
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new AnalyserError('the analyser did not answer a JSON object')
  return { parsed: parsed as Record<string, unknown>, usage: { [body.model ?? config.model]: { input: body.usage?.prompt_tokens ?? 0, output: body.usage?.completion_tokens ?? 0 } } }
}

export function openaiAnalyser (config: AnalyserConfig): Analyser {
  return {
    name: `openai:${config.model}`,
    analyse: async (input: AnalysisInput) => {
      const transcript = input.transcript.map((t) => `${t.speaker === 'user' ? 'Caller' : 'Agent'}: ${t.content}`).join('\n')
      const answer = await askForJson(config, [
        {
          role: 'system',
          content: `You analyse phone calls between an AI agent and a caller. Write the summary in the call's language (${input.language}). ` +
            `The call started on ${input.callStart.toISOString()}; resolve relative dates from it. ` +
            'Fill a data field only with what the caller actually said or confirmed; otherwise null. ' +
            'Answer each condition true only when the call clearly meets it.'
        },
        { role: 'user', content: transcript }
      ], 'call_analysis', responseSchema(input.fields, input.conditions))
      const parsed = answer.parsed as { summary?: unknown, sentiment?: unknown, explanation?: unknown, data?: Record<string, unknown>, conditions?: Record<string, unknown> }
      const sentiment = ['positive', 'negative', 'neutral'].includes(parsed.sentiment as string) ? parsed.sentiment as 'positive' | 'negative' | 'neutral' : 'neutral'
      return {
        summary: input.summary && typeof parsed.summary === 'string' ? parsed.summary : null,
        sentiment: input.sentiment ? { sentiment, explanation: typeof parsed.explanation === 'string' ? parsed.explanation : '' } : null,
        data: typedValues(input.fields, parsed.data ?? {}),
        // A condition answered with anything but a boolean stays undecided (its action is delivered).
        conditions: Object.fromEntries(input.conditions.flatMap((c, i) => {
          const met = parsed.conditions?.[conditionKey(i)]
          return typeof met === 'boolean' ? [[c.actionId, met]] : []
        })),
        usage: answer.usage
      }
    }
  }
}
