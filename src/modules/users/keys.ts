import { createHash, randomInt } from 'node:crypto'

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

export const API_KEY_PATTERN = /^sk_[0-9A-Za-z]{40}$/

/** `sk_` and 40 base62 characters: about 238 bits from the system's CSPRNG. */
export function generateApiKey (): string {
  let key = 'sk_'
  for (let i = 0; i < 40; i++) key += BASE62[randomInt(62)]
  return key
}

export function hashApiKey (key: string): string {
  return createHash('sha256').update(key).digest('hex')
}

/** What is kept to show a key again: enough to tell keys apart, far too little to use one. */
export function keyPrefix (key: string): string {
  return key.slice(0, 11)
}
