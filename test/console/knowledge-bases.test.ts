import t, { type Test } from 'tap'
import { newId } from '../../src/db/ids.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { ConsoleClient, createConsoleUser, csrfOf, followRefusal, PASSWORD } from '../helpers/console-client.ts'
import { upload, type FormFile } from '../helpers/documents.ts'
import { poll } from '../helpers/poll.ts'

const HOURS = 'The front desk opens at eight in the morning.\n\nParking is free for visitors in the blue garage on Elm Street.\n'
const FORM = { name: 'Front desk', description: 'What callers ask the front desk', folder: 'clinic', language: '' }
const TEXT: FormFile = { name: 'hours.txt', content: HOURS, type: 'text/plain' }

async function signedIn (ctx: TestContext) {
  const user = await createConsoleUser(ctx.db)
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user.email, PASSWORD)
  const { key } = await createApiKey(ctx.db, user.id, { name: 'test' })
  const account: Account = { user, key, headers: { 'x-api-key': key } }
  return { user, browser, account }
}

/** Posts a multipart form as the browser does: the page's CSRF token first (unless `token` says otherwise), then fields, then files. */
async function send (browser: ConsoleClient, url: string, fields: Record<string, string>, files: FormFile[], token?: string | null, filesFirst = false) {
  const csrf: Record<string, string> = token === null ? {} : { csrf_token: token ?? csrfOf((await browser.get('/knowledge-bases')).body) }
  return await upload(browser.app, url, { cookie: browser.cookieHeader }, { ...csrf, ...fields }, files, filesFirst)
}

async function createThroughForm (t: Test, browser: ConsoleClient, fields: Record<string, string> = FORM, file: FormFile = TEXT): Promise<string> {
  const res = await send(browser, '/knowledge-bases', fields, [file])
  const id = /^\/knowledge-bases\/([0-9a-f]{24})\?done=created$/.exec(res.headers.location as string ?? '')?.[1]
  if (res.statusCode !== 303 || id === undefined) throw new Error(`not created: ${res.statusCode}\n${res.body}`)
  t.pass(`created ${fields.name}`)
  return id
}

