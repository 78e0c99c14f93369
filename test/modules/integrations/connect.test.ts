import { createHash } from 'node:crypto'
import t from 'tap'
import { newId } from '../../../src/db/ids.ts'
import { isSealed } from '../../../src/db/secrets.ts'
import { markRevoked } from '../../../src/modules/integrations/queries.ts'
import { createApiKey } from '../../../src/modules/users/queries.ts'
import { createAccount, setup, type TestContext } from '../../helpers/app.ts'
import { anotherSession, ConsoleClient, createConsoleUser, csrfOf, followDraft, PASSWORD } from '../../helpers/console-client.ts'
import { accountsStandIn, ACCOUNT_EMAIL, CALENDLY_ACCOUNT, CALENDLY_TOKEN, CLIENT_ID } from '../../helpers/oauth-connect.ts'

// Connecting accounts (docs/integrations.md): the OAuth 2.0 authorization code flow with PKCE through the API and
// the console's routes, its refusals (another session's state, a replayed or expired one, no code, the provider's
// error, a failing token endpoint), API keys checked before they are kept, and disconnecting. The provider is a
// loopback stand-in for Google's OAuth endpoints and Calendar API, and for Calendly's API.

const PUBLIC = 'http://127.0.0.1:3999'

async function connectSetup (t: Parameters<typeof setup>[0], extra: Record<string, string> = {}) {
  const google = await accountsStandIn(t)
  const ctx = await setup(t, { ...google.env, PUBLIC_BASE_URL: PUBLIC, ...extra })
  return { ctx, google }
}

/** The person's Allow on the provider's page: the code and state the provider sends the browser back with. */
async function allow (authorizationUrl: string): Promise<{ code: string, state: string }> {
  const url = new URL(authorizationUrl)
  const form = new URLSearchParams(url.searchParams)
  form.set('decision', 'allow')
  const res = await fetch(`${url.origin}${url.pathname}`, { method: 'POST', body: form, redirect: 'manual' })
  const back = new URL(res.headers.get('location')!)
  return { code: back.searchParams.get('code')!, state: back.searchParams.get('state')! }
}

const callback = (query: Record<string, string>) => `/integrations/oauth/callback?${new URLSearchParams(query).toString()}`

async function signedIn (ctx: TestContext, email?: string) {
  const user = email === undefined ? await createConsoleUser(ctx.db) : undefined
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(user?.email ?? email!, PASSWORD)
  return { user: user!, browser }
}

/** Connect on the console's page: the 303's Location is the provider's authorize URL. */
async function connectIn (browser: ConsoleClient, provider = 'calendar_one'): Promise<string> {
  const res = await browser.submit('/integrations', `/integrations/${provider}/connect`, {})
  if (res.statusCode !== 303) throw new Error(`connect answered ${res.statusCode}: ${res.body}`)
  return res.headers.location as string
}

async function integration (ctx: TestContext, userId: string, provider = 'calendar_one') {
  return await ctx.db.selectFrom('integrations').selectAll().where('user_id', '=', userId).where('provider', '=', provider).executeTakeFirst()
}

