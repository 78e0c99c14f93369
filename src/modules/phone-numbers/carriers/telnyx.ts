import { type AvailableNumber, type Carrier, CarrierError, type CarrierNumber, type NumberSearch } from './carrier.ts'

// Telnyx's API v2, written from its public reference (developers.telnyx.com/api-reference; the shapes checked
// against team-telnyx/telnyx-node): JSON bodies, `Authorization: Bearer <API key>`, answers wrapped in `data`,
// errors as `{ errors: [{ code, title, detail }] }`.

export interface TelnyxAccount {
  /** `https://api.telnyx.com`, or a stand-in. */
  apiUrl: string
  apiKey: string
  /** The Call Control application (connection) the numbers' calls go to and outbound calls are placed from. */
  connectionId: string
}

/** Where Telnyx reaches this server (paths under PUBLIC_BASE_URL; the telephony module serves them). */
export const TELNYX_WEBHOOKS = { webhook: '/telephony/telnyx/webhook', stream: '/telephony/telnyx/stream' } as const

// Telnyx answers in well under a second; a hung connection must not hold the request much longer.
const REQUEST_TIMEOUT_MS = 15_000

interface TelnyxErrorBody { errors?: Array<{ code?: string | number, title?: string, detail?: string }> }

/** One request to Telnyx's API v2; undefined for 204, and for 404 of a GET or DELETE. */
export type TelnyxRequest = <T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: Record<string, unknown>) => Promise<T | undefined>

