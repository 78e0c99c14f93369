import { readFileSync } from 'node:fs'
import multipart from '@fastify/multipart'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Type, type TObject } from 'typebox'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import { sharedSlots } from '../../http/concurrency.ts'
import { HttpError, invalidInput, type AjvIssue } from '../../http/errors.ts'
import { compileBodySchema } from '../../http/validation.ts'
import { QUEUES, sendJob, type JobSender } from '../../jobs/queues.ts'
import { listAgents } from '../agents/queries.ts'
import {
  countFiles, deleteFiles, deleteKnowledgeBase, findKnowledgeBase, insertKnowledgeBase, listKnowledgeBaseRows, lockKnowledgeBase,
  touchKnowledgeBase, viewKnowledgeBase, viewKnowledgeBases, type FileRow, type KnowledgeBaseRow, type SearchHit
} from '../knowledge-bases/queries.ts'
import { search, searchConfigFor } from '../knowledge-bases/search.ts'
import { ACCEPTED_TYPES, FormFields, storeFiles, withUpload, type Upload, type UploadOptions } from '../knowledge-bases/upload.ts'
import { findUser } from '../users/queries.ts'
import { errorSummary } from './components.ts'
import { DRAFT_QUERY, draftOf, formSaved, refuseForm } from './drafts.ts'
import { describe } from './fields.ts'
import type { FormValues } from './forms.ts'
import { escapeHtml, html, raw, type SafeHtml } from './html.ts'
import { csrfField, layout, notice, viewerOf, when } from './pages.ts'
import type { ConsoleSession } from './queries.ts'
import { changeScope, inScope, scopeOf, viewScope, type Scope } from './scope.ts'
import { CONNECTING_PAGE_CSP, sameToken } from './security.ts'
import { formBody, idParams, listFilter, openFormBody, page, sendPage, text, type PageInput } from './reply.ts'

// The console's knowledge bases (docs/console.md, "Knowledge bases"): list, create with a first file, a knowledge
// base's page (files and their reading state, add and remove files, the agents using it, search, delete). Uploads
// go through the knowledge-bases module's upload.ts, so the console has the API's limits, types and messages. An
// agent is given a knowledge base in its own Knowledge section (agent-knowledge.ts), the one place that does.
const LIST_LIMIT = 200
/** The agents of the scope a knowledge base's page names among those using it (the first by creation). */
const AGENTS_LISTED = 200
const SEARCH_LIMIT = 10
const MAX_QUERY = 1000
/** Polls the files' states while any is being read (static/knowledge-bases.js). */
const SCRIPT = readFileSync(new URL('./static/knowledge-bases.js', import.meta.url))
/**
 * Uploads are multipart and check their CSRF token themselves (routes.ts's `multipartForm`). One refused before its
 * body is read (signed out, a member, an unknown knowledge base) leaves it unread: the connection cannot carry another request.
 */
function uploadRoute (input: Omit<PageInput, 'body'>) {
  const route = page(input, { config: { multipartForm: true as const } })
  return {
    ...route,
    // Its parts are read and checked one by one as they stream in (upload.ts): the schema only names the type.
    schema: { ...route.schema, body: { content: { 'multipart/form-data': { schema: openFormBody() } } } },
    onError: async (_request: FastifyRequest, reply: FastifyReply) => { reply.header('connection', 'close') }
  }
}
const KNOWLEDGE_BASE = idParams('id')
/**
 * A button's form (urlencoded) of this plugin, which parses multipart too: its schema names the urlencoded type, so
 * that a multipart body, unread and without the token the pages' hook reads, is that hook's 403 in words.
 */
