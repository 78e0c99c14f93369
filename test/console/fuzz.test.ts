import t from 'tap'
import { newId } from '../../src/db/ids.ts'
import { inviteMember } from '../../src/modules/account/workspace-queries.ts'
import { storeRecordingPart } from '../../src/modules/calls/recordings.ts'
import { createLoginLink, createSession } from '../../src/modules/console/queries.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { createAccount, setup } from '../helpers/app.ts'
import { addAction, createAgent, insertCalls } from '../helpers/calls.ts'
import { createConsoleUser } from '../helpers/console-client.ts'
import { analysedCall } from '../helpers/deliveries.ts'
import { upload } from '../helpers/documents.ts'
import { crawl, fuzzRoutes, judge, routeTable } from '../helpers/fuzz.ts'

// The console's routes, every one of Fastify's route table but the API's, the browser calls' and Twilio's, fuzzed
// from the forms and links of its own pages (test/helpers/fuzz.ts): signed in as the owner or as a workspace member
// with a live session and its CSRF token, with a wrong or no token, and signed out (with the sign-in form's token).
// `npm test` runs a few cases per route besides the edge cases; `npm run fuzz` (FUZZ_RUNS, FUZZ_SEED) as many as asked.
const RUNS = Number(process.env.FUZZ_RUNS ?? 10)
const SEED = Number(process.env.FUZZ_SEED ?? 20240601)

/** Failures being fixed elsewhere: the run passes while they fail, and says when one no longer does. */
/** Routes that are not the console's: the API (test/fuzz.test.ts), its documents, and the keyless routes (test/fuzz-keyless.test.ts). */
const NOT_CONSOLE = /^\/(v1\/|docs|openapi\.json|health|web-call|telephony\/)/

t.test('every console route answers generated requests with a page, never a 500', async (t) => {
  // Nothing leaves loopback: the sandbox carrier, Twilio pointed at a closed local port, no SMTP, the built-in
  // analyser, no workers, and action tests refused to private addresses (every URL is on 127.0.0.1).
  const ctx = await setup(t, { PHONE_CARRIER: 'sandbox', TWILIO_API_URL: 'http://127.0.0.1:9', CALCOM_API_URL: 'http://127.0.0.1:9', CALENDLY_API_URL: 'http://127.0.0.1:9', HUBSPOT_API_URL: 'http://127.0.0.1:9', ANALYSER: 'builtin', DELIVERY_ALLOW_PRIVATE_NETWORKS: 'false' })
  const { app, db } = ctx
  const user = await createConsoleUser(db)
  const { key } = await createApiKey(db, user.id)
  const account = { user, key, headers: { 'x-api-key': key } }
  const post = async (url: string, payload: object) => (await app.inject({ method: 'POST', url, headers: account.headers, payload })).json()._id as string
  const agent = await createAgent(app, account, { data_retrieval: [{ name: 'plan', type: 'enum', enum_values: ['a', 'b'] }], webhook_url: 'http://127.0.0.1:9/hook' })
  const action = await addAction(app, account, agent._id, { url: 'http://127.0.0.1:9/hook', headers: { authorization: 'Bearer x' } })
  const workspace = await post('/v1/workspaces', { workspace_name: 'Fuzz' })
  const invitation = await inviteMember(db, user.id, workspace, 'invited@example.com', 'member')
  // A member of the workspace, which holds an agent of its own.
  const member = await createConsoleUser(db)
  await inviteMember(db, user.id, workspace, member.email, 'member')
  const memberKey = (await createApiKey(db, member.id)).key
  t.equal((await app.inject({ method: 'POST', url: `/v1/workspaces/${workspace}/accept-invitation`, headers: { 'x-api-key': memberKey } })).statusCode, 200)
  const shared = await createAgent(app, account, { agent_name: 'Shared' }, `?workspace_id=${workspace}`)
  const calls = await insertCalls(db, user.id, agent, [{}, { call_status: 'failed' }])
  await storeRecordingPart(db, { callId: calls[0], userId: user.id, pcm: Buffer.alloc(3200) })
  const kb = (await upload(app, '/v1/knowledge-base', account.headers, { name: 'Fuzz', description: 'notes' }, [{ name: 'notes.txt', content: 'Opening hours: 9 to 5.', type: 'text/plain' }])).json()
  await analysedCall(ctx, account, agent)
  // A contact of one of the calls (no call more: the crawl fetches three of a kind): its page and forms are crawled too.
  const contact = await db.insertInto('contacts').values({ id: newId(), user_id: user.id, phone_number: '+4930123456', last_call_at: new Date() }).returning('id').executeTakeFirstOrThrow()
  await db.updateTable('calls').set({ contact_id: contact.id }).where('id', '=', calls[1]).execute()
  const delivery = await db.selectFrom('webhook_deliveries').select('id').where('user_id', '=', user.id).executeTakeFirstOrThrow()
  const other = await createAccount(db)
  const otherAgent = await createAgent(app, other)
  const ids = [
    agent._id, shared._id, action._id, workspace, delivery.id, kb._id, kb.files?.[0]?._id, ...calls,
    await post('/v1/customer', { customer_name: 'Fuzz' }),
    await post('/v1/phone-number/buy', { area_code: '415' }),
    await post(`/v1/agent/${agent._id}/tools`, { tool_type: 'end_call', settings: { name: 'end' } })
  ].filter((id) => typeof id === 'string')
  const values = [
    ...ids, otherAgent._id, ...await insertCalls(db, other.user.id, otherAgent, [{}]), '0123456789abcdef01234567', ids[0].toUpperCase(),
    await createLoginLink(db, user.id), invitation.invited ? invitation.token : 'wi_x'
  ]
  const [loginLink, invitationToken] = values.slice(-2)

  const sessionOf = (userId: string, workspaceId?: string) => async () => {
    const { id, csrfToken } = await createSession(db, userId, { viaLink: false, workspaceId })
    return { headers: { cookie: `switchboard_session=${id}` }, csrf: csrfToken }
  }
  const session = sessionOf(user.id)
  // Signed out: the sign-in form's CSRF cookie and token, so that sign-in and invitation forms reach their handlers.
  const visitor = () => ({ headers: { cookie: 'switchboard_login_csrf=fuzz-login-token' }, csrf: 'fuzz-login-token' })
  const callers = { session, member: sessionOf(member.id, workspace), visitor }

  const routes = routeTable(app).filter((route) => !NOT_CONSOLE.test(route.url))
  const pages = routes.filter((route) => route.method === 'GET' && !route.url.includes(':')).map((route) => route.url)
  const samples = [
    ...await crawl(app, routes, pages, { name: 'session', credentials: await session() }),
    ...await crawl(app, routes, ['/login', `/login/link/${loginLink}`, `/invitations/${invitationToken}`], { name: 'visitor', credentials: visitor() })
  ]
  const report = await fuzzRoutes(app, { routes, samples, values, callers, weights: { session: 3, member: 1, visitor: 1 }, runs: RUNS, seed: SEED, html: true })
  t.comment(`${samples.length} forms and links crawled; routes without one: ${report.withoutSamples.join(', ') || 'none'}`)
  judge(t, 'console fuzz', report)
  t.ok(report.operations > 50, 'every console route was fuzzed')
})