/** `keyName`: where the refused key came from, named in a 401's message (never the key itself). */
export function telnyxRequester (account: Pick<TelnyxAccount, 'apiUrl' | 'apiKey'>, keyName = 'TELNYX_API_KEY'): TelnyxRequest {
  const authorization = `Bearer ${account.apiKey}`
  return async function call<T> (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: Record<string, unknown>): Promise<T | undefined> {
    let response: Response
    try {
      response = await fetch(`${account.apiUrl}/v2${path}`, {
        method,
        headers: { authorization, accept: 'application/json', ...(body !== undefined && { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
      })
    } catch (err) {
      throw new CarrierError('failed', `Telnyx could not be reached: ${(err as Error).message}`)
    }
    if (response.status === 204) return undefined
    const text = await response.text()
    let parsed: unknown
    try {
      parsed = text === '' ? undefined : JSON.parse(text)
    } catch {
      throw new CarrierError('failed', `Telnyx answered ${response.status} with a body that is not JSON`)
    }
    if (response.ok) return parsed as T
    if (response.status === 404 && method !== 'POST' && method !== 'PATCH') return undefined
    throw telnyxError(response.status, (parsed ?? {}) as TelnyxErrorBody, keyName)
  }
}

interface TelnyxAvailable { phone_number?: string, region_information?: Array<{ region_name?: string, region_type?: string }> }
interface TelnyxOwned { id?: string, phone_number?: string, connection_id?: string | null }
interface TelnyxOrder { status?: 'pending' | 'success' | 'failure', phone_numbers?: Array<{ phone_number?: string, status?: string }> }

/**
 * Numbers at Telnyx: search (GET /v2/available_phone_numbers, filter[...] in deepObject style), buy (POST
 * /v2/number_orders with the number and our Call Control application), find (GET /v2/phone_numbers), connect
 * (PATCH /v2/phone_numbers/{id} with connection_id: a number's calls go to its application's webhook URL, set
 * once in the portal, not per number) and release (DELETE /v2/phone_numbers/{id}).
 */
export function createTelnyxCarrier (account: TelnyxAccount): Carrier {
  const call = telnyxRequester(account)
  const findOwned = async (phoneNumber: string): Promise<CarrierNumber | undefined> => await findTelnyxNumber(call, phoneNumber)
  return {
    name: 'telnyx',
    accountId: null,
    async search (query: NumberSearch): Promise<AvailableNumber[]> {
      const params = new URLSearchParams({ 'filter[country_code]': query.country, 'filter[limit]': String(query.limit), 'filter[features]': 'voice' })
      if (query.areaCode !== undefined) params.set('filter[national_destination_code]', query.areaCode)
      if (query.contains !== undefined) params.set('filter[phone_number][contains]', query.contains)
      const page = await call<{ data?: TelnyxAvailable[] }>('GET', `/available_phone_numbers?${params}`)
      const region = (n: TelnyxAvailable, type: string) => n.region_information?.find((r) => r.region_type === type)?.region_name ?? null
      return (page?.data ?? []).filter((n) => typeof n.phone_number === 'string').slice(0, query.limit).map((n) => ({
        phoneNumber: n.phone_number!,
        friendlyName: n.phone_number!,
        country: query.country,
        locality: region(n, 'rate_center'),
        region: region(n, 'state')
      }))
    },
    async buy (phoneNumber: string): Promise<CarrierNumber> {
      const order = await call<{ data?: TelnyxOrder }>('POST', '/number_orders', { phone_numbers: [{ phone_number: phoneNumber }], connection_id: account.connectionId })
      if (order?.data?.status === 'failure') throw new CarrierError('unavailable', `Telnyx could not order ${phoneNumber}`)
      // The order names the number, not the number's own id, which releasing and connecting it need.
      const held = await findOwned(phoneNumber)
      if (held === undefined) throw new CarrierError('failed', `Telnyx took the order of ${phoneNumber} (${order?.data?.status ?? 'no status'}) but does not list the number yet: assign it once it shows in the portal (npm run cli -- number import)`)
      return held
    },
    async connect (number: CarrierNumber): Promise<void> {
      await routeTelnyxNumber(call, number.carrierNumberId, account.connectionId)
    },
    async release (number: CarrierNumber): Promise<void> {
      await call('DELETE', `/phone_numbers/${encodeURIComponent(number.carrierNumberId)}`)
    },
    findOwned
  }
}

/** The number in the account (GET /v2/phone_numbers); undefined when the account does not hold it. */
export async function findTelnyxNumber (call: TelnyxRequest, phoneNumber: string): Promise<CarrierNumber | undefined> {
  // filter[phone_number] takes digits only ("non-numerical characters will result in no values"); the match is exact here.
  const query = new URLSearchParams({ 'filter[phone_number]': phoneNumber.replace(/\D/g, ''), 'page[size]': '20' })
  const page = await call<{ data?: TelnyxOwned[] }>('GET', `/phone_numbers?${query}`)
  const found = page?.data?.find((n) => n.phone_number === phoneNumber && typeof n.id === 'string')
  return found === undefined ? undefined : { carrierNumberId: found.id!, phoneNumber }
}

/** Sends the number's calls to a Call Control application (PATCH /v2/phone_numbers/{id} with connection_id), or to none (null). */
export async function routeTelnyxNumber (call: TelnyxRequest, carrierNumberId: string, connectionId: string | null): Promise<void> {
  const updated = await call<{ data?: TelnyxOwned }>('PATCH', `/phone_numbers/${encodeURIComponent(carrierNumberId)}`, { connection_id: connectionId })
  if (updated?.data === undefined) throw new CarrierError('failed', 'Telnyx answered the number\'s update without the number')
}

// ---- A tenant's own Telnyx account (numbers imported with its API key) ----

/** Where a tenant's Telnyx account sends its webhooks: the path names the account, whose stored public key verifies them. */
export const telnyxAccountWebhook = (accountId: string): string => `${TELNYX_WEBHOOKS.webhook}/accounts/${accountId}`

/**
 * The Call Control application made in a tenant's account for the numbers imported from it
 * (developers.telnyx.com/api-reference/call-control-applications/create-a-call-control-application: POST
 * /v2/call_control_applications with application_name and webhook_event_url, 201 with data.id; DELETE
 * /v2/call_control_applications/{id}). Its webhook URL is the account's own URL here (telnyxAccountWebhook).
 */
export function telnyxApplications (call: TelnyxRequest) {
  return {
    async create (name: string, webhookUrl: string): Promise<string> {
      const made = await call<{ data?: { id?: string } }>('POST', '/call_control_applications', { application_name: name, webhook_event_url: webhookUrl, webhook_api_version: '2', active: true })
      const id = made?.data?.id
      if (typeof id !== 'string' || !/^[A-Za-z0-9-]{1,64}$/.test(id)) throw new CarrierError('failed', 'Telnyx answered the new Call Control application without its id')
      return id
    },
    /** An application Telnyx no longer knows counts as gone. */
    async remove (id: string): Promise<void> {
      await call('DELETE', `/call_control_applications/${encodeURIComponent(id)}`)
    }
  }
}

function telnyxError (status: number, body: TelnyxErrorBody, keyName: string): CarrierError {
  const first = body.errors?.[0]
  const code = first?.code === undefined ? undefined : Number(first.code)
  const detail = `Telnyx answered ${status}${first?.code === undefined ? '' : ` (error ${first.code})`}: ${first?.detail ?? first?.title ?? 'no message'}`
  if (status === 401 || status === 403) return new CarrierError('credentials', `${detail}; check ${keyName}`, code, status)
  // 422: the request was understood but cannot be done, e.g. a number no longer offered.
  if (status === 422) return new CarrierError('unavailable', detail, code, status)
  if (status >= 400 && status < 500) return new CarrierError('rejected', detail, code, status)
  return new CarrierError('failed', detail, code, status)
}
