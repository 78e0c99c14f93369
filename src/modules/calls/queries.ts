import { CompiledQuery, sql, type Expression, type Insertable, type RawBuilder, type SqlBool, type Transaction, type Updateable } from 'kysely'
import { queryPrepared, type DB } from '../../db/database.ts'
import type { CallRow, CallsTable, Database } from '../../db/schema.ts'
import type { LatencyStat } from '../../db/shapes.ts'
import { countedQuantile } from './latency.ts'
import { rangeDays, type DateRange } from '../../db/days.ts'

/** Filters shared by the listing, the metrics and the exports. Ids are lowercase. */
export interface CallFilter {
  agentIds?: string[]
  direction?: string[]
  callStatus?: string[]
  callType?: string[]
  customerId?: string
  workspaceId?: string
  /** The callbacks of this call (the listing only: the daily rollups do not know them). */
  callbackOf?: string
  /** Calls found by one id, by a number's digits or by words of the transcript (the listing and the export only). */
  search?: CallSearch
  /** Calls of an outcome, as the console's analytics link to them (the listing, its total and the export only). */
  outcome?: OutcomeFilter
}

/** Outcomes that the daily rollups do not know: each set one narrows the calls. */
export interface OutcomeFilter {
  taskAchieved?: boolean
  disconnectionReason?: string
  transferred?: true
  /** The call's median wait for the agent (calls.latency's e2e p50), ms: `from` included, `to` excluded. */
  wait?: { from?: number, to?: number }
  /** An extracted field (custom_analysis_data) with this value as text. */
  extracted?: { name: string, value: string }
}

const MEDIAN_WAIT = sql`(latency -> 'e2e' ->> 'p50')::float8`

function outcomeConditions (outcome: OutcomeFilter): Array<RawBuilder<unknown>> {
  const conditions: Array<RawBuilder<unknown>> = []
  if (outcome.taskAchieved !== undefined) conditions.push(sql`task_achieved = ${sql.lit(outcome.taskAchieved)}`)
  if (outcome.disconnectionReason !== undefined) conditions.push(sql`disconnection_reason = ${outcome.disconnectionReason}`)
  if (outcome.transferred === true) conditions.push(sql`jsonb_array_length(transfer_history) > 0`)
  if (outcome.wait !== undefined) {
    conditions.push(sql`latency IS NOT NULL`)
    if (outcome.wait.from !== undefined) conditions.push(sql`${MEDIAN_WAIT} >= ${outcome.wait.from}`)
    if (outcome.wait.to !== undefined) conditions.push(sql`${MEDIAN_WAIT} < ${outcome.wait.to}`)
  }
  if (outcome.extracted !== undefined) conditions.push(sql`custom_analysis_data ->> ${outcome.extracted.name} = ${outcome.extracted.value}`)
  return conditions
}

/**
 * What the console's search box finds: a call by its id, calls from or to a number that holds these digits
 * (trigram index of 0045_calls_search.sql), or calls whose transcript holds these words (its full-text index).
 */
export type CallSearch = { id: string } | { digits: string } | { words: string }

function searchCondition (search: CallSearch): RawBuilder<unknown> {
  if ('id' in search) return sql`id = ${search.id}`
  // The expressions match the indexes' exactly, or the indexes are not used.
  if ('digits' in search) return sql`(coalesce(call_from, '') || ' ' || coalesce(call_to, '')) LIKE ${`%${search.digits}%`}`
  return sql`to_tsvector('simple', call_transcript_text(transcription)) @@ websearch_to_tsquery('simple', ${search.words})`
}

/** `= value` for one value, so that an index on (column, start_timestamp) also gives the listing's order. */
function oneOf (column: string, values: string[]): RawBuilder<unknown> {
  return values.length === 1 ? sql`${sql.ref(column)} = ${values[0]}` : sql`${sql.ref(column)} = ANY(${values}::text[])`
}

/**
 * The same for the enum columns (values checked by the schemas), written as literals: a prepared statement
 * is then planned for its values, so that `call_status = 'started'` keeps using the partial index.
 */
function oneOfEnum (column: string, values: string[]): RawBuilder<unknown> {
  const literals = [...new Set(values)].sort().map((value) => sql.lit(value))
  return literals.length === 1 ? sql`${sql.ref(column)} = ${literals[0]}` : sql`${sql.ref(column)} IN (${sql.join(literals)})`
}

/** Conditions on the filter columns, which `calls` and `call_daily_stats` share. */
function filterConditions (userId: string, filter: CallFilter): Array<RawBuilder<unknown>> {
  const conditions: Array<RawBuilder<unknown>> = [sql`user_id = ${userId}`]
  if (filter.agentIds !== undefined) conditions.push(oneOf('agent_id', filter.agentIds))
  if (filter.direction !== undefined) conditions.push(oneOfEnum('direction', filter.direction))
  if (filter.callStatus !== undefined) conditions.push(oneOfEnum('call_status', filter.callStatus))
  if (filter.callType !== undefined) conditions.push(oneOfEnum('call_type', filter.callType))
  if (filter.customerId !== undefined) conditions.push(sql`customer_id = ${filter.customerId}`)
  if (filter.workspaceId !== undefined) conditions.push(sql`workspace_id = ${filter.workspaceId}`)
  return conditions
}

