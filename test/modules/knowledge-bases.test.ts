import t, { type Test } from 'tap'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { fixture, makeDocx, makePdf, paragraphs, upload, type FormFile } from '../helpers/documents.ts'
import { poll } from '../helpers/poll.ts'

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
  t.equal(res.statusCode, 200, res.statusCode === 200 ? `created with ${file.name}` : res.body)
  return res.json()
}

async function get (ctx: TestContext, account: Account, id: string) {
  return await ctx.app.inject({ method: 'GET', url: `/v1/knowledge-base/${id}`, headers: account.headers })
}

/** Polls the knowledge base until none of its files waits to be read (or fails the test after 20 s). */
async function whenRead (t: Test, ctx: TestContext, account: Account, id: string): Promise<KnowledgeBase> {
  const read = (kb: KnowledgeBase) => kb.files.every((f) => f.status === 'ready' || f.status === 'failed')
  const kb = await poll(async () => (await get(ctx, account, id)).json() as KnowledgeBase, read, { intervalMs: 50 })
  if (!read(kb)) t.fail(`files not read: ${JSON.stringify(kb.files)}`)
  return kb
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

t.test('DOCX, HTML, text, Markdown and CSV files are added, read and found', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const account = await createAccount(ctx.db)
  const kb = await createOk(t, ctx, account, { name: 'aesop.docx', content: docx() })
  const res = await upload(ctx.app, `/v1/knowledge-base/${kb._id}/files`, account.headers, {}, [
    { field: 'files', name: 'declaration.html', content: fixture('declaration.html'), type: 'text/html' },
    { field: 'files', name: 'opening-hours.txt', content: 'The office opens at eight in the morning.\r\n\r\nOn Sundays the office stays closed.' },
    { field: 'files', name: 'parking.md', content: '# Parking\n\nVisitors park in the **blue garage** on Elm Street.\n' },
    { field: 'files', name: 'prices', content: 'treatment,price\nwhitening,120 EUR\ncleaning,80 EUR\n', type: 'text/csv' },
    { field: 'files', name: 'legacy.txt', content: Buffer.from('Caf\xe9 cr\xe8me is served in the lobby.', 'latin1') }
  ])
  t.equal(res.statusCode, 200, res.body)
  t.same(res.json().files.map((f: { file_name: string, file_type: string }) => [f.file_name, f.file_type]), [
    ['aesop.docx', 'docx'], ['declaration.html', 'html'], ['opening-hours.txt', 'txt'], ['parking.md', 'markdown'], ['prices', 'csv'], ['legacy.txt', 'txt']
  ], 'types come from the content, then the name or media type')

  const read = await whenRead(t, ctx, account, kb._id)
  t.same(read.files.map((f) => f.status), ['ready', 'ready', 'ready', 'ready', 'ready', 'ready'], JSON.stringify(read.files))

  const top = async (q: string) => (await search(ctx, account, kb._id, q))[0]
  t.match(await top('grapes sour fox'), { file_name: 'aesop.docx', content: /The Grapes are sour/ })
  const html = await top('unalienable rights')
  t.match(html, { file_name: 'declaration.html', content: /Life, Liberty and the pursuit of Happiness/ })
  t.notMatch(html.content, /<p>|&#39;|console\.log/, 'markup, entities and scripts are gone')
  t.match(await top('when does the office open'), { file_name: 'opening-hours.txt' })
  t.match(await top('where can visitors park'), { file_name: 'parking.md', snippet: /<b>garage<\/b>|<b>park<\/b>/ })
  t.match(await top('how much is whitening'), { file_name: 'prices', content: 'treatment: whitening; price: 120 EUR treatment: cleaning; price: 80 EUR' })
  t.match(await top('café crème'), { file_name: 'legacy.txt', content: 'Café crème is served in the lobby.' })
})

t.test('a file is streamed into parts of 1 MB and stored whole', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const content = Buffer.from('All work and no play makes a dull voice agent.\n'.repeat(55_000))
  const kb = await createOk(t, ctx, account, { name: 'Öffnungszeiten & Preise.txt', content })
  t.match(kb.files[0], { file_name: 'Öffnungszeiten & Preise.txt', file_size: content.length })
  const parts = await ctx.db.selectFrom('knowledge_base_file_parts').select(['n', 'data']).where('file_id', '=', kb.files[0]._id).orderBy('n').execute()
  t.same(parts.map((p) => p.n), [0, 1, 2], `${content.length} bytes in three parts`)
  t.ok(parts.every((p) => p.data.length <= 1024 * 1024))
  t.ok(Buffer.concat(parts.map((p) => p.data)).equals(content))
})

