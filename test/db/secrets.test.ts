import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { sql } from 'kysely'
import { Webhook } from 'standardwebhooks'
import t, { type Test } from 'tap'
import { loadConfig } from '../../src/config.ts'
import { createDb, createPool, type DB } from '../../src/db/database.ts'
import { openEmbedded, stopEmbedded } from '../../src/db/embedded.ts'
import { newId } from '../../src/db/ids.ts'
import { createCipher, keyIdOf, loadSecretsKey, sealSecret, SecretsKeyError, stageKeyFile } from '../../src/db/secrets.ts'
import { prepareSecrets } from '../../src/db/stored-secrets.ts'
import { connectIntegration, insertState } from '../../src/modules/integrations/queries.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { addAction, createAgent } from '../helpers/calls.ts'
import { startReceiver, type Receiver } from '../helpers/receiver.ts'
import { runScript } from '../helpers/scripts.ts'
import { TEST_SECRETS_KEY } from '../setup/db-env.ts'

const ENV = { DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIMEOUT_MS: '2000' }
const SEALED = /^enc:v1:[0-9a-f]{8}:/
const OTHER_KEY = Buffer.alloc(32, 9).toString('base64')
const ROOT = path.resolve(import.meta.dirname, '../..')

/** One stored secret of every kind, given through the API; answers the plaintexts. */
async function storeEverything (t: Test, ctx: TestContext, account: Account, receiver: Receiver) {
  const { app } = ctx
  const headers = account.headers
  const plain = { sip: 'sip-pass-123', integration: 'crm-api-key-456', action: 'Bearer action-token-789', mcp: 'Bearer mcp-token-012', verifier: 'pkce-verifier-345' }
  t.equal((await app.inject({ method: 'PATCH', url: '/v1/phone-number/connect-to-sip', headers, payload: { phone_number: '+4930901821', termination_uri: 'sip:pbx.example.de', sip_trunk_auth_username: 'u', sip_trunk_auth_password: plain.sip } })).statusCode, 201)
  // Stored as PUT /v1/integrations/crm stores it after the account check (which needs HubSpot: integrations-connect.test.ts).
  await connectIntegration(ctx.db, account.user.id, 'crm', { account_label: '', method: 'api_key', credentials: { api_key: plain.integration } })
  // A pending OAuth authorization's PKCE verifier, as integrations/connect.ts keeps it.
  await insertState(ctx.db, { state_hash: 'a'.repeat(64), user_id: account.user.id, session_id: null, provider: 'calendar_one', code_verifier: sealSecret(plain.verifier), expires_at: new Date(Date.now() + 600_000) })
  const agent = await createAgent(app, account)
  const action = await addAction(app, account, agent._id, { url: `${receiver.url}/hook`, headers: { Authorization: plain.action } })
  const tool = await app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers, payload: { tool_type: 'mcp', settings: { name: 'mcp', server_url: 'https://mcp.example.com/', headers: { Authorization: plain.mcp } } } })
  t.equal(tool.statusCode, 201, tool.body)
  const secrets = (await app.inject({ method: 'GET', url: '/v1/webhook-secret', headers })).json()
  return { plain: { ...plain, signing: secrets.secret as string, test: secrets.test_secret as string }, agent, action }
}

/** Every stored secret value, read with SQL. */
async function storedValues (db: DB): Promise<string[]> {
  const { rows } = await sql<{ v: string }>`
    SELECT sip_password AS v FROM phone_numbers WHERE sip_password IS NOT NULL
    UNION ALL SELECT carrier_auth_token FROM phone_numbers WHERE carrier_auth_token IS NOT NULL
    UNION ALL SELECT secret FROM webhook_secrets
    UNION ALL SELECT secret FROM webhook_test_secrets
    UNION ALL SELECT e.value FROM integrations, jsonb_each_text(credentials) e
    UNION ALL SELECT e.value FROM agent_actions, jsonb_each_text(settings -> 'headers') e
    UNION ALL SELECT e.value FROM agent_tools, jsonb_each_text(settings -> 'headers') e
    UNION ALL SELECT code_verifier FROM oauth_states
    UNION ALL SELECT m[1] FROM agent_versions, regexp_matches(snapshot::text, '"(enc:v1:[^"]*)"', 'g') m`.execute(db)
  return rows.map((r) => r.v)
}

