import { checkFieldValue } from '../agents/data-retrieval.ts'
import type { RetrievalField } from '../../db/shapes.ts'
import type { LiveTool, ToolContext, ToolOutcome } from '../capabilities/live.ts'

// The function that saves what the caller said into typed fields: the agent's data collection
// (voice/collect-data.ts, into collected_data) and a workflow step's variables (run.ts, into the workflow's
// variables) are the same function over different fields and records.

/** Its type in the transcript's tool events, and the one the simulator looks for. */
export const COLLECT_TOOL_TYPE = 'collect_data'
/** A collected text longer than this is refused: a field holds a detail, not a document. */
const MAX_TEXT = 1000

/** A field as a JSON Schema property: its type (a date as a string of format date), enum values, description. */
function property (field: RetrievalField): Record<string, unknown> {
  const description = field.description === '' ? {} : { description: field.description }
  switch (field.type) {
    case 'enum': return { type: 'string', enum: field.enum_values, ...description }
    case 'date': return { type: 'string', format: 'date', description: `${field.description === '' ? field.name : field.description} (YYYY-MM-DD)` }
    case 'string': return { type: 'string', maxLength: MAX_TEXT, ...description }
    default: return { type: field.type, ...description }
  }
}

/**
 * A function named `name` that checks the values given against `fields` and adds them to `collected` (values saved
 * before stay, a field saved again takes the new value). `then` may add to the answer (a workflow's transition).
 */
export function collectFunction (fields: RetrievalField[], collected: Record<string, unknown>, name: string, description: string,
  then?: (outcome: ToolOutcome, ctx: ToolContext) => ToolOutcome): LiveTool {
  const byName = new Map(fields.map((field) => [field.name, field]))
  return {
    type: COLLECT_TOOL_TYPE,
    spec: {
      name,
      description,
      // None required: the agent saves each detail as it comes.
      parameters: { type: 'object', properties: Object.fromEntries(fields.map((field) => [field.name, property(field)])), additionalProperties: false }
    },
    run: async (args, ctx) => {
      const values: Record<string, unknown> = {}
      const problems: string[] = []
      for (const [key, value] of Object.entries(args)) {
        // A model that fills every parameter sends null for those it has nothing for.
        if (value === null) continue
        const field = byName.get(key)
        const checked = field === undefined ? { problem: `${key} is not a field to collect (the fields: ${[...byName.keys()].join(', ')})` } : checkFieldValue(field, value)
        if ('problem' in checked) problems.push(checked.problem)
        else if (typeof checked.value === 'string' && checked.value.length > MAX_TEXT) problems.push(`${key} must be at most ${MAX_TEXT} characters`)
        else values[key] = checked.value
      }
      // All or nothing: the model corrects the values named and saves them again.
      if (problems.length > 0) throw new Error(`Nothing was saved: ${problems.join('; ')}. Ask the caller again if needed, then save the corrected values.`)
      if (Object.keys(values).length === 0) throw new Error(`Nothing was saved: give at least one of the fields (${[...byName.keys()].join(', ')}).`)
      Object.assign(collected, values)
      const missing = fields.filter((field) => field.required && collected[field.name] === undefined).map((field) => field.name)
      const outcome = { output: `Saved: ${Object.keys(values).join(', ')}. ${missing.length === 0 ? 'Every required field is collected.' : `Still needed: ${missing.join(', ')}.`}` }
      return then === undefined ? outcome : then(outcome, ctx)
    }
  }
}