function buttonForm (params: TObject) {
  const route = page({ params, body: formBody({}) })
  return { ...route, schema: { ...route.schema, body: { content: { 'application/x-www-form-urlencoded': { schema: route.schema.body } } } } }
}
// The search is the page's own to refuse (repeated, too long), under its box.
const KNOWLEDGE_BASE_QUERY = Type.Object({ done: text('The notice of what was done'), q: listFilter('The search'), draft: DRAFT_QUERY })
const ACCEPT = '.pdf,.docx,.txt,.text,.md,.markdown,.csv,.html,.htm,.xhtml'

const FIELDS = ['name', 'description', 'folder', 'language'] as const
type Field = typeof FIELDS[number]
type CreateForm = Record<Field, string>
type Problems = Partial<Record<Field | 'file', string>>
const LABELS: Record<Field, string> = { name: 'The name', description: 'The description', folder: 'The folder', language: 'The language' }
const EMPTY_FORM: CreateForm = { name: '', description: '', folder: '', language: '' }
/** The create form's page, which shows a refused form's draft (drafts.ts); a file cannot be kept, it is chosen again. */
const NEW_PATH = '/knowledge-bases/new'
const NEW_QUERY = Type.Object({ draft: DRAFT_QUERY })
const createFormOf = (values: FormValues): CreateForm => Object.fromEntries(FIELDS.map((field) => [field, (values[field] ?? '').trim()])) as CreateForm

const STATES: Record<FileRow['status'], string> = { pending: 'Queued', processing: 'Processing', ready: 'Ready', failed: 'Failed' }
const stateOf = (file: FileRow) => file.status === 'failed' && file.error !== null ? `Failed: ${file.error}` : STATES[file.status]
const reading = (files: FileRow[]) => files.some((file) => file.status === 'pending' || file.status === 'processing')

// What a form did, said in the section the person sent it from (its redirect lands on that section's heading):
// `top` under the title.
const DONE: Record<string, { text: string, section: 'top' | 'files' }> = {
  created: { text: 'Created. Its file is read in the background: its state changes to Ready when it can be searched.', section: 'top' },
  added: { text: 'Added. The files are read in the background.', section: 'files' },
  removed: { text: 'The file is removed; its passages are no longer searched.', section: 'files' }
}

interface Uploader { session: ConsoleSession, scope: Scope }

const noSuchKnowledgeBase = () => new HttpError(404, 'not_found', 'You have no knowledge base with that id.')