const and = (conditions: Array<RawBuilder<unknown>>): Expression<SqlBool> => sql<SqlBool>`(${sql.join(conditions, sql` AND `)})`

/**
 * Conditions on calls: the filters plus start times within [from, until), and for a keyset page only the calls
 * past the call `after` in the list's order (none when the account has no such call).
 */
function callConditions (userId: string, filter: CallFilter, range: { from?: Date, until?: Date, after?: string, order?: 'asc' | 'desc' }): Expression<SqlBool> {
  const conditions = filterConditions(userId, filter)
  if (filter.search !== undefined) conditions.push(searchCondition(filter.search))
  if (filter.outcome !== undefined) conditions.push(...outcomeConditions(filter.outcome))
  if (range.after !== undefined) {
    conditions.push(sql`(start_timestamp, id) ${sql.raw(range.order === 'asc' ? '>' : '<')} (SELECT k.start_timestamp, k.id FROM calls k WHERE k.user_id = ${userId} AND k.id = ${range.after})`)
  }
  // A chain has at most 5 callbacks: their calls are found by id from its rows (call_callbacks' unique index).
  if (filter.callbackOf !== undefined) conditions.push(sql`id IN (SELECT call_id FROM call_callbacks WHERE user_id = ${userId} AND callback_of = ${filter.callbackOf})`)
  if (range.from !== undefined) conditions.push(sql`start_timestamp >= ${range.from}`)
  if (range.until !== undefined) conditions.push(sql`start_timestamp < ${range.until}`)
  return and(conditions)
}

/** Conditions on the daily rollup: the filters plus whole UTC days of the range. */
function statsConditions (userId: string, filter: CallFilter, range: DateRange): Expression<SqlBool> {
  return and([...filterConditions(userId, filter), sql`day >= ${range.dateFrom}::date`, sql`day <= ${range.dateTo}::date`])
}

// List and detail answers leave PostgreSQL as JSON text and are sent as they are: rows never become
// JavaScript objects. Each call's list view is stored with it (migrations/0010_call_list_json.sql); the
// detail view appends its further fields to it. Keys and types match CallListItem and CallDetail in
// schemas.ts; the tests hold them to it. `simulated` is isSimulated of lifecycle.ts: a call through a carrier never is.
// A call's place in a chain of callbacks is read from call_callbacks (callbacks.ts): its own row, and the chain's.
const DETAIL_JSON = sql`left(list_json, -1) || ',' || substr(json_build_object(
  'agent_version', agent_version,
  'customer_id', customer_id, 'workspace_id', workspace_id,
  'contact_id', contact_id,
  'duration_ms', duration_ms, 'transcription', transcription,
  'call_credits_details', json_build_object('phone_call_credits', phone_call_credits, 'web_call_credits', web_call_credits,
    'text_message_credits', text_message_credits, 'call_forwarding_credits', call_forwarding_credits),
  'tokens', json_build_object('input', input_tokens, 'output', output_tokens, 'total', input_tokens + output_tokens,
    'by_model', (SELECT coalesce(jsonb_object_agg(key, jsonb_build_object('input', (value ->> 'input')::bigint,
      'output', (value ->> 'output')::bigint, 'total', (value ->> 'input')::bigint + (value ->> 'output')::bigint)), '{}')
      FROM jsonb_each(token_usage))),
  'custom_data', custom_data, 'dynamic_context', dynamic_context, 'custom_analysis_data', custom_analysis_data,
  'collected_data', collected_data, 'transfer_history', transfer_history, 'latency', latency,
  'workflow', CASE WHEN workflow IS NULL THEN NULL ELSE jsonb_build_object('path', workflow -> 'path', 'variables', workflow -> 'variables') END,
  'speech_seconds', json_build_object('recognised', speech_recognised_seconds, 'synthesised', speech_synthesised_seconds),
  'simulated', runtime = 'simulator' OR (runtime = 'voice' AND call_type = 'phone' AND carrier IS NULL),
  'callback_of', (SELECT b.callback_of FROM call_callbacks b WHERE b.call_id = calls.id),
  'callback_attempt', (SELECT b.attempt FROM call_callbacks b WHERE b.call_id = calls.id),
  'callbacks', (SELECT coalesce(json_agg(json_build_object('attempt', b.attempt, 'max_attempts', b.max_attempts, 'status', b.status,
      'reason', b.reason, 'scheduled_at', (extract(epoch FROM b.due_at) * 1000)::bigint, 'call_id', b.call_id) ORDER BY b.attempt), '[]')
    FROM call_callbacks b WHERE b.user_id = calls.user_id
      AND b.callback_of = coalesce((SELECT p.callback_of FROM call_callbacks p WHERE p.call_id = calls.id), calls.id)))::text, 2)`

// Directions and types in the order call_channel() numbers them (migrations/0012_call_channel_indexes.sql).
const DIRECTIONS = ['inbound', 'outbound']
const CALL_TYPES = ['phone', 'web']

/** The call_channel numbers the direction and type filters allow; undefined when they allow every one. */
function callChannels (filter: CallFilter): number[] | undefined {
  const allowed = (values: string[], wanted?: string[]) => values.flatMap((value, i) => wanted === undefined || wanted.includes(value) ? [i] : [])
  const channels = allowed(DIRECTIONS, filter.direction).flatMap((d) => allowed(CALL_TYPES, filter.callType).map((t) => d * 2 + t))
  return channels.length === DIRECTIONS.length * CALL_TYPES.length ? undefined : channels
}

