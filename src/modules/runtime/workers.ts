import type { Job, JobWithMetadata, PgBoss } from 'pg-boss'
import type { Logger } from 'pino'
import type { DB } from '../../db/database.ts'
import type { TranscriptItem } from '../../db/schema.ts'
import { QUEUES } from '../../jobs/queues.ts'
import { chargeCredits } from '../account/credits.ts'
import { findAgent, findLlm } from '../agents/queries.ts'
import { CALL_SETTINGS_DEFAULTS } from '../agents/schemas.ts'
import { actionConditions, enqueuePostCall, type ConditionVerdicts } from '../deliveries/engine.ts'
import type { Analyser, AnalysisResult, RetrievalField } from './analysis/analyser.ts'
import { creditsOf, endCall, type JobSender } from './lifecycle.ts'
import { simulate } from './simulator.ts'

export interface WorkerDeps extends JobSender { db: DB, log: Logger, analyser: Analyser }

interface CallJob { callId: string }

/** What the agent asks of the analysis; an agent deleted since the call is analysed with the defaults. */
async function analysisSettings (db: DB, userId: string, agentId: string) {
  const agent = await findAgent(db, userId, agentId)
  const settings = { ...CALL_SETTINGS_DEFAULTS, ...agent?.call_settings }
  return {
    language: String(settings.language),
    summary: settings.call_summary !== false,
    sentiment: settings.sentiment_analysis !== false,
    fields: agent?.data_retrieval ?? []
  }
}

/**
 * Analyses an ended call and finalises it in one transaction: status, analysis, credits (charged to the
 * ledger) and the post-call deliveries. On the last attempt an analyser failure finalises the call
 * without analysis instead of failing the job, so the call is charged and delivered whatever happens.
 */
export async function analyseCall (deps: WorkerDeps, job: JobWithMetadata<CallJob>): Promise<void> {
  const { db } = deps
  const call = await db.selectFrom('calls').selectAll().where('id', '=', job.data.callId).executeTakeFirst()
  if (call === undefined || call.analysis_status !== 'pending') return
  const held = call.outcome === 'completed' && call.transcription.length > 0
  let result: AnalysisResult | undefined
  let error: string | undefined
  let fields: RetrievalField[] = []
  const verdicts: ConditionVerdicts = new Map()
  if (held) {
    const settings = await analysisSettings(db, call.user_id, call.agent_id)
    fields = settings.fields
    const conditions = await actionConditions(db, call.agent_id)
    try {
      result = await deps.analyser.analyse({ transcript: call.transcription, callStart: call.start_timestamp, conditions, ...settings })
      for (const { actionId, condition } of conditions) {
        const met = result.conditions[actionId]
        if (met !== undefined) verdicts.set(actionId, { condition, met })
      }
    } catch (err) {
      if (job.retryCount < job.retryLimit) throw err
      error = err instanceof Error ? err.message : String(err)
      deps.log.error({ err, callId: call.id }, 'call analysis failed on its last attempt; the call is finalised without it')
    }
  }
  await db.transaction().execute(async (trx) => {
    const locked = await trx.selectFrom('calls').select('analysis_status').where('id', '=', call.id).forUpdate().executeTakeFirstOrThrow()
    if (locked.analysis_status !== 'pending') return
    const credits = creditsOf(call, deps.config.prices)
    const tokens = { ...call.token_usage }
    for (const [model, usage] of Object.entries(result?.usage ?? {})) {
      tokens[model] = { input: (tokens[model]?.input ?? 0) + usage.input, output: (tokens[model]?.output ?? 0) + usage.output }
    }
    const found = result?.data ?? {}
    const taskAchieved = held && result !== undefined && result.sentiment?.sentiment !== 'negative' &&
      fields.filter((f) => f.required).every((f) => found[f.name] !== undefined)
    const updated = await trx.updateTable('calls').set({
      call_status: held ? 'success' : 'failed',
      analysis_status: error === undefined ? 'completed' : 'failed',
      analysis_error: error ?? null,
      call_summary: result?.summary ?? null,
      sentiment: result?.sentiment?.sentiment ?? null,
      sentiment_explanation: result?.sentiment?.explanation ?? null,
      task_achieved: taskAchieved,
      custom_analysis_data: result === undefined ? null : JSON.stringify(found),
      ...credits,
      token_usage: JSON.stringify(tokens),
      input_tokens: Object.values(tokens).reduce((n, t) => n + t.input, 0),
      output_tokens: Object.values(tokens).reduce((n, t) => n + t.output, 0),
      updated_at: new Date()
    }).where('id', '=', call.id).returningAll().executeTakeFirstOrThrow()
    const total = credits.phone_call_credits + credits.web_call_credits + credits.text_message_credits + credits.call_forwarding_credits
    if (total > 0) await chargeCredits(trx, call.user_id, { amount: total, callId: call.id, description: `${call.call_type} call ${call.id}` })
    await enqueuePostCall(trx, deps, updated, verdicts)
  })
}

