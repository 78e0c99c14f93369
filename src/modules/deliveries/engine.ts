import { randomUUID } from 'node:crypto'
import type { JobResult, PgBoss } from 'pg-boss'
import type { Transaction } from 'kysely'
import type { Logger } from 'pino'
import type { Agent } from 'undici'
import type { Config } from '../../config.ts'
import type { Mailer } from '../../mail/mailer.ts'
import type { DB } from '../../db/database.ts'
import type { CallRow, Database, DeliveryAttempt } from '../../db/schema.ts'
import { HttpError, notFound } from '../../http/errors.ts'
import { QUEUES, sendJob, workOn, type QueuePayloads } from '../../jobs/queues.ts'
import { findCapability, openSettings } from '../agents/queries.ts'
import { callVariables } from '../calls/variables.ts'
import { ACTIONS, TOOLS } from '../capabilities/catalog.ts'
import { IntegrationError } from '../integrations/client.ts'
import { deliveryOptions, typed, whenOf, type Channel, type ShapedRequest } from '../capabilities/registry.ts'
import { actionRequest, renderHeaders, type ApiCallSettings } from '../capabilities/types/api-call.ts'
import { afterCallStep, readWorkflow } from '../workflows/steps.ts'
import { sendMessage } from '../messaging/send.ts'
import { webhookRequest } from './render.ts'
import { notifyFailure } from './notify.ts'
import { send, USER_AGENT, type Outcome, type OutgoingRequest } from '../../net/request.ts'
import { signatureHeaders, signingSecrets } from './signing.ts'
import {
  actionSettingsByIds, activeActions, activeTools, agentWebhookUrl, agentWorkflows, findSendable, insertDelivery, logFinishedAttempts, logResend, logRetry,
  sendableDeliveries, type DeliveryRow, type FinishedAttempt, type SendableRow
} from './queries.ts'

// The delivery engine (DESIGN.md "Post-call delivery", the specification's Events section): one row per
// source and call, one pg-boss job per scheduled attempt. Each attempt is logged, and the next one sent, in
// one transaction under the row lock, so an attempt is never lost and never made twice by the schedule.

type Trx = Transaction<Database>

/** Pauses before attempts 2 to 8 of the default schedule, in seconds: 1 min, 5 min, 30 min, 2 h, 6 h, 24 h, 48 h. */
export const DEFAULT_SCHEDULE = [60, 300, 1800, 7200, 21_600, 86_400, 172_800]

export interface DeliveryDeps { db: DB, boss: PgBoss, config: Config, log: Logger, agent: Agent, mailer: Mailer }

interface Source { kind: DeliveryRow['kind'], name: string, actionId: string | null, request: ShapedRequest, schedule: number[] }

/**
 * A message delivery is stored as a request to a URI of its channel (`mailto:`, `sms:`, `whatsapp:`) with the
 * message as its body, so that it shares the outbox, the schedule, the attempts log and resend with HTTP ones.
 */
type MessageChannel = Exclude<Channel, 'http' | 'integration'>
const SCHEMES: Record<MessageChannel, string> = { email: 'mailto', sms: 'sms', chat: 'whatsapp' }
const CHANNELS = new Map<string, MessageChannel>([['mailto:', 'email'], ['sms:', 'sms'], ['whatsapp:', 'chat']])
/** An integration's delivery (a CRM's call log) is stored as a request to `integration:<tool type>`, its payload the body. */
const INTEGRATION = 'integration:'

/** A post-call action's plain-language condition: which calls it is for. */
export interface ActionCondition {
  actionId: string
  condition: string
}

/** A workflow step's condition is judged under this key (step ids are the agent's own, action ids global). */
const stepKey = (stepId: string) => `step:${stepId}`

/**
 * The plain-language conditions of the agent's active post-call actions and of the after-call workflow steps the
 * call reached, for the call's analysis to judge.
 */
