import { sql, type Selectable, type Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { Database, KnowledgeBaseFilesTable, KnowledgeBasesTable, KnowledgeFileType } from '../../db/schema.ts'
import { notFound } from '../../http/errors.ts'

type Trx = Transaction<Database>
type Executor = DB | Trx

export type KnowledgeBaseRow = Selectable<KnowledgeBasesTable>
export type FileRow = Selectable<KnowledgeBaseFilesTable>

/** A knowledge base with what its response shows: files, and the agents that use it. */
export interface KnowledgeBaseView {
  row: KnowledgeBaseRow
  files: FileRow[]
  agents: Array<{ id: string, agent_name: string }>
}

export interface OwnerFilter { customer_id?: string, workspace_id?: string }

export async function findKnowledgeBase (db: Executor, userId: string, id: string): Promise<KnowledgeBaseRow | undefined> {
  return await db.selectFrom('knowledge_bases').selectAll().where('user_id', '=', userId).where('id', '=', id.toLowerCase()).executeTakeFirst()
}

/**
 * The knowledge base locked for a change of its files or agents, so that concurrent uploads cannot
 * together pass the file limit. With an owner filter, one outside that customer or workspace is not found.
 */
export async function lockKnowledgeBase (trx: Trx, userId: string, id: string, owners: OwnerFilter = {}): Promise<KnowledgeBaseRow> {
  const row = await trx.selectFrom('knowledge_bases').selectAll()
    .where('user_id', '=', userId).where('id', '=', id.toLowerCase())
    .$if(owners.customer_id !== undefined, (q) => q.where('customer_id', '=', owners.customer_id!.toLowerCase()))
    .$if(owners.workspace_id !== undefined, (q) => q.where('workspace_id', '=', owners.workspace_id!.toLowerCase()))
    .forUpdate().executeTakeFirst()
  if (row === undefined) throw notFound(`knowledge base ${id}`)
  return row
}

export async function countFiles (trx: Trx, knowledgeBaseId: string): Promise<number> {
  const { n } = await trx.selectFrom('knowledge_base_files').select((eb) => eb.fn.countAll<number>().as('n'))
    .where('knowledge_base_id', '=', knowledgeBaseId).executeTakeFirstOrThrow()
  return n
}

export interface NewKnowledgeBase {
  id: string
  customer_id: string | null
  workspace_id: string | null
  name: string
  description: string
  folder: string
  language: string
  search_config: string
}

export async function insertKnowledgeBase (trx: Trx, userId: string, values: NewKnowledgeBase): Promise<void> {
  await trx.insertInto('knowledge_bases').values({ user_id: userId, ...values }).execute()
}

export async function touchKnowledgeBase (trx: Trx, id: string): Promise<void> {
  await trx.updateTable('knowledge_bases').set({ updated_at: new Date() }).where('id', '=', id).execute()
}

export async function listKnowledgeBaseRows (db: DB, userId: string, filter: OwnerFilter & { limit?: number, skip?: number }): Promise<KnowledgeBaseRow[]> {
  return await db.selectFrom('knowledge_bases').selectAll().where('user_id', '=', userId)
    .$if(filter.customer_id !== undefined, (q) => q.where('customer_id', '=', filter.customer_id!.toLowerCase()))
    .$if(filter.workspace_id !== undefined, (q) => q.where('workspace_id', '=', filter.workspace_id!.toLowerCase()))
    .orderBy('created_at').orderBy('id').limit(filter.limit ?? 100).offset(filter.skip ?? 0).execute()
}

/** Files and agents of the given knowledge bases, in three queries however many there are. */
export async function viewKnowledgeBases (db: Executor, userId: string, rows: KnowledgeBaseRow[]): Promise<KnowledgeBaseView[]> {
  if (rows.length === 0) return []
  const ids = rows.map((r) => r.id)
  const files = await db.selectFrom('knowledge_base_files').selectAll()
    .where('user_id', '=', userId).where('knowledge_base_id', 'in', ids)
    .orderBy('uploaded_at').orderBy('id').execute()
  const agents = await db.selectFrom('knowledge_base_agents as l').innerJoin('agents as a', 'a.id', 'l.agent_id')
    .select(['l.knowledge_base_id', 'a.id', 'a.agent_name'])
    .where('l.user_id', '=', userId).where('l.knowledge_base_id', 'in', ids)
    .orderBy('a.agent_name').orderBy('a.id').execute()
  return rows.map((row) => ({
    row,
    files: files.filter((f) => f.knowledge_base_id === row.id),
    agents: agents.filter((a) => a.knowledge_base_id === row.id).map((a) => ({ id: a.id, agent_name: a.agent_name }))
  }))
}

export async function viewKnowledgeBase (db: Executor, userId: string, id: string): Promise<KnowledgeBaseView> {
  const row = await findKnowledgeBase(db, userId, id)
  if (row === undefined) throw notFound(`knowledge base ${id}`)
  return (await viewKnowledgeBases(db, userId, [row]))[0]
}

/** Deletes the knowledge base; its files, their bytes and passages, and its agent assignments go with it. */
export async function deleteKnowledgeBase (db: DB, userId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('knowledge_bases').where('user_id', '=', userId).where('id', '=', id.toLowerCase()).executeTakeFirst()
  return result.numDeletedRows > 0n
}

// Files

export interface NewFile { id: string, knowledge_base_id: string, file_name: string, file_type: KnowledgeFileType, file_size: number }

export async function insertFile (trx: Trx, userId: string, file: NewFile): Promise<void> {
  await trx.insertInto('knowledge_base_files').values({ user_id: userId, ...file }).execute()
}

export async function insertFilePart (trx: Trx, userId: string, fileId: string, n: number, data: Buffer): Promise<void> {
  await trx.insertInto('knowledge_base_file_parts').values({ file_id: fileId, user_id: userId, n, data }).execute()
}

/**
 * Deletes files of one knowledge base (their passages cascade). Every id must be one of its files:
 * otherwise nothing is deleted and the first unknown id is a 404.
 */
export async function deleteFiles (trx: Trx, userId: string, knowledgeBaseId: string, fileIds: string[]): Promise<void> {
  const ids = [...new Set(fileIds.map((id) => id.toLowerCase()))]
  const deleted = await trx.deleteFrom('knowledge_base_files')
    .where('user_id', '=', userId).where('knowledge_base_id', '=', knowledgeBaseId).where('id', 'in', ids)
    .returning('id').execute()
  const gone = new Set(deleted.map((d) => d.id))
  const missing = ids.find((id) => !gone.has(id))
  if (missing !== undefined) throw notFound(`file ${missing} of knowledge base ${knowledgeBaseId}`)
}

// Agents

/** Replaces the agents that use the knowledge base; every id must be an agent of the account (404 otherwise). */
export async function replaceAgents (trx: Trx, userId: string, knowledgeBaseId: string, agentIds: string[]): Promise<void> {
  const ids = [...new Set(agentIds.map((id) => id.toLowerCase()))]
  if (ids.length > 0) {
    // Key-share locks keep the agents from being deleted before the assignment commits.
    const found = await trx.selectFrom('agents').select('id').where('user_id', '=', userId).where('id', 'in', ids).forKeyShare().execute()
    const known = new Set(found.map((a) => a.id))
    const missing = ids.find((id) => !known.has(id))
    if (missing !== undefined) throw notFound(`agent ${missing}`)
  }
  await trx.deleteFrom('knowledge_base_agents').where('user_id', '=', userId).where('knowledge_base_id', '=', knowledgeBaseId)
    .$if(ids.length > 0, (q) => q.where('agent_id', 'not in', ids)).execute()
  if (ids.length === 0) return
  await trx.insertInto('knowledge_base_agents')
    .values(ids.map((agentId) => ({ knowledge_base_id: knowledgeBaseId, agent_id: agentId, user_id: userId })))
    .onConflict((oc) => oc.columns(['knowledge_base_id', 'agent_id']).doNothing()).execute()
}

/** Replaces the knowledge bases one agent uses (the console's Knowledge section); the caller has checked they are the account's. */
export async function replaceAgentKnowledge (trx: Trx, userId: string, agentId: string, knowledgeBaseIds: string[]): Promise<void> {
  const ids = [...new Set(knowledgeBaseIds)]
  await trx.deleteFrom('knowledge_base_agents').where('user_id', '=', userId).where('agent_id', '=', agentId)
    .$if(ids.length > 0, (q) => q.where('knowledge_base_id', 'not in', ids)).execute()
  if (ids.length === 0) return
  await trx.insertInto('knowledge_base_agents')
    .values(ids.map((id) => ({ knowledge_base_id: id, agent_id: agentId, user_id: userId })))
    .onConflict((oc) => oc.columns(['knowledge_base_id', 'agent_id']).doNothing()).execute()
}

/** The ids of the knowledge bases each agent uses, in the order they were assigned. */
export async function knowledgeBasesOfAgents (db: Executor, userId: string, agentIds: string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>(agentIds.map((id) => [id, []]))
  if (agentIds.length === 0) return out
  const rows = await db.selectFrom('knowledge_base_agents').select(['agent_id', 'knowledge_base_id'])
    .where('user_id', '=', userId).where('agent_id', 'in', agentIds)
    .orderBy('assigned_at').orderBy('knowledge_base_id').execute()
  for (const row of rows) out.get(row.agent_id)?.push(row.knowledge_base_id)
  return out
}

// Extraction

/** Claims a file for extraction; undefined when it was deleted meanwhile or is read already. */
export async function startExtraction (db: DB, fileId: string): Promise<(FileRow & { search_config: string }) | undefined> {
  const file = await db.updateTable('knowledge_base_files').set({ status: 'processing' })
    .where('id', '=', fileId).where('status', 'in', ['pending', 'processing'])
    .returningAll().executeTakeFirst()
  if (file === undefined) return undefined
  const kb = await db.selectFrom('knowledge_bases').select('search_config').where('id', '=', file.knowledge_base_id).executeTakeFirst()
  return kb === undefined ? undefined : { ...file, search_config: kb.search_config }
}

/** A file's bytes; the one place a whole file is held in memory. */
export async function readFileContent (db: DB, fileId: string): Promise<Buffer> {
  const parts = await db.selectFrom('knowledge_base_file_parts').select('data').where('file_id', '=', fileId).orderBy('n').execute()
  return Buffer.concat(parts.map((p) => p.data))
}

export interface NewPassage { position: number, page: number | null, char_start: number, char_end: number, content: string }

// Keeps one INSERT's parameters well under PostgreSQL's 65 535.
const PASSAGES_PER_INSERT = 500

/** Stores the passages and marks the file ready, unless it was deleted meanwhile. */
export async function finishExtraction (db: DB, file: FileRow & { search_config: string }, passages: NewPassage[]): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const locked = await trx.selectFrom('knowledge_base_files').select('id').where('id', '=', file.id).forUpdate().executeTakeFirst()
    if (locked === undefined) return
    // A retried job starts over.
    await trx.deleteFrom('knowledge_base_passages').where('file_id', '=', file.id).execute()
    for (let i = 0; i < passages.length; i += PASSAGES_PER_INSERT) {
      await trx.insertInto('knowledge_base_passages').values(passages.slice(i, i + PASSAGES_PER_INSERT).map((p) => ({
        ...p,
        file_id: file.id,
        user_id: file.user_id,
        knowledge_base_id: file.knowledge_base_id,
        tsv: sql<string>`to_tsvector(${file.search_config}::regconfig, ${p.content})`
      }))).execute()
    }
    await trx.updateTable('knowledge_base_files')
      .set({ status: 'ready', error: null, passage_count: passages.length, processed_at: new Date() })
      .where('id', '=', file.id).execute()
  })
}

