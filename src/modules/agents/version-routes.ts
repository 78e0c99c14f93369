import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { badRequest, notFound } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, EpochMs, errors, Nullable, ObjectId, Paging } from '../../http/schemas.ts'
import { findAgent, type VersionRow } from './queries.ts'
import { agentVersions, diffSnapshots, masked, restoreVersion, versionOf, type AgentSnapshot } from './versions.ts'

// An agent's versions (docs/agents.md, "Versions"): the history, one version, the diff between two, and restore.

const TAGS = ['agent versions']

const VersionNumber = Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'a version number, from 1' })
const VersionParams = Type.Object({ id: ObjectId, version: VersionNumber })
const Json = Type.Unknown()

const fields = {
  agent_id: ObjectId,
  version: VersionNumber,
  change: Type.String({ description: 'what made it: created, agent (its settings), workflow (its workflow alone), llm (its LLM configuration), tools, actions, restore' }),
  restored_from: Nullable(VersionNumber, 'the version a restore brought back; null otherwise'),
  created_at: EpochMs
}

const AgentVersionSummary = Type.Object({
  ...fields,
  changes: Type.Array(Type.String(), { description: 'what differs from the version before: agent settings by path (call_settings.language), llm.<value>, tools, actions; [] for version 1' })
}, { [COMPONENT]: 'AgentVersionSummary' })

const SnapshotCapability = Type.Object({
  _id: ObjectId,
  type: Type.String({ description: 'the tool_type or action_type' }),
  settings: Type.Record(Type.String(), Json, { description: 'as stored then; header values show as ********' }),
  is_active: Type.Boolean(),
  created_at: EpochMs
}, { [COMPONENT]: 'AgentVersionCapability' })

const AgentVersion = Type.Object({
  ...fields,
  agent: Type.Object({
    agent_name: Type.String(),
    voice_id: ObjectId,
    interruption_sensitivity: Type.Number(),
    call_settings: Type.Record(Type.String(), Json),
    data_retrieval: Type.Array(Json),
    webhook_url: Nullable(Type.String()),
    is_data_collection_active: Type.Boolean(),
    is_customer_memory_active: Type.Boolean(),
    callback_settings: Type.Record(Type.String(), Json),
    voicemail_settings: Type.Optional(Type.Record(Type.String(), Json, { description: 'absent in versions written before voicemail settings existed (they ran without detection)' })),
    workflow: Nullable(Type.Record(Type.String(), Json), 'null: the agent talked from one prompt')
  }, { description: 'the agent settings its calls ran on (not status, folder, widget_settings: they change no call)' }),
  llm_id: ObjectId,
  llm: Type.Object({
    model: Type.String(),
    begin_message: Nullable(Type.String()),
    general_prompt: Type.String(),
    temperature: Type.Number(),
    max_tokens: Nullable(Type.Integer()),
    engine: Nullable(Type.String()),
    turn_detection: Type.Record(Type.String(), Json)
  }, { description: 'the LLM configuration\'s values' }),
  tools: Type.Array(SnapshotCapability),
  actions: Type.Array(SnapshotCapability)
}, { [COMPONENT]: 'AgentVersion' })

const MemberChange = Type.Object({ path: Type.String(), before: Json, after: Json }, { [COMPONENT]: 'AgentVersionChange' })
const Brief = Type.Object({ _id: ObjectId, type: Type.String() })
const CapabilityChanges = Type.Object({
  added: Type.Array(Brief),
  removed: Type.Array(Brief),
  changed: Type.Array(Type.Object({ ...Brief.properties, paths: Type.Array(Type.String(), { description: 'type, is_active, settings.<member> (header values are never shown)' }) }))
}, { [COMPONENT]: 'AgentVersionCapabilityChanges' })

const AgentVersionDiff = Type.Object({
  agent_id: ObjectId,
  version: VersionNumber,
  against: VersionNumber,
  agent: Type.Array(MemberChange, { description: 'agent settings that differ, by path; objects compared member by member, lists whole' }),
  llm: Type.Array(MemberChange, { description: 'LLM configuration values that differ' }),
  tools: CapabilityChanges,
  actions: CapabilityChanges
}, { [COMPONENT]: 'AgentVersionDiff', description: 'from `against` (before) to `version` (after)' })

