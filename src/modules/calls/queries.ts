import { sql, type Expression, type Insertable, type RawBuilder, type Selectable, type SqlBool, type Transaction } from 'kysely'
import type { DB } from '../../db/database.ts'
import type { CallsTable, Database } from '../../db/schema.ts'
import type { DateRange } from '../../http/dates.ts'

export type CallRow = Selectable<CallsTable>

/** Filters shared by the listing, the metrics and the exports. Ids are lowercase. */
export interface CallFilter {
  agentIds?: string[]
  direction?: string[]
  callStatus?: string[]
  callType?: string[]
  customerId?: string
  workspaceId?: string
}

/** Conditions on the filter columns, which `calls` and `call_daily_stats` share. */
function filterConditions (userId: string, filter: CallFilter): Array<RawBuilder<unknown>> {
  const conditions: Array<RawBuilder<unknown>> = [sql`user_id = ${userId}`]
  if (filter.agentIds !== undefined) conditions.push(sql`agent_id = ANY(${filter.agentIds}::text[])`)
  if (filter.direction !== undefined) conditions.push(sql`direction = ANY(${filter.direction}::text[])`)
  if (filter.callStatus !== undefined) conditions.push(sql`call_status = ANY(${filter.callStatus}::text[])`)
  if (filter.callType !== undefined) conditions.push(sql`call_type = ANY(${filter.callType}::text[])`)
  if (filter.customerId !== undefined) conditions.push(sql`customer_id = ${filter.customerId}`)
  if (filter.workspaceId !== undefined) conditions.push(sql`workspace_id = ${filter.workspaceId}`)
  return conditions
}

const and = (conditions: Array<RawBuilder<unknown>>): Expression<SqlBool> => sql<SqlBool>`(${sql.join(conditions, sql` AND `)})`

/** Conditions on calls: the filters plus start times within [from, until). */
function callConditions (userId: string, filter: CallFilter, range: { from?: Date, until?: Date }): Expression<SqlBool> {
  const conditions = filterConditions(userId, filter)
  if (range.from !== undefined) conditions.push(sql`start_timestamp >= ${range.from}`)
  if (range.until !== undefined) conditions.push(sql`start_timestamp < ${range.until}`)
  return and(conditions)
}

/** Conditions on the daily rollup: the filters plus whole UTC days of the range. */
function statsConditions (userId: string, filter: CallFilter, range: DateRange): Expression<SqlBool> {
  return and([...filterConditions(userId, filter), sql`day >= ${range.dateFrom}::date`, sql`day <= ${range.dateTo}::date`])
}

const LIST_COLUMNS = ['id', 'call_type', 'agent_id', 'agent_name', 'call_status', 'call_from', 'call_to', 'direction',
  'start_timestamp', 'end_timestamp', 'recording_url', 'disconnection_reason', 'sentiment', 'sentiment_explanation',
  'call_summary', 'task_achieved'] as const

export type CallListRow = Pick<CallRow, typeof LIST_COLUMNS[number]>

export interface ListOptions { from?: Date, until?: Date, order: 'asc' | 'desc', limit: number, skip: number }

export async function listCalls (db: DB, userId: string, filter: CallFilter, options: ListOptions): Promise<CallListRow[]> {
  return await db.selectFrom('calls').select(LIST_COLUMNS)
    .where(callConditions(userId, filter, options))
    .orderBy('start_timestamp', options.order).orderBy('id', options.order)
    .limit(options.limit).offset(options.skip)
    .execute()
}

export async function findCall (db: DB, userId: string, id: string): Promise<CallRow | undefined> {
  return await db.selectFrom('calls').selectAll().where('user_id', '=', userId).where('id', '=', id.toLowerCase()).executeTakeFirst()
}

export async function insertCall (trx: Transaction<Database>, values: Insertable<CallsTable>): Promise<CallRow> {
  return await trx.insertInto('calls').values(values).returningAll().executeTakeFirstOrThrow()
}

// Metrics read the rollup that a trigger on calls keeps exact (migrations/0005_calls.sql).

export async function generalMetrics (db: DB, userId: string, filter: CallFilter, range: DateRange) {
  return await db.selectFrom('call_daily_stats')
    .select(sql<number>`coalesce(sum(calls), 0)::bigint`.as('calls'))
    .select(sql<number>`coalesce(sum(ended_calls), 0)::bigint`.as('ended_calls'))
    .select(sql<number>`coalesce(sum(duration_ms), 0)::bigint`.as('duration_ms'))
    .where(statsConditions(userId, filter, range))
    .executeTakeFirstOrThrow()
}