/** The action's test send: its real header and a signature that verifies with the account's test secret; the delivery secret reads as stored. */
async function checkDelivery (t: Test, ctx: TestContext, account: Account, receiver: Receiver, ids: { agent: string, action: string }, header: string, signing: string) {
  const before = receiver.received.length
  const sent = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${ids.agent}/actions/${ids.action}/test`, headers: account.headers })
  t.equal(sent.statusCode, 200, sent.body)
  const [request] = await receiver.waitFor(before + 1).then((all) => all.slice(before))
  t.equal(request.headers.authorization, header, 'the receiver gets the real header value')
  const secrets = (await ctx.app.inject({ method: 'GET', url: '/v1/webhook-secret', headers: account.headers })).json()
  t.equal(secrets.secret, signing, 'the delivery secret reads as it was made')
  t.doesNotThrow(() => new Webhook(secrets.test_secret).verify(request.body, request.headers as Record<string, string>), 'the signature verifies with the real test secret')
}

t.test('every kind of secret is stored encrypted, answers stay masked, deliveries use the real values', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const receiver = await startReceiver(t)
  const { plain, agent, action } = await storeEverything(t, ctx, account, receiver)

  const stored = await storedValues(ctx.db)
  t.equal(stored.length, 10, '7, and 3 copies in the agent\'s versions')
  for (const value of stored) {
    t.match(value, SEALED)
    t.equal(value.split(':')[2], keyIdOf(Buffer.from(TEST_SECRETS_KEY, 'base64')), 'sealed with the configured key')
  }
  const all = JSON.stringify(await sql`SELECT row_to_json(x) FROM (SELECT * FROM phone_numbers) x UNION ALL SELECT row_to_json(i) FROM integrations i
    UNION ALL SELECT row_to_json(a) FROM agent_actions a UNION ALL SELECT row_to_json(o) FROM agent_tools o UNION ALL SELECT row_to_json(w) FROM webhook_secrets w
    UNION ALL SELECT row_to_json(s) FROM webhook_test_secrets s UNION ALL SELECT row_to_json(v) FROM oauth_states v
    UNION ALL SELECT row_to_json(n) FROM agent_versions n`.execute(ctx.db))
  for (const value of Object.values(plain)) t.notOk(all.includes(value.replace(/^Bearer /, '')), `no plaintext ${value.slice(0, 12)}… in any row`)

  const actions = await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/actions`, headers: account.headers })
  t.same(actions.json()[0].settings.headers, { Authorization: '********' }, 'header values stay write-only')
  // A PATCH that sends the mask keeps the stored value.
  const kept = await ctx.app.inject({ method: 'PATCH', url: `/v1/agent/${agent._id}/actions/${action._id}`, headers: account.headers, payload: { settings: { headers: { Authorization: '********' }, name: 'Renamed' } } })
  t.equal(kept.statusCode, 200, kept.body)
  await checkDelivery(t, ctx, account, receiver, { agent: agent._id, action: action._id }, plain.action, plain.signing)
})

t.test('plaintexts left from before encryption are encrypted at start-up', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, account)
  const action = await addAction(ctx.app, account, agent._id, { url: `${receiver.url}/hook` })
  // Rows as an older version wrote them.
  const userId = account.user.id
  const signing = 'whsec_' + Buffer.alloc(32, 3).toString('base64')
  await ctx.db.insertInto('webhook_secrets').values({ id: newId(), user_id: userId, secret: signing }).execute()
  await ctx.db.insertInto('phone_numbers').values({ id: newId(), user_id: userId, phone_number: '+4930901822', source: 'imported', carrier: 'twilio', carrier_auth_token: 'legacy-token', sip_password: 'legacy-sip' }).execute()
  await ctx.db.insertInto('integrations').values({ user_id: userId, provider: 'crm', account_label: '', credentials: JSON.stringify({ api_key: 'legacy-key' }) }).execute()
  await sql`UPDATE agent_actions SET settings = settings || '{"headers": {"Authorization": "legacy-header"}}' WHERE id = ${action._id}`.execute(ctx.db)
  t.equal((await storedValues(ctx.db)).filter((v) => !SEALED.test(v)).length, 5)

  await prepareSecrets(ctx.config, ctx.db)
  const stored = await storedValues(ctx.db)
  t.equal(stored.length, 5)
  t.ok(stored.every((v) => SEALED.test(v)), 'every plaintext is encrypted')
  await prepareSecrets(ctx.config, ctx.db)
  t.same(await storedValues(ctx.db), stored, 'a second start changes nothing')
  await checkDelivery(t, ctx, account, receiver, { agent: agent._id, action: action._id }, 'legacy-header', signing)
})

