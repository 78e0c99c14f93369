import multipart from '@fastify/multipart'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Transaction } from 'kysely'
import { Type, type Static } from 'typebox'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { Database } from '../../db/schema.ts'
import { sharedSlots } from '../../http/concurrency.ts'
import { badRequest, HttpError, invalidInput, notFound, type AjvIssue } from '../../http/errors.ts'
import { AUTH_ERRORS, COMPONENT, EpochMs, errors, IdParams, Nullable, ObjectId, OwnerQuery, Paging } from '../../http/schemas.ts'
import { compileBodySchema } from '../../http/validation.ts'
import { QUEUES, sendJob, type JobSender } from '../../jobs/queues.ts'
import { requireOwners } from '../account/owners.ts'
import { findUser } from '../users/queries.ts'
import {
  countFiles, deleteFiles, deleteKnowledgeBase, findKnowledgeBase, insertKnowledgeBase, knowledgeBasesOfAgent, listKnowledgeBaseRows,
  lockKnowledgeBase, replaceAgents, touchKnowledgeBase, viewKnowledgeBase, viewKnowledgeBases, type KnowledgeBaseView,
  type OwnerFilter
} from './queries.ts'
import { search, searchConfigFor } from './search.ts'
import { ACCEPTED_TYPES, FormFields, storeFiles, withUpload, type ReceivedFile } from './upload.ts'

const TAGS = ['knowledge bases']

const KnowledgeFile = Type.Object({
  _id: Type.String(),
  file_name: Type.String(),
  file_size: Type.Integer({ description: 'bytes' }),
  uploaded_at: Type.String({ format: 'date-time', description: 'ISO 8601' }),
  file_type: Type.Union([Type.Literal('pdf'), Type.Literal('docx'), Type.Literal('txt'), Type.Literal('markdown'), Type.Literal('csv'), Type.Literal('html')], { description: 'detected from the content' }),
  status: Type.Union([Type.Literal('pending'), Type.Literal('processing'), Type.Literal('ready'), Type.Literal('failed')], {
    description: 'pending: stored, waiting to be read; processing: being read; ready: its passages are searchable; failed: it could not be read (see `error`)'
  }),
  error: Type.Optional(Type.String({ description: 'why reading failed; only with status failed' })),
  passage_count: Type.Integer({ description: 'passages found by search; 0 until ready' })
}, { [COMPONENT]: 'KnowledgeBaseFile' })

const KnowledgeBase = Type.Object({
  _id: Type.String(),
  knowledge_base_name: Type.String(),
  knowledge_base_description: Type.String(),
  folder: Type.String(),
  language: Type.String({ description: 'BCP-47 tag the text is searched in' }),
  customer_id: Nullable(Type.String()),
  workspace_id: Nullable(Type.String()),
  files: Type.Array(KnowledgeFile),
  agent_names: Type.Array(Type.String(), { description: 'names of the agents that use it, by name' }),
  agent_ids: Type.Array(Type.String(), { description: 'their ids, in the same order' }),
  created_at: EpochMs,
  updated_at: EpochMs
}, { [COMPONENT]: 'KnowledgeBase' })

const SearchResults = Type.Object({
  results: Type.Array(Type.Object({
    knowledge_base_id: Type.String(),
    file_id: Type.String(),
    file_name: Type.String(),
    position: Type.Integer({ description: 'the passage\'s place in its file, from 0' }),
    page: Nullable(Type.Integer({ description: 'PDF page, from 1; null for other types' })),
    score: Type.Number({ description: 'relevance; higher is better, comparable within one answer' }),
    snippet: Type.String({ description: 'the best fragments of the passage, matched words between <b> and </b>' }),
    content: Type.String({ description: 'the whole passage' })
  }), { description: 'best first' })
}, { [COMPONENT]: 'KnowledgeSearchResults' })

const checkFormFields = compileBodySchema(FormFields)

const FileField = (description: string) => Type.String({ format: 'binary', description: `${description}: ${ACCEPTED_TYPES}` })

/** Documents a multipart form in OpenAPI; validation.ts leaves multipart bodies to the handler. */
const form = (schema: ReturnType<typeof Type.Object>) => ({ content: { 'multipart/form-data': { schema } } })

