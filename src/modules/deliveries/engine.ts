import { randomUUID } from 'node:crypto'
import { fromKysely, type Job, type JobResult, type PgBoss } from 'pg-boss'
import { sql, type Selectable, type Transaction } from 'kysely'
import type { Logger } from 'pino'
import type { Agent } from 'undici'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { Database, DeliveryAttempt, WebhookDeliveriesTable } from '../../db/schema.ts'
import { HttpError, notFound } from '../../http/errors.ts'
import { QUEUES } from '../../jobs/queues.ts'
import type { CallRow } from '../calls/queries.ts'
import { actionRequest, callVariables, renderHeaders, webhookRequest, type ApiCallSettings, type ShapedRequest } from './render.ts'
import { send, type Outcome } from './send.ts'

// The delivery engine (DESIGN.md "Post-call delivery", the specification's Events section): one row per
// source and call, one pg-boss job per scheduled attempt. Each attempt is logged, and the next one sent, in
// one transaction under the row lock, so an attempt is never lost and never made twice by the schedule.

export type DeliveryRow = Selectable<WebhookDeliveriesTable>
type Trx = Transaction<Database>

/** Pauses before attempts 2 to 8 of the default schedule, in seconds: 1 min, 5 min, 30 min, 2 h, 6 h, 24 h, 48 h. */
export const DEFAULT_SCHEDULE = [60, 300, 1800, 7200, 21_600, 86_400, 172_800]

export const USER_AGENT = 'SERVICE-Webhooks/1.0'

export interface DeliveryDeps { db: DB, boss: PgBoss, config: Config, log: Logger, agent: Agent }

interface Source { kind: 'agent_webhook' | 'api_call', name: string, actionId: string | null, request: ShapedRequest, schedule: number[] }

/**
 * Stores the post-call deliveries of an analysed call with their first attempt jobs, in the analysis
 * transaction: the agent's webhook_url and every active api_call action of the agent.
 */
export async function enqueuePostCall (trx: Trx, deps: { boss: PgBoss, log: Logger }, call: CallRow): Promise<void> {
  const agent = await trx.selectFrom('agents').select(['webhook_url']).where('id', '=', call.agent_id).executeTakeFirst()
  const actions = await trx.selectFrom('agent_actions').select(['id', 'settings'])
    .where('agent_id', '=', call.agent_id).where('action_type', '=', 'api_call').where('is_active', '=', true)
    .orderBy('created_at').execute()
  const variables = callVariables(call)
  const sources: Source[] = []
  if (agent?.webhook_url != null) {
    sources.push({ kind: 'agent_webhook', name: 'Agent webhook', actionId: null, request: webhookRequest(agent.webhook_url, call), schedule: DEFAULT_SCHEDULE })
  }
  for (const action of actions) {
    const settings = action.settings as unknown as ApiCallSettings & { name: string, retry_schedule?: number[] }
    let request: ShapedRequest
    try {
      request = actionRequest(settings, call, variables)
    } catch (err) {
      // A URL that renders invalid (a variable that made it so) cannot be sent; it is logged, not retried.
      deps.log.warn({ err, actionId: action.id, callId: call.id }, 'post-call action has an invalid URL')
      continue
    }
    sources.push({ kind: 'api_call', name: settings.name, actionId: action.id, request, schedule: settings.retry_schedule ?? DEFAULT_SCHEDULE })
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
    await deps.boss.send(QUEUES.deliveryAttempt, { id: row.id, n: 1 }, { db: fromKysely(trx) })
  }
}

/** The request of an attempt, headers read now: an action's renewed receiver key applies to pending deliveries. */
async function outgoing (db: DB, row: DeliveryRow, attempt: number) {
  let custom: Record<string, string> = {}
  if (row.action_id !== null) {
    const action = await db.selectFrom('agent_actions').select('settings').where('id', '=', row.action_id).executeTakeFirst()
    custom = renderHeaders((action?.settings as { headers?: Record<string, string> } | undefined)?.headers, row.variables ?? {})
  }
  const headers: Record<string, string> = {
    ...custom,
    'user-agent': USER_AGENT,
    'x-service-delivery-id': row.delivery_id,
    'x-service-attempt': String(attempt),
    'x-correlation-id': row.correlation_id
  }
  const hasBody = row.body !== null && !['GET', 'DELETE'].includes(row.method)
  if (hasBody) headers['content-type'] = 'application/json; charset=utf-8'
  return { method: row.method, url: row.url!, headers, body: hasBody ? JSON.stringify(row.body) : undefined }
}