/** The simulator answers and ends a call it was given, through the same path as the runtime API. */
async function simulateCall (deps: WorkerDeps, job: Job<CallJob>): Promise<void> {
  const { db } = deps
  const call = await db.selectFrom('calls').selectAll().where('id', '=', job.data.callId).executeTakeFirst()
  if (call === undefined || call.call_status !== 'started') return
  const agent = await findAgent(db, call.user_id, call.agent_id)
  const llm = agent === undefined ? undefined : await findLlm(db, call.user_id, agent.llm_id)
  const end = agent === undefined
    ? { outcome: 'failed' as const, disconnection_reason: 'runtime_error' }
    : simulate({
      callType: call.call_type,
      callTo: call.call_to,
      start: call.start_timestamp,
      end: new Date(),
      language: String(agent.call_settings.language ?? CALL_SETTINGS_DEFAULTS.language),
      beginMessage: llm?.begin_message ?? null,
      dynamicContext: call.dynamic_context
    })
  await endCall(db, deps, call.user_id, call.id, end).catch(ignoreEnded)
}

/**
 * A call still running at its agent's maximum duration is ended by the server. One that no runtime ever
 * reported on (an outbound or web call without a word of transcript: nothing answered it) never
 * connected: it fails as `not_connected` and costs nothing. An inbound call was reported by its runtime
 * when it arrived, so it connected.
 */
async function endAtDeadline (deps: WorkerDeps, job: Job<CallJob & { maxMs: number }>): Promise<void> {
  const call = await deps.db.selectFrom('calls').select(['user_id', 'call_status', 'direction', 'start_timestamp', 'transcription']).where('id', '=', job.data.callId).executeTakeFirst()
  if (call === undefined || call.call_status !== 'started') return
  const transcription: TranscriptItem[] = call.transcription
  const connected = call.direction === 'inbound' || transcription.length > 0
  await endCall(deps.db, deps, call.user_id, job.data.callId, {
    outcome: connected ? 'completed' : 'failed',
    disconnection_reason: connected ? 'max_duration_reached' : 'not_connected',
    end_timestamp: Math.min(Date.now(), call.start_timestamp.getTime() + job.data.maxMs),
    transcription
  }).catch(ignoreEnded)
}

/** The call ended meanwhile (the runtime and a job raced): nothing left to do. */
function ignoreEnded (err: unknown): void {
  if ((err as { code?: string }).code !== 'call_not_started') throw err
}

export async function registerRuntimeWorkers (boss: PgBoss, deps: WorkerDeps): Promise<void> {
  const each = <T>(handler: (deps: WorkerDeps, job: T) => Promise<void>) => async (jobs: T[]) => {
    for (const job of jobs) await handler(deps, job)
  }
  // Delayed jobs (the simulator, deadlines) become ready without a NOTIFY: poll for them every second.
  await boss.work<CallJob>(QUEUES.simulateCall, { pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: 1 }, each(simulateCall))
  await boss.work<CallJob & { maxMs: number }>(QUEUES.callDeadline, { pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: 1 }, each(endAtDeadline))
  await boss.work(QUEUES.analyseCall, { includeMetadata: true, localConcurrency: 2, pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: 1 }, async (jobs: Array<JobWithMetadata<CallJob>>) => {
    for (const job of jobs) await analyseCall(deps, job)
  })
}
