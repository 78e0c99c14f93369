import t from 'tap'
import { createAccount, setup } from '../helpers/app.ts'
import { startInbox } from '../helpers/smtp.ts'

t.test('workspaces: create, get, list, update, delete; the owner is the first member', async (t) => {
  const { app, db } = await setup(t)
  const { headers, user } = await createAccount(db, 'Owner@Example.com')

  const created = await app.inject({ method: 'POST', url: '/v1/workspaces', headers, payload: { workspace_name: 'Sales', description: 'outbound team', owner: 'x' } })
  t.equal(created.statusCode, 201)
  const ws = created.json()
  t.match(ws, { _id: /^[0-9a-f]{24}$/, workspace_name: 'Sales', description: 'outbound team', created_at: Number, updated_at: Number })
  t.same(Object.keys(ws).sort(), ['_id', 'created_at', 'description', 'members', 'updated_at', 'workspace_name'])
  t.match(ws.members, [{ email: 'owner@example.com', role: 'owner', status: 'active', invited_at: Number, joined_at: Number }])
  t.equal(ws.members.length, 1)

  const second = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers, payload: { workspace_name: 'Support' } })).json()
  t.equal(second.description, '')
  const list = await app.inject({ method: 'GET', url: '/v1/workspaces/list', headers })
  t.equal(list.statusCode, 200)
  t.same(list.json().map((w: { _id: string }) => w._id), [ws._id, second._id])
  t.equal(list.json()[0].members.length, 1)

  t.same((await app.inject({ method: 'GET', url: `/v1/workspaces/${ws._id}`, headers })).json(), ws)
  const updated = await app.inject({ method: 'PATCH', url: `/v1/workspaces/${ws._id}`, headers, payload: { workspace_name: 'Sales EU' } })
  t.equal(updated.statusCode, 200)
  t.match(updated.json(), { workspace_name: 'Sales EU', description: 'outbound team' })

  t.equal((await app.inject({ method: 'DELETE', url: `/v1/workspaces/${second._id}`, headers })).statusCode, 204)
  t.equal((await app.inject({ method: 'GET', url: `/v1/workspaces/${second._id}`, headers })).statusCode, 404)
  const rows = await db.selectFrom('workspaces').select('user_id').execute()
  t.same(rows, [{ user_id: user.id }])
})

t.test('workspaces: validation and malformed ids', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  const noName = await app.inject({ method: 'POST', url: '/v1/workspaces', headers, payload: { description: 'x' } })
  t.match(noName.json(), { statusCode: 400, message: 'body.workspace_name is required' })
  const long = await app.inject({ method: 'POST', url: '/v1/workspaces', headers, payload: { workspace_name: 'x'.repeat(101) } })
  t.match(long.json(), { statusCode: 400, message: /^body\.workspace_name must NOT have more than 100 characters/ })
  for (const [method, url] of [['GET', '/v1/workspaces/abc'], ['PATCH', '/v1/workspaces/abc'], ['DELETE', '/v1/workspaces/abc'],
    ['POST', '/v1/workspaces/abc/invite-member'], ['DELETE', '/v1/workspaces/abc/remove-member']] as const) {
    const res = await app.inject({ method, url, headers, payload: { email: 'a@b.example' } })
    t.equal(res.statusCode, 400, `${method} ${url}`)
    t.equal(res.json().code, 'invalid_id')
  }
  const ws = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers, payload: { workspace_name: 'W' } })).json()
  const badEmail = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/invite-member`, headers, payload: { email: 'nope' } })
  t.match(badEmail.json(), { statusCode: 400, message: /^body\.email must be an e-mail address/ })
  const badRole = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/invite-member`, headers, payload: { email: 'a@b.example', role: 'owner' } })
  t.match(badRole.json(), { statusCode: 400, message: /^body\.role .*\(admin, member\)/ })
  const noEmail = await app.inject({ method: 'DELETE', url: `/v1/workspaces/${ws._id}/remove-member`, headers })
  t.match(noEmail.json(), { statusCode: 400, message: 'email is required, in the body or the query' })
})

