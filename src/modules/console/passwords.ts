import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'

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

async function derive (password: string, salt: Buffer, length: number, params: { N: number, r: number, p: number }): Promise<Buffer> {
  const options: ScryptOptions = { ...params, maxmem: maxmemOf(params.N, params.r) }
  return await new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, length, options, (err, key) => { if (err === null) resolve(key); else reject(err) })
  })
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

let dummy: Promise<string> | undefined

/**
 * Checks a password against a hash that matches nothing, so that an unknown e-mail address (or a user without a
 * password) takes as long to refuse as a wrong password: the answer's timing does not tell who has an account.
 */
export async function verifyNothing (password: string): Promise<false> {
  dummy ??= hashPassword(randomBytes(16).toString('hex'))
  await verifyPassword(password, await dummy)
  return false
}

/** Why a new password is refused, or undefined when it will do. */
export function passwordProblem (password: string): string | undefined {
  if ([...password].length < MIN_PASSWORD_LENGTH) return `The password must be at least ${MIN_PASSWORD_LENGTH} characters long.`
  if (password.length > MAX_PASSWORD_LENGTH) return `The password must be at most ${MAX_PASSWORD_LENGTH} characters long.`
  return undefined
}
