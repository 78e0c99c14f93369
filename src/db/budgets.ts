import { sql } from 'kysely'
import type { DB } from './database.ts'

// Hourly budgets shared by every process (the table hourly_budgets): web calls of one address with a widget key,
// live requests of one account. A window opens with the first use and lasts an hour.

/**
 * Counts one use of `key` if its window has room: one upsert, so concurrent requests are counted one after the other
 * by PostgreSQL's row lock and never pass together. Answers whether it may go on, or in how many seconds the window ends.
 */
export async function takeHourly (db: DB, key: string, max: number): Promise<{ taken: true } | { taken: false, retryAfterSeconds: number }> {
  const { rows } = await sql<{ used: number }>`
    INSERT INTO hourly_budgets AS b (key, used, window_ends_at) VALUES (${key}, 1, now() + interval '1 hour')
    ON CONFLICT (key) DO UPDATE SET
      used = CASE WHEN b.window_ends_at <= now() THEN 1 ELSE b.used + 1 END,
      window_ends_at = CASE WHEN b.window_ends_at <= now() THEN now() + interval '1 hour' ELSE b.window_ends_at END
    WHERE b.window_ends_at <= now() OR b.used < ${max}
    RETURNING used`.execute(db)
  if (rows.length > 0) return { taken: true }
  const { rows: [window] } = await sql<{ seconds: number }>`
    SELECT ceil(extract(epoch FROM window_ends_at - now()))::int AS seconds FROM hourly_budgets WHERE key = ${key}`.execute(db)
  return { taken: false, retryAfterSeconds: Math.max(1, window?.seconds ?? 1) }
}

/** Housekeeping: windows that have ended count nothing any more. */
export async function expireHourlyBudgets (db: DB): Promise<number> {
  const result = await db.deleteFrom('hourly_budgets').where('window_ends_at', '<=', sql<Date>`now()`).executeTakeFirst()
  return Number(result.numDeletedRows)
}
