import { randomBytes } from 'node:crypto'

/** 24 lowercase hex characters: 4 bytes of seconds, then 8 random bytes, so ids sort by creation time. */
export function newId (now = Date.now()): string {
  const seconds = Math.floor(now / 1000).toString(16).padStart(8, '0')
  return seconds + randomBytes(8).toString('hex')
}

// Path ids are hex in either case; stored ids are lowercase, so an uppercase one is simply not found.
export const ID_PATTERN = '^[0-9a-fA-F]{24}$'