// Bounds the statement; past it, one scan that reads past what the filters drop is the simpler plan.
const MERGE_MAX = 32

interface MergedRanges { agents: Array<string | undefined>, channels: Array<number | undefined> }

/**
 * The ranges a listing merges, one per agent and channel, or undefined when one index scan does as well: a
 * single agent's calls have their own index, and a filter by direction or type alone keeps about half of
 * them.
 */
function mergedRangesOf (filter: CallFilter): MergedRanges | undefined {
  const agents = filter.agentIds === undefined ? [undefined] : [...new Set(filter.agentIds)]
  const channels = callChannels(filter)
  const ranges = agents.length * (channels?.length ?? 1)
  const narrow = channels !== undefined && channels.length <= 1
  return ranges <= MERGE_MAX && (agents.length >= 2 || narrow) ? { agents, channels: channels ?? [undefined] } : undefined
}

/**
 * One `UNION ALL` of ordered ranges: each agent and channel's calls lie in start order in an index, and
 * PostgreSQL merges the ranges' heads. The other filters are compiled once and every range refers to the
 * same parameters (Kysely gives each use its own: 8 ranges took 60 µs to compile and bound 32 values);
 * statuses are checked within each range. Channels and limits are written as validated literals.
 */
function mergedRanges (db: DB, userId: string, filter: CallFilter, options: ListOptions, ranges: MergedRanges, columns: string): CompiledQuery {
  const rest = sql`${callConditions(userId, { ...filter, agentIds: undefined, direction: undefined, callType: undefined }, options)}`.compile(db)
  const parameters = [...rest.parameters]
  const agents = ranges.agents.map((id) => id === undefined ? '' : ` AND agent_id = $${parameters.push(id)}`)
  const channels = ranges.channels.map((channel) => channel === undefined ? '' : ` AND call_channel(direction, call_type) = ${channel}`)
  const selects = agents.flatMap((agent) => channels.map((channel) =>
    `(SELECT ${columns} FROM calls WHERE ${rest.sql}${agent}${channel} ${pageOf(options, options.limit + options.skip, 0)})`))
  return CompiledQuery.raw(selects.join(' UNION ALL '), parameters)
}

/** ORDER BY and LIMIT as literals (validated integers), for the reason enums are (oneOfEnum): a generic plan guesses 10% of the rows. */
function pageOf (options: ListOptions, limit: number, skip: number, table = ''): string {
  const order = options.order === 'asc' ? 'ASC' : 'DESC'
  return `ORDER BY ${table}start_timestamp ${order}, ${table}id ${order} LIMIT ${limit}${skip > 0 ? ` OFFSET ${skip}` : ''}`
}

/** The page of calls as a JSON array text, ready to send. */
export async function listCallsJson (db: DB, userId: string, filter: CallFilter, options: ListOptions): Promise<string> {
  const merged = mergedRangesOf(filter)
  const query = merged === undefined ? scannedPage(db, userId, filter, options) : mergedPage(db, userId, filter, options, merged)
  const rows = await queryPrepared<[string]>(db, query, 'array')
  return `[${rows.map((row) => row[0]).join(',')}]`
}

/** A call's list view: the stored one with the agent version the call ran (added with versions, after the stored view). */
const LIST_JSON = (table = '') => `left(${table}list_json, -1) || ',"agent_version":' || coalesce(${table}agent_version::text, 'null') || '}'`

/** One index scan. Past a skip, the page starts at the call the skip lands on, found from index entries alone. */
function scannedPage (db: DB, userId: string, filter: CallFilter, options: ListOptions): CompiledQuery {
  const where = sql`${callConditions(userId, filter, options)}`.compile(db)
  const start = options.skip === 0
    ? ''
    : `AND (start_timestamp, id) ${options.order === 'asc' ? '>=' : '<='} (SELECT start_timestamp, id FROM calls WHERE ${where.sql} ${pageOf(options, 1, options.skip)})`
  return CompiledQuery.raw(`SELECT ${LIST_JSON()} FROM calls WHERE ${where.sql} ${start} ${pageOf(options, options.limit, 0)}`, [...where.parameters])
}

/** Merged ranges. Past a skip, the page's calls are found from index entries, then only they are read. */
function mergedPage (db: DB, userId: string, filter: CallFilter, options: ListOptions, merged: MergedRanges): CompiledQuery {
  if (options.skip === 0) {
    const ranges = mergedRanges(db, userId, filter, options, merged, 'list_json, agent_version, start_timestamp, id')
    return CompiledQuery.raw(`SELECT ${LIST_JSON()} FROM (${ranges.sql}) AS calls ${pageOf(options, options.limit, 0)}`, [...ranges.parameters])
  }
  const ranges = mergedRanges(db, userId, filter, options, merged, 'start_timestamp, id')
  return CompiledQuery.raw(`SELECT ${LIST_JSON('c.')} FROM (SELECT id, start_timestamp FROM (${ranges.sql}) AS calls
    ${pageOf(options, options.limit, options.skip)}) AS page JOIN calls c USING (id) ${pageOf(options, options.limit, 0, 'page.')}`, [...ranges.parameters])
}