/** A refused create (Post/Redirect/Get): a 303 to the form's page with the draft, and that page. */
async function refusedCreate (t: Test, browser: ConsoleClient, fields: Record<string, string>, files: FormFile[]) {
  const res = await send(browser, '/knowledge-bases', fields, files)
  t.equal(res.statusCode, 303, 'refused: back to the form')
  const location = String(res.headers.location)
  t.match(location, /^\/knowledge-bases\/new\?draft=[0-9a-f]{24}#form-problems$/)
  const url = location.replace(/#.*/, '')
  const page = await browser.get(url)
  t.equal(page.statusCode, 200)
  return { res, url, body: page.body }
}

/** Polls the page's JSON until no file is being read. */
async function whenRead (browser: ConsoleClient, id: string) {
  const state = await poll(async () => (await browser.get(`/knowledge-bases/${id}/files.json`)).json(), (s) => s.reading === false, { intervalMs: 50, message: (s) => `still reading: ${JSON.stringify(s)}` })
  return state as { reading: boolean, files: Array<{ id: string, state: string, passages: number }> }
}

async function stored (ctx: TestContext) {
  const count = async (table: 'knowledge_bases' | 'knowledge_base_files' | 'knowledge_base_file_parts') =>
    (await ctx.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n
  return { knowledge_bases: await count('knowledge_bases'), files: await count('knowledge_base_files'), parts: await count('knowledge_base_file_parts') }
}
const NOTHING = { knowledge_bases: 0, files: 0, parts: 0 }

t.test('create with a text file, see it read, search it, add and remove files, delete it', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const { browser, account } = await signedIn(ctx)

  const empty = await browser.get('/knowledge-bases')
  t.equal(empty.statusCode, 200)
  t.match(empty.body, /<a href="\/knowledge-bases" aria-current="page">Knowledge bases<\/a>/)
  t.match(empty.body, /No knowledge bases yet/)
  const form = await browser.get('/knowledge-bases/new')
  t.equal(form.statusCode, 200)
  t.match(form.body, 'enctype="multipart/form-data"')
  t.match(form.body, /<form method="post" action="\/knowledge-bases" enctype="multipart\/form-data" class="stack wide">\s*<input type="hidden" name="csrf_token"/, 'the token is the first field')
  for (const field of ['name', 'description', 'folder', 'language', 'file']) t.match(form.body, `<label for="${field}">`)

  const id = await createThroughForm(t, browser)
  const page = await browser.get(`/knowledge-bases/${id}?done=created`)
  t.equal(page.statusCode, 200)
  t.match(page.body, /<h1>Front desk<\/h1>/)
  t.match(page.body, /Created\./)
  t.match(page.body, /<td>hours\.txt<\/td><td>txt<\/td><td>\d+ B<\/td>/)
  t.match(page.headers['content-security-policy'], /connect-src 'self'$/, 'the page may ask for its files\' states')

  const read = await whenRead(browser, id)
  t.match(read.files, [{ state: 'Ready', passages: Number }])
  const ready = await browser.get(`/knowledge-bases/${id}`)
  t.match(ready.body, /<td class="file-state">Ready<\/td>/)
  t.notMatch(ready.body, /data-poll|knowledge-bases\.js|id="reading"/, 'nothing left to read: no polling')
  const kb = (await ctx.app.inject({ method: 'GET', url: `/v1/knowledge-base/${id}`, headers: account.headers })).json()
  t.match(kb, { knowledge_base_name: 'Front desk', knowledge_base_description: FORM.description, folder: 'clinic', language: 'en', workspace_id: null, files: [{ file_name: 'hours.txt', status: 'ready' }] })

  const list = await browser.get('/knowledge-bases')
  t.match(list.body, `<td><a href="/knowledge-bases/${id}">Front desk</a></td><td>What callers ask the front desk</td><td>clinic</td><td>1</td><td>1 ready</td>`)

  const found = await browser.get(`/knowledge-bases/${id}?q=${encodeURIComponent('Where can visitors park?')}`)
  t.equal(found.statusCode, 200)
  t.match(found.body, /<mark>Parking<\/mark> is free for <mark>visitors<\/mark> in the blue garage/)
  t.match(found.body, 'value="Where can visitors park?"')
  const nothing = await browser.get(`/knowledge-bases/${id}?q=zeppelin`)
  t.match(nothing.body, /No passage matches “zeppelin”/)
  const long = await browser.get(`/knowledge-bases/${id}?q=${'a'.repeat(1001)}`)
  t.equal(long.statusCode, 400)
  t.match(long.body, /<p id="q-error" class="field-error">Search for at most 1000 characters\.<\/p>/)
  t.equal((await browser.get(`/knowledge-bases/${id}?q=a&q=b`)).statusCode, 400, 'a repeated query: 400, not 500')

  const added = await send(browser, `/knowledge-bases/${id}/files`, {}, [
    { field: 'files', name: 'prices.md', content: '# Prices\n\nA check-up costs forty dollars.\n' },
    { field: 'files', name: 'staff.csv', content: 'name,role\nAda,nurse\n' }
  ])
  t.equal(added.statusCode, 303, added.body)
  t.equal(added.headers.location, `/knowledge-bases/${id}?done=added#files-title`, 'back to the Files section')
  const three = await whenRead(browser, id)
  t.same(three.files.map((f) => f.state), ['Ready', 'Ready', 'Ready'])
  t.match((await browser.get(`/knowledge-bases/${id}?q=check-up`)).body, /prices\.md, passage 1/)

  const prices = three.files[1].id
  const removed = await browser.submit(`/knowledge-bases/${id}`, `/knowledge-bases/${id}/files/${prices}/delete`, {})
  t.equal(removed.statusCode, 303)
  t.equal(removed.headers.location, `/knowledge-bases/${id}?done=removed#files-title`)
  const after = await browser.get(`/knowledge-bases/${id}?done=removed`)
  t.notMatch(after.body, 'prices.md')
  t.match(after.body, /<h2 id="files-title">Files<\/h2>\n<p class="notice success" role="status">The file is removed/, 'said in the Files section')
  t.match((await browser.get(`/knowledge-bases/${id}?q=check-up`)).body, /No passage matches/)
  const again = await browser.submit(`/knowledge-bases/${id}`, `/knowledge-bases/${id}/files/${prices}/delete`, {})
  t.equal(again.statusCode, 404, 'a removed file: 404')

  const deleted = await browser.submit(`/knowledge-bases/${id}`, `/knowledge-bases/${id}/delete`, {})
  t.equal(deleted.statusCode, 303)
  t.equal(deleted.headers.location, '/knowledge-bases?deleted=1')
  t.match((await browser.get('/knowledge-bases?deleted=1')).body, /The knowledge base is deleted\.[\s\S]*No knowledge bases yet/)
  t.same(await stored(ctx), NOTHING, 'files and their bytes went with it')
  t.equal((await browser.get(`/knowledge-bases/${id}`)).statusCode, 404)
})

t.test('names, file names and snippets are shown as text, never as markup', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const { browser } = await signedIn(ctx)
  const id = await createThroughForm(t, browser, { ...FORM, name: 'Sales <b>', description: '<img src=x onerror=alert(1)>', folder: '"><script>' },
    // ts_headline drops what looks like a tag from a snippet; comparison signs and quotes stay, to be escaped.
    { name: '<img src=x onerror=alert(2)>.txt', content: 'Tulips bloom in April when 1 < 2 & "sun" > rain.\n' })
  await whenRead(browser, id)
  const pages = [await browser.get('/knowledge-bases'), await browser.get(`/knowledge-bases/${id}?q=tulips+april`)]
  for (const page of pages) {
    t.equal(page.statusCode, 200)
    t.match(page.body, 'Sales &lt;b&gt;')
    t.notMatch(page.body, /<script>|<img/, 'no markup of the user\'s')
  }
  const search = pages[1].body
  t.match(search, '<td>&lt;img src=x onerror=alert(2)&gt;.txt</td>')
  t.match(search, /<mark>Tulips<\/mark> bloom in <mark>April<\/mark> when 1 &lt; 2 &amp; &quot;sun&quot; &gt; rain/, 'the snippet escaped, the matches marked')
})

t.test('uploads without the CSRF token as their first field are refused before anything is stored', async (t) => {
  const ctx = await setup(t)
  const { browser } = await signedIn(ctx)
  const token = csrfOf((await browser.get('/knowledge-bases/new')).body)

  for (const [what, res] of [
    ['no token', await send(browser, '/knowledge-bases', FORM, [TEXT], null)],
    ['a wrong token', await send(browser, '/knowledge-bases', FORM, [TEXT], 'x'.repeat(token.length))],
    ['the token after the file', await send(browser, '/knowledge-bases', FORM, [TEXT], token, true)],
    ['the token after another field', await upload(ctx.app, '/knowledge-bases', { cookie: browser.cookieHeader }, { name: 'x', csrf_token: token }, [TEXT])],
    ['no session', await upload(ctx.app, '/knowledge-bases', {}, { csrf_token: token, ...FORM }, [TEXT])],
    ['a cross-site Origin', await upload(ctx.app, '/knowledge-bases', { cookie: browser.cookieHeader, origin: 'https://evil.example.test' }, { csrf_token: token, ...FORM }, [TEXT])]
  ] as const) {
    t.equal(res.statusCode, 403, what)
    t.match(res.headers['content-type'], /^text\/html/)
    if (what !== 'a cross-site Origin') t.equal(res.headers.connection, 'close', 'the unread body: the connection closes')
  }
  t.same(await stored(ctx), NOTHING)

  const id = await createThroughForm(t, browser)
  const before = await stored(ctx)
  const add = await send(browser, `/knowledge-bases/${id}/files`, {}, [{ ...TEXT, field: 'files' }], 'wrong')
  t.equal(add.statusCode, 403)
  const late = await send(browser, `/knowledge-bases/${id}/files`, {}, [{ ...TEXT, field: 'files' }], token, true)
  t.equal(late.statusCode, 403)
  t.same(await stored(ctx), before, 'no file added')

  // The urlencoded forms: the pages' own check.
  for (const action of [`/knowledge-bases/${id}/delete`]) {
    t.equal((await browser.post(action, {})).statusCode, 403, `${action} without a token`)
    t.equal((await browser.post(action, { csrf_token: 'wrong' })).statusCode, 403, `${action} with a wrong token`)
  }
  t.equal((await stored(ctx)).knowledge_bases, 1)
  const urlencoded = await browser.post('/knowledge-bases', { csrf_token: token, ...FORM })
  t.equal(urlencoded.statusCode, 415, 'a create without a file part (urlencoded)')
  t.equal((await stored(ctx)).knowledge_bases, 1)
  const elsewhere = await upload(ctx.app, '/keys', { cookie: browser.cookieHeader }, { csrf_token: token, name: 'multipart' }, [])
  t.equal(elsewhere.statusCode, 415, 'multipart is parsed by the knowledge bases\' routes alone')
  const removal = await upload(ctx.app, `/knowledge-bases/${id}/delete`, { cookie: browser.cookieHeader }, { csrf_token: token }, [])
  t.equal(removal.statusCode, 403, 'a multipart body to a urlencoded form of this plugin has no token the hook can read')
  t.equal((await stored(ctx)).knowledge_bases, 1)
})

t.test('bad uploads: the reason shown on the form\'s draft (a create, an addition); nothing is stored', async (t) => {
  const ctx = await setup(t, { KB_MAX_FILE_MB: '1', KB_MAX_FILES_PER_UPLOAD: '2' })
  const { browser } = await signedIn(ctx)

  const large = await refusedCreate(t, browser, FORM, [{ name: 'big.txt', content: 'a'.repeat(1024 * 1024 + 1) }])
  t.match(large.body, /<p id="file-error" class="field-error">big\.txt is larger than 1 MB, the most a file may have<\/p>/)
  t.match(large.body, 'aria-describedby="file-hint file-error" aria-invalid="true"')
  t.match(large.body, '<li><a href="#file">big.txt is larger than 1 MB, the most a file may have</a></li>', 'listed at the top, a link to its field')
  t.equal(large.res.headers.connection, 'close')

  const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4e00000000049454e44ae426082', 'hex')
  t.match((await refusedCreate(t, browser, FORM, [{ name: 'photo.txt', content: png }])).body, /photo\.txt is image\/png; accepted are PDF, DOCX, TXT, Markdown, CSV or HTML files/)
  t.match((await refusedCreate(t, browser, FORM, [{ name: 'tool.exe', content: 'plain words' }])).body, /\.exe files are not supported/)
  t.match((await refusedCreate(t, browser, FORM, [{ name: 'empty.txt', content: '' }])).body, /empty\.txt is empty/)
  t.match((await refusedCreate(t, browser, FORM, [TEXT, TEXT])).body, /A knowledge base is created with one file; add more on its page\./)
  t.match((await refusedCreate(t, browser, FORM, [])).body, /<p id="file-error" class="field-error">Choose a file\.<\/p>/)

  const fields = await refusedCreate(t, browser, { name: '', description: 'd'.repeat(301), folder: 'f'.repeat(51), language: 'not a language!' }, [TEXT])
  t.match(fields.body, /<div id="form-problems" class="notice error error-summary" role="alert" tabindex="-1">\s*<h2>4 fields need another look<\/h2>/)
  t.match(fields.body, /<p id="name-error" class="field-error">The name is required\.<\/p>/)
  t.match(fields.body, /<p id="description-error" class="field-error">The description must NOT have more than 300 characters\.<\/p>/)
  t.match(fields.body, /<p id="folder-error" class="field-error">The folder must NOT have more than 50 characters\.<\/p>/)
  t.match(fields.body, /<p id="language-error" class="field-error">The language must be a BCP-47 language tag/)
  t.match(fields.body, 'value="not a language!"', 'values kept')
  const nul = await refusedCreate(t, browser, { ...FORM, name: 'a\u0000b' }, [TEXT])
  t.match(nul.body, 'must not contain NUL characters', 'text PostgreSQL cannot store: refused, not a 500')
  t.same(await stored(ctx), NOTHING)

  const id = await createThroughForm(t, browser)
  const before = await stored(ctx)
  // An addition refused: the knowledge base's page with the reason under the file input (Post/Redirect/Get), again on a reload.
  const added = async (files: Parameters<typeof send>[3], reason: RegExp) => {
    const { url, page } = await followRefusal(browser, await send(browser, `/knowledge-bases/${id}/files`, {}, files), `/knowledge-bases/${id}`, 'files-title')
    for (const view of [page, await browser.get(url)]) {
      t.equal(view.statusCode, 200)
      t.match(view.body, /<h1>Front desk<\/h1>/)
      t.match(view.body, reason)
    }
  }
  await added([1, 2, 3].map((n) => ({ field: 'files', name: `n${n}.txt`, content: 'words' })), /One upload carries at most 2 files\./)
  await added([{ field: 'files', name: 'x.pdf', content: 'not a pdf' }], /x\.pdf is not a PDF document by its content/)
  await added([{ name: 'x.txt', content: 'words' }], /unexpected file field/)
  t.notMatch((await browser.get(`/knowledge-bases/${id}`)).body, /not a PDF document/, 'the page without the draft shows no refusal')
  t.same(await stored(ctx), before)
})

t.test('Post/Redirect/Get: a refused create shows its draft; a reload creates nothing; no other session reads it; a create clears it', async (t) => {
  const ctx = await setup(t)
  const { browser } = await signedIn(ctx)
  const refused = await refusedCreate(t, browser, { ...FORM, name: '', folder: 'f'.repeat(51) }, [TEXT])
  t.match(refused.body, '<h2>2 fields need another look</h2>')
  t.match(refused.body, '<li><a href="#name">The name is required.</a></li>')
  t.match(refused.body, `value="${FORM.description}"`, 'the values sent')
  t.match(refused.body, /<input id="file" name="file" type="file"[^>]* required/, 'the file is chosen again')
  const reload = await browser.get(refused.url)
  t.equal(reload.statusCode, 200)
  t.match(reload.body, '<li><a href="#name">The name is required.</a></li>', 'a reload shows it again')
  t.same(await stored(ctx), NOTHING, 'and creates nothing')

  const other = await signedIn(ctx)
  const theirs = await other.browser.get(refused.url)
  t.equal(theirs.statusCode, 200)
  t.notMatch(theirs.body, /need another look|What callers ask/, 'another session sees the empty form')
  t.equal((await browser.get('/knowledge-bases/new?draft=nope')).statusCode, 400, 'a malformed draft id: a page in words')

  await createThroughForm(t, browser)
  t.notMatch((await browser.get(refused.url)).body, /need another look/, 'created: the draft is gone')
})

t.test('another account\'s knowledge base is 404 on every page and form', async (t) => {
  const ctx = await setup(t)
  const owner = await signedIn(ctx)
  const id = await createThroughForm(t, owner.browser)
  const fileId = (await ctx.db.selectFrom('knowledge_base_files').select('id').executeTakeFirstOrThrow()).id
  const { browser } = await signedIn(ctx)
  t.equal((await browser.get('/knowledge-bases')).body.includes('Front desk'), false, 'not listed')
  for (const url of [`/knowledge-bases/${id}`, `/knowledge-bases/${id}/files.json`, `/knowledge-bases/${id}?q=parking`, '/knowledge-bases/not-an-id', `/knowledge-bases/${newId()}`]) {
    t.equal((await browser.get(url)).statusCode, 404, url)
  }
  for (const url of ['/knowledge-bases/not-an-id', '/knowledge-bases/not-an-id/files.json']) {
    const res = await browser.get(url)
    t.equal(res.statusCode, 404, url)
    t.match(res.headers['content-type'], 'text/html')
    t.match(res.body, '<h1>Page not found</h1>', 'a malformed id: the console\'s 404 page')
  }
  const malformed = await send(browser, '/knowledge-bases/not-an-id/files', {}, [{ ...TEXT, field: 'files' }])
  t.equal(malformed.statusCode, 404, 'an upload to a malformed id')
  t.equal(malformed.headers.connection, 'close', 'its body unread')
  const twice = await browser.get('/knowledge-bases?deleted=1&deleted=2')
  t.equal(twice.statusCode, 400)
  t.match(twice.body, 'The notice of the deletion was given more than once. Check the address')
  const token = csrfOf((await browser.get('/knowledge-bases')).body)
  for (const action of [`/knowledge-bases/${id}/delete`, `/knowledge-bases/${id}/files/${fileId}/delete`]) {
    t.equal((await browser.post(action, { csrf_token: token })).statusCode, 404, action)
  }
  t.equal((await send(browser, `/knowledge-bases/${id}/files`, {}, [{ ...TEXT, field: 'files' }], token)).statusCode, 404)
  t.same(await stored(ctx), { knowledge_bases: 1, files: 1, parts: 1 })
  t.equal((await owner.browser.submit(`/knowledge-bases/${id}`, `/knowledge-bases/${id}/files/${newId()}/delete`, {})).statusCode, 404, 'not a file of it')
})

t.test('agents: listed read-only, each a link to its Knowledge section, where alone an agent is given knowledge', async (t) => {
  const ctx = await setup(t)
  const { browser, account } = await signedIn(ctx)
  const front = await createAgent(ctx.app, account, { agent_name: 'Front <desk>' })
  const night = await createAgent(ctx.app, account, { agent_name: 'Night desk' })
  const id = await createThroughForm(t, browser)
  const before = await browser.get(`/knowledge-bases/${id}`)
  t.match(before.body, /<h2 id="agents-title">Agents<\/h2>\n<p>An agent is given knowledge in its own Knowledge section: open it from <a href="\/agents">Agents<\/a>, tick this knowledge base there and save\.<\/p>\n<p>No agent uses it yet\.<\/p>/)
  t.notMatch(before.body, /type="checkbox"|\/knowledge-bases\/[0-9a-f]{24}\/agents/, 'no form of agents')

  const ticked = await browser.submit(`/agents/${front._id}`, `/agents/${front._id}/knowledge`, { [`kb_${id}`]: 'on' })
  t.equal(ticked.statusCode, 303, 'ticked in the agent\'s Knowledge section')
  const page = (await browser.get(`/knowledge-bases/${id}`)).body
  t.match(page, `<ul aria-labelledby="agents-title"><li><a href="/agents/${front._id}#knowledge">Front &lt;desk&gt;</a></li></ul>`)
  t.notMatch(page, 'Night desk', 'only the agents that use it')
  const api = async () => (await ctx.app.inject({ method: 'GET', url: `/v1/knowledge-base/${id}`, headers: account.headers })).json()
  t.same((await api()).agent_names, ['Front <desk>'])
  t.match((await browser.get(`/agents/${front._id}`)).body, `id="kb_${id}" name="kb_${id}" checked>`, 'the link\'s target shows it ticked')

  const gone = await browser.post(`/knowledge-bases/${id}/agents`, { csrf_token: csrfOf(page), [`agent_${night._id}`]: 'on' })
  t.equal(gone.statusCode, 404, 'the knowledge base\'s agents form is no more')
  t.same((await api()).agent_names, ['Front <desk>'], 'unchanged')

  const token = csrfOf(page)
  const noAgent = await browser.post('/agents/not-an-id/knowledge', { csrf_token: token, [`kb_${id}`]: 'on' })
  t.equal(noAgent.statusCode, 404, 'a malformed agent id')
  t.match(noAgent.body, '<h1>Page not found</h1>')
  const badBox = await browser.post(`/agents/${night._id}/knowledge`, { csrf_token: token, [`kb_${id}`]: 'yes' })
  t.equal(badBox.statusCode, 400, 'a checkbox\'s value that no checkbox sends')
  t.match(badBox.body, 'is not one of the choices offered. Go back to the form, correct it and send it again.')
  const unknown = await browser.post(`/agents/${night._id}/knowledge`, { csrf_token: token, [`kb_${newId()}`]: 'on' })
  t.equal(unknown.statusCode, 404, 'a knowledge base that is not the account\'s')
  t.same((await api()).agent_names, ['Front <desk>'], 'unchanged')

  await browser.submit(`/agents/${front._id}`, `/agents/${front._id}/knowledge`, {})
  t.match((await browser.get(`/knowledge-bases/${id}`)).body, '<p>No agent uses it yet.</p>', 'unticked: listed no more')
})

t.test('a workspace: only its knowledge bases; an admin creates in it; a member reads and searches, changes nothing', async (t) => {
  const ctx = await setup(t, {}, { workers: true })
  const owner = await signedIn(ctx)
  const workspaceId = newId()
  await ctx.db.insertInto('workspaces').values({ id: workspaceId, user_id: owner.user.id, name: 'Clinic' }).execute()
  const own = await createThroughForm(t, owner.browser, { ...FORM, name: 'Private notes' })
  const agentInside = await createAgent(ctx.app, owner.account, { agent_name: 'Inside' }, `?workspace_id=${workspaceId}`)
  const agentOutside = await createAgent(ctx.app, owner.account, { agent_name: 'Outside' })

  async function joined (role: 'admin' | 'member') {
    const person = await createConsoleUser(ctx.db)
    await ctx.db.insertInto('workspace_members').values({ workspace_id: workspaceId, email: person.email, role, status: 'active', member_user_id: person.id, joined_at: new Date() }).execute()
    const browser = new ConsoleClient(ctx.app)
    await browser.signIn(person.email, PASSWORD)
    await ctx.db.updateTable('console_sessions').set({ workspace_id: workspaceId }).where('user_id', '=', person.id).execute()
    return browser
  }

  const admin = await joined('admin')
  const shared = await createThroughForm(t, admin, { ...FORM, name: 'Shared handbook' })
  t.equal((await ctx.db.selectFrom('knowledge_bases').select(['user_id', 'workspace_id']).where('id', '=', shared).executeTakeFirstOrThrow()).workspace_id, workspaceId)
  t.equal((await ctx.db.selectFrom('knowledge_bases').select('user_id').where('id', '=', shared).executeTakeFirstOrThrow()).user_id, owner.user.id, 'the owner\'s')
  t.equal((await admin.submit(`/agents/${agentInside._id}`, `/agents/${agentInside._id}/knowledge`, { [`kb_${shared}`]: 'on' })).statusCode, 303)
  // The owner assigns the outside agent through the API: counted on the workspace's page, not named.
  await ctx.app.inject({ method: 'PUT', url: `/v1/knowledge-base/${shared}/agents`, headers: owner.account.headers, payload: { agent_ids: [agentInside._id, agentOutside._id] } })
  const adminPage = await admin.get(`/knowledge-bases/${shared}`)
  t.match(adminPage.body, `<li><a href="/agents/${agentInside._id}#knowledge">Inside</a></li>`)
  t.notMatch(adminPage.body, 'Outside', 'agents outside the workspace are not named')
  t.match(adminPage.body, '1 more agent not listed here uses it.')
  await whenRead(admin, shared)

  const member = await joined('member')
  const list = await member.get('/knowledge-bases')
  t.match(list.body, 'Shared handbook')
  t.notMatch(list.body, 'Private notes', 'the owner\'s own knowledge base is not in the workspace')
  t.notMatch(list.body, 'New knowledge base')
  t.equal((await member.get(`/knowledge-bases/${own}`)).statusCode, 404)
  const page = await member.get(`/knowledge-bases/${shared}?q=parking`)
  t.equal(page.statusCode, 200)
  t.match(page.body, /<mark>Parking<\/mark>/, 'a member searches')
  t.match(page.body, /you can see and search this knowledge base, not change it/)
  t.notMatch(page.body, /method="post" action="\/knowledge-bases/, 'no change forms')
  t.match(page.body, `<li><a href="/agents/${agentInside._id}#knowledge">Inside</a></li>`, 'a member sees who uses it')
  t.equal((await member.get('/knowledge-bases/new')).statusCode, 403)

  const token = csrfOf(page.body)
  const before = await stored(ctx)
  t.equal((await send(member, '/knowledge-bases', FORM, [TEXT], token)).statusCode, 403)
  t.equal((await send(member, `/knowledge-bases/${shared}/files`, {}, [{ ...TEXT, field: 'files' }], token)).statusCode, 403)
  const fileId = (await ctx.db.selectFrom('knowledge_base_files').select('id').where('knowledge_base_id', '=', shared).executeTakeFirstOrThrow()).id
  for (const action of [`/knowledge-bases/${shared}/delete`, `/knowledge-bases/${shared}/files/${fileId}/delete`]) {
    t.equal((await member.post(action, { csrf_token: token })).statusCode, 403, action)
  }
  t.same(await stored(ctx), before, 'the member changed nothing')
})