export async function failExtraction (db: DB, fileId: string, error: string): Promise<void> {
  await db.updateTable('knowledge_base_files').set({ status: 'failed', error, passage_count: 0, processed_at: new Date() })
    .where('id', '=', fileId).execute()
}

// Search

export interface SearchHit {
  knowledge_base_id: string
  file_id: string
  file_name: string
  position: number
  page: number | null
  score: number
  snippet: string
  content: string
}

/**
 * Passages of the given knowledge bases that contain any word of the query, best first. Each knowledge
 * base's query is built with its own configuration; only the top `limit` passages get a headline.
 */
export async function searchPassages (db: DB, userId: string, knowledgeBaseIds: string[], query: string, limit: number): Promise<SearchHit[]> {
  if (knowledgeBaseIds.length === 0 || query === '') return []
  const { rows } = await sql<SearchHit>`
    with q as (
      select kb.id, kb.search_config, websearch_to_tsquery(kb.search_config, ${query}) as query
      from knowledge_bases kb
      where kb.user_id = ${userId} and kb.id = any(${knowledgeBaseIds}::text[])
    ), top as (
      select p.knowledge_base_id, p.file_id, p.position, p.page, p.content, q.search_config, q.query,
             ts_rank_cd(p.tsv, q.query, 1) as score
      from q join knowledge_base_passages p on p.knowledge_base_id = q.id and p.tsv @@ q.query
      where p.user_id = ${userId}
      order by score desc, p.file_id, p.position
      limit ${limit}
    )
    select top.knowledge_base_id, top.file_id, f.file_name, top.position, top.page, top.content,
           round(top.score::numeric, 6)::float8 as score,
           ts_headline(top.search_config, top.content, top.query, 'MaxFragments=2, MinWords=8, MaxWords=30, FragmentDelimiter=" … "') as snippet
    from top join knowledge_base_files f on f.id = top.file_id
    order by top.score desc, top.file_id, top.position`.execute(db)
  return rows
}

/** The knowledge bases an agent of the account uses; the agent must be the account's (404). */
export async function knowledgeBasesOfAgent (db: DB, userId: string, agentId: string): Promise<string[]> {
  // Assignments name agents; whether the agent exists is asked of its table here, below the agents module.
  const agent = await db.selectFrom('agents').select('id').where('user_id', '=', userId).where('id', '=', agentId).executeTakeFirst()
  if (agent === undefined) throw notFound(`agent ${agentId}`)
  return (await knowledgeBasesOfAgents(db, userId, [agent.id])).get(agent.id) ?? []
}