t.test('API: an authorization URL with PKCE; the callback connects the API key\'s account and names it', async (t) => {
  const { ctx, google } = await connectSetup(t)
  const account = await createAccount(ctx.db)
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/integrations/calendar_one/authorizations', headers: account.headers })
  t.equal(res.statusCode, 201)
  const { authorization_url: authorizationUrl, expires_at: expiresAt } = res.json()
  const url = new URL(authorizationUrl)
  t.equal(`${url.origin}${url.pathname}`, `${google.calendar.origin}/o/oauth2/v2/auth`)
  const q = Object.fromEntries(url.searchParams)
  t.match(q, {
    client_id: CLIENT_ID,
    redirect_uri: `${PUBLIC}/integrations/oauth/callback`,
    response_type: 'code',
    scope: 'https://www.googleapis.com/auth/calendar.events https://www.googleapis.com/auth/calendar.freebusy',
    code_challenge_method: 'S256',
    access_type: 'offline',
    prompt: 'consent'
  })
  t.match(q.state, /^[A-Za-z0-9_-]{43}$/)
  t.match(q.code_challenge, /^[A-Za-z0-9_-]{43}$/)
  t.ok(Math.abs(expiresAt - (Date.now() + 10 * 60_000)) < 60_000, 'works for 10 minutes')
  const stored = await ctx.db.selectFrom('oauth_states').selectAll().executeTakeFirstOrThrow()
  t.equal(stored.state_hash, createHash('sha256').update(q.state).digest('hex'), 'the state is kept only as its hash')
  t.ok(isSealed(stored.code_verifier), 'the verifier is sealed')
  t.equal(stored.session_id, null, 'bound to the account, not to a console session')

  const { code, state } = await allow(authorizationUrl)
  // Whoever opens the link (the integrator's user) sees a plain page: no console session is needed.
  const done = await ctx.app.inject({ method: 'GET', url: callback({ code, state }) })
  t.equal(done.statusCode, 200)
  t.match(done.body, `Google Calendar is connected to the Switchboard account as ${ACCOUNT_EMAIL}`)
  const exchange = Object.fromEntries(google.oauth.tokenRequests[0])
  t.match(exchange, { grant_type: 'authorization_code', code, redirect_uri: `${PUBLIC}/integrations/oauth/callback`, client_id: CLIENT_ID })
  t.match(exchange.code_verifier, /^[A-Za-z0-9_-]{43}$/)

  const list = await ctx.app.inject({ method: 'GET', url: '/v1/integrations', headers: account.headers })
  const google1 = list.json().find((row: { provider: string }) => row.provider === 'calendar_one')
  t.match(google1, { provider: 'calendar_one', service: 'Google Calendar', methods: ['oauth'], oauth_configured: true, connected: true, status: 'connected', method: 'oauth', account_label: ACCOUNT_EMAIL, active_tools: 0 })
  t.ok(google1.expires_at > Date.now(), 'the access token\'s expiry is shown')
  for (const { token } of google.oauth.accessTokens()) t.notOk(list.body.includes(token), 'never a token')
  const row = await integration(ctx, account.user.id)
  t.notOk(JSON.stringify(row!.credentials).includes(google.oauth.accessTokens()[0].token), 'tokens are sealed at rest')
  t.equal(await ctx.db.selectFrom('oauth_states').select('state_hash').executeTakeFirst(), undefined, 'the state is spent')
})

t.test('API: OAuth refused for a provider without an OAuth client here (409) or without OAuth (422); keys refused for OAuth-only providers', async (t) => {
  const ctx = await setup(t, { PUBLIC_BASE_URL: PUBLIC })
  const account = await createAccount(ctx.db)
  const unconfigured = await ctx.app.inject({ method: 'POST', url: '/v1/integrations/calendar_one/authorizations', headers: account.headers })
  t.equal(unconfigured.statusCode, 409)
  t.match(unconfigured.json(), { code: 'integration_not_configured', message: /not configured on this installation.*GOOGLE_CLIENT_ID and GOOGLE_CLIENT_SECRET/ })
  const calcom = await ctx.app.inject({ method: 'POST', url: '/v1/integrations/booking_one/authorizations', headers: account.headers })
  t.equal(calcom.statusCode, 422)
  t.equal(calcom.json().code, 'auth_method_not_offered')
  const key = await ctx.app.inject({ method: 'PUT', url: '/v1/integrations/calendar_one', headers: account.headers, payload: { api_key: 'x' } })
  t.equal(key.statusCode, 422)
  t.match(key.json(), { code: 'auth_method_not_offered', message: /OAuth only/ })
  t.equal((await ctx.app.inject({ method: 'POST', url: '/v1/integrations/fax/authorizations', headers: account.headers })).statusCode, 400)
  t.equal((await ctx.app.inject({ method: 'POST', url: '/v1/integrations/calendar_one/authorizations' })).statusCode, 401)
  const list = (await ctx.app.inject({ method: 'GET', url: '/v1/integrations', headers: account.headers })).json()
  t.match(list.find((row: { provider: string }) => row.provider === 'calendar_one'), { oauth_configured: false, status: 'not_connected', connected: false, method: null })
})

t.test('console: Connect, Allow, and back on the Integrations page connected in the same session', async (t) => {
  const { ctx } = await connectSetup(t)
  const { user, browser } = await signedIn(ctx)
  const location = await connectIn(browser)
  const row = await ctx.db.selectFrom('oauth_states').select(['session_id', 'user_id']).executeTakeFirstOrThrow()
  t.equal(row.user_id, user.id)
  t.match(row.session_id, /^[0-9a-f]{64}$/, 'bound to the console session')
  const back = await browser.get(callback(await allow(location)))
  t.equal(back.statusCode, 303)
  t.equal(back.headers.location, '/integrations?connected=calendar_one')
  const page = await browser.get(back.headers.location as string)
  t.match(page.body, `Google Calendar is connected as ${ACCOUNT_EMAIL}.`)
  t.match(page.body, new RegExp(`id="integration-calendar_one-account">${ACCOUNT_EMAIL}<`))
  t.equal((await integration(ctx, user.id))?.method, 'oauth')
})

