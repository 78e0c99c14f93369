import { sql, type RawBuilder, type Transaction } from 'kysely'
import type { Logger } from 'pino'
import type { Config } from '../config.ts'
import type { DB } from './database.ts'
import type { Database } from './schema.ts'
import { createCipher, isSealed, loadSecretsKey, SEALED_PREFIX, SecretsKeyError, useCipher, type Cipher } from './secrets.ts'

// Every place a secret is stored, for what looks at all of them at once: start-up (is the key the one the
// data was written with; are plaintexts left from before encryption) and key rotation. The modules seal
// and open their own values in their queries.ts.

interface Location {
  table: keyof Database
  /** Columns that name a row. */
  keys: string[]
  column: string
  /**
   * Absent: the column is the secret (text). `{}`: the column is a jsonb object of secrets; a name: its member is.
   * `within`: the column's member of that name is an array, and each item's `member` is such an object.
   */
  map?: { member?: string, within?: string }
  /** The column is a jsonb document whose sealed strings, wherever they are, are secrets (copies of sealed values only: never plaintext). */
  deep?: true
}

export const SECRET_LOCATIONS: Location[] = [
  { table: 'phone_numbers', keys: ['id'], column: 'carrier_auth_token' },
  { table: 'phone_numbers', keys: ['id'], column: 'sip_password' },
  { table: 'webhook_secrets', keys: ['id'], column: 'secret' },
  { table: 'webhook_test_secrets', keys: ['user_id'], column: 'secret' },
  { table: 'integrations', keys: ['user_id', 'provider'], column: 'credentials', map: {} },
  // A pending OAuth authorization's PKCE verifier: re-sealed by a rotation like the rest, so that it still opens.
  { table: 'oauth_states', keys: ['state_hash'], column: 'code_verifier' },
  { table: 'agent_actions', keys: ['id'], column: 'settings', map: { member: 'headers' } },
  { table: 'agent_tools', keys: ['id'], column: 'settings', map: { member: 'headers' } },
  // A workflow's API call steps: steps[i].headers.
  { table: 'agents', keys: ['id'], column: 'workflow', map: { member: 'headers', within: 'steps' } },
  // Agent versions keep their tools', actions' and workflow steps' header values as the rows held them (agents/versions.ts).
  { table: 'agent_versions', keys: ['agent_id', 'version'], column: 'snapshot', deep: true }
]

const SEALED_IN_TEXT = `${SEALED_PREFIX}([0-9a-f]{8}):`

/** Every sealed string of a JSON value passed through `change`; `changed` counts those it changed. */
function rewriteDeep (value: unknown, change: (value: string) => string, changed: { n: number }): unknown {
  if (typeof value === 'string') {
    if (!isSealed(value)) return value
    const out = change(value)
    if (out !== value) changed.n++
    return out
  }
  if (Array.isArray(value)) return value.map((item) => rewriteDeep(item, change, changed))
  if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, rewriteDeep(item, change, changed)]))
  return value
}

const LIKE_SEALED = `${SEALED_PREFIX}%`

/** The jsonb object holding a map location's secrets (for `within`: each item's, as `s.value`). */
function objectOf (at: Location): RawBuilder<unknown> {
  if (at.map?.within !== undefined) return sql`s.value -> ${at.map.member}`
  return at.map?.member === undefined ? sql.ref(at.column) : sql`${sql.ref(at.column)} -> ${at.map.member}`
}

/** The FROM items that give a map location's values as `e.value` (after the table). */
function valuesOf (at: Location): RawBuilder<unknown> {
  const object = objectOf(at)
  const each = sql`jsonb_each_text(CASE WHEN jsonb_typeof(${object}) = 'object' THEN ${object} ELSE '{}'::jsonb END) AS e`
  if (at.map?.within === undefined) return each
  const list = sql`${sql.ref(at.column)} -> ${at.map.within}`
  return sql`jsonb_array_elements(CASE WHEN jsonb_typeof(${list}) = 'array' THEN ${list} ELSE '[]'::jsonb END) AS s, ${each}`
}

/** A condition on a location's rows: some secret value in the row matches `test` (a SQL predicate on `v`). */
function anyValue (at: Location, test: (v: RawBuilder<unknown>) => RawBuilder<unknown>): RawBuilder<unknown> {
  if (at.map === undefined) return sql`${sql.ref(at.column)} IS NOT NULL AND ${test(sql.ref(at.column))}`
  return sql`EXISTS (SELECT 1 FROM ${valuesOf(at)} WHERE ${test(sql.ref('e.value'))})`
}

