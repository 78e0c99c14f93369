import t from 'tap'
import { KeyCache } from '../../src/modules/users/auth.ts'
import { generateApiKey } from '../../src/modules/users/keys.ts'
import type { KeyOwner } from '../../src/modules/users/queries.ts'
import { createAccount, setup } from '../helpers/app.ts'

t.test('requests are limited per API key, and per address without a known key; /health is not', async (t) => {
  const { app, db } = await setup(t, { RATE_LIMIT_PER_KEY: '5', RATE_LIMIT_PER_ADDRESS: '3', RATE_LIMIT_WINDOW_MS: '600000' })
  const { headers } = await createAccount(db)
  const get = (h: Record<string, string> = {}) => app.inject({ method: 'GET', url: '/v1/voice/list', headers: h })

  // The key's first request is counted for the address (it costs a lookup); the rest for the key.
  t.equal((await get(headers)).statusCode, 200)
  for (let i = 0; i < 5; i++) t.equal((await get(headers)).statusCode, 200)
  const limited = await get(headers)
  t.equal(limited.statusCode, 429)
  t.same(limited.json(), { statusCode: 429, error: 'Too Many Requests', code: 'rate_limited', message: limited.json().message })
  t.match(limited.json().message, /at most 5/)
  t.ok(Number(limited.headers['retry-after']) > 0, 'Retry-After says when')

  // Without a key, and with made-up keys: two more for the address, then 429 before any lookup.
  t.equal((await get()).statusCode, 401)
  t.equal((await get({ 'x-api-key': generateApiKey() })).statusCode, 403)
  const anonymous = await get({ 'x-api-key': generateApiKey() })
  t.equal(anonymous.statusCode, 429)
  t.equal(anonymous.json().code, 'rate_limited')
  t.ok(Number(anonymous.headers['retry-after']) > 0)

  t.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 200, '/health is not limited')
})

t.test('routes reached without a key (joining a web call) are limited per address', async (t) => {
  const { app } = await setup(t, { RATE_LIMIT_PER_ADDRESS: '2', RATE_LIMIT_WINDOW_MS: '600000' })
  const join = () => app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: 'x'.repeat(43) } })
  t.equal((await join()).statusCode, 403, 'an unknown token is refused')
  t.equal((await join()).statusCode, 403)
  const limited = await join()
  t.equal(limited.statusCode, 429, 'then the address is limited, before any lookup')
  t.equal(limited.json().code, 'rate_limited')
  t.ok(Number(limited.headers['retry-after']) > 0)
})

t.test('a valid key stays cached while unknown keys churn through the cache', async (t) => {
  const owner: KeyOwner = { userId: 'u', keyId: 'k', lastUsedAt: null }
  const lookups = new Map<string, number>()
  const lookup = async (hash: string) => {
    lookups.set(hash, (lookups.get(hash) ?? 0) + 1)
    return hash === 'valid' ? owner : undefined
  }
  const cache = new KeyCache({ ttlMs: 60_000, maxKnown: 10, maxUnknown: 10 })
  t.equal(await cache.owner('valid', lookup), owner)
  for (let i = 0; i < 1000; i++) {
    t.equal(await cache.owner(`unknown-${i}`, lookup), undefined)
    if (i % 100 === 0) t.equal(await cache.owner('valid', lookup), owner)
  }
  t.equal(lookups.get('valid'), 1, 'looked up once, never evicted by unknown keys')
  t.ok(cache.isKnown('valid'))
  t.equal(await cache.owner('unknown-999', lookup), undefined)
  t.equal(lookups.get('unknown-999'), 1, 'a recent unknown key is answered from the cache')
  t.equal(await cache.owner('unknown-0', lookup), undefined)
  t.equal(lookups.get('unknown-0'), 2, 'older unknown keys were evicted: the list is bounded')
})
