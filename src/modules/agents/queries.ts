import type { ExpressionBuilder, Selectable, Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import { openValues, sealValues } from '../../db/secrets.ts'
import type { AgentsTable, AgentVersionsTable, Database, LlmConfigsTable } from '../../db/schema.ts'
import { conflict, PG } from '../../http/errors.ts'

export type AgentRow = Selectable<AgentsTable>
export type LlmRow = Selectable<LlmConfigsTable>
export type Trx = Transaction<Database>
export type Executor = DB | Trx

export interface Paging { limit?: number, skip?: number }

// Language-model configurations

export async function listLlms (db: DB, userId: string, paging: Paging): Promise<LlmRow[]> {
  return await db.selectFrom('llm_configs').selectAll().where('user_id', '=', userId)
    .orderBy('created_at').orderBy('id').limit(paging.limit ?? 100).offset(paging.skip ?? 0).execute()
}

export async function findLlm (db: Executor, userId: string, id: string): Promise<LlmRow | undefined> {
  return await db.selectFrom('llm_configs').selectAll().where('user_id', '=', userId).where('id', '=', id.toLowerCase()).executeTakeFirst()
}

export type LlmValues = Pick<LlmRow, 'model' | 'begin_message' | 'general_prompt' | 'temperature' | 'max_tokens'> & Partial<Pick<LlmRow, 'engine' | 'turn_detection'>>

/** The values with turn_detection as JSON text, as its jsonb column is written. */
function llmColumns<T extends Partial<LlmValues>> ({ turn_detection: turns, ...values }: T) {
  return { ...values, ...(turns === undefined ? {} : { turn_detection: JSON.stringify(turns) }) }
}

export async function insertLlm (db: Executor, userId: string, values: LlmValues): Promise<LlmRow> {
  return await db.insertInto('llm_configs').values({ id: newId(), user_id: userId, ...llmColumns(values) }).returningAll().executeTakeFirstOrThrow()
}

export async function updateLlm (db: Executor, userId: string, id: string, changes: Partial<LlmValues>): Promise<LlmRow | undefined> {
  return await db.updateTable('llm_configs').set({ ...llmColumns(changes), updated_at: new Date() })
    .where('user_id', '=', userId).where('id', '=', id.toLowerCase()).returningAll().executeTakeFirst()
}

/** How many of the account's agents use the configuration (an edit of it changes them all). */
export async function countAgentsOfLlm (db: Executor, userId: string, llmId: string): Promise<number> {
  const { n } = await db.selectFrom('agents').select((eb) => eb.fn.countAll<number>().as('n'))
    .where('user_id', '=', userId).where('llm_id', '=', llmId.toLowerCase()).executeTakeFirstOrThrow()
  return Number(n)
}

/** Deletes a configuration no agent uses; one still behind an agent is a 409 naming how many. */
export async function deleteLlm (db: DB, userId: string, id: string): Promise<boolean> {
  const llmId = id.toLowerCase()
  const n = await countAgentsOfLlm(db, userId, llmId)
  if (n > 0) throw conflict(`LLM configuration ${llmId} is used by ${n} agent${n === 1 ? '' : 's'}; point them at another one first`, 'llm_in_use')
  try {
    const result = await db.deleteFrom('llm_configs').where('user_id', '=', userId).where('id', '=', llmId).executeTakeFirst()
    return result.numDeletedRows > 0n
  } catch (err) {
    // An agent created between the count and the delete.
    if ((err as { code?: string }).code === PG.FOREIGN_KEY_VIOLATION) throw conflict(`LLM configuration ${llmId} is used by an agent`, 'llm_in_use')
    throw err
  }
}

// Agents

export interface AgentFilter extends Paging { customer_id?: string, workspace_id?: string }

export async function listAgents (db: DB, userId: string, filter: AgentFilter): Promise<AgentRow[]> {
  return (await db.selectFrom('agents').selectAll().where('user_id', '=', userId)
    .$if(filter.customer_id !== undefined, (q) => q.where('customer_id', '=', filter.customer_id!.toLowerCase()))
    .$if(filter.workspace_id !== undefined, (q) => q.where('workspace_id', '=', filter.workspace_id!.toLowerCase()))
    .orderBy('created_at').orderBy('id').limit(filter.limit ?? 100).offset(filter.skip ?? 0).execute()).map(openedAgent)
}

export async function agentExists (db: Executor, userId: string, id: string): Promise<boolean> {
  return await findAgent(db, userId, id) !== undefined
}

export async function findAgent (db: Executor, userId: string, id: string): Promise<AgentRow | undefined> {
  const row = await db.selectFrom('agents').selectAll().where('user_id', '=', userId).where('id', '=', id.toLowerCase()).executeTakeFirst()
  return row === undefined ? undefined : openedAgent(row)
}

/** Columns a new agent needs, as the routes compute them: jsonb members as objects, as they are read. */
export type AgentValues = Omit<AgentRow, 'id' | 'user_id' | 'status' | 'folder' | 'is_customer_memory_active' | 'workflow' | 'voicemail_settings' | 'version' | 'created_at' | 'updated_at'> & Partial<Pick<AgentRow, 'workflow' | 'voicemail_settings'>>

const JSON_COLUMNS = ['call_settings', 'data_retrieval', 'widget_settings', 'callback_settings', 'voicemail_settings', 'workflow'] as const

/** The values with their jsonb members as JSON text, as the columns are written (see Json in schema.ts); null stays NULL. */
type Stored<T> = { [K in keyof T]: K extends typeof JSON_COLUMNS[number] ? (null extends T[K] ? string | null : string) : T[K] }

function jsonColumns<T extends Partial<AgentRow>> (values: T): Stored<T> {
  const out: Record<string, unknown> = { ...values }
  for (const column of JSON_COLUMNS) {
    if (out[column] !== undefined && out[column] !== null) out[column] = JSON.stringify(out[column])
  }
  return out as Stored<T>
}

/** A workflow with its API call steps' header values passed `through` sealing (written) or opening (read). */
function workflowHeaders (workflow: AgentRow['workflow'], through: (values: Record<string, string>) => Record<string, string>): AgentRow['workflow'] {
  if (workflow === null || !Array.isArray(workflow.steps)) return workflow
  return { ...workflow, steps: (workflow.steps as Array<Record<string, unknown>>).map((step) => step.type === 'api_call' ? withHeaders(step, through) : step) }
}

/** A workflow as stored (its header values sealed) and as read (opened): for agent versions, which keep it as stored. */
export const sealedWorkflow = (workflow: AgentRow['workflow']) => workflowHeaders(workflow, sealValues)
export const openedWorkflow = (workflow: AgentRow['workflow']) => workflowHeaders(workflow, openValues)

/** The values as stored: a workflow's header values sealed. */
function sealed<T extends Partial<AgentRow>> (values: T): T {
  return values.workflow === undefined || values.workflow === null ? values : { ...values, workflow: workflowHeaders(values.workflow, sealValues) }
}

/** An agent row as the modules read it: its workflow's header values readable (answers mask them). */
const openedAgent = (row: AgentRow): AgentRow => row.workflow === null ? row : { ...row, workflow: workflowHeaders(row.workflow, openValues) }

export async function insertAgent (db: Executor, userId: string, values: AgentValues): Promise<AgentRow> {
  return openedAgent(await db.insertInto('agents')
    .values({ id: newId(), user_id: userId, ...jsonColumns(sealed(values)) })
    .returningAll().executeTakeFirstOrThrow())
}

export type AgentChanges = Partial<Omit<AgentRow, 'id' | 'user_id' | 'customer_id' | 'workspace_id' | 'version' | 'created_at' | 'updated_at'>>

/** Writes the changes of a PATCH; the caller has merged the nested settings already, under the row lock. */
export async function updateAgent (trx: Trx, userId: string, id: string, changes: AgentChanges): Promise<AgentRow> {
  return openedAgent(await trx.updateTable('agents').set({ ...jsonColumns(sealed(changes)), updated_at: new Date() })
    .where('user_id', '=', userId).where('id', '=', id).returningAll().executeTakeFirstOrThrow())
}

export async function lockAgent (trx: Trx, userId: string, id: string): Promise<AgentRow | undefined> {
  const row = await trx.selectFrom('agents').selectAll().where('user_id', '=', userId).where('id', '=', id.toLowerCase()).forUpdate().executeTakeFirst()
  return row === undefined ? undefined : openedAgent(row)
}

/**
 * Deletes the agent with its actions and tools (foreign keys cascade); its calls stay. Transfer tools of
 * other agents that pointed at it are switched off rather than deleted, so their settings are not lost.
 * Answers the agents whose tools were switched off (each then gets a version), undefined when there was no agent.
 */
/**
 * Moves the agent into a workspace of its owner, or out of any (null); the caller has checked the workspace is the
 * owner's. Its calls keep the workspace they were made in. False: no such agent.
 */
export async function moveAgent (db: Executor, userId: string, id: string, workspaceId: string | null): Promise<boolean> {
  const result = await db.updateTable('agents').set({ workspace_id: workspaceId, updated_at: new Date() })
    .where('user_id', '=', userId).where('id', '=', id.toLowerCase()).executeTakeFirst()
  return result.numUpdatedRows > 0n
}

export async function deleteAgent (trx: Trx, userId: string, id: string): Promise<string[] | undefined> {
  const agentId = id.toLowerCase()
  const others = (await agentsTransferringTo(trx, userId, agentId)).filter((other) => other !== agentId)
  // All of them locked in id order first, as every multi-agent change does.
  await lockAgents(trx, userId, [agentId, ...others])
  const result = await trx.deleteFrom('agents').where('user_id', '=', userId).where('id', '=', agentId).executeTakeFirst()
  if (result.numDeletedRows === 0n) return undefined
  const switched = await trx.updateTable('agent_tools').set({ is_active: false, updated_at: new Date() })
    .where('user_id', '=', userId).where('tool_type', '=', 'agent_transfer').where('is_active', '=', true)
    .where((eb) => eb(eb.ref('settings', '->>').key('agent_id'), '=', agentId))
    .returning('agent_id').execute()
  return [...new Set(switched.map((row) => row.agent_id))]
}

// Actions and tools: the same shape in two tables, told apart by the name of their type column.

export interface CapabilityTable { table: 'agent_actions' | 'agent_tools', typeColumn: 'action_type' | 'tool_type' }

export interface CapabilityRow {
  id: string
  agent_id: string
  type: string
  settings: Record<string, unknown>
  is_active: boolean
  created_at: Date
  updated_at: Date
}

// Kysely cannot type a table chosen at run time; both tables are queried as if they were agent_tools.
const tableOf = (kind: CapabilityTable) => kind.table as 'agent_tools'
const typeOf = (kind: CapabilityTable) => kind.typeColumn as 'tool_type'

function capabilityColumns (kind: CapabilityTable) {
  return (eb: ExpressionBuilder<Database, 'agent_tools'>) =>
    ['id', 'agent_id', eb.ref(typeOf(kind)).as('type'), 'settings', 'is_active', 'created_at', 'updated_at'] as const
}

// Header values (api_call actions, mcp tools, a workflow's API call steps) are stored encrypted: sealed on write, opened on read.
function withHeaders (settings: Record<string, unknown>, through: (values: Record<string, string>) => Record<string, string>): Record<string, unknown> {
  const headers = settings.headers as Record<string, string> | undefined
  return headers === undefined ? settings : { ...settings, headers: through(headers) }
}

/** An action's stored settings with their header values readable (the delivery engine reads them at each attempt). */
export const openSettings = (settings: Record<string, unknown>) => withHeaders(settings, openValues)

const opened = (row: CapabilityRow): CapabilityRow => ({ ...row, settings: openSettings(row.settings) })

export async function listCapabilities (db: DB, userId: string, kind: CapabilityTable, agentId: string): Promise<CapabilityRow[]> {
  return (await db.selectFrom(tableOf(kind)).select(capabilityColumns(kind))
    .where('user_id', '=', userId).where('agent_id', '=', agentId.toLowerCase()).orderBy('created_at').orderBy('id').execute()).map(opened)
}

export async function findCapability (db: Executor, userId: string, kind: CapabilityTable, agentId: string, id: string, lock = false): Promise<CapabilityRow | undefined> {
  const row = await db.selectFrom(tableOf(kind)).select(capabilityColumns(kind))
    .where('user_id', '=', userId).where('agent_id', '=', agentId.toLowerCase()).where('id', '=', id.toLowerCase())
    .$if(lock, (q) => q.forUpdate())
    .executeTakeFirst()
  return row === undefined ? undefined : opened(row)
}

export async function countCapabilities (db: Executor, userId: string, kind: CapabilityTable, agentId: string): Promise<number> {
  const { n } = await db.selectFrom(tableOf(kind)).select((eb) => eb.fn.countAll<number>().as('n'))
    .where('user_id', '=', userId).where('agent_id', '=', agentId.toLowerCase()).executeTakeFirstOrThrow()
  return n
}

export async function insertCapability (db: Executor, userId: string, kind: CapabilityTable, values: { agent_id: string, type: string, settings: Record<string, unknown>, is_active: boolean }): Promise<CapabilityRow> {
  const row = {
    id: newId(), user_id: userId, agent_id: values.agent_id, [typeOf(kind)]: values.type, settings: JSON.stringify(withHeaders(values.settings, sealValues)), is_active: values.is_active
  }
  return opened(await db.insertInto(tableOf(kind)).values(row).returning(capabilityColumns(kind)).executeTakeFirstOrThrow())
}

export async function updateCapability (db: Executor, userId: string, kind: CapabilityTable, id: string, changes: { settings?: Record<string, unknown>, is_active?: boolean }): Promise<CapabilityRow> {
  const settings = changes.settings === undefined ? undefined : JSON.stringify(withHeaders(changes.settings, sealValues))
  const set = { updated_at: new Date(), is_active: changes.is_active, settings }
  return opened(await db.updateTable(tableOf(kind)).set(set).where('user_id', '=', userId).where('id', '=', id)
    .returning(capabilityColumns(kind)).executeTakeFirstOrThrow())
}

export async function deleteCapability (db: Executor, userId: string, kind: CapabilityTable, agentId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom(tableOf(kind)).where('user_id', '=', userId)
    .where('agent_id', '=', agentId.toLowerCase()).where('id', '=', id.toLowerCase()).executeTakeFirst()
  return result.numDeletedRows > 0n
}

// Versions (versions.ts): immutable snapshots of what an agent's calls run on.

export type VersionRow = Selectable<AgentVersionsTable>

export const TOOL_TABLE: CapabilityTable = { table: 'agent_tools', typeColumn: 'tool_type' }
export const ACTION_TABLE: CapabilityTable = { table: 'agent_actions', typeColumn: 'action_type' }

/** Locks several agents of the account, in id order (every multi-agent locker takes them so: no deadlock); answers those found. */
export async function lockAgents (trx: Trx, userId: string, ids: string[]): Promise<AgentRow[]> {
  if (ids.length === 0) return []
  return await trx.selectFrom('agents').selectAll().where('user_id', '=', userId).where('id', 'in', [...new Set(ids)])
    .orderBy('id').forUpdate().execute()
}

/** The ids of the account's agents that use an LLM configuration. */
export async function agentsOfLlm (db: Executor, userId: string, llmId: string): Promise<string[]> {
  return (await db.selectFrom('agents').select('id').where('user_id', '=', userId).where('llm_id', '=', llmId.toLowerCase()).execute()).map((row) => row.id)
}

/** The agents whose transfer tools point at `agentId`. */
export async function agentsTransferringTo (db: Executor, userId: string, agentId: string): Promise<string[]> {
  return (await db.selectFrom('agent_tools').select('agent_id').distinct()
    .where('user_id', '=', userId).where('tool_type', '=', 'agent_transfer')
    .where((eb) => eb(eb.ref('settings', '->>').key('agent_id'), '=', agentId)).execute()).map((row) => row.agent_id)
}

/** An agent's actions or tools with their settings as stored (header values sealed), oldest first. */
export async function storedCapabilities (db: Executor, userId: string, kind: CapabilityTable, agentId: string): Promise<CapabilityRow[]> {
  return await db.selectFrom(tableOf(kind)).select(capabilityColumns(kind))
    .where('user_id', '=', userId).where('agent_id', '=', agentId).orderBy('created_at').orderBy('id').execute()
}

/** Puts an action or tool back as a version holds it (settings as stored), under its own id; drops the agent's others. */
export async function replaceCapabilities (trx: Trx, userId: string, kind: CapabilityTable, agentId: string,
  rows: Array<{ id: string, type: string, settings: Record<string, unknown>, is_active: boolean, created_at: Date }>): Promise<void> {
  await trx.deleteFrom(tableOf(kind)).where('user_id', '=', userId).where('agent_id', '=', agentId)
    .$if(rows.length > 0, (q) => q.where('id', 'not in', rows.map((row) => row.id))).execute()
  for (const row of rows) {
    const values = { settings: JSON.stringify(row.settings), is_active: row.is_active, [typeOf(kind)]: row.type, updated_at: new Date() }
    await trx.insertInto(tableOf(kind)).values({ id: row.id, user_id: userId, agent_id: agentId, created_at: row.created_at, ...values })
      .onConflict((oc) => oc.column('id').doUpdateSet(values).where(`${tableOf(kind)}.agent_id`, '=', agentId)).execute()
  }
}

export async function latestVersion (db: Executor, agentId: string): Promise<VersionRow | undefined> {
  return await db.selectFrom('agent_versions').selectAll().where('agent_id', '=', agentId).orderBy('version', 'desc').limit(1).executeTakeFirst()
}

export async function insertVersion (trx: Trx, row: { agent_id: string, user_id: string, version: number, snapshot: unknown, change: string, restored_from: number | null }): Promise<VersionRow> {
  const version = await trx.insertInto('agent_versions').values({ ...row, snapshot: JSON.stringify(row.snapshot) }).returningAll().executeTakeFirstOrThrow()
  await trx.updateTable('agents').set({ version: row.version }).where('id', '=', row.agent_id).execute()
  return version
}

export async function findVersion (db: Executor, userId: string, agentId: string, version: number): Promise<VersionRow | undefined> {
  return await db.selectFrom('agent_versions').selectAll()
    .where('user_id', '=', userId).where('agent_id', '=', agentId.toLowerCase()).where('version', '=', version).executeTakeFirst()
}

/** Newest first; `extra` more rows past the page (what the oldest of the page is compared with). */
export async function listVersions (db: Executor, userId: string, agentId: string, paging: Paging, extra = 0): Promise<VersionRow[]> {
  return await db.selectFrom('agent_versions').selectAll().where('user_id', '=', userId).where('agent_id', '=', agentId.toLowerCase())
    .orderBy('version', 'desc').limit((paging.limit ?? 100) + extra).offset(paging.skip ?? 0).execute()
}

/** The providers the account has connected (a tool of a provider's type needs it to act). */
export async function connectedProviders (db: Executor, userId: string): Promise<Set<string>> {
  return new Set((await db.selectFrom('integrations').select('provider').where('user_id', '=', userId).execute()).map((row) => row.provider))
}

// Templates

export async function listTemplates (db: DB) {
  return await db.selectFrom('agent_templates').selectAll().orderBy('position').execute()
}

export async function findTemplate (db: DB, id: string) {
  return await db.selectFrom('agent_templates').selectAll().where('id', '=', id.toLowerCase()).executeTakeFirst()
}
