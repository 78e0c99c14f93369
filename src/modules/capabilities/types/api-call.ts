import { Type, type Static } from 'typebox'
import { takeHourly } from '../../../db/budgets.ts'
import { badRequest, HttpError } from '../../../http/errors.ts'
import { guardedAgent } from '../../../net/guard.ts'
import type { Agent } from 'undici'
import { send, USER_AGENT, type Outcome } from '../../../net/request.ts'
import { renderRecord, renderText, text } from '../../../templates.ts'
import { CALL_VARIABLES } from '../../agents/data-retrieval.ts'
import { describedAs, type LiveSet, type ToolContext } from '../live.ts'
import { defineCapability, type ShapedRequest, type Typed } from '../registry.ts'
import { callPayload } from '../../calls/variables.ts'
import type { CallRow } from '../../../db/schema.ts'
import { DeliveryMembers, Description, headerProblem, Name, RequestMembers, When } from '../../agents/settings-parts.ts'

// An API call: after the call a post-call delivery (the call payload, shaped by the URL, query, body and headers
// with {{variables}}, retried on the schedule); during the call a function the model calls with declared
// parameters, whose answer (bounded) it reads, sent once under a time limit and the deliveries' address rules.

const ParameterName = Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,63}$' })

const Parameters = Type.Object({
  type: Type.Literal('object'),
  properties: Type.Record(ParameterName, Type.Object({
    type: Type.Union([Type.Literal('string'), Type.Literal('number'), Type.Literal('integer'), Type.Literal('boolean')]),
    description: Type.Optional(Type.String({ maxLength: 500 })),
    enum: Type.Optional(Type.Array(Type.Union([Type.String({ maxLength: 200 }), Type.Number()]), { minItems: 1, maxItems: 50 }))
  }), { maxProperties: 20 }),
  required: Type.Optional(Type.Array(ParameterName, { maxItems: 20, uniqueItems: true }))
}, { description: 'during the call: the arguments the model gives, as a JSON Schema object of scalar properties; each becomes a {{variable}} of the request (default: none)' })

export const ApiCallSettings = Type.Object({
  name: Name,
  description: Description,
  when: When,
  ...RequestMembers,
  parameters: Type.Optional(Parameters),
  ...DeliveryMembers
})

export type ApiCallSettings = Static<typeof ApiCallSettings>

/** How much of a live answer the model reads. */
export const LIVE_ANSWER_CHARS = 4000
/** Live requests one call may send through one action: a prompt must not turn the agent into a load generator. */
export const LIVE_REQUESTS_PER_CALL = 20
const LIVE_TIMEOUT_SECONDS = 10

const isScalar = (value: unknown) => value === null || ['string', 'number', 'boolean'].includes(typeof value)

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
 * The request of an api_call action with `fields` as its body. The URL's variables are percent-encoded; GET and
 * DELETE carry the fields in the query string, nested values left out.
 */
export function shapeRequest (settings: ApiCallSettings, variables: Record<string, unknown>, fields: Record<string, unknown>): ShapedRequest {
  const method = (settings.method ?? 'POST').toUpperCase()
  const url = renderedUrl(settings.url, variables)
  const query = renderRecord(settings.query ?? {}, variables)
  const inQuery = method === 'GET' || method === 'DELETE' ? { ...fields, ...query } : query
  for (const [key, value] of Object.entries(inQuery)) {
    if (isScalar(value)) url.searchParams.append(key, text(value))
  }
  return { method, url: url.toString(), body: method === 'GET' || method === 'DELETE' ? null : fields }
}

/**
 * The request after the call: the action's own query and body, alone (send_only_custom_fields) or beside the full
 * call payload.
 */
export function actionRequest (settings: ApiCallSettings, call: CallRow, variables: Record<string, unknown>): ShapedRequest {
  const custom = renderRecord(settings.body ?? {}, variables)
  return shapeRequest(settings, variables, settings.send_only_custom_fields === true ? custom : { ...callPayload(call), ...custom })
}

/** The action's headers with variables, as read at the time of the request. */
export function renderHeaders (headers: Record<string, string> | undefined, variables: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers ?? {}).map(([name, value]) => [name, renderText(value, variables)]))
}

/** The model's arguments that the parameters declare, and only those: an argument never overrides a call variable. */
function declaredArguments (settings: ApiCallSettings, args: Record<string, unknown>): Record<string, unknown> {
  const declared = settings.parameters?.properties ?? {}
  const missing = (settings.parameters?.required ?? []).filter((name) => args[name] === undefined || args[name] === '')
  if (missing.length > 0) throw new Error(`${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} required`)
  return Object.fromEntries(Object.entries(args).filter(([name, value]) => Object.hasOwn(declared, name) && isScalar(value)))
}