export async function actionConditions (db: DB, call: Pick<CallRow, 'agent_id' | 'workflow'>): Promise<ActionCondition[]> {
  const judged = (condition: unknown) => typeof condition === 'string' && condition.trim() !== ''
  const actions = (await activeActions(db, call.agent_id)).flatMap(({ id, settings }) => {
    const { condition } = deliveryOptions(settings)
    return whenOf(settings) !== 'during_call' && judged(condition) ? [{ actionId: id, condition: condition! }] : []
  })
  const steps = await reachedSteps(db, call)
  return [...actions, ...steps.flatMap((step) => judged(step.condition) ? [{ actionId: stepKey(step.id), condition: step.condition! }] : [])]
}

/** The after-call API call steps the call reached, as the agent's workflow holds them now (a step removed since is left out). */
async function reachedSteps (db: DB | Trx, call: Pick<CallRow, 'agent_id' | 'workflow'>) {
  const ids = call.workflow?.after ?? []
  if (ids.length === 0) return []
  const workflow = readWorkflow((await agentWorkflows(db, [call.agent_id])).get(call.agent_id))
  return ids.flatMap((id) => afterCallStep(workflow, id) ?? [])
}

/** What the analysis judged, by action id: the condition it read and whether the call meets it. */
export type ConditionVerdicts = Map<string, { condition: string, met: boolean }>

/**
 * Stores the post-call deliveries of an analysed call with their first attempt jobs, in the analysis
 * transaction: the agent's webhook_url and every active api_call action of the agent, but for an action
 * whose condition the analysis judged unmet. An action without a verdict is delivered: a condition nobody
 * could judge must not lose the integrator a call.
 */
