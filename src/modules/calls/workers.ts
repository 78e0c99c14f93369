import type { Job } from 'pg-boss'
import type { DB } from '../../db/database.ts'
import { QUEUES, workOn, type JobSender, type QueuePayloads } from '../../jobs/queues.ts'
import { endCall, toCallEnd } from './lifecycle.ts'
import { placeCallback } from './phone-calls.ts'
import { findCallRow } from './queries.ts'

export interface CallWorkerDeps extends JobSender { db: DB }

/**
 * A call still running at its agent's maximum duration is ended by the server. One that no runtime ever
 * reported on (an outbound or web call without a word of transcript: nothing answered it) never
 * connected: it fails as `not_connected` and costs nothing. An inbound call was reported by its runtime
 * when it arrived, so it connected. A call forwarded to a person ends with the conversation kept with the
 * forwarding (calls.forwarding): its transcript, usage, transfers and recording.
 */
async function endAtDeadline (deps: CallWorkerDeps, job: Job<QueuePayloads[typeof QUEUES.callDeadline]>): Promise<void> {
  const call = await findCallRow(deps.db, job.data.callId)
  if (call === undefined || call.call_status !== 'started') return
  const endAt = Math.min(Date.now(), call.start_timestamp.getTime() + job.data.maxMs)
  if (call.forwarding !== null) {
    await endCall(deps.db, deps, call.user_id, call.id, { ...toCallEnd(deps.config, call.id, call.forwarding, { reason: 'max_duration_reached' }), end_timestamp: endAt })
    return
  }
  const connected = call.direction === 'inbound' || call.transcription.length > 0
  await endCall(deps.db, deps, call.user_id, call.id, {
    outcome: connected ? 'completed' : 'failed',
    disconnection_reason: connected ? 'max_duration_reached' : 'not_connected',
    end_timestamp: endAt,
    transcription: call.transcription
  })
}

export async function registerCallWorkers (deps: CallWorkerDeps): Promise<void> {
  // Deadlines become ready at their time without a NOTIFY: poll for them every second.
  await workOn(deps.boss, QUEUES.callDeadline, { pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: 1 }, async (jobs) => {
    for (const job of jobs) await endAtDeadline(deps, job)
  })
  // Callbacks too become ready at their time (an agent's retry_delay_minutes).
  await workOn(deps.boss, QUEUES.placeCallback, { pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: 1 }, async (jobs) => {
    for (const job of jobs) await placeCallback(deps, job.data.callbackId)
  })
}