const UPLOAD_ERRORS = errors(...AUTH_ERRORS, 404, 413, 415, 429)
const UPLOAD_LIMITS_TEXT = 'Limits: KB_MAX_FILE_MB a file (default 20), KB_MAX_FILES_PER_UPLOAD a request, KB_MAX_FILES a knowledge base; over one: 413 and nothing is stored. KB_UPLOADS_PER_ACCOUNT uploads of one account at once (default 2); one more: 429 with Retry-After. ' +
  `Types by content: ${ACCEPTED_TYPES}; another: 415. Each file is read into searchable passages in the background: watch its \`status\`.`

export function toKnowledgeBase ({ row, files, agents }: KnowledgeBaseView): Static<typeof KnowledgeBase> {
  return {
    _id: row.id,
    knowledge_base_name: row.name,
    knowledge_base_description: row.description,
    folder: row.folder,
    language: row.language,
    customer_id: row.customer_id,
    workspace_id: row.workspace_id,
    files: files.map((f) => ({
      _id: f.id,
      file_name: f.file_name,
      file_size: f.file_size,
      uploaded_at: f.uploaded_at.toISOString(),
      file_type: f.file_type,
      status: f.status,
      ...(f.error === null ? {} : { error: f.error }),
      passage_count: f.passage_count
    })),
    agent_names: agents.map((a) => a.agent_name),
    agent_ids: agents.map((a) => a.id),
    created_at: row.created_at.getTime(),
    updated_at: row.updated_at.getTime()
  }
}

async function enqueueExtraction (trx: Transaction<Database>, jobs: JobSender, files: ReceivedFile[]): Promise<void> {
  for (const file of files) await sendJob(jobs.boss, trx, QUEUES.extractKnowledgeFile, { fileId: file.id })
}

/** An upload refused part-way leaves the rest of its body unread: the connection cannot carry another request. */
async function closeConnection (_request: FastifyRequest, reply: FastifyReply): Promise<void> {
  reply.header('connection', 'close')
}