export async function enqueuePostCall (trx: Trx, deps: { boss: PgBoss, log: Logger }, call: CallRow, verdicts: ConditionVerdicts = new Map()): Promise<void> {
  const webhookUrl = await agentWebhookUrl(trx, call.agent_id)
  const actions = await activeActions(trx, call.agent_id)
  const variables = callVariables(call)
  const customer = { phone: typeof variables.customer_phone === 'string' && variables.customer_phone !== '' ? variables.customer_phone : null, email: typeof variables.customer_email === 'string' ? variables.customer_email : null }
  const sources: Source[] = []
  if (webhookUrl !== null) {
    sources.push({ kind: 'agent_webhook', name: 'Agent webhook', actionId: null, request: webhookRequest(webhookUrl, call), schedule: DEFAULT_SCHEDULE })
  }
  for (const row of actions) {
    const definition = ACTIONS.types[row.type]
    const checked = definition === undefined ? undefined : typed(definition, row)
    if (checked === undefined || definition.after === undefined || whenOf(row.settings) === 'during_call') continue
    const options = deliveryOptions(row.settings)
    const verdict = verdicts.get(row.id)
    // Only a verdict on the action's current condition counts: one edited since the analysis read it is delivered.
    if (verdict !== undefined && !verdict.met && verdict.condition === options.condition) {
      deps.log.info({ actionId: row.id, callId: call.id }, 'post-call action not sent: the call does not meet its condition')
      continue
    }
    const schedule = options.retry_schedule ?? DEFAULT_SCHEDULE
    const name = String(checked.settings.name)
    const after = definition.after
    if (after.channel === 'integration') continue
    if (after.channel !== 'http') {
      for (const message of after.messages(checked.settings, variables, customer)) {
        const body = { text: message.text, ...(message.subject === undefined ? {} : { subject: message.subject }), ...(message.from === undefined ? {} : { from: message.from }) }
        sources.push({ kind: row.type, name: `${name} to ${message.to}`, actionId: row.id, request: { method: after.channel.toUpperCase(), url: `${SCHEMES[after.channel]}:${message.to}`, body }, schedule })
      }
      continue
    }
    try {
      sources.push({ kind: row.type, name, actionId: row.id, request: after.request(checked.settings, call, variables), schedule })
    } catch {
      // A URL that renders invalid (a variable that made it so) cannot be sent; it is logged, not retried.
      // Only ids are logged: the error carries the rendered URL, with the call's data and any key in its query.
      deps.log.warn({ actionId: row.id, callId: call.id }, 'post-call action has an invalid URL')
    }
  }
  // The workflow's after-call API call steps the call reached: each a request shaped as an api_call action's.
  for (const step of await reachedSteps(trx, call)) {
    const options = deliveryOptions(step)
    const verdict = verdicts.get(stepKey(step.id))
    if (verdict !== undefined && !verdict.met && verdict.condition === options.condition) {
      deps.log.info({ step: step.id, callId: call.id }, 'workflow step not sent: the call does not meet its condition')
      continue
    }
    try {
      const request = actionRequest(step as ApiCallSettings, call, variables)
      sources.push({ kind: 'workflow_step', name: step.name, actionId: step.id, request, schedule: options.retry_schedule ?? DEFAULT_SCHEDULE })
    } catch {
      deps.log.warn({ step: step.id, callId: call.id }, 'workflow step has an invalid URL')
    }
  }
  for (const row of await activeTools(trx, call.agent_id)) {
    const definition = TOOLS.types[row.type]
    const checked = definition === undefined ? undefined : typed(definition, row)
    if (checked === undefined || definition.after?.channel !== 'integration') continue
    const body = definition.after.payload(checked.settings, call, variables)
    if (body === undefined) continue
    const request = { method: 'POST', url: `${INTEGRATION}${row.type}`, body }
    sources.push({ kind: row.type, name: String(checked.settings.name), actionId: row.id, request, schedule: DEFAULT_SCHEDULE })
  }
  for (const source of sources) {
    const id = await insertDelivery(trx, {
      user_id: call.user_id,
      delivery_id: randomUUID(),
      correlation_id: randomUUID(),
      call_id: call.id,
      agent_id: call.agent_id,
      action_id: source.actionId,
      kind: source.kind,
      name: source.name,
      status: 'pending',
      method: source.request.method,
      url: source.request.url,
      body: source.request.body === null ? null : JSON.stringify(source.request.body),
      variables: JSON.stringify(variables),
      schedule: source.schedule,
      attempts_max: source.schedule.length + 1,
      next_attempt_at: new Date()
    })
    await sendJob(deps.boss, trx, QUEUES.deliveryAttempt, { id, n: 1 })
  }
}

type HeaderSource = Pick<DeliveryRow, 'action_id' | 'kind' | 'agent_id'>

/** Where a delivery's headers are kept: its action's id, or for a workflow step the agent's id and the step's. */
const headerKey = (row: HeaderSource) => row.action_id === null ? undefined : row.kind === 'workflow_step' ? `${row.agent_id}/${row.action_id}` : row.action_id

/**
 * The current headers of the actions (and workflow steps) behind these deliveries: a renewed receiver key applies to
 * pending deliveries. A workflow step no longer in its agent's workflow has no entry.
 */
async function actionHeaders (db: DB, rows: HeaderSource[]): Promise<Map<string, Record<string, string>>> {
  const ids = [...new Set(rows.filter((r) => r.kind !== 'workflow_step').map((r) => r.action_id).filter((id) => id !== null))]
  const actions = ids.length === 0 ? [] : await actionSettingsByIds(db, ids)
  const headers = new Map(actions.map((a) => [a.id, (openSettings(a.settings).headers ?? {}) as Record<string, string>]))
  const steps = rows.filter((r) => r.kind === 'workflow_step')
  const workflows = await agentWorkflows(db, [...new Set(steps.map((r) => r.agent_id))])
  for (const row of steps) {
    const step = afterCallStep(readWorkflow(workflows.get(row.agent_id)), row.action_id ?? '')
    if (step !== undefined) headers.set(headerKey(row)!, (openSettings(step).headers ?? {}) as Record<string, string>)
  }
  return headers
}

