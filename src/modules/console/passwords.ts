import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { KeyedSlots } from '../../http/concurrency.ts'

export const MIN_PASSWORD_LENGTH = 10
// scrypt's cost grows with the input only a little, but a megabyte of "password" is still not one.
export const MAX_PASSWORD_LENGTH = 1024

// N = 2^15, r = 8 uses 32 MiB and about 50-100 ms per hash here: OWASP's minimum for scrypt, and slow enough
// that a stolen table of hashes costs an attacker dearly, fast enough for one sign-in. Stored with each hash,
// so that a later increase leaves existing passwords readable.
const PARAMS = { N: 2 ** 15, r: 8, p: 1 }
const KEY_LENGTH = 32
const SALT_BYTES = 16
const FORMAT = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/

// Node refuses more than 32 MiB by default, which N=2^15, r=8 needs exactly (128·N·r); twice that leaves room.
const maxmemOf = (N: number, r: number) => 2 * 128 * N * r

// At most two hashes run at once in this process: each holds 32 MiB and one of libuv's four threads, which
// DNS lookups and file reads need too. The others wait their turn, in order.
const RUNNING_MAX = 2
let running = 0
const turns: Array<() => void> = []

async function turn (): Promise<() => void> {
  if (running >= RUNNING_MAX) await new Promise<void>((resolve) => turns.push(resolve))
  else running++
  let done = false
  return () => {
    if (done) return
    done = true
    const next = turns.shift()
    if (next === undefined) running--
    else next()
  }
}

/**
 * Sign-ins and password changes that may be waiting for a hash or running one at once: 4 per client address,
 * 32 in the process (with two running, about a second's wait). Past them a request is refused at once (429,
 * 503) instead of queueing behind a flood: 400 concurrent sign-ins used to make everyone wait 20 seconds.
 */
export const hashSlots = new KeyedSlots(4, 32)

// How long a hash took lately (a moving average), so that a refusal that skips the hash takes as long.
let typicalMs: number | undefined

async function derive (password: string, salt: Buffer, length: number, params: { N: number, r: number, p: number }): Promise<Buffer> {
  const options: ScryptOptions = { ...params, maxmem: maxmemOf(params.N, params.r) }
  const done = await turn()
  const started = performance.now()
  try {
    return await new Promise((resolve, reject) => {
      scrypt(password.normalize('NFC'), salt, length, options, (err, key) => { if (err === null) resolve(key); else reject(err) })
    })
  } finally {
    done()
    const took = performance.now() - started
    typicalMs = typicalMs === undefined ? took : 0.8 * typicalMs + 0.2 * took
  }
}

/** `scrypt$N$r$p$salt$hash`, salt and hash base64url: the string says how to check it. */
export async function hashPassword (password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES)
  const hash = await derive(password, salt, KEY_LENGTH, PARAMS)
  return `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${salt.toString('base64url')}$${hash.toString('base64url')}`
}

/** Whether `password` matches `stored`; false for a stored string of a form this code does not know. */
export async function verifyPassword (password: string, stored: string): Promise<boolean> {
  const match = FORMAT.exec(stored)
  if (match === null) return false
  const [N, r, p] = [Number(match[1]), Number(match[2]), Number(match[3])]
  const expected = Buffer.from(match[5], 'base64url')
  const actual = await derive(password, Buffer.from(match[4], 'base64url'), expected.length, { N, r, p })
  return timingSafeEqual(actual, expected)
}

/**
 * Refuses a password for an unknown e-mail address (or a user without a password) after as long as checking one
 * takes, its turn included, without the work: the answer's timing does not tell who has an account, and made-up
 * addresses cost no memory or CPU. Before any hash has run, one is run to learn how long they take.
 */
export async function verifyNothing (password: string): Promise<false> {
  if (typicalMs === undefined) {
    await derive(password, randomBytes(SALT_BYTES), KEY_LENGTH, PARAMS)
    return false
  }
  const done = await turn()
  done()
  await sleep(typicalMs)
  return false
}

/** Why a new password is refused, or undefined when it will do. */
export function passwordProblem (password: string): string | undefined {
  if ([...password].length < MIN_PASSWORD_LENGTH) return `The password must be at least ${MIN_PASSWORD_LENGTH} characters long.`
  if (password.length > MAX_PASSWORD_LENGTH) return `The password must be at most ${MAX_PASSWORD_LENGTH} characters long.`
  return undefined
}
