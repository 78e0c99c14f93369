import type { CallRow, TranscriptItem } from '../../db/schema.ts'

// A call as integrators see it: the payload of the post-call deliveries (the specification's Events section) and
// the {{variables}} that actions, messages and prompts are filled with.

/** The call payload's fields that GET and DELETE deliveries carry in the query string (its scalar ones). */
export const QUERY_PAYLOAD_FIELDS = ['call_id', 'agent_id', 'call_from', 'call_to', 'direction', 'call_type', 'call_status', 'start_timestamp',
  'end_timestamp', 'duration', 'call_summary', 'task_achieved', 'recording_url', 'disconnection_reason'] as const

type PayloadField = typeof QUERY_PAYLOAD_FIELDS[number] | 'transcription' | 'sentiment' | 'custom_analysis_data' | 'collected_data' | 'transfer_history'

/** The full call payload (the specification's body table, plus call_id and agent_id). */
export function callPayload (call: CallRow): Partial<Record<PayloadField, unknown>> {
  return {
    call_id: call.id,
    agent_id: call.agent_id,
    call_from: call.call_from,
    call_to: call.call_to,
    direction: call.direction,
    call_type: call.call_type,
    call_status: call.call_status,
    start_timestamp: call.start_timestamp.getTime(),
    end_timestamp: call.end_timestamp?.getTime() ?? null,
    duration: call.duration_ms ?? 0,
    call_summary: call.call_summary,
    transcription: call.transcription,
    task_achieved: call.task_achieved,
    sentiment: call.sentiment === null ? null : { sentiment: call.sentiment, explanation: call.sentiment_explanation ?? '' },
    custom_analysis_data: call.custom_analysis_data ?? {},
    collected_data: call.collected_data ?? {},
    transfer_history: call.transfer_history ?? [],
    ...(call.recording_url === null ? {} : { recording_url: call.recording_url }),
    disconnection_reason: call.disconnection_reason
  }
}

const firstString = (...values: unknown[]) => values.find((v) => typeof v === 'string' && v !== '') as string | undefined

const SPEAKERS: Record<TranscriptItem['speaker'], string> = { agent: 'Agent', user: 'User', tool: 'Tool', step: 'Step' }

/**
 * The values of every {{variable}}: the built-in call variables, then the workflow's variables (by their own
 * names), retrieval and collected fields.
 */
export function callVariables (call: CallRow): Record<string, unknown> {
  const analysis = call.custom_analysis_data ?? {}
  const collected = call.collected_data ?? {}
  return {
    ...collected,
    ...analysis,
    ...call.workflow?.variables,
    call_id: call.id,
    call_from: call.call_from,
    call_to: call.call_to,
    customer_phone: call.direction === 'inbound' ? call.call_from : call.call_to,
    customer_email: firstString(call.dynamic_context.customer_email, call.custom_data.customer_email, analysis.email, analysis.customer_email, collected.email) ?? null,
    call_direction: call.direction,
    call_type: call.call_type,
    call_start: call.start_timestamp.toISOString(),
    call_end: call.end_timestamp?.toISOString() ?? null,
    call_duration: Math.round((call.duration_ms ?? 0) / 1000),
    call_summary: call.call_summary,
    call_transcription: call.transcription.map((t) => `${SPEAKERS[t.speaker]}: ${t.content}`).join('\n'),
    call_sentiment: call.sentiment,
    call_task_achieved: call.task_achieved,
    call_recording_url: call.recording_url,
    agent_id: call.agent_id
  }
}
