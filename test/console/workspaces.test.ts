import t, { type Test } from 'tap'
import { setup, type TestContext } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { anotherSession, ConsoleClient, createConsoleUser, csrfOf, followDraft, PASSWORD, signedInWithKey } from '../helpers/console-client.ts'
import { runScript } from '../helpers/scripts.ts'
import { startInbox, type Inbox } from '../helpers/smtp.ts'

// Workspaces in the console: the owner invites, the invited person follows the e-mail's link, and the one rule of
// scope.ts decides what they see (the workspace's agents, calls, deliveries, knowledge bases) and change (admins).

/** The link of the newest invitation e-mail to `email` (recorded: the tests send no mail). */
async function invitationLink (ctx: TestContext, email: string): Promise<string> {
  const mail = await ctx.db.selectFrom('emails').select('body_text as text').where('to_address', '=', email).where('kind', '=', 'workspace_invitation')
    .orderBy('created_at', 'desc').executeTakeFirstOrThrow()
  const link = /http:\/\/[^\s]+\/invitations\/(wi_\w+)/.exec(mail.text)
  if (link === null) throw new Error(`no link in:\n${mail.text}`)
  return `/invitations/${link[1]}`
}

/** The link of the newest e-mail the SMTP server received for `email` (quoted-printable lines joined). */
async function mailedLink (inbox: Inbox, email: string, count: number): Promise<string> {
  const mail = (await inbox.waitFor(count)).findLast((m) => m.to.includes(email))
  const link = /\/invitations\/(wi_\w+)/.exec(mail?.raw.replace(/=\r\n/g, '') ?? '')
  if (link === null) throw new Error(`no link mailed to ${email}`)
  return `/invitations/${link[1]}`
}

/** A change of the workspace's page answers 303 to the page (Post/Redirect/Get): the page it leads to. */
async function followed (t: Test, browser: ConsoleClient, res: Awaited<ReturnType<ConsoleClient['post']>>) {
  t.equal(res.statusCode, 303, res.body)
  const location = res.headers.location as string
  t.match(location, /^\/workspaces\/[0-9a-f]{24}\?done=/)
  return await browser.get(location)
}

/** An owner with a workspace holding one agent and its call, and an agent and a call outside it. */
async function seeded (ctx: TestContext, name = 'Sales <b>') {
  const o = await signedInWithKey(ctx)
  const created = await o.browser.submit('/workspaces', '/workspaces', { workspace_name: name, description: 'the sales team' })
  t.equal(created.statusCode, 303)
  const workspaceId = /^\/workspaces\/([0-9a-f]{24})$/.exec(created.headers.location as string)![1]
  const inside = await createAgent(ctx.app, o.account, { agent_name: 'Shared agent' }, `?workspace_id=${workspaceId}`)
  const outside = await createAgent(ctx.app, o.account, { agent_name: 'Private agent' })
  const [insideCall] = await insertCalls(ctx.db, o.user.id, inside, [{ start_timestamp: new Date('2026-05-01T09:00:00Z') }])
  await ctx.db.updateTable('calls').set({ workspace_id: workspaceId }).where('id', '=', insideCall).execute()
  const [outsideCall] = await insertCalls(ctx.db, o.user.id, outside, [{ start_timestamp: new Date('2026-05-02T09:00:00Z') }])
  return { ...o, workspaceId, inside, outside, insideCall, outsideCall }
}

