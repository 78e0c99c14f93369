import type { FastifyBaseLogger } from 'fastify'
import type { DB } from '../../db/database.ts'
import { newId } from '../../db/ids.ts'
import type { CarrierName } from '../../db/schema.ts'
import { badRequest, conflict, HttpError, notFound } from '../../http/errors.ts'
import { requireCustomer } from '../account/customer-queries.ts'
import { requireWorkspace } from '../account/workspace-queries.ts'
import { agentExists } from '../agents/queries.ts'
import { versionExists } from '../agents/versions.ts'
import { CarrierError, type AvailableNumber } from './carriers/carrier.ts'
import type { Carriers } from './carriers/index.ts'
import { telnyxSipCredentialProblem, type TelnyxSipDomain } from './carriers/telnyx-sip.ts'
import { findTelnyxNumber, routeTelnyxNumber, telnyxAccountWebhook, telnyxApplications, telnyxRequester, type TelnyxAccount } from './carriers/telnyx.ts'
import { sipCredentialProblem, type SipDomain } from './carriers/twilio-sip.ts'
import { tenantTelnyxAccount } from './number-accounts.ts'
import {
  countTelnyxAccountNumbers, deletePhoneNumber, findPhoneNumber, findPhoneNumberByE164, findTenantTelnyxAccount, importedFrom, insertPhoneNumber, numberHolder, numberTaken, setCarrierToken,
  setTelnyxCredentials, twilioNumbers, updatePhoneNumber, type PhoneNumberRow
} from './queries.ts'

// Searching, buying, importing, assigning and releasing numbers: what the API's routes and the console's pages
// both do, with the same checks and the same answers.

/** What a number is used for and whom it belongs to; null removes an assignment, undefined leaves it. */
export interface AssignmentInput {
  nickname?: string
  inbound_agent_id?: string | null
  outbound_agent_id?: string | null
  /** The version of the inbound (outbound) agent the number's calls run; null: the latest. */
  inbound_agent_version?: number | null
  outbound_agent_version?: number | null
  customer_id?: string | null
  workspace_id?: string | null
}

/** The agents a stored number has (a pin is checked against the agent it ends up with). */
type Assigned = Partial<Pick<PhoneNumberRow, 'inbound_agent_id' | 'outbound_agent_id'>>

const DIRECTIONS = [
  { label: 'inbound agent', agent: 'inbound_agent_id', pin: 'inbound_agent_version' },
  { label: 'outbound agent', agent: 'outbound_agent_id', pin: 'outbound_agent_version' }
] as const

/** Carrier outcomes as client errors. Rejected credentials are the caller's when they gave them, else the installation's. */
export async function atCarrier<T> (work: () => Promise<T>, callerCredentials = false): Promise<T> {
  try {
    return await work()
  } catch (err) {
    if (!(err instanceof CarrierError)) throw err
    if (err.kind === 'unavailable') throw conflict(err.message, 'number_unavailable')
    if (err.kind === 'rejected') throw badRequest(err.message, 'carrier_rejected')
    if (err.kind === 'credentials' && callerCredentials) throw badRequest(err.message, 'carrier_credentials_rejected')
    throw new HttpError(502, 'carrier_error', err.message)
  }
}

/** A number is pointed at this server only where its carrier can reach it (PUBLIC_BASE_URL). */
function requireReachable (carriers: Carriers, name: CarrierName): void {
  if (name === 'twilio' && carriers.webhooksProblem !== undefined) throw conflict(carriers.webhooksProblem, 'webhooks_unreachable')
}

/**
 * 404s for any named agent, customer or workspace the caller does not have, before anything is bought or stored; a
 * version pin must name a version of the agent the number has with the change (404), and needs one (400).
 */