t.test('rotation re-encrypts every secret; the server then reads with the new key; a wrong key is refused with a clear message', async (t) => {
  const ctx = await setup(t, ENV)
  const account = await createAccount(ctx.db)
  const receiver = await startReceiver(t)
  const { plain, agent, action } = await storeEverything(t, ctx, account, receiver)

  const same = await runScript('cli.ts', ctx.url, 'secrets', 'rotate', '--new-key', TEST_SECRETS_KEY)
  t.equal(same.code, 2)
  t.match(same.stderr, /the key in use now/)
  const bad = await runScript('cli.ts', ctx.url, 'secrets', 'rotate', '--new-key', 'short')
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--new-key must be 32 bytes/)

  const rotated = await runScript('cli.ts', ctx.url, 'secrets', 'rotate', '--new-key', OTHER_KEY)
  t.equal(rotated.code, 0, rotated.stderr)
  const rotatedId = keyIdOf(Buffer.from(OTHER_KEY, 'base64'))
  // 7, and 3 copies in the agent's versions (the action's header in two, the MCP tool's in one).
  t.match(rotated.stdout, `re-encrypted 10 stored secrets with key ${rotatedId}`)
  t.match(rotated.stdout, `now set SECRETS_KEY=${OTHER_KEY} on every process`)
  const stored = await storedValues(ctx.db)
  t.ok(stored.every((v) => v.startsWith(`enc:v1:${rotatedId}:`)), 'every secret is sealed with the new key')

  // The old key is refused, by the server's start-up and by the CLI, naming both keys.
  const oldId = keyIdOf(Buffer.from(TEST_SECRETS_KEY, 'base64'))
  await t.rejects(prepareSecrets(ctx.config, ctx.db), new SecretsKeyError(`stored secrets were encrypted with key ${rotatedId}, but the configured secrets key is ${oldId}: set SECRETS_KEY (or DATA_DIR/secrets.key) to the key the data was written with`))
  const stale = await runScript('cli.ts', ctx.url, 'user', 'list')
  t.equal(stale.code, 1)
  t.match(stale.stderr, `stored secrets were encrypted with key ${rotatedId}`)
  const server = await promisify(execFile)(process.execPath, ['src/main.ts'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: ctx.url, PORT: '0', LOG_LEVEL: 'info' } })
    .then(() => ({ code: 0, stdout: '', stderr: '' }), (err: { code: number, stdout: string, stderr: string }) => err)
  t.equal(server.code, 1, 'the server does not start')
  t.match(server.stdout + server.stderr, `stored secrets were encrypted with key ${rotatedId}`)

  // With the new key the API works end to end.
  await prepareSecrets(loadConfig({ DATABASE_URL: ctx.url, SECRETS_KEY: OTHER_KEY }), ctx.db)
  await checkDelivery(t, ctx, account, receiver, { agent: agent._id, action: action._id }, plain.action, plain.signing)
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/webhook-secret', headers: account.headers })).json().secret, plain.signing)
})

t.test('without SECRETS_KEY the embedded installation keeps its key in DATA_DIR/secrets.key (0600)', async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-secrets-'))
  t.teardown(async () => { await rm(dataDir, { recursive: true, force: true }) })
  const config = loadConfig({ DATA_DIR: dataDir })
  const key = await loadSecretsKey(config)
  const file = path.join(dataDir, 'secrets.key')
  t.equal((await stat(file)).mode & 0o777, 0o600)
  t.same(await loadSecretsKey(config), key, 'made once, then reused')
  t.same(await Promise.all([1, 2].map(async () => await loadSecretsKey(loadConfig({ DATA_DIR: path.join(dataDir, 'fresh') })))).then(([a, b]) => a.equals(b)), true, 'two first starts at once keep one key')

  const next = Buffer.alloc(32, 5)
  const staged = await stageKeyFile(dataDir, next)
  t.same(await loadSecretsKey(config), key, 'a staged key is not used before its commit')
  await staged.commit()
  t.same(await loadSecretsKey(config), next)
  t.equal((await stat(file)).mode & 0o777, 0o600)
  t.match(await readFile(file, 'utf8'), /^[A-Za-z0-9+/]{43}=\n$/)
  t.same(await loadSecretsKey(loadConfig({ DATA_DIR: dataDir, SECRETS_KEY: OTHER_KEY })), Buffer.from(OTHER_KEY, 'base64'), 'SECRETS_KEY wins over the file')
})