export async function dailyMetrics (db: DB, userId: string, filter: CallFilter, range: DateRange) {
  const { rows } = await sql<{ date: string, calls: number, duration_ms: number }>`
    WITH days AS (
      SELECT generate_series(${range.dateFrom}::date, ${range.dateTo}::date, interval '1 day')::date AS day
    ), sums AS (
      SELECT day, sum(calls)::bigint AS calls, sum(duration_ms)::bigint AS duration_ms
      FROM call_daily_stats WHERE ${statsConditions(userId, filter, range)}
      GROUP BY day
    )
    SELECT to_char(days.day, 'YYYY-MM-DD') AS date, coalesce(sums.calls, 0)::bigint AS calls, coalesce(sums.duration_ms, 0)::bigint AS duration_ms
    FROM days LEFT JOIN sums USING (day)
    ORDER BY days.day`.execute(db)
  return rows
}

export async function sentimentCounts (db: DB, userId: string, filter: CallFilter, range: DateRange): Promise<Record<string, number>> {
  const rows = await db.selectFrom('call_daily_stats')
    .select('sentiment').select(sql<number>`sum(calls)::bigint`.as('calls'))
    .where(statsConditions(userId, filter, range)).where('sentiment', '<>', '')
    .groupBy('sentiment').execute()
  return Object.fromEntries(rows.map((row) => [row.sentiment, row.calls]))
}

/** Calls per UTC day of the range for one agent, days without calls included as 0. */
export async function dailyCallCounts (db: DB, userId: string, agentId: string, range: DateRange): Promise<Array<{ date: string, total_calls: number }>> {
  const rows = await dailyMetrics(db, userId, { agentIds: [agentId] }, range)
  return rows.map((row) => ({ date: row.date, total_calls: row.calls }))
}

export type GroupBy = 'user' | 'agent' | 'workspace'

export interface CostRow {
  key: string
  calls: number
  duration_ms: number
  phone_call: number
  web_call: number
  text_message: number
  call_forwarding: number
  input_tokens: number
  output_tokens: number
}

const GROUP_KEYS: Record<GroupBy, RawBuilder<string>> = {
  user: sql<string>`user_id`,
  agent: sql<string>`agent_id`,
  workspace: sql<string>`workspace_id`
}

/** Sums per group key; the most expensive groups first. Workspace key '' means calls of no workspace. */
export async function costsByGroup (db: DB, userId: string, groupBy: GroupBy, filter: CallFilter, range: DateRange): Promise<CostRow[]> {
  const { rows } = await sql<CostRow>`
    SELECT ${GROUP_KEYS[groupBy]} AS key, sum(calls)::bigint AS calls, sum(duration_ms)::bigint AS duration_ms,
      sum(phone_call_credits)::bigint AS phone_call, sum(web_call_credits)::bigint AS web_call,
      sum(text_message_credits)::bigint AS text_message, sum(call_forwarding_credits)::bigint AS call_forwarding,
      sum(input_tokens)::bigint AS input_tokens, sum(output_tokens)::bigint AS output_tokens
    FROM call_daily_stats WHERE ${statsConditions(userId, filter, range)}
    GROUP BY 1
    HAVING sum(calls) > 0
    ORDER BY sum(phone_call_credits + web_call_credits + text_message_credits + call_forwarding_credits) DESC, 1`.execute(db)
  return rows
}

/** Current names of agents, or the name their latest call recorded for agents since deleted. */
export async function agentNames (db: DB, userId: string, agentIds: string[]): Promise<Map<string, string>> {
  if (agentIds.length === 0) return new Map()
  const { rows } = await sql<{ id: string, name: string }>`
    SELECT ids.id, coalesce(a.agent_name, (
      SELECT c.agent_name FROM calls c WHERE c.user_id = ${userId} AND c.agent_id = ids.id ORDER BY c.start_timestamp DESC LIMIT 1
    ), '') AS name
    FROM unnest(${agentIds}::text[]) AS ids (id)
    LEFT JOIN agents a ON a.id = ids.id AND a.user_id = ${userId}`.execute(db)
  return new Map(rows.map((row) => [row.id, row.name]))
}

/** One row per call and model, in start order, read through a cursor so memory stays flat. */
export function streamCallDetails (db: DB, userId: string, filter: CallFilter, range: DateRange) {
  return db.selectFrom('calls as c')
    .leftJoinLateral(
      (eb) => eb.selectFrom(sql<{ key: string, value: { input: number, output: number } }>`jsonb_each(c.token_usage)`.as('u'))
        .select([sql<string>`u.key`.as('model'), sql<number>`(u.value ->> 'input')::bigint`.as('input'), sql<number>`(u.value ->> 'output')::bigint`.as('output')])
        .as('t'),
      (join) => join.onTrue())
    .select(['c.id', 'c.agent_id', 'c.agent_name', 'c.call_type', 'c.direction', 'c.call_status', 'c.call_from', 'c.call_to',
      'c.start_timestamp', 'c.end_timestamp', 'c.duration_ms', 'c.disconnection_reason', 'c.sentiment', 'c.task_achieved',
      'c.phone_call_credits', 'c.web_call_credits', 'c.text_message_credits', 'c.call_forwarding_credits',
      't.model', 't.input', 't.output'])
    .where(callConditions(userId, filter, range))
    .orderBy('c.start_timestamp').orderBy('c.id').orderBy('t.model')
    .stream(1000)
}
