import type { JobWithMetadata } from 'pg-boss'
import type { Logger } from 'pino'
import type { DB } from '../../db/database.ts'
import { QUEUES, workOn, type JobSender, type QueuePayloads } from '../../jobs/queues.ts'
import { findAgent } from '../agents/queries.ts'
import { CALL_SETTINGS_DEFAULTS } from '../agents/schemas.ts'
import { finishCall } from '../calls/lifecycle.ts'
import { findCallRow } from '../calls/queries.ts'
import { actionConditions, enqueuePostCall, type ConditionVerdicts } from '../deliveries/engine.ts'
import type { Analyser, AnalysisResult, RetrievalField } from './analysis/types.ts'

export interface WorkerDeps extends JobSender { db: DB, log: Logger, analyser: Analyser }

type CallJob = QueuePayloads[typeof QUEUES.analyseCall]

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
 * Analyses an ended call and finalises it in one transaction: the call's result (calls' finishCall) and
 * its post-call deliveries. On the last attempt an analyser failure finalises the call
 * without analysis instead of failing the job, so the call is charged and delivered whatever happens.
 */
export async function analyseCall (deps: WorkerDeps, job: JobWithMetadata<CallJob>): Promise<void> {
  const { db } = deps
  const call = await findCallRow(db, job.data.callId)
  if (call === undefined || call.analysis_status !== 'pending') return
  // Tool events and workflow steps are the engine's, not the conversation's: the analysers read what was said.
  const transcript = call.transcription.filter((item) => item.speaker !== 'tool' && item.speaker !== 'step')
  const held = call.outcome === 'completed' && transcript.length > 0
  let result: AnalysisResult | undefined
  let error: string | undefined
  let fields: RetrievalField[] = []
  const verdicts: ConditionVerdicts = new Map()
  if (held) {
    const settings = await analysisSettings(db, call.user_id, call.agent_id)
    fields = settings.fields
    const conditions = await actionConditions(db, call)
    try {
      result = await deps.analyser.analyse({ transcript, callStart: call.start_timestamp, conditions, ...settings })
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
  // The workflow's variables were given during the call (by the caller, or an API's answer): they win over what
  // the analysis read back from the transcript for the same name. One without a value (null) is left out.
  const workflow = Object.fromEntries(Object.entries(call.workflow?.variables ?? {}).filter((entry): entry is [string, string | number | boolean] => entry[1] !== null))
  const found = { ...result?.data, ...workflow }
  const analysis = {
    held,
    error,
    summary: result?.summary ?? null,
    sentiment: result?.sentiment ?? null,
    data: result === undefined && Object.keys(workflow).length === 0 ? undefined : found,
    taskAchieved: held && result !== undefined && result.sentiment?.sentiment !== 'negative' &&
      // A required field counts when analysis found it or the agent collected it during the call.
      fields.filter((f) => f.required).every((f) => found[f.name] !== undefined || call.collected_data?.[f.name] !== undefined),
    usage: result?.usage ?? {}
  }
  await db.transaction().execute(async (trx) => {
    const updated = await finishCall(trx, call, analysis, deps.config.prices)
    if (updated !== undefined) await enqueuePostCall(trx, deps, updated, verdicts)
  })
}

export async function registerRuntimeWorkers (deps: WorkerDeps): Promise<void> {
  await workOn(deps.boss, QUEUES.analyseCall, { includeMetadata: true, localConcurrency: 2, pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: 1 }, async (jobs) => {
    for (const job of jobs) await analyseCall(deps, job)
  })
}