/**
 * The request of an attempt, a resend or the test button: the delivery's method, URL and body, the action's
 * headers, Switchboard's own headers, and the account's secrets that sign each hop (send.ts).
 */
export function attemptRequest (delivery: { deliveryId: string, correlationId: string, method: string, url: string, body: string | null },
  configured: Record<string, string>, secrets: string[], attempt: number): OutgoingRequest {
  const hasBody = delivery.body !== null && !['GET', 'DELETE'].includes(delivery.method)
  return {
    method: delivery.method,
    url: delivery.url,
    configured,
    ...(hasBody ? { body: delivery.body! } : {}),
    id: delivery.deliveryId,
    sign: (url, body) => signatureHeaders(secrets, delivery.deliveryId, url, body),
    headers: {
      'user-agent': USER_AGENT,
      'x-service-delivery-id': delivery.deliveryId,
      'x-service-attempt': String(attempt),
      'x-correlation-id': delivery.correlationId
    }
  }
}

/** The request of a stored delivery's next attempt; the action's headers are read as they are now. */
function outgoing (row: SendableRow, headers: Map<string, Record<string, string>>, secrets: string[], attempt: number): OutgoingRequest {
  const key = headerKey(row)
  const configured = key === undefined ? {} : renderHeaders(headers.get(key), row.variables ?? {})
  return attemptRequest({ deliveryId: row.delivery_id, correlationId: row.correlation_id, method: row.method, url: row.url!, body: row.body_text }, configured, secrets, attempt)
}

/** The message of a message delivery, as enqueuePostCall stored it. */
function storedMessage (body: string | null): { text: string, subject?: string, from?: string } {
  const parsed: unknown = JSON.parse(body ?? '{}')
  const field = (name: string) => typeof parsed === 'object' && parsed !== null && name in parsed ? (parsed as Record<string, unknown>)[name] : undefined
  const [text, subject, from] = [field('text'), field('subject'), field('from')]
  return { text: typeof text === 'string' ? text : '', ...(typeof subject === 'string' ? { subject } : {}), ...(typeof from === 'string' ? { from } : {}) }
}

/**
 * One attempt of a stored delivery: its request, or its message through the messaging module (e-mail, SMS, WhatsApp).
 * `retryable` false: no later attempt can do better (a number the carrier refuses, a message over its length).
 */
async function attempt (deps: DeliveryDeps, row: SendableRow, headers: Map<string, Record<string, string>>, secrets: Map<string, string[]>): Promise<{ outcome: Outcome, retryable: boolean }> {
  const url = row.url!
  const scheme = url.slice(0, url.indexOf(':') + 1)
  if (scheme === INTEGRATION) return await integrationAttempt(deps, row)
  // A workflow step removed from the agent's workflow since the call: no later attempt can do better.
  if (row.kind === 'workflow_step' && !headers.has(headerKey(row)!)) {
    return { outcome: { ok: false, error: 'the workflow step behind this delivery was removed from the agent\'s workflow (or is no longer an after-call API call step)', duration_ms: 0 }, retryable: false }
  }
  const channel = CHANNELS.get(scheme)
  if (channel === undefined) {
    return { outcome: await send(deps.agent, outgoing(row, headers, secrets.get(row.user_id) ?? [], row.attempts_made + 1), deps.config.delivery.timeoutMs, deps.log), retryable: true }
  }
  const started = performance.now()
  const message = storedMessage(row.body_text)
  const result = await sendMessage(deps, { userId: row.user_id, callId: row.call_id, origin: 'after_call', actionId: row.action_id, channel, to: url.slice(scheme.length), ...message })
  const ok = result.status === 'sent' || result.status === 'recorded'
  const outcome: Outcome = {
    ok,
    duration_ms: Math.round(performance.now() - started),
    ...(ok
      ? { response_preview: result.status === 'sent' ? `sent (message ${result.id})` : `recorded, not sent (message ${result.id}): ${result.error ?? 'no carrier or mail server to send it'}` }
      : { error: result.error ?? result.status })
  }
  return { outcome, retryable: result.retryable }
}