export async function checkAssignment (db: DB, userId: string, a: AssignmentInput, stored: Assigned = {}): Promise<void> {
  for (const { label, agent, pin } of DIRECTIONS) {
    const agentId = a[agent]
    if (agentId != null && !await agentExists(db, userId, agentId)) throw notFound(label)
    const version = a[pin]
    if (version == null) continue
    const pinned = agentId !== undefined ? agentId : stored[agent] ?? null
    if (pinned === null) throw badRequest(`body.${pin} pins a version of the ${label}, and the number has none: set body.${agent} too`)
    if (!await versionExists(db, userId, pinned.toLowerCase(), version)) throw notFound(`version ${version} of the ${label} ${pinned.toLowerCase()} (body.${pin})`)
  }
  if (a.customer_id != null) await requireCustomer(db, userId, a.customer_id)
  if (a.workspace_id != null) await requireWorkspace(db, userId, a.workspace_id)
}

/** The columns of an assignment. Another agent (or none) without a pin of its own clears the pin, which named a version of the one before. */
export function assignmentColumns (a: AssignmentInput, stored: Assigned = {}) {
  const pins: Partial<Record<typeof DIRECTIONS[number]['pin'], number | null>> = {}
  for (const { agent, pin } of DIRECTIONS) {
    const version = a[pin]
    if (version !== undefined) pins[pin] = version
    else if (a[agent] !== undefined && a[agent]?.toLowerCase() !== stored[agent]) pins[pin] = null
  }
  return {
    ...(a.nickname !== undefined && { nickname: a.nickname }),
    ...(a.inbound_agent_id !== undefined && { inbound_agent_id: a.inbound_agent_id }),
    ...(a.outbound_agent_id !== undefined && { outbound_agent_id: a.outbound_agent_id }),
    ...pins,
    ...(a.customer_id !== undefined && { customer_id: a.customer_id }),
    ...(a.workspace_id !== undefined && { workspace_id: a.workspace_id })
  }
}

/**
 * Refuses a number already on the installation: the caller's own is `409 number_taken`; another
 * account's answers `elsewhere`, what the route answers for a number it cannot see, so that nothing
 * tells that the number is held here.
 */
async function ensureFree (db: DB, userId: string, phoneNumber: string, elsewhere: HttpError): Promise<void> {
  const holder = await numberHolder(db, phoneNumber)
  if (holder === userId) throw numberTaken(phoneNumber)
  if (holder !== undefined) throw elsewhere
}

export interface NumberSearch { country?: string, area_code?: string, contains?: string, limit?: number }

/** Numbers the installation's carrier (PHONE_CARRIER) offers, and that carrier's name. */
export async function searchNumbers (carriers: Carriers, query: NumberSearch): Promise<{ carrier: CarrierName, numbers: AvailableNumber[] }> {
  const carrier = carriers.get(carriers.purchasing)
  const { country = 'US', area_code: areaCode, contains, limit = 20 } = query
  return { carrier: carrier.name, numbers: await atCarrier(() => carrier.search({ country: country.toUpperCase(), areaCode, contains, limit })) }
}

export interface BuyInput extends AssignmentInput { phone_number?: string, area_code?: string, country?: string }

/**
 * Buys `phone_number`, or the first number available in `area_code`. A purchase that cannot be stored is
 * given back to the carrier: a failed buy leaves nothing behind.
 */
export async function buyNumber (db: DB, carriers: Carriers, userId: string, input: BuyInput, log: FastifyBaseLogger) {
  const { phone_number: wanted, area_code: areaCode, country = 'US', ...assignment } = input
  await checkAssignment(db, userId, assignment)
  requireReachable(carriers, carriers.purchasing)
  const carrier = carriers.get(carriers.purchasing)
  let phoneNumber = wanted
  if (phoneNumber === undefined) {
    const [first] = await atCarrier(() => carrier.search({ country: country.toUpperCase(), areaCode, limit: 1 }))
    if (first === undefined) throw conflict(`no number is available in area code ${areaCode} (${country.toUpperCase()})`, 'number_unavailable')
    phoneNumber = first.phoneNumber
  }
  // Another account's number is one the carrier does not offer here, as search shows.
  const unavailable = conflict(`${phoneNumber} is not available`, 'number_unavailable')
  await ensureFree(db, userId, phoneNumber, unavailable)
  const bought = await atCarrier(() => carrier.buy(phoneNumber, carriers.webhooks))
  try {
    return await insertPhoneNumber(db, {
      id: newId(),
      user_id: userId,
      phone_number: bought.phoneNumber,
      source: 'purchased',
      carrier: carrier.name,
      carrier_number_id: bought.carrierNumberId,
      carrier_account_id: carrier.accountId,
      ...assignmentColumns(assignment)
    }, unavailable)
  } catch (err) {
    await carrier.release(bought).catch((releaseErr: unknown) => {
      log.error({ err: releaseErr, phoneNumber: bought.phoneNumber, carrierNumberId: bought.carrierNumberId }, 'a bought number could not be stored nor given back: release it at the carrier by hand')
    })
    throw err
  }
}

