import { Type, type Static } from 'typebox'
import type { DB } from '../../db/database.ts'
import type { DateRange } from '../../db/days.ts'
import { COMPONENT, ObjectId } from '../../http/schemas.ts'
import { costsByGroup, type CallFilter, type CostRow, type GroupBy } from './queries.ts'
import { CallFilterQuery, MetricsQuery } from './schemas.ts'

// What the JSON reports and their CSV exports share.

const minutes = (ms: number) => Math.round(ms / 600) / 100

/** The filters of a query (its ids lowercased by validation); `agent_id` (legacy) joins `agent_ids`. */
export function callFilter (query: Static<typeof CallFilterQuery>): CallFilter {
  const agentIds = [...(query.agent_ids ?? []), ...(query.agent_id === undefined ? [] : [query.agent_id])]
  return {
    agentIds: agentIds.length > 0 ? agentIds : undefined,
    direction: query.direction,
    callStatus: query.call_status,
    callType: query.call_type,
    customerId: query.customer_id,
    workspaceId: query.workspace_id
  }
}

export const CostsQuery = Type.Object({
  date_from: MetricsQuery.properties.date_from,
  date_to: MetricsQuery.properties.date_to,
  group_by: Type.Optional(Type.Union([Type.Literal('user'), Type.Literal('agent'), Type.Literal('workspace')], { [COMPONENT]: 'CostsGroupBy', description: 'default user' })),
  customer_id: Type.Optional(ObjectId),
  workspace_id: Type.Optional(ObjectId)
})

/** Everything the costs breakdown and its export answer, computed once. */
export async function costsBreakdown (db: DB, userId: string, groupBy: GroupBy, filter: CallFilter, range: DateRange) {
  const rows = await costsByGroup(db, userId, groupBy, filter, range)
  const identity = (row: CostRow) => {
    if (groupBy === 'agent') return { agent_id: row.key, agent_name: row.name ?? '' }
    if (groupBy === 'workspace') return row.key === '' ? { workspace_id: null, workspace_name: null } : { workspace_id: row.key, workspace_name: row.name ?? '' }
    return { user_id: row.key }
  }
  const breakdown = rows.map((row) => {
    const total = row.phone_call + row.web_call + row.text_message + row.call_forwarding
    return {
      ...identity(row),
      total_calls: row.calls,
      total_duration_minutes: minutes(row.duration_ms),
      credits: { phone_call: row.phone_call, web_call: row.web_call, text_message: row.text_message, call_forwarding: row.call_forwarding, total },
      tokens: { input: row.input_tokens, output: row.output_tokens, total: row.input_tokens + row.output_tokens }
    }
  })
  return {
    breakdown,
    totals: {
      total_calls: breakdown.reduce((n, b) => n + b.total_calls, 0),
      total_duration_minutes: minutes(rows.reduce((n, r) => n + r.duration_ms, 0)),
      total_credits: breakdown.reduce((n, b) => n + b.credits.total, 0),
      total_tokens: breakdown.reduce((n, b) => n + b.tokens.total, 0)
    },
    period: { from: range.from.getTime(), to: range.until.getTime() - 1 }
  }
}

export type CostsReport = Awaited<ReturnType<typeof costsBreakdown>>