t.test('form fields are validated with clear 400s and nothing is stored', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const file = { name: 'notes.txt', content: 'Some notes.' }
  const cases: Array<[string, Record<string, string>, FormFile[], RegExp]> = [
    ['name missing', { description: 'd' }, [file], /^body\.name is required$/],
    ['name empty', { name: '', description: 'd' }, [file], /^body\.name must NOT have fewer than 1 characters/],
    ['name too long', { name: 'n'.repeat(101), description: 'd' }, [file], /^body\.name must NOT have more than 100 characters/],
    ['description missing', { name: 'n' }, [file], /^body\.description is required$/],
    ['description too long', { name: 'n', description: 'd'.repeat(301) }, [file], /^body\.description must NOT have more than 300 characters/],
    ['folder too long', { ...FORM, folder: 'f'.repeat(51) }, [file], /^body\.folder must NOT have more than 50 characters/],
    ['field over the parser limit', { ...FORM, description: 'd'.repeat(5000) }, [file], /^body\.description is too long$/],
    ['language not a tag', { ...FORM, language: 'english!' }, [file], /^body\.language must be a BCP-47 language tag/],
    ['file missing', FORM, [], /^body\.file is required$/],
    ['empty file', FORM, [{ name: 'empty.txt', content: '' }], /^empty\.txt is empty$/],
    ['file in another field', FORM, [{ field: 'document', name: 'a.txt', content: 'x' }], /^unexpected file field "document"/],
    ['file without a name', FORM, [{ name: '', content: 'x' }], /file name/],
    ['file name too long', FORM, [{ name: 'n'.repeat(300) + '.txt', content: 'x' }], /longer than 255 characters/]
  ]
  for (const [what, fields, files, message] of cases) {
    const res = await create(ctx, account, files, fields)
    t.equal(res.statusCode, 400, `${what}: ${res.body}`)
    t.match(res.json(), { statusCode: 400, error: 'Bad Request', code: String, message }, what)
  }

  const asText = await ctx.app.inject({
    method: 'POST', url: '/v1/knowledge-base', headers: { ...account.headers, 'content-type': 'multipart/form-data; boundary=X' },
    payload: '--X\r\nContent-Disposition: form-data; name="name"\r\n\r\nn\r\n--X\r\nContent-Disposition: form-data; name="file"\r\n\r\nnot a file\r\n--X--\r\n'
  })
  t.match(asText.json(), { statusCode: 400, message: 'body.file must be a file, not a text value' })

  const malformed = [
    { 'content-type': 'multipart/form-data' },
    { 'content-type': 'multipart/form-data; boundary=X', payload: '--X\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\ncut off here' },
    { 'content-type': 'multipart/form-data; boundary=X', payload: 'no boundary in here at all' }
  ]
  for (const { payload, ...headers } of malformed) {
    const res = await ctx.app.inject({ method: 'POST', url: '/v1/knowledge-base', headers: { ...account.headers, ...headers }, payload: payload ?? 'x' })
    t.ok(res.statusCode === 400, `malformed multipart (${headers['content-type']}): ${res.body}`)
    t.match(res.json(), { statusCode: 400, code: /malformed_multipart|validation_error/ })
  }

  const json = await ctx.app.inject({ method: 'POST', url: '/v1/knowledge-base', headers: account.headers, payload: { name: 'n', description: 'd' } })
  t.equal(json.statusCode, 415, 'a body-only create does not exist')
  t.match(json.json(), { code: 'multipart_required' })

  t.same(await storedCounts(ctx), { knowledge_bases: 0, files: 0, parts: 0, passages: 0 })
})

