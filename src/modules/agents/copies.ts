import { knowledgeBasesOfAgents, replaceAgentKnowledge } from '../knowledge-bases/queries.ts'
import { dataRetrieval } from './data-retrieval.ts'
import {
  ACTION_TABLE, findLlm, insertAgent, insertCapability, insertLlm, listCapabilities, TOOL_TABLE, updateAgent, type AgentRow, type findTemplate, type Trx
} from './queries.ts'
import { CALL_SETTINGS_DEFAULTS, newAgentDefaults } from './schemas.ts'
import { recordVersion } from './versions.ts'

// New agents made from others: a template of the catalogue (POST /v1/agent/agent_template/:id/clone and the console's
// "New agent") and a copy of an agent (the console's Duplicate). Each writes its own LLM configuration.

type Template = NonNullable<Awaited<ReturnType<typeof findTemplate>>>
interface Owners { customer_id: string | null, workspace_id: string | null }

/** An agent and an LLM configuration from a template, with the defaults for everything else; its first version written. */
export async function cloneTemplate (trx: Trx, userId: string, template: Template, options: Owners & { agent_name?: string }): Promise<AgentRow> {
  const { agent, llm } = template
  const config = await insertLlm(trx, userId, { ...llm, max_tokens: null })
  const row = await insertAgent(trx, userId, {
    ...newAgentDefaults(),
    customer_id: options.customer_id,
    workspace_id: options.workspace_id,
    agent_name: options.agent_name ?? agent.agent_name,
    llm_id: config.id,
    call_settings: { ...CALL_SETTINGS_DEFAULTS, ...agent.call_settings },
    data_retrieval: dataRetrieval(agent.data_retrieval)
  })
  return { ...row, version: await recordVersion(trx, userId, row.id, 'created') }
}

/**
 * A copy of the agent named "<name> (copy)", in the same customer and workspace: its settings, workflow, actions,
 * tools and knowledge bases, and a copy of its LLM configuration (so that editing one does not change the other).
 * Not copied: its calls, versions (the copy starts at 1), tests and widget key. Its status and folder are the original's.
 */
export async function duplicateAgent (trx: Trx, userId: string, agent: AgentRow): Promise<AgentRow> {
  const llm = await findLlm(trx, userId, agent.llm_id)
  if (llm === undefined) throw new Error(`agent ${agent.id} has no LLM configuration`)
  const config = await insertLlm(trx, userId, {
    model: llm.model, begin_message: llm.begin_message, general_prompt: llm.general_prompt, temperature: llm.temperature, max_tokens: llm.max_tokens, engine: llm.engine, turn_detection: llm.turn_detection
  })
  const inserted = await insertAgent(trx, userId, {
    customer_id: agent.customer_id,
    workspace_id: agent.workspace_id,
    agent_name: `${agent.agent_name.slice(0, 193)} (copy)`,
    llm_id: config.id,
    voice_id: agent.voice_id,
    interruption_sensitivity: agent.interruption_sensitivity,
    call_settings: agent.call_settings,
    data_retrieval: agent.data_retrieval,
    webhook_url: agent.webhook_url,
    is_data_collection_active: agent.is_data_collection_active,
    widget_settings: agent.widget_settings,
    callback_settings: agent.callback_settings,
    voicemail_settings: agent.voicemail_settings,
    workflow: agent.workflow
  })
  // What an insert does not take (a new agent is active, in no folder, without memory): as the original has it.
  const copy = await updateAgent(trx, userId, inserted.id, { status: agent.status, folder: agent.folder, is_customer_memory_active: agent.is_customer_memory_active })
  for (const kind of [ACTION_TABLE, TOOL_TABLE]) {
    for (const row of await listCapabilities(trx, userId, kind, agent.id)) {
      await insertCapability(trx, userId, kind, { agent_id: copy.id, type: row.type, settings: row.settings, is_active: row.is_active })
    }
  }
  await replaceAgentKnowledge(trx, userId, copy.id, (await knowledgeBasesOfAgents(trx, userId, [agent.id])).get(agent.id) ?? [])
  return { ...copy, version: await recordVersion(trx, userId, copy.id, 'created') }
}