t.test('invite a new person: the e-mail\'s link makes their account, and they see only the workspace', async (t) => {
  const inbox = await startInbox(t)
  const ctx = await setup(t, { SMTP_URL: inbox.url })
  const s = await seeded(ctx)
  const invited = await followed(t, s.browser, await s.browser.submit(`/workspaces/${s.workspaceId}`, `/workspaces/${s.workspaceId}/members`, { email: 'New.Person@Example.com', role: 'member' }))
  t.equal(invited.statusCode, 200)
  t.match(invited.body, 'Invitation e-mailed to new.person@example.com.')
  const link = await mailedLink(inbox, 'new.person@example.com', 1)
  t.notMatch(invited.body, '/invitations/', 'the owner never sees the link')
  t.match(invited.body, /<td>new\.person@example\.com<\/td><td>member: views<\/td><td>invited<\/td>/)
  t.match(invited.body, '<h1>Sales &lt;b&gt;</h1>', 'the name is text')

  const person = new ConsoleClient(ctx.app)
  const page = await person.get(link)
  t.equal(page.statusCode, 200)
  t.match(page.body, 'invited <strong>new.person@example.com</strong> to the workspace\n<strong>Sales &lt;b&gt;</strong> as a member')
  t.match(page.body, 'Accept and create my account')
  const mismatch = await person.post(link, { csrf_token: csrfOf(page.body), new_password: PASSWORD, confirm_password: 'something else' })
  t.equal(mismatch.statusCode, 400)
  t.match(mismatch.body, 'The two passwords differ.')
  t.equal(await ctx.db.selectFrom('users').select('id').where('email', '=', 'new.person@example.com').executeTakeFirst(), undefined, 'no account yet')
  const noToken = await person.post(link, { new_password: PASSWORD, confirm_password: PASSWORD })
  t.equal(noToken.statusCode, 403, 'the form needs its CSRF token')

  const accepted = await person.post(link, { csrf_token: csrfOf(page.body), new_password: PASSWORD, confirm_password: PASSWORD })
  t.equal(accepted.statusCode, 303)
  t.equal(accepted.headers.location, '/agents')
  const member = await ctx.db.selectFrom('workspace_members').selectAll().where('email', '=', 'new.person@example.com').executeTakeFirstOrThrow()
  t.match(member, { status: 'active', invite_token_hash: null })
  t.equal((await person.get(link)).statusCode, 404, 'the link works once')

  const agents = await person.get('/agents')
  t.match(agents.body, 'Workspace Sales &lt;b&gt; (member)')
  t.match(agents.body, 'Shared agent')
  t.notMatch(agents.body, 'Private agent')
  t.notMatch(agents.body, 'New agent', 'a member gets no create link')
  t.notMatch(agents.body, 'href="/keys"', 'the account\'s pages are not listed in a workspace')
  t.equal((await person.get(`/agents/${s.outside._id}`)).statusCode, 404, 'outside the workspace: as if it did not exist')
  const shared = await person.get(`/agents/${s.inside._id}`)
  t.equal(shared.statusCode, 200)
  t.match(shared.body, '<fieldset class="plain" disabled>', 'read-only')
  t.notMatch(shared.body, '>Save</button>')
  t.equal((await person.post(`/agents/${s.inside._id}`, { csrf_token: csrfOf(shared.body), agent_name: 'Renamed' })).statusCode, 403, 'a member cannot change it')
  t.equal((await person.post('/agents', { csrf_token: csrfOf(shared.body), agent_name: 'Mine' })).statusCode, 403)
  t.equal((await person.get('/agents/new')).statusCode, 403)

  const calls = await person.get('/calls')
  t.match(calls.body, `/calls/${s.insideCall}`)
  t.notMatch(calls.body, s.outsideCall)
  t.equal((await person.get(`/calls/${s.outsideCall}`)).statusCode, 404)
  t.equal((await person.get(`/calls/${s.outsideCall}/recording.wav`)).statusCode, 404)
  t.equal((await person.get(`/calls/${s.insideCall}`)).statusCode, 200)
  t.equal((await person.get(`/workspaces/${s.workspaceId}`)).statusCode, 404, 'only the owner manages the workspace')

  // Back to their own (empty) account, and into the workspace again.
  const own = await person.submit('/workspaces', '/workspace', { workspace_id: '' })
  t.equal(own.headers.location, '/agents')
  t.notMatch((await person.get('/agents')).body, 'Shared agent')
  await person.submit('/workspaces', '/workspace', { workspace_id: s.workspaceId })
  t.match((await person.get('/agents')).body, 'Shared agent')

  // Removed: the next request is back in their own account.
  const removed = await followed(t, s.browser, await s.browser.submit(`/workspaces/${s.workspaceId}`, `/workspaces/${s.workspaceId}/members/remove`, { email: 'new.person@example.com' }))
  t.match(removed.body, 'new.person@example.com is no longer a member.')
  const after = await person.get('/agents')
  t.notMatch(after.body, 'Shared agent')
  t.match(after.body, 'Your account')
  t.equal((await person.get(`/agents/${s.inside._id}`)).statusCode, 404)
  t.equal((await person.submit('/workspaces', '/workspace', { workspace_id: s.workspaceId })).statusCode, 404, 'cannot switch back in')
})