export const knowledgeBaseRoutes: FastifyPluginAsyncTypebox<{ db: DB, jobs: JobSender }> = async (app, { db, jobs }) => {
  /** Changes a knowledge base under its row lock, marks it updated, and answers it as it is then. */
  const change = async (userId: string, id: string, apply: (trx: Transaction<Database>, kbId: string) => Promise<unknown>) => {
    await db.transaction().execute(async (trx) => {
      const kb = await lockKnowledgeBase(trx, userId, id)
      await apply(trx, kb.id)
      await touchKnowledgeBase(trx, kb.id)
    })
    return toKnowledgeBase(await viewKnowledgeBase(db, userId, id))
  }

  // Over the size limit the parser only cuts a file short; upload.ts notices that and answers 413.
  await app.register(multipart, { throwFileSizeLimit: false })
  const limits = jobs.config.knowledgeBases

  const uploads = sharedSlots('uploads', jobs.config.concurrency)

  /** Runs an upload in one of the account's upload slots; its body is read before the handler's transaction opens. */
  async function upload<T> (request: FastifyRequest, reply: FastifyReply, run: () => Promise<T>): Promise<T> {
    const release = uploads.take(request.userId, reply)
    try {
      return await run()
    } finally {
      release()
    }
  }

  /** Adds the files of the request to a knowledge base, within the per-request and per-knowledge-base limits. */
  async function addFiles (request: FastifyRequest, id: string, fileField: 'file' | 'files', owners: OwnerFilter): Promise<KnowledgeBaseView> {
    const { userId } = request
    await requireOwners(db, userId, owners)
    // Before the body is read: an unknown knowledge base need not wait for its files.
    if (await findKnowledgeBase(db, userId, id) === undefined) throw notFound(`knowledge base ${id}`)
    const perRequest = fileField === 'file' ? 1 : limits.maxFilesPerUpload
    const tooManyFiles = fileField === 'file'
      ? 'this route takes one file; send several to POST /v1/knowledge-base/:id/files'
      : `one upload carries at most ${perRequest} files`
    await withUpload(request, { fileField, fieldNames: [], maxFiles: perRequest, tooManyFiles, maxFileBytes: limits.maxFileBytes }, async ({ files }) => {
      if (files.length === 0) throw badRequest(`body.${fileField} is required`, 'validation_error')
      await db.transaction().execute(async (trx) => {
        const kb = await lockKnowledgeBase(trx, userId, id, owners)
        const room = limits.maxFiles - await countFiles(trx, kb.id)
        if (files.length > room) throw new HttpError(413, 'too_many_files', `a knowledge base holds at most ${limits.maxFiles} files; this one has room for ${room} more`)
        await touchKnowledgeBase(trx, kb.id)
        await enqueueExtraction(trx, jobs, await storeFiles(trx, userId, kb.id, files))
      })
    })
    return await viewKnowledgeBase(db, userId, id)
  }

  app.get('/knowledge-base/list', {
    schema: {
      tags: TAGS,
      summary: "List the account's knowledge bases",
      querystring: Type.Object({ ...OwnerQuery.properties, ...Paging }),
      response: { 200: Type.Array(KnowledgeBase), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    await requireOwners(db, request.userId, request.query)
    const rows = await listKnowledgeBaseRows(db, request.userId, request.query)
    return (await viewKnowledgeBases(db, request.userId, rows)).map(toKnowledgeBase)
  })

  app.post('/knowledge-base', {
    schema: {
      tags: TAGS,
      summary: 'Create a knowledge base with its first file',
      description: 'multipart/form-data: `file` (the first document, required), `name` (1 to 100 characters), `description` (1 to 300), ' +
        '`folder` (0 to 50, optional), `language` (BCP-47, optional; default: the account\'s language). ' + UPLOAD_LIMITS_TEXT,
      querystring: OwnerQuery,
      body: form(Type.Object({ file: FileField('the first document'), ...FormFields.properties })),
      response: { 200: KnowledgeBase, ...UPLOAD_ERRORS }
    },
    onError: closeConnection
  }, async (request, reply) => await upload(request, reply, async () => {
    const { userId, query } = request
    await requireOwners(db, userId, query)
    const id = newId()
    const options = {
      fileField: 'file',
      fieldNames: Object.keys(FormFields.properties),
      maxFiles: 1,
      tooManyFiles: 'a knowledge base is created with one file; add more with POST /v1/knowledge-base/:id/files',
      maxFileBytes: limits.maxFileBytes
    }
    await withUpload(request, options, async ({ fields, files }) => {
      if (!checkFormFields(fields)) throw invalidInput('body', checkFormFields.errors![0] as AjvIssue)
      if (files.length === 0) throw badRequest('body.file is required', 'validation_error')
      const values = fields as Static<typeof FormFields>
      const language = values.language ?? (await findUser(db, userId))?.language ?? 'en'
      await db.transaction().execute(async (trx) => {
        await insertKnowledgeBase(trx, userId, {
          id,
          customer_id: query.customer_id?.toLowerCase() ?? null,
          workspace_id: query.workspace_id?.toLowerCase() ?? null,
          name: values.name,
          description: values.description,
          folder: values.folder ?? '',
          language,
          search_config: searchConfigFor(language)
        })
        await enqueueExtraction(trx, jobs, await storeFiles(trx, userId, id, files))
      })
    })
    return toKnowledgeBase(await viewKnowledgeBase(db, userId, id))
  }))

  app.get('/knowledge-base/:id', {
    schema: { tags: TAGS, summary: 'Get a knowledge base', params: IdParams, response: { 200: KnowledgeBase, ...errors(...AUTH_ERRORS, 404) } }
  }, async (request) => toKnowledgeBase(await viewKnowledgeBase(db, request.userId, request.params.id)))

  app.delete('/knowledge-base/:id', {
    schema: {
      tags: TAGS,
      summary: 'Delete a knowledge base',
      description: 'Deletes its files and their passages; the agents that used it no longer list it. Answers the knowledge base as it was.',
      params: IdParams,
      response: { 200: KnowledgeBase, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const view = await viewKnowledgeBase(db, request.userId, request.params.id)
    await deleteKnowledgeBase(db, request.userId, view.row.id)
    return toKnowledgeBase(view)
  })

  app.post('/knowledge-base/:id/file', {
    schema: {
      tags: TAGS,
      summary: 'Add a file',
      description: 'multipart/form-data: `file` (one document). ' + UPLOAD_LIMITS_TEXT,
      params: IdParams,
      body: form(Type.Object({ file: FileField('one document') })),
      response: { 200: KnowledgeBase, ...UPLOAD_ERRORS }
    },
    onError: closeConnection
  }, async (request, reply) => await upload(request, reply, async () => toKnowledgeBase(await addFiles(request, request.params.id, 'file', {}))))

  app.post('/knowledge-base/:id/files', {
    schema: {
      tags: TAGS,
      summary: 'Add several files',
      description: 'multipart/form-data: `files`, repeated once per document. With `customer_id` or `workspace_id`, the knowledge base must belong to them (404 otherwise). ' + UPLOAD_LIMITS_TEXT,
      params: IdParams,
      querystring: OwnerQuery,
      body: form(Type.Object({ files: Type.Array(FileField('documents'), { minItems: 1 }) })),
      response: { 200: KnowledgeBase, ...UPLOAD_ERRORS }
    },
    onError: closeConnection
  }, async (request, reply) => await upload(request, reply, async () => toKnowledgeBase(await addFiles(request, request.params.id, 'files', request.query))))

  app.delete('/knowledge-base/:id/file', {
    schema: {
      tags: TAGS,
      summary: 'Delete files',
      description: 'Every id must be a file of this knowledge base; otherwise nothing is deleted (404). Their passages leave search at once.',
      params: IdParams,
      body: Type.Object({ file_ids: Type.Array(ObjectId, { minItems: 1, maxItems: 1000 }) }),
      response: { 200: KnowledgeBase, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    return await change(request.userId, request.params.id, async (trx, kbId) => await deleteFiles(trx, request.userId, kbId, request.body.file_ids))
  })

  app.put('/knowledge-base/:id/agents', {
    schema: {
      tags: TAGS,
      summary: 'Replace the agents that use the knowledge base',
      description: 'Each id must be one of the account\'s agents (404 otherwise); [] removes them all. The agents\' `knowledge_base` lists follow.',
      params: IdParams,
      body: Type.Object({ agent_ids: Type.Array(ObjectId, { maxItems: 1000 }) }),
      response: { 200: KnowledgeBase, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    return await change(request.userId, request.params.id, async (trx, kbId) => await replaceAgents(trx, request.userId, kbId, request.body.agent_ids))
  })

  app.get('/knowledge-base/:id/search', {
    schema: {
      tags: TAGS,
      summary: 'Search a knowledge base',
      description: 'Full-text search in the knowledge base\'s language over the passages of its ready files. A passage matches when it holds any word of `q`; those with more of the words, closer together, rank first.',
      params: IdParams,
      querystring: Type.Object({
        q: Type.String({ minLength: 1, maxLength: 1000 }),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 50, default: 5 }))
      }),
      response: { 200: SearchResults, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const { row } = await viewKnowledgeBase(db, request.userId, request.params.id)
    return { results: await search(db, request.userId, [row.id], request.query.q, request.query.limit ?? 5) }
  })

  app.post('/runtime/agents/:id/knowledge-search', {
    schema: {
      tags: ['runtime'],
      summary: 'Search the knowledge bases of an agent (the api_rag tool)',
      description: 'The voice runtime asks this during a call: the same search as GET /v1/knowledge-base/:id/search, across every knowledge base the agent uses. An agent without knowledge bases finds nothing.',
      params: IdParams,
      body: Type.Object({
        query: Type.String({ minLength: 1, maxLength: 1000, description: 'what the caller asked' }),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 50, default: 5 }))
      }),
      response: { 200: SearchResults, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const ids = await knowledgeBasesOfAgent(db, request.userId, request.params.id)
    return { results: await search(db, request.userId, ids, request.body.query, request.body.limit ?? 5) }
  })
}
