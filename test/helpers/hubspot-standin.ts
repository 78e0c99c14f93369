import { randomUUID } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { oauthServer, type OAuthServer } from './oauth-server.ts'

// A local HTTP server that answers like HubSpot's API (https://api.hubapi.com) for what the `crm` tool uses, written
// from HubSpot's public reference:
// - GET /account-info/v3/details: the account check (portalId, uiDomain, timeZone, …);
// - POST /crm/v3/objects/contacts/search: filterGroups (OR) of filters (AND) with EQ / NEQ / HAS_PROPERTY /
//   NOT_HAS_PROPERTY, at most 5 groups, 10 filters a group and 25 in all; `properties`; `sorts`; `limit` (default
//   10, at most 200); paging by `after` (answers paging.next.after while more are left); `total`;
// - POST /crm/v3/objects/contacts (201; an e-mail address already held: 409 CONFLICT "Contact already exists.
//   Existing ID: <id>"), PATCH /crm/v3/objects/contacts/{id} (404 OBJECT_NOT_FOUND when unknown);
// - POST /crm/v3/objects/calls and /crm/v3/objects/notes: hs_timestamp required; `associations` [{ to: { id }, types:
//   [{ associationCategory, associationTypeId }] }], checked (HUBSPOT_DEFINED 194 is call to contact, 202 note to
//   contact; the contact must exist);
// - Bearer authentication: a private app's access token, or an OAuth access token of the OAuth server mounted at
//   HubSpot's paths (GET /oauth/authorize, as app.hubspot.com has it; POST /oauth/v1/token, form-encoded
//   authorization_code and refresh_token grants); otherwise 401 INVALID_AUTHENTICATION (EXPIRED_AUTHENTICATION for an
//   OAuth token that ran out);
// - errors as HubSpot's JSON ({ status: 'error', message, correlationId, category }); a 429 with HubSpot's
//   RATE_LIMIT body and X-HubSpot-RateLimit-* headers on demand.

/** HubSpot's association type ids (HUBSPOT_DEFINED) of a call and of a note to a contact. */
const TO_CONTACT = { calls: 194, notes: 202 } as const

export interface HubSpotObject {
  id: string
  properties: Record<string, string | null>
  createdAt: string
  updatedAt: string
  archived: false
}

/** A call or note engagement. */
export interface HubSpotEngagement extends HubSpotObject {
  /** The contacts it is associated with (type 194 for a call, 202 for a note). */
  contactIds: string[]
}

export interface HubSpotRequest { method: string, path: string, authorization: string | undefined, body: any }

/** The public app's client (HUBSPOT_CLIENT_ID, HUBSPOT_CLIENT_SECRET). */
export const HUBSPOT_CLIENT = { id: 'hubspot-client-id', secret: 'hubspot-client-secret' }

export interface HubSpotStandIn {
  /** For HUBSPOT_API_URL. */
  url: string
  portalId: number
  /** Every API request, in order. */
  requests: HubSpotRequest[]
  contacts: Map<string, HubSpotObject>
  calls: Map<string, HubSpotEngagement>
  notes: Map<string, HubSpotEngagement>
  /** Adds a contact as if entered in HubSpot; answers it. */
  addContact: (properties: Record<string, string>) => HubSpotObject
  /** Private app access tokens accepted (add one to connect with it; delete it to revoke). */
  privateTokens: Set<string>
  /** The OAuth authorization server (HUBSPOT_AUTHORIZE_URL `${url}/oauth/authorize`, HUBSPOT_TOKEN_URL `${url}/oauth/v1/token`). */
  oauth: OAuthServer
  /** The next `count` API requests are answered 429 (HubSpot's secondly limit). */
  rateLimitNext: (count?: number) => void
  /** Contacts the search does not find yet: HubSpot's search index lags behind writes by some seconds. */
  unindexed: Set<string>
  /** Runs before a request is answered (e.g. to hold a search while a test looks at the call). */
  beforeAnswer: ((request: HubSpotRequest) => Promise<void>) | undefined
}