t.test('without SMTP the inviter gets no link, only word that e-mail is not configured; the operator issues one with the CLI', async (t) => {
  const ctx = await setup(t)
  const s = await seeded(ctx)
  const url = `/workspaces/${s.workspaceId}`
  const invited = await followed(t, s.browser, await s.browser.submit(url, `${url}/members`, { email: 'squat@example.com', role: 'admin' }))
  t.equal(invited.statusCode, 200)
  t.match(invited.body, 'The invitation e-mail was not sent')
  t.match(invited.body, 'E-mail is not configured on this server (SMTP_URL is not set).')
  t.match(invited.body, `<code>npm run cli -- workspace invite-link --workspace ${s.workspaceId} --email squat@example.com</code>`)
  t.notMatch(invited.body, /wi_\w/, 'no link, no token on the page')
  const resent = await followed(t, s.browser, await s.browser.submit(url, `${url}/members/resend`, { email: 'squat@example.com' }))
  t.notMatch(resent.body, /wi_\w/, 'nor when sent again')
  t.match(resent.body, 'The invitation e-mail was not sent')
  t.equal(await ctx.db.selectFrom('users').select('id').where('email', '=', 'squat@example.com').executeTakeFirst(), undefined, 'no account is made for the address')

  // The API's answer carries no link either.
  const api = await ctx.app.inject({ method: 'POST', url: `/v1/workspaces/${s.workspaceId}/invite-member`, headers: s.account.headers, payload: { email: 'other@example.com' } })
  t.equal(api.statusCode, 201)
  t.notMatch(api.body, /wi_\w|invitations/)

  // The operator hands out a link: it works for that address; the earlier ones stop working.
  const earlier = await invitationLink(ctx, 'squat@example.com')
  const issued = await runScript('cli.ts', ctx.url, 'workspace', 'invite-link', '--workspace', s.workspaceId, '--email', 'Squat@Example.com')
  t.equal(issued.code, 0, issued.stderr)
  const link = /^http:\/\/localhost:3000(\/invitations\/wi_\w+)\n/.exec(issued.stdout)?.[1]
  t.ok(link, issued.stdout)
  t.match(issued.stdout, 'for squat@example.com only')
  t.equal((await new ConsoleClient(ctx.app).get(earlier)).statusCode, 404, 'the recorded e-mail\'s link is dead')
  const person = new ConsoleClient(ctx.app)
  const page = await person.get(link!)
  t.equal(page.statusCode, 200)
  const accepted = await person.post(link!, { csrf_token: csrfOf(page.body), new_password: PASSWORD, confirm_password: PASSWORD })
  t.equal(accepted.statusCode, 303)
  t.ok(await ctx.db.selectFrom('users').select('id').where('email', '=', 'squat@example.com').executeTakeFirst(), 'the account exists once the person set a password')

  for (const [args, message] of [
    [['--workspace', s.workspaceId, '--email', 'nobody@example.com'], 'nobody@example.com has no open invitation'],
    [['--workspace', '0123456789abcdef01234567', '--email', 'other@example.com'], 'no workspace 0123456789abcdef01234567'],
    [['--email', 'other@example.com'], '--workspace is required']
  ] as const) {
    const refused = await runScript('cli.ts', ctx.url, 'workspace', 'invite-link', ...args)
    t.equal(refused.code, 2)
    t.match(refused.stderr, message)
  }
})