/**
 * One attempt of an integration's delivery, through the tool as it is now (its settings, the account's connection).
 * Not retried when no later attempt can do better: the tool was deleted, the account is not connected or was
 * revoked, the service refused the request itself (a 4xx other than a rate limit).
 */
async function integrationAttempt (deps: DeliveryDeps, row: SendableRow): Promise<{ outcome: Outcome, retryable: boolean }> {
  const started = performance.now()
  const took = () => Math.round(performance.now() - started)
  const tool = row.action_id === null ? undefined : await findCapability(deps.db, row.user_id, TOOLS, row.agent_id, row.action_id)
  const definition = tool === undefined ? undefined : TOOLS.types[tool.type]
  const checked = definition === undefined || tool === undefined ? undefined : typed(definition, tool)
  if (checked === undefined || definition?.after?.channel !== 'integration') {
    return { outcome: { ok: false, error: 'the tool behind this delivery was deleted or changed its type', duration_ms: took() }, retryable: false }
  }
  try {
    const preview = await definition.after.deliver({ db: deps.db, config: deps.config, log: deps.log, userId: row.user_id, callId: row.call_id }, checked.settings, JSON.parse(row.body_text ?? 'null'))
    return { outcome: { ok: true, duration_ms: took(), response_preview: preview }, retryable: true }
  } catch (err) {
    const final = err instanceof IntegrationError && (err.reason === 'revoked' || err.reason === 'not_connected' ||
      (err.reason === 'rejected' && err.status !== undefined && err.status >= 400 && err.status < 500))
    return { outcome: { ok: false, error: err instanceof Error ? err.message : String(err), duration_ms: took(), ...(err instanceof IntegrationError && err.status !== undefined ? { status_code: err.status } : {}) }, retryable: !final }
  }
}

function logEntry (outcome: Outcome, manual: boolean): Omit<DeliveryAttempt, 'n'> {
  return {
    at: new Date().toISOString(),
    duration_ms: outcome.duration_ms,
    ...(outcome.status_code === undefined ? {} : { status_code: outcome.status_code }),
    ...(outcome.error === undefined ? {} : { error: outcome.error }),
    ...(outcome.response_preview === undefined ? {} : { response_preview: outcome.response_preview }),
    ...(manual ? { manual: true } : {})
  }
}

type AttemptJob = QueuePayloads[typeof QUEUES.deliveryAttempt]

/**
 * Scheduled attempts of a batch of deliveries, sent at once. A job that is stale (the delivery moved on
 * meanwhile) does nothing; a job run twice (a worker died after sending) sends again, which at-least-once
 * allows, but is logged once: every update is guarded by the attempt number it expects.
 */
export async function attemptBatch (deps: DeliveryDeps, jobs: AttemptJob[]): Promise<Map<AttemptJob, Error | undefined>> {
  const rows = jobs.length === 0 ? [] : await sendableDeliveries(deps.db, jobs.map((j) => j.id))
  const byId = new Map(rows.map((r) => [r.id, r]))
  const headers = await actionHeaders(deps.db, rows)
  const secrets = await signingSecrets(deps.db, rows.map((r) => r.user_id))
  const results = new Map<AttemptJob, Error | undefined>()
  const finished: Array<{ job: AttemptJob, row: SendableRow, outcome: Outcome, status: FinishedAttempt['status'], entry: FinishedAttempt['entry'] }> = []
  await Promise.all(jobs.map(async (job) => {
    try {
      const row = byId.get(job.id)
      results.set(job, undefined)
      if (row === undefined || row.status !== 'pending' || row.scheduled_made !== job.n - 1 || row.url === null) return
      const { outcome, retryable } = await attempt(deps, row, headers, secrets)
      if (outcome.ok || job.n >= row.attempts_max || !retryable) {
        finished.push({ job, row, outcome, status: outcome.ok ? 'delivered' : 'failed', entry: logEntry(outcome, false) })
      } else {
        await scheduleRetry(deps, job, row, outcome)
      }
    } catch (err) {
      results.set(job, err as Error)
    }
  }))
  if (finished.length > 0) {
    // Deliveries that are done are logged in one statement for the whole batch.
    try {
      const applied = await logFinishedAttempts(deps.db, finished.map((f) => ({ id: f.job.id, n: f.job.n, status: f.status, entry: f.entry })))
      for (const f of finished) {
        if (f.status === 'failed' && applied.has(f.row.id)) await notifyFailure(deps, { row: f.row, n: f.job.n, outcome: f.outcome, next: null })
      }
    } catch (err) {
      for (const f of finished) results.set(f.job, err as Error)
    }
  }
  return results
}

