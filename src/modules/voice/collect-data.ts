import type { AgentRow } from '../agents/queries.ts'
import type { CollectedData } from '../../db/shapes.ts'
import { collectionInstructions } from './prompt.ts'
import type { LiveTool } from '../capabilities/live.ts'
import { COLLECT_TOOL_TYPE, collectFunction } from '../workflows/collect.ts'
import { uniqueName } from '../capabilities/load.ts'

// The built-in function of data collection (an agent's is_data_collection_active with data_retrieval fields): the
// agent saves what the caller tells it as the call goes, into the conversation's collected_data (kept across a
// forwarding, stored as the call's collected_data when it ends). Not a tool row: the session adds it itself.

/** The function's name, with a suffix when one of the agent's own tools already has it. */
export const COLLECT_TOOL_NAME = 'save_collected_data'
/** Its type in the transcript's tool events, and the one the simulator looks for. */
export { COLLECT_TOOL_TYPE }

/**
 * The function and the lines of the agent's instructions that ask for the fields, when the agent collects data
 * during calls and has fields; undefined otherwise. `collected` is the session's record, which each run adds to
 * (values saved before stay, a field saved again takes the new value); `taken` are the names of the agent's tools.
 */
export function collectData (agent: Pick<AgentRow, 'is_data_collection_active' | 'data_retrieval'>, language: string, collected: CollectedData, taken: string[]): { tool: LiveTool, instructions: string } | undefined {
  const fields = agent.data_retrieval
  if (!agent.is_data_collection_active || fields.length === 0) return undefined
  const name = uniqueName(COLLECT_TOOL_NAME, new Set(taken))
  const tool = collectFunction(fields, collected, name, 'Save details the caller gave you, as soon as they give them: one or several fields at a time. Saved values are kept; save a field again to correct it.')
  return { tool, instructions: collectionInstructions(language, fields, name, collected) }
}
