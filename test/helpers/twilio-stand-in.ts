import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { type SentMessage, TwilioMessaging } from './twilio-messaging.ts'
import { API_VERSION, errorBody, type IncomingNumber, sid, type SipCredentials, TwilioVoice, type VoiceStandIn } from './twilio-voice.ts'
import { type SipInvite, TwilioSipStandIn } from './twilio-sip.ts'

export { sid, twilioSignature } from './twilio-voice.ts'
export type { SentMessage } from './twilio-messaging.ts'
export type { Callee, CallStatus, ConferenceRoom, DialRecord, IncomingNumber, LiveCall, MediaStream, Signing, StreamMessage, Webhook } from './twilio-voice.ts'

interface Offer { phone_number: string, friendly_name: string, locality: string, region: string, iso_country: string, area_code: string }

export interface StandInRequest { method: string, path: string, query: URLSearchParams, form: URLSearchParams, accountSid: string | undefined }

/** A number's voice settings, as IncomingPhoneNumbers takes them. */
export type VoiceSettings = Partial<Pick<IncomingNumber, 'voice_url' | 'voice_method' | 'status_callback' | 'status_callback_method'>>

export interface TwilioStandIn extends VoiceStandIn {
  /** For TWILIO_API_URL. */
  url: string
  /** Every request, in order. */
  requests: StandInRequest[]
  /** Adds an account with its auth token, or gives an account a new token (rotated: the old one stops working). */
  addAccount: (sid: string, token: string) => void
  /** Numbers offered for sale, by country. */
  offer: (country: string, numbers: Array<{ phone_number: string, area_code: string, locality: string, region: string }>) => void
  /** Numbers an account holds already (to import). */
  hold: (accountSid: string, phoneNumber: string, voice?: VoiceSettings) => IncomingNumber
  incoming: (accountSid: string) => IncomingNumber[]
  /** The next request is answered with this status and Twilio's error body. */
  failNext: (status: number, code: number, message: string) => void
  /** Messages Twilio accepted (SMS and WhatsApp), in order (twilio-messaging.ts). */
  messages: SentMessage[]
  /** Registers one of the account's numbers as a WhatsApp sender (`whatsapp:` From addresses). */
  enableWhatsApp: (accountSid: string, phoneNumber: string) => void
  /** Numbers that take no SMS: a message to one is refused with Twilio's 21614. */
  landlines: Set<string>
  /** Runs while a purchase is answered, before the answer is sent. */
  onPurchase: ((phoneNumber: string) => Promise<void>) | undefined
  // SIP (twilio-sip.ts): domains, credential lists, a PBX's INVITEs, and SIP endpoints Twilio calls.
  sip: TwilioSipStandIn
  /** A PBX's call to a SIP Domain (`to`: sip:user@<domain>), answering Twilio's challenge with `credentials`. */
  sipInvite: (to: string, from: string, credentials?: SipCredentials) => Promise<SipInvite>
  /** A SIP endpoint (host[:port] of its URIs) that answers Twilio's INVITEs only with these credentials. */
  sipEndpoint: (host: string, credentials: SipCredentials) => void
}

/** IncomingPhoneNumbers form fields and the resource fields they set. */
const VOICE_FIELDS = [['VoiceUrl', 'voice_url'], ['VoiceMethod', 'voice_method'], ['StatusCallback', 'status_callback'], ['StatusCallbackMethod', 'status_callback_method']] as const

const voiceSettings = (form: URLSearchParams): VoiceSettings =>
  Object.fromEntries(VOICE_FIELDS.filter(([field]) => form.has(field)).map(([field, key]) => [key, form.get(field)]))

/** The stand-in for a tap test: closed at teardown. */
export async function startTwilioStandIn (t: Test): Promise<TwilioStandIn> {
  const standIn = await createTwilioStandIn()
  t.teardown(standIn.close)
  return standIn
}