t.test('a state started in another session, used twice, expired, without a code, refused by the provider or the token endpoint: nothing connected', async (t) => {
  const { ctx, google } = await connectSetup(t)
  const { user, browser } = await signedIn(ctx)
  const other = await signedIn(ctx)
  const failure = async (res: Awaited<ReturnType<ConsoleClient['get']>>, reason: string) => {
    t.equal(res.statusCode, 303, reason)
    t.match(res.headers.location, new RegExp(`^/integrations\\?failed=${reason}`), reason)
  }

  // Another person's session, and the same person in another browser: both refused, and the state is spent.
  const stolen = await allow(await connectIn(browser))
  await failure(await other.browser.get(callback(stolen)), 'other_session')
  const secondBrowser = new ConsoleClient(ctx.app)
  await secondBrowser.signIn(user.email, PASSWORD)
  const mine = await allow(await connectIn(browser))
  await failure(await secondBrowser.get(callback(mine)), 'other_session')
  await failure(await browser.get(callback(mine)), 'unknown_state')
  t.equal(google.oauth.tokenRequests.length, 0, 'no code was exchanged')
  const shown = await browser.get('/integrations?failed=other_session&provider=calendar_one')
  t.match(shown.body, 'The connection to Google Calendar was started in another browser or session')

  // Replayed: the first callback connects, the second is refused.
  const once = callback(await allow(await connectIn(browser)))
  t.equal((await browser.get(once)).headers.location, '/integrations?connected=calendar_one')
  await failure(await browser.get(once), 'unknown_state')
  t.equal(google.oauth.tokenRequests.length, 1)
  await ctx.db.deleteFrom('integrations').execute()

  // Expired: the row's time moved back instead of waiting 10 minutes.
  const late = await allow(await connectIn(browser))
  await ctx.db.updateTable('oauth_states').set({ expires_at: new Date(Date.now() - 1000) }).execute()
  await failure(await browser.get(callback(late)), 'expired')
  t.match((await browser.get('/integrations?failed=expired&provider=calendar_one')).body, 'took longer than 10 minutes')

  // No code; the person said no; another error of the provider.
  await failure(await browser.get(callback({ state: (await allow(await connectIn(browser))).state })), 'missing_code')
  await failure(await browser.get(callback({ state: (await allow(await connectIn(browser))).state, error: 'access_denied' })), 'denied')
  const odd = await browser.get(callback({ state: (await allow(await connectIn(browser))).state, error: 'server_error' }))
  t.equal(odd.headers.location, '/integrations?failed=provider_error&provider=calendar_one&detail=server_error')
  t.match((await browser.get(odd.headers.location as string)).body, 'Google Calendar answered with an error (server_error)')
  t.equal(google.oauth.tokenRequests.length, 1, 'none of these exchanged a code')

  // The token endpoint refuses the code, or fails.
  google.oauth.failNext('token', 400, { error: 'invalid_grant', error_description: 'Bad Request' })
  const refused = await browser.get(callback(await allow(await connectIn(browser))))
  t.equal(refused.headers.location, '/integrations?failed=token_failed&provider=calendar_one&detail=invalid_grant')
  t.match((await browser.get(refused.headers.location as string)).body, 'Google Calendar refused the authorization code (invalid_grant)')
  google.oauth.failNext('token', 500, 'oops')
  t.equal((await browser.get(callback(await allow(await connectIn(browser))))).headers.location, '/integrations?failed=token_failed&provider=calendar_one&detail=HTTP+500')
  // The account check fails after a good exchange: nothing kept.
  google.calendar.failNext(403, { reason: 'insufficientPermissions' })
  t.equal((await browser.get(callback(await allow(await connectIn(browser))))).headers.location, '/integrations?failed=account_failed&provider=calendar_one&detail=HTTP+403')
  // A fresh token the API refuses at once: a failed check, not a refresh (the grant is new).
  google.calendar.failNext(401, { reason: 'authError' })
  t.equal((await browser.get(callback(await allow(await connectIn(browser))))).headers.location, '/integrations?failed=account_failed&provider=calendar_one&detail=revoked')

  // A state nobody made, or none at all.
  await failure(await browser.get(callback({ state: 'made-up', code: 'x' })), 'unknown_state')
  await failure(await browser.get('/integrations/oauth/callback'), 'unknown_state')
  t.equal(await integration(ctx, user.id), undefined, 'nothing was connected by any of them')
  t.equal(await integration(ctx, other.user.id), undefined)
})

