import { type AvailableNumber, type Carrier, CarrierError, type CarrierNumber, type NumberSearch, type NumberWebhooks } from './carrier.ts'

export interface TwilioAccount {
  /** `https://api.twilio.com`, or a stand-in. */
  apiUrl: string
  accountSid: string
  authToken: string
}

/** Where Twilio reaches this server for a number's calls (paths under PUBLIC_BASE_URL; the telephony module serves them). */
export const TWILIO_WEBHOOKS = { voice: '/telephony/twilio/voice', status: '/telephony/twilio/status' } as const

// Twilio answers in well under a second; a hung connection must not hold the request much longer.
const REQUEST_TIMEOUT_MS = 15_000

// Error codes of Twilio's REST API that mean "this number cannot be had" rather than a broken request:
// 21421 PhoneNumber is invalid, 21422 PhoneNumber is not available, 21452 no phone numbers found.
const UNAVAILABLE_CODES = new Set([21421, 21422, 21452])
// 20003: authentication failed.
const AUTH_CODES = new Set([20003])

interface TwilioErrorBody { code?: number, message?: string, more_info?: string, status?: number }
interface TwilioIncomingNumber { sid: string, phone_number: string }
interface TwilioAvailableNumber { phone_number: string, friendly_name?: string, locality?: string | null, region?: string | null, iso_country?: string }

/** One request to an account's part of Twilio's REST API; undefined for 204, and for 404 of a GET or DELETE. */
export type TwilioRequest = <T>(method: 'GET' | 'POST' | 'DELETE', path: string, form?: Record<string, string | string[]>) => Promise<T | undefined>

/** Requests to Twilio's REST API (2010-04-01) for an account, with HTTP basic auth of its SID and auth token. */
export function twilioRequester (account: TwilioAccount): TwilioRequest {
  const base = `${account.apiUrl}/2010-04-01/Accounts/${encodeURIComponent(account.accountSid)}`
  const authorization = 'Basic ' + Buffer.from(`${account.accountSid}:${account.authToken}`).toString('base64')

  return async function call<T> (method: 'GET' | 'POST' | 'DELETE', path: string, form?: Record<string, string | string[]>): Promise<T | undefined> {
    let response: Response
    try {
      response = await fetch(base + path, {
        method,
        headers: { authorization, accept: 'application/json', ...(form !== undefined && { 'content-type': 'application/x-www-form-urlencoded' }) },
        body: form === undefined ? undefined : formBody(form),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
      })
    } catch (err) {
      throw new CarrierError('failed', `Twilio could not be reached: ${(err as Error).message}`)
    }
    if (response.status === 204) return undefined
    const text = await response.text()
    let body: unknown
    try {
      body = text === '' ? undefined : JSON.parse(text)
    } catch {
      throw new CarrierError('failed', `Twilio answered ${response.status} with a body that is not JSON`)
    }
    if (response.ok) return body as T
    if (response.status === 404 && method !== 'POST') return undefined
    throw twilioError(response.status, (body ?? {}) as TwilioErrorBody)
  }
}

/** A form body; an array is the same field repeated (StatusCallbackEvent). */
function formBody (form: Record<string, string | string[]>): string {
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(form)) for (const one of [value].flat()) params.append(name, one)
  return params.toString()
}

/** A number's voice webhook and status callback, as Twilio's number resource takes them. */
function webhookFields (hooks: NumberWebhooks): Record<string, string> {
  return { VoiceUrl: hooks.voiceUrl, VoiceMethod: 'POST', StatusCallback: hooks.statusCallback, StatusCallbackMethod: 'POST' }
}

/**
 * Twilio's REST API (2010-04-01): AvailablePhoneNumbers to search, IncomingPhoneNumbers to buy, find,
 * point at this server and release.
 */
export function createTwilioCarrier (account: TwilioAccount): Carrier {
  const call = twilioRequester(account)
  return {
    name: 'twilio',
    accountId: account.accountSid,
    async search (query: NumberSearch): Promise<AvailableNumber[]> {
      const params = new URLSearchParams({ PageSize: String(query.limit) })
      if (query.areaCode !== undefined) params.set('AreaCode', query.areaCode)
      if (query.contains !== undefined) params.set('Contains', query.contains)
      const page = await call<{ available_phone_numbers?: TwilioAvailableNumber[] }>('GET', `/AvailablePhoneNumbers/${query.country}/Local.json?${params}`)
      return (page?.available_phone_numbers ?? []).map((n) => ({
        phoneNumber: n.phone_number,
        friendlyName: n.friendly_name ?? n.phone_number,
        country: n.iso_country ?? query.country,
        locality: n.locality ?? null,
        region: n.region ?? null
      }))
    },
    async buy (phoneNumber: string, hooks: NumberWebhooks): Promise<CarrierNumber> {
      const bought = await call<TwilioIncomingNumber>('POST', '/IncomingPhoneNumbers.json', { PhoneNumber: phoneNumber, ...webhookFields(hooks) })
      if (bought?.sid === undefined) throw new CarrierError('failed', 'Twilio answered the purchase without the number\'s sid')
      return { carrierNumberId: bought.sid, phoneNumber: bought.phone_number }
    },
    async connect (number: CarrierNumber, hooks: NumberWebhooks): Promise<void> {
      const updated = await call('POST', `/IncomingPhoneNumbers/${encodeURIComponent(number.carrierNumberId)}.json`, webhookFields(hooks))
      if (updated === undefined) throw new CarrierError('failed', 'Twilio answered the number\'s update without the number')
    },
    async release (number: CarrierNumber): Promise<void> {
      await call('DELETE', `/IncomingPhoneNumbers/${encodeURIComponent(number.carrierNumberId)}.json`)
    },
    async findOwned (phoneNumber: string): Promise<CarrierNumber | undefined> {
      const page = await call<{ incoming_phone_numbers?: TwilioIncomingNumber[] }>('GET', `/IncomingPhoneNumbers.json?${new URLSearchParams({ PhoneNumber: phoneNumber })}`)
      const found = page?.incoming_phone_numbers?.find((n) => n.phone_number === phoneNumber)
      return found === undefined ? undefined : { carrierNumberId: found.sid, phoneNumber: found.phone_number }
    }
  }
}

function twilioError (status: number, body: TwilioErrorBody): CarrierError {
  const detail = `Twilio answered ${status}${body.code === undefined ? '' : ` (error ${body.code})`}: ${body.message ?? 'no message'}`
  if (status === 401 || status === 403 || (body.code !== undefined && AUTH_CODES.has(body.code))) {
    return new CarrierError('credentials', `${detail}; check the account SID and auth token`, body.code, status)
  }
  if (body.code !== undefined && UNAVAILABLE_CODES.has(body.code)) return new CarrierError('unavailable', detail, body.code, status)
  if (status >= 400 && status < 500) return new CarrierError('rejected', detail, body.code, status)
  return new CarrierError('failed', detail, body.code, status)
}
