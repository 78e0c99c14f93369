import { isSealed, openSecret } from '../../db/secrets.ts'
import { notFound } from '../../http/errors.ts'
import {
  ACTION_TABLE, connectedProviders, findAgent, findLlm, findVersion, insertLlm, insertVersion, latestVersion, listCapabilities, openedWorkflow, sealedWorkflow,
  listVersions, lockAgent, lockAgents, openSettings, replaceCapabilities, storedCapabilities, TOOL_TABLE, updateAgent, updateLlm, countAgentsOfLlm,
  type AgentRow, type CapabilityRow, type CapabilityTable, type Executor, type LlmRow, type Paging, type Trx, type VersionRow
} from './queries.ts'
import { MASK } from './settings-parts.ts'
import { PROVIDERS } from '../integrations/providers.ts'

// Agent versions (DESIGN.md, "Workflows, versions, tests"): every change of what an agent's calls run on — its
// settings, its LLM configuration's values, its tools and actions, its workflow — writes an immutable version, one
// JSON snapshot, in the transaction of the change and under the agent's row lock (so concurrent changes get
// consecutive numbers and none is lost). The live rows stay what PATCH changes; a call runs the latest version, or
// the one its number, widget or request pins (loadAgentConfig).

/** The agent columns calls run on. Not here: status, folder, widget_settings (they change no call), owners. */
export const SNAPSHOT_COLUMNS = [
  'agent_name', 'voice_id', 'interruption_sensitivity', 'call_settings', 'data_retrieval', 'webhook_url',
  'is_data_collection_active', 'is_customer_memory_active', 'callback_settings', 'voicemail_settings', 'workflow'
] as const satisfies ReadonlyArray<keyof AgentRow>

/** The LLM configuration's values calls run on (not its id: a restore may give the agent a copy of its own). */
export const SNAPSHOT_LLM = ['model', 'begin_message', 'general_prompt', 'temperature', 'max_tokens', 'engine', 'turn_detection'] as const satisfies ReadonlyArray<keyof LlmRow>

export interface SnapshotCapability { id: string, type: string, settings: Record<string, unknown>, is_active: boolean, created_at: number }

/** What one version holds. Header values of tools and actions (and of workflow API steps) stay sealed, as stored. */
export interface AgentSnapshot {
  /** voicemail_settings: absent in versions written before it existed (they ran without detection). */
  agent: Omit<Pick<AgentRow, typeof SNAPSHOT_COLUMNS[number]>, 'voicemail_settings'> & Partial<Pick<AgentRow, 'voicemail_settings'>>
  llm_id: string
  llm: Pick<LlmRow, typeof SNAPSHOT_LLM[number]>
  tools: SnapshotCapability[]
  actions: SnapshotCapability[]
}

/** What an agent's calls run on, as of one version. Rows as the live tables hold them (dates revived, headers opened). */
export interface AgentConfig { version: number, agent: AgentRow, llm: LlmRow, tools: CapabilityRow[], actions: CapabilityRow[] }

const pick = <T extends object, K extends keyof T>(row: T, keys: readonly K[]) => Object.fromEntries(keys.map((key) => [key, row[key]])) as Pick<T, K>

const asSnapshot = (row: CapabilityRow): SnapshotCapability => ({ id: row.id, type: row.type, settings: row.settings, is_active: row.is_active, created_at: row.created_at.getTime() })

async function snapshotOf (db: Executor, agent: AgentRow): Promise<AgentSnapshot> {
  const llm = await findLlm(db, agent.user_id, agent.llm_id)
  // Never missing: agents.llm_id is a foreign key.
  if (llm === undefined) throw new Error(`agent ${agent.id}: its LLM configuration ${agent.llm_id} is missing`)
  return {
    // As stored: the workflow's header values sealed (the row was read with them opened).
    agent: { ...pick(agent, SNAPSHOT_COLUMNS), workflow: sealedWorkflow(agent.workflow) },
    llm_id: llm.id,
    llm: pick(llm, SNAPSHOT_LLM),
    tools: (await storedCapabilities(db, agent.user_id, TOOL_TABLE, agent.id)).map(asSnapshot),
    actions: (await storedCapabilities(db, agent.user_id, ACTION_TABLE, agent.id)).map(asSnapshot)
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/** The value with every sealed string passed through `each` (header values of tools, actions and workflow steps). */
function mapSealed (value: unknown, each: (sealed: string) => string): unknown {
  if (typeof value === 'string') return isSealed(value) ? each(value) : value
  if (Array.isArray(value)) return value.map((item) => mapSealed(item, each))
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, mapSealed(item, each)]))
  return value
}