/**
 * How many calls the listing's filter holds, up to `cap` + 1 (more: "more than cap"). Without a search the
 * daily rollups answer exactly, whatever the count (their days are the ones the range's whole UTC days
 * cover); a search counts the matching calls themselves, which its indexes find.
 */
export async function countCalls (db: DB, userId: string, filter: CallFilter, range: { from?: Date, until?: Date }, cap: number): Promise<number> {
  if (filter.search === undefined && filter.callbackOf === undefined && filter.outcome === undefined) {
    const days = [
      ...filterConditions(userId, filter),
      ...(range.from === undefined ? [] : [sql`day >= (${range.from}::timestamptz AT TIME ZONE 'UTC')::date`]),
      ...(range.until === undefined ? [] : [sql`day < (${range.until}::timestamptz AT TIME ZONE 'UTC')::date`])
    ]
    const rows = await queryPrepared<{ calls: number }>(db, sql`SELECT coalesce(sum(calls), 0)::float8 AS calls FROM ${rollupFor(filter)} WHERE ${and(days)}`.compile(db))
    return rows[0].calls
  }
  const rows = await queryPrepared<{ calls: number }>(db, sql`
    SELECT count(*)::int AS calls FROM (SELECT 1 FROM calls WHERE ${callConditions(userId, filter, range)} LIMIT ${sql.lit(cap + 1)}) AS found`.compile(db))
  return rows[0].calls
}

/** What the console's list shows besides the list view: durations, credits and extracted fields of a page's calls. */
export async function callFigures (db: DB, userId: string, ids: string[]) {
  if (ids.length === 0) return []
  return await db.selectFrom('calls').select(['id', 'duration_ms', 'custom_analysis_data',
    sql<number>`phone_call_credits + web_call_credits + text_message_credits + call_forwarding_credits`.as('credits')])
    .where('user_id', '=', userId).where('id', 'in', ids).execute()
}

/** One call's detail view as JSON text, or undefined when the account has no such call. */
export async function findCallJson (db: DB, userId: string, id: string): Promise<string | undefined> {
  const rows = await queryPrepared<{ detail: string }>(db, sql`
    SELECT ${DETAIL_JSON} AS detail FROM calls WHERE user_id = ${userId} AND id = ${id}`.compile(db))
  return rows[0]?.detail
}

/** A call by id, for the jobs that carry only its id (the deadline, the analysis, the simulator). */
export async function findCallRow (db: DB, id: string): Promise<CallRow | undefined> {
  return await db.selectFrom('calls').selectAll().where('id', '=', id).executeTakeFirst()
}

/** `after`: a call's id; the page starts past it in the order (keyset paging: the console's list). */
export interface ListOptions { from?: Date, until?: Date, order: 'asc' | 'desc', limit: number, skip: number, after?: string }

/** Locks a call of the account for a change of its state (FOR UPDATE); undefined when there is none. */
export async function lockCall (trx: Transaction<Database>, userId: string, id: string) {
  return await trx.selectFrom('calls').select(['id', 'agent_id', 'call_status', 'analysis_status', 'start_timestamp', 'answered_at', 'sms_count', 'text_message_credits'])
    .where('user_id', '=', userId).where('id', '=', id).forUpdate().executeTakeFirst()
}

/** Changes a call (locked by lockCall) and answers it as it is now. */
export async function updateCall (trx: Transaction<Database>, id: string, values: Updateable<CallsTable>): Promise<CallRow> {
  return await trx.updateTable('calls').set({ ...values, updated_at: new Date() }).where('id', '=', id).returningAll().executeTakeFirstOrThrow()
}

/** The started or ended call a web-call access token was issued for. */
export async function findCallByAccessToken (db: DB, tokenHash: string) {
  return await db.selectFrom('calls').select(['id', 'user_id', 'agent_id', 'agent_name', 'call_status', 'access_token_expires_at', 'dynamic_context', 'runtime'])
    .where('access_token_hash', '=', tokenHash).executeTakeFirst()
}

/** A browser's stream opens the web call: its access token is spent (one stream per token), atomically. */
export async function spendAccessToken (db: DB, tokenHash: string): Promise<CallRow | undefined> {
  return await db.updateTable('calls').set({ joined_at: new Date(), access_token_hash: null })
    .where('access_token_hash', '=', tokenHash).where('call_status', '=', 'started').where('joined_at', 'is', null)
    .where('access_token_expires_at', '>', new Date())
    .returningAll().executeTakeFirst()
}

export async function insertCall (trx: Transaction<Database>, values: Insertable<CallsTable>): Promise<CallRow> {
  return await trx.insertInto('calls').values(values).returningAll().executeTakeFirstOrThrow()
}

// Metrics read the rollups that a trigger on calls keeps exact (migrations/0005_calls.sql): the per-agent
// one, a few rows a day, unless a filter needs the finer one.

function rollupFor (filter: CallFilter) {
  const fine = filter.direction !== undefined || filter.callStatus !== undefined || filter.callType !== undefined
  return sql.table(fine ? 'call_daily_stats' : 'call_daily_agent_stats')
}

/**
 * Gives a web call that is still running a new access token (its hash and expiry); the earlier token
 * stops working. Answers false when the call has ended (or is not the account's web call).
 */
