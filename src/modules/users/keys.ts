import { createHash, randomInt } from 'node:crypto'

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

export const API_KEY_PATTERN = /^sk_[0-9A-Za-z]{40}$/

/** A secret: the prefix and `length` base62 characters from the system's CSPRNG (40 give about 238 bits). */
export function generateToken (prefix: string, length = 40): string {
  let token = prefix
  for (let i = 0; i < length; i++) token += BASE62[randomInt(62)]
  return token
}

export const generateApiKey = (): string => generateToken('sk_')

/** Secrets are stored only as SHA-256 hashes. */
export function hashToken (token: string): string {
  return createHash('sha256').update(token).digest('hex')
}

export const hashApiKey = hashToken

/** What is kept to show a key again: enough to tell keys apart, far too little to use one. */
export function keyPrefix (key: string): string {
  return key.slice(0, 11)
}