/** Sealed values as the API shows header values. */
export const masked = <T>(value: T): T => mapSealed(value, () => MASK) as T

/** Equal as JSON, whatever the key order (jsonb reorders keys); sealed values compared by what they hold (each seal differs). */
function same (a: unknown, b: unknown): boolean {
  if (typeof a === 'string' && typeof b === 'string') return a === b || (isSealed(a) && isSealed(b) && openSecret(a) === openSecret(b))
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => same(item, b[i]))
  }
  if (isObject(a) && isObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)])
    return [...keys].every((key) => same(a[key], b[key]))
  }
  return a === b
}

/** A list of objects named by `id` (a workflow's steps), as a map: compared item by item, whatever their order. */
const byId = (value: unknown): Map<string, unknown> | undefined =>
  Array.isArray(value) && value.length > 0 && value.every((item) => isObject(item) && typeof item.id === 'string')
    ? new Map(value.map((item) => [(item as { id: string }).id, item]))
    : undefined

/**
 * The paths (`call_settings.language`, `workflow.steps.greet.instructions`) where two values differ: objects member by
 * member, lists of objects with ids item by item (by id), other lists and the rest whole.
 */
function changedPaths (before: unknown, after: unknown, path: string, out: string[]): string[] {
  const [was, now] = [byId(before), byId(after)]
  if (was !== undefined && now !== undefined) {
    for (const id of [...new Set([...was.keys(), ...now.keys()])]) changedPaths(was.get(id), now.get(id), `${path}.${id}`, out)
  } else if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()
    for (const key of keys) changedPaths(before[key], after[key], path === '' ? key : `${path}.${key}`, out)
  } else if (!same(before, after)) {
    out.push(path)
  }
  return out
}

export interface MemberChange { path: string, before: unknown, after: unknown }
export interface CapabilityChanges {
  added: Array<{ id: string, type: string }>
  removed: Array<{ id: string, type: string }>
  changed: Array<{ id: string, type: string, paths: string[] }>
}
export interface VersionDiff { agent: MemberChange[], llm: MemberChange[], tools: CapabilityChanges, actions: CapabilityChanges }

const valueAt = (value: unknown, path: string): unknown => path.split('.').reduce<unknown>((at, key) => isObject(at) ? at[key] : byId(at)?.get(key), value)

function memberChanges (before: object, after: object): MemberChange[] {
  return changedPaths(before, after, '', []).map((path) => ({ path, before: masked(valueAt(before, path) ?? null), after: masked(valueAt(after, path) ?? null) }))
}

function capabilityChanges (before: SnapshotCapability[], after: SnapshotCapability[]): CapabilityChanges {
  const was = new Map(before.map((row) => [row.id, row]))
  const now = new Map(after.map((row) => [row.id, row]))
  const brief = (row: SnapshotCapability) => ({ id: row.id, type: row.type })
  return {
    added: after.filter((row) => !was.has(row.id)).map(brief),
    removed: before.filter((row) => !now.has(row.id)).map(brief),
    changed: after.flatMap((row) => {
      const old = was.get(row.id)
      if (old === undefined) return []
      const paths = changedPaths({ type: old.type, settings: old.settings, is_active: old.is_active }, { type: row.type, settings: row.settings, is_active: row.is_active }, '', [])
      return paths.length === 0 ? [] : [{ ...brief(row), paths }]
    })
  }
}

/** What changed from `before` to `after`: agent settings and LLM values by path, tools and actions by id. */
export function diffSnapshots (before: AgentSnapshot, after: AgentSnapshot): VersionDiff {
  return {
    agent: memberChanges(before.agent, after.agent),
    llm: memberChanges(before.llm, after.llm),
    tools: capabilityChanges(before.tools, after.tools),
    actions: capabilityChanges(before.actions, after.actions)
  }
}

/** The parts a diff names, for a history line: `agent_name`, `llm.general_prompt`, `tools`… */
export function changeSummary (diff: VersionDiff): string[] {
  const capabilities = (name: string, c: CapabilityChanges) => c.added.length + c.removed.length + c.changed.length > 0 ? [name] : []
  return [...diff.agent.map((c) => c.path), ...diff.llm.map((c) => `llm.${c.path}`), ...capabilities('tools', diff.tools), ...capabilities('actions', diff.actions)]
}