const DEFAULT_CONTACT_PROPERTIES = ['createdate', 'email', 'firstname', 'hs_object_id', 'lastmodifieddate', 'lastname']
const OPERATORS = new Set(['EQ', 'NEQ', 'HAS_PROPERTY', 'NOT_HAS_PROPERTY'])

class HubSpotError extends Error {
  status: number
  category: string
  constructor (status: number, category: string, message: string) {
    super(message)
    this.status = status
    this.category = category
  }
}

const validation = (message: string) => new HubSpotError(400, 'VALIDATION_ERROR', message)

/** The stand-in for a tap test: closed at teardown. */
export async function startHubSpotStandIn (t: Test): Promise<HubSpotStandIn> {
  const standIn = await createHubSpotStandIn()
  t.teardown(standIn.close)
  return standIn
}

export async function createHubSpotStandIn (): Promise<HubSpotStandIn & { close: () => Promise<void> }> {
  const contacts = new Map<string, HubSpotObject>()
  const engagements = { calls: new Map<string, HubSpotEngagement>(), notes: new Map<string, HubSpotEngagement>() }
  const requests: HubSpotRequest[] = []
  const privateTokens = new Set<string>()
  let nextId = 101
  let throttled = 0

  const stamp = () => new Date().toISOString()
  const newContact = (properties: Record<string, string | null>): HubSpotObject => {
    const id = String(nextId++)
    const now = stamp()
    const contact: HubSpotObject = { id, properties: { ...properties, hs_object_id: id, createdate: now, lastmodifieddate: now }, createdAt: now, updatedAt: now, archived: false }
    contacts.set(id, contact)
    return contact
  }
  const emailTaken = (email: string | null | undefined, except?: string) =>
    email == null ? undefined : [...contacts.values()].find((c) => c.id !== except && c.properties.email?.toLowerCase() === email.toLowerCase())

  /** The object as HubSpot answers it: the properties asked for (null when unset) and the default ones. */
  const shown = (object: HubSpotObject, names: string[]) => ({
    ...object,
    properties: Object.fromEntries([...new Set([...DEFAULT_CONTACT_PROPERTIES, ...names])].map((name) => [name, object.properties[name] ?? null]))
  })

  const matches = (contact: HubSpotObject, filter: { propertyName: string, operator: string, value?: unknown }) => {
    const value = contact.properties[filter.propertyName]
    switch (filter.operator) {
      case 'EQ': return value != null && value.toLowerCase() === String(filter.value).toLowerCase()
      case 'NEQ': return value == null || value.toLowerCase() !== String(filter.value).toLowerCase()
      case 'HAS_PROPERTY': return value != null && value !== ''
      default: return value == null || value === ''
    }
  }

  function search (body: any) {
    const groups: any[] = body?.filterGroups ?? []
    if (!Array.isArray(groups)) throw validation('filterGroups must be an array')
    if (groups.length > 5) throw validation(`Too many filter groups (${groups.length}). The limit is 5.`)
    let total = 0
    for (const group of groups) {
      const filters = group?.filters
      if (!Array.isArray(filters) || filters.length === 0) throw validation('Each filter group needs at least one filter.')
      if (filters.length > 10) throw validation(`Too many filters in a group (${filters.length}). The limit is 10.`)
      total += filters.length
      for (const filter of filters) {
        if (typeof filter?.propertyName !== 'string' || !OPERATORS.has(filter.operator)) throw validation(`Invalid filter: ${JSON.stringify(filter)}`)
        if ((filter.operator === 'EQ' || filter.operator === 'NEQ') && (filter.value === undefined || filter.value === null)) throw validation(`The ${filter.operator} filter on ${filter.propertyName} needs a value.`)
      }
    }
    if (total > 25) throw validation(`Too many filters (${total}). The limit is 25.`)
    const limit = body?.limit ?? 10
    if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw validation('limit must be between 1 and 200')
    const after = Number(body?.after ?? 0)
    const found = [...contacts.values()]
      .filter((c) => !standIn.unindexed.has(c.id))
      .filter((c) => groups.length === 0 || groups.some((g) => g.filters.every((f: any) => matches(c, f))))
      .sort((a, b) => Number(a.id) - Number(b.id))
    // `sorts`: [{ propertyName, direction }] (one is all HubSpot's search takes); ids ascending otherwise.
    const sort = Array.isArray(body?.sorts) ? body.sorts[0] : undefined
    if (typeof sort?.propertyName === 'string') {
      const sign = sort.direction === 'DESCENDING' ? -1 : 1
      found.sort((a, b) => sign * String(a.properties[sort.propertyName] ?? '').localeCompare(String(b.properties[sort.propertyName] ?? '')))
    }
    const page = found.slice(after, after + limit)
    const names = Array.isArray(body?.properties) ? body.properties.map(String) : []
    return {
      total: found.length,
      results: page.map((c) => shown(c, names)),
      ...(after + limit < found.length ? { paging: { next: { after: String(after + limit) } } } : {})
    }
  }

  const propertiesOf = (body: any): Record<string, string | null> => {
    const properties = body?.properties
    if (typeof properties !== 'object' || properties === null || Array.isArray(properties)) throw validation('properties must be an object')
    return Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, v === null ? null : String(v)]))
  }

  function createEngagement (kind: 'calls' | 'notes', body: any): HubSpotEngagement {
    const properties = propertiesOf(body)
    if (properties.hs_timestamp == null || properties.hs_timestamp === '') throw validation('Property values were not valid: hs_timestamp is required')
    const contactIds: string[] = []
    for (const association of body?.associations ?? []) {
      const id = String(association?.to?.id)
      const types = association?.types
      if (!Array.isArray(types) || !types.every((t: any) => t?.associationCategory === 'HUBSPOT_DEFINED' && t?.associationTypeId === TO_CONTACT[kind])) {
        throw validation(`Unsupported association types: ${JSON.stringify(types)}`)
      }
      if (!contacts.has(id)) throw validation(`No contact with id ${id} exists to associate with.`)
      contactIds.push(id)
    }
    const id = String(nextId++)
    const now = stamp()
    const engagement: HubSpotEngagement = { id, properties: { ...properties, hs_object_id: id, hs_createdate: now }, createdAt: now, updatedAt: now, archived: false, contactIds }
    engagements[kind].set(id, engagement)
    return engagement
  }

  function authenticate (authorization: string | undefined): void {
    const token = /^Bearer (.+)$/.exec(authorization ?? '')?.[1]
    if (token !== undefined && privateTokens.has(token)) return
    if (oauth.valid(authorization)) return
    if (oauth.accessTokens().some((issued) => issued.token === token)) throw new HubSpotError(401, 'EXPIRED_AUTHENTICATION', 'The OAuth token used to make this call expired 1 second(s) ago.')
    throw new HubSpotError(401, 'INVALID_AUTHENTICATION', 'Authentication credentials not found. This API supports OAuth 2.0 authentication and you can find more details at https://developers.hubspot.com/docs/methods/auth/oauth-overview')
  }

  function route (method: string, path: string, body: any): { status: number, body: unknown } {
    if (method === 'GET' && path === '/account-info/v3/details') {
      return {
        status: 200,
        body: { portalId: standIn.portalId, accountType: 'STANDARD', timeZone: 'US/Eastern', companyCurrency: 'USD', additionalCurrencies: [], utcOffset: '-05:00', utcOffsetMilliseconds: -18000000, uiDomain: 'app.hubspot.com', dataHostingLocation: 'na1' }
      }
    }
    if (method === 'POST' && path === '/crm/v3/objects/contacts/search') return { status: 200, body: search(body) }
    if (method === 'POST' && path === '/crm/v3/objects/contacts') {
      const properties = propertiesOf(body)
      const existing = emailTaken(properties.email)
      if (existing !== undefined) throw new HubSpotError(409, 'CONFLICT', `Contact already exists. Existing ID: ${existing.id}`)
      return { status: 201, body: shown(newContact(properties), Object.keys(properties)) }
    }
    const contactPath = /^\/crm\/v3\/objects\/contacts\/([^/]+)$/.exec(path)
    if (method === 'PATCH' && contactPath !== null) {
      const contact = contacts.get(contactPath[1])
      if (contact === undefined) throw new HubSpotError(404, 'OBJECT_NOT_FOUND', 'resource not found')
      const properties = propertiesOf(body)
      const existing = emailTaken(properties.email, contact.id)
      if (existing !== undefined) throw new HubSpotError(409, 'CONFLICT', `A contact with the email '${properties.email}' already exists. Existing ID: ${existing.id}`)
      contact.updatedAt = stamp()
      Object.assign(contact.properties, properties, { lastmodifieddate: contact.updatedAt })
      return { status: 200, body: shown(contact, Object.keys(properties)) }
    }
    const engagementPath = /^\/crm\/v3\/objects\/(calls|notes)$/.exec(path)
    if (method === 'POST' && engagementPath !== null) {
      const { contactIds: _, ...created } = createEngagement(engagementPath[1] as 'calls' | 'notes', body)
      return { status: 201, body: created }
    }
    throw new HubSpotError(404, 'OBJECT_NOT_FOUND', `No route for ${method} ${path}`)
  }

  const oauth = oauthServer({ authorizePath: '/oauth/authorize', tokenPath: '/oauth/v1/token', clientId: HUBSPOT_CLIENT.id, clientSecret: HUBSPOT_CLIENT.secret, lifetime: 1800, autoApprove: true })

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      void (async () => {
        const url = new URL(req.url ?? '/', 'http://localhost')
        const path = url.pathname
        const text = Buffer.concat(chunks).toString('utf8')
        if (oauth.handle(req, res, path, url.searchParams, text)) return
        let body: unknown = null
        const answer = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
          res.writeHead(status, { 'content-type': 'application/json;charset=utf-8', ...headers })
          res.end(JSON.stringify(payload))
        }
        const error = (e: HubSpotError) => answer(e.status, { status: 'error', message: e.message, correlationId: randomUUID(), category: e.category })
        try {
          body = text === '' ? null : JSON.parse(text)
        } catch {
          error(validation('Invalid input JSON on line 1'))
          return
        }
        const request: HubSpotRequest = { method: req.method ?? 'GET', path, authorization: req.headers.authorization, body }
        requests.push(request)
        await standIn.beforeAnswer?.(request)
        try {
          authenticate(req.headers.authorization)
          if (throttled > 0) {
            throttled--
            answer(429, { status: 'error', message: 'You have reached your secondly limit.', errorType: 'RATE_LIMIT', correlationId: randomUUID(), policyName: 'SECONDLY' }, {
              'x-hubspot-ratelimit-interval-milliseconds': '10000', 'x-hubspot-ratelimit-max': '100', 'x-hubspot-ratelimit-remaining': '0', 'x-hubspot-ratelimit-secondly': '10', 'x-hubspot-ratelimit-secondly-remaining': '0'
            })
            return
          }
          const { status, body: payload } = route(request.method, path, body)
          answer(status, payload, { 'x-hubspot-ratelimit-interval-milliseconds': '10000', 'x-hubspot-ratelimit-max': '100', 'x-hubspot-ratelimit-remaining': '99' })
        } catch (e) {
          if (e instanceof HubSpotError) error(e)
          else answer(500, { status: 'error', message: String(e), correlationId: randomUUID(), category: 'INTERNAL_ERROR' })
        }
      })()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))

  const standIn: HubSpotStandIn & { close: () => Promise<void> } = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    portalId: 62515,
    requests,
    contacts,
    calls: engagements.calls,
    notes: engagements.notes,
    addContact: (properties) => newContact(properties),
    privateTokens,
    oauth,
    rateLimitNext: (count = 1) => { throttled += count },
    unindexed: new Set(),
    beforeAnswer: undefined,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  }
  return standIn
}
