import type { FastifyInstance } from 'fastify'
import type { Insertable } from 'kysely'
import type { DB } from '../../src/db/database.ts'
import { newId } from '../../src/db/ids.ts'
import type { CallsTable } from '../../src/db/schema.ts'
import type { Account } from './app.ts'

/** An agent of the account (with its own LLM configuration), made through the API. */
export async function createAgent (app: FastifyInstance, account: Account, body: Record<string, unknown> = {}, query = ''): Promise<{ _id: string, agent_name: string }> {
  const llm = (await app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: {} })).json()
  const res = await app.inject({ method: 'POST', url: `/v1/agent${query}`, headers: account.headers, payload: { agent_name: 'Agent', llm_id: llm._id, ...body } })
  if (res.statusCode !== 201) throw new Error(`agent not created: ${res.body}`)
  return res.json()
}

/** An api_call action of the agent (named "Sync" unless `settings` names it), made through the API. */
export async function addAction (app: FastifyInstance, account: Account, agentId: string, settings: Record<string, unknown>) {
  const res = await app.inject({ method: 'POST', url: `/v1/agent/${agentId}/actions`, headers: account.headers, payload: { action_type: 'api_call', settings: { name: 'Sync', ...settings } } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json()
}

export type CallSeed = Partial<Omit<Insertable<CallsTable>, 'transcription' | 'token_usage' | 'custom_data' | 'dynamic_context'>> & {
  token_usage?: Record<string, { input: number, output: number }>
  transcription?: Array<{ speaker: 'agent' | 'user', content: string, timestamp: number }>
}

/** Stores finished calls directly, as the runtime and the analysis would leave them. */
export async function insertCalls (db: DB, userId: string, agent: { _id: string, agent_name: string }, calls: CallSeed[]): Promise<string[]> {
  const rows = calls.map((c) => {
    const usage = c.token_usage ?? {}
    const start = c.start_timestamp === undefined ? new Date() : new Date(c.start_timestamp)
    return {
      id: newId(),
      user_id: userId,
      agent_id: agent._id,
      agent_name: agent.agent_name,
      call_type: 'phone' as const,
      direction: 'outbound' as const,
      call_status: 'success' as const,
      call_from: '+14155550100',
      call_to: '+14155550199',
      duration_ms: 60_000,
      end_timestamp: new Date(start.getTime() + (c.duration_ms ?? 60_000)),
      ...c,
      start_timestamp: start,
      transcription: JSON.stringify(c.transcription ?? []),
      token_usage: JSON.stringify(usage),
      input_tokens: Object.values(usage).reduce((n, u) => n + u.input, 0),
      output_tokens: Object.values(usage).reduce((n, u) => n + u.output, 0)
    }
  })
  await db.insertInto('calls').values(rows).execute()
  return rows.map((r) => r.id)
}