const sameSnapshot = (a: AgentSnapshot, b: AgentSnapshot) => same({ ...a, llm_id: '' }, { ...b, llm_id: '' })

const snapshotOfRow = (row: VersionRow) => row.snapshot as unknown as AgentSnapshot

/** Writes a version of the locked agent when its snapshot differs from its latest one; answers the latest number. */
async function record (trx: Trx, agent: AgentRow, change: string, restoredFrom: number | null = null): Promise<number> {
  const snapshot = await snapshotOf(trx, agent)
  const latest = agent.version === 0 ? undefined : await latestVersion(trx, agent.id)
  if (latest !== undefined && sameSnapshot(snapshotOfRow(latest), snapshot)) return latest.version
  const version = (latest?.version ?? 0) + 1
  // A change of the agent's settings that is its workflow alone says so.
  const workflowOnly = change === 'agent' && latest !== undefined && changedPaths(snapshotOfRow(latest).agent, snapshot.agent, '', []).every((path) => path.startsWith('workflow')) &&
    sameSnapshot({ ...snapshotOfRow(latest), agent: snapshot.agent }, snapshot)
  await insertVersion(trx, { agent_id: agent.id, user_id: agent.user_id, version, snapshot, change: workflowOnly ? 'workflow' : change, restored_from: restoredFrom })
  return version
}

/** Writes a new version when the agent's snapshot differs from its latest one (inside the caller's transaction, under the agent's row lock); answers the latest version number. */
export async function recordVersion (trx: Trx, userId: string, agentId: string, change: string): Promise<number> {
  const agent = await lockAgent(trx, userId, agentId)
  if (agent === undefined) throw notFound(`agent ${agentId}`)
  return await record(trx, agent, change)
}

/** recordVersion for several agents (an LLM configuration's, the tools a disconnect switched off), locked in id order. */
export async function recordVersions (trx: Trx, userId: string, agentIds: string[], change: string): Promise<void> {
  for (const agent of await lockAgents(trx, userId, agentIds)) await record(trx, agent, change)
}

/** A disconnect's switch-off of tools (integrations/connect.ts): a version of each agent touched. */
export const toolsSwitchedOff = async (trx: Trx, userId: string, agentIds: string[]) => { await recordVersions(trx, userId, agentIds, 'tools') }

/** The agent's latest version, written first if the agent has none yet (an agent from before versions). */
export async function currentVersion (db: Executor, userId: string, agentId: string): Promise<number> {
  const agent = await findAgent(db, userId, agentId)
  if (agent === undefined) throw notFound(`agent ${agentId}`)
  if (agent.version > 0) return agent.version
  if (db.isTransaction) return await recordVersion(db as Trx, userId, agent.id, 'created')
  return await db.transaction().execute(async (trx) => await recordVersion(trx, userId, agent.id, 'created'))
}

/** One version of the account's agent with its snapshot; undefined when the agent or the version is not there. */
export async function versionOf (db: Executor, userId: string, agentId: string, version: number): Promise<{ row: VersionRow, snapshot: AgentSnapshot } | undefined> {
  if (await findAgent(db, userId, agentId) === undefined) return undefined
  // Version 1 of an agent from before versions is written on first use.
  if (version === 1) await currentVersion(db, userId, agentId)
  const row = await findVersion(db, userId, agentId, version)
  return row === undefined ? undefined : { row, snapshot: snapshotOfRow(row) }
}

/** A page of the agent's versions, newest first, each with what differs from the version before it. */
export async function agentVersions (db: Executor, userId: string, agentId: string, paging: Paging): Promise<Array<{ row: VersionRow, changes: string[] }>> {
  await currentVersion(db, userId, agentId)
  const rows = await listVersions(db, userId, agentId, paging, 1)
  const page = rows.slice(0, paging.limit ?? 100)
  return page.map((row, n) => {
    const before = rows[n + 1]
    return { row, changes: before === undefined ? [] : changeSummary(diffSnapshots(snapshotOfRow(before), snapshotOfRow(row))) }
  })
}

const revived = (row: SnapshotCapability, agentId: string, at: Date): CapabilityRow => ({
  id: row.id, agent_id: agentId, type: row.type, settings: openSettings(row.settings), is_active: row.is_active, created_at: new Date(row.created_at), updated_at: at
})

