import { randomUUID } from 'node:crypto'
import t from 'tap'
import type { DB } from '../../src/db/database.ts'
import { newId } from '../../src/db/ids.ts'
import type { DeliveryAttempt, WebhookDeliveriesTable } from '../../src/db/schema.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { createAccount, setup, type Account } from '../helpers/app.ts'
import { addAction, createAgent, insertCalls } from '../helpers/calls.ts'
import { ConsoleClient, createConsoleUser, csrfOf, PASSWORD, signedInWithKey, withoutLocalTime } from '../helpers/console-client.ts'
import { analysedCall, FAST, settled } from '../helpers/deliveries.ts'
import { poll } from '../helpers/poll.ts'
import { startReceiver } from '../helpers/receiver.ts'

interface Seed { status?: WebhookDeliveriesTable['status'], attempts?: Array<Omit<DeliveryAttempt, 'n'>>, url?: string | null, name?: string, kind?: 'agent_webhook' | 'api_call', created?: Date, next?: Date | null, attemptsMax?: number }

/** A delivery stored as the engine leaves it, its attempts numbered from 1. */
async function insertDelivery (db: DB, userId: string, call: { id: string, agentId: string }, seed: Seed = {}): Promise<string> {
  const id = newId()
  const attempts = (seed.attempts ?? []).map((attempt, i) => ({ n: i + 1, ...attempt }))
  const status = seed.status ?? 'failed'
  await db.insertInto('webhook_deliveries').values({
    id,
    user_id: userId,
    delivery_id: randomUUID(),
    correlation_id: randomUUID(),
    call_id: call.id,
    agent_id: call.agentId,
    action_id: null,
    kind: seed.kind ?? 'agent_webhook',
    name: seed.name ?? 'Agent webhook',
    status,
    method: 'POST',
    url: seed.url === undefined ? 'https://hooks.example.test/in' : seed.url,
    body: JSON.stringify({ call_id: call.id }),
    variables: null,
    schedule: [60],
    attempts_max: seed.attemptsMax ?? 2,
    scheduled_made: attempts.length,
    attempts_made: attempts.length,
    attempts: JSON.stringify(attempts),
    next_attempt_at: seed.next ?? (status === 'pending' ? new Date(Date.now() + 60_000) : null),
    delivered_at: status === 'delivered' ? new Date() : null,
    ...(seed.url === null ? { purged_at: new Date() } : {}),
    ...(seed.created === undefined ? {} : { created_at: seed.created })
  }).execute()
  return id
}

const at = (minute: number) => new Date(Date.UTC(2026, 4, 1, 9, minute))
const deliveryIdsOf = (body: string) => [...body.matchAll(/<td><a href="\/deliveries\/([0-9a-f]{24})">/g)].map((m) => m[1])

