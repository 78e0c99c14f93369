import { sql, type ExpressionBuilder, type Insertable, type Selectable, type Transaction } from 'kysely'
import { inOneSnapshot, type DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { Database, DeliveryAttempt, WebhookDeliveriesTable } from '../../db/schema.ts'
import { openSettings, type CapabilityRow } from '../agents/queries.ts'

// The SQL of the deliveries module: deliveries, their failure notices, the signing secrets, and what they read
// of agents, actions and users. Sealing, signing and the schedule stay in the domain files.

export type DeliveryRow = Selectable<WebhookDeliveriesTable>
type Trx = Transaction<Database>
type Executor = DB | Trx

// What deliveries read of agents, actions and users

/** The agent's active actions, oldest first, with their header values opened (as their schema reads them). */
export async function activeActions (db: Executor, agentId: string): Promise<CapabilityRow[]> {
  const actions = await db.selectFrom('agent_actions').select(['id', 'agent_id', 'action_type as type', 'settings', 'is_active', 'created_at', 'updated_at'])
    .where('agent_id', '=', agentId).where('is_active', '=', true)
    .orderBy('created_at').orderBy('id').execute()
  return actions.map((action) => ({ ...action, settings: openSettings(action.settings) }))
}

/** The agent's active tools with their settings (some have post-call work: a CRM's call log). */
export async function activeTools (db: Executor, agentId: string): Promise<CapabilityRow[]> {
  const tools = await db.selectFrom('agent_tools').select(['id', 'agent_id', 'tool_type as type', 'settings', 'is_active', 'created_at', 'updated_at'])
    .where('agent_id', '=', agentId).where('is_active', '=', true)
    .orderBy('created_at').orderBy('id').execute()
  return tools.map((tool) => ({ ...tool, settings: openSettings(tool.settings) }))
}

/** The settings of the action behind a delivery, as stored (header values sealed); undefined once it was deleted. */
export async function actionSettings (db: DB, actionId: string): Promise<Record<string, unknown> | undefined> {
  const action = await db.selectFrom('agent_actions').select('settings').where('id', '=', actionId).executeTakeFirst()
  return action?.settings
}

/** The settings of several actions by id, as stored. */
export async function actionSettingsByIds (db: DB, ids: string[]): Promise<Array<{ id: string, settings: Record<string, unknown> }>> {
  return await db.selectFrom('agent_actions').select(['id', 'settings']).where('id', 'in', ids).execute()
}

/** The agents' workflows as stored (agents.workflow; read through workflows/steps.ts), by agent id; a deleted agent is missing. */
export async function agentWorkflows (db: Executor, agentIds: string[]): Promise<Map<string, unknown>> {
  if (agentIds.length === 0) return new Map()
  const rows = await db.selectFrom('agents').select(['id', 'workflow']).where('id', 'in', agentIds).execute()
  return new Map(rows.map((row) => [row.id, row.workflow]))
}

export async function agentWebhookUrl (db: Executor, agentId: string): Promise<string | null> {
  const agent = await db.selectFrom('agents').select(['webhook_url']).where('id', '=', agentId).executeTakeFirst()
  return agent?.webhook_url ?? null
}

export async function agentName (db: DB, agentId: string): Promise<string | undefined> {
  const agent = await db.selectFrom('agents').select('agent_name').where('id', '=', agentId).executeTakeFirst()
  return agent?.agent_name
}

/** Where and in which language the account owner is written to. */
export async function ownerContact (db: DB, userId: string): Promise<{ email: string, language: string }> {
  return await db.selectFrom('users').select(['email', 'language']).where('id', '=', userId).executeTakeFirstOrThrow()
}

// Deliveries

/** Stores a delivery; in the transaction that sends its first attempt's job. */
export async function insertDelivery (trx: Trx, values: Omit<Insertable<WebhookDeliveriesTable>, 'id'>): Promise<string> {
  const row = await trx.insertInto('webhook_deliveries').values({ id: newId(), ...values }).returning('id').executeTakeFirstOrThrow()
  return row.id
}

/** `workspaceId`: only deliveries of that workspace's calls (a delivery belongs to its call's workspace). */
export interface DeliveryFilter { status?: DeliveryRow['status'], agentId?: string, callId?: string, workspaceId?: string }

const ofWorkspace = (workspaceId: string) => (eb: ExpressionBuilder<Database, 'webhook_deliveries'>) =>
  eb('call_id', 'in', eb.selectFrom('calls').select('id').where('workspace_id', '=', workspaceId))

/** The account's deliveries, newest first, and how many match the filter. */
export async function listDeliveries (db: DB, userId: string, filter: DeliveryFilter, paging: { limit: number, offset: number }): Promise<{ rows: DeliveryRow[], total: number }> {
  const { status, agentId, callId, workspaceId } = filter
  return await inOneSnapshot(db, async (snapshot) => {
    const filtered = snapshot.selectFrom('webhook_deliveries').where('user_id', '=', userId)
      .$if(workspaceId !== undefined, (q) => q.where(ofWorkspace(workspaceId!)))
      .$if(status !== undefined, (q) => q.where('status', '=', status!))
      .$if(agentId !== undefined, (q) => q.where('agent_id', '=', agentId!.toLowerCase()))
      .$if(callId !== undefined, (q) => q.where('call_id', '=', callId!.toLowerCase()))
    const rows = await filtered.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc').limit(paging.limit).offset(paging.offset).execute()
    const count = await filtered.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()
    return { rows, total: count.n }
  })
}

/** One of the account's deliveries; with `workspaceId`, only one of that workspace's calls. */
export async function findDelivery (db: DB, userId: string, id: string, workspaceId?: string): Promise<DeliveryRow | undefined> {
  return await db.selectFrom('webhook_deliveries').selectAll().where('user_id', '=', userId).where('id', '=', id.toLowerCase())
    .$if(workspaceId !== undefined, (q) => q.where(ofWorkspace(workspaceId!))).executeTakeFirst()
}

/** A delivery as an attempt reads it: the body stays JSON text, sent as stored without a parse and re-serialisation. */
export type SendableRow = Omit<DeliveryRow, 'body'> & { body_text: string | null }

const SENDABLE = ['id', 'user_id', 'delivery_id', 'correlation_id', 'call_id', 'agent_id', 'action_id', 'kind', 'name', 'status', 'method',
  'url', 'variables', 'schedule', 'attempts_max', 'scheduled_made', 'attempts_made', 'attempts', 'next_attempt_at', 'delivered_at',
  'purged_at', 'created_at', 'updated_at'] as const

function sendable (db: DB) {
  return db.selectFrom('webhook_deliveries').select(SENDABLE).select(sql<string | null>`body::text`.as('body_text'))
}

/** The deliveries a batch of attempt jobs names. */
export async function sendableDeliveries (db: DB, ids: string[]): Promise<SendableRow[]> {
  return await sendable(db).where('id', 'in', ids).execute()
}

/** One of the account's deliveries, to send again. */
export async function findSendable (db: DB, userId: string, id: string): Promise<SendableRow | undefined> {
  return await sendable(db).where('user_id', '=', userId).where('id', '=', id.toLowerCase()).executeTakeFirst()
}

/** The attempts log with one more entry, numbered after the attempts already made (read under the row's update lock). */
const appendAttempt = (entry: Omit<DeliveryAttempt, 'n'>) =>
  sql<string>`attempts || jsonb_build_array(jsonb_build_object('n', attempts_made + 1) || ${JSON.stringify(entry)}::jsonb)`

export interface FinishedAttempt { id: string, n: number, status: 'delivered' | 'failed', entry: Omit<DeliveryAttempt, 'n'> }

/**
 * Logs the last attempt of deliveries that are done, in one statement for the whole batch; each only if it
 * still waits for that attempt. Answers the ids it logged.
 */
export async function logFinishedAttempts (db: DB, finished: FinishedAttempt[]): Promise<Set<string>> {
  const { rows: logged } = await sql<{ id: string }>`
    UPDATE webhook_deliveries d SET
      status = v.status, scheduled_made = v.n, attempts_made = d.attempts_made + 1,
      attempts = d.attempts || jsonb_build_array(jsonb_build_object('n', d.attempts_made + 1) || v.entry),
      next_attempt_at = NULL, delivered_at = CASE WHEN v.status = 'delivered' THEN now() END, updated_at = now()
    FROM unnest(${finished.map((f) => f.id)}::text[], ${finished.map((f) => f.n)}::int[],
      ${finished.map((f) => f.status)}::text[], ${finished.map((f) => JSON.stringify(f.entry))}::jsonb[]) AS v (id, n, status, entry)
    WHERE d.id = v.id AND d.status = 'pending' AND d.scheduled_made = v.n - 1
    RETURNING d.id`.execute(db)
  return new Set(logged.map((r) => r.id))
}

/**
 * Logs failed scheduled attempt `n` and the time of the next, if the delivery still waits for it; in the
 * transaction that sends the next attempt's job. Answers whether it was logged.
 */
export async function logRetry (trx: Trx, id: string, n: number, entry: Omit<DeliveryAttempt, 'n'>, next: Date): Promise<boolean> {
  const updated = await trx.updateTable('webhook_deliveries').set({
    scheduled_made: n,
    attempts_made: sql<number>`attempts_made + 1`,
    attempts: appendAttempt(entry),
    next_attempt_at: next,
    updated_at: new Date()
  }).where('id', '=', id).where('status', '=', 'pending').where('scheduled_made', '=', n - 1).returning('id').executeTakeFirst()
  return updated !== undefined
}

/** Logs a manual attempt; a delivered one makes the delivery `delivered`. */
export async function logResend (db: DB, id: string, entry: Omit<DeliveryAttempt, 'n'>, delivered: boolean): Promise<DeliveryRow> {
  return await db.updateTable('webhook_deliveries').set({
    attempts_made: sql<number>`attempts_made + 1`,
    attempts: appendAttempt(entry),
    ...(delivered ? { status: 'delivered' as const, delivered_at: new Date(), next_attempt_at: null } : {}),
    updated_at: new Date()
  }).where('id', '=', id).returningAll().executeTakeFirstOrThrow()
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

// Failure notices

/** Serialises the notices of one source until the transaction ends. */
export async function lockNoticeSource (trx: Trx, sourceKey: string): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtext(${sourceKey}))`.execute(trx)
}

/** When the source's notices since `since` were sent, oldest first. */
export async function noticesSince (trx: Trx, sourceKey: string, since: Date): Promise<Array<{ sent_at: Date }>> {
  return await trx.selectFrom('delivery_notifications').select(['sent_at']).where('source_key', '=', sourceKey)
    .where('sent_at', '>', since).orderBy('sent_at').execute()
}

/** Records a notice before its e-mail is sent (its email_id follows); under the source's lock. */
export async function insertNotice (trx: Trx, userId: string, values: { sourceKey: string, deliveryRowId: string, final: boolean }): Promise<string> {
  const id = newId()
  await trx.insertInto('delivery_notifications').values({ id, user_id: userId, source_key: values.sourceKey, delivery_row_id: values.deliveryRowId, final: values.final, email_id: '' }).execute()
  return id
}

export async function setNoticeEmail (db: DB, id: string, emailId: string): Promise<void> {
  await db.updateTable('delivery_notifications').set({ email_id: emailId }).where('id', '=', id).execute()
}

// Signing secrets (stored sealed: src/db/secrets.ts)

/** Stores a current secret for the account unless it has one (two at once store one). */
export async function insertSecretIfNone (db: DB, userId: string, sealed: string): Promise<void> {
  await db.insertInto('webhook_secrets').values({ id: newId(), user_id: userId, secret: sealed })
    .onConflict((oc) => oc.column('user_id').where('expires_at', 'is', null).doNothing()).execute()
}

export async function findCurrentSecret (db: DB, userId: string): Promise<{ secret: string, created_at: Date }> {
  return await db.selectFrom('webhook_secrets').select(['secret', 'created_at'])
    .where('user_id', '=', userId).where('expires_at', 'is', null).executeTakeFirstOrThrow()
}

/** Ends the current secret at `expires`; in the transaction that stores its successor. */
export async function expireCurrentSecret (trx: Trx, userId: string, expires: Date): Promise<void> {
  await trx.updateTable('webhook_secrets').set({ expires_at: expires }).where('user_id', '=', userId).where('expires_at', 'is', null).execute()
}

/** Stores the new current secret; in the transaction that ended the previous one. */
export async function insertSecret (trx: Trx, userId: string, sealed: string): Promise<{ secret: string, created_at: Date }> {
  return await trx.insertInto('webhook_secrets').values({ id: newId(), user_id: userId, secret: sealed })
    .returning(['secret', 'created_at']).executeTakeFirstOrThrow()
}

/** The secrets that sign now (current, and previous ones still in their overlap) of several accounts, newest first. */
export async function activeSecrets (db: DB, userIds: string[]): Promise<Array<{ user_id: string, secret: string }>> {
  return await db.selectFrom('webhook_secrets').select(['user_id', 'secret'])
    .where('user_id', 'in', userIds).where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<Date>`now()`)]))
    .orderBy('created_at', 'desc').execute()
}

/** The account's test signing secret (sealed), stored first unless it has one (two first uses at once store one). */
export async function testSecretOf (db: DB, userId: string, sealed: string): Promise<string> {
  await db.insertInto('webhook_test_secrets').values({ user_id: userId, secret: sealed }).onConflict((oc) => oc.column('user_id').doNothing()).execute()
  const row = await db.selectFrom('webhook_test_secrets').select('secret').where('user_id', '=', userId).executeTakeFirstOrThrow()
  return row.secret
}

/** Until when the account's previous secret still signs; undefined when none does. */
export async function previousSecretExpiry (db: DB, userId: string): Promise<Date | undefined> {
  const previous = await db.selectFrom('webhook_secrets').select('expires_at').where('user_id', '=', userId)
    .where('expires_at', '>', new Date()).orderBy('expires_at', 'desc').executeTakeFirst()
  return previous?.expires_at ?? undefined
}
