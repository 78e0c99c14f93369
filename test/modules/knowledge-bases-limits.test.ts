import t, { type Test } from 'tap'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { docxParts, fixture, makeDocx, makePdf, makeZip, paragraphs, upload, type FormFile } from '../helpers/documents.ts'
import { LimitExceeded, runIsolated } from '../../src/modules/knowledge-bases/isolated.ts'
import { poll } from '../helpers/poll.ts'

type File = { file_name: string, status: string, error?: string, passage_count: number }

const TASK = new URL('../fixtures/workers/task.ts', import.meta.url)

/** Uploads the files into a new knowledge base and polls until every one is read or failed. */
async function read (t: Test, ctx: TestContext, account: Account, files: FormFile[]): Promise<File[]> {
  const [first, ...rest] = files
  const res = await upload(ctx.app, '/v1/knowledge-base', account.headers, { name: 'Limits', description: 'Files past a limit' }, [first])
  t.equal(res.statusCode, 200, res.body)
  if (rest.length > 0) {
    const added = await upload(ctx.app, `/v1/knowledge-base/${res.json()._id}/files`, account.headers, {}, rest.map((f) => ({ ...f, field: 'files' })))
    t.equal(added.statusCode, 200, added.body)
  }
  const kb = await poll(async () => (await ctx.app.inject({ method: 'GET', url: `/v1/knowledge-base/${res.json()._id}`, headers: account.headers })).json(),
    (kb) => kb.files.every((f: File) => f.status === 'ready' || f.status === 'failed'),
    { timeoutMs: 30_000, intervalMs: 50, message: (kb) => `files not read: ${JSON.stringify(kb.files)}` })
  return kb.files
}

const PARAGRAPH = '<w:p><w:r><w:t>All work and no play makes Jack a dull boy.</w:t></w:r></w:p>'

/** A DOCX of about 60 KB whose document.xml unpacks to 20 MB of paragraphs. */
function bomb (): Buffer {
  return makeZip(docxParts(PARAGRAPH.repeat(Math.ceil(20 * 1024 * 1024 / PARAGRAPH.length))).map((part) => ({ ...part, deflate: true })))
}

/** A DOCX whose document.xml declares 1,000 bytes and unpacks to 2 MB: small enough to pass every declared limit. */
function liar (): Buffer {
  return makeZip(docxParts(PARAGRAPH.repeat(Math.ceil(2 * 1024 * 1024 / PARAGRAPH.length))).map((part) =>
    ({ ...part, deflate: true, declaredSize: part.name === 'word/document.xml' ? 1000 : undefined })))
}

t.test('a decompression bomb and a DOCX whose sizes lie end failed with the reason; a normal DOCX and PDF are read', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const account = await createAccount(ctx.db)
  const files = await read(t, ctx, account, [
    { name: 'bomb.docx', content: bomb() },
    { name: 'liar.docx', content: liar() },
    { name: 'fables.docx', content: makeDocx(paragraphs(fixture('aesop.txt'))) },
    { name: 'constitution.pdf', content: makePdf(paragraphs(fixture('constitution.txt'))) }
  ])
  t.ok(bomb().length < 100 * 1024, 'the bomb is small')
  t.match(files, [
    { file_name: 'bomb.docx', status: 'failed', error: /^the DOCX unpacks to \d+ times its size, more than the 100 times allowed/, passage_count: 0 },
    { file_name: 'liar.docx', status: 'failed', error: 'the DOCX cannot be read: word/document.xml unpacks to more than the 1000 bytes it declares' },
    { file_name: 'fables.docx', status: 'ready' },
    { file_name: 'constitution.pdf', status: 'ready' }
  ])
  t.equal(await passagesOf(ctx, 'bomb.docx'), 0, 'nothing of the bomb is stored')
})

t.test('the entries, unpacked size and passages of a file are bounded by configuration', async (t) => {
  const ctx = await setup(t, { KB_ZIP_MAX_ENTRIES: '2', KB_MAX_PASSAGES: '3' }, { workers: true })
  const account = await createAccount(ctx.db)
  const files = await read(t, ctx, account, [
    { name: 'fables.docx', content: makeDocx(['Once upon a time']) },
    { name: 'long.txt', content: Array.from({ length: 10 }, (_, i) => `Paragraph ${i} ${'word '.repeat(150)}`).join('\n\n') },
    { name: 'short.txt', content: 'A short note.' }
  ])
  t.match(files, [
    { file_name: 'fables.docx', status: 'failed', error: 'the DOCX holds 3 files, more than the 2 allowed' },
    { file_name: 'long.txt', status: 'failed', error: /^the file yields 10 passages, more than the 3 a file may have; split it into smaller files$/ },
    { file_name: 'short.txt', status: 'ready', passage_count: 1 }
  ])

  const small = await setup(t, { KB_ZIP_MAX_UNCOMPRESSED_MB: '1' }, { workers: true })
  const owner = await createAccount(small.db)
  const big = Array.from({ length: 8000 }, (_, i) => `Paragraph ${i} tells of ${Math.random().toString(36).repeat(10)}`)
  t.match(await read(t, small, owner, [{ name: 'big.docx', content: makeZip(docxParts(big.map((p) => `<w:p><w:r><w:t>${p}</w:t></w:r></w:p>`).join('')).map((part) => ({ ...part, deflate: true }))) }]), [
    { file_name: 'big.docx', status: 'failed', error: /^the DOCX unpacks to [2-3] MB, more than the 1 MB allowed$/ }
  ])
})

t.test('reading a file that takes longer than KB_EXTRACT_TIMEOUT_MS ends it failed with the reason', async (t) => {
  const ctx = await setup(t, { KB_EXTRACT_TIMEOUT_MS: '1' }, { workers: true })
  const account = await createAccount(ctx.db)
  t.match(await read(t, ctx, account, [{ name: 'constitution.pdf', content: makePdf(paragraphs(fixture('constitution.txt'))) }]), [
    { file_name: 'constitution.pdf', status: 'failed', error: 'the file cannot be read: reading it took longer than 0.001 seconds' }
  ])
})

t.test('runIsolated answers the worker\'s message, and ends a worker past its memory or time limit', async (t) => {
  const limits = { memoryMb: 256, timeoutMs: 20_000 }
  t.equal(await runIsolated(TASK, { kind: 'answer', value: 21 }, limits), 42)
  await t.rejects(runIsolated(TASK, { kind: 'allocate' }, { ...limits, memoryMb: 32 }), new LimitExceeded('reading it needed more than 32 MB of memory'))
  await t.rejects(runIsolated(TASK, { kind: 'hang' }, { ...limits, timeoutMs: 200 }), new LimitExceeded('reading it took longer than 0.2 seconds'))
  const broken = runIsolated(TASK, { kind: 'throw' }, limits)
  await t.rejects(broken, { message: 'the task broke' })
  t.notOk(await broken.catch((err: Error) => err instanceof LimitExceeded), 'an error of the task is not a limit: the job retries it')
})

async function passagesOf (ctx: TestContext, fileName: string): Promise<number> {
  const row = await ctx.db.selectFrom('knowledge_base_passages as p').innerJoin('knowledge_base_files as f', 'f.id', 'p.file_id')
    .select((eb) => eb.fn.countAll<number>().as('n')).where('f.file_name', '=', fileName).executeTakeFirstOrThrow()
  return row.n
}
