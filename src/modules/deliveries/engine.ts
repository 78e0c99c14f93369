import { randomUUID } from 'node:crypto'
import type { JobResult, PgBoss } from 'pg-boss'
import { sql, type Selectable, type Transaction } from 'kysely'
import type { Logger } from 'pino'
import type { Agent } from 'undici'
import type { Config } from '../../config.ts'
import type { Mailer } from '../../mail/mailer.ts'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { Database, DeliveryAttempt, WebhookDeliveriesTable } from '../../db/schema.ts'
import { HttpError, notFound } from '../../http/errors.ts'
import { QUEUES, sendJob, workOn, type QueuePayloads } from '../../jobs/queues.ts'
import { openSettings } from '../agents/queries.ts'
import type { CallRow } from '../calls/queries.ts'
import { actionRequest, callVariables, renderHeaders, webhookRequest, type ApiCallSettings, type ShapedRequest } from './render.ts'
import { notifyFailure } from './notify.ts'
import { send, type Outcome, type OutgoingRequest } from './send.ts'
import { signingSecrets } from './signing.ts'

// The delivery engine (DESIGN.md "Post-call delivery", the specification's Events section): one row per
// source and call, one pg-boss job per scheduled attempt. Each attempt is logged, and the next one sent, in
// one transaction under the row lock, so an attempt is never lost and never made twice by the schedule.

export type DeliveryRow = Selectable<WebhookDeliveriesTable>
type Trx = Transaction<Database>

/** Pauses before attempts 2 to 8 of the default schedule, in seconds: 1 min, 5 min, 30 min, 2 h, 6 h, 24 h, 48 h. */
export const DEFAULT_SCHEDULE = [60, 300, 1800, 7200, 21_600, 86_400, 172_800]

export const USER_AGENT = 'SERVICE-Webhooks/1.0'

export interface DeliveryDeps { db: DB, boss: PgBoss, config: Config, log: Logger, agent: Agent, mailer: Mailer }

interface Source { kind: 'agent_webhook' | 'api_call', name: string, actionId: string | null, request: ShapedRequest, schedule: number[] }

async function activeActions (db: DB, agentId: string) {
  const actions = await db.selectFrom('agent_actions').select(['id', 'settings'])
    .where('agent_id', '=', agentId).where('action_type', '=', 'api_call').where('is_active', '=', true)
    .orderBy('created_at').execute()
  // The settings column holds every action type's settings; these rows are api_call actions.
  return actions.map((action) => ({ id: action.id, settings: action.settings as ApiCallSettings }))
}

/** A post-call action's plain-language condition: which calls it is for. */
export interface ActionCondition {
  actionId: string
  condition: string
}

/** The plain-language conditions of the agent's active api_call actions, for the call's analysis to judge. */
export async function actionConditions (db: DB, agentId: string): Promise<ActionCondition[]> {
  return (await activeActions(db, agentId)).flatMap(({ id, settings }) =>
    typeof settings.condition === 'string' && settings.condition.trim() !== '' ? [{ actionId: id, condition: settings.condition }] : [])
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
  const agent = await trx.selectFrom('agents').select(['webhook_url']).where('id', '=', call.agent_id).executeTakeFirst()
  const actions = await activeActions(trx, call.agent_id)
  const variables = callVariables(call)
  const sources: Source[] = []
  if (agent?.webhook_url != null) {
    sources.push({ kind: 'agent_webhook', name: 'Agent webhook', actionId: null, request: webhookRequest(agent.webhook_url, call), schedule: DEFAULT_SCHEDULE })
  }
  for (const { id, settings } of actions) {
    const verdict = verdicts.get(id)
    // Only a verdict on the action's current condition counts: one edited since the analysis read it is delivered.
    if (verdict !== undefined && !verdict.met && verdict.condition === settings.condition) {
      deps.log.info({ actionId: id, callId: call.id }, 'post-call action not sent: the call does not meet its condition')
      continue
    }
    let request: ShapedRequest
    try {
      request = actionRequest(settings, call, variables)
    } catch {
      // A URL that renders invalid (a variable that made it so) cannot be sent; it is logged, not retried.
      // Only ids are logged: the error carries the rendered URL, with the call's data and any key in its query.
      deps.log.warn({ actionId: id, callId: call.id }, 'post-call action has an invalid URL')
      continue
    }
    sources.push({ kind: 'api_call', name: settings.name, actionId: id, request, schedule: settings.retry_schedule ?? DEFAULT_SCHEDULE })
  }
  for (const source of sources) {
    const row = await trx.insertInto('webhook_deliveries').values({
      id: newId(),
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
    }).returning('id').executeTakeFirstOrThrow()
    await sendJob(deps.boss, trx, QUEUES.deliveryAttempt, { id: row.id, n: 1 })
  }
}