t.test('the log: only one\'s own deliveries, newest first; Delivered, Retrying and Not delivered, agent and call filters', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const one = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  const two = await createAgent(ctx.app, account, { agent_name: 'Sales <b>' })
  const [c1] = await insertCalls(ctx.db, user.id, one, [{}])
  const [c2] = await insertCalls(ctx.db, user.id, two, [{}])
  const failedAttempt = { at: at(0).toISOString(), duration_ms: 12, status_code: 500 }
  const delivered = await insertDelivery(ctx.db, user.id, { id: c1, agentId: one._id }, { status: 'delivered', attempts: [{ ...failedAttempt, status_code: 200 }], created: at(1) })
  const next = new Date('2026-05-01T10:00:00Z')
  const retrying = await insertDelivery(ctx.db, user.id, { id: c1, agentId: one._id }, { status: 'pending', kind: 'api_call', name: 'CRM <sync>', attempts: [failedAttempt], next, created: at(2), attemptsMax: 8 })
  const failed = await insertDelivery(ctx.db, user.id, { id: c2, agentId: two._id }, { status: 'failed', attempts: [failedAttempt, failedAttempt], created: at(3) })
  const queued = await insertDelivery(ctx.db, user.id, { id: c2, agentId: two._id }, { status: 'pending', created: at(4) })
  const other = await createAccount(ctx.db)
  const theirAgent = await createAgent(ctx.app, other, { agent_name: 'Not mine' })
  const [theirCall] = await insertCalls(ctx.db, other.user.id, theirAgent, [{}])
  const foreign = await insertDelivery(ctx.db, other.user.id, { id: theirCall, agentId: theirAgent._id }, { name: 'Their hook' })

  const page = await browser.get('/deliveries')
  t.equal(page.statusCode, 200)
  t.match(page.body, /<nav aria-label="Account"><ul><li><a href="\/appointments">Appointments<\/a><\/li><li><a href="\/workspaces">Workspaces<\/a><\/li><li><a href="\/deliveries" aria-current="page">Deliveries<\/a>/, 'in the account menu, after Appointments and Workspaces')
  t.same(deliveryIdsOf(page.body), [queued, failed, retrying, delivered], 'newest first, only the account\'s')
  t.notMatch(page.body, foreign)
  t.notMatch(page.body, /Not mine|Their hook/)
  t.match(page.body, 'Deliveries 1–4 of 4, newest first')
  t.match(page.body, new RegExp(`<td>API call</td>\\s*<td>CRM &lt;sync&gt;</td>\\s*<td>Front desk</td>\\s*<td><a href="/calls/${c1}"><span class="visually-hidden">Call </span><code>…${c1.slice(-8)}</code></a></td>\\s*<td>Retrying</td>\\s*<td>1 of 8</td>\\s*<td><time datetime="2026-05-01T10:00:00.000Z">2026-05-01 10:00 UTC</time></td>`),
    'kind, name (escaped), agent, call link, status, attempts of max, next attempt')
  t.match(page.body, /<td>Sales &lt;b&gt;<\/td>\s*<td><a href="\/calls\/[0-9a-f]{24}"><span class="visually-hidden">Call <\/span><code>…[0-9a-f]{8}<\/code><\/a><\/td>\s*<td>Queued<\/td>\s*<td>0 of 2<\/td>/, 'pending before its first attempt: Queued')
  t.match(page.body, /<td>Not delivered<\/td>\s*<td>2 of 2<\/td>\s*<td>—<\/td>/, 'no next attempt once failed')
  t.match(page.body, /<td>Delivered<\/td>\s*<td>1 of 2<\/td>\s*<td>—<\/td>/)
  t.match(page.body, '<option value="failed">Not delivered</option>', 'the status filter in the specification\'s words')

  const list = async (query: string) => {
    const res = await browser.get(`/deliveries${query}`)
    t.equal(res.statusCode, 200, query)
    return deliveryIdsOf(res.body)
  }
  t.same(await list('?status=delivered'), [delivered], 'Delivered')
  t.same(await list('?status=pending'), [queued, retrying], 'Retrying: pending, queued ones too')
  t.same(await list('?status=failed'), [failed], 'Not delivered')
  t.same(await list(`?agent=${one._id}`), [retrying, delivered])
  t.same(await list(`?agent=${two._id.toUpperCase()}`), [queued, failed], 'ids in either case')
  t.same(await list(`?call=${c2}`), [queued, failed])
  t.same(await list(`?call=${c1}&status=pending&agent=${one._id}`), [retrying], 'filters combine')
  t.same(await list('?status=&agent=&call='), [queued, failed, retrying, delivered], 'empty fields mean any')
  t.same(await list(`?call=${theirCall}`), [], 'another account\'s call shows nothing')
  const filtered = await browser.get(`/deliveries?status=failed&agent=${two._id}&call=${c2}`)
  t.match(filtered.body, '<option value="failed" selected>Not delivered</option>', 'the form keeps the filters')
  t.match(filtered.body, `<option value="${two._id}" selected>Sales &lt;b&gt;</option>`)
  t.match(filtered.body, `name="call" value="${c2}"`)
  t.match((await browser.get(`/deliveries?status=delivered&agent=${two._id}`)).body, /No deliveries match/)

  for (const [query, message] of [
    ['?status=retrying', /Choose Delivered, Retrying or Not delivered/],
    ['?agent=xyz', /not a valid agent id/],
    ['?call=%22%3E%3Cscript%3E', /A call id is 24 characters/],
    ['?skip=-1', /page position must be a whole number/],
    ['?status=failed&status=pending', /“status” was given more than once/]
  ] as const) {
    const res = await browser.get(`/deliveries${query}`)
    t.equal(res.statusCode, 400, query)
    t.match(res.body, message, query)
    t.match(res.body, /<form method="get" action="\/deliveries"/, 'the form is there to correct it')
    t.notMatch(res.body, /<table>|<script/i)
  }

  const signedOut = await ctx.app.inject({ method: 'GET', url: '/deliveries?status=failed' })
  t.equal(signedOut.statusCode, 303)
  t.equal(signedOut.headers.location, '/login?next=%2Fdeliveries%3Fstatus%3Dfailed')
})