t.test('limits: size 413, count 413, types by content 415; nothing of the request is stored', async (t) => {
  const ctx = await setup(t, { KB_MAX_FILE_MB: '1', KB_MAX_FILES: '3', KB_MAX_FILES_PER_UPLOAD: '2' })
  const account = await createAccount(ctx.db)
  const big = Buffer.alloc(1024 * 1024 + 1, 'a')
  const tooBig = await create(ctx, account, [{ name: 'big.txt', content: big }])
  t.equal(tooBig.statusCode, 413)
  t.match(tooBig.json(), { code: 'file_too_large', message: 'big.txt is larger than 1 MB, the most a file may have' })
  t.equal(tooBig.headers.connection, 'close', 'the unread rest of the body ends the connection')
  const justRight = await create(ctx, account, [{ name: 'fits.txt', content: Buffer.alloc(1024 * 1024, 'a') }])
  t.equal(justRight.statusCode, 200, 'exactly the limit is accepted')
  await ctx.app.inject({ method: 'DELETE', url: `/v1/knowledge-base/${justRight.json()._id}`, headers: account.headers })

  const two = await create(ctx, account, [{ name: 'a.txt', content: 'a' }, { name: 'b.txt', content: 'b' }])
  t.equal(two.statusCode, 413)
  t.match(two.json(), { code: 'too_many_files', message: /created with one file/ })

  const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4a80000000049454e44ae426082', 'hex')
  const unsupported: Array<[FormFile, RegExp]> = [
    [{ name: 'logo.png', content: png }, /^logo\.png is image\/png; accepted are PDF, DOCX, TXT, Markdown, CSV or HTML files$/],
    [{ name: 'logo.txt', content: png }, /is image\/png/],
    [{ name: 'fake.pdf', content: 'just text pretending' }, /^fake\.pdf is not a PDF document by its content/],
    [{ name: 'data.json', content: '{"a":1}' }, /^\.json files are not supported/],
    [{ name: 'binary.txt', content: Buffer.from([0x68, 0x69, 0x00, 0x01, 0x02]) }, /^binary\.txt holds binary data of an unknown type/],
    [{ name: 'archive.docx', content: Buffer.from('504b0506' + '00'.repeat(18), 'hex') }, /is application\/zip/]
  ]
  for (const [file, message] of unsupported) {
    const res = await create(ctx, account, [file])
    t.equal(res.statusCode, 415, `${file.name}: ${res.body}`)
    t.match(res.json(), { code: 'unsupported_file_type', message }, file.name)
  }
  t.same(await storedCounts(ctx), { knowledge_bases: 0, files: 0, parts: 0, passages: 0 }, 'refused creates store nothing')

  const kb = await createOk(t, ctx, account, { name: 'first.txt', content: 'first' })
  const files = (names: string[]) => names.map((name) => ({ field: 'files', name, content: `text of ${name}` }))
  const threeInOne = await upload(ctx.app, `/v1/knowledge-base/${kb._id}/files`, account.headers, {}, files(['a.txt', 'b.txt', 'c.txt']))
  t.equal(threeInOne.statusCode, 413)
  t.match(threeInOne.json(), { code: 'too_many_files', message: 'one upload carries at most 2 files' })
  const secondRefused = await upload(ctx.app, `/v1/knowledge-base/${kb._id}/files`, account.headers, {}, [
    { field: 'files', name: 'fine.txt', content: 'fine' }, { field: 'files', name: 'image.png', content: png }
  ])
  t.equal(secondRefused.statusCode, 415)
  t.equal((await get(ctx, account, kb._id)).json().files.length, 1, 'the accepted first file of a refused request is not stored')
  t.equal((await upload(ctx.app, `/v1/knowledge-base/${kb._id}/files`, account.headers, {}, files(['a.txt']))).statusCode, 200)
  const overRoom = await upload(ctx.app, `/v1/knowledge-base/${kb._id}/files`, account.headers, {}, files(['b.txt', 'c.txt']))
  t.equal(overRoom.statusCode, 413)
  t.match(overRoom.json(), { code: 'too_many_files', message: 'a knowledge base holds at most 3 files; this one has room for 1 more' })
  t.equal((await upload(ctx.app, `/v1/knowledge-base/${kb._id}/files`, account.headers, {}, files(['b.txt']))).statusCode, 200)
  const full = await upload(ctx.app, `/v1/knowledge-base/${kb._id}/file`, account.headers, {}, [{ name: 'd.txt', content: 'd' }])
  t.equal(full.statusCode, 413)
  t.match(full.json(), { message: /room for 0 more/ })
  const twoOnFile = await upload(ctx.app, `/v1/knowledge-base/${kb._id}/files`, account.headers, {}, [{ name: 'x.txt', content: 'x' }])
  t.equal(twoOnFile.statusCode, 400, '/files wants its files in `files`')
  t.same((await storedCounts(ctx)).files, 3)
})