/** Key ids other than `keyId` that sealed stored values, at most one per location. */
export async function foreignKeyIds (db: DB, keyId: string): Promise<string[]> {
  const found = new Set<string>()
  const other = (v: RawBuilder<unknown>) => sql`${v} LIKE ${LIKE_SEALED} AND ${v} NOT LIKE ${`${SEALED_PREFIX}${keyId}:%`}`
  for (const at of SECRET_LOCATIONS) {
    const values = at.deep === true
      ? sql<{ v: string }>`SELECT ${SEALED_PREFIX} || m[1] || ':' AS v FROM ${sql.table(at.table)}, regexp_matches(${sql.ref(at.column)}::text, ${SEALED_IN_TEXT}, 'g') AS m
          WHERE m[1] <> ${keyId} LIMIT 1`
      : at.map === undefined
        ? sql<{ v: string }>`SELECT ${sql.ref(at.column)} AS v FROM ${sql.table(at.table)} WHERE ${anyValue(at, other)} LIMIT 1`
        : sql<{ v: string }>`SELECT e.value AS v FROM ${sql.table(at.table)}, ${valuesOf(at)} WHERE ${other(sql.ref('e.value'))} LIMIT 1`
    for (const row of (await values.execute(db)).rows) found.add(row.v.slice(SEALED_PREFIX.length, SEALED_PREFIX.length + 8))
  }
  return [...found]
}

/**
 * Rewrites every stored secret through `change`, row by row under lock, and counts the values changed.
 * `onlyPlain` visits only rows that hold a plaintext (start-up), otherwise every row with a secret.
 */
export async function rewriteSecrets (trx: Transaction<Database>, change: (value: string) => string, onlyPlain: boolean): Promise<number> {
  let changed = 0
  const plain = (v: RawBuilder<unknown>) => sql`${v} NOT LIKE ${LIKE_SEALED}`
  const some = () => sql`true`
  for (const at of SECRET_LOCATIONS) {
    const keys = sql.join(at.keys.map((k) => sql.ref(k)))
    if (at.deep === true) {
      if (onlyPlain) continue
      const documents = (await sql<Record<string, unknown>>`SELECT ${keys}, ${sql.ref(at.column)} AS secret FROM ${sql.table(at.table)}
        WHERE ${sql.ref(at.column)}::text LIKE ${`%${LIKE_SEALED}`} FOR UPDATE`.execute(trx)).rows
      for (const row of documents) {
        const count = { n: 0 }
        const next = JSON.stringify(rewriteDeep(row.secret, change, count))
        if (count.n === 0) continue
        changed += count.n
        const where = sql.join(at.keys.map((k) => sql`${sql.ref(k)} = ${row[k]}`), sql` AND `)
        await sql`UPDATE ${sql.table(at.table)} SET ${sql.ref(at.column)} = ${next} WHERE ${where}`.execute(trx)
      }
      continue
    }
    const rows = (await sql<Record<string, unknown>>`SELECT ${keys}, ${sql.ref(at.column)} AS secret FROM ${sql.table(at.table)}
      WHERE ${anyValue(at, onlyPlain ? plain : some)} FOR UPDATE`.execute(trx)).rows
    for (const row of rows) {
      let next: unknown
      if (at.map === undefined) {
        next = change(row.secret as string)
        if (next === row.secret) continue
        changed++
      } else {
        const rewrite = (object: Record<string, unknown>) => Object.fromEntries(Object.entries(object).map(([name, value]) => {
          if (typeof value !== 'string') return [name, value]
          const out = change(value)
          if (out !== value) changed++
          return [name, out]
        }))
        const { member, within } = at.map
        const inMember = (holder: Record<string, unknown>) => {
          if (member === undefined) return rewrite(holder)
          const object = holder[member]
          return object !== null && typeof object === 'object' && !Array.isArray(object) ? { ...holder, [member]: rewrite(object as Record<string, unknown>) } : holder
        }
        const whole = row.secret as Record<string, unknown>
        next = JSON.stringify(within === undefined ? inMember(whole) : { ...whole, [within]: (whole[within] as Array<Record<string, unknown>>).map(inMember) })
      }
      const where = sql.join(at.keys.map((k) => sql`${sql.ref(k)} = ${row[k]}`), sql` AND `)
      await sql`UPDATE ${sql.table(at.table)} SET ${sql.ref(at.column)} = ${next} WHERE ${where}`.execute(trx)
    }
  }
  return changed
}

/**
 * Start-up: loads the key (SECRETS_KEY or DATA_DIR/secrets.key), installs it for the modules' queries,
 * refuses a key other than the one the stored secrets were written with, and encrypts plaintexts left
 * from before encryption (older versions, or a row written by an older replica during an upgrade).
 */
export async function prepareSecrets (config: Pick<Config, 'secretsKey' | 'dataDir'>, db: DB, log?: Logger): Promise<Cipher> {
  const cipher = createCipher(await loadSecretsKey(config))
  const foreign = await foreignKeyIds(db, cipher.keyId)
  if (foreign.length > 0) {
    throw new SecretsKeyError(`stored secrets were encrypted with key ${foreign.join(', ')}, but the configured secrets key is ${cipher.keyId}: set SECRETS_KEY (or DATA_DIR/secrets.key) to the key the data was written with`)
  }
  useCipher(cipher)
  const sealed = await db.transaction().execute(async (trx) =>
    await rewriteSecrets(trx, (value) => isSealed(value) ? value : cipher.seal(value), true))
  if (sealed > 0) log?.info({ sealed }, 'encrypted stored secrets that were kept in plain text')
  return cipher
}
