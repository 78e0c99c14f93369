import { HttpError } from '../../http/errors.ts'
import type { Static } from 'typebox'
import { ACTION_SETTINGS, MASK } from '../agents/settings.ts'
import { renderText, renderValue, text } from '../../templates.ts'
import type { CallRow, TranscriptItem } from '../../db/schema.ts'

// What a post-call delivery sends: the call payload of the specification's Events section, shaped by an
// api_call action's URL, query, body and headers with {{variables}}.

/** The call payload's fields that GET and DELETE deliveries carry in the query string (its scalar ones). */
const QUERY_PAYLOAD_FIELDS = ['call_id', 'agent_id', 'call_from', 'call_to', 'direction', 'call_type', 'call_status', 'start_timestamp',
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

const SPEAKERS: Record<TranscriptItem['speaker'], string> = { agent: 'Agent', user: 'User', tool: 'Tool' }

/** The values of every {{variable}}: the built-in call variables, then retrieval and collected fields. */
export function callVariables (call: CallRow): Record<string, unknown> {
  const analysis = call.custom_analysis_data ?? {}
  const collected = call.collected_data ?? {}
  return {
    ...collected,
    ...analysis,
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

/** The settings of an api_call action (stored with the defaults of ACTIONS filled in). */
export type ApiCallSettings = Static<typeof ACTION_SETTINGS.api_call>

export interface ShapedRequest { method: string, url: string, body: unknown }

const isScalar = (value: unknown) => value === null || ['string', 'number', 'boolean'].includes(typeof value)

/** The agent webhook's request: the whole payload, POSTed. */
export function webhookRequest (url: string, call: CallRow): ShapedRequest {
  return { method: 'POST', url, body: callPayload(call) }
}

/** The action's URL with its variables filled in; a value that breaks it (a space in the host) is the action's fault: 422. */
function renderedUrl (template: string, variables: Record<string, unknown>): URL {
  const rendered = renderText(template, variables, true)
  try {
    return new URL(rendered)
  } catch {
    throw new HttpError(422, 'invalid_action_url', 'the action\'s url renders to an invalid URL once its {{variables}} are filled in; check where they stand')
  }
}

/**
 * An api_call action's request. The URL's variables are percent-encoded; the query and body are the
 * action's own, alone (send_only_custom_fields) or beside the full payload. GET and DELETE carry the
 * fields in the query string, nested values left out.
 */
export function actionRequest (settings: ApiCallSettings, call: CallRow, variables = callVariables(call)): ShapedRequest {
  const method = (settings.method ?? 'POST').toUpperCase()
  const url = renderedUrl(settings.url, variables)
  const custom = renderValue(settings.body ?? {}, variables) as Record<string, unknown>
  const query = renderValue(settings.query ?? {}, variables) as Record<string, unknown>
  const fields = settings.send_only_custom_fields === true ? custom : { ...callPayload(call), ...custom }
  const inQuery = method === 'GET' || method === 'DELETE' ? { ...fields, ...query } : query
  for (const [key, value] of Object.entries(inQuery)) {
    if (isScalar(value)) url.searchParams.append(key, text(value))
  }
  return { method, url: url.toString(), body: method === 'GET' || method === 'DELETE' ? null : fields }
}

const configuredNames = (settings: ApiCallSettings) => [
  ...new URLSearchParams(/\?([^#]*)/.exec(settings.url)?.[1] ?? '').keys(),
  ...Object.keys(settings.query ?? {}),
  ...Object.keys(settings.body ?? {})
]

/**
 * A delivery's URL as answers show it. Query values are masked like header values (a key "in a query
 * parameter" is a credential), and so is a user name or password in the URL. Shown in clear are only the
 * call payload's fields that a GET or DELETE carries in its query string, when the action is known
 * (`settings`) and does not set a parameter of that name itself.
 */
export function displayUrl (url: string, method: string, settings: ApiCallSettings | undefined): string {
  const shown = new Set<string>(settings !== undefined && (method === 'GET' || method === 'DELETE') ? QUERY_PAYLOAD_FIELDS : [])
  if (settings !== undefined) for (const name of configuredNames(settings)) shown.delete(name)
  const parsed = new URL(url)
  if (parsed.username !== '') parsed.username = MASK
  if (parsed.password !== '') parsed.password = MASK
  if (parsed.search !== '') {
    const masked = new URLSearchParams()
    for (const [name, value] of parsed.searchParams) masked.append(name, shown.has(name) ? value : MASK)
    parsed.search = masked.toString()
  }
  return parsed.toString()
}

/**
 * A URL as displayUrl masks it (a user name, a password and every query value as `********`), for a URL that may
 * still hold {{variables}} and so need not parse: the URL as stored in an action or agent, shown to someone who may
 * only view it (a workspace member).
 */
export function maskUrlTemplate (template: string): string {
  const parts = /^([^:/?#]+:\/\/)(?:([^/?#@]*)@)?([^?#]*)(?:\?([^#]*))?(#.*)?$/.exec(template)
  if (parts === null) return MASK
  const [, scheme, userinfo, rest, query, fragment] = parts
  const credentials = userinfo === undefined ? '' : `${userinfo.includes(':') ? `${MASK}:${MASK}` : MASK}@`
  const masked = query === undefined ? '' : `?${query.split('&').map((pair) => `${pair.split('=')[0]}=${MASK}`).join('&')}`
  return `${scheme}${credentials}${rest}${masked}${fragment ?? ''}`
}

const maskValues = (values: Record<string, unknown> | undefined) => Object.fromEntries(Object.keys(values ?? {}).map((name) => [name, MASK]))

/**
 * An api_call action's settings as a workspace member sees them: what a delivery's URL masks, masked here too — the
 * URL's credentials and query values, the query parameters' values, and for GET and DELETE (which carry the body in
 * the query string) the body's values. Header values are write-only everywhere anyway.
 */
export function viewerApiCallSettings (settings: ApiCallSettings): ApiCallSettings {
  const inQuery = settings.method === 'GET' || settings.method === 'DELETE'
  return { ...settings, url: maskUrlTemplate(settings.url), query: maskValues(settings.query), ...(inQuery && { body: maskValues(settings.body) }) }
}

/** The action's headers with variables, as read at the time of the attempt. */
export function renderHeaders (headers: Record<string, string> | undefined, variables: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers ?? {}).map(([name, value]) => [name, renderText(value, variables)]))
}
