import { createPublicKey, verify, type KeyObject } from 'node:crypto'

// Telnyx signs every webhook with the account's Ed25519 key (developers.telnyx.com/docs/development/api-fundamentals/webhooks;
// team-telnyx/telnyx-node src/lib/webhooks.ts): `telnyx-signature-ed25519` is the base64 of the 64-byte signature
// of `${telnyx-timestamp}|${raw body}`, `telnyx-timestamp` the Unix seconds it was signed at. The public key (32
// bytes, base64) is the account's, from the portal. A timestamp outside the tolerance is a replay.

/** The account's public key as node:crypto takes it (a raw Ed25519 key as a JWK). */
export function telnyxPublicKey (base64: string): KeyObject {
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(base64, 'base64').toString('base64url') }, format: 'jwk' })
}

export interface SignedRequest { signature: string | undefined, timestamp: string | undefined, body: string }

/** Whether Telnyx signed `body` at `timestamp` with `key`, within `toleranceSeconds` of `nowMs`. */
export function telnyxSignatureValid (key: KeyObject, request: SignedRequest, toleranceSeconds: number, nowMs = Date.now()): boolean {
  const { signature, timestamp, body } = request
  if (signature === undefined || timestamp === undefined || !/^\d{1,12}$/.test(timestamp)) return false
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > toleranceSeconds) return false
  const bytes = Buffer.from(signature, 'base64')
  if (bytes.length !== 64) return false
  return verify(null, Buffer.from(`${timestamp}|${body}`, 'utf8'), key, bytes)
}