t.test('invitations: e-mail through SMTP, idempotent repeats, roles, removal by body or query', async (t) => {
  const inbox = await startInbox(t)
  const { app, db } = await setup(t, { SMTP_URL: inbox.url, MAIL_FROM: 'Switchboard <noreply@switchboard.test>' })
  const { headers, user } = await createAccount(db, 'boss@example.com')
  const ws = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers, payload: { workspace_name: 'Night shift' } })).json()

  const invited = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/invite-member`, headers, payload: { email: 'Carol@Example.com', role: 'admin' } })
  t.equal(invited.statusCode, 201)
  t.match(invited.json().members, [{ email: 'boss@example.com', role: 'owner' }, { email: 'carol@example.com', role: 'admin', status: 'invited', invited_at: Number, joined_at: null }])
  const [mail] = await inbox.waitFor(1)
  t.same(mail.to, ['carol@example.com'])
  t.equal(mail.from, 'noreply@switchboard.test')
  // Quoted-printable soft line breaks undone: what the reader's mail program shows.
  t.match(mail.raw.replace(/=\r\n/g, ''), new RegExp(`POST /v1/workspaces/${ws._id}/accept-invitation`))
  const stored = await db.selectFrom('emails').selectAll().execute()
  t.match(stored, [{ user_id: user.id, kind: 'workspace_invitation', to_address: 'carol@example.com', subject: 'You are invited to the workspace "Night shift"', status: 'sent', error: null, message_id: String }])
  t.ok(mail.raw.includes(`Message-ID: ${stored[0].message_id}`), 'the stored message id is the one sent')

  const again = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/invite-member`, headers, payload: { email: 'carol@example.com', role: 'admin' } })
  t.equal(again.statusCode, 200)
  t.same(again.json(), invited.json(), 'a repeated invitation changes nothing')
  const demoted = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/invite-member`, headers, payload: { email: 'carol@example.com', role: 'member' } })
  t.equal(demoted.statusCode, 200)
  t.equal(demoted.json().members[1].role, 'member')
  const defaultRole = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/invite-member`, headers, payload: { email: 'dave@example.com' } })
  t.equal(defaultRole.statusCode, 201)
  t.equal(defaultRole.json().members[2].role, 'member')
  await inbox.waitFor(2)
  t.equal(await db.selectFrom('emails').select('id').execute().then((r) => r.length), 2, 'one e-mail per new invitation')

  const owner = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/invite-member`, headers, payload: { email: 'BOSS@example.com' } })
  t.equal(owner.statusCode, 409)
  t.equal(owner.json().code, 'member_is_owner')

  const byBody = await app.inject({ method: 'DELETE', url: `/v1/workspaces/${ws._id}/remove-member`, headers, payload: { email: 'carol@example.com' } })
  t.equal(byBody.statusCode, 200)
  t.same(byBody.json().members.map((m: { email: string }) => m.email), ['boss@example.com', 'dave@example.com'])
  const byQuery = await app.inject({ method: 'DELETE', url: `/v1/workspaces/${ws._id}/remove-member?email=Dave%40example.com`, headers })
  t.equal(byQuery.statusCode, 200)
  t.same(byQuery.json().members.map((m: { email: string }) => m.email), ['boss@example.com'])
  const gone = await app.inject({ method: 'DELETE', url: `/v1/workspaces/${ws._id}/remove-member?email=dave@example.com`, headers })
  t.same(gone.json(), { statusCode: 404, error: 'Not Found', message: 'member not found', code: 'not_found' })
  const removeOwner = await app.inject({ method: 'DELETE', url: `/v1/workspaces/${ws._id}/remove-member`, headers, payload: { email: 'boss@example.com' } })
  t.equal(removeOwner.statusCode, 409)
})

t.test('invitations: accepted with the invited account\'s own key', async (t) => {
  const { app, db } = await setup(t)
  const owner = await createAccount(db)
  const erin = await createAccount(db, 'erin@example.com')
  const stranger = await createAccount(db)
  const ws = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers: owner.headers, payload: { workspace_name: 'Shared' } })).json()
  await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/invite-member`, headers: owner.headers, payload: { email: 'erin@example.com' } })

  const notInvited = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/accept-invitation`, headers: stranger.headers })
  t.same(notInvited.json(), { statusCode: 404, error: 'Not Found', message: 'invitation not found', code: 'not_found' })
  const accepted = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/accept-invitation`, headers: erin.headers })
  t.equal(accepted.statusCode, 200)
  t.match(accepted.json(), { workspace_id: ws._id, workspace_name: 'Shared', email: 'erin@example.com', role: 'member', status: 'active', joined_at: Number })
  const twice = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/accept-invitation`, headers: erin.headers })
  t.same(twice.json(), accepted.json())
  const seen = (await app.inject({ method: 'GET', url: `/v1/workspaces/${ws._id}`, headers: owner.headers })).json()
  t.match(seen.members[1], { email: 'erin@example.com', status: 'active' })
  t.equal((await app.inject({ method: 'GET', url: `/v1/workspaces/${ws._id}`, headers: erin.headers })).statusCode, 404, 'membership does not hand over the owner\'s records')
})

t.test('invitation e-mails without SMTP are recorded; a refusing server marks them failed', async (t) => {
  await t.test('no SMTP_URL', async (t) => {
    const { app, db } = await setup(t)
    const { headers } = await createAccount(db)
    const ws = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers, payload: { workspace_name: 'W' } })).json()
    const res = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/invite-member`, headers, payload: { email: 'x@example.com' } })
    t.equal(res.statusCode, 201)
    t.match(await db.selectFrom('emails').selectAll().execute(), [{ status: 'recorded', to_address: 'x@example.com', body_text: /accept-invitation/ }])
  })
  await t.test('SMTP refuses the recipient', async (t) => {
    const inbox = await startInbox(t, { reject: true })
    const { app, db } = await setup(t, { SMTP_URL: inbox.url })
    const { headers } = await createAccount(db)
    const ws = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers, payload: { workspace_name: 'W' } })).json()
    const res = await app.inject({ method: 'POST', url: `/v1/workspaces/${ws._id}/invite-member`, headers, payload: { email: 'y@example.com' } })
    t.equal(res.statusCode, 201, 'the invitation stands; the e-mail failure is recorded')
    t.match(await db.selectFrom('emails').selectAll().execute(), [{ status: 'failed', error: /550|mailbox unavailable/ }])
    t.equal(res.json().members[1].status, 'invited')
  })
})