t.test('one state fired at the callback 20 times at once connects once; the others are refused', async (t) => {
  const { ctx, google } = await connectSetup(t)
  const { user, browser } = await signedIn(ctx)
  const url = callback(await allow(await connectIn(browser)))
  const answers = await Promise.all(Array.from({ length: 20 }, () => browser.get(url)))
  const places = answers.map((res) => res.headers.location)
  t.equal(places.filter((place) => place === '/integrations?connected=calendar_one').length, 1)
  t.equal(places.filter((place) => place === '/integrations?failed=unknown_state').length, 19)
  t.equal(google.oauth.tokenRequests.length, 1, 'one code exchange')
  t.equal((await integration(ctx, user.id))?.status, 'connected')
})

t.test('the token endpoint cannot be reached: the page says so', async (t) => {
  const { ctx } = await connectSetup(t, { GOOGLE_TOKEN_URL: 'http://127.0.0.1:9/token' })
  const { browser } = await signedIn(ctx)
  t.equal((await browser.get(callback(await allow(await connectIn(browser))))).headers.location, '/integrations?failed=unreachable&provider=calendar_one')
})

t.test('API keys: checked at the service once, named after the account; a refused key or an unreachable service stores nothing', async (t) => {
  const { ctx, google } = await connectSetup(t)
  const account = await createAccount(ctx.db)
  const put = (payload: Record<string, string>) => ctx.app.inject({ method: 'PUT', url: '/v1/integrations/booking_two', headers: account.headers, payload })

  const bad = await put({ api_key: 'wrong-token' })
  t.equal(bad.statusCode, 422)
  t.match(bad.json(), { code: 'integration_rejected', message: /^Calendly refused the key \(HTTP 401\)/ })
  t.equal(await integration(ctx, account.user.id, 'booking_two'), undefined, 'nothing stored')

  const good = await put({ api_key: CALENDLY_TOKEN })
  t.equal(good.statusCode, 200)
  t.match(good.json(), { provider: 'booking_two', service: 'Calendly', status: 'connected', method: 'api_key', account_label: CALENDLY_ACCOUNT })
  t.notOk(good.body.includes(CALENDLY_TOKEN))
  t.equal((await put({ api_key: CALENDLY_TOKEN, account_label: '' })).json().account_label, CALENDLY_ACCOUNT, 'an empty label is none')
  t.equal((await put({ api_key: CALENDLY_TOKEN, account_label: 'Front desk' })).json().account_label, 'Front desk', 'a given label wins')

  // A bad key sent later leaves the working connection as it was.
  t.equal((await put({ api_key: 'another-wrong-token' })).statusCode, 422)
  const kept = await integration(ctx, account.user.id, 'booking_two')
  t.match(kept, { account_label: 'Front desk', status: 'connected' })

  google.calendly.queued.push({ status: 500, body: { title: 'Internal Server Error', message: 'failing' } })
  const failing = await put({ api_key: CALENDLY_TOKEN })
  t.equal(failing.statusCode, 503)
  t.equal(failing.json().code, 'integration_unavailable')
})