/** The current headers of the actions behind these deliveries: a renewed receiver key applies to pending deliveries. */
async function actionHeaders (db: DB, rows: Array<Pick<DeliveryRow, 'action_id'>>): Promise<Map<string, Record<string, string>>> {
  const ids = [...new Set(rows.map((r) => r.action_id).filter((id) => id !== null))]
  if (ids.length === 0) return new Map()
  const actions = await db.selectFrom('agent_actions').select(['id', 'settings']).where('id', 'in', ids).execute()
  return new Map(actions.map((a) => [a.id, (openSettings(a.settings).headers ?? {}) as Record<string, string>]))
}

/** A delivery as an attempt reads it: the body stays JSON text, sent as stored without a parse and re-serialisation. */
type SendableRow = Omit<DeliveryRow, 'body'> & { body_text: string | null }

const SENDABLE = ['id', 'user_id', 'delivery_id', 'correlation_id', 'call_id', 'agent_id', 'action_id', 'kind', 'name', 'status', 'method',
  'url', 'variables', 'schedule', 'attempts_max', 'scheduled_made', 'attempts_made', 'attempts', 'next_attempt_at', 'delivered_at',
  'purged_at', 'created_at', 'updated_at'] as const

function sendable (db: DB) {
  return db.selectFrom('webhook_deliveries').select(SENDABLE).select(sql<string | null>`body::text`.as('body_text'))
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
    signing: { id: delivery.deliveryId, secrets },
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
  const configured = row.action_id === null ? {} : renderHeaders(headers.get(row.action_id), row.variables ?? {})
  return attemptRequest({ deliveryId: row.delivery_id, correlationId: row.correlation_id, method: row.method, url: row.url!, body: row.body_text }, configured, secrets, attempt)
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

/** The attempts log with one more entry, numbered after the attempts already made (read under the row's update lock). */
const appendAttempt = (entry: Omit<DeliveryAttempt, 'n'>) =>
  sql<string>`attempts || jsonb_build_array(jsonb_build_object('n', attempts_made + 1) || ${JSON.stringify(entry)}::jsonb)`

type AttemptJob = QueuePayloads[typeof QUEUES.deliveryAttempt]

/**
 * Scheduled attempts of a batch of deliveries, sent at once. A job that is stale (the delivery moved on
 * meanwhile) does nothing; a job run twice (a worker died after sending) sends again, which at-least-once
 * allows, but is logged once: every update is guarded by the attempt number it expects.
 */
export async function attemptBatch (deps: DeliveryDeps, jobs: AttemptJob[]): Promise<Map<AttemptJob, Error | undefined>> {
  const rows = jobs.length === 0 ? [] : await sendable(deps.db).where('id', 'in', jobs.map((j) => j.id)).execute()
  const byId = new Map(rows.map((r) => [r.id, r]))
  const headers = await actionHeaders(deps.db, rows)
  const secrets = await signingSecrets(deps.db, rows.map((r) => r.user_id))
  const results = new Map<AttemptJob, Error | undefined>()
  const finished: Array<{ job: AttemptJob, row: SendableRow, outcome: Outcome, status: 'delivered' | 'failed', entry: Omit<DeliveryAttempt, 'n'> }> = []
  await Promise.all(jobs.map(async (job) => {
    try {
      const row = byId.get(job.id)
      results.set(job, undefined)
      if (row === undefined || row.status !== 'pending' || row.scheduled_made !== job.n - 1 || row.url === null) return
      const outcome = await send(deps.agent, outgoing(row, headers, secrets.get(row.user_id) ?? [], row.attempts_made + 1), deps.config.delivery.timeoutMs, deps.log)
      if (outcome.ok || job.n >= row.attempts_max) {
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
      const { rows: logged } = await sql<{ id: string }>`
        UPDATE webhook_deliveries d SET
          status = v.status, scheduled_made = v.n, attempts_made = d.attempts_made + 1,
          attempts = d.attempts || jsonb_build_array(jsonb_build_object('n', d.attempts_made + 1) || v.entry),
          next_attempt_at = NULL, delivered_at = CASE WHEN v.status = 'delivered' THEN now() END, updated_at = now()
        FROM unnest(${finished.map((f) => f.job.id)}::text[], ${finished.map((f) => f.job.n)}::int[],
          ${finished.map((f) => f.status)}::text[], ${finished.map((f) => JSON.stringify(f.entry))}::jsonb[]) AS v (id, n, status, entry)
        WHERE d.id = v.id AND d.status = 'pending' AND d.scheduled_made = v.n - 1
        RETURNING d.id`.execute(deps.db)
      const applied = new Set(logged.map((r) => r.id))
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
    const updated = await trx.updateTable('webhook_deliveries').set({
      scheduled_made: job.n,
      attempts_made: sql<number>`attempts_made + 1`,
      attempts: appendAttempt(logEntry(outcome, false)),
      next_attempt_at: next,
      updated_at: new Date()
    }).where('id', '=', row.id).where('status', '=', 'pending').where('scheduled_made', '=', job.n - 1).returning('id').executeTakeFirst()
    if (updated !== undefined) await sendJob(deps.boss, trx, QUEUES.deliveryAttempt, { id: row.id, n: job.n + 1 }, { startAfter: next })
    return updated !== undefined
  })
  if (logged) await notifyFailure(deps, { row, n: job.n, outcome, next })
}

/**
 * Sends the delivery again now, outside its schedule: success makes it `delivered` (also after an earlier
 * success), a failure leaves its status as it was. Sends no notification.
 */
export async function resend (deps: DeliveryDeps, userId: string, id: string): Promise<{ outcome: Outcome, row: DeliveryRow }> {
  const row = await sendable(deps.db).where('user_id', '=', userId).where('id', '=', id.toLowerCase()).executeTakeFirst()
  if (row === undefined) throw notFound(`webhook delivery ${id}`)
  if (row.url === null) throw new HttpError(409, 'delivery_purged', `the request of delivery ${row.id} was deleted after ${deps.config.delivery.retentionDays} days; it cannot be sent again`)
  const secrets = await signingSecrets(deps.db, [row.user_id])
  const outcome = await send(deps.agent, outgoing(row, await actionHeaders(deps.db, [row]), secrets.get(row.user_id) ?? [], row.attempts_made + 1), deps.config.delivery.timeoutMs, deps.log)
  const updated = await deps.db.updateTable('webhook_deliveries').set({
    attempts_made: sql<number>`attempts_made + 1`,
    attempts: appendAttempt(logEntry(outcome, true)),
    ...(outcome.ok ? { status: 'delivered' as const, delivered_at: new Date(), next_attempt_at: null } : {}),
    updated_at: new Date()
  }).where('id', '=', row.id).returningAll().executeTakeFirstOrThrow()
  return { outcome, row: updated }
}

/** Deletes the requests of finished deliveries older than the retention; the log of attempts stays. */
export async function purgeExpired (db: DB, retentionDays: number): Promise<number> {
  const result = await db.updateTable('webhook_deliveries')
    .set({ url: null, body: null, variables: null, purged_at: new Date() })
    .where('purged_at', 'is', null).where('status', '<>', 'pending')
    .where('updated_at', '<', sql<Date>`now() - make_interval(days => ${retentionDays})`)
    .executeTakeFirst()
  return Number(result.numUpdatedRows)
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
