import type { Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { Database } from '../../db/schema.ts'
import { findAgent, findLlm, listCapabilities, type AgentRow, type CapabilityRow, type LlmRow } from './queries.ts'

// Agent versions (DESIGN.md, "Workflows, versions, tests, campaigns"): what an agent's calls run on, as of one
// version of the agent.

type Executor = DB | Transaction<Database>

/** What an agent's calls run on, as of one version: rows as the live tables hold them (headers opened). */
export interface AgentConfig { version: number, agent: AgentRow, llm: LlmRow, tools: CapabilityRow[], actions: CapabilityRow[] }

const TOOL_ROWS = { table: 'agent_tools', typeColumn: 'tool_type' } as const
const ACTION_ROWS = { table: 'agent_actions', typeColumn: 'action_type' } as const

/** The version's config (null: the latest); undefined when the agent or that version does not exist. */
export async function loadAgentConfig (db: DB, userId: string, agentId: string, version: number | null): Promise<AgentConfig | undefined> {
  const agent = await findAgent(db, userId, agentId)
  if (agent === undefined || (version !== null && version !== agent.version)) return undefined
  const llm = await findLlm(db, userId, agent.llm_id)
  if (llm === undefined) return undefined
  const [tools, actions] = await Promise.all([listCapabilities(db, userId, TOOL_ROWS, agent.id), listCapabilities(db, userId, ACTION_ROWS, agent.id)])
  return { version: agent.version, agent, llm, tools, actions }
}

/** The agent's latest version. */
export async function currentVersion (db: Executor, userId: string, agentId: string): Promise<number> {
  return (await findAgent(db, userId, agentId))?.version ?? 0
}
