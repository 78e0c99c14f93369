import t from 'tap'
import type pg from 'pg'
import { poolOf } from '../../src/db/database.ts'
import { generateApiKey } from '../../src/modules/users/keys.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { createAccount, setup } from '../helpers/app.ts'
import { poll } from '../helpers/poll.ts'

t.test('x-api-key: missing 401, unknown or malformed 403, revoked 403', async (t) => {
  const { app, db } = await setup(t)
  const { headers, user } = await createAccount(db)

  const missing = await app.inject({ method: 'GET', url: '/v1/voice/list' })
  t.equal(missing.statusCode, 401)
  t.same(missing.json(), { statusCode: 401, error: 'Unauthorized', message: 'the x-api-key header is required', code: 'missing_api_key' })

  for (const key of [generateApiKey(), 'not-a-key', 'sk_short']) {
    const res = await app.inject({ method: 'GET', url: '/v1/voice/list', headers: { 'x-api-key': key } })
    t.equal(res.statusCode, 403, `key ${key.slice(0, 6)}…`)
    t.equal(res.json().code, 'invalid_api_key')
  }

  t.equal((await app.inject({ method: 'GET', url: '/v1/voice/list', headers })).statusCode, 200)
  const [key] = (await app.inject({ method: 'GET', url: '/v1/api-keys', headers })).json()
  const revoked = await app.inject({ method: 'DELETE', url: `/v1/api-keys/${key._id}`, headers })
  t.equal(revoked.statusCode, 204)
  t.equal(revoked.body, '')
  const after = await app.inject({ method: 'GET', url: '/v1/voice/list', headers })
  t.equal(after.statusCode, 403)

  const stored = await db.selectFrom('api_keys').selectAll().where('user_id', '=', user.id).executeTakeFirstOrThrow()
  t.ok(stored.revoked_at instanceof Date, 'revocation time stored')
  t.match(stored.key_hash, /^[0-9a-f]{64}$/, 'only a hash is stored')
  t.notOk(JSON.stringify(stored).includes(headers['x-api-key']), 'the key itself is not stored')
})

t.test('concurrent requests with a key not seen lately share one lookup', async (t) => {
  const { app, db } = await setup(t)
  const { headers } = await createAccount(db)
  // Counts the key lookups every connection of the pool runs.
  const pool = poolOf(db)
  const connect = pool.connect.bind(pool) as () => Promise<pg.PoolClient>
  const counted = new WeakSet<pg.PoolClient>()
  let lookups = 0
  pool.connect = (async () => {
    const client = await connect()
    if (!counted.has(client)) {
      counted.add(client)
      const query = client.query.bind(client) as (...args: unknown[]) => unknown
      client.query = ((...args: unknown[]) => {
        const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text ?? ''
        if (/from "api_keys" where "key_hash"/.test(text)) lookups++
        return query(...args)
      }) as never
    }
    return client
  }) as never
  const statuses = await Promise.all(Array.from({ length: 20 }, async () => (await app.inject({ method: 'GET', url: '/v1/voice/list', headers })).statusCode))
  t.same(new Set(statuses), new Set([200]))
  t.equal(lookups, 1)
  const unknown = { 'x-api-key': generateApiKey() }
  const refused = await Promise.all(Array.from({ length: 20 }, async () => (await app.inject({ method: 'GET', url: '/v1/voice/list', headers: unknown })).statusCode))
  t.same(new Set(refused), new Set([403]))
  t.equal(lookups, 2)
})

t.test('a request sees only its own account', async (t) => {
  const { app, db } = await setup(t)
  const alice = await createAccount(db)
  const bob = await createAccount(db)
  await createApiKey(db, bob.user.id, { name: 'second' })

  const aliceKeys = (await app.inject({ method: 'GET', url: '/v1/api-keys', headers: alice.headers })).json()
  const bobKeys = (await app.inject({ method: 'GET', url: '/v1/api-keys', headers: bob.headers })).json()
  t.equal(aliceKeys.length, 1)
  t.equal(bobKeys.length, 2)

  // Another account's key is indistinguishable from a missing one, and stays active.
  const res = await app.inject({ method: 'DELETE', url: `/v1/api-keys/${bobKeys[0]._id}`, headers: alice.headers })
  t.equal(res.statusCode, 404)
  t.equal((await app.inject({ method: 'GET', url: '/v1/voice/list', headers: bob.headers })).statusCode, 200)
})

t.test('at most 3 active keys per user; a revoked key frees a place', async (t) => {
  const { app, db } = await setup(t)
  const { headers, user } = await createAccount(db)

  const second = await app.inject({ method: 'POST', url: '/v1/api-keys', headers, payload: { name: 'crm' } })
  t.equal(second.statusCode, 201)
  const body = second.json()
  t.match(body, { name: 'crm', prefix: /^sk_[0-9A-Za-z]{8}$/, key: /^sk_[0-9A-Za-z]{40}$/ })
  t.ok(body.key.startsWith(body.prefix))
  const works = await app.inject({ method: 'GET', url: '/v1/voice/list', headers: { 'x-api-key': body.key } })
  t.equal(works.statusCode, 200, 'the new key authenticates')

  t.equal((await app.inject({ method: 'POST', url: '/v1/api-keys', headers, payload: {} })).statusCode, 201)
  const fourth = await app.inject({ method: 'POST', url: '/v1/api-keys', headers, payload: {} })
  t.equal(fourth.statusCode, 409)
  t.match(fourth.json(), { code: 'key_limit_reached', message: /at most 3 active API keys/ })

  // The same limit holds under concurrent requests.
  await app.inject({ method: 'DELETE', url: `/v1/api-keys/${body._id}`, headers })
  const burst = await Promise.all([1, 2, 3].map(() => app.inject({ method: 'POST', url: '/v1/api-keys', headers, payload: {} })))
  t.same(burst.map((r) => r.statusCode).sort(), [201, 409, 409])
  const active = await db.selectFrom('api_keys').select('id').where('user_id', '=', user.id).where('revoked_at', 'is', null).execute()
  t.equal(active.length, 3)

  const listed = (await app.inject({ method: 'GET', url: '/v1/api-keys', headers })).json()
  t.equal(listed.length, 4)
  t.notOk(JSON.stringify(listed).includes('key_hash'))
  t.notOk(listed.some((k: Record<string, unknown>) => 'key' in k), 'keys are never listed')
})

t.test('last use is recorded', async (t) => {
  const { app, db } = await setup(t)
  const { headers, user } = await createAccount(db)
  await app.inject({ method: 'GET', url: '/v1/voice/list', headers })
  // Recording the use does not hold up the request: poll for it.
  const row = await poll(() => db.selectFrom('api_keys').select('last_used_at').where('user_id', '=', user.id).executeTakeFirstOrThrow(),
    (row) => row.last_used_at !== null, { timeoutMs: 5000, intervalMs: 0 })
  t.ok(row?.last_used_at instanceof Date)
})