t.test('a mail server that refuses the invitation: the inviter is told, and still gets no link', async (t) => {
  const inbox = await startInbox(t, { reject: true })
  const ctx = await setup(t, { SMTP_URL: inbox.url })
  const s = await seeded(ctx)
  const invited = await followed(t, s.browser, await s.browser.submit(`/workspaces/${s.workspaceId}`, `/workspaces/${s.workspaceId}/members`, { email: 'x@example.com', role: 'member' }))
  t.equal(invited.statusCode, 200)
  t.match(invited.body, 'The mail server refused it or could not be reached.')
  t.notMatch(invited.body, /wi_\w/)
})

t.test('an admin with an account signs in to accept, then changes the workspace\'s agents (and nothing else)', async (t) => {
  const ctx = await setup(t)
  const s = await seeded(ctx, 'Support')
  const admin = await createConsoleUser(ctx.db)
  await s.browser.submit(`/workspaces/${s.workspaceId}`, `/workspaces/${s.workspaceId}/members`, { email: admin.email, role: 'admin' })
  const link = await invitationLink(ctx, admin.email.toLowerCase())

  const browser = new ConsoleClient(ctx.app)
  const page = await browser.get(link)
  t.match(page.body, `sign in as ${admin.email.toLowerCase()}</a> to accept`, 'an existing account signs in first')
  t.notMatch(page.body, 'name="new_password"', 'the link alone never opens an existing account')
  const blind = await browser.post(link, { csrf_token: 'x', new_password: 'taking it over', confirm_password: 'taking it over' })
  t.equal(blind.statusCode, 403)
  t.equal((await ctx.db.selectFrom('workspace_members').select('status').where('email', '=', admin.email.toLowerCase()).executeTakeFirstOrThrow()).status, 'invited')

  const login = await browser.get(`/login?next=${encodeURIComponent(link)}`)
  const signedIn = await browser.post('/login', { csrf_token: csrfOf(login.body), email: admin.email, password: PASSWORD, next: link })
  t.equal(signedIn.headers.location, link, 'back to the invitation')
  const accept = await browser.get(link)
  t.match(accept.body, 'Accept the invitation')
  const accepted = await browser.post(link, { csrf_token: csrfOf(accept.body) })
  t.equal(accepted.headers.location, '/agents')

  const agent = await browser.get(`/agents/${s.inside._id}`)
  t.match(agent.body, '>Save</button>')
  const saved = await browser.post(`/agents/${s.inside._id}`, {
    csrf_token: csrfOf(agent.body), agent_name: 'Renamed by the admin', begin_message: '', general_prompt: 'Help.', language: 'en-US', voice_id: '65a0f0000000000000000004', webhook_url: '', status: 'active'
  })
  t.equal(saved.statusCode, 303)
  const row = await ctx.db.selectFrom('agents').select(['agent_name', 'user_id']).where('id', '=', s.inside._id).executeTakeFirstOrThrow()
  t.same(row, { agent_name: 'Renamed by the admin', user_id: s.user.id }, 'the owner\'s record, changed')

  const created = await browser.post('/agents', {
    csrf_token: csrfOf(agent.body), agent_name: 'Made in the workspace', begin_message: '', general_prompt: 'Help.', language: 'en-US', voice_id: '65a0f0000000000000000004', webhook_url: '', status: 'active'
  })
  t.equal(created.statusCode, 303)
  const made = await ctx.db.selectFrom('agents').select(['user_id', 'workspace_id']).where('agent_name', '=', 'Made in the workspace').executeTakeFirstOrThrow()
  t.same(made, { user_id: s.user.id, workspace_id: s.workspaceId }, 'a new agent belongs to the workspace, in the owner\'s account')
  t.equal((await browser.get(`/agents/${s.outside._id}`)).statusCode, 404)
  t.equal((await browser.get(`/workspaces/${s.workspaceId}`)).statusCode, 404, 'admins change records, not the workspace itself')
})

