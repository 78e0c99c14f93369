import t, { type Test } from 'tap'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { fixture, makeDocx, makePdf, multipartBody, paragraphs, upload, type FormFile } from '../helpers/documents.ts'

type KnowledgeBase = {
  _id: string
  knowledge_base_name: string
  knowledge_base_description: string
  folder: string
  language: string
  customer_id: string | null
  workspace_id: string | null
  files: Array<{ _id: string, file_name: string, file_size: number, uploaded_at: string, file_type: string, status: string, error?: string, passage_count: number }>
  agent_names: string[]
  agent_ids: string[]
}
type Hit = { knowledge_base_id: string, file_id: string, file_name: string, position: number, page: number | null, score: number, snippet: string, content: string }

const FORM = { name: 'Founding documents', description: 'Texts the agent answers history questions from' }
const pdf = () => makePdf(paragraphs(fixture('constitution.txt')))
const docx = () => makeDocx(paragraphs(fixture('aesop.txt')))

async function create (ctx: TestContext, account: Account, files: FormFile[], fields: Record<string, string> = FORM, query = '') {
  return await upload(ctx.app, `/v1/knowledge-base${query}`, account.headers, fields, files)
}

async function createOk (t: Test, ctx: TestContext, account: Account, file: FormFile, fields: Record<string, string> = FORM): Promise<KnowledgeBase> {
  const res = await create(ctx, account, [file], fields)
  t.equal(res.statusCode, 200, res.body)
  return res.json()
}

async function get (ctx: TestContext, account: Account, id: string) {
  return await ctx.app.inject({ method: 'GET', url: `/v1/knowledge-base/${id}`, headers: account.headers })
}

/** Polls the knowledge base until none of its files waits to be read (or fails the test after 20 s). */
async function whenRead (t: Test, ctx: TestContext, account: Account, id: string): Promise<KnowledgeBase> {
  const deadline = Date.now() + 20_000
  for (;;) {
    const kb = (await get(ctx, account, id)).json() as KnowledgeBase
    if (kb.files.every((f) => f.status === 'ready' || f.status === 'failed')) return kb
    if (Date.now() > deadline) {
      t.fail(`files not read: ${JSON.stringify(kb.files)}`)
      return kb
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

async function search (ctx: TestContext, account: Account, id: string, q: string, limit?: number): Promise<Hit[]> {
  const query = new URLSearchParams({ q, ...(limit === undefined ? {} : { limit: String(limit) }) })
  const res = await ctx.app.inject({ method: 'GET', url: `/v1/knowledge-base/${id}/search?${query}`, headers: account.headers })
  if (res.statusCode !== 200) throw new Error(res.body)
  return res.json().results
}

/** What a refused request must not have left behind. */
async function storedCounts (ctx: TestContext) {
  const count = async (table: 'knowledge_bases' | 'knowledge_base_files' | 'knowledge_base_file_parts' | 'knowledge_base_passages') =>
    (await ctx.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n
  return {
    knowledge_bases: await count('knowledge_bases'),
    files: await count('knowledge_base_files'),
    parts: await count('knowledge_base_file_parts'),
    passages: await count('knowledge_base_passages')
  }
}

t.test('a knowledge base is created with a PDF, read in the background and searched', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const account = await createAccount(ctx.db)
  const content = pdf()
  // Files before fields, as some clients send them: the form is read in any order.
  const res = await upload(ctx.app, '/v1/knowledge-base', account.headers, { ...FORM, folder: 'history' }, [{ name: 'constitution.pdf', content, type: 'application/pdf' }], true)
  t.equal(res.statusCode, 200, res.body)
  const created = res.json() as KnowledgeBase
  t.match(created, {
    _id: /^[0-9a-f]{24}$/,
    knowledge_base_name: FORM.name,
    knowledge_base_description: FORM.description,
    folder: 'history',
    language: 'en',
    customer_id: null,
    workspace_id: null,
    agent_names: [],
    agent_ids: []
  })
  t.equal(created.files.length, 1)
  const [file] = created.files
  t.match(file, { _id: /^[0-9a-f]{24}$/, file_name: 'constitution.pdf', file_size: content.length, file_type: 'pdf' })
  t.ok(['pending', 'processing', 'ready'].includes(file.status))
  t.equal(new Date(file.uploaded_at).toISOString(), file.uploaded_at, 'uploaded_at is ISO 8601')

  const stored = await ctx.db.selectFrom('knowledge_base_file_parts').select('data').where('file_id', '=', file._id).orderBy('n').execute()
  t.same(Buffer.concat(stored.map((p) => p.data)), content, 'the bytes are stored as uploaded')

  const read = await whenRead(t, ctx, account, created._id)
  t.match(read.files[0], { status: 'ready', passage_count: Number })
  t.ok(read.files[0].passage_count > 5)
  t.notOk('error' in read.files[0])

  const hits = await search(ctx, account, created._id, 'How old must a senator be?')
  t.ok(hits.length > 0 && hits.length <= 5, 'five results by default')
  t.match(hits[0], { knowledge_base_id: created._id, file_id: file._id, file_name: 'constitution.pdf', page: 1, position: Number, score: Number })
  t.match(hits[0].content, /Age of thirty Years/)
  t.match(hits[0].snippet, /<b>Senator<\/b>/)
  t.ok(hits.every((h, i) => i === 0 || hits[i - 1].score >= h.score), 'best first')
  t.equal((await search(ctx, account, created._id, 'senator', 2)).length, 2)
  t.same(await search(ctx, account, created._id, 'zeppelin submarine'), [], 'nothing matches: no results')
  t.same(await search(ctx, account, created._id, '?!'), [], 'a query without words finds nothing')

  const page2 = (await ctx.db.selectFrom('knowledge_base_passages').select('page').where('file_id', '=', file._id).orderBy('position', 'desc').executeTakeFirstOrThrow()).page
  t.equal(page2, 2, 'passages know their PDF page')
})
