import type { FastifyReply } from 'fastify'
import type { ConcurrencyLimits } from '../config.ts'
import { HttpError } from './errors.ts'

/** Seconds a refused client is told to wait: long enough for an upload, export or download to end, short enough to retry. */
const RETRY_AFTER_SECONDS = 5

type Work = 'uploads' | 'exports' | 'downloads'

/**
 * Work that may run only so many times at once in this process, per key and in all. `tryTake` answers a
 * function that gives the slot back (calling it again does nothing), or which limit is full.
 */
export class KeyedSlots {
  readonly #perKey: number
  readonly #total: number
  readonly #byKey = new Map<string, number>()
  #inUse = 0

  constructor (perKey: number, total = Infinity) {
    this.#perKey = perKey
    this.#total = total
  }

  tryTake (key: string): (() => void) | 'key' | 'total' {
    const mine = this.#byKey.get(key) ?? 0
    if (mine >= this.#perKey) return 'key'
    if (this.#inUse >= this.#total) return 'total'
    this.#byKey.set(key, mine + 1)
    this.#inUse++
    let released = false
    return () => {
      if (released) return
      released = true
      this.#inUse--
      const left = this.#byKey.get(key)! - 1
      if (left === 0) this.#byKey.delete(key)
      else this.#byKey.set(key, left)
    }
  }
}

/**
 * Uploads, exports or recording downloads, per account and in all. `take` answers a function that gives the slot back, or throws
 * 429 when the account has all its slots and 503 when the process has, both with Retry-After.
 */
export class Slots extends KeyedSlots {
  readonly #perAccount: number
  readonly #what: Work

  constructor (what: Work, perAccount: number, total = Infinity) {
    super(perAccount, total)
    this.#what = what
    this.#perAccount = perAccount
  }

  take (userId: string, reply: FastifyReply): () => void {
    const taken = this.tryTake(userId)
    if (typeof taken === 'function') return taken
    reply.header('retry-after', String(RETRY_AFTER_SECONDS))
    throw taken === 'key'
      ? new HttpError(429, `too_many_concurrent_${this.#what}`, `at most ${this.#perAccount} ${this.#what} of one account run at once; retry when one has ended`)
      : new HttpError(503, `${this.#what}_busy`, `the server runs as many ${this.#what} as it can; retry in ${RETRY_AFTER_SECONDS} seconds`)
  }
}

const shared = new WeakMap<ConcurrencyLimits, Record<Work, Slots>>()

/**
 * The app's one set of upload, export or download slots (one per configuration, so per app): the API's routes and the
 * console's pages draw on the same ones, so that an account's limit holds whichever way it comes in.
 */
export function sharedSlots (what: Work, limits: ConcurrencyLimits): Slots {
  let slots = shared.get(limits)
  if (slots === undefined) {
    slots = {
      uploads: new Slots('uploads', limits.uploadsPerAccount),
      exports: new Slots('exports', limits.exportsPerAccount, limits.exportsTotal),
      downloads: new Slots('downloads', limits.recordingDownloadsPerAccount, limits.recordingDownloadsTotal)
    }
    shared.set(limits, slots)
  }
  return slots[what]
}