t.test('the owner\'s page: validation, repeat and resend of invitations, removal rules, delete refused while in use, CSRF, ownership', async (t) => {
  const ctx = await setup(t)
  const s = await seeded(ctx, 'Ops')
  const url = `/workspaces/${s.workspaceId}`
  const members = async () => (await ctx.db.selectFrom('workspace_members').select('email').where('workspace_id', '=', s.workspaceId).execute()).length
  const before = await members()
  const bad = await s.browser.submit(url, `${url}/members`, { email: 'not an address', role: 'admin' })
  const badUrl = await followDraft(t, s.browser, bad, url, ['<p class="notice error" role="alert">The e-mail address is not valid.</p>', 'value="not an address"', '<option value="admin" selected>'], 'main')
  t.equal(await members(), before, 'refused and reloaded: nobody invited')
  t.notMatch((await (await anotherSession(ctx.app, s.user.email)).get(badUrl)).body, 'not an address', 'another session sees the empty form')
  await followDraft(t, s.browser, await s.browser.submit(url, `${url}/members`, { email: 'a@example.com', role: 'owner' }), url, ['Choose the role member or admin.'], 'main')
  await s.browser.submit(url, `${url}/members`, { email: 'a@example.com', role: 'member' })
  const first = await invitationLink(ctx, 'a@example.com')
  const repeat = await followed(t, s.browser, await s.browser.submit(url, `${url}/members`, { email: 'a@example.com', role: 'admin' }))
  t.match(repeat.body, 'a@example.com was invited already; their role is now admin.')
  const resent = await followed(t, s.browser, await s.browser.submit(url, `${url}/members/resend`, { email: 'a@example.com' }))
  t.equal(resent.statusCode, 200)
  const second = await invitationLink(ctx, 'a@example.com')
  t.not(second, first, 'a new link')
  t.equal((await new ConsoleClient(ctx.app).get(first)).statusCode, 404, 'the old link is dead')
  t.equal((await new ConsoleClient(ctx.app).get(second)).statusCode, 200)
  await followDraft(t, s.browser, await s.browser.submit(url, `${url}/members/resend`, { email: s.user.email.toLowerCase() }), url, ['has no open invitation to this workspace.'], 'main')
  await followDraft(t, s.browser, await s.browser.submit(url, `${url}/members/remove`, { email: s.user.email.toLowerCase() }), url, ['<p class="notice error" role="alert">'], 'main')
  await followDraft(t, s.browser, await s.browser.submit(url, `${url}/members/remove`, { email: 'nobody@example.com' }), url, ['Nobody@example.com is not a member of this workspace.'], 'main')

  const expired = await s.browser.submit(url, `${url}/members`, { email: 'late@example.com', role: 'member' })
  t.equal(expired.statusCode, 303)
  const late = await invitationLink(ctx, 'late@example.com')
  await ctx.db.updateTable('workspace_members').set({ invite_expires_at: new Date(Date.now() - 1000) }).where('email', '=', 'late@example.com').execute()
  const dead = await new ConsoleClient(ctx.app).get(late)
  t.equal(dead.statusCode, 404)
  t.match(dead.body, 'older than 7 days')

  const renamed = await s.browser.submit(url, url, { workspace_name: '  ', description: 'typed <here>' })
  const renamedUrl = await followDraft(t, s.browser, renamed, url, ['The name must be 1 to 100 characters long.', 'name="workspace_name" maxlength="100" required value=""', 'value="typed &lt;here&gt;"'], 'main')
  t.match(await ctx.db.selectFrom('workspaces').select('name').where('id', '=', s.workspaceId).executeTakeFirstOrThrow(), { name: 'Ops' }, 'not renamed')
  t.match((await (await anotherSession(ctx.app, s.user.email)).get(renamedUrl)).body, 'required value="Ops"', 'another session sees the stored name')
  t.match((await followed(t, s.browser, await s.browser.submit(url, url, { workspace_name: 'Operations', description: 'x' }))).body, '<p class="notice success" role="status">Saved.</p>')
  const inUse = await s.browser.submit(url, `${url}/delete`, {})
  const inUseUrl = await followDraft(t, s.browser, inUse, url, ['<p class="notice error" role="alert">Not deleted: the workspace still holds', 'required value="Operations"'], 'main')
  t.ok(await ctx.db.selectFrom('workspaces').select('id').where('id', '=', s.workspaceId).executeTakeFirst(), 'its agent still belongs to it: not deleted')
  t.notMatch((await (await anotherSession(ctx.app, s.user.email)).get(inUseUrl)).body, 'Not deleted', 'another session: no refusal shown')
  t.equal((await s.browser.post(`${url}/members`, { email: 'b@example.com', role: 'member' })).statusCode, 403, 'no CSRF token')
  const workspaces = async () => (await ctx.db.selectFrom('workspaces').select('id').where('user_id', '=', s.user.id).execute()).length
  const owned = await workspaces()
  const unnamed = await s.browser.submit('/workspaces', '/workspaces', { workspace_name: '', description: 'without a name' })
  const unnamedUrl = await followDraft(t, s.browser, unnamed, '/workspaces', ['<p class="notice error" role="alert">The name must be 1 to 100 characters long.</p>', 'value="without a name"'], 'create')
  t.equal(await workspaces(), owned, 'refused and reloaded: none created')
  t.notMatch((await (await anotherSession(ctx.app, s.user.email)).get(unnamedUrl)).body, 'without a name', 'another session sees the empty form')

  const stranger = await signedInWithKey(ctx)
  t.equal((await stranger.browser.get(url)).statusCode, 404, 'another account\'s workspace')
  t.equal((await stranger.browser.get('/workspaces/zzz')).statusCode, 404)
  t.equal((await stranger.browser.submit('/workspaces', `${url}/members`, { email: 'c@example.com', role: 'member' })).statusCode, 404)
  t.equal((await stranger.browser.submit('/workspaces', '/workspace', { workspace_id: s.workspaceId })).statusCode, 404, 'not a member: cannot work in it')
  t.equal((await stranger.browser.submit('/workspaces', '/workspace', { workspace_id: 'nonsense' })).statusCode, 404)
  t.equal((await new ConsoleClient(ctx.app).get('/workspaces')).headers.location, '/login?next=%2Fworkspaces')
  t.equal((await new ConsoleClient(ctx.app).get('/invitations/wi_nonsense')).statusCode, 404)
})

