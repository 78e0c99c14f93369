import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Selectable } from 'kysely'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import type { PhoneNumbersTable } from '../../db/schema.ts'
import { badRequest, notFound } from '../../http/errors.ts'
import { AgentVersionNumber } from '../agents/schemas.ts'
import { AUTH_ERRORS, CHECKED_IN_HANDLER, COMPONENT, E164, EpochMs, errors, IdParams, ObjectId, Paging } from '../../http/schemas.ts'
import { requireCustomer } from '../account/customer-queries.ts'
import { requireWorkspace } from '../account/workspace-queries.ts'
import type { Carriers } from './carriers/index.ts'
import { telnyxSipHost } from './carriers/telnyx-sip.ts'
import { sipDomainName } from './carriers/twilio-sip.ts'
import { assignNumber, buyNumber, connectSip, importNumber, releaseNumber, replaceCarrierToken, replaceTelnyxCredentials, searchNumbers } from './numbers.ts'
import { findPhoneNumber, listPhoneNumbers } from './queries.ts'
import { AccountSid, AreaCode, AuthToken, CarrierName, Contains, Country, Nickname, TelnyxApiKey, TelnyxPublicKey } from './schemas.ts'

export interface PhoneNumberOptions {
  db: DB
  carriers: Carriers
}

const NullableId = (description: string) => Type.Optional(Type.Union([ObjectId, Type.Null()], { description }))
const NullableVersion = (description: string) => Type.Optional(Type.Union([AgentVersionNumber, Type.Null()], { description: `${description} (beyond the specification)` }))

/** What a number is used for and whom it belongs to; settable on every route that makes or changes one. */
const Assignment = {
  nickname: Type.Optional(Nickname),
  inbound_agent_id: NullableId('the agent that answers calls to this number; null for none'),
  outbound_agent_id: NullableId('the agent that places calls from this number; null for none'),
  inbound_agent_version: NullableVersion('the version of the inbound agent its calls run (GET /v1/agent/:id/versions; 404 when the agent has no such version); null (default): the latest. Changing the inbound agent clears it'),
  outbound_agent_version: NullableVersion('the version of the outbound agent its calls run when it is the call\'s agent; null (default): the latest. Changing the outbound agent clears it'),
  customer_id: NullableId('one of your customers; null for none'),
  workspace_id: NullableId('one of your workspaces; null for none')
}

const PhoneNumber = Type.Object({
  _id: ObjectId,
  phone_number: E164,
  nickname: Nickname,
  source: Type.Enum(['purchased', 'imported', 'sip'], { description: 'bought here, imported from a carrier account, or brought over a SIP trunk' }),
  carrier: Type.Enum(['sandbox', 'twilio', 'telnyx', 'sip'], { description: 'which carrier holds the number; each number keeps its own, so one installation may hold numbers of several' }),
  carrier_number_id: Type.Union([Type.String(), Type.Null()], { description: "the carrier's id for the number, such as a Twilio PN… sid" }),
  inbound_agent_id: Type.Union([ObjectId, Type.Null()]),
  outbound_agent_id: Type.Union([ObjectId, Type.Null()]),
  inbound_agent_version: Type.Union([Type.Integer(), Type.Null()], { description: 'the inbound agent\'s version its calls run; null: the latest' }),
  outbound_agent_version: Type.Union([Type.Integer(), Type.Null()], { description: 'the outbound agent\'s version its calls run; null: the latest' }),
  customer_id: Type.Union([ObjectId, Type.Null()]),
  workspace_id: Type.Union([ObjectId, Type.Null()]),
  user_id: ObjectId,
  sip_trunk: Type.Union([Type.Object({
    termination_uri: Type.String(),
    auth_username: Type.Union([Type.String(), Type.Null()]),
    auth_password_set: Type.Boolean({ description: 'the password itself is never returned' }),
    sip_domain: Type.Union([Type.String(), Type.Null()], { description: 'where your PBX sends the number\'s calls: the Twilio SIP Domain, or the Telnyx SIP subdomain (`sb….sip.telnyx.com`), carrying them (beyond the specification; docs/sip.md); null when the installation carries no SIP calls' })
  }), Type.Null()]),
  created_at: EpochMs,
  updated_at: EpochMs
}, { [COMPONENT]: 'PhoneNumber', description: 'Carrier credentials and SIP passwords are stored but never returned.' })