export async function renewAccessToken (trx: Transaction<Database>, userId: string, callId: string, hash: string, expires: Date): Promise<boolean> {
  const row = await trx.updateTable('calls').set({ access_token_hash: hash, access_token_expires_at: expires })
    .where('user_id', '=', userId).where('id', '=', callId).where('call_type', '=', 'web').where('call_status', '=', 'started')
    .returning('id').executeTakeFirst()
  return row !== undefined
}

export async function generalMetrics (db: DB, userId: string, filter: CallFilter, range: DateRange) {
  const rows = await queryPrepared<{ calls: number, ended_calls: number, duration_ms: number }>(db, sql`
    SELECT coalesce(sum(calls), 0)::bigint AS calls, coalesce(sum(ended_calls), 0)::bigint AS ended_calls,
      coalesce(sum(duration_ms), 0)::bigint AS duration_ms
    FROM ${rollupFor(filter)} WHERE ${statsConditions(userId, filter, range)}`.compile(db))
  return rows[0]
}

/**
 * What callers of the range's calls waited: p50 and p90 over every timed turn of them (e2e_ms; percentile_cont, as
 * calls/latency.ts computes a call's), in whole ms, and how many calls had timed turns; null when none had. Reads the
 * timed calls alone (calls_user_latency_start_idx), each one's turns from calls.latency. The other stages are left to
 * each call's detail: each is one more sort of every turn (20,000 calls of 15 turns: 0.2 s for e2e, 1.2 s for all five).
 */
export async function latencyMetrics (db: DB, userId: string, filter: CallFilter, range: DateRange): Promise<{ calls: number, e2e: LatencyStat } | null> {
  const rows = await queryPrepared<{ calls: number, percentiles: number[] | null, min: number, max: number, num: number }>(db, sql`
    SELECT count(DISTINCT id)::int AS calls, count(*)::int AS num,
      percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY (turn ->> 'e2e_ms')::float8) AS percentiles,
      round(min((turn ->> 'e2e_ms')::float8)::numeric)::float8 AS min, round(max((turn ->> 'e2e_ms')::float8)::numeric)::float8 AS max
    FROM calls CROSS JOIN LATERAL jsonb_array_elements(latency -> 'turns') AS turn
    WHERE ${callConditions(userId, filter, range)} AND latency IS NOT NULL`.compile(db))
  const { calls, percentiles, min, max, num } = rows[0]
  if (percentiles === null) return null
  // Rounded here: PostgreSQL's round of a float8 rounds halves to even, Math.round (as for a call's) up.
  return { calls, e2e: { p50: Math.round(percentiles[0]), p90: Math.round(percentiles[1]), min, max, num } }
}

// The console's outcome analytics (docs/console.md, "Analytics"): read from the range's calls themselves, since the
// rollups keep no outcomes. The counts come from calls_user_outcomes_idx alone, transfers from calls_user_transferred_idx
// (migrations/0047_call_outcomes.sql); waits and extracted values read the calls' rows. npm run bench:analytics times
// each at 100,000 calls.

/** Counts of the range's calls per disconnection reason ('' while none is recorded); totals are their sums. */
export interface OutcomeRow {
  reason: string
  calls: number
  success: number
  failed: number
  /** Calls whose analysis judged the task (task_achieved not null), and those achieved. */
  judged: number
  achieved: number
  /** Calls with a duration, and its sum in ms. */
  timed: number
  duration_ms: number
}

export async function outcomeCounts (db: DB, userId: string, filter: CallFilter, range: DateRange): Promise<OutcomeRow[]> {
  return await queryPrepared<OutcomeRow>(db, sql`
    SELECT coalesce(disconnection_reason, '') AS reason, count(*)::int AS calls,
      count(*) FILTER (WHERE call_status = 'success')::int AS success, count(*) FILTER (WHERE call_status = 'failed')::int AS failed,
      count(task_achieved)::int AS judged, count(*) FILTER (WHERE task_achieved)::int AS achieved,
      count(duration_ms)::int AS timed, coalesce(sum(duration_ms), 0)::float8 AS duration_ms
    FROM calls WHERE ${callConditions(userId, filter, range)}
    GROUP BY 1 ORDER BY 2 DESC, 1`.compile(db))
}

/** The range's calls with at least one transfer, and their transfers in all. */
export async function transferCounts (db: DB, userId: string, filter: CallFilter, range: DateRange): Promise<{ calls: number, transfers: number }> {
  const rows = await queryPrepared<{ calls: number, transfers: number }>(db, sql`
    SELECT count(*)::int AS calls, coalesce(sum(jsonb_array_length(transfer_history)), 0)::int AS transfers
    FROM calls WHERE ${callConditions(userId, filter, range)} AND jsonb_array_length(transfer_history) > 0`.compile(db))
  return rows[0]
}

/** The filters call_daily_waits knows: the Analytics page's (an agent, the workspace). */
export type WaitFilter = Pick<CallFilter, 'agentIds' | 'workspaceId'>

