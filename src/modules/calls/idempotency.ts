import { createHash } from 'node:crypto'
import { sql, type Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { Database } from '../../db/schema.ts'
import { HttpError } from '../../http/errors.ts'

/** How long a key answers with its first result. */
export const IDEMPOTENCY_TTL_HOURS = 24

/** JSON with keys sorted at every level, so that the same body hashes the same whatever its key order. */
function canonical (value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`
  }
  return JSON.stringify(value)
}

export interface Created<T> {
  callId: string
  response: T
  /** What is kept for retries, when it must not hold all of `response` (a credential); default `response`. */
  stored?: Record<string, unknown>
}

/** Makes a retry's answer from what was kept: where `stored` leaves out a credential, a fresh one. */
export type Replay<T> = (trx: Transaction<Database>, callId: string, stored: Record<string, unknown>) => Promise<T>

/**
 * Runs `create` in a transaction, or, when `key` was used within 24 hours with the same route and body,
 * answers that first result instead (through `replay` when given). The key row is inserted first: a
 * concurrent retry waits on it and then sees the committed result, so two requests with one key never
 * place two calls.
 */
export async function idempotent<T extends Record<string, unknown>> (
  db: DB, userId: string, key: string | undefined, route: string, body: unknown,
  create: (trx: Transaction<Database>) => Promise<Created<T>>,
  replay?: Replay<T>
): Promise<T> {
  if (key === undefined) return await db.transaction().execute(async (trx) => (await create(trx)).response)
  const requestHash = createHash('sha256').update(route).update('\n').update(canonical(body)).digest('hex')
  return await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('idempotency_keys').where('user_id', '=', userId).where('key', '=', key)
      .where('created_at', '<', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_TTL_HOURS})`).execute()
    const claimed = await trx.insertInto('idempotency_keys')
      .values({ user_id: userId, key, request_hash: requestHash, call_id: '', response: '{}' })
      .onConflict((oc) => oc.columns(['user_id', 'key']).doNothing())
      .returning('key').executeTakeFirst()
    if (claimed === undefined) {
      const first = await trx.selectFrom('idempotency_keys').select(['request_hash', 'call_id', 'response'])
        .where('user_id', '=', userId).where('key', '=', key).executeTakeFirstOrThrow()
      if (first.request_hash !== requestHash) {
        throw new HttpError(422, 'idempotency_key_reused', 'this Idempotency-Key was used with a different request in the last 24 hours')
      }
      const stored = first.response as Record<string, unknown>
      return replay === undefined ? stored as T : await replay(trx, first.call_id, stored)
    }
    const { callId, response, stored = response } = await create(trx)
    await trx.updateTable('idempotency_keys').set({ call_id: callId, response: JSON.stringify(stored) })
      .where('user_id', '=', userId).where('key', '=', key).execute()
    return response
  })
}

/** Forgets keys older than the time they are kept (run by the retention job). */
export async function expireIdempotencyKeys (db: DB): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys')
    .where('created_at', '<', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_TTL_HOURS})`).executeTakeFirst()
  return Number(result.numDeletedRows)
}