const AvailableNumber = Type.Object({
  phone_number: E164,
  friendly_name: Type.String(),
  country: Type.String(),
  locality: Type.Union([Type.String(), Type.Null()]),
  region: Type.Union([Type.String(), Type.Null()]),
  carrier: CarrierName
}, { [COMPONENT]: 'AvailablePhoneNumber' })

const TWILIO_CREDENTIALS = [{ required: ['account_sid'] }, { required: ['auth_token'] }]
const TELNYX_CREDENTIALS = [{ required: ['api_key'] }, { required: ['public_key'] }]
const CREDENTIALS = [...TWILIO_CREDENTIALS, ...TELNYX_CREDENTIALS]

/** import-carrier's rules as the document states them (the handler enforces them: see CHECKED_IN_HANDLER). */
const IMPORT_CARRIER_RULES = [
  { title: 'twilio with the credentials of the account holding the number', properties: { carrier: { const: 'twilio' } }, required: ['account_sid', 'auth_token'], not: { anyOf: TELNYX_CREDENTIALS } },
  { title: 'the sandbox', properties: { carrier: { const: 'sandbox' } }, required: ['carrier'], not: { anyOf: CREDENTIALS } },
  { title: "telnyx with the API key and webhook public key of your own Telnyx account holding the number (without them 400 carrier_credentials_required: numbers of the installation's Telnyx account are assigned by its operator)", properties: { carrier: { const: 'telnyx' } }, required: ['api_key', 'public_key'], not: { anyOf: TWILIO_CREDENTIALS } },
  { title: "the installation's carrier (PHONE_CARRIER) when it is the sandbox", not: { anyOf: [{ required: ['carrier'] }, ...CREDENTIALS] } }
]

// A SIP URI's host part with an optional port and transport: sip:trunk.example.com:5060;transport=tcp
const SIP_URI_PATTERN = '^([Ss][Ii][Pp][Ss]?:)?([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*|\\[[0-9A-Fa-f:.]+\\])(:[0-9]{1,5})?(;[Tt][Rr][Aa][Nn][Ss][Pp][Oo][Rr][Tt]=([Uu][Dd][Pp]|[Tt][Cc][Pp]|[Tt][Ll][Ss]))?$'
const SIP_URI = new RegExp(SIP_URI_PATTERN)

/** Where the PBX sends a connected SIP number's calls: its Twilio SIP Domain, or its Telnyx application's SIP subdomain. */
function sipHostOf (row: Selectable<PhoneNumbersTable>): string | null {
  if (row.sip_domain_sid === null) return null
  return row.sip_carrier === 'telnyx' && row.sip_subdomain !== null ? telnyxSipHost(row.sip_subdomain) : sipDomainName(row.id)
}

function phoneNumberView (row: Selectable<PhoneNumbersTable>) {
  return {
    _id: row.id,
    phone_number: row.phone_number,
    nickname: row.nickname,
    source: row.source,
    carrier: row.carrier,
    carrier_number_id: row.carrier_number_id,
    inbound_agent_id: row.inbound_agent_id,
    outbound_agent_id: row.outbound_agent_id,
    inbound_agent_version: row.inbound_agent_version,
    outbound_agent_version: row.outbound_agent_version,
    customer_id: row.customer_id,
    workspace_id: row.workspace_id,
    user_id: row.user_id,
    sip_trunk: row.sip_termination_uri === null
      ? null
      : { termination_uri: row.sip_termination_uri, auth_username: row.sip_username, auth_password_set: row.sip_password !== null, sip_domain: sipHostOf(row) },
    created_at: row.created_at.getTime(),
    updated_at: row.updated_at.getTime()
  }
}

