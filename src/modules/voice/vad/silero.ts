// Silero VAD (v6.2, MIT: LICENSE beside this file; `silero_vad_16k_op15.onnx` of github.com/snakers4/silero-vad at
// commit 806dcba, the 16 kHz-only export) run by onnxruntime-node. The model's contract, as Silero's own
// OnnxWrapper (src/silero_vad/utils_vad.py) feeds it:
//   input  float32 [batch, 64 + 512]: the last 64 samples of the stream's previous window, then 512 new
//          samples (32 ms at 16 kHz), scaled to [-1, 1];
//   state  float32 [2, batch, 128]: the recurrent state, zeros at the start of a stream;
//   sr     int64 scalar 16000;
// answers output float32 [batch, 1] (the probability that the window is speech) and stateN (the next state).
//
// One inference session per process serves every call: each call keeps its own state and context (a
// `SileroStream`), and the windows that calls hand in while the event loop is busy run as one batch, which costs
// a third of the CPU per window of runs one by one (measured: docs/voice.md, "How speech is detected").

import { fileURLToPath } from 'node:url'
import type { InferenceSession, Tensor } from 'onnxruntime-node'

/** Samples of one window at 16 kHz (32 ms), the only size the model takes. */
export const WINDOW_SAMPLES = 512
const CONTEXT_SAMPLES = 64
const INPUT_SAMPLES = CONTEXT_SAMPLES + WINDOW_SAMPLES
const STATE_SIZE = 128
/** Windows per run at most: a run of 128 takes ~6 ms of the event loop, well within a 20 ms frame. */
const MAX_BATCH = 128

const MODEL = fileURLToPath(new URL('silero_vad.onnx', import.meta.url))

/** One stream's memory between windows: what the model needs to hear a stream as continuous. */
export class SileroStream {
  /** [2][128]: the stream's slice of the batch state [2, batch, 128]. */
  readonly state = new Float32Array(2 * STATE_SIZE)
  readonly context = new Float32Array(CONTEXT_SAMPLES)

  /** As at the start of a stream (after digital silence, which the detector does not run the model on). */
  reset (): void {
    this.state.fill(0)
    this.context.fill(0)
  }
}

interface Job { stream: SileroStream, window: Float32Array, done: (probability: number) => void, fail: (err: unknown) => void }

type Runtime = typeof import('onnxruntime-node')

class SileroModel {
  readonly #session: InferenceSession
  readonly #Tensor: Runtime['Tensor']
  readonly #rate: Tensor
  #pending: Job[] = []
  #scheduled = false
  /** Model runs and the windows they decided, since the process started (the benchmark's batch size). */
  runs = 0
  windows = 0

  constructor (runtime: Runtime, session: InferenceSession) {
    this.#session = session
    this.#Tensor = runtime.Tensor
    this.#rate = new runtime.Tensor('int64', BigInt64Array.from([16_000n]), [])
  }

  /** Queues one window of a stream (at most one per stream at a time: each needs the state the one before left). */
  infer (job: Job): void {
    this.#pending.push(job)
    if (!this.#scheduled) {
      this.#scheduled = true
      // After the current I/O callbacks: every call whose audio arrived meanwhile joins the batch.
      setImmediate(() => { void this.#run() })
    }
  }

  async #run (): Promise<void> {
    const jobs = this.#pending.splice(0, MAX_BATCH)
    const batch = jobs.length
    const input = new Float32Array(batch * INPUT_SAMPLES)
    const state = new Float32Array(2 * batch * STATE_SIZE)
    jobs.forEach(({ stream, window }, b) => {
      input.set(stream.context, b * INPUT_SAMPLES)
      input.set(window, b * INPUT_SAMPLES + CONTEXT_SAMPLES)
      state.set(stream.state.subarray(0, STATE_SIZE), b * STATE_SIZE)
      state.set(stream.state.subarray(STATE_SIZE), (batch + b) * STATE_SIZE)
    })
    try {
      const out = await this.#session.run({
        input: new this.#Tensor('float32', input, [batch, INPUT_SAMPLES]),
        state: new this.#Tensor('float32', state, [2, batch, STATE_SIZE]),
        sr: this.#rate
      })
      this.runs++
      this.windows += batch
      const probabilities = out.output.data as Float32Array
      const next = out.stateN.data as Float32Array
      jobs.forEach(({ stream, window, done }, b) => {
        stream.state.set(next.subarray(b * STATE_SIZE, (b + 1) * STATE_SIZE), 0)
        stream.state.set(next.subarray((batch + b) * STATE_SIZE, (batch + b + 1) * STATE_SIZE), STATE_SIZE)
        stream.context.set(window.subarray(WINDOW_SAMPLES - CONTEXT_SAMPLES))
        done(probabilities[b])
      })
    } catch (err) {
      for (const job of jobs) job.fail(err)
    }
    // Windows handed in during the run (each stream's next one among them) make the next batch.
    if (this.#pending.length > 0) setImmediate(() => { void this.#run() })
    else this.#scheduled = false
  }
}

let shared: Promise<SileroModel> | undefined

/**
 * The process's model, loaded on first use (about 100 ms and 45 MB, so that a process that takes no call never
 * loads the runtime); a failed load is tried again by the next caller.
 */
export function sileroModel (): Promise<SileroModel> {
  shared ??= (async () => {
    const runtime = await import('onnxruntime-node')
    const session = await runtime.InferenceSession.create(MODEL, {
      // One thread: the calls of the process already keep the cores busy, and inference per window is short.
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all'
    })
    return new SileroModel(runtime, session)
  })().catch((err: unknown) => {
    shared = undefined
    throw err
  })
  return shared
}

export type { SileroModel }
