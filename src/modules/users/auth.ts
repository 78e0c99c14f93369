import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { RateLimitConfig } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { API_KEY_PATTERN, hashApiKey } from './keys.ts'
import { findActiveKeyByHash, touchApiKey, type KeyOwner } from './queries.ts'
import { HttpError } from '../../http/errors.ts'
import { Lru } from '../../http/lru.ts'
import { clientAddress } from '../../http/rate-limit.ts'

declare module 'fastify' {
  interface FastifyRequest {
    /** The account the request's API key belongs to; every query of the request is scoped to it. */
    userId: string
  }
}

// last_used_at is for people deciding which key to revoke: minute precision spares a write per request.
const TOUCH_INTERVAL_MS = 60_000

/**
 * Keys seen in the last moments, so that a busy client costs one lookup per interval rather than one per
 * request. A key revoked through this process is forgotten at once (forgetApiKeys); one revoked elsewhere
 * (another replica, the CLI) stops working within KEY_CACHE_MS. Requests arriving while a lookup runs share
 * it: fifty concurrent requests of an expired key used to queue fifty lookups ahead of their own queries.
 * Keys found and keys not found live in two bounded LRU lists, so that a flood of made-up keys evicts only
 * other made-up keys, never the keys of real clients.
 */
export const KEY_CACHE_MS = 2000

export interface KeyCacheOptions { ttlMs: number, maxKnown: number, maxUnknown: number, now?: () => number }

export class KeyCache {
  readonly #ttlMs: number
  readonly #now: () => number
  readonly #known: Lru<{ owner: KeyOwner, until: number }>
  readonly #unknown: Lru<number>
  readonly #pending = new Map<string, Promise<KeyOwner | undefined>>()
  // A lookup that was running when the keys were forgotten must not store its (now stale) answer.
  #generation = 0

  constructor (options: KeyCacheOptions) {
    this.#ttlMs = options.ttlMs
    this.#now = options.now ?? Date.now
    this.#known = new Lru(options.maxKnown)
    this.#unknown = new Lru(options.maxUnknown)
  }

  /** Whether the hash belonged to an active key when last looked up (rate limits count such requests per key). */
  isKnown (hash: string): boolean {
    return this.#known.has(hash)
  }

  /** The key's owner, from the cache or else from `lookup`; undefined for a key unknown or revoked. */
  async owner (hash: string, lookup: (hash: string) => Promise<KeyOwner | undefined>): Promise<KeyOwner | undefined> {
    const now = this.#now()
    const known = this.#known.get(hash)
    if (known !== undefined && known.until > now) return known.owner
    const unknownUntil = this.#unknown.get(hash)
    if (unknownUntil !== undefined && unknownUntil > now) return undefined
    let pending = this.#pending.get(hash)
    if (pending === undefined) {
      const generation = this.#generation
      // A failed lookup is not kept: the next request tries again.
      pending = lookup(hash).then((owner) => {
        if (generation !== this.#generation) return owner
        const until = this.#now() + this.#ttlMs
        if (owner === undefined) {
          this.#known.delete(hash)
          this.#unknown.set(hash, until)
        } else {
          this.#known.set(hash, { owner, until })
        }
        return owner
      }).finally(() => this.#pending.delete(hash))
      this.#pending.set(hash, pending)
    }
    return await pending
  }

  clear (): void {
    this.#generation++
    this.#known.clear()
    this.#unknown.clear()
    this.#pending.clear()
  }
}

// Active keys: at most 3 per account, so 10,000 covers thousands of busy accounts. Unknown keys: enough to
// answer a client retrying a revoked key from the cache, few enough that churning them costs little memory.
const keys = new KeyCache({ ttlMs: KEY_CACHE_MS, maxKnown: 10_000, maxUnknown: 1000 })

export function forgetApiKeys (): void {
  keys.clear()
}

const hashes = new WeakMap<FastifyRequest, string | undefined>()

/** The SHA-256 of a well-formed key, computed once per request (the rate limiter and the auth hook both need it). */
function keyHashOf (request: FastifyRequest, key: string | undefined): string | undefined {
  if (!hashes.has(request)) hashes.set(request, key !== undefined && API_KEY_PATTERN.test(key) ? hashApiKey(key) : undefined)
  return hashes.get(request)
}

function apiKeyOf (request: FastifyRequest): string | undefined {
  const header = request.headers['x-api-key']
  return Array.isArray(header) ? header[0] : header
}

/**
 * Counts requests before the key is looked up: those of a key found active before per key, all others
 * (no key, a malformed, unknown or revoked one, a key's first request) per client address, since each may
 * cost a lookup. Over the limit: 429 with Retry-After. Routes reached without a key have their own limit
 * (src/http/rate-limit.ts).
 */
async function registerRateLimit (app: FastifyInstance, limits: RateLimitConfig): Promise<void> {
  await app.register(rateLimit, { global: false })
  const maxOf = (bucket: string) => bucket.startsWith('key:') ? limits.perKey : limits.perAddress
  app.addHook('onRequest', app.rateLimit({
    timeWindow: limits.windowMs,
    keyGenerator: (request) => {
      const hash = keyHashOf(request, apiKeyOf(request))
      return hash !== undefined && keys.isKnown(hash) ? `key:${hash}` : `address:${clientAddress(request.ip)}`
    },
    max: (_request, bucket) => maxOf(bucket),
    allowList: (_request, bucket) => maxOf(bucket) === 0,
    errorResponseBuilder: (_request, context) => new HttpError(429, 'rate_limited', `too many requests; at most ${context.max} a window, retry in ${context.after}`)
  }))
}

/** `x-api-key` on every route of the scope: missing 401, unknown or revoked 403; requests counted first. */
export async function registerAuth (app: FastifyInstance, db: DB, limits: RateLimitConfig): Promise<void> {
  await registerRateLimit(app, limits)
  app.decorateRequest('userId', '')
  app.addHook('onRequest', async (request: FastifyRequest) => {
    const key = apiKeyOf(request)
    if (key === undefined || key === '') {
      throw new HttpError(401, 'missing_api_key', 'the x-api-key header is required')
    }
    const hash = keyHashOf(request, key)
    const owner = hash === undefined ? undefined : await keys.owner(hash, (h) => findActiveKeyByHash(db, h))
    if (owner === undefined) throw new HttpError(403, 'invalid_api_key', 'the API key is unknown or revoked')
    request.userId = owner.userId
    if (owner.lastUsedAt === null || Date.now() - owner.lastUsedAt.getTime() > TOUCH_INTERVAL_MS) {
      owner.lastUsedAt = new Date()
      touchApiKey(db, owner.keyId).catch((err: unknown) => request.log.warn({ err }, 'could not record API key use'))
    }
  })
}
