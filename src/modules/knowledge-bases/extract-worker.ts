// The entry of the worker thread that reads one knowledge-base file (see isolated.ts): it answers the passages,
// or the reason the file cannot be read. Any other error ends the worker and reaches the job as one.
import { parentPort, workerData } from 'node:worker_threads'
import { extractPassages, UnreadableDocument, type ExtractionLimits } from './extract.ts'
import type { KnowledgeFileType } from '../../db/schema.ts'
import type { NewPassage } from './queries.ts'

export interface ExtractTask { type: KnowledgeFileType, content: Uint8Array, limits: ExtractionLimits }
export type ExtractAnswer = { passages: NewPassage[] } | { unreadable: string }

const task = workerData as ExtractTask
let answer: ExtractAnswer
try {
  answer = { passages: await extractPassages(task.type, Buffer.from(task.content.buffer, task.content.byteOffset, task.content.byteLength), task.limits) }
} catch (err) {
  if (!(err instanceof UnreadableDocument)) throw err
  answer = { unreadable: err.message }
}
parentPort!.postMessage(answer)