export interface ImportInput extends AssignmentInput {
  phone_number: string
  carrier?: CarrierName
  /** Twilio's: the account holding the number. */
  account_sid?: string
  auth_token?: string
  /** Telnyx's: the tenant's own account holding the number (its API key, and the public key its webhooks are signed with). */
  api_key?: string
  public_key?: string
}

/**
 * Adds a number the caller holds at a carrier, its calls pointed here; the auth token is kept for later carrier
 * requests. A Twilio number without credentials is one of the installation's own account: only its operator
 * (`by: 'operator'`, the CLI's `number import`) may give it to an account, never a tenant through the API or console.
 */
export async function importNumber (db: DB, carriers: Carriers, userId: string, input: ImportInput, by: 'tenant' | 'operator' = 'tenant') {
  const { phone_number: phoneNumber, carrier: chosen, account_sid: accountSid, auth_token: authToken, api_key: apiKey, public_key: publicKey, ...assignment } = input
  if ((accountSid === undefined) !== (authToken === undefined)) throw badRequest('body.account_sid and body.auth_token go together')
  const credentials = accountSid !== undefined && authToken !== undefined ? { accountSid, authToken } : undefined
  const telnyxCredentials = apiKey !== undefined || publicKey !== undefined
  // account_sid and auth_token are Twilio's, api_key and public_key Telnyx's: given without a carrier, they name it.
  const name = chosen ?? (credentials !== undefined ? 'twilio' : telnyxCredentials ? 'telnyx' : carriers.purchasing)
  if (name !== 'twilio' && credentials !== undefined) throw badRequest(`body.account_sid and body.auth_token are for carrier twilio; ${name} takes none`)
  if (name !== 'telnyx' && telnyxCredentials) throw badRequest(`body.api_key and body.public_key are for carrier telnyx; ${name} takes none`)
  // A sandbox installation is one without telephony: a fuzzer or a trial must never make it call a real carrier.
  if ((name === 'twilio' || (name === 'telnyx' && telnyxCredentials)) && carriers.purchasing === 'sandbox') {
    throw badRequest(`this installation runs the sandbox carrier (PHONE_CARRIER=sandbox): numbers cannot be imported from ${name}`, 'carrier_disabled')
  }
  if (name === 'telnyx' && telnyxCredentials) {
    if (apiKey === undefined || publicKey === undefined) throw badRequest('body.api_key and body.public_key go together', 'carrier_credentials_required')
    return await importTenantTelnyx(db, carriers, userId, { phoneNumber, apiKey, publicKey }, assignment)
  }
  if (name === 'twilio' && credentials === undefined && by !== 'operator') {
    throw badRequest("give body.account_sid and body.auth_token of the Twilio account holding the number: numbers of this installation's own Twilio account are assigned by its operator (npm run cli -- number import)", 'carrier_credentials_required')
  }
  // Numbers of the installation's Telnyx account, like those of its Twilio account, are the operator's to give.
  if (name === 'telnyx' && by !== 'operator') {
    throw badRequest("give body.api_key and body.public_key of the Telnyx account holding the number: numbers of this installation's own Telnyx account are assigned by its operator (npm run cli -- number import --carrier telnyx)", 'carrier_credentials_required')
  }
  await checkAssignment(db, userId, assignment)
  requireReachable(carriers, name)
  const missing = notFound(`${phoneNumber} in the ${name} account`)
  await ensureFree(db, userId, phoneNumber, missing)
  const carrier = carriers.get(name, credentials)
  const held = await atCarrier(() => carrier.findOwned(phoneNumber), credentials !== undefined)
  if (held === undefined) throw missing
  // Its calls come here from now on; a number that cannot be pointed here is not imported.
  await atCarrier(() => carrier.connect(held, carriers.webhooks), credentials !== undefined)
  return await insertPhoneNumber(db, {
    id: newId(),
    user_id: userId,
    phone_number: phoneNumber,
    source: 'imported',
    carrier: name,
    carrier_number_id: held.carrierNumberId,
    carrier_account_id: carrier.accountId,
    carrier_auth_token: credentials?.authToken ?? null,
    ...assignmentColumns(assignment)
  }, missing)
}