t.test('files are deleted with their passages; unknown ids delete nothing', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const account = await createAccount(ctx.db)
  const kb = await createOk(t, ctx, account, { name: 'aesop.docx', content: docx() })
  const added = await upload(ctx.app, `/v1/knowledge-base/${kb._id}/file`, account.headers, {}, [{ name: 'declaration.html', content: fixture('declaration.html') }])
  t.equal(added.statusCode, 200)
  const read = await whenRead(t, ctx, account, kb._id)
  const [fables, declaration] = read.files
  t.ok((await search(ctx, account, kb._id, 'tortoise hare race')).some((h) => h.file_id === fables._id))

  const del = (fileIds: unknown) => ctx.app.inject({ method: 'DELETE', url: `/v1/knowledge-base/${kb._id}/file`, headers: account.headers, payload: { file_ids: fileIds } })
  t.equal((await del([])).statusCode, 400, 'file_ids must not be empty')
  t.equal((await del(['nope'])).statusCode, 400, 'malformed file ids are 400')
  const unknown = await del([fables._id, '65a0f0000000000000000001'])
  t.equal(unknown.statusCode, 404)
  t.match(unknown.json(), { message: 'file 65a0f0000000000000000001 of knowledge base ' + kb._id + ' not found' })
  t.equal((await get(ctx, account, kb._id)).json().files.length, 2, 'nothing was deleted')

  const res = await del([fables._id, fables._id])
  t.equal(res.statusCode, 200)
  t.same(res.json().files.map((f: { _id: string }) => f._id), [declaration._id], 'answers the updated knowledge base')
  t.same(await search(ctx, account, kb._id, 'tortoise hare race'), [], "a deleted file's passages are gone from search")
  t.ok((await search(ctx, account, kb._id, 'unalienable rights')).length > 0)
  t.same(await ctx.db.selectFrom('knowledge_base_file_parts').select('file_id').where('file_id', '=', fables._id).execute(), [], 'and so are its bytes')
})

t.test('files that cannot be read fail with the reason', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const account = await createAccount(ctx.db)
  const kb = await createOk(t, ctx, account, { name: 'broken.pdf', content: Buffer.from('%PDF-1.4\nthis is no PDF at all\n%%EOF\n') })
  await upload(ctx.app, `/v1/knowledge-base/${kb._id}/files`, account.headers, {}, [
    { field: 'files', name: 'blank.pdf', content: makePdf(['']) },
    { field: 'files', name: 'broken.docx', content: docx().subarray(0, -60) },
    { field: 'files', name: 'spaces.txt', content: '   \n\n   ' }
  ])
  const read = await whenRead(t, ctx, account, kb._id)
  t.match(read.files, [
    { file_name: 'broken.pdf', status: 'failed', error: /^the PDF cannot be read/, passage_count: 0 },
    { file_name: 'blank.pdf', status: 'failed', error: /^no text found; a scanned PDF holds only images/ },
    { file_name: 'broken.docx', status: 'failed', error: /^the DOCX cannot be read/ },
    { file_name: 'spaces.txt', status: 'failed', error: 'no text found' }
  ])
})