function logEntry (n: number, outcome: Outcome, manual: boolean): DeliveryAttempt {
  return {
    n,
    at: new Date().toISOString(),
    duration_ms: outcome.duration_ms,
    ...(outcome.status_code === undefined ? {} : { status_code: outcome.status_code }),
    ...(outcome.error === undefined ? {} : { error: outcome.error }),
    ...(outcome.response_preview === undefined ? {} : { response_preview: outcome.response_preview }),
    ...(manual ? { manual: true } : {})
  }
}

const appendAttempt = (entry: DeliveryAttempt) => sql<string>`attempts || ${JSON.stringify([entry])}::jsonb`

/**
 * Scheduled attempt `n` of a delivery. A job that is stale (the delivery moved on meanwhile) does nothing;
 * a job run twice (a worker died after sending) sends again, which at-least-once allows, but logs once.
 */
export async function attempt (deps: DeliveryDeps, job: { id: string, n: number }): Promise<void> {
  const row = await deps.db.selectFrom('webhook_deliveries').selectAll().where('id', '=', job.id).executeTakeFirst()
  if (row === undefined || row.status !== 'pending' || row.scheduled_made !== job.n - 1 || row.url === null) return
  const outcome = await send(deps.agent, await outgoing(deps.db, row, row.attempts_made + 1), deps.config.delivery.timeoutMs)
  await deps.db.transaction().execute(async (trx) => {
    const current = await trx.selectFrom('webhook_deliveries').select(['status', 'scheduled_made', 'attempts_made', 'attempts_max', 'schedule'])
      .where('id', '=', row.id).forUpdate().executeTakeFirstOrThrow()
    if (current.status !== 'pending' || current.scheduled_made !== job.n - 1) return
    const last = job.n >= current.attempts_max
    const next = outcome.ok || last ? null : new Date(Date.now() + current.schedule[job.n - 1] * 1000 * deps.config.delivery.timeScale)
    await trx.updateTable('webhook_deliveries').set({
      status: outcome.ok ? 'delivered' : last ? 'failed' : 'pending',
      scheduled_made: job.n,
      attempts_made: current.attempts_made + 1,
      attempts: appendAttempt(logEntry(current.attempts_made + 1, outcome, false)),
      next_attempt_at: next,
      delivered_at: outcome.ok ? new Date() : null,
      updated_at: new Date()
    }).where('id', '=', row.id).execute()
    if (next !== null) await deps.boss.send(QUEUES.deliveryAttempt, { id: row.id, n: job.n + 1 }, { db: fromKysely(trx), startAfter: next })
  })
}

/**
 * Sends the delivery again now, outside its schedule: success makes it `delivered` (also after an earlier
 * success), a failure leaves its status as it was. Sends no notification.
 */
export async function resend (deps: DeliveryDeps, userId: string, id: string): Promise<{ outcome: Outcome, row: DeliveryRow }> {
  const row = await deps.db.selectFrom('webhook_deliveries').selectAll().where('user_id', '=', userId).where('id', '=', id.toLowerCase()).executeTakeFirst()
  if (row === undefined) throw notFound(`webhook delivery ${id}`)
  if (row.url === null) throw new HttpError(409, 'delivery_purged', `the request of delivery ${row.id} was deleted after ${deps.config.delivery.retentionDays} days; it cannot be sent again`)
  const outcome = await send(deps.agent, await outgoing(deps.db, row, row.attempts_made + 1), deps.config.delivery.timeoutMs)
  const updated = await deps.db.transaction().execute(async (trx) => {
    const current = await trx.selectFrom('webhook_deliveries').select(['attempts_made']).where('id', '=', row.id).forUpdate().executeTakeFirstOrThrow()
    return await trx.updateTable('webhook_deliveries').set({
      attempts_made: current.attempts_made + 1,
      attempts: appendAttempt(logEntry(current.attempts_made + 1, outcome, true)),
      ...(outcome.ok ? { status: 'delivered' as const, delivered_at: new Date(), next_attempt_at: null } : {}),
      updated_at: new Date()
    }).where('id', '=', row.id).returningAll().executeTakeFirstOrThrow()
  })
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

export async function registerDeliveryWorkers (boss: PgBoss, deps: DeliveryDeps): Promise<void> {
  await boss.work(QUEUES.deliveryAttempt, {
    batchSize: deps.config.delivery.concurrency,
    burstWhenBatchFull: true,
    perJobResults: true,
    // Retries become ready at their time without a NOTIFY; look for them every second.
    pollingIntervalSeconds: 1,
    notifyPollingIntervalSeconds: 1
  }, async (jobs: Array<Job<{ id: string, n: number }>>): Promise<JobResult[]> => await Promise.all(jobs.map(async (job) => {
    try {
      await attempt(deps, job.data)
      return { id: job.id, status: 'completed' as const }
    } catch (err) {
      deps.log.error({ err, deliveryRowId: job.data.id }, 'delivery attempt failed inside the server; it will be retried')
      return { id: job.id, status: 'failed' as const }
    }
  })))
}