t.test('paging: 50 a page of the total; next and previous links keep the filters', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account)
  const [call] = await insertCalls(ctx.db, user.id, agent, [{}])
  const ids: string[] = []
  for (let i = 0; i < 120; i++) {
    ids.push(await insertDelivery(ctx.db, user.id, { id: call, agentId: agent._id }, { status: i % 3 === 0 ? 'delivered' : 'failed', created: new Date(Date.UTC(2026, 4, 1, 0, i)) }))
  }
  const failed = ids.filter((_, i) => i % 3 !== 0).reverse()

  const first = await browser.get('/deliveries?status=failed')
  t.same(deliveryIdsOf(first.body), failed.slice(0, 50))
  t.match(first.body, 'Deliveries 1–50 of 80, newest first')
  t.match(first.body, '<a href="/deliveries?status=failed&amp;skip=50" rel="next">Older deliveries</a>')
  t.notMatch(first.body, 'rel="prev"')
  const second = await browser.get('/deliveries?status=failed&skip=50')
  t.same(deliveryIdsOf(second.body), failed.slice(50))
  t.match(second.body, 'Deliveries 51–80 of 80, newest first')
  t.match(second.body, '<a href="/deliveries?status=failed" rel="prev">Newer deliveries</a>')
  t.notMatch(second.body, 'rel="next"', 'the last page')
  t.same(deliveryIdsOf((await browser.get('/deliveries?skip=50')).body), [...ids].reverse().slice(50, 100))
  t.match((await browser.get('/deliveries?skip=500')).body, /No more deliveries/)
})