t.test("another account's knowledge bases, files and agents are 404; malformed ids 400", async (t) => {
  const ctx = await setup(t)
  const owner = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)
  const kb = await createOk(t, ctx, owner, { name: 'a.txt', content: 'private text' })
  const fileId = kb.files[0]._id
  const otherKb = await createOk(t, ctx, other, { name: 'b.txt', content: 'their text' })
  const otherAgent = await createAgent(ctx.app, other)

  const asOther = [
    await get(ctx, other, kb._id),
    await ctx.app.inject({ method: 'DELETE', url: `/v1/knowledge-base/${kb._id}`, headers: other.headers }),
    await upload(ctx.app, `/v1/knowledge-base/${kb._id}/file`, other.headers, {}, [{ name: 'x.txt', content: 'x' }]),
    await upload(ctx.app, `/v1/knowledge-base/${kb._id}/files`, other.headers, {}, [{ field: 'files', name: 'x.txt', content: 'x' }]),
    await ctx.app.inject({ method: 'DELETE', url: `/v1/knowledge-base/${kb._id}/file`, headers: other.headers, payload: { file_ids: [fileId] } }),
    await ctx.app.inject({ method: 'PUT', url: `/v1/knowledge-base/${kb._id}/agents`, headers: other.headers, payload: { agent_ids: [] } }),
    await ctx.app.inject({ method: 'GET', url: `/v1/knowledge-base/${kb._id}/search?q=private`, headers: other.headers })
  ]
  for (const res of asOther) {
    t.equal(res.statusCode, 404, res.body)
    t.match(res.json(), { code: 'not_found', message: `knowledge base ${kb._id} not found` })
  }
  const otherFile = await ctx.app.inject({ method: 'DELETE', url: `/v1/knowledge-base/${kb._id}/file`, headers: owner.headers, payload: { file_ids: [otherKb.files[0]._id] } })
  t.equal(otherFile.statusCode, 404, "another knowledge base's file is not one of this one's")
  const foreignAgent = await ctx.app.inject({ method: 'PUT', url: `/v1/knowledge-base/${kb._id}/agents`, headers: owner.headers, payload: { agent_ids: [otherAgent._id] } })
  t.equal(foreignAgent.statusCode, 404)
  t.match(foreignAgent.json(), { message: `agent ${otherAgent._id} not found` })
  const foreignSearch = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/agents/${otherAgent._id}/knowledge-search`, headers: owner.headers, payload: { query: 'text' } })
  t.equal(foreignSearch.statusCode, 404)
  t.same((await ctx.app.inject({ method: 'GET', url: '/v1/knowledge-base/list', headers: other.headers })).json().map((k: KnowledgeBase) => k._id), [otherKb._id])

  const stillThere = (await get(ctx, owner, kb._id)).json() as KnowledgeBase
  t.equal(stillThere.files.length, 1, 'nothing changed')

  for (const url of ['/v1/knowledge-base/nope', '/v1/knowledge-base/nope/search?q=x']) {
    const res = await ctx.app.inject({ method: 'GET', url, headers: owner.headers })
    t.equal(res.statusCode, 400, url)
    t.match(res.json(), { code: 'invalid_id', message: 'params.id must be a 24-character hexadecimal id' })
  }
  const malformedUpload = await upload(ctx.app, '/v1/knowledge-base/123/file', owner.headers, {}, [{ name: 'x.txt', content: 'x' }])
  t.equal(malformedUpload.statusCode, 400)
  const malformedAgent = await ctx.app.inject({ method: 'PUT', url: `/v1/knowledge-base/${kb._id}/agents`, headers: owner.headers, payload: { agent_ids: ['x'] } })
  t.match(malformedAgent.json(), { statusCode: 400, message: 'body.agent_ids.0 must be a 24-character hexadecimal id' })
  const noKey = await ctx.app.inject({ method: 'GET', url: '/v1/knowledge-base/list' })
  t.equal(noKey.statusCode, 401)
})

t.test('customers and workspaces: create, filter, scope, and they cannot be deleted while they own one', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)
  const customer = (await ctx.app.inject({ method: 'POST', url: '/v1/customer', headers: account.headers, payload: { customer_name: 'Dental Co' } })).json()
  const workspace = (await ctx.app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: 'Clinics' } })).json()
  const theirs = (await ctx.app.inject({ method: 'POST', url: '/v1/customer', headers: other.headers, payload: { customer_name: 'Theirs' } })).json()

  const owned = await create(ctx, account, [{ name: 'a.txt', content: 'a' }], FORM, `?customer_id=${customer._id}&workspace_id=${workspace._id}`)
  t.equal(owned.statusCode, 200, owned.body)
  t.match(owned.json(), { customer_id: customer._id, workspace_id: workspace._id })
  const plain = await createOk(t, ctx, account, { name: 'b.txt', content: 'b' })
  const foreign = await create(ctx, account, [{ name: 'c.txt', content: 'c' }], FORM, `?customer_id=${theirs._id}`)
  t.equal(foreign.statusCode, 404)
  t.match(foreign.json(), { message: 'customer not found' })

  const list = async (query: string) => (await ctx.app.inject({ method: 'GET', url: `/v1/knowledge-base/list${query}`, headers: account.headers })).json()
  t.same((await list('')).map((k: KnowledgeBase) => k._id), [owned.json()._id, plain._id])
  t.same((await list(`?customer_id=${customer._id}`)).map((k: KnowledgeBase) => k._id), [owned.json()._id])
  t.same((await list(`?workspace_id=${workspace._id}`)).map((k: KnowledgeBase) => k._id), [owned.json()._id])
  t.same((await list('?limit=1&skip=1')).map((k: KnowledgeBase) => k._id), [plain._id])
  t.equal((await ctx.app.inject({ method: 'GET', url: `/v1/knowledge-base/list?workspace_id=${theirs._id}`, headers: account.headers })).statusCode, 404)

  const scoped = await upload(ctx.app, `/v1/knowledge-base/${plain._id}/files?customer_id=${customer._id}`, account.headers, {}, [{ field: 'files', name: 'd.txt', content: 'd' }])
  t.equal(scoped.statusCode, 404, 'with customer_id the knowledge base must be that customer\'s')
  const inScope = await upload(ctx.app, `/v1/knowledge-base/${owned.json()._id}/files?customer_id=${customer._id}`, account.headers, {}, [{ field: 'files', name: 'd.txt', content: 'd' }])
  t.equal(inScope.statusCode, 200)

  const deleteCustomer = await ctx.app.inject({ method: 'DELETE', url: `/v1/customer/${customer._id}`, headers: account.headers })
  t.equal(deleteCustomer.statusCode, 409)
  t.match(deleteCustomer.json(), { message: /1 knowledge base/ })
  const deleteWorkspace = await ctx.app.inject({ method: 'DELETE', url: `/v1/workspaces/${workspace._id}`, headers: account.headers })
  t.equal(deleteWorkspace.statusCode, 409)
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/knowledge-base/${owned.json()._id}`, headers: account.headers })).statusCode, 200)
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/customer/${customer._id}`, headers: account.headers })).statusCode, 204)
})

t.test("agents' knowledge_base and knowledge bases' agent_names agree both ways", async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const ada = await createAgent(ctx.app, account, { agent_name: 'Ada' })
  const bob = await createAgent(ctx.app, account, { agent_name: 'Bob' })
  const first = await createOk(t, ctx, account, { name: 'a.txt', content: 'a' })
  const second = await createOk(t, ctx, account, { name: 'b.txt', content: 'b' })
  const agentKbs = async (id: string) => (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${id}`, headers: account.headers })).json().knowledge_base
  const assign = async (kbId: string, agentIds: string[]) => {
    const res = await ctx.app.inject({ method: 'PUT', url: `/v1/knowledge-base/${kbId}/agents`, headers: account.headers, payload: { agent_ids: agentIds } })
    t.equal(res.statusCode, 200, res.body)
    return res.json() as KnowledgeBase
  }

  t.same(await agentKbs(ada._id), [])
  t.match(await assign(first._id, [bob._id, ada._id, ada._id.toUpperCase()]), { agent_names: ['Ada', 'Bob'], agent_ids: [ada._id, bob._id] })
  await assign(second._id, [ada._id])
  t.same(await agentKbs(ada._id), [first._id, second._id])
  t.same(await agentKbs(bob._id), [first._id])
  const listed = (await ctx.app.inject({ method: 'GET', url: '/v1/agent/list', headers: account.headers })).json()
  t.same(listed.map((a: { knowledge_base: string[] }) => a.knowledge_base), [[first._id, second._id], [first._id]], 'the agent list agrees')
  const patched = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${bob._id}`, headers: account.headers, payload: { agent_name: 'Bobby' } })
  t.same(patched.json().knowledge_base, [first._id])
  t.same((await get(ctx, account, first._id)).json().agent_names, ['Ada', 'Bobby'], 'agent_names follow a rename')

  t.match(await assign(first._id, [bob._id]), { agent_names: ['Bobby'] }, 'the list is replaced')
  t.same(await agentKbs(ada._id), [second._id])
  const unknown = await ctx.app.inject({ method: 'PUT', url: `/v1/knowledge-base/${first._id}/agents`, headers: account.headers, payload: { agent_ids: [ada._id, '65a0f0000000000000000001'] } })
  t.equal(unknown.statusCode, 404)
  t.same((await get(ctx, account, first._id)).json().agent_names, ['Bobby'], 'a refused replacement changes nothing')
  t.equal((await ctx.app.inject({ method: 'PUT', url: `/v1/knowledge-base/${first._id}/agents`, headers: account.headers, payload: {} })).statusCode, 400, 'agent_ids is required')

  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/agent/${bob._id}`, headers: account.headers })).statusCode, 204)
  t.match((await get(ctx, account, first._id)).json(), { agent_names: [], agent_ids: [] }, 'a deleted agent leaves agent_names')
  const deleted = await ctx.app.inject({ method: 'DELETE', url: `/v1/knowledge-base/${second._id}`, headers: account.headers })
  t.match(deleted.json(), { _id: second._id, agent_names: ['Ada'] }, 'a delete answers the knowledge base as it was')
  t.same(await agentKbs(ada._id), [], "a deleted knowledge base leaves the agents' lists")
  t.equal((await get(ctx, account, second._id)).statusCode, 404)
  t.match(await assign(first._id, []), { agent_names: [] })
})