// ---- Numbers of a tenant's own Telnyx account ----

/** Where a 401 for a tenant's key sends them (the key itself is never in a message). */
const TENANT_KEY = 'the Telnyx API key given (body.api_key)'
const KEPT_KEY = 'the Telnyx API key kept with the number (replace it with PATCH /v1/phone-number/telnyx-credentials)'

/** The installation's own account signs the installation's webhooks: a tenant URL verified with its key would take them too. */
function refuseInstallationKey (carriers: Carriers, publicKey: string): void {
  if (publicKey === carriers.tenantTelnyx.installationPublicKey) {
    throw badRequest("body.public_key is this installation's own Telnyx account's: its numbers are assigned by its operator (npm run cli -- number import --carrier telnyx)", 'carrier_credentials_required')
  }
}

/**
 * Imports a number of the caller's own Telnyx account: the API key must be accepted and the account must hold the
 * number (404). Its calls go to a Call Control application made in that account (once per account and caller, kept
 * with each of its numbers) whose webhook URL names the account here, so that its webhooks are verified with the
 * account's own public key. The number is stored before it is routed, so that a racing import fails before it moves
 * it; a number Telnyx will not route is not kept, and an application made for it alone is deleted.
 */
async function importTenantTelnyx (db: DB, carriers: Carriers, userId: string, given: { phoneNumber: string, apiKey: string, publicKey: string }, assignment: AssignmentInput) {
  const { phoneNumber, apiKey, publicKey } = given
  const { apiUrl, publicBaseUrl } = carriers.tenantTelnyx
  refuseInstallationKey(carriers, publicKey)
  await checkAssignment(db, userId, assignment)
  const missing = notFound(`${phoneNumber} in the telnyx account`)
  await ensureFree(db, userId, phoneNumber, missing)
  const call = telnyxRequester({ apiUrl, apiKey }, TENANT_KEY)
  const held = await atCarrier(async () => await findTelnyxNumber(call, phoneNumber), true)
  if (held === undefined) throw missing
  const known = await findTenantTelnyxAccount(db, userId, publicKey)
  const accountId = known?.carrier_account_id ?? newId()
  const applications = telnyxApplications(call)
  const connectionId = known?.carrier_connection_id ?? await atCarrier(async () => await applications.create(`Switchboard ${accountId}`, publicBaseUrl + telnyxAccountWebhook(accountId)), true)
  // Stored before the number is routed: an import racing this one for the number fails here, before it moves the number.
  let row: PhoneNumberRow
  try {
    row = await insertPhoneNumber(db, {
      id: newId(),
      user_id: userId,
      phone_number: phoneNumber,
      source: 'imported',
      carrier: 'telnyx',
      carrier_number_id: held.carrierNumberId,
      carrier_account_id: accountId,
      carrier_auth_token: apiKey,
      carrier_public_key: publicKey,
      carrier_connection_id: connectionId,
      ...assignmentColumns(assignment)
    }, missing)
  } catch (err) {
    if (known === undefined) await applications.remove(connectionId).catch(() => undefined)
    throw err
  }
  try {
    await atCarrier(async () => { await routeTelnyxNumber(call, held.carrierNumberId, connectionId) }, true)
  } catch (err) {
    await deletePhoneNumber(db, userId, row.id)
    if (known === undefined) await applications.remove(connectionId).catch(() => undefined)
    throw err
  }
  return row
}

/**
 * A tenant's Telnyx number leaving: its calls no longer come here (its application is unset; the last number of the
 * account takes the application with it). The number stays in the tenant's account. One the account no longer holds is gone already.
 */