/** Conditions on call_daily_waits: the agents and workspace, and whole UTC days of the range. */
function waitConditions (userId: string, filter: WaitFilter, range: DateRange): Expression<SqlBool> {
  const conditions: Array<RawBuilder<unknown>> = [sql`user_id = ${userId}`, sql`day >= ${range.dateFrom}::date`, sql`day <= ${range.dateTo}::date`]
  if (filter.agentIds !== undefined) conditions.push(oneOf('agent_id', filter.agentIds))
  if (filter.workspaceId !== undefined) conditions.push(sql`workspace_id = ${filter.workspaceId}`)
  return and(conditions)
}

/**
 * What callers waited per answered turn (e2e_ms, in whole ms) over the range's timed calls: p50 and p95 (as
 * percentile_cont over the turns would give them), and how many answers the caller cut off; null without any. Read
 * from call_daily_waits (migrations/0048_call_daily_waits.sql): the range's distinct waits with their counts, not its
 * calls' turns (100,000 calls: 1.7 s -> see docs/console.md, npm run bench:analytics).
 */
export async function turnWaits (db: DB, userId: string, filter: WaitFilter, range: DateRange): Promise<{ calls: number, turns: number, interrupted: number, p50: number, p95: number } | null> {
  const rows = await queryPrepared<{ kind: 'turn' | 'median', value: number, n: number, interrupted: number }>(db, sql`
    SELECT kind, wait_ms AS value, sum(n)::float8 AS n, sum(interrupted)::float8 AS interrupted
    FROM call_daily_waits WHERE ${waitConditions(userId, filter, range)}
    GROUP BY kind, wait_ms HAVING sum(n) > 0 ORDER BY kind, wait_ms`.compile(db))
  const turns = rows.filter((row) => row.kind === 'turn')
  if (turns.length === 0) return null
  const sum = (of: typeof rows, key: 'n' | 'interrupted') => of.reduce((total, row) => total + row[key], 0)
  return {
    calls: sum(rows.filter((row) => row.kind === 'median'), 'n'),
    turns: sum(turns, 'n'),
    interrupted: sum(turns, 'interrupted'),
    p50: Math.round(countedQuantile(turns, 0.5)),
    p95: Math.round(countedQuantile(turns, 0.95))
  }
}

/** The range's timed calls counted by their median wait, in buckets of `width` ms; the last bucket (`buckets` - 1) takes every longer one. */
export async function medianWaitBuckets (db: DB, userId: string, filter: WaitFilter, range: DateRange, width: number, buckets: number): Promise<number[]> {
  const rows = await queryPrepared<{ bucket: number, calls: number }>(db, sql`
    SELECT least(floor(wait_ms / ${sql.lit(width)}), ${sql.lit(buckets - 1)})::int AS bucket, sum(n)::int AS calls
    FROM call_daily_waits WHERE ${waitConditions(userId, filter, range)} AND kind = 'median' AND wait_ms >= 0
    GROUP BY 1`.compile(db))
  const counts = Array<number>(buckets).fill(0)
  for (const row of rows) counts[row.bucket] = row.calls
  return counts
}

/** The most frequent values (as text) of an extracted field over the range's calls, and how many calls have a value. */
export async function extractedValues (db: DB, userId: string, filter: CallFilter, range: DateRange, name: string, limit: number): Promise<{ values: Array<{ value: string, calls: number }>, calls: number }> {
  const rows = await queryPrepared<{ value: string, calls: number, total: number }>(db, sql`
    SELECT value, calls, sum(calls) OVER ()::int AS total FROM (
      SELECT custom_analysis_data ->> ${name} AS value, count(*)::int AS calls
      FROM calls WHERE ${callConditions(userId, filter, range)} AND custom_analysis_data ->> ${name} IS NOT NULL
      GROUP BY 1
    ) AS v ORDER BY calls DESC, value LIMIT ${sql.lit(limit)}`.compile(db))
  return { values: rows.map(({ value, calls }) => ({ value, calls })), calls: rows[0]?.total ?? 0 }
}

interface DailySums { date: string, calls: number, duration_ms: number }

/**
 * Sums per UTC day of the range, days without calls included as 0 (filled in here: a day series joined in
 * PostgreSQL doubled its time); undefined when `agentId` is given and is not the account's.
 */
async function dailySums (db: DB, userId: string, filter: CallFilter, range: DateRange, agentId?: string): Promise<DailySums[] | undefined> {
  // A missing agent answers one row without a day.
  const rows = await queryPrepared<{ date: string | null, calls: number, duration_ms: number }>(db, sql`
    SELECT day::text AS date, sum(calls)::bigint AS calls, sum(duration_ms)::bigint AS duration_ms
    FROM ${rollupFor(filter)} WHERE ${statsConditions(userId, filter, range)}
    GROUP BY day
    ${agentId === undefined ? sql`` : sql`UNION ALL SELECT NULL, 0, 0 WHERE NOT EXISTS (SELECT 1 FROM agents WHERE user_id = ${userId} AND id = ${agentId})`}`.compile(db))
  if (rows.some((row) => row.date === null)) return undefined
  const byDate = new Map(rows.map((row) => [row.date, row]))
  return rangeDays(range).map((date) => ({ date, calls: byDate.get(date)?.calls ?? 0, duration_ms: byDate.get(date)?.duration_ms ?? 0 }))
}

/** Sums per UTC day of the range, days without calls included as 0. */
export async function dailyMetrics (db: DB, userId: string, filter: CallFilter, range: DateRange): Promise<DailySums[]> {
  return await dailySums(db, userId, filter, range) ?? []
}