/**
 * One request of an api_call's settings during a call (an action's function, a workflow's API call step): the
 * account's hourly budget of live requests taken first (reserved before anything is sent, so that concurrent
 * calls of the account cannot pass it together), then sent under the time limit through the guarded client.
 */
export async function liveRequest (agent: Agent, settings: ApiCallSettings, variables: Record<string, unknown>, fields: Record<string, unknown>,
  ctx: ToolContext, previewBytes = LIVE_ANSWER_CHARS): Promise<Outcome> {
  const budget = await takeHourly(ctx.db, `live-requests:${ctx.userId}`, ctx.config.liveRequestsPerAccountHour)
  if (!budget.taken) throw new Error('the account has sent as many live requests as it may this hour; this one was not sent')
  const shaped = shapeRequest(settings, variables, fields)
  return await send(agent, {
    method: shaped.method,
    url: shaped.url,
    id: ctx.callId,
    headers: { 'user-agent': USER_AGENT, 'x-service-call-id': ctx.callId },
    configured: renderHeaders(settings.headers, variables),
    ...(shaped.body === null ? {} : { body: JSON.stringify(shaped.body) })
  }, (settings.timeout_seconds ?? LIVE_TIMEOUT_SECONDS) * 1000, ctx.log, { previewBytes, signal: ctx.signal })
}

function liveApiCall (row: Typed<typeof ApiCallSettings>, ctx: ToolContext): LiveSet {
  const { settings } = row
  const agent = guardedAgent(ctx.config.delivery)
  let sent = 0
  return {
    close: async () => { await agent.close().catch(() => {}) },
    tools: [{
      type: 'api_call',
      spec: {
        name: settings.name,
        description: describedAs(settings, `Calls the ${settings.name} service and answers with its reply.`),
        parameters: settings.parameters ?? { type: 'object', properties: {} }
      },
      run: async (args, runCtx) => {
        if (sent >= LIVE_REQUESTS_PER_CALL) throw new Error(`this call has sent ${LIVE_REQUESTS_PER_CALL} requests through ${settings.name} already; no more are sent`)
        const given = declaredArguments(settings, args)
        const variables = { ...given, ...runCtx.variables() }
        const custom = renderRecord(settings.body ?? {}, variables)
        sent++
        const outcome = await liveRequest(agent, settings, variables, Object.keys(settings.body ?? {}).length === 0 ? given : custom, runCtx)
        const answer = outcome.response_preview ?? ''
        if (!outcome.ok) {
          throw new Error(outcome.status_code === undefined ? outcome.error ?? 'the request failed' : `the service answered HTTP ${outcome.status_code}${answer === '' ? '' : `: ${answer}`}`)
        }
        return { output: answer === '' ? `Done (HTTP ${outcome.status_code}, no content).` : answer }
      }
    }]
  }
}

export const apiCall = defineCapability({
  type: 'api_call',
  label: 'API call',
  hint: 'Calls your API: after the call with the call\'s data (retried until it is delivered), or during the call as a function the agent uses.',
  schema: ApiCallSettings,
  defaults: { when: 'after_call', method: 'POST', headers: {}, query: {}, body: {}, send_only_custom_fields: false, notify: 'last_attempt', notify_email: null, condition: null },
  credentialsUrl: 'url',
  fieldLabels: {
    url: 'URL',
    send_only_custom_fields: 'Send only my fields (the query and the body, without the call)',
    notify: 'Failure e-mails',
    notify_email: 'Failure e-mail recipient',
    timeout_seconds: 'Time limit during the call (seconds)'
  },
  fieldHints: {
    url: 'Absolute http:// or https:// URL; {{variables}} are filled in.',
    notify_email: 'Empty: the account owner.',
    condition: 'In plain language: only calls that meet it are sent (judged by the call analysis). Empty: every call.'
  },
  check: async (_ctx, settings) => {
    const problem = headerProblem(settings.headers)
    if (problem !== undefined) throw badRequest(problem)
    for (const name of [...Object.keys(settings.parameters?.properties ?? {}), ...settings.parameters?.required ?? []]) {
      if (CALL_VARIABLES.has(name)) throw badRequest(`body.settings.parameters: "${name}" is a built-in call variable; choose another name`)
      if (!Object.hasOwn(settings.parameters?.properties ?? {}, name)) throw badRequest(`body.settings.parameters.required names "${name}", which is not among its properties`)
    }
  },
  live: (row, ctx) => Promise.resolve(liveApiCall(row, ctx)),
  after: { channel: 'http', request: actionRequest }
})