async function unrouteTenantTelnyx (db: DB, userId: string, row: PhoneNumberRow, account: TelnyxAccount & { id: string }): Promise<void> {
  const call = telnyxRequester(account, KEPT_KEY)
  await atCarrier(async () => {
    await routeTelnyxNumber(call, row.carrier_number_id!, null).catch((err: unknown) => {
      if (!(err instanceof CarrierError && err.status === 404)) throw err
    })
    if (await countTelnyxAccountNumbers(db, userId, account.id) <= 1) await telnyxApplications(call).remove(account.connectionId)
  }, true)
}

/**
 * Replaces the API key and/or webhook public key kept with the caller's numbers of the Telnyx account that holds
 * `phoneNumber` (after a rotation at Telnyx): a new API key must be accepted and hold the number. 404 when the
 * number is not one of the caller's imported from a Telnyx account.
 */
export async function replaceTelnyxCredentials (db: DB, carriers: Carriers, userId: string, phoneNumber: string, change: { apiKey?: string, publicKey?: string }): Promise<number> {
  const row = await findPhoneNumberByE164(db, userId, phoneNumber)
  const account = row === undefined ? undefined : tenantTelnyxAccount(carriers.tenantTelnyx.apiUrl, row)
  if (account === undefined) throw notFound(`a number imported from your Telnyx account at ${phoneNumber}`)
  if (change.publicKey !== undefined) refuseInstallationKey(carriers, change.publicKey)
  const { apiKey } = change
  if (apiKey !== undefined) {
    const held = await atCarrier(async () => await findTelnyxNumber(telnyxRequester({ apiUrl: account.apiUrl, apiKey }, TENANT_KEY), phoneNumber), true)
    if (held === undefined) throw notFound(`${phoneNumber} in the telnyx account of body.api_key`)
  }
  return await setTelnyxCredentials(db, userId, account.id, change)
}

/** Only the fields given change. */
export async function assignNumber (db: DB, userId: string, id: string, assignment: AssignmentInput) {
  const stored = await findPhoneNumber(db, userId, id)
  if (stored === undefined) throw notFound('phone number')
  await checkAssignment(db, userId, assignment, stored)
  return await updatePhoneNumber(db, userId, id, assignmentColumns(assignment, stored))
}

/** A number bought here is given back to the carrier first; if the carrier fails, the number stays (502). */
export async function releaseNumber (db: DB, carriers: Carriers, userId: string, id: string): Promise<void> {
  const row = await findPhoneNumber(db, userId, id)
  if (row === undefined) throw notFound('phone number')
  if (row.source === 'purchased' && row.carrier !== 'sip' && row.carrier_number_id !== null) {
    const carrier = carriers.get(row.carrier)
    const held = { carrierNumberId: row.carrier_number_id, phoneNumber: row.phone_number }
    await atCarrier(() => carrier.release(held))
  }
  // A SIP number's domain (Twilio) or application and credential connection (Telnyx) go with it, when they are in the
  // installation's account still (else only Switchboard forgets them).
  const domain = sipDomainOf(row)
  const sip = domain === undefined ? undefined : carriers.sipCarriers[domain.carrier]
  if (domain !== undefined && sip !== undefined && sip.accountId === row.carrier_account_id) await atCarrier(() => sip.disconnect(domain))
  const tenant = tenantTelnyxAccount(carriers.tenantTelnyx.apiUrl, row)
  if (tenant !== undefined && row.carrier_number_id !== null) await unrouteTenantTelnyx(db, userId, row, tenant)
  await deletePhoneNumber(db, userId, row.id)
}

/** The adapter acting for the account holding a number: the credentials imported with it, else the installation's. */
function carrierOf (carriers: Carriers, row: Pick<PhoneNumberRow, 'carrier' | 'carrier_account_id' | 'carrier_auth_token'>) {
  const credentials = row.carrier_account_id !== null && row.carrier_auth_token !== null ? { accountSid: row.carrier_account_id, authToken: row.carrier_auth_token } : undefined
  return carriers.get(row.carrier === 'twilio' ? 'twilio' : 'sandbox', credentials)
}

export interface Repointed { repointed: string[], failed: Array<{ phone_number: string, message: string }> }

