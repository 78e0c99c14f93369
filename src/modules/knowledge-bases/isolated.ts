import { Worker } from 'node:worker_threads'

export interface IsolationLimits {
  /** V8 heap of the worker (its old generation); Buffers outside it are bounded by the input's own limits. */
  memoryMb: number
  timeoutMs: number
}

/** A task that broke its worker's memory or time limit: run again on the same input, it would again. */
export class LimitExceeded extends Error {}

/**
 * Runs `script` in a worker thread with `input` as its workerData and answers the first message it posts.
 * The worker is ended after the answer, after `timeoutMs`, or when its heap passes `memoryMb`, so that one
 * hostile input cannot take the process's memory or hold its job forever.
 */
export async function runIsolated<T> (script: URL, input: unknown, limits: IsolationLimits): Promise<T> {
  const worker = new Worker(script, { workerData: input, resourceLimits: { maxOldGenerationSizeMb: limits.memoryMb } })
  let timer: NodeJS.Timeout | undefined
  try {
    return await new Promise<T>((resolve, reject) => {
      timer = setTimeout(() => reject(new LimitExceeded(`reading it took longer than ${limits.timeoutMs / 1000} seconds`)), limits.timeoutMs)
      worker.once('message', resolve)
      worker.once('error', (err: Error & { code?: string }) => {
        reject(err.code === 'ERR_WORKER_OUT_OF_MEMORY' ? new LimitExceeded(`reading it needed more than ${limits.memoryMb} MB of memory`) : err)
      })
      worker.once('exit', (code) => reject(new Error(`the worker exited (code ${code}) without an answer`)))
    })
  } finally {
    clearTimeout(timer)
    await worker.terminate()
  }
}