/** Logs a failed attempt and sends the job of the next one, at its time, in one transaction. */
async function scheduleRetry (deps: DeliveryDeps, job: AttemptJob, row: SendableRow, outcome: Outcome): Promise<void> {
  const next = new Date(Date.now() + row.schedule[job.n - 1] * 1000 * deps.config.delivery.timeScale)
  const logged = await deps.db.transaction().execute(async (trx) => {
    const updated = await logRetry(trx, row.id, job.n, logEntry(outcome, false), next)
    if (updated) await sendJob(deps.boss, trx, QUEUES.deliveryAttempt, { id: row.id, n: job.n + 1 }, { startAfter: next })
    return updated
  })
  if (logged) await notifyFailure(deps, { row, n: job.n, outcome, next })
}

/**
 * Sends the delivery again now, outside its schedule: success makes it `delivered` (also after an earlier
 * success), a failure leaves its status as it was. Sends no notification.
 */
export async function resend (deps: DeliveryDeps, userId: string, id: string): Promise<{ outcome: Outcome, row: DeliveryRow }> {
  const row = await findSendable(deps.db, userId, id)
  if (row === undefined) throw notFound(`webhook delivery ${id}`)
  if (row.url === null) throw new HttpError(409, 'delivery_purged', `the request of delivery ${row.id} was deleted after ${deps.config.delivery.retentionDays} days; it cannot be sent again`)
  const secrets = await signingSecrets(deps.db, [row.user_id])
  const { outcome } = await attempt(deps, row, await actionHeaders(deps.db, [row]), secrets)
  return { outcome, row: await logResend(deps.db, row.id, logEntry(outcome, true), outcome.ok) }
}

export async function registerDeliveryWorkers (deps: DeliveryDeps): Promise<void> {
  // Four fetch loops, each sending a batch at once. A batch is done when its slowest receiver answers (or
  // times out), so a larger DELIVERY_CONCURRENCY buys throughput at the price of longer waits behind slow
  // receivers; measured here: 4 loops beat 8 and 40 (bench:deliveries).
  const loops = Math.min(4, deps.config.delivery.concurrency)
  await workOn(deps.boss, QUEUES.deliveryAttempt, {
    batchSize: Math.ceil(deps.config.delivery.concurrency / loops),
    localConcurrency: loops,
    burstWhenBatchFull: true,
    perJobResults: true,
    // Retries become ready at their time without a NOTIFY; look for them every second.
    pollingIntervalSeconds: 1,
    notifyPollingIntervalSeconds: 1
  }, async (jobs): Promise<JobResult[]> => {
    const results = await attemptBatch(deps, jobs.map((job) => job.data))
    return jobs.map((job) => {
      const err = results.get(job.data)
      if (err !== undefined) deps.log.error({ err, deliveryRowId: job.data.id }, 'delivery attempt failed inside the server; it will be retried')
      return { id: job.id, status: err === undefined ? 'completed' as const : 'failed' as const }
    })
  })
}
