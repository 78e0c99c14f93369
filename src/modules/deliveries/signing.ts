import { randomBytes } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import type { DB } from '../../db/database.ts'
import { openSecret, sealSecret } from '../../db/secrets.ts'
import { activeSecrets, expireCurrentSecret, findCurrentSecret, insertSecret, insertSecretIfNone, testSecretOf } from './queries.ts'

// Every delivery is signed the Standard Webhooks way (webhook-id, webhook-timestamp, webhook-signature:
// HMAC-SHA256 over "id.timestamp.content") with a per-account secret. The content is what the request
// carries: its body, or for a request without one (GET, DELETE, a 303 redirect) its path and query exactly
// as sent, the request target a receiver reads as `req.url`. After a rotation the previous secret
// keeps working for ROTATION_OVERLAP_HOURS: requests carry a signature with each, so a receiver can move
// to the new secret at its own pace.

export const ROTATION_OVERLAP_HOURS = 24

// Stored encrypted (src/db/secrets.ts): sealed when made, opened when read.
const newSecret = () => sealSecret(`whsec_${randomBytes(32).toString('base64')}`)

/** The account's current secret, made on first use (two first uses at once make one). */
export async function currentSecret (db: DB, userId: string): Promise<{ secret: string, created_at: Date }> {
  await insertSecretIfNone(db, userId, newSecret())
  const row = await findCurrentSecret(db, userId)
  return { ...row, secret: openSecret(row.secret) }
}

/**
 * The account's test secret, made on first use: it alone signs Test requests (action-test.ts). Whoever may press
 * Test (a workspace admin) chooses what it sends, so a receiver must be able to tell it from a delivery: a Test
 * request never verifies with the account's delivery secret. It is not rotated: nothing a receiver acts on
 * should be signed with it.
 */
export async function testSecret (db: DB, userId: string): Promise<string> {
  return openSecret(await testSecretOf(db, userId, newSecret()))
}

/** Replaces the current secret; the previous one signs too until the overlap ends. */
export async function rotateSecret (db: DB, userId: string): Promise<{ secret: string, created_at: Date, previous_expires_at: Date }> {
  await currentSecret(db, userId)
  return await db.transaction().execute(async (trx) => {
    const expires = new Date(Date.now() + ROTATION_OVERLAP_HOURS * 3_600_000)
    await expireCurrentSecret(trx, userId, expires)
    const row = await insertSecret(trx, userId, newSecret())
    return { ...row, secret: openSecret(row.secret), previous_expires_at: expires }
  })
}

/** The secrets that sign an account's requests now, newest first, for several accounts at once. */
export async function signingSecrets (db: DB, userIds: string[]): Promise<Map<string, string[]>> {
  const ids = [...new Set(userIds)]
  if (ids.length === 0) return new Map()
  const rows = await activeSecrets(db, ids)
  const missing = ids.filter((id) => !rows.some((row) => row.user_id === id))
  if (missing.length > 0) {
    for (const id of missing) await currentSecret(db, id)
    rows.push(...await activeSecrets(db, missing))
  }
  const out = new Map<string, string[]>()
  for (const row of rows) out.set(row.user_id, [...(out.get(row.user_id) ?? []), openSecret(row.secret)])
  return out
}

/** What a request's signature covers: its body, or without one its request target (path and query). */
export function signedContent (url: string, body: string | undefined): string {
  if (body !== undefined) return body
  const target = new URL(url)
  return `${target.pathname}${target.search}`
}

/** The three Standard Webhooks headers of one request; the signature header lists one signature per secret. */
export function signatureHeaders (secrets: string[], id: string, url: string, body: string | undefined): Record<string, string> {
  const now = new Date()
  const content = signedContent(url, body)
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
    'webhook-signature': secrets.map((secret) => new Webhook(secret).sign(id, now, content)).join(' ')
  }
}
