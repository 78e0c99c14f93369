import { checkFieldValue } from '../agents/data-retrieval.ts'
import type { AgentRow } from '../agents/queries.ts'
import type { CollectedData, RetrievalField } from '../../db/shapes.ts'
import { collectionInstructions } from './prompt.ts'
import type { LiveTool } from '../capabilities/live.ts'
import { uniqueName } from '../capabilities/load.ts'

// The built-in function of data collection (an agent's is_data_collection_active with data_retrieval fields): the
// agent saves what the caller tells it as the call goes, into the conversation's collected_data (kept across a
// forwarding, stored as the call's collected_data when it ends). Not a tool row: the session adds it itself.

/** The function's name, with a suffix when one of the agent's own tools already has it. */
export const COLLECT_TOOL_NAME = 'save_collected_data'
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
 * The function and the lines of the agent's instructions that ask for the fields, when the agent collects data
 * during calls and has fields; undefined otherwise. `collected` is the session's record, which each run adds to
 * (values saved before stay, a field saved again takes the new value); `taken` are the names of the agent's tools.
 */
export function collectData (agent: Pick<AgentRow, 'is_data_collection_active' | 'data_retrieval'>, language: string, collected: CollectedData, taken: string[]): { tool: LiveTool, instructions: string } | undefined {
  const fields = agent.data_retrieval
  if (!agent.is_data_collection_active || fields.length === 0) return undefined
  const name = uniqueName(COLLECT_TOOL_NAME, new Set(taken))
  const byName = new Map(fields.map((field) => [field.name, field]))
  const tool: LiveTool = {
    type: COLLECT_TOOL_TYPE,
    spec: {
      name,
      description: 'Save details the caller gave you, as soon as they give them: one or several fields at a time. Saved values are kept; save a field again to correct it.',
      // None required: the agent saves each detail as it comes.
      parameters: { type: 'object', properties: Object.fromEntries(fields.map((field) => [field.name, property(field)])), additionalProperties: false }
    },
    run: async (args) => {
      const values: CollectedData = {}
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
      return { output: `Saved: ${Object.keys(values).join(', ')}. ${missing.length === 0 ? 'Every required field is collected.' : `Still needed: ${missing.join(', ')}.`}` }
    }
  }
  return { tool, instructions: collectionInstructions(language, fields, name, collected) }
}