t.test('a revoked connection: listed as revoked with the reason, and the console offers Reconnect and Disconnect', async (t) => {
  const { ctx, google } = await connectSetup(t)
  const { user, browser } = await signedIn(ctx)
  t.equal((await browser.get(callback(await allow(await connectIn(browser))))).headers.location, '/integrations?connected=calendar_one')
  await markRevoked(ctx.db, user.id, 'calendar_one', 'Google Calendar answered 401: Request had invalid authentication credentials.')
  const page = (await browser.get('/integrations')).body
  t.match(page, 'id="integration-calendar_one-status">Access revoked or expired: reconnect<')
  t.match(page, '<dd>Google Calendar answered 401: Request had invalid authentication credentials.</dd>')
  t.match(page, '>Reconnect Google Calendar</button>')
  t.match(page, '>Disconnect Google Calendar</button>')
  const { key } = await createApiKey(ctx.db, user.id)
  const listed = (await ctx.app.inject({ method: 'GET', url: '/v1/integrations', headers: { 'x-api-key': key } })).json()[0]
  t.match(listed, { provider: 'calendar_one', connected: false, status: 'revoked', status_reason: /^Google Calendar answered 401/, method: 'oauth', account_label: ACCOUNT_EMAIL })
  // Reconnecting makes it connected again, and revokes the grant it replaces.
  const replaced = google.oauth.tokenRequests.length
  t.equal((await browser.get(callback(await allow(await connectIn(browser))))).headers.location, '/integrations?connected=calendar_one')
  t.match(await integration(ctx, user.id), { status: 'connected', status_reason: null })
  t.equal(google.oauth.tokenRequests.length, replaced + 1)
  t.equal(google.oauth.revoked.length, 1, 'the replaced refresh token is revoked')
  t.same(google.oauth.accessTokens().map((token) => token.live), [false, true], 'the new grant works, the old one does not')
})

t.test('API keys: a service that does not answer is 503 integration_unavailable', async (t) => {
  const ctx = await setup(t, { CALENDLY_API_URL: 'http://127.0.0.1:9', DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true' })
  const account = await createAccount(ctx.db)
  const res = await ctx.app.inject({ method: 'PUT', url: '/v1/integrations/booking_two', headers: account.headers, payload: { api_key: 'k' } })
  t.equal(res.statusCode, 503)
  t.match(res.json(), { code: 'integration_unavailable', message: /^Calendly could not be reached/ })
  t.equal(await integration(ctx, account.user.id, 'booking_two'), undefined)
})

t.test('API: a refused authorization sends the browser to a page that says why, and a reload says it again', async (t) => {
  const { ctx } = await connectSetup(t)
  const account = await createAccount(ctx.db)
  const { authorization_url: url } = (await ctx.app.inject({ method: 'POST', url: '/v1/integrations/calendar_one/authorizations', headers: account.headers })).json()
  const back = await ctx.app.inject({ method: 'GET', url: callback({ state: (await allow(url)).state, error: 'access_denied' }) })
  t.equal(back.statusCode, 303)
  t.equal(back.headers.location, '/integrations/oauth/not-connected?failed=denied&provider=calendar_one')
  for (const view of ['first view', 'reload']) {
    const page = await ctx.app.inject({ method: 'GET', url: back.headers.location as string })
    t.equal(page.statusCode, 200, view)
    t.match(page.body, 'Google Calendar was not connected: access was not allowed on Google Calendar&#39;s page.', view)
  }
  t.equal(await integration(ctx, account.user.id), undefined, 'nothing connected')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/integrations/oauth/not-connected?failed=made-up' })).statusCode, 404, 'a reason it does not know')
})

/** An account connected to Google through the API, with one active calendar_one tool (inserted: the type's checks are not this file's). */
async function connectedWithTool (ctx: TestContext) {
  const account = await createAccount(ctx.db)
  const { authorization_url: url } = (await ctx.app.inject({ method: 'POST', url: '/v1/integrations/calendar_one/authorizations', headers: account.headers })).json()
  const done = await ctx.app.inject({ method: 'GET', url: callback(await allow(url)) })
  if (done.statusCode !== 200) throw new Error(`the callback answered ${done.statusCode}`)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: {} })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Desk', llm_id: llm._id } })).json()
  const toolId = newId()
  await ctx.db.insertInto('agent_tools').values({
    id: toolId, user_id: account.user.id, agent_id: agent._id, tool_type: 'calendar_one', is_active: true,
    settings: JSON.stringify({ name: 'Calendar', calendar_id: 'primary', time_zone: 'Europe/Berlin', duration_minutes: 30 })
  }).execute()
  return { account, toolId }
}