function versionBody (row: VersionRow, snapshot: AgentSnapshot) {
  const capabilities = (rows: AgentSnapshot['tools']) => rows.map(({ id, ...rest }) => ({ _id: id, ...masked(rest) }))
  return {
    ...header(row),
    agent: masked(snapshot.agent),
    llm_id: snapshot.llm_id,
    llm: snapshot.llm,
    tools: capabilities(snapshot.tools),
    actions: capabilities(snapshot.actions)
  }
}

const header = (row: VersionRow) => ({ agent_id: row.agent_id, version: row.version, change: row.change, restored_from: row.restored_from, created_at: row.created_at.getTime() })

const byId = <T extends { id: string }>(rows: T[]) => rows.map(({ id, ...rest }) => ({ _id: id, ...rest }))

export const versionRoutes: FastifyPluginAsyncTypebox<{ db: DB }> = async (app, { db }) => {
  const agentOf = async (userId: string, id: string) => {
    const agent = await findAgent(db, userId, id)
    if (agent === undefined) throw notFound(`agent ${id}`)
    return agent
  }
  const versionFound = async (userId: string, agentId: string, version: number) => {
    const found = await versionOf(db, userId, agentId, version)
    if (found === undefined) throw notFound(`version ${version} of agent ${agentId}`)
    return found
  }

  app.get('/agent/:id/versions', {
    schema: {
      tags: TAGS,
      summary: "List an agent's versions",
      description: 'Newest first. Every change of what the agent\'s calls run on (its settings, workflow, LLM configuration, tools, actions) writes one; an agent from before versions gets version 1 on first use.',
      params: Type.Object({ id: ObjectId }),
      querystring: Type.Object(Paging),
      response: { 200: Type.Array(AgentVersionSummary), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const agent = await agentOf(request.userId, request.params.id)
    return (await agentVersions(db, request.userId, agent.id, request.query)).map(({ row, changes }) => ({ ...header(row), changes }))
  })

  app.get('/agent/:id/versions/:version', {
    schema: {
      tags: TAGS,
      summary: 'Get one version of an agent',
      description: 'What the agent\'s calls ran on as of that version: its settings, its LLM configuration\'s values, its tools and actions.',
      params: VersionParams,
      response: { 200: AgentVersion, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const agent = await agentOf(request.userId, request.params.id)
    const { row, snapshot } = await versionFound(request.userId, agent.id, request.params.version)
    return versionBody(row, snapshot)
  })

  app.get('/agent/:id/versions/:version/diff', {
    schema: {
      tags: TAGS,
      summary: 'Compare two versions of an agent',
      description: 'What changed from `against` (default: the version before) to `version`: agent settings and LLM values by path with both values, tools and actions by id (added, removed, changed with the settings paths).',
      params: VersionParams,
      querystring: Type.Object({ against: Type.Optional({ ...VersionNumber, description: 'the version compared with (the "before"); default version - 1' }) }),
      response: { 200: AgentVersionDiff, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const agent = await agentOf(request.userId, request.params.id)
    const { version } = request.params
    const against = request.query.against ?? version - 1
    if (against < 1) throw badRequest('version 1 has no version before it: name the version to compare with in ?against')
    const after = await versionFound(request.userId, agent.id, version)
    const before = await versionFound(request.userId, agent.id, against)
    const diff = diffSnapshots(before.snapshot, after.snapshot)
    return {
      agent_id: agent.id,
      version,
      against,
      agent: diff.agent,
      llm: diff.llm,
      tools: { added: byId(diff.tools.added), removed: byId(diff.tools.removed), changed: byId(diff.tools.changed) },
      actions: { added: byId(diff.actions.added), removed: byId(diff.actions.removed), changed: byId(diff.actions.changed) }
    }
  })

  app.post('/agent/:id/versions/:version/restore', {
    schema: {
      tags: TAGS,
      summary: 'Restore a version of an agent',
      description: 'Makes the agent what the version holds, as a new version (`restored_from`): 201. Its LLM configuration, when other agents share it, is not changed: the agent gets a copy of its own. A tool of an integration disconnected since, or a transfer to an agent deleted since, comes back switched off. 200 with the latest version when the agent already is what that version holds (nothing is written).',
      params: VersionParams,
      response: { 200: AgentVersion, 201: AgentVersion, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    const agent = await agentOf(request.userId, request.params.id)
    const restored = await restoreVersion(db, request.userId, agent.id, request.params.version)
    if (restored === undefined) throw notFound(`version ${request.params.version} of agent ${agent.id}`)
    return reply.code(restored.created ? 201 : 200).send(versionBody(restored.row, restored.row.snapshot as unknown as AgentSnapshot))
  })
}