/** Calls per UTC day and agent over the range; only the days and agents that had calls (the console's analytics). */
export async function dailyCallsByAgent (db: DB, userId: string, filter: CallFilter, range: DateRange): Promise<Array<{ date: string, agent_id: string, calls: number }>> {
  return await queryPrepared<{ date: string, agent_id: string, calls: number }>(db, sql`
    SELECT day::text AS date, agent_id, sum(calls)::bigint AS calls
    FROM ${rollupFor(filter)} WHERE ${statsConditions(userId, filter, range)}
    GROUP BY day, agent_id
    HAVING sum(calls) > 0
    ORDER BY day, agent_id`.compile(db))
}

export async function sentimentCounts (db: DB, userId: string, filter: CallFilter, range: DateRange): Promise<Record<string, number>> {
  const rows = await queryPrepared<{ sentiment: string, calls: number }>(db, db.selectFrom('call_daily_stats')
    .select('sentiment').select(sql<number>`sum(calls)::bigint`.as('calls'))
    .where(statsConditions(userId, filter, range)).where('sentiment', '<>', '')
    .groupBy('sentiment').compile())
  return Object.fromEntries(rows.map((row) => [row.sentiment, row.calls]))
}

/** Whether the account has the agent, or had it: its calls outlive it. */
export async function agentKnown (db: DB, userId: string, agentId: string): Promise<boolean> {
  const rows = await queryPrepared<{ known: boolean }>(db, sql`
    SELECT EXISTS (SELECT 1 FROM agents WHERE user_id = ${userId} AND id = ${agentId})
      OR EXISTS (SELECT 1 FROM calls WHERE user_id = ${userId} AND agent_id = ${agentId}) AS known`.compile(db))
  return rows[0].known
}

/** Calls per UTC day of the range for one of the account's agents (undefined if it is not), days without calls included as 0. */
export async function dailyCallCounts (db: DB, userId: string, agentId: string, range: DateRange): Promise<Array<{ date: string, total_calls: number }> | undefined> {
  const rows = await dailySums(db, userId, { agentIds: [agentId] }, range, agentId)
  return rows?.map((row) => ({ date: row.date, total_calls: row.calls }))
}

export type GroupBy = 'user' | 'agent' | 'workspace'