t.test('disconnect revokes the refresh token at Google, deletes the tokens and switches the tools off, saying how many', async (t) => {
  const { ctx, google } = await connectSetup(t)
  const { account, toolId } = await connectedWithTool(ctx)
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/integrations', headers: account.headers })).json()[0].active_tools, 1)
  const res = await ctx.app.inject({ method: 'DELETE', url: '/v1/integrations/calendar_one', headers: account.headers })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { provider: 'calendar_one', connected: false, tools_switched_off: 1 })
  t.equal(google.oauth.revoked.length, 1, 'revoked at the provider')
  t.match(google.oauth.revoked[0], /^refresh-/, 'the refresh token, which takes its access tokens with it')
  t.same(google.oauth.accessTokens().map((token) => token.live), [false])
  t.equal(await integration(ctx, account.user.id), undefined)
  t.equal((await ctx.db.selectFrom('agent_tools').select('is_active').where('id', '=', toolId).executeTakeFirstOrThrow()).is_active, false)
  t.equal((await ctx.app.inject({ method: 'DELETE', url: '/v1/integrations/calendar_one', headers: account.headers })).statusCode, 404)
})

t.test('a revocation the provider refuses is logged and the local disconnect happens all the same', async (t) => {
  const { ctx, google } = await connectSetup(t)
  const { account } = await connectedWithTool(ctx)
  google.oauth.failNext('revoke', 503, { error: 'temporarily_unavailable' })
  const res = await ctx.app.inject({ method: 'DELETE', url: '/v1/integrations/calendar_one', headers: account.headers })
  t.equal(res.statusCode, 200)
  t.equal(res.json().tools_switched_off, 1)
  t.equal(await integration(ctx, account.user.id), undefined)
})

t.test('console: a provider without an OAuth client says so and names the variables; keys are checked; disconnect says how many tools', async (t) => {
  const { ctx } = await connectSetup(t, { GOOGLE_CLIENT_ID: '', GOOGLE_CLIENT_SECRET: '' })
  const { user, browser } = await signedIn(ctx)
  const page = await browser.get('/integrations')
  t.equal(page.statusCode, 200)
  t.match(page.body, /id="integration-calendar_one-unconfigured">Connecting with OAuth is not configured on this installation[^<]*<code>GOOGLE_CLIENT_ID<\/code> and <code>GOOGLE_CLIENT_SECRET<\/code>/)
  const refusedConnect = await browser.post('/integrations/calendar_one/connect', { csrf_token: csrfOf(page.body) })
  await followDraft(t, browser, refusedConnect, '/integrations', ['<p class="notice error" role="alert">', 'not configured on this installation'], 'main')

  const wrong = await browser.submit('/integrations', '/integrations/booking_two/key', { api_key: 'wrong' })
  const wrongUrl = await followDraft(t, browser, wrong, '/integrations', ['id="booking_two-api_key-error" class="field-error">Calendly refused the key (HTTP 401)', 'aria-invalid="true"'], 'booking_two-api_key')
  t.notOk((await browser.get(wrongUrl)).body.includes('value="wrong"'), 'the key is not written back')
  t.notMatch(JSON.stringify(await ctx.db.selectFrom('console_drafts').select('form_values').execute()), 'wrong', 'nor kept in a draft')
  t.equal(await integration(ctx, user.id, 'booking_two'), undefined, 'nothing connected')
  t.notMatch((await (await anotherSession(ctx.app, user.email)).get(wrongUrl)).body, 'Calendly refused the key', 'another session sees the page without the refusal')
  const empty = await browser.submit('/integrations', '/integrations/booking_two/key', { api_key: ' ' })
  await followDraft(t, browser, empty, '/integrations', ['Paste the key or token (at most 2,000 characters).'], 'booking_two-api_key')
  const right = await browser.submit('/integrations', '/integrations/booking_two/key', { api_key: CALENDLY_TOKEN })
  t.equal(right.headers.location, '/integrations?connected=booking_two')
  t.match((await browser.get('/integrations?connected=booking_two')).body, `Calendly is connected as ${CALENDLY_ACCOUNT}.`)

  const off = await browser.submit('/integrations', '/integrations/booking_two/disconnect', {})
  t.equal(off.headers.location, '/integrations?disconnected=booking_two&tools=0')
  t.match((await browser.get(off.headers.location as string)).body, 'Calendly is disconnected; 0 tools were switched off.')
  t.equal(await integration(ctx, user.id, 'booking_two'), undefined)
  await followDraft(t, browser, await browser.submit('/integrations', '/integrations/booking_two/disconnect', {}), '/integrations', ['That integration is not connected.'], 'main')
  t.equal((await browser.submit('/integrations', '/integrations/fax/disconnect', {})).statusCode, 404)
  // Forms without the CSRF token are refused before anything happens.
  t.equal((await browser.post('/integrations/calendar_one/connect', {})).statusCode, 403)
})