t.test('a delivery\'s page: every attempt with its answer (escaped), the next attempt, the masked receiver; others\' are 404', async (t) => {
  const ctx = await setup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  const [call] = await insertCalls(ctx.db, user.id, agent, [{}])
  const next = new Date('2026-05-01T10:00:00Z')
  const id = await insertDelivery(ctx.db, user.id, { id: call, agentId: agent._id }, {
    status: 'pending',
    name: 'Hook <i>',
    url: 'https://hooks.example.test/in?key=s3cret',
    next,
    attemptsMax: 8,
    attempts: [
      { at: '2026-05-01T09:31:00.000Z', duration_ms: 41, status_code: 500, response_preview: '<script>alert(1)</script> ' + 'x'.repeat(400) },
      { at: '2026-05-01T09:32:00.000Z', duration_ms: 2000, error: 'timed out after 2 s' }
    ]
  })

  const page = await browser.get(`/deliveries/${id}`)
  t.equal(page.statusCode, 200)
  t.match(page.body, '<title>Webhook: Hook &lt;i&gt; · Switchboard</title>')
  t.match(page.body, '<dt>Status</dt><dd>Retrying</dd>')
  t.match(page.body, '<dt>Attempts</dt><dd>2 of 8 scheduled</dd>')
  t.match(page.body, '<dt>Next attempt</dt><dd><time datetime="2026-05-01T10:00:00.000Z">2026-05-01 10:00 UTC</time></dd>')
  t.match(page.body, '<dt>Agent</dt><dd>Front desk</dd>')
  t.match(page.body, `<dt>Call</dt><dd><a href="/calls/${call}"><code>${call}</code></a></dd>`)
  t.match(page.body, '<dt>Receiver</dt><dd><code>POST https://hooks.example.test/in?key=********</code></dd>', 'query values masked as in the API')
  t.notMatch(page.body, 's3cret')
  t.match(page.body, /<td>1<\/td>\s*<td><time datetime="2026-05-01T09:31:00.000Z">2026-05-01 09:31 UTC<\/time><\/td>\s*<td>HTTP 500<\/td>\s*<td>41 ms<\/td>\s*<td><code class="preview">&lt;script&gt;alert\(1\)&lt;\/script&gt; x+…<\/code><\/td>/,
    'the start of the answer, escaped')
  t.match(page.body, /<td>timed out after 2 s<\/td>\s*<td>2000 ms<\/td>\s*<td>—<\/td>/)
  t.notMatch(withoutLocalTime(page.body), /<script|<i>/i, 'no user content is markup')
  t.match(page.body, new RegExp(`<form method="post" action="/deliveries/${id}/resend"><input type="hidden" name="csrf_token" value="[^"]+"><button type="submit">Send again</button></form>`))
  t.equal((await browser.get(`/deliveries/${id.toUpperCase()}`)).statusCode, 200, 'an id in either case')

  const other = await createAccount(ctx.db)
  const theirAgent = await createAgent(ctx.app, other)
  const [theirCall] = await insertCalls(ctx.db, other.user.id, theirAgent, [{}])
  const foreign = await insertDelivery(ctx.db, other.user.id, { id: theirCall, agentId: theirAgent._id }, { name: 'Their hook' })
  for (const unknown of [foreign, newId(), 'not-an-id']) {
    const res = await browser.get(`/deliveries/${unknown}`)
    t.equal(res.statusCode, 404, unknown)
    // A malformed id is refused by the route's schema: the console's 404 page (route-schemas.test.ts).
    t.match(res.body, unknown === 'not-an-id' ? 'There is no page at this address' : 'You have no delivery with that id.')
    t.notMatch(res.body, 'Their hook')
  }
  const csrf = csrfOf(page.body)
  t.equal((await browser.post(`/deliveries/${foreign}/resend`, { csrf_token: csrf })).statusCode, 404, 'nor can it be sent again')
})