/**
 * A local HTTP server that answers like Twilio's REST API (2010-04-01) for what the adapter uses:
 * AvailablePhoneNumbers/{Country}/Local.json, IncomingPhoneNumbers.json (list, purchase),
 * IncomingPhoneNumbers/{Sid}.json (update, release), Calls (twilio-voice.ts) and Messages (twilio-messaging.ts),
 * with basic auth and Twilio's error body; and Twilio's voice side (webhooks, TwiML, media streams) towards the server under test.
 */
export async function createTwilioStandIn (): Promise<TwilioStandIn & { close: () => Promise<void> }> {
  const tokens = new Map<string, string>()
  const offers = new Map<string, Offer[]>()
  const owned = new Map<string, IncomingNumber[]>()
  const requests: StandInRequest[] = []
  let failure: { status: number, code: number, message: string } | undefined

  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify(body))
  }
  const error = (res: http.ServerResponse, status: number, code: number, message: string) => json(res, status, errorBody(status, code, message))
  const resource = (number: IncomingNumber) => ({
    ...number, api_version: API_VERSION, capabilities: { voice: true, sms: true, mms: true, fax: false }, status: 'in-use', date_created: new Date().toUTCString(), uri: `/${API_VERSION}/Accounts/${number.account_sid}/IncomingPhoneNumbers/${number.sid}.json`
  })
  const voice = new TwilioVoice({ token: (accountSid) => tokens.get(accountSid), numbers: () => [...owned.values()].flat() })
  const messaging = new TwilioMessaging(() => [...owned.values()].flat())
  const sip = new TwilioSipStandIn(voice)
  const page = (uri: string, key: string, items: unknown[], pageSize: number) => ({
    [key]: items, end: Math.max(items.length - 1, 0), first_page_uri: uri, next_page_uri: null, page: 0, page_size: pageSize, previous_page_uri: null, start: 0, uri
  })

  const standIn: TwilioStandIn & { close: () => Promise<void> } = {
    url: '',
    calls: voice.calls,
    conferences: voice.conferences,
    webhooks: voice.webhooks,
    errors: voice.errors,
    delays: voice.delays,
    clock: voice.clock,
    route: (publicOrigin, localOrigin) => voice.route(publicOrigin, localOrigin),
    callee: (phoneNumber, behaviour) => voice.callee(phoneNumber, behaviour),
    dialIn: (from, to, options) => voice.dialIn(from, to, options),
    waitForCall: (to, nth) => voice.waitForCall(to, nth),
    post: (url, params, options) => voice.post(url, params, options),
    resend: (webhook) => voice.resend(webhook),
    requests,
    addAccount: (accountSid, token) => { tokens.set(accountSid, token); owned.set(accountSid, owned.get(accountSid) ?? []) },
    offer: (country, numbers) => { offers.set(country, numbers.map((n) => ({ ...n, iso_country: country, friendly_name: n.phone_number }))) },
    hold: (accountSid, phoneNumber, settings = {}) => {
      const number = { sid: sid('PN'), account_sid: accountSid, phone_number: phoneNumber, friendly_name: phoneNumber, voice_url: null, voice_method: 'POST', status_callback: null, status_callback_method: 'POST', ...settings }
      owned.get(accountSid)!.push(number)
      return number
    },
    incoming: (accountSid) => owned.get(accountSid) ?? [],
    failNext: (status, code, message) => { failure = { status, code, message } },
    messages: messaging.messages,
    enableWhatsApp: (accountSid, phoneNumber) => messaging.enableWhatsApp(accountSid, phoneNumber),
    landlines: messaging.landlines,
    onPurchase: undefined,
    sip,
    sipInvite: (to, from, credentials) => sip.invite(to, from, credentials),
    sipEndpoint: (host, credentials) => { voice.sipEndpoints.set(host, credentials) },
    close: () => new Promise<void>((resolve) => {
      voice.close()
      server.closeAllConnections()
      server.close(() => resolve())
    })
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      void (async () => {
        const url = new URL(req.url ?? '/', 'http://stand-in')
        const match = /^\/2010-04-01\/Accounts\/([^/]+)(\/.*)$/.exec(url.pathname)
        const accountSid = match?.[1]
        const rest = match?.[2] ?? url.pathname
        const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'))
        requests.push({ method: req.method ?? '', path: rest, query: url.searchParams, form, accountSid })

        const [user, pass] = Buffer.from((req.headers.authorization ?? '').replace(/^Basic /, ''), 'base64').toString().split(':')
        if (accountSid === undefined || user !== accountSid || tokens.get(user) !== pass) {
          return error(res, 401, 20003, 'Authenticate')
        }
        if (failure !== undefined) {
          const f = failure
          failure = undefined
          return error(res, f.status, f.code, f.message)
        }
        const search = /^\/AvailablePhoneNumbers\/([A-Z]{2})\/Local\.json$/.exec(rest)
        if (req.method === 'GET' && search !== null) {
          const available = offers.get(search[1])
          if (available === undefined) return error(res, 404, 20404, `The requested resource ${url.pathname} was not found`)
          const areaCode = url.searchParams.get('AreaCode')
          const contains = url.searchParams.get('Contains')
          const size = Number(url.searchParams.get('PageSize') ?? 50)
          const found = available
            .filter((n) => areaCode === null || n.area_code === areaCode)
            .filter((n) => contains === null || n.phone_number.includes(contains))
            .slice(0, size)
            .map(({ area_code: _areaCode, ...n }) => ({ ...n, lata: '722', rate_center: 'SNFC', latitude: '37.77', longitude: '-122.41', postal_code: '94105', address_requirements: 'none', beta: false, capabilities: { voice: true, SMS: true, MMS: true } }))
          return json(res, 200, page(url.pathname + url.search, 'available_phone_numbers', found, size))
        }
        if (rest === '/IncomingPhoneNumbers.json' && req.method === 'POST') {
          const phoneNumber = form.get('PhoneNumber')
          const list = offers.get('US') ?? []
          const offered = list.findIndex((n) => n.phone_number === phoneNumber)
          if (phoneNumber === null || offered === -1) return error(res, 400, 21422, 'PhoneNumber requested is not available')
          list.splice(offered, 1)
          await standIn.onPurchase?.(phoneNumber)
          return json(res, 201, resource(standIn.hold(accountSid, phoneNumber, voiceSettings(form))))
        }
        if (rest === '/IncomingPhoneNumbers.json' && req.method === 'GET') {
          const wanted = url.searchParams.get('PhoneNumber')
          const found = (owned.get(accountSid) ?? []).filter((n) => wanted === null || n.phone_number === wanted)
          return json(res, 200, page(url.pathname + url.search, 'incoming_phone_numbers', found, 50))
        }
        const one = /^\/IncomingPhoneNumbers\/(PN[0-9a-f]{32})\.json$/.exec(rest)
        if (one !== null && (req.method === 'DELETE' || req.method === 'POST')) {
          const list = owned.get(accountSid) ?? []
          const at = list.findIndex((n) => n.sid === one[1])
          if (at === -1) return error(res, 404, 20404, `The requested resource ${url.pathname} was not found`)
          if (req.method === 'POST') return json(res, 200, resource(Object.assign(list[at], voiceSettings(form))))
          list.splice(at, 1)
          res.writeHead(204).end()
          return
        }
        const calls = voice.rest(req.method ?? '', accountSid, rest, form)
        if (calls !== undefined) {
          if (calls.afterAnswer !== undefined) res.once('finish', calls.afterAnswer)
          return json(res, calls.status, calls.body)
        }
        const sipAnswer = sip.rest(req.method ?? '', accountSid, rest, form)
        if (sipAnswer !== undefined) {
          if (sipAnswer.status === 204) return res.writeHead(204).end()
          return json(res, sipAnswer.status, sipAnswer.body)
        }
        const message = messaging.rest(req.method ?? '', accountSid, rest, form)
        if (message !== undefined) return json(res, message.status, message.body)
        return error(res, 404, 20404, `The requested resource ${url.pathname} was not found`)
      })().catch((err: unknown) => { res.writeHead(500).end(String(err)) })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  standIn.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return standIn
}
