import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { DB } from '../db/database.ts'
import { API_KEY_PATTERN, hashApiKey } from '../modules/users/keys.ts'
import { findActiveKeyByHash, touchApiKey, type KeyOwner } from '../modules/users/queries.ts'
import { HttpError } from './errors.ts'

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
 * (another replica, the CLI) stops working within KEY_CACHE_MS. The lookup itself is cached, so that the
 * requests arriving while it runs share it: fifty concurrent requests of an expired key used to queue fifty
 * lookups ahead of their own queries, every KEY_CACHE_MS.
 */
export const KEY_CACHE_MS = 2000
const KEY_CACHE_MAX = 10_000
const cache = new Map<string, { owner: Promise<KeyOwner | undefined>, until: number }>()

export function forgetApiKeys (): void {
  cache.clear()
}

async function ownerOf (db: DB, key: string): Promise<KeyOwner | undefined> {
  const hash = hashApiKey(key)
  const now = Date.now()
  const hit = cache.get(hash)
  if (hit !== undefined && hit.until > now) return await hit.owner
  if (cache.size >= KEY_CACHE_MAX) cache.clear()
  const owner = findActiveKeyByHash(db, hash)
  const entry = { owner, until: now + KEY_CACHE_MS }
  cache.set(hash, entry)
  // A failed lookup is not kept: the next request tries again.
  owner.catch(() => { if (cache.get(hash) === entry) cache.delete(hash) })
  return await owner
}

/** `x-api-key` on every route of the scope: missing 401, unknown or revoked 403. */
export function registerAuth (app: FastifyInstance, db: DB): void {
  app.decorateRequest('userId', '')
  app.addHook('onRequest', async (request: FastifyRequest) => {
    const header = request.headers['x-api-key']
    const key = Array.isArray(header) ? header[0] : header
    if (key === undefined || key === '') {
      throw new HttpError(401, 'missing_api_key', 'the x-api-key header is required')
    }
    const owner = API_KEY_PATTERN.test(key) ? await ownerOf(db, key) : undefined
    if (owner === undefined) throw new HttpError(403, 'invalid_api_key', 'the API key is unknown or revoked')
    request.userId = owner.userId
    if (owner.lastUsedAt === null || Date.now() - owner.lastUsedAt.getTime() > TOUCH_INTERVAL_MS) {
      owner.lastUsedAt = new Date()
      touchApiKey(db, owner.keyId).catch((err: unknown) => request.log.warn({ err }, 'could not record API key use'))
    }
  })
}