t.test('Send again: CSRF checked, the outcome shown from the logged attempt, success makes it Delivered; a purged one is a 409 page', async (t) => {
  const ctx = await setup(t, FAST)
  const { user, account, browser } = await signedInWithKey(ctx)
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, account)
  const [call] = await insertCalls(ctx.db, user.id, agent, [{}])
  const id = await insertDelivery(ctx.db, user.id, { id: call, agentId: agent._id }, {
    status: 'failed',
    url: `${receiver.url}/in`,
    attempts: [{ at: at(1).toISOString(), duration_ms: 5, status_code: 500 }, { at: at(2).toISOString(), duration_ms: 5, status_code: 500 }]
  })
  const url = `/deliveries/${id}`
  const page = await browser.get(url)

  t.equal((await browser.post(`${url}/resend`, {})).statusCode, 403, 'no token')
  t.equal((await browser.post(`${url}/resend`, { csrf_token: 'wrong' })).statusCode, 403, 'a wrong token')
  t.equal((await browser.post(`${url}/resend`, { csrf_token: csrfOf(page.body) }, { origin: 'https://evil.example' })).statusCode, 403, 'another site\'s form')
  t.equal(receiver.received.length, 0, 'nothing was sent')

  receiver.answers.push({ status: 502, body: 'bad <gateway>' })
  const failing = await browser.submit(url, `${url}/resend`, {})
  t.equal(failing.statusCode, 303)
  t.equal(failing.headers.location, `${url}?sent=3`, 'back on the delivery, naming the attempt it logged')
  t.equal(receiver.received.length, 1, 'sent before the answer: resend is synchronous')
  t.equal(receiver.received[0].headers['x-service-delivery-id'], (await ctx.db.selectFrom('webhook_deliveries').select('delivery_id').where('id', '=', id).executeTakeFirstOrThrow()).delivery_id)
  const afterFailure = await browser.get(failing.headers.location as string)
  t.match(afterFailure.body, '<p class="notice error" role="alert">Sent again: not delivered (attempt 3: HTTP 502). The status stays as it was.</p>')
  t.match(afterFailure.body, '<dt>Status</dt><dd>Not delivered</dd>')
  t.match(afterFailure.body, /<td>3 <span class="hint">\(sent again\)<\/span><\/td>[\s\S]*<td>HTTP 502<\/td>[\s\S]*bad &lt;gateway&gt;/)

  const ok = await browser.submit(url, `${url}/resend`, {})
  t.equal(ok.headers.location, `${url}?sent=4`)
  const afterSuccess = await browser.get(ok.headers.location as string)
  t.match(afterSuccess.body, /<p class="notice success" role="status">Sent again: delivered \(attempt 4, HTTP 200 in \d+ ms\)\.<\/p>/)
  t.match(afterSuccess.body, '<dt>Status</dt><dd>Delivered</dd>')
  t.match(afterSuccess.body, '<dt>Attempts</dt><dd>4 of 2 scheduled</dd>', 'manual attempts count beyond the schedule')
  t.notMatch((await browser.get(`${url}?sent=1`)).body, /Sent again/, 'a scheduled attempt is no resend')
  t.notMatch((await browser.get(`${url}?sent=x`)).body, /Sent again/)

  await ctx.db.updateTable('webhook_deliveries').set({ url: null, body: null, purged_at: new Date() }).where('id', '=', id).execute()
  const purgedPage = await browser.get(url)
  t.match(purgedPage.body, /The request was deleted on <time[^>]*>[^<]+<\/time> after the retention period; it cannot be sent again\./)
  t.notMatch(purgedPage.body, /<button type="submit">Send again/, 'no button')
  t.match(purgedPage.body, '<dt>Receiver</dt><dd>deleted</dd>')
  const purged = await browser.post(`${url}/resend`, { csrf_token: csrfOf(purgedPage.body) })
  t.equal(purged.statusCode, 409)
  t.match(purged.body, '<p class="notice error" role="alert">Not sent: the request was deleted after the retention period, so it cannot be sent again.</p>')
  t.equal(receiver.received.length, 2)
})