function size (bytes: number): string {
  if (bytes < 1024) return `${bytes} B`
  return bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KB` : `${(bytes / 1024 / 1024).toFixed(1)} MB`
}

/** "2 ready, 1 processing" (empty states left out); "No files" for none. */
function summary (files: FileRow[]): string {
  const counts = (Object.keys(STATES) as Array<FileRow['status']>)
    .map((status) => ({ status, n: files.filter((file) => file.status === status).length })).filter(({ n }) => n > 0)
  return counts.length === 0 ? 'No files' : counts.map(({ status, n }) => `${n} ${STATES[status].toLowerCase()}`).join(', ')
}

/**
 * A search result's snippet: ts_headline marks the matched words with <b> and </b> in the document's own text,
 * so all of it is escaped and exactly those marks become <mark>. (A document's literal "<b>" gets marked too:
 * harmless, the element stays inside its paragraph.)
 */
const snippetHtml = (snippet: string): SafeHtml =>
  raw(escapeHtml(snippet).replaceAll('&lt;b&gt;', '<mark>').replaceAll('&lt;/b&gt;', '</mark>'))

export async function consoleKnowledgeBaseRoutes (app: FastifyInstance, { db, jobs }: { db: DB, jobs: JobSender }): Promise<void> {
  // Over the size limit the parser only cuts a file short; upload.ts notices that and answers 413 (as the API does).
  await app.register(multipart, { throwFileSizeLimit: false })
  const limits = jobs.config.knowledgeBases
  const maxMb = limits.maxFileBytes / 1024 / 1024
  const fileHint = `${ACCEPTED_TYPES}; at most ${maxMb} MB a file.`
  // The same upload slots as the API's: an account's KB_UPLOADS_PER_ACCOUNT holds across both.
  const uploads = sharedSlots('uploads', jobs.config.concurrency)
  const validators = new Map(FIELDS.map((field) => [field, compileBodySchema(FormFields.properties[field])]))

  async function inScopeKb (scope: Scope, id: string): Promise<KnowledgeBaseRow> {
    const row = await findKnowledgeBase(db, scope.ownerId, id)
    if (row === undefined || !inScope(scope, row)) throw noSuchKnowledgeBase()
    return row
  }

  /** The session of an upload, whose CSRF token the handler checks (the pages' hook leaves multipart forms to it). */
  function uploader (request: FastifyRequest): Uploader {
    const session = request.consoleSession
    if (session === undefined) throw new HttpError(403, 'forbidden', 'You are signed out. Sign in and try again.')
    return { session, scope: changeScope(request) }
  }

  /**
   * Reads an upload whose first field must be the session's CSRF token: checked before any file byte is read, so a
   * forged upload writes nothing, not even a temporary file. A refusal of the upload itself (too large, wrong type,
   * empty, too many) is answered as the HttpError for the form to show; other errors are thrown.
   */
  async function receive<T> (request: FastifyRequest, reply: FastifyReply, { session, scope }: Uploader, options: Omit<UploadOptions, 'firstPart' | 'maxFileBytes'>,
    use: (upload: Upload) => Promise<T>, fields: Record<string, string> = {}): Promise<T | HttpError> {
    const firstPart: UploadOptions['firstPart'] = (field) => {
      if (field?.name !== 'csrf_token' || !sameToken(field.value, session.csrfToken)) {
        throw new HttpError(403, 'forbidden', 'This form has expired. Reload the page and send it again.')
      }
    }
    const release = uploads.take(scope.ownerId, reply)
    try {
      return await withUpload(request, { ...options, maxFileBytes: limits.maxFileBytes, firstPart }, use, fields)
    } catch (err) {
      // Refused part-way, the rest of the body is unread: the connection cannot carry another request.
      reply.header('connection', 'close')
      // A body that is not multipart (no form of the page sends one) had no token checked: refused as it is.
      if (err instanceof HttpError && err.code !== 'multipart_required' && [400, 413, 415].includes(err.statusCode)) return err
      throw err
    } finally {
      release()
    }
  }

  const enqueue = async (trx: Parameters<typeof storeFiles>[0], ownerId: string, kbId: string, files: Upload['files']) => {
    for (const file of await storeFiles(trx, ownerId, kbId, files)) await sendJob(jobs.boss, trx, QUEUES.extractKnowledgeFile, { fileId: file.id })
  }

  /** Each field checked with the API's schema; '' for folder and language means the API's default. */
  function check (form: CreateForm): Problems {
    const problems: Problems = {}
    for (const field of FIELDS) {
      if (form[field] === '' && (field === 'folder' || field === 'language')) continue
      const validate = validators.get(field)!
      if (!validate(form[field])) problems[field] = form[field] === '' ? `${LABELS[field]} is required.` : `${invalidInput(LABELS[field], validate.errors![0] as AjvIssue).message}.`
    }
    return problems
  }

  function createPage (session: ConsoleSession, form: CreateForm, problems: Problems): string {
    const viewer = viewerOf(session)
    const name = describe('name', undefined, problems.name)
    const description = describe('description', 'What it holds, for you and the people you work with.', problems.description)
    const folder = describe('folder', 'Optional, to group knowledge bases.', problems.folder)
    const language = describe('language', 'The documents\' language, a BCP-47 tag such as en or de-DE; it decides how words are matched. Empty: your account\'s language.', problems.language)
    const file = describe('file', `The first document: ${fileHint} Add more on the knowledge base's page.`, problems.file)
    return layout({
      title: 'New knowledge base',
      viewer,
      current: '/knowledge-bases',
      body: html`<p><a href="/knowledge-bases">All knowledge bases</a></p>
${errorSummary(problems)}
<form method="post" action="/knowledge-bases" enctype="multipart/form-data" class="stack wide">
  ${csrfField(viewer.csrfToken)}
  <label for="name">Name</label>
  <input id="name" name="name" value="${form.name}" maxlength="100" required${name.attrs}>
  ${name.after}
  <label for="description">Description</label>
  <input id="description" name="description" value="${form.description}" maxlength="300" required${description.attrs}>
  ${description.after}
  <label for="folder">Folder</label>
  <input id="folder" name="folder" value="${form.folder}" maxlength="50"${folder.attrs}>
  ${folder.after}
  <label for="language">Language</label>
  <input id="language" name="language" value="${form.language}" maxlength="35" autocomplete="off"${language.attrs}>
  ${language.after}
  <label for="file">File</label>
  <input id="file" name="file" type="file" accept="${ACCEPT}" required${file.attrs}>
  ${file.after}
  <button type="submit">Create knowledge base</button>
</form>`
    })
  }

  interface PageOptions { done?: string, q?: string, results?: SearchHit[], searchError?: string, uploadError?: string }

  async function knowledgeBasePage (session: ConsoleSession, id: string, options: PageOptions): Promise<string> {
    const scope = scopeOf(session)
    const viewer = viewerOf(session)
    const { row: kb, files, agents: assigned } = await viewKnowledgeBase(db, scope.ownerId, id)
    const agents = await listAgents(db, scope.ownerId, { limit: AGENTS_LISTED, workspace_id: scope.workspaceId })
    // Agents outside the page's scope (another workspace's, past the first AGENTS_LISTED) are counted, not named.
    const shown = assigned.filter((agent) => agents.some((a) => a.id === agent.id))
    const hidden = assigned.length - shown.length
    const q = options.q ?? ''
    const search = describe('q', undefined, options.searchError)
    const upload = describe('files', fileHint, options.uploadError)
    const done = options.done === undefined ? undefined : DONE[options.done]
    const doneIn = (section: 'top' | 'files') => done?.section === section && notice('success', done.text)
    return layout({
      title: kb.name,
      viewer,
      current: '/knowledge-bases',
      body: html`<p><a href="/knowledge-bases">All knowledge bases</a></p>
${doneIn('top')}
<dl class="facts">
  <dt>Description</dt><dd>${kb.description}</dd>
  <dt>Folder</dt><dd>${kb.folder === '' ? '—' : kb.folder}</dd>
  <dt>Language</dt><dd>${kb.language}</dd>
  <dt>Knowledge base id</dt><dd><code>${kb.id}</code></dd>
</dl>
${!scope.canChange && html`<p>You are a member of this workspace: you can see and search this knowledge base, not change it.</p>`}

<h2 id="search-title">Search</h2>
<form method="get" action="/knowledge-bases/${kb.id}" class="stack wide" role="search" aria-labelledby="search-title">
  <label for="q">Words to find</label>
  <input id="q" name="q" type="search" value="${q}" maxlength="${MAX_QUERY}"${search.attrs}>
  ${search.after}
  <button type="submit">Search</button>
</form>
${options.results !== undefined && (options.results.length === 0
  ? html`<p role="status">No passage matches “${q}”. Only files in the Ready state are searched.</p>`
  : html`<ol class="results" aria-label="Search results">${options.results.map((hit) => html`<li>
    <p class="hint">${hit.file_name}${hit.page !== null && html`, page ${hit.page}`}, passage ${hit.position + 1}</p>
    <p>${snippetHtml(hit.snippet)}</p>
  </li>`)}</ol>`)}

<h2 id="files-title">Files</h2>
${doneIn('files')}
${files.length === 0
  ? html`<p>No files.</p>`
  : html`<div class="table"><table${reading(files) && html` data-poll="/knowledge-bases/${kb.id}/files.json"`}>
  <caption>Files, in upload order</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Size</th><th scope="col">Uploaded</th><th scope="col">State</th><th scope="col">Passages</th>${scope.canChange && html`<th scope="col"><span class="visually-hidden">Actions</span></th>`}</tr></thead>
  <tbody>${files.map((file) => html`<tr data-file="${file.id}">
    <td>${file.file_name}</td><td>${file.file_type}</td><td>${size(file.file_size)}</td><td>${when(file.uploaded_at)}</td>
    <td class="file-state">${stateOf(file)}</td><td class="file-passages">${file.passage_count}</td>
    ${scope.canChange && html`<td><form method="post" action="/knowledge-bases/${kb.id}/files/${file.id}/delete">${csrfField(viewer.csrfToken)}<button type="submit" class="danger" aria-label="Remove ${file.file_name}">Remove</button></form></td>`}
  </tr>`)}</tbody>
</table></div>`}
${reading(files) && html`<p id="reading" role="status">Files are being read. This page updates their state by itself, or <a href="/knowledge-bases/${kb.id}">refresh it</a>.</p>`}
${scope.canChange && html`<h2>Add files</h2>
${options.uploadError !== undefined && notice('error', options.uploadError)}
<form method="post" action="/knowledge-bases/${kb.id}/files" enctype="multipart/form-data" class="stack wide">
  ${csrfField(viewer.csrfToken)}
  <label for="files">Files</label>
  <input id="files" name="files" type="file" accept="${ACCEPT}" multiple required${upload.attrs}>
  ${upload.after}
  <p class="hint">At most ${limits.maxFilesPerUpload} files at once and ${limits.maxFiles} in a knowledge base.</p>
  <button type="submit">Add files</button>
</form>`}

<h2 id="agents-title">Agents</h2>
<p>An agent is given knowledge in its own Knowledge section: open it from <a href="/agents">Agents</a>, tick this knowledge base there and save.</p>
${shown.length === 0
  ? html`<p>No agent uses it yet.</p>`
  : html`<ul aria-labelledby="agents-title">${shown.map((agent) => html`<li><a href="/agents/${agent.id}#knowledge">${agent.agent_name}</a></li>`)}</ul>`}
${hidden > 0 && html`<p class="hint">${hidden} more agent${hidden === 1 ? '' : 's'} not listed here use${hidden === 1 ? 's' : ''} it.</p>`}
${scope.canChange && html`<h2>Delete</h2>
<p>Deletes its files and their passages; the agents that use it no longer do.</p>
<form method="post" action="/knowledge-bases/${kb.id}/delete">${csrfField(viewer.csrfToken)}<button type="submit" class="danger">Delete this knowledge base</button></form>`}
${reading(files) && html`<script src="/console/knowledge-bases.js" defer></script>`}`
    })
  }

  app.get('/console/knowledge-bases.js', page(), async (_request, reply) => {
    return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(SCRIPT)
  })

  app.get<{ Querystring: { deleted?: string } }>('/knowledge-bases', page({ querystring: Type.Object({ deleted: text('The notice of the deletion') }) }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const { session, scope } = page
    const rows = await listKnowledgeBaseRows(db, scope.ownerId, { workspace_id: scope.workspaceId, limit: LIST_LIMIT })
    const kbs = await viewKnowledgeBases(db, scope.ownerId, rows)
    return sendPage(reply, 200, layout({
      title: 'Knowledge bases',
      viewer: viewerOf(session),
      current: '/knowledge-bases',
      body: html`
${request.query.deleted !== undefined && notice('success', 'The knowledge base is deleted.')}
<p>Documents your agents search during calls for what callers ask.</p>
${scope.canChange && html`<p><a href="/knowledge-bases/new">New knowledge base</a></p>`}
${kbs.length === 0
  ? html`<p>No knowledge bases yet.</p>`
  : html`<div class="table"><table>
  <caption>Your knowledge bases${kbs.length === LIST_LIMIT && html` (the first ${LIST_LIMIT})`}</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">Description</th><th scope="col">Folder</th><th scope="col">Files</th><th scope="col">State</th></tr></thead>
  <tbody>${kbs.map(({ row, files }) => html`<tr>
    <td><a href="/knowledge-bases/${row.id}">${row.name}</a></td><td>${row.description}</td><td>${row.folder}</td><td>${files.length}</td><td>${summary(files)}</td>
  </tr>`)}</tbody>
</table></div>`}`
    }))
  })

  app.get<{ Querystring: { draft?: string } }>(NEW_PATH, page({ querystring: NEW_QUERY }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    changeScope(request)
    const draft = await draftOf(db, page.session, NEW_PATH, request.query.draft)
    return sendPage(reply, 200, createPage(page.session, draft === undefined ? EMPTY_FORM : createFormOf(draft.values), draft?.problems ?? {}))
  })

  app.post('/knowledge-bases', uploadRoute({}), async (request, reply) => {
    const { session, scope } = uploader(request)
    // The fields as read: a file refused while the body arrives leaves the name and description typed before it.
    const sent: Record<string, string> = {}
    const options = {
      fileField: 'file',
      fieldNames: FIELDS,
      maxFiles: 1,
      tooManyFiles: 'A knowledge base is created with one file; add more on its page.'
    }
    const outcome = await receive(request, reply, { session, scope }, options, async ({ fields, files }) => {
      const form = createFormOf(fields)
      const problems = check(form)
      if (files.length === 0) problems.file = 'Choose a file.'
      if (Object.keys(problems).length > 0) return problems
      const id = newId()
      const language = form.language === '' ? (await findUser(db, scope.ownerId))?.language ?? 'en' : form.language
      await db.transaction().execute(async (trx) => {
        await insertKnowledgeBase(trx, scope.ownerId, {
          id,
          customer_id: null,
          workspace_id: scope.workspaceId ?? null,
          name: form.name,
          description: form.description,
          folder: form.folder,
          language,
          search_config: searchConfigFor(language)
        })
        await enqueue(trx, scope.ownerId, id, files)
      })
      return id
    }, sent)
    // Refused, the form's page shows what was sent and why (Post/Redirect/Get): a reload sends nothing again.
    if (outcome instanceof HttpError) return await refuseForm(db, reply, session, NEW_PATH, createFormOf(sent), { file: outcome.message })
    if (typeof outcome !== 'string') return await refuseForm(db, reply, session, NEW_PATH, createFormOf(sent), outcome)
    await formSaved(db, session, NEW_PATH)
    return reply.redirect(`/knowledge-bases/${outcome}?done=created`, 303)
  })

  app.get<{ Params: { id: string }, Querystring: { q?: string | string[], done?: string, draft?: string } }>('/knowledge-bases/:id', page({ params: KNOWLEDGE_BASE, querystring: KNOWLEDGE_BASE_QUERY }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const { session, scope } = page
    const kb = await inScopeKb(scope, request.params.id)
    // The page's script asks this server for its files' states.
    reply.header('content-security-policy', CONNECTING_PAGE_CSP)
    const { q, done } = request.query
    const refused = (await draftOf(db, session, `/knowledge-bases/${kb.id}`, request.query.draft))?.problems.files
    if (q === undefined) return sendPage(reply, 200, await knowledgeBasePage(session, kb.id, { done, uploadError: refused }))
    if (typeof q !== 'string') return sendPage(reply, 400, await knowledgeBasePage(session, kb.id, { searchError: 'Search for one text at a time.' }))
    if (q.length > MAX_QUERY) return sendPage(reply, 400, await knowledgeBasePage(session, kb.id, { q, searchError: `Search for at most ${MAX_QUERY} characters.` }))
    if (q.trim() === '') return sendPage(reply, 200, await knowledgeBasePage(session, kb.id, { q }))
    const results = await search(db, scope.ownerId, [kb.id], q, SEARCH_LIMIT)
    return sendPage(reply, 200, await knowledgeBasePage(session, kb.id, { q, results }))
  })

  // What the page's script polls while files are read: each file's state as the page shows it.
  app.get<{ Params: { id: string } }>('/knowledge-bases/:id/files.json', page({ params: KNOWLEDGE_BASE }), async (request, reply) => {
    const page = viewScope(request, reply)
    if (page === undefined) return reply
    const kb = await inScopeKb(page.scope, request.params.id)
    const { files } = await viewKnowledgeBase(db, page.scope.ownerId, kb.id)
    return await reply.type('application/json; charset=utf-8').send({
      reading: reading(files),
      files: files.map((file) => ({ id: file.id, state: stateOf(file), passages: file.passage_count }))
    })
  })

  app.post<{ Params: { id: string } }>('/knowledge-bases/:id/files', uploadRoute({ params: KNOWLEDGE_BASE }), async (request, reply) => {
    const { session, scope } = uploader(request)
    // Before the body is read: an unknown knowledge base need not wait for its files.
    const kb = await inScopeKb(scope, request.params.id)
    const options = {
      fileField: 'files',
      fieldNames: [],
      maxFiles: limits.maxFilesPerUpload,
      tooManyFiles: `One upload carries at most ${limits.maxFilesPerUpload} files.`
    }
    const outcome = await receive(request, reply, { session, scope }, options, async ({ files }) => {
      if (files.length === 0) return new HttpError(400, 'validation_error', 'Choose at least one file.')
      await db.transaction().execute(async (trx) => {
        await lockKnowledgeBase(trx, scope.ownerId, kb.id)
        const room = limits.maxFiles - await countFiles(trx, kb.id)
        if (files.length > room) throw new HttpError(413, 'too_many_files', `A knowledge base holds at most ${limits.maxFiles} files; this one has room for ${room} more.`)
        await touchKnowledgeBase(trx, kb.id)
        await enqueue(trx, scope.ownerId, kb.id, files)
      })
    })
    // Refused, the knowledge base's page says why by the file input (Post/Redirect/Get): a reload sends nothing again.
    if (outcome instanceof HttpError) return await refuseForm(db, reply, session, `/knowledge-bases/${kb.id}`, {}, { files: outcome.message }, 'files-title')
    await formSaved(db, session, `/knowledge-bases/${kb.id}`)
    return reply.redirect(`/knowledge-bases/${kb.id}?done=added#files-title`, 303)
  })

  app.post<{ Params: { id: string, fileId: string } }>('/knowledge-bases/:id/files/:fileId/delete', buttonForm(idParams('id', 'fileId')), async (request, reply) => {
    const scope = changeScope(request)
    const kb = await inScopeKb(scope, request.params.id)
    const { fileId } = request.params
    await db.transaction().execute(async (trx) => {
      await lockKnowledgeBase(trx, scope.ownerId, kb.id)
      try {
        await deleteFiles(trx, scope.ownerId, kb.id, [fileId])
      } catch (err) {
        if (err instanceof HttpError && err.statusCode === 404) throw new HttpError(404, 'not_found', 'This knowledge base has no file with that id.')
        throw err
      }
      await touchKnowledgeBase(trx, kb.id)
    })
    return reply.redirect(`/knowledge-bases/${kb.id}?done=removed#files-title`, 303)
  })

  app.post<{ Params: { id: string } }>('/knowledge-bases/:id/delete', buttonForm(KNOWLEDGE_BASE), async (request, reply) => {
    const scope = changeScope(request)
    const kb = await inScopeKb(scope, request.params.id)
    await deleteKnowledgeBase(db, scope.ownerId, kb.id)
    return reply.redirect('/knowledge-bases?deleted=1', 303)
  })
}
