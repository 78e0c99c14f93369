import { createHmac, timingSafeEqual } from 'node:crypto'

// Twilio signs every webhook (X-Twilio-Signature): HMAC-SHA1 with the account's auth token over the URL
// Twilio requested and the form's parameters, sorted by name (then value), each name followed by its value.

export function twilioSignature (authToken: string, url: string, form: URLSearchParams): string {
  const pairs = [...form].sort(([a, x], [b, y]) => a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0)
  return createHmac('sha1', authToken).update(url + pairs.map(([name, value]) => name + value).join(''), 'utf8').digest('base64')
}

export function signatureValid (authToken: string, url: string, form: URLSearchParams, given: string | undefined): boolean {
  if (given === undefined) return false
  const expected = Buffer.from(twilioSignature(authToken, url, form))
  const actual = Buffer.from(given)
  return actual.length === expected.length && timingSafeEqual(actual, expected)
}
