import { pipeline } from 'node:stream/promises'
import { format } from 'fast-csv'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ConcurrencyLimits } from '../../config.ts'
import { Type } from 'typebox'
import { cursorStream, type DB } from '../../db/database.ts'
import { sharedSlots } from '../../http/concurrency.ts'
import { dateRange, type DateRange } from '../../http/dates.ts'
import { AUTH_ERRORS, errors } from '../../http/schemas.ts'
import { requireOwners } from '../account/owners.ts'
import { callDetailsQuery, type CallFilter, type GroupBy } from './queries.ts'
import { callFilter, CostsQuery, costsBreakdown, type CostsReport } from './reports.ts'
import { MetricsQuery } from './schemas.ts'

const TAGS = ['calls']

/** A text cell a spreadsheet would run as a formula gets a leading quote (OWASP "CSV injection"). */
export function safeCell (value: string | null | undefined): string {
  if (value === null || value === undefined) return ''
  return /^[=+\-@\t\r]/.test(value) ? `'${value}` : value
}

const CALL_HEADERS = ['call_id', 'agent_id', 'agent_name', 'call_type', 'direction', 'call_status', 'call_from', 'call_to',
  'start_time', 'end_time', 'duration_seconds', 'disconnection_reason', 'sentiment', 'task_achieved',
  'phone_call_credits', 'web_call_credits', 'text_message_credits', 'call_forwarding_credits',
  'model', 'input_tokens', 'output_tokens', 'total_tokens', 'workflow_path']

// Cells holding free text, which safeCell escapes; the others are ids, enums, numbers and times.
const TEXT_CELLS = ['agent_name', 'call_from', 'call_to', 'disconnection_reason', 'model'].map((name) => CALL_HEADERS.indexOf(name))

const CsvFile = Type.String({ description: 'CSV, UTF-8, with a header row' })

/** A range for a file: either end may be open (the console's list), its name still says which days it holds. */
type FileRange = Pick<DateRange, 'dateFrom' | 'dateTo'> & { from?: Date, until?: Date }

function attachment (reply: FastifyReply, name: string, range: FileRange): void {
  reply.header('content-type', 'text/csv; charset=utf-8')
  reply.header('content-disposition', `attachment; filename="${name}_${range.dateFrom}_${range.dateTo}.csv"`)
}

// A streaming export holds a connection until its client has read the last row: bounded per account, and in
// all below the pool size, so that slow readers cannot take every connection; one whose client takes no rows
// for EXPORT_STALL_TIMEOUT_MS is ended, which frees both. The API's exports and the console's downloads share the
// slots (sharedSlots).

/**
 * Sends the call-details CSV of the account's calls in the range (`call-details_<from>_<to>.csv`), streamed
 * from a cursor while it holds an export slot (429 or 503 when none is free). Owners named by filters must
 * have been checked: a 404 cannot follow a 200 whose rows are streaming.
 */
export function sendCallDetailsCsv (db: DB, request: FastifyRequest, reply: FastifyReply, userId: string, filter: CallFilter, range: FileRange, limits: ConcurrencyLimits): FastifyReply {
  const release = sharedSlots('exports', limits).take(userId, reply)
  const query = callDetailsQuery(db, userId, filter, range)
  const rows = cursorStream(db, query, 1000, (row) => {
    for (const i of TEXT_CELLS) row[i] = safeCell(row[i] as string | null)
    return row
  }, limits.exportStallMs)
  const csv = format({ headers: CALL_HEADERS })
  // The pipeline closes the cursor (and frees its connection) when the client goes away mid-download.
  pipeline(rows, csv).catch((err: Error) => request.log.warn({ err }, 'call export ended early')).finally(release)
  attachment(reply, 'call-details', range)
  return reply.send(csv)
}

/** Sends the costs breakdown as CSV (`costs-breakdown_<from>_<to>.csv`): one row per group, then a `total` row. */
export function sendCostsCsv (reply: FastifyReply, groupBy: GroupBy, report: CostsReport, range: DateRange): FastifyReply {
  const { breakdown, totals } = report
  const keys = groupBy === 'agent' ? ['agent_id', 'agent_name'] : groupBy === 'workspace' ? ['workspace_id', 'workspace_name'] : ['user_id']
  const csv = format({
    headers: [...keys, 'total_calls', 'total_duration_minutes', 'phone_call_credits', 'web_call_credits', 'text_message_credits',
      'call_forwarding_credits', 'total_credits', 'input_tokens', 'output_tokens', 'total_tokens']
  })
  for (const row of breakdown) {
    const identity = keys.map((key) => safeCell((row as Record<string, unknown>)[key] as string | null))
    csv.write([...identity, row.total_calls, row.total_duration_minutes, row.credits.phone_call, row.credits.web_call,
      row.credits.text_message, row.credits.call_forwarding, row.credits.total, row.tokens.input, row.tokens.output, row.tokens.total])
  }
  csv.write(['total', ...keys.slice(1).map(() => ''), totals.total_calls, totals.total_duration_minutes, '', '', '', '', totals.total_credits, '', '', totals.total_tokens])
  csv.end()
  attachment(reply, 'costs-breakdown', range)
  return reply.send(csv)
}

export const callExportRoutes: FastifyPluginAsyncTypebox<{ db: DB, limits: ConcurrencyLimits }> = async (app, { db, limits }) => {
  app.get('/call/list/export', {
    schema: {
      tags: TAGS,
      summary: 'Export calls as CSV',
      description: 'One row per call and language model with its tokens (a call without usage: one row with an empty model). The list filters apply. Streams from a cursor: any number of rows in flat memory. ' +
        'EXPORTS_PER_ACCOUNT exports of one account at once (default 2; one more: 429) and EXPORTS_MAX in all (503), both with Retry-After. ' +
        'A download whose client reads nothing for EXPORT_STALL_TIMEOUT_MS (default 30 s) is cut off.',
      querystring: MetricsQuery,
      produces: ['text/csv'],
      response: { 200: CsvFile, ...errors(...AUTH_ERRORS, 404, 429, 503) }
    }
  }, async (request, reply) => {
    const range = dateRange(request.query)
    await requireOwners(db, request.userId, request.query)
    return sendCallDetailsCsv(db, request, reply, request.userId, callFilter(request.query), range, limits)
  })

  app.get('/call/costs-breakdown/export', {
    schema: {
      tags: TAGS,
      summary: 'Export the costs breakdown as CSV',
      description: 'The rows of GET /v1/call/costs-breakdown, one per group, then a `total` row.',
      querystring: CostsQuery,
      produces: ['text/csv'],
      response: { 200: CsvFile, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request, reply) => {
    const range = dateRange(request.query)
    const groupBy = request.query.group_by ?? 'user'
    const report = await costsBreakdown(db, request.userId, groupBy, callFilter(request.query), range)
    if (report.breakdown.length === 0) await requireOwners(db, request.userId, request.query)
    return sendCostsCsv(reply, groupBy, report, range)
  })
}