export interface CostRow {
  key: string
  /** The agent's or workspace's name (the agent's latest call's once it is deleted); null by user. */
  name: string | null
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

function groupName (groupBy: GroupBy, userId: string): RawBuilder<string | null> {
  if (groupBy === 'agent') {
    return sql`coalesce((SELECT a.agent_name FROM agents a WHERE a.user_id = ${userId} AND a.id = g.key), (
      SELECT c.agent_name FROM calls c WHERE c.user_id = ${userId} AND c.agent_id = g.key ORDER BY c.start_timestamp DESC LIMIT 1), '')`
  }
  if (groupBy === 'workspace') return sql`(SELECT w.name FROM workspaces w WHERE w.user_id = ${userId} AND w.id = g.key)`
  return sql`NULL`
}

/** Sums per group key with its name, in one statement; the most expensive groups first. Workspace key '' means calls of no workspace. */
export async function costsByGroup (db: DB, userId: string, groupBy: GroupBy, filter: CallFilter, range: DateRange): Promise<CostRow[]> {
  return await queryPrepared<CostRow>(db, sql`
    SELECT g.*, ${groupName(groupBy, userId)} AS name FROM (
      SELECT ${GROUP_KEYS[groupBy]} AS key, sum(calls)::bigint AS calls, sum(duration_ms)::bigint AS duration_ms,
        sum(phone_call_credits)::bigint AS phone_call, sum(web_call_credits)::bigint AS web_call,
        sum(text_message_credits)::bigint AS text_message, sum(call_forwarding_credits)::bigint AS call_forwarding,
        sum(input_tokens)::bigint AS input_tokens, sum(output_tokens)::bigint AS output_tokens
      FROM call_daily_agent_stats WHERE ${statsConditions(userId, filter, range)}
      GROUP BY 1
      HAVING sum(calls) > 0
    ) g
    ORDER BY g.phone_call + g.web_call + g.text_message + g.call_forwarding DESC, g.key`.compile(db))
}

const ISO = 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'

/** One row per call and model, in start order, every cell as text (the export's columns in order). */
export function callDetailsQuery (db: DB, userId: string, filter: CallFilter, range: { from?: Date, until?: Date }) {
  return db.selectFrom('calls as c')
    .leftJoinLateral(
      (eb) => eb.selectFrom(sql<{ key: string, value: { input: number, output: number } }>`jsonb_each(c.token_usage)`.as('u'))
        .select([sql<string>`u.key`.as('model'), sql<number>`(u.value ->> 'input')::bigint`.as('input'), sql<number>`(u.value ->> 'output')::bigint`.as('output')])
        .as('t'),
      (join) => join.onTrue())
    // Times and numbers leave PostgreSQL as text, ready for the CSV: no Date objects per row.
    .select(['c.id', 'c.agent_id', 'c.agent_name', 'c.call_type', 'c.direction', 'c.call_status', 'c.call_from', 'c.call_to',
      sql<string>`to_char(c.start_timestamp AT TIME ZONE 'UTC', ${ISO})`.as('start_time'),
      sql<string | null>`to_char(c.end_timestamp AT TIME ZONE 'UTC', ${ISO})`.as('end_time'),
      sql<string | null>`(c.duration_ms / 1000.0)::float8::text`.as('duration_seconds'),
      'c.disconnection_reason', 'c.sentiment', sql<string | null>`c.task_achieved::text`.as('task_achieved'),
      sql<string>`c.phone_call_credits::text`.as('phone_call_credits'), sql<string>`c.web_call_credits::text`.as('web_call_credits'),
      sql<string>`c.text_message_credits::text`.as('text_message_credits'), sql<string>`c.call_forwarding_credits::text`.as('call_forwarding_credits'),
      't.model', sql<string | null>`t.input::text`.as('input'), sql<string | null>`t.output::text`.as('output'),
      sql<string | null>`(t.input + t.output)::text`.as('total'),
      sql<string | null>`(SELECT string_agg(e.step ->> 'id', ' > ' ORDER BY e.n) FROM jsonb_array_elements(c.workflow -> 'path') WITH ORDINALITY AS e(step, n))`.as('workflow_path')])
    .where(callConditions(userId, filter, range))
    .orderBy('c.start_timestamp').orderBy('c.id').orderBy('t.model')
    .compile()
}

// Recordings: a call's samples (PCM16, 16 kHz: interleaved stereo, caller left and agent right, or mono for the
// recordings made before two tracks) in chunks appended while the call runs (call_recording_chunks), their total in
// call_recordings. Reads take a window of bytes at a time, so that neither a long recording nor a slow client holds
// much memory (a player seeking through a 29 MB file asks for small ranges).

/** Bytes of 16 kHz PCM16 a millisecond, per channel. */
const PCM_BYTES_PER_MS = 32

/**
 * Appends samples (of `channels` interleaved channels) to the recording of a call of the account (made by the first
 * append); false when the account has no such call, or its recording has another count of channels. One statement:
 * the chunk's offset is the recording's length as the same statement grows it. `created_at` is the time of the last append.
 */
export async function appendRecording (db: DB, userId: string, callId: string, pcm: Buffer, channels: 1 | 2): Promise<boolean> {
  const bytesPerMs = PCM_BYTES_PER_MS * channels
  const result = await sql`
    WITH recording AS (
      INSERT INTO call_recordings (call_id, user_id, duration_ms, pcm_bytes, channels)
      SELECT id, user_id, ${Math.round(pcm.length / bytesPerMs)}, ${pcm.length}, ${channels} FROM calls WHERE id = ${callId} AND user_id = ${userId}
      ON CONFLICT (call_id) DO UPDATE SET pcm_bytes = call_recordings.pcm_bytes + excluded.pcm_bytes,
        duration_ms = round((call_recordings.pcm_bytes + excluded.pcm_bytes) / ${bytesPerMs}::numeric)::int, created_at = now()
        WHERE call_recordings.channels = excluded.channels
      RETURNING call_id, user_id, pcm_bytes - ${pcm.length} AS offset_bytes
    )
    INSERT INTO call_recording_chunks (call_id, user_id, offset_bytes, data)
    SELECT call_id, user_id, offset_bytes, ${pcm} FROM recording`.execute(db)
  return result.numAffectedRows === 1n
}

export interface RecordingInfo { callId: string, userId: string, durationMs: number, pcmBytes: number, channels: 1 | 2, createdAt: Date }

/** The length of a recording of the account's, without its bytes. */
export async function findRecordingInfo (db: DB, userId: string, callId: string): Promise<RecordingInfo | undefined> {
  return await recordingInfo(db).where('user_id', '=', userId).where('call_id', '=', callId).executeTakeFirst()
}

/** The same for a signed link, which names the call alone: its signature stands for the owner's consent. */
export async function findLinkedRecordingInfo (db: DB, callId: string): Promise<RecordingInfo | undefined> {
  return await recordingInfo(db).where('call_id', '=', callId).executeTakeFirst()
}

const recordingInfo = (db: DB) => db.selectFrom('call_recordings')
  .select(['call_id as callId', 'user_id as userId', 'duration_ms as durationMs', 'created_at as createdAt', sql<number>`pcm_bytes::float8`.as('pcmBytes'),
    sql<1 | 2>`channels::int`.as('channels')])

/**
 * The samples of a recording (found by findRecordingInfo or findLinkedRecordingInfo) from byte `start` up to `end`
 * (exclusive), as the parts of the chunks that hold them, in order: `offset` is where each part starts.
 */
export async function recordingBytes (db: DB, callId: string, start: number, end: number): Promise<Array<{ offset: number, bytes: Buffer }>> {
  const { rows } = await sql<{ offset: number, bytes: Buffer }>`
    SELECT greatest(${start}::bigint, offset_bytes)::float8 AS offset,
      substring(data FROM (greatest(${start}::bigint, offset_bytes) - offset_bytes + 1)::int
        FOR (least(${end}::bigint, offset_bytes + octet_length(data)) - greatest(${start}::bigint, offset_bytes))::int) AS bytes
    FROM call_recording_chunks
    WHERE call_id = ${callId} AND offset_bytes < ${end} AND offset_bytes + octet_length(data) > ${start}
    ORDER BY offset_bytes`.execute(db)
  return rows
}