/**
 * Points the voice URL and status callback of every Twilio number and SIP Domain, and the webhook of every Telnyx SIP application (of one account, or of the installation), at
 * this server's PUBLIC_BASE_URL again, after it changed. Each number is updated at its own account; a number
 * that fails is reported and the others go on.
 */
export async function repointNumbers (db: DB, carriers: Carriers, userId?: string): Promise<Repointed> {
  const rows = await twilioNumbers(db, userId)
  if (rows.some((row) => sipDomainOf(row)?.carrier !== 'telnyx')) requireReachable(carriers, 'twilio')
  const done: Repointed = { repointed: [], failed: [] }
  for (const row of rows) {
    try {
      // A SIP number's calls come through its SIP Domain (Twilio) or Call Control application (Telnyx): pointed here again.
      const domain = sipDomainOf(row)
      if (domain?.carrier === 'telnyx') {
        const telnyx = carriers.sipCarriers.telnyx
        if (telnyx === undefined) throw new HttpError(502, 'carrier_error', 'its Call Control application is at Telnyx, and this installation has no Telnyx account')
        await atCarrier(() => telnyx.repoint(domain, row.id))
        done.repointed.push(row.phone_number)
        continue
      }
      const sip = carriers.sipCarriers.twilio
      if (domain !== undefined && (sip === undefined || sip.accountId !== row.carrier_account_id)) throw new HttpError(502, 'carrier_error', `its SIP Domain is in Twilio account ${row.carrier_account_id ?? '?'}, not this installation's`)
      if (domain !== undefined) await atCarrier(() => sip!.repoint(domain.domainSid, carriers.webhooks))
      else await atCarrier(() => carrierOf(carriers, row).connect({ carrierNumberId: row.carrier_number_id!, phoneNumber: row.phone_number }, carriers.webhooks))
      done.repointed.push(row.phone_number)
    } catch (err) {
      if (!(err instanceof HttpError)) throw err
      done.failed.push({ phone_number: row.phone_number, message: err.message })
    }
  }
  return done
}

/**
 * Replaces the auth token kept with the caller's numbers imported from a Twilio account, once Twilio accepts it
 * (after the token was rotated at Twilio): the numbers stay as they are. 404 when the caller imported none from it.
 */
export async function replaceCarrierToken (db: DB, carriers: Carriers, userId: string, accountSid: string, authToken: string): Promise<number> {
  const [first] = await importedFrom(db, userId, accountSid)
  if (first === undefined) throw notFound(`numbers imported from Twilio account ${accountSid}`)
  const carrier = carriers.get('twilio', { accountSid, authToken })
  await atCarrier(() => carrier.findOwned(first.phone_number), true)
  return await setCarrierToken(db, userId, accountSid, authToken)
}

export interface SipConnectInput extends AssignmentInput {
  phone_number: string
  termination_uri: string
  sip_trunk_auth_username?: string
  sip_trunk_auth_password?: string
}

/** The carrier resources of a connected SIP number (its Twilio SIP Domain, or its Telnyx application), if it has them. */
function sipDomainOf (row: Pick<PhoneNumberRow, 'carrier' | 'sip_carrier' | 'sip_domain_sid' | 'sip_credential_list_sid' | 'sip_subdomain'>):
  (SipDomain & { carrier: 'twilio' }) | (TelnyxSipDomain & { carrier: 'telnyx' }) | undefined {
  if (row.carrier !== 'sip' || row.sip_domain_sid === null || row.sip_credential_list_sid === null) return undefined
  const domain = { domainSid: row.sip_domain_sid, credentialListSid: row.sip_credential_list_sid }
  if (row.sip_carrier === 'telnyx') return row.sip_subdomain === null ? undefined : { ...domain, subdomain: row.sip_subdomain, carrier: 'telnyx' }
  return { ...domain, carrier: 'twilio' }
}