/** The version's config (null: the latest); undefined when the agent or that version does not exist. */
export async function loadAgentConfig (db: Executor, userId: string, agentId: string, version: number | null): Promise<AgentConfig | undefined> {
  const agent = await findAgent(db, userId, agentId)
  if (agent === undefined) return undefined
  const llm = await findLlm(db, userId, agent.llm_id)
  if (llm === undefined) return undefined
  if (version === null) {
    return {
      version: await currentVersion(db, userId, agent.id),
      agent,
      llm,
      tools: await listCapabilities(db, userId, TOOL_TABLE, agent.id),
      actions: await listCapabilities(db, userId, ACTION_TABLE, agent.id)
    }
  }
  const found = await versionOf(db, userId, agent.id, version)
  if (found === undefined) return undefined
  const { row, snapshot } = found
  return {
    version,
    // The live row's identity and status with the version's settings; its LLM configuration's values likewise.
    agent: { ...agent, ...snapshot.agent, voicemail_settings: snapshot.agent.voicemail_settings ?? {}, workflow: openedWorkflow(snapshot.agent.workflow), version },
    llm: { ...llm, ...snapshot.llm },
    tools: snapshot.tools.map((tool) => revived(tool, agent.id, row.created_at)),
    actions: snapshot.actions.map((action) => revived(action, agent.id, row.created_at))
  }
}

/** Whether the agent has that version (a pin must name one); writes version 1 of an agent from before versions. */
export async function versionExists (db: Executor, userId: string, agentId: string, version: number): Promise<boolean> {
  return await versionOf(db, userId, agentId, version) !== undefined
}

/**
 * The rows of a snapshot as they may act now: a tool of an integration the account has disconnected since, or a
 * transfer to an agent deleted since, comes back switched off, as the disconnect or the deletion would have left it.
 */
async function restorable (trx: Trx, userId: string, kind: CapabilityTable, rows: SnapshotCapability[]) {
  const connected = kind === TOOL_TABLE ? await connectedProviders(trx, userId) : new Set<string>()
  const out = []
  for (const row of rows) {
    let active = row.is_active
    if (active && kind === TOOL_TABLE && PROVIDER_TYPES.has(row.type) && !connected.has(row.type)) active = false
    if (active && row.type === 'agent_transfer' && typeof row.settings.agent_id === 'string' && await findAgent(trx, userId, row.settings.agent_id) === undefined) active = false
    out.push({ id: row.id, type: row.type, settings: row.settings, is_active: active, created_at: new Date(row.created_at) })
  }
  return out
}

/** Tool types that are an integration's (they share the provider's name). */
const PROVIDER_TYPES = new Set<string>(PROVIDERS)

/**
 * Makes the agent what `version` holds, as a new version (restored_from: that one): its settings, its workflow, its
 * LLM configuration's values, its tools and actions under their ids (the others deleted). When its LLM
 * configuration is shared with other agents and its values differ, the agent gets a copy of its own with the
 * version's values: the others keep theirs. Answers the version written, and whether it is new (false: the agent
 * already was that version, and nothing was written).
 */
export async function restoreVersion (db: Executor, userId: string, agentId: string, version: number): Promise<{ row: VersionRow, created: boolean } | undefined> {
  const work = async (trx: Trx) => {
    const agent = await lockAgent(trx, userId, agentId)
    if (agent === undefined) return undefined
    const found = await versionOf(trx, userId, agent.id, version)
    if (found === undefined) return undefined
    const { snapshot } = found
    const before = agent.version
    let llmId = agent.llm_id
    const llm = (await findLlm(trx, userId, llmId))!
    if (!same(pick(llm, SNAPSHOT_LLM), snapshot.llm)) {
      if (await countAgentsOfLlm(trx, userId, llmId) > 1) {
        llmId = (await insertLlm(trx, userId, snapshot.llm)).id
      } else {
        await updateLlm(trx, userId, llmId, snapshot.llm)
      }
    }
    const restored = await updateAgent(trx, userId, agent.id, { ...snapshot.agent, voicemail_settings: snapshot.agent.voicemail_settings ?? {}, workflow: openedWorkflow(snapshot.agent.workflow), llm_id: llmId })
    await replaceCapabilities(trx, userId, TOOL_TABLE, agent.id, await restorable(trx, userId, TOOL_TABLE, snapshot.tools))
    await replaceCapabilities(trx, userId, ACTION_TABLE, agent.id, await restorable(trx, userId, ACTION_TABLE, snapshot.actions))
    const now = await record(trx, restored, 'restore', version)
    return { row: (await findVersion(trx, userId, agent.id, now))!, created: now !== before }
  }
  if (db.isTransaction) return await work(db as Trx)
  return await db.transaction().execute(work)
}
