import { sql } from 'kysely'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import { conflict, HttpError, notFound, PG } from '../../http/errors.ts'
import { API_KEY_PATTERN, generateApiKey, hashApiKey, keyPrefix } from './keys.ts'

export const MAX_ACTIVE_KEYS = 3

export interface User { id: string, email: string, name: string, language: string, created_at: Date }

// Named, not `*`: the password hash (console module) never travels with a user.
const USER_COLUMNS = ['id', 'email', 'name', 'language', 'created_at'] as const

export async function createUser (db: DB, input: { email: string, name?: string, language?: string }): Promise<User> {
  try {
    return await db.insertInto('users')
      .values({ id: newId(), email: input.email, name: input.name ?? '', language: input.language ?? 'en' })
      .returning(USER_COLUMNS)
      .executeTakeFirstOrThrow()
  } catch (err) {
    if ((err as { code?: string }).code === PG.UNIQUE_VIOLATION) throw conflict(`a user with e-mail ${input.email} exists`)
    throw err
  }
}

/** A user by id or e-mail address (case-insensitive). */
export async function findUser (db: DB, idOrEmail: string): Promise<User | undefined> {
  return await db.selectFrom('users').select(USER_COLUMNS)
    .where((eb) => eb.or([eb('id', '=', idOrEmail), eb(sql`lower(email)`, '=', idOrEmail.toLowerCase())]))
    .executeTakeFirst()
}

export async function countUsers (db: DB): Promise<number> {
  const row = await db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()
  return row.n
}

export interface CreatedKey { id: string, key: string, prefix: string, created_at: Date }

/**
 * Issues a key (or stores the given one). The user's row is locked so that two concurrent requests
 * cannot both pass the limit of active keys.
 */
export async function createApiKey (db: DB, userId: string, options: { name?: string, key?: string } = {}): Promise<CreatedKey> {
  const key = options.key ?? generateApiKey()
  return await db.transaction().execute(async (trx) => {
    const user = await trx.selectFrom('users').select('id').where('id', '=', userId).forUpdate().executeTakeFirst()
    if (user === undefined) throw notFound('user')
    const { n } = await trx.selectFrom('api_keys').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('user_id', '=', userId).where('revoked_at', 'is', null).executeTakeFirstOrThrow()
    if (n >= MAX_ACTIVE_KEYS) {
      throw new HttpError(409, 'key_limit_reached', `a user can hold at most ${MAX_ACTIVE_KEYS} active API keys; revoke one first`)
    }
    try {
      return await trx.insertInto('api_keys')
        .values({ id: newId(), user_id: userId, key_hash: hashApiKey(key), prefix: keyPrefix(key), name: options.name ?? '' })
        .returning(['id', 'prefix', 'created_at'])
        .executeTakeFirstOrThrow()
        .then((row) => ({ ...row, key }))
    } catch (err) {
      if ((err as { code?: string }).code === PG.UNIQUE_VIOLATION) throw conflict('that API key is already registered')
      throw err
    }
  })
}

export async function listApiKeys (db: DB, userId: string) {
  return await db.selectFrom('api_keys')
    .select(['id', 'prefix', 'name', 'created_at', 'last_used_at', 'revoked_at'])
    .where('user_id', '=', userId)
    .orderBy('created_at').orderBy('id')
    .execute()
}

/** Revokes the one active key with this display prefix (or this full key); an ambiguous prefix revokes nothing. */
export async function revokeApiKey (db: DB, prefixOrKey: string): Promise<{ id: string, user_id: string }> {
  return await db.transaction().execute(async (trx) => {
    const keys = await trx.selectFrom('api_keys').select(['id', 'user_id'])
      .$if(API_KEY_PATTERN.test(prefixOrKey), (q) => q.where('key_hash', '=', hashApiKey(prefixOrKey)))
      .$if(!API_KEY_PATTERN.test(prefixOrKey), (q) => q.where('prefix', '=', prefixOrKey))
      .where('revoked_at', 'is', null).forUpdate().execute()
    if (keys.length === 0) throw notFound(`active API key ${keyPrefix(prefixOrKey)}`)
    if (keys.length > 1) throw conflict(`${keys.length} active keys share the prefix ${prefixOrKey}; revoke by the full key`)
    await trx.updateTable('api_keys').set({ revoked_at: new Date() }).where('id', '=', keys[0].id).execute()
    return keys[0]
  })
}

export interface KeyOwner { keyId: string, userId: string, lastUsedAt: Date | null }

export async function findActiveKeyByHash (db: DB, hash: string): Promise<KeyOwner | undefined> {
  const row = await db.selectFrom('api_keys').select(['id', 'user_id', 'last_used_at'])
    .where('key_hash', '=', hash).where('revoked_at', 'is', null)
    .executeTakeFirst()
  return row === undefined ? undefined : { keyId: row.id, userId: row.user_id, lastUsedAt: row.last_used_at }
}

export async function touchApiKey (db: DB, keyId: string): Promise<void> {
  await db.updateTable('api_keys').set({ last_used_at: new Date() }).where('id', '=', keyId).execute()
}

/** Revokes one of the user's active keys; false when there is none with that id. */
export async function revokeKeyOfUser (db: DB, userId: string, keyId: string): Promise<boolean> {
  const result = await db.updateTable('api_keys').set({ revoked_at: new Date() })
    .where('id', '=', keyId).where('user_id', '=', userId).where('revoked_at', 'is', null)
    .executeTakeFirst()
  return result.numUpdatedRows > 0n
}