/**
 * connect-to-sip: a number of the caller's account gets the trunk settings (200: `created` false); a number not on
 * the installation is added as a SIP number (201). A SIP number's calls are carried by the installation's SIP carrier
 * (carriers.sip, SIP_CARRIER): a Twilio SIP Domain, or a Telnyx Call Control application with a SIP subdomain and a
 * credential connection, takes the PBX's calls with the trunk's credentials, and calls out go to the termination URI
 * with them (docs/sip.md). The carrier is configured first: a trunk it refuses stores nothing, and what was made for
 * a number that then cannot be stored is deleted again. A number connected at the other carrier (SIP_CARRIER changed)
 * moves: set up anew here, then deleted there.
 */
export async function connectSip (db: DB, carriers: Carriers, userId: string, input: SipConnectInput) {
  const { phone_number: phoneNumber, termination_uri: terminationUri, sip_trunk_auth_username: username, sip_trunk_auth_password: password, ...assignment } = input
  const trunk = { sip_termination_uri: terminationUri, sip_username: username ?? null, sip_password: password ?? null }
  const existing = await findPhoneNumberByE164(db, userId, phoneNumber)
  await checkAssignment(db, userId, assignment, existing)
  // Another account's number: as for any record of another account.
  if (existing === undefined && await numberHolder(db, phoneNumber) !== undefined) throw notFound('phone number')
  // A number bought or imported here keeps its carrier, which carries its calls: only its trunk settings are kept.
  const sip = existing === undefined || existing.carrier === 'sip' ? carriers.sip : undefined
  if (sip === undefined) {
    if (existing !== undefined) return { created: false, row: await updatePhoneNumber(db, userId, existing.id, { ...trunk, ...assignmentColumns(assignment, existing) }) }
    return { created: true, row: await insertPhoneNumber(db, { id: newId(), user_id: userId, phone_number: phoneNumber, source: 'sip', carrier: 'sip', ...trunk, ...assignmentColumns(assignment) }, notFound('phone number')) }
  }
  const carrierName = sip.name === 'telnyx' ? 'Telnyx' : 'Twilio'
  if (username === undefined || password === undefined) {
    throw badRequest(`give body.sip_trunk_auth_username and body.sip_trunk_auth_password: the PBX authenticates its calls to ${carrierName} with them, and calls to the PBX carry them`, 'sip_credentials_required')
  }
  const weak = sip.name === 'telnyx' ? telnyxSipCredentialProblem({ username, password }) : sipCredentialProblem({ username, password })
  if (weak !== undefined) throw badRequest(weak)
  if (sip.name === 'twilio') requireReachable(carriers, 'twilio')
  const id = existing?.id ?? newId()
  const stored = existing === undefined ? undefined : sipDomainOf(existing)
  // A number whose resources are at the other carrier, or in another Twilio account (the installation's changed), gets new ones here.
  const reuse = stored !== undefined && stored.carrier === sip.name && existing?.carrier_account_id === sip.accountId ? stored : undefined
  const domain: SipDomain & { subdomain?: string } = await atCarrier(async () => sip.name === 'telnyx'
    ? await sip.connect(id, { username, password }, reuse?.carrier === 'telnyx' ? reuse : undefined)
    : await sip.connect(id, { username, password }, carriers.webhooks, reuse))
  const columns = {
    ...trunk,
    carrier_account_id: sip.accountId,
    sip_carrier: sip.name,
    sip_domain_sid: domain.domainSid,
    sip_credential_list_sid: domain.credentialListSid,
    sip_subdomain: domain.subdomain ?? null
  }
  if (existing !== undefined) {
    const row = await updatePhoneNumber(db, userId, existing.id, { ...columns, ...assignmentColumns(assignment, existing) })
    // Moved: what the other carrier (or account) held goes once the new one takes the calls.
    if (stored !== undefined && reuse === undefined) {
      const before = carriers.sipCarriers[stored.carrier]
      if (before !== undefined && before.accountId === existing.carrier_account_id) await before.disconnect(stored).catch(() => undefined)
    }
    return { created: false, row }
  }
  try {
    return { created: true, row: await insertPhoneNumber(db, { id, user_id: userId, phone_number: phoneNumber, source: 'sip', carrier: 'sip', ...columns, ...assignmentColumns(assignment) }, notFound('phone number')) }
  } catch (err) {
    await sip.disconnect(domain).catch(() => undefined)
    throw err
  }
}
