import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { RateLimitConfig } from '../config.ts'
import { HttpError } from './errors.ts'
import { Lru } from './lru.ts'

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * A route reached without an API key or a session, whose credential (a token, a signature, a password) costs
     * a lookup to check: its requests are counted per client address before anything is read (KEYLESS).
     */
    keyless?: true
  }
}

/** A keyless route's `config`. */
export const KEYLESS = { keyless: true } as const

/** TRUST_PROXY as a hop count: the last `hops` addresses of the chain are proxies, whoever connects. */
export const trustHops = (hops: number) => (_address: string, hop: number) => hop < hops

/**
 * The address a client is counted by: its IP, or for IPv6 its /64, since one subscriber (or one attacker)
 * holds a whole /64 and could otherwise count as 2^64 clients. IPv4 as IPv6 (`::ffff:a.b.c.d`) is IPv4. A socket
 * that closed before its request was looked at has no address (Fastify's `request.ip` is then undefined): such
 * requests share one key.
 */
export function clientAddress (ip: string | undefined): string {
  if (ip === undefined) return 'unknown'
  const address = ip.replace(/%.*$/, '')
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped !== null) return mapped[1]
  if (!address.includes(':')) return address
  const [head, tail] = address.split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
  return `${groups.slice(0, 4).map((group) => Number.parseInt(group, 16).toString(16)).join(':')}::/64`
}

export interface BudgetOptions { max: number, windowMs: number, maxKeys: number, now?: () => number }

/**
 * Requests per key in fixed windows (the first request opens one), counted in memory: `take` counts the request
 * at once, before any await, so that a burst of concurrent requests cannot pass together, and answers a
 * function that gives the request back (a request that proved its credential), or how long to wait. Keys live
 * in a bounded LRU list: a flood of new addresses costs memory up to maxKeys and no more.
 */
export class RequestBudget {
  readonly max: number
  readonly #windowMs: number
  readonly #now: () => number
  readonly #windows: Lru<{ count: number, endsAt: number }>

  constructor (options: BudgetOptions) {
    this.max = options.max
    this.#windowMs = options.windowMs
    this.#now = options.now ?? Date.now
    this.#windows = new Lru(options.maxKeys)
  }

  take (key: string): { giveBack: () => void } | { retryAfterSeconds: number } {
    const now = this.#now()
    let window = this.#windows.get(key)
    if (window === undefined || window.endsAt <= now) {
      window = { count: 0, endsAt: now + this.#windowMs }
      this.#windows.set(key, window)
    }
    if (window.count >= this.max) return { retryAfterSeconds: Math.max(1, Math.ceil((window.endsAt - now) / 1000)) }
    window.count++
    const counted = window
    let given = false
    return {
      giveBack: () => {
        if (given) return
        given = true
        counted.count--
      }
    }
  }
}

// Addresses remembered per process: beyond this many at once, the least recent are forgotten (and start again).
const MAX_ADDRESSES = 10_000

const givingBack = new WeakMap<FastifyRequest, () => void>()

/**
 * Every route whose `config` is KEYLESS is counted per client address (RATE_LIMIT_PER_ADDRESS per
 * RATE_LIMIT_WINDOW_MS, one budget for all of them) in an onRequest hook of the root, so before its body is
 * read, before a console session is looked up, before any lookup at all. Over it: 429 `rate_limited` with
 * Retry-After. A route may give a request back once its credential proved valid (giveBackKeyless): Twilio's
 * signed webhooks, which arrive in numbers from a few addresses, then cost the budget nothing.
 */
export function registerKeylessLimit (app: FastifyInstance, limits: RateLimitConfig): void {
  if (limits.perAddress === 0) return
  const budget = new RequestBudget({ max: limits.perAddress, windowMs: limits.windowMs, maxKeys: MAX_ADDRESSES })
  app.addHook('onRequest', async (request, reply) => {
    if (request.routeOptions.config.keyless !== true) return
    const taken = budget.take(clientAddress(request.ip))
    if ('retryAfterSeconds' in taken) {
      reply.header('retry-after', String(taken.retryAfterSeconds))
      throw new HttpError(429, 'rate_limited', `too many requests from this address; at most ${budget.max} a window, retry in ${taken.retryAfterSeconds} s`)
    }
    givingBack.set(request, taken.giveBack)
  })
}

/** The request proved its credential: it no longer counts against its address. */
export function giveBackKeyless (request: FastifyRequest): void {
  givingBack.get(request)?.()
}