t.test("workspaces: another account's workspace is a 404; one holding numbers cannot be deleted", async (t) => {
  const { app, db } = await setup(t)
  const alice = await createAccount(db)
  const bob = await createAccount(db)
  const ws = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers: alice.headers, payload: { workspace_name: 'Alice' } })).json()
  const attempts = [
    ['GET', `/v1/workspaces/${ws._id}`, undefined],
    ['PATCH', `/v1/workspaces/${ws._id}`, { workspace_name: 'mine' }],
    ['DELETE', `/v1/workspaces/${ws._id}`, undefined],
    ['POST', `/v1/workspaces/${ws._id}/invite-member`, { email: 'spy@example.com' }],
    ['DELETE', `/v1/workspaces/${ws._id}/remove-member`, { email: 'spy@example.com' }]
  ] as const
  for (const [method, url, payload] of attempts) {
    const res = await app.inject({ method, url, headers: bob.headers, payload })
    t.equal(res.statusCode, 404, `${method} ${url}`)
    t.equal(res.json().message, 'workspace not found')
  }
  t.same((await app.inject({ method: 'GET', url: '/v1/workspaces/list', headers: bob.headers })).json(), [])
  t.equal(await db.selectFrom('workspace_members').select('email').execute().then((r) => r.length), 1)

  const bought = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: alice.headers, payload: { phone_number: '+12125550100', workspace_id: ws._id } })
  t.equal(bought.statusCode, 201)
  const refused = await app.inject({ method: 'DELETE', url: `/v1/workspaces/${ws._id}`, headers: alice.headers })
  t.equal(refused.statusCode, 409)
  t.same(refused.json(), { statusCode: 409, error: 'Conflict', code: 'workspace_in_use', message: 'the workspace still holds 1 phone number; delete them or move them to another workspace first' })
  const listed = await app.inject({ method: 'GET', url: `/v1/phone-number/list?workspace_id=${ws._id}`, headers: alice.headers })
  t.same(listed.json().map((n: { phone_number: string }) => n.phone_number), ['+12125550100'])
})