export const phoneNumberRoutes: FastifyPluginAsyncTypebox<PhoneNumberOptions> = async (app, { db, carriers }) => {
  app.get('/phone-number/list', {
    schema: {
      tags: ['phone numbers'],
      summary: 'List phone numbers',
      description: 'Oldest first. `customer_id` and `workspace_id` must name your own (else 404). `user_id` can only be your own: any other gives an empty list.',
      querystring: Type.Object({
        inbound_agent_id: Type.Optional(ObjectId),
        outbound_agent_id: Type.Optional(ObjectId),
        customer_id: Type.Optional(ObjectId),
        workspace_id: Type.Optional(ObjectId),
        user_id: Type.Optional(ObjectId),
        ...Paging
      }),
      response: { 200: Type.Array(PhoneNumber), ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const { user_id: userId, ...filter } = request.query
    if (userId !== undefined && userId !== request.userId) return []
    if (filter.customer_id !== undefined) await requireCustomer(db, request.userId, filter.customer_id)
    if (filter.workspace_id !== undefined) await requireWorkspace(db, request.userId, filter.workspace_id)
    return (await listPhoneNumbers(db, request.userId, filter)).map(phoneNumberView)
  })

  app.get('/phone-number/available', {
    schema: {
      tags: ['phone numbers'],
      summary: 'Search numbers to buy',
      description: "Local numbers offered by this installation's carrier (PHONE_CARRIER). The sandbox offers fictional numbers in US, CA and GB.",
      querystring: Type.Object({
        country: Type.Optional({ ...Country, default: 'US' }),
        area_code: Type.Optional(AreaCode),
        contains: Type.Optional(Contains),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 50, default: 20 }))
      }),
      response: { 200: Type.Array(AvailableNumber), ...errors(...AUTH_ERRORS, 502) }
    }
  }, async (request) => {
    const { carrier, numbers } = await searchNumbers(carriers, request.query)
    return numbers.map((n) => ({ phone_number: n.phoneNumber, friendly_name: n.friendlyName, country: n.country, locality: n.locality, region: n.region, carrier }))
  })

  app.post('/phone-number/buy', {
    schema: {
      tags: ['phone numbers'],
      summary: 'Buy a number',
      description: "Buys `phone_number`, or the first number available in `area_code`, from this installation's carrier, with its calls sent to this server (PUBLIC_BASE_URL; 409 `webhooks_unreachable` when Twilio could not reach it). A purchase that cannot be stored is given back to the carrier: a failed buy leaves nothing behind.",
      body: Type.Object({
        phone_number: Type.Optional(E164),
        area_code: Type.Optional(AreaCode),
        country: Type.Optional({ ...Country, description: 'with `area_code`; default US' }),
        ...Assignment
      }, { anyOf: [{ required: ['phone_number'] }, { required: ['area_code'] }] }),
      response: { 201: PhoneNumber, ...errors(...AUTH_ERRORS, 404, 409, 502) }
    }
  }, async (request, reply) => {
    return reply.code(201).send(phoneNumberView(await buyNumber(db, carriers, request.userId, request.body, request.log)))
  })

  app.post('/phone-number/import-carrier', {
    schema: {
      tags: ['phone numbers'],
      summary: 'Import a number from a carrier account',
      description: 'Adds a number you already hold at a carrier. An installation running the sandbox (PHONE_CARRIER=sandbox) imports from the sandbox only: `carrier: twilio` answers 400 `carrier_disabled` and nothing reaches Twilio. For Twilio give the account SID and auth token of the account holding it: without them 400 `carrier_credentials_required` (numbers of the installation\'s own Twilio account are assigned by its operator, `npm run cli -- number import`). The number must be in that account, and its voice URL and status callback are pointed at this server (PUBLIC_BASE_URL; 409 `webhooks_unreachable` when Twilio could not reach it). The credentials are kept for later carrier requests and never returned. For Telnyx give your own account\'s `api_key` and `public_key` (the webhook signing key the portal shows under Keys & Credentials; Telnyx\'s API does not give it): the key is checked with Telnyx (400 `carrier_credentials_rejected` when refused), the number must be in that account (404), and its calls are sent here through a Call Control application made in your account (one per account, shared by its numbers) whose webhooks come to a URL of their own, verified with that public key (docs/voice.md, "Your own Telnyx account"). Without them 400 `carrier_credentials_required` (numbers of the installation\'s Telnyx account are assigned by its operator).',
      body: Type.Object({
        phone_number: E164,
        carrier: Type.Optional({ ...CarrierName, description: 'default: twilio when account_sid and auth_token are given, telnyx when api_key and public_key are, else PHONE_CARRIER' }),
        account_sid: Type.Optional(AccountSid),
        auth_token: Type.Optional(AuthToken),
        api_key: Type.Optional(TelnyxApiKey),
        public_key: Type.Optional(TelnyxPublicKey),
        ...Assignment
      }, { [CHECKED_IN_HANDLER]: { oneOf: IMPORT_CARRIER_RULES } }),
      response: { 201: PhoneNumber, ...errors(...AUTH_ERRORS, 404, 409, 502) }
    }
  }, async (request, reply) => {
    return reply.code(201).send(phoneNumberView(await importNumber(db, carriers, request.userId, request.body)))
  })

  app.patch('/phone-number/carrier-credentials', {
    schema: {
      tags: ['phone numbers'],
      summary: 'Replace the auth token kept with your numbers imported from a Twilio account (beyond the specification)',
      description: 'After rotating the auth token at Twilio: the new token is checked with Twilio (400 `carrier_credentials_rejected` when refused), then kept with every number you imported from that account. Nothing is imported again. 404 when you imported no number from the account.',
      body: Type.Object({ account_sid: AccountSid, auth_token: AuthToken }),
      response: {
        200: Type.Object({ account_sid: AccountSid, numbers_updated: Type.Integer({ description: 'how many of your numbers keep the new token' }) }),
        ...errors(...AUTH_ERRORS, 404, 502)
      }
    }
  }, async (request) => {
    const { account_sid: accountSid, auth_token: authToken } = request.body
    return { account_sid: accountSid, numbers_updated: await replaceCarrierToken(db, carriers, request.userId, accountSid, authToken) }
  })

  app.patch('/phone-number/telnyx-credentials', {
    schema: {
      tags: ['phone numbers'],
      summary: 'Replace the Telnyx API key or webhook public key kept with your numbers imported from a Telnyx account (beyond the specification)',
      description: 'After rotating the API key or the webhook signing key at Telnyx: `phone_number` names any of your numbers imported from that account, and what is given is kept with every number of that account. A new `api_key` is checked with Telnyx first (400 `carrier_credentials_rejected` when refused; 404 when that account does not hold the number); a new `public_key` cannot be checked with Telnyx and verifies the account\'s webhooks from now on. Nothing is imported again. 404 when the number is not one of yours imported from a Telnyx account. Neither key is ever returned.',
      body: Type.Object({ phone_number: E164, api_key: Type.Optional(TelnyxApiKey), public_key: Type.Optional(TelnyxPublicKey) }, { anyOf: [{ required: ['api_key'] }, { required: ['public_key'] }] }),
      response: {
        200: Type.Object({ phone_number: E164, numbers_updated: Type.Integer({ description: 'how many of your numbers keep the new keys' }) }),
        ...errors(...AUTH_ERRORS, 404, 502)
      }
    }
  }, async (request) => {
    const { phone_number: phoneNumber, api_key: apiKey, public_key: publicKey } = request.body
    return { phone_number: phoneNumber, numbers_updated: await replaceTelnyxCredentials(db, carriers, request.userId, phoneNumber, { apiKey, publicKey }) }
  })

  app.patch('/phone-number/connect-to-sip', {
    schema: {
      tags: ['phone numbers'],
      summary: 'Connect a number to a SIP trunk',
      description: 'Calls to and from the number go through your SIP trunk. A number not yet on the installation is added as a SIP number (201); its calls are carried by this installation\'s SIP carrier (SIP_CARRIER; docs/sip.md): a Twilio SIP Domain, or a Telnyx Call Control application\'s SIP subdomain (`sip_trunk.sip_domain`), takes your PBX\'s calls to the number, authenticated with `sip_trunk_auth_username` and `sip_trunk_auth_password` (required then: 400 `sip_credentials_required`; Twilio takes passwords of 12 or more characters with a digit and mixed case, Telnyx user names of 4 to 32 letters and digits and passwords of 8 to 128 characters), and the agent\'s calls go to `termination_uri` with them. A number of your account is connected (200): a SIP number is configured again; a number bought or imported here keeps its carrier and only keeps the settings. An installation without an account at its SIP carrier (or PHONE_CARRIER=sandbox) keeps the settings only: such a number takes and places no calls (make-phone-call answers 409 `sip_not_connected`). The trunk settings are replaced whole; the password is never returned.',
      body: Type.Object({
        phone_number: E164,
        termination_uri: Type.String({
          minLength: 1, maxLength: 255, description: 'where outbound calls go: sip:trunk.example.com:5060', examples: ['sip:trunk.example.com:5060;transport=tcp'],
          [CHECKED_IN_HANDLER]: { pattern: SIP_URI_PATTERN }
        }),
        sip_trunk_auth_username: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
        sip_trunk_auth_password: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
        ...Assignment
      }),
      response: { 200: PhoneNumber, 201: PhoneNumber, ...errors(...AUTH_ERRORS, 404, 409, 502) }
    }
  }, async (request, reply) => {
    const { termination_uri: terminationUri, sip_trunk_auth_username: username, sip_trunk_auth_password: password } = request.body
    if (!SIP_URI.test(terminationUri)) throw badRequest('body.termination_uri must be a SIP URI such as sip:trunk.example.com:5060')
    if (password !== undefined && username === undefined) throw badRequest('body.sip_trunk_auth_password needs body.sip_trunk_auth_username')
    const { created, row } = await connectSip(db, carriers, request.userId, request.body)
    return reply.code(created ? 201 : 200).send(phoneNumberView(row))
  })

  app.get('/phone-number/:id', {
    schema: {
      tags: ['phone numbers'],
      summary: 'Get a phone number',
      params: IdParams,
      response: { 200: PhoneNumber, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    const row = await findPhoneNumber(db, request.userId, request.params.id)
    if (row === undefined) throw notFound('phone number')
    return phoneNumberView(row)
  })

  app.patch('/phone-number/:id', {
    schema: {
      tags: ['phone numbers'],
      summary: 'Assign agents, customer, workspace or nickname',
      description: 'Only the fields given change; null removes an assignment.',
      params: IdParams,
      body: Type.Object(Assignment),
      response: { 200: PhoneNumber, ...errors(...AUTH_ERRORS, 404) }
    }
  }, async (request) => {
    return phoneNumberView(await assignNumber(db, request.userId, request.params.id, request.body))
  })

  app.delete('/phone-number/:id', {
    schema: {
      tags: ['phone numbers'],
      summary: 'Release a phone number',
      description: 'A number bought here is given back to the carrier first; if the carrier fails, the number stays (502). Imported and SIP numbers are only removed from Switchboard; a number imported from your own Telnyx account is taken off the Call Control application made for it there (the last number of that account takes the application with it), with the API key kept for it (400 `carrier_credentials_rejected` when Telnyx refuses it: replace it with PATCH /v1/phone-number/telnyx-credentials).',
      params: IdParams,
      response: { 204: Type.Null(), ...errors(...AUTH_ERRORS, 404, 502) }
    }
  }, async (request, reply) => {
    await releaseNumber(db, carriers, request.userId, request.params.id)
    return reply.code(204).send(null)
  })
}