t.test('Post/Redirect/Get on the workspace page: a reload shows the outcome again without sending the invitation again; a made-up outcome says nothing', async (t) => {
  const ctx = await setup(t)
  const s = await seeded(ctx, 'Ops')
  const url = `/workspaces/${s.workspaceId}`
  const sent = async () => (await ctx.db.selectFrom('emails').select('id').where('to_address', '=', 'once@example.com').execute()).length
  const invited = await s.browser.submit(url, `${url}/members`, { email: 'once@example.com', role: 'member' })
  t.equal(invited.headers.location, `${url}?done=invited&email=once%40example.com&unsent=recorded`)
  for (let reload = 0; reload < 2; reload++) {
    const page = await s.browser.get(invited.headers.location as string)
    t.match(page.body, '<p class="notice success" role="status">once@example.com is invited.</p>')
    t.match(page.body, 'The invitation e-mail was not sent')
  }
  t.equal(await sent(), 1, 'one invitation e-mail however often the page is reloaded')

  // The query only repeats what happened: an address that is no open invitation, or still a member, shows nothing.
  for (const query of ['done=mailed&email=nobody%40example.com', 'done=removed&email=once%40example.com', 'done=reinvited&email=once%40example.com&role=owner', 'done=nonsense']) {
    const page = await s.browser.get(`${url}?${query}`)
    t.equal(page.statusCode, 200, query)
    t.notMatch(page.body, 'notice success', query)
  }
})
