import { sql } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { DateRange } from '../../http/dates.ts'

/** Calls per UTC day of the range for one agent, days without calls included as 0. */
export async function dailyCallCounts (db: DB, userId: string, agentId: string, range: DateRange): Promise<Array<{ date: string, total_calls: number }>> {
  const { rows } = await sql<{ date: string, total_calls: number }>`
    WITH days AS (
      SELECT generate_series(${range.dateFrom}::date, ${range.dateTo}::date, interval '1 day')::date AS day
    ), counts AS (
      SELECT (start_timestamp AT TIME ZONE 'UTC')::date AS day, count(*) AS n
      FROM calls
      WHERE user_id = ${userId} AND agent_id = ${agentId}
        AND start_timestamp >= ${range.from} AND start_timestamp < ${range.until}
      GROUP BY 1
    )
    SELECT to_char(days.day, 'YYYY-MM-DD') AS date, coalesce(counts.n, 0) AS total_calls
    FROM days LEFT JOIN counts USING (day)
    ORDER BY days.day`.execute(db)
  return rows
}
