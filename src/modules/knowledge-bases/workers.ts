import type { JobWithMetadata, PgBoss } from 'pg-boss'
import type { Logger } from 'pino'
import type { KnowledgeBaseLimits } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import { QUEUES, workOn, type QueuePayloads } from '../../jobs/queues.ts'
import type { ExtractAnswer, ExtractTask } from './extract-worker.ts'
import { LimitExceeded, runIsolated } from './isolated.ts'
import { failExtraction, finishExtraction, readFileContent, startExtraction } from './queries.ts'

export interface KnowledgeWorkerDeps { db: DB, log: Logger, limits: KnowledgeBaseLimits }

const EXTRACT_WORKER = new URL('./extract-worker.ts', import.meta.url)

type FileJob = QueuePayloads[typeof QUEUES.extractKnowledgeFile]

/**
 * Reads an uploaded file into passages in a worker thread bounded in memory and time (a file may be built to
 * unpack or parse into far more than its size). A document that cannot be read, or that breaks a bound, marks
 * the file failed with the reason and ends the job (reading it again would fail the same way); other errors
 * retry the job.
 */
export async function extractFile (deps: KnowledgeWorkerDeps, fileId: string): Promise<void> {
  const file = await startExtraction(deps.db, fileId)
  if (file === undefined) return
  const { extraction } = deps.limits
  const task: ExtractTask = { type: file.file_type, content: await readFileContent(deps.db, file.id), limits: { zip: extraction.zip, maxPassages: extraction.maxPassages } }
  let answer: ExtractAnswer
  try {
    answer = await runIsolated<ExtractAnswer>(EXTRACT_WORKER, task, { memoryMb: extraction.memoryMb, timeoutMs: extraction.timeoutMs })
  } catch (err) {
    if (!(err instanceof LimitExceeded)) throw err
    deps.log.warn({ fileId: file.id, reason: err.message }, 'knowledge-base file broke a limit of its reading')
    await failExtraction(deps.db, file.id, `the file cannot be read: ${err.message}`)
    return
  }
  if ('unreadable' in answer) {
    await failExtraction(deps.db, file.id, answer.unreadable)
    return
  }
  const { passages } = answer
  if (passages.length === 0) {
    const why = file.file_type === 'pdf' ? 'no text found; a scanned PDF holds only images, and text recognition (OCR) is not supported' : 'no text found'
    await failExtraction(deps.db, file.id, why)
    return
  }
  await finishExtraction(deps.db, file, passages)
  deps.log.debug({ fileId: file.id, passages: passages.length }, 'knowledge-base file read')
}

/** On the job's last attempt an unexpected error still ends with a failed file, never one left processing. */
async function extractJob (deps: KnowledgeWorkerDeps, job: JobWithMetadata<FileJob>): Promise<void> {
  try {
    await extractFile(deps, job.data.fileId)
  } catch (err) {
    if (job.retryCount < job.retryLimit) throw err
    deps.log.error({ err, fileId: job.data.fileId }, 'knowledge-base file could not be read on its last attempt')
    await failExtraction(deps.db, job.data.fileId, 'the file could not be read because of an internal error; it was logged')
  }
}

export async function registerKnowledgeWorkers (boss: PgBoss, deps: KnowledgeWorkerDeps): Promise<void> {
  // One file at a time per process: extraction holds a whole file (up to KB_MAX_FILE_MB) in memory, and its
  // worker thread up to KB_EXTRACT_MEMORY_MB. A NOTIFY
  // wakes the worker for one fetch however many files an upload brought: full batches fetch on at once
  // and the backstop poll is short, so the rest do not wait for the next upload.
  const options = { includeMetadata: true as const, batchSize: 2, burstWhenBatchFull: true, pollingIntervalSeconds: 1, notifyPollingIntervalSeconds: 1 }
  await workOn(boss, QUEUES.extractKnowledgeFile, options, async (jobs) => {
    for (const job of jobs) await extractJob(deps, job)
  })
}