t.test('a workspace: its members see the deliveries of its calls only, read-only; an admin sends again', async (t) => {
  const ctx = await setup(t, FAST)
  const { user: owner, account } = await signedInWithKey(ctx)
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Shared' })
  const workspaceId = newId()
  await ctx.db.insertInto('workspaces').values({ id: workspaceId, user_id: owner.id, name: 'Team' }).execute()
  const [inside] = await insertCalls(ctx.db, owner.id, agent, [{ workspace_id: workspaceId }])
  const [outside] = await insertCalls(ctx.db, owner.id, agent, [{}])
  const shared = await insertDelivery(ctx.db, owner.id, { id: inside, agentId: agent._id }, { url: `${receiver.url}/in`, name: 'Team hook' })
  const private_ = await insertDelivery(ctx.db, owner.id, { id: outside, agentId: agent._id }, { name: 'Owner only' })

  /** A person signed in and working in the workspace with `role`. */
  const memberAs = async (role: 'member' | 'admin') => {
    const person = await createConsoleUser(ctx.db)
    await ctx.db.insertInto('workspace_members').values({ workspace_id: workspaceId, email: person.email, role, status: 'active', member_user_id: person.id, joined_at: new Date() }).execute()
    const browser = new ConsoleClient(ctx.app)
    await browser.signIn(person.email, PASSWORD)
    await ctx.db.updateTable('console_sessions').set({ workspace_id: workspaceId }).where('user_id', '=', person.id).execute()
    return browser
  }

  const member = await memberAs('member')
  const list = await member.get('/deliveries')
  t.equal(list.statusCode, 200)
  t.same(deliveryIdsOf(list.body), [shared], 'only the workspace\'s')
  t.notMatch(list.body, 'Owner only')
  t.same(deliveryIdsOf((await member.get(`/deliveries?call=${outside}`)).body), [], 'not by filtering for the call either')
  t.equal((await member.get(`/deliveries/${private_}`)).statusCode, 404, 'a delivery outside the workspace is 404')
  const page = await member.get(`/deliveries/${shared}`)
  t.equal(page.statusCode, 200)
  t.notMatch(page.body, /<button type="submit">Send again/, 'no Send again for a member')
  t.match(page.body, 'An admin of this workspace can send it again.')
  const refused = await member.post(`/deliveries/${shared}/resend`, { csrf_token: csrfOf(page.body) })
  t.equal(refused.statusCode, 403)
  t.match(refused.body, /You can view this workspace but not change it/)
  t.equal(receiver.received.length, 0)

  const admin = await memberAs('admin')
  const sent = await admin.submit(`/deliveries/${shared}`, `/deliveries/${shared}/resend`, {})
  t.equal(sent.statusCode, 303)
  t.equal(receiver.received.length, 1)
  const outsideToken = csrfOf((await admin.get('/deliveries')).body)
  t.equal((await admin.post(`/deliveries/${private_}/resend`, { csrf_token: outsideToken })).statusCode, 404, 'nor a POST to one outside it')
})

t.test('the failure e-mail\'s link: signed out, it leads through sign-in to the delivery\'s page', async (t) => {
  const ctx = await setup(t, { ...FAST, PUBLIC_BASE_URL: 'https://sb.example.test' }, { workers: true })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const account: Account = { user, key, headers: { 'x-api-key': key } }
  const receiver = await startReceiver(t)
  receiver.answers.push({ status: 500 })
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  await addAction(ctx.app, account, agent._id, { name: 'CRM sync', url: `${receiver.url}/crm`, retry_schedule: [] })
  await analysedCall(ctx, account, agent)
  const [delivery] = await settled(t, ctx, account, 1)
  t.equal(delivery.status, 'failed')
  const mail = await poll(() => ctx.db.selectFrom('emails').selectAll().where('kind', '=', 'delivery_failure').executeTakeFirst(), (row) => row !== undefined,
    { message: 'no failure e-mail' })
  const link = /^Delivery log: (\S+)$/m.exec(mail!.body_text)?.[1]
  t.equal(link, `https://sb.example.test/deliveries/${delivery.id}`, 'the e-mail links to the console\'s page of the delivery')

  // The browser opens the link: only its path reaches this server (the host is the public address).
  const browser = new ConsoleClient(ctx.app)
  const path = new URL(link!).pathname
  const opened = await browser.get(path)
  t.equal(opened.statusCode, 303)
  t.equal(opened.headers.location, `/login?next=${encodeURIComponent(path)}`)
  const signInPage = await browser.get(opened.headers.location as string)
  t.match(signInPage.body, `<input type="hidden" name="next" value="${path}">`)
  const signedIn = await browser.post('/login', { csrf_token: csrfOf(signInPage.body), next: path, email: user.email, password: PASSWORD })
  t.equal(signedIn.statusCode, 303)
  t.equal(signedIn.headers.location, path, 'back where the link pointed')
  const page = await browser.get(path)
  t.equal(page.statusCode, 200)
  t.match(page.body, '<title>API call: CRM sync · Switchboard</title>')
  t.match(page.body, '<dt>Status</dt><dd>Not delivered</dd>')
  t.match(page.body, /<td>HTTP 500<\/td>/)
})
