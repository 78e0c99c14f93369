import type { DB } from '../../db/database.ts'
import { knowledgeBasesOfAgents } from '../knowledge-bases/queries.ts'
import type { AgentRow, LlmRow } from './queries.ts'
import { maskWorkflow } from './workflow-check.ts'
import type { Workflow } from './workflow.ts'
import { CALL_SETTINGS_DEFAULTS, CALLBACK_SETTINGS_DEFAULTS, VOICEMAIL_SETTINGS_DEFAULTS, WIDGET_SETTINGS_DEFAULTS, type AgentBody } from './schemas.ts'

// Rows as the API shows them: used by the agents' routes and by the other modules that answer agents (runtime).

/** `knowledgeBases`: ids of the knowledge bases the agent uses (PUT /v1/knowledge-base/:id/agents assigns them). */
export function toAgent (row: AgentRow, knowledgeBases: string[]): AgentBody {
  return {
    _id: row.id,
    agent_name: row.agent_name,
    llm_id: row.llm_id,
    voice: { voice_id: row.voice_id },
    interruption_sensitivity: row.interruption_sensitivity,
    call_settings: { ...CALL_SETTINGS_DEFAULTS, ...row.call_settings },
    data_retrieval: row.data_retrieval,
    webhook_url: row.webhook_url,
    is_data_collection_active: row.is_data_collection_active,
    status: row.status,
    workspace_id: row.workspace_id,
    customer_id: row.customer_id,
    knowledge_base: knowledgeBases,
    folder: row.folder,
    is_customer_memory_active: row.is_customer_memory_active,
    widget_settings: { ...WIDGET_SETTINGS_DEFAULTS, ...row.widget_settings },
    callback_settings: { ...CALLBACK_SETTINGS_DEFAULTS, ...row.callback_settings },
    voicemail_settings: { ...VOICEMAIL_SETTINGS_DEFAULTS, ...row.voicemail_settings },
    version: row.version,
    workflow: row.workflow === null ? null : maskWorkflow(row.workflow as unknown as Workflow),
    created_at: row.created_at.getTime(),
    updated_at: row.updated_at.getTime()
  }
}

/** Agents as the API shows them, with the knowledge bases each uses. */
export async function agentBodies (db: DB, userId: string, rows: AgentRow[]): Promise<AgentBody[]> {
  const knowledgeBases = await knowledgeBasesOfAgents(db, userId, rows.map((row) => row.id))
  return rows.map((row) => toAgent(row, knowledgeBases.get(row.id) ?? []))
}

/** An LLM configuration as the API shows it. */
export const toLlm = (row: LlmRow) => ({
  _id: row.id,
  model: row.model,
  begin_message: row.begin_message,
  general_prompt: row.general_prompt,
  temperature: row.temperature,
  max_tokens: row.max_tokens,
  engine: row.engine,
  turn_detection: row.turn_detection,
  created_at: row.created_at.getTime(),
  updated_at: row.updated_at.getTime()
})
