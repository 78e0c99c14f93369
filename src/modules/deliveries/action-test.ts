import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import { badRequest } from '../../http/errors.ts'
import type { AgentRow, CapabilityRow } from '../agents/queries.ts'
import type { CallRow } from '../../db/schema.ts'
import { attemptRequest, type DeliveryDeps } from './engine.ts'
import { callVariables } from '../calls/variables.ts'
import { unstoredCall } from '../calls/lifecycle.ts'
import { typed } from '../capabilities/registry.ts'
import { actionRequest, apiCall, renderHeaders } from '../capabilities/types/api-call.ts'
import { displayUrl } from './render.ts'
import { send, type Outcome } from '../../net/request.ts'
import { testSecret } from './signing.ts'
import { MASK } from '../agents/settings-parts.ts'

// The test button of an api_call action (the API's POST /v1/agent/:id/actions/:agentActionId/test, and the console's).

/** A call as the test button sends it: every field filled with a sample value, data_retrieval fields too. */
function sampleCall (userId: string, agentId: string, fields: Array<{ name: string, type: string, enum_values?: string[] }>): CallRow {
  const now = Date.now()
  const samples: Record<string, unknown> = { string: 'sample', number: 42, boolean: true, date: new Date(now).toISOString().slice(0, 10) }
  const start = new Date(now - 95_000)
  return unstoredCall({
    id: '000000000000000000000000',
    user_id: userId,
    agent_id: agentId,
    agent_name: 'Sample',
    call_type: 'phone',
    direction: 'inbound',
    call_status: 'success',
    call_from: '+14155550100',
    call_to: '+14155550199',
    start_timestamp: start,
    end_timestamp: new Date(now),
    duration_ms: 95_000,
    recording_url: 'https://example.com/sample-recording.mp3',
    disconnection_reason: 'user_hangup',
    sentiment: 'positive',
    sentiment_explanation: 'This is a sample call sent by the test button.',
    call_summary: 'A sample call: the caller booked an appointment.',
    task_achieved: true,
    transcription: [
      { speaker: 'agent', content: 'Hello, how can I help?', timestamp: start.getTime() + 1000 },
      { speaker: 'user', content: 'I would like to book an appointment.', timestamp: start.getTime() + 4000 }
    ],
    phone_call_credits: 20,
    dynamic_context: { customer_email: 'customer@example.com' },
    custom_analysis_data: Object.fromEntries(fields.map((f) => [f.name, f.type === 'enum' ? f.enum_values?.[0] ?? '' : samples[f.type]])),
    collected_data: {},
    transfer_history: [],
    outcome: 'completed',
    analysis_status: 'completed'
  })
}

/** The request as it was sent: the URL's query values and the header values the action configures masked. */
export interface SentRequest { method: string, url: string, headers: Record<string, string>, body: string | null }

/**
 * Renders an api_call action with a sample call (its agent's data_retrieval fields filled with sample values) and
 * sends it once, now, through the deliveries' guarded agent; nothing is stored or retried. The caller has found
 * the agent and the action for its account. The URL answered has its query values masked as in a delivery's request.
 * It is signed with the account's test secret, never its delivery secret: a workspace admin may write what it sends.
 */
export async function testApiCall (deps: Pick<DeliveryDeps, 'db' | 'agent' | 'config'>, agent: AgentRow, action: CapabilityRow, log: Pick<Logger, 'info'>): Promise<{ outcome: Outcome, request: SentRequest }> {
  const checked = action.type === 'api_call' ? typed(apiCall, action) : undefined
  if (checked === undefined) throw badRequest(`only api_call actions send requests; this one is ${action.type}`)
  const { settings } = checked
  const call = sampleCall(agent.user_id, agent.id, agent.data_retrieval)
  const variables = callVariables(call)
  const shaped = actionRequest(settings, call, variables)
  const outgoing = attemptRequest({ deliveryId: randomUUID(), correlationId: randomUUID(), method: shaped.method, url: shaped.url, body: shaped.body === null ? null : JSON.stringify(shaped.body) },
    renderHeaders(settings.headers, variables), [await testSecret(deps.db, agent.user_id)], 1)
  const outcome = await send(deps.agent, outgoing, deps.config.delivery.timeoutMs, log, { typedUrl: true })
  // The headers as send() puts them together, with the action's own values and the signature masked.
  const signature = outgoing.sign?.(outgoing.url, outgoing.body) ?? {}
  const headers = {
    ...Object.fromEntries(Object.keys(outgoing.configured).map((name) => [name, MASK])),
    ...signature,
    'webhook-signature': MASK,
    ...outgoing.headers,
    ...(outgoing.body === undefined ? {} : { 'content-type': 'application/json; charset=utf-8' })
  }
  return { outcome, request: { method: shaped.method, url: displayUrl(shaped.url, shaped.method, settings), headers, body: outgoing.body ?? null } }
}