t.test('the cipher: envelopes name their key; another key or an altered value is refused', async (t) => {
  const a = createCipher(Buffer.alloc(32, 1))
  const b = createCipher(Buffer.alloc(32, 2))
  const sealed = a.seal('hunter2 ✓')
  t.match(sealed, new RegExp(`^enc:v1:${a.keyId}:`))
  t.not(a.seal('hunter2 ✓'), sealed, 'a new IV each time')
  t.equal(a.open(sealed), 'hunter2 ✓')
  t.equal(a.open('plain legacy value'), 'plain legacy value', 'a plaintext reads as it is')
  t.throws(() => b.open(sealed), { message: `a stored secret was encrypted with key ${a.keyId}, but the configured secrets key is ${b.keyId}: set SECRETS_KEY to the key the data was written with` })
  const at = sealed.length - 6
  const altered = sealed.slice(0, at) + (sealed[at] === 'A' ? 'B' : 'A') + sealed.slice(at + 1)
  t.throws(() => a.open(altered), { message: `a stored secret sealed with key ${a.keyId} does not decrypt: it was altered` })
})

t.test('embedded database: rotation rewrites DATA_DIR/secrets.key, and waits for the server to stop', async (t) => {
  const shm = await stat('/dev/shm').then(() => '/dev/shm', () => os.tmpdir())
  const dataDir = await mkdtemp(path.join(shm, 'switchboard-secrets-'))
  t.teardown(async () => {
    await stopEmbedded(dataDir)
    await rm(dataDir, { recursive: true, force: true })
  })
  const { SECRETS_KEY: _unused, ...withoutKey } = process.env
  const cli = async (...args: string[]) => await promisify(execFile)(process.execPath, ['scripts/cli.ts', ...args], { cwd: ROOT, env: { ...withoutKey, DATA_DIR: dataDir } })
    .then((out) => ({ code: 0, ...out }), (err: { code: number, stdout: string, stderr: string }) => err)

  t.equal((await cli('user', 'create', '--email', 'ada@example.com')).code, 0)
  const config = loadConfig({ DATA_DIR: dataDir })
  const first = createCipher(await loadSecretsKey(config))

  // A server (here: this process) runs on the cluster and holds the key.
  const running = await openEmbedded(dataDir, { mode: 'shared' })
  const pool = createPool(running.url, 1)
  const db = createDb(pool)
  const user = await db.selectFrom('users').select('id').executeTakeFirstOrThrow()
  await db.insertInto('webhook_secrets').values({ id: newId(), user_id: user.id, secret: first.seal('whsec_kept') }).execute()
  const refused = await cli('secrets', 'rotate')
  t.equal(refused.code, 2)
  t.match(refused.stderr, /stop the server first/)
  await pool.end()
  await running.stop()

  const rotated = await cli('secrets', 'rotate')
  t.equal(rotated.code, 0, rotated.stderr)
  const next = createCipher(await loadSecretsKey(config))
  t.not(next.keyId, first.keyId, 'the key file holds a new key')
  t.match(rotated.stdout, `re-encrypted 1 stored secret with key ${next.keyId} (was ${first.keyId})`)
  t.match(rotated.stdout, `${path.join(dataDir, 'secrets.key')} holds the new key`)
  t.equal((await stat(path.join(dataDir, 'secrets.key'))).mode & 0o777, 0o600)
  t.equal((await cli('user', 'list')).code, 0, 'the next start reads with the new key')

  const after = await openEmbedded(dataDir, { mode: 'shared' })
  const check = createPool(after.url, 1)
  const { secret } = await createDb(check).selectFrom('webhook_secrets').select('secret').executeTakeFirstOrThrow()
  await check.end()
  await after.stop()
  t.equal(next.open(secret), 'whsec_kept')
})
