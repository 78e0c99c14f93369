import { sql } from 'kysely'
import type { DB } from '../../db/database.ts'
import { countUsers, createApiKey, createUser } from './queries.ts'

const BOOTSTRAP_LOCK = 7_202_612

/**
 * On the first start (no users at all) creates the owner account and its first API key. Several
 * replicas starting together take a lock so that exactly one owner is made. Answers the new key,
 * which is shown once and then only its hash is kept.
 */
export async function ensureOwner (db: DB, email: string, apiKey: string | undefined): Promise<{ userId: string, email: string, key: string } | undefined> {
  return await db.connection().execute(async (conn) => {
    await sql`SELECT pg_advisory_lock(${BOOTSTRAP_LOCK})`.execute(conn)
    try {
      if (await countUsers(conn) > 0) return undefined
      const user = await createUser(conn, { email, name: 'Owner' })
      const { key } = await createApiKey(conn, user.id, { name: 'bootstrap', key: apiKey })
      return { userId: user.id, email: user.email, key }
    } finally {
      await sql`SELECT pg_advisory_unlock(${BOOTSTRAP_LOCK})`.execute(conn)
    }
  })
}