t.test('the runtime searches across an agent\'s knowledge bases: recall@5 on the question set', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Historian' })
  const loner = await createAgent(ctx.app, account, { agent_name: 'Loner' })
  const documents: FormFile[] = [
    { name: 'constitution.pdf', content: pdf() },
    { name: 'aesop.docx', content: docx() },
    { name: 'declaration.html', content: fixture('declaration.html') }
  ]
  const kbIds: string[] = []
  for (const document of documents) {
    const kb = await createOk(t, ctx, account, document, { name: document.name, description: 'one public-domain document' })
    const read = await whenRead(t, ctx, account, kb._id)
    t.equal(read.files[0].status, 'ready', document.name)
    kbIds.push(kb._id)
    await ctx.app.inject({ method: 'PUT', url: `/v1/knowledge-base/${kb._id}/agents`, headers: account.headers, payload: { agent_ids: [agent._id] } })
  }
  const runtimeSearch = async (agentId: string, query: string, limit?: number) => {
    const res = await ctx.app.inject({ method: 'POST', url: `/v1/runtime/agents/${agentId}/knowledge-search`, headers: account.headers, payload: { query, limit } })
    if (res.statusCode !== 200) t.fail(res.body)
    return res.json().results as Hit[]
  }

  const questions = JSON.parse(fixture('questions.json')) as Array<{ q: string, file: string, answer: string }>
  const misses: string[] = []
  let first = 0
  for (const { q, file, answer } of questions) {
    const hits = await runtimeSearch(agent._id, q)
    t.ok(hits.length <= 5)
    const rank = hits.findIndex((h) => h.file_name === file && h.content.includes(answer))
    if (rank === 0) first++
    if (rank === -1) misses.push(`${q} -> ${hits.map((h) => `${h.file_name}#${h.position}`).join(', ')}`)
  }
  const recall = (questions.length - misses.length) / questions.length
  const passages = (await ctx.db.selectFrom('knowledge_base_passages').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n
  t.comment(`recall@5 over ${questions.length} questions on 3 documents (${passages} passages): ${recall.toFixed(3)}; recall@1 ${(first / questions.length).toFixed(3)}` +
    (misses.length > 0 ? '; missed: ' + misses.join(' | ') : ''))
  t.ok(recall >= 0.9, `recall@5 ${recall.toFixed(3)}`)

  const across = await runtimeSearch(agent._id, 'consent', 10)
  t.ok(new Set(across.map((h) => h.knowledge_base_id)).size >= 2, 'results come from several knowledge bases')
  t.same(await runtimeSearch(loner._id, 'senator'), [], 'an agent without knowledge bases finds nothing')
  t.equal((await ctx.app.inject({ method: 'POST', url: `/v1/runtime/agents/${agent._id}/knowledge-search`, headers: account.headers, payload: { query: '' } })).statusCode, 400)
  t.equal((await ctx.app.inject({ method: 'POST', url: `/v1/runtime/agents/${agent._id}/knowledge-search`, headers: account.headers, payload: { query: 'x', limit: 51 } })).statusCode, 400)

  await ctx.app.inject({ method: 'PUT', url: `/v1/knowledge-base/${kbIds[0]}/agents`, headers: account.headers, payload: { agent_ids: [] } })
  t.ok((await runtimeSearch(agent._id, 'senator thirty years')).every((h) => h.file_name !== 'constitution.pdf'), 'an unassigned knowledge base is no longer searched')
})

t.test('each knowledge base is searched in its language', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const account = await createAccount(ctx.db)
  const german = await createOk(t, ctx, account, { name: 'praxis.txt', content: 'Die Praxis ist montags geschlossen. Termine vereinbaren Sie telefonisch.' }, { ...FORM, language: 'de-DE' })
  t.equal(german.language, 'de-DE')
  const other = await createOk(t, ctx, account, { name: 'x.txt', content: 'Kimi no na wa. The running dogs ran.' }, { ...FORM, language: 'tlh' })
  await whenRead(t, ctx, account, german._id)
  await whenRead(t, ctx, account, other._id)
  t.equal((await search(ctx, account, german._id, 'Wann ist die Praxis geschlossen?'))[0]?.file_name, 'praxis.txt')
  t.ok((await search(ctx, account, german._id, 'Termin')).length === 1, 'German stemming: Termin finds Termine')
  t.ok((await search(ctx, account, other._id, 'dogs')).length === 1)
  t.same(await search(ctx, account, other._id, 'dog'), [], 'without a dictionary (simple) words are not stemmed')
  const stored = await ctx.db.selectFrom('knowledge_bases').select(['id', 'search_config']).orderBy('created_at').execute()
  t.same(stored.map((s) => s.search_config), ['german', 'simple'])
})

t.test('the OpenAPI document describes the upload forms', async (t) => {
  const ctx = await setup(t)
  const doc = (await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json()
  const create = doc.paths['/v1/knowledge-base'].post
  const schema = create.requestBody.content['multipart/form-data'].schema
  t.match(schema.properties, { file: { type: 'string', format: 'binary' }, name: { maxLength: 100 }, description: { maxLength: 300 }, folder: { maxLength: 50 } })
  t.same(schema.required.sort(), ['description', 'file', 'name'])
  t.ok(create.responses['413'] && create.responses['415'])
  t.match(doc.paths['/v1/knowledge-base/{id}/files'].post.requestBody.content['multipart/form-data'].schema.properties.files, { type: 'array' })
  t.ok(doc.paths['/v1/runtime/agents/{id}/knowledge-search'].post)
})
