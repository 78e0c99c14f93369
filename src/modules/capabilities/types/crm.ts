import { Type, type Static } from 'typebox'
import type { CallRow } from '../../../db/schema.ts'
import { EMAIL_PATTERN } from '../../../http/schemas.ts'
import { contactKeyOf, phoneNumber } from '../../contacts/contacts.ts'
import { connectionOf, IntegrationError, type Connection } from '../../integrations/client.ts'
import { describedAs, type LiveTool, type StartEvent, type ToolContext } from '../live.ts'
import { requireConnection } from '../booking/settings.ts'
import { defineCapability, type Typed } from '../registry.ts'
import { Description, Name } from '../../agents/settings-parts.ts'

// The CRM tool: HubSpot (CRM v3), connected with a private app's access token or OAuth 2.0 (providers/crm.ts).
// - lookup_contact: at the start of the call the caller's number (or e-mail) is searched among the contacts' `phone`
//   and `mobilephone`; a known caller's name goes into the prompt so the agent greets them by it. The search is
//   bounded (LOOKUP_MS): a slow or failing HubSpot means no greeting, never a call that does not start. The model
//   may also look someone up by e-mail or phone (`<name>_lookup`).
// - create_contact / update_contact: `<name>_save_contact` creates the caller's contact or updates the one found
//   (at the start of the call, by e-mail, or by number); notes become a note on the contact.
// - log_call: after the call, one post-call delivery logs a call engagement (summary, duration, direction, a link
//   to the call in the console) on the caller's contact (the one saved during the call, else found by number or
//   e-mail, else created), with the deliveries' retries.
// Calls rather than notes: a call engagement is what HubSpot shows as a call on the contact's timeline, with its
// duration, direction and status as fields of their own.

const Operation = Type.Union([Type.Literal('lookup_contact'), Type.Literal('create_contact'), Type.Literal('update_contact'), Type.Literal('log_call')])

const CrmSettings = Type.Object({
  name: Name,
  description: Description,
  operations: Type.Array(Operation, { minItems: 1, uniqueItems: true, description: 'what the agent does in HubSpot: greet a known caller and look people up, create or update the caller\'s contact, log the call afterwards' })
})

type CrmSettings = Static<typeof CrmSettings>
type Operation = CrmSettings['operations'][number]

/** How long the call's start waits for the caller's lookup (times CALL_TIME_SCALE): a greeting is not worth more. */
const LOOKUP_MS = 3000
/** Contact properties read and written. */
const PROPERTIES = ['firstname', 'lastname', 'email', 'phone', 'mobilephone', 'company'] as const
/** HubSpot's association type ids (HUBSPOT_DEFINED): a call to a contact, a note to a contact. */
const CALL_TO_CONTACT = 194
const NOTE_TO_CONTACT = 202
/** The most contacts a search reads: more than one is already ambiguous. */
const SEARCH_LIMIT = 5

const EMAIL = new RegExp(EMAIL_PATTERN)

interface Contact { id: string, firstname: string | null, lastname: string | null, email: string | null, phone: string | null, mobilephone: string | null, company: string | null }

/**
 * The forms a number may be stored in, for an exact search: E.164 as given, and for North American numbers (+1) the
 * ten-digit national number, the form people most often type there. (HubSpot's search matches the stored text.)
 */
function phoneForms (number: string): string[] {
  return /^\+1\d{10}$/.test(number) ? [number, number.slice(2)] : [number]
}

const fullName = (c: Contact) => [c.firstname, c.lastname].filter((part) => part !== null && part !== '').join(' ')

/** A contact as HubSpot answers it; its values go into the prompt, so each is one short line. */
function contactOf (result: { id: unknown, properties?: Record<string, unknown> }): Contact {
  const p = result.properties ?? {}
  const text = (name: string) => {
    const value = p[name]
    const line = typeof value === 'string' ? value.replace(/\s+/g, ' ').trim().slice(0, 200) : ''
    return line === '' ? null : line
  }
  return { id: String(result.id), firstname: text('firstname'), lastname: text('lastname'), email: text('email'), phone: text('phone'), mobilephone: text('mobilephone'), company: text('company') }
}

/** Contacts whose `phone` or `mobilephone` is the number (in any of its forms), or whose e-mail is the address. */
async function search (conn: Connection, who: { phone?: string, email?: string }, signal?: AbortSignal): Promise<{ total: number, contacts: Contact[] }> {
  const groups: Array<{ filters: Array<{ propertyName: string, operator: 'EQ', value: string }> }> = []
  if (who.phone !== undefined) {
    for (const form of phoneForms(who.phone)) {
      for (const propertyName of ['phone', 'mobilephone']) groups.push({ filters: [{ propertyName, operator: 'EQ', value: form }] })
    }
  }
  if (who.email !== undefined) groups.push({ filters: [{ propertyName: 'email', operator: 'EQ', value: who.email }] })
  const answer = await conn.request({
    method: 'POST',
    path: '/crm/v3/objects/contacts/search',
    body: { filterGroups: groups, properties: PROPERTIES, sorts: [{ propertyName: 'lastmodifieddate', direction: 'DESCENDING' }], limit: SEARCH_LIMIT }
  }, signal)
  const results: unknown = answer.body?.results
  return { total: Number(answer.body?.total ?? 0), contacts: Array.isArray(results) ? results.map(contactOf) : [] }
}

/** What the prompt is told of the caller: their name when exactly one person holds the number. */
function greeting (found: { total: number, contacts: Contact[] }): string | undefined {
  const named = found.contacts.filter((c) => fullName(c) !== '')
  if (named.length === 0) return undefined
  const names = [...new Set(named.map(fullName))]
  if (names.length > 1) {
    return `The caller's number belongs to several HubSpot contacts (${names.join(', ')}): ask who is calling before using a name.`
  }
  const contact = named[0]
  const company = contact.company === null ? '' : ` of ${contact.company}`
  return `The caller is ${fullName(contact)}${company}, a known customer (HubSpot contact ${contact.id}); greet them by name.`
}

/** A failure in words the model can say something sensible about. */
function failure (err: unknown): Error {
  if (!(err instanceof IntegrationError)) return err instanceof Error ? err : new Error(String(err))
  switch (err.reason) {
    case 'not_connected': return new Error('HubSpot is not connected to this account; the contact could not be reached.')
    case 'revoked': return new Error('the HubSpot connection has been revoked; the contact could not be reached.')
    case 'rate_limited': return new Error('HubSpot is busy right now; try once more in a moment or carry on without it.')
    case 'unavailable': return new Error('HubSpot could not be reached right now.')
    default: return new Error(`HubSpot refused the request${hubspotMessage(err.body)}.`)
  }
}

/** HubSpot's own error message ({ status: 'error', message, correlationId, category }), for the model or the log. */
function hubspotMessage (body: unknown): string {
  const message = typeof body === 'object' && body !== null && 'message' in body ? body.message : undefined
  return typeof message === 'string' ? `: ${message.slice(0, 300)}` : ''
}

/** The existing contact's id HubSpot names when a create (or an e-mail change) meets a taken address (409 CONFLICT). */
function existingId (err: unknown): string | undefined {
  if (!(err instanceof IntegrationError) || err.status !== 409) return undefined
  return /Existing ID: (\d+)/.exec(hubspotMessage(err.body))?.[1]
}

const text = (value: unknown, max: number) => typeof value === 'string' && value.trim() !== '' ? value.trim().slice(0, max) : undefined

/** What the model gives for a contact, checked; a phone or e-mail that is none is refused in words. */
function contactInput (args: Record<string, unknown>): Record<string, string> {
  const properties: Record<string, string> = {}
  for (const name of ['firstname', 'lastname', 'company'] as const) {
    const value = text(args[name], 200)
    if (value !== undefined) properties[name] = value
  }
  const email = text(args.email, 254)?.toLowerCase()
  if (email !== undefined) {
    if (!EMAIL.test(email)) throw new Error(`"${email}" is not an e-mail address; ask the caller to spell it.`)
    properties.email = email
  }
  const phone = text(args.phone, 40)
  if (phone !== undefined) {
    const number = phoneNumber(phone)
    if (number === undefined) throw new Error(`"${phone}" is not a phone number in international form (such as +14155550100).`)
    properties.phone = number
  }
  return properties
}

const saidOf = (c: Contact) => {
  const name = fullName(c)
  const parts = [name === '' ? undefined : name, c.company, c.email, c.phone ?? c.mobilephone].filter((p) => p !== null && p !== undefined)
  return `HubSpot contact ${c.id}${parts.length === 0 ? '' : ` (${parts.join(', ')})`}`
}

const NAME_PARAMETERS = {
  firstname: { type: 'string', description: 'first name' },
  lastname: { type: 'string', description: 'last name' },
  email: { type: 'string', description: 'e-mail address' },
  phone: { type: 'string', description: 'phone number in international form, such as +14155550100' },
  company: { type: 'string', description: 'company' }
}

/**
 * The live functions of one CRM tool for one call, sharing the caller's contact: the one found at the start, then the
 * one saved (one save at a time). A lookup does not make its find the caller's: the model may look up someone else.
 */
function crmTools (row: Typed<typeof CrmSettings>, ctx: ToolContext, ops: Set<Operation>, found: Contact | undefined): LiveTool[] {
  let current = found
  let connection: Promise<Connection> | undefined
  const conn = async () => await (connection ??= connectionOf(ctx, ctx.userId, 'crm').catch((err: unknown) => { connection = undefined; throw err }))
  let queue: Promise<unknown> = Promise.resolve()
  const serial = async <T>(work: () => Promise<T>): Promise<T> => {
    const next = queue.then(work, work)
    queue = next.catch(() => undefined)
    return await next
  }
  const tools: LiveTool[] = []
  const name = row.settings.name

  if (ops.has('lookup_contact')) {
    tools.push({
      type: 'crm',
      spec: {
        name: `${name}_lookup`,
        description: describedAs(row.settings, 'Look a person up in the CRM (HubSpot) by e-mail address or phone number.'),
        parameters: { type: 'object', properties: { email: NAME_PARAMETERS.email, phone: NAME_PARAMETERS.phone } }
      },
      run: async (args, runCtx) => {
        const email = text(args.email, 254)?.toLowerCase()
        const phoneText = text(args.phone, 40)
        const phone = phoneNumber(phoneText)
        if (phoneText !== undefined && phone === undefined) throw new Error(`"${phoneText}" is not a phone number in international form (such as +14155550100).`)
        if (email === undefined && phone === undefined) throw new Error('give an e-mail address or a phone number to look up.')
        let result
        try {
          result = await search(await conn(), { email, phone }, runCtx.signal)
        } catch (err) {
          throw failure(err)
        }
        if (result.contacts.length === 0) return { output: 'No contact in HubSpot has that e-mail address or number.' }
        const more = result.total > result.contacts.length ? ` (${result.total} in all)` : ''
        return { output: `Found ${result.contacts.map(saidOf).join('; ')}${more}.` }
      }
    })
  }

  const creates = ops.has('create_contact')
  const updates = ops.has('update_contact')
  if (creates || updates) {
    tools.push({
      type: 'crm',
      spec: {
        name: `${name}_save_contact`,
        description: describedAs(row.settings, creates && updates
          ? 'Save the caller in the CRM (HubSpot): updates their contact when they are known, else creates it. Give what the caller said.'
          : creates ? 'Create the caller\'s contact in the CRM (HubSpot) with what they said.' : 'Update the caller\'s contact in the CRM (HubSpot) with what they said.'),
        parameters: { type: 'object', properties: { ...NAME_PARAMETERS, notes: { type: 'string', description: 'anything else worth keeping, added as a note on the contact' } } }
      },
      run: async (args, runCtx) => await serial(async () => {
        const properties = contactInput(args)
        const notes = text(args.notes, 10_000)
        if (Object.keys(properties).length === 0 && notes === undefined) throw new Error('nothing to save: give at least a name, an e-mail address, a phone number, a company or notes.')
        try {
          const api = await conn()
          const caller = phoneNumber(ctx.customer.phone)
          let target = current
          if (target === undefined && (properties.email !== undefined || caller !== undefined)) {
            // The contact with the address given, else one with the caller's number that holds no other address
            // (a number may be a household's or a switchboard's: another person's contact is not the caller's).
            const { contacts } = await search(api, { email: properties.email, phone: caller }, runCtx.signal)
            target = contacts.find((c) => properties.email !== undefined && c.email?.toLowerCase() === properties.email) ??
              contacts.find((c) => properties.email === undefined || c.email === null)
          }
          let saved: Contact
          let did: string
          if (target !== undefined) {
            if (!updates) return { output: `The caller is already in HubSpot as ${saidOf(target)}; it was not changed.` }
            saved = await update(api, target.id, properties, runCtx.signal)
            did = 'updated'
          } else {
            if (!creates) return { output: 'The caller is not in HubSpot yet, and this tool may only update contacts: nothing was saved.' }
            // A new contact keeps the caller's number, so that the call log after the call finds it.
            const withNumber = properties.phone === undefined && caller !== undefined ? { ...properties, phone: caller } : properties
            try {
              saved = contactOf((await api.request({ method: 'POST', path: '/crm/v3/objects/contacts', body: { properties: withNumber } }, runCtx.signal)).body)
              did = 'created'
            } catch (err) {
              // The e-mail address is another contact's already (the search index lags behind creates): that one is the caller.
              const id = existingId(err)
              if (id === undefined || !updates) throw err
              saved = await update(api, id, properties, runCtx.signal)
              did = 'updated'
            }
          }
          current = saved
          if (notes !== undefined) await note(api, saved.id, notes, runCtx.signal)
          return { output: `Saved: ${saidOf(saved)}, ${did}${notes === undefined ? '' : ', with a note'}.` }
        } catch (err) {
          throw failure(err)
        }
      })
    })
  }
  return tools
}

async function update (api: Connection, id: string, properties: Record<string, string>, signal: AbortSignal): Promise<Contact> {
  return contactOf((await api.request({ method: 'PATCH', path: `/crm/v3/objects/contacts/${encodeURIComponent(id)}`, body: { properties } }, signal)).body)
}

async function note (api: Connection, contactId: string, body: string, signal: AbortSignal): Promise<void> {
  await api.request({
    method: 'POST',
    path: '/crm/v3/objects/notes',
    body: { properties: { hs_timestamp: new Date().toISOString(), hs_note_body: body }, associations: [association(contactId, NOTE_TO_CONTACT)] }
  }, signal)
}

const association = (contactId: string, typeId: number) => ({ to: { id: contactId }, types: [{ associationCategory: 'HUBSPOT_DEFINED', associationTypeId: typeId }] })

/** The caller's contact at the start of the call, within LOOKUP_MS; undefined when unknown, slow or failing. */
async function lookupCaller (ctx: ToolContext): Promise<{ found?: { total: number, contacts: Contact[] }, event: StartEvent } | undefined> {
  const phone = phoneNumber(ctx.customer.phone)
  const email = ctx.customer.email === null || !EMAIL.test(ctx.customer.email) ? undefined : ctx.customer.email.toLowerCase()
  if (phone === undefined && email === undefined) return undefined
  const who = phone !== undefined ? { phone } : { email }
  const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(Math.max(1, Math.round(LOOKUP_MS * ctx.config.callTimeScale)))])
  const event = { name: 'caller_lookup', arguments: who }
  try {
    const found = await search(await connectionOf(ctx, ctx.userId, 'crm'), who, signal)
    const names = found.contacts.map((c) => `${fullName(c) === '' ? 'no name' : fullName(c)} (HubSpot contact ${c.id})`)
    return { found, event: { ...event, output: names.length === 0 ? 'not found in HubSpot' : `found: ${names.join(', ')}` } }
  } catch (err) {
    ctx.log.warn({ err, callId: ctx.callId }, 'crm: the caller could not be looked up in HubSpot; the call starts without a greeting')
    return { event: { ...event, error: err instanceof Error ? err.message : String(err) } }
  }
}

// After the call.

/** What the call log delivery stores (the delivery's body): all it needs, so that a retry sends the same. */
interface CallLog {
  call_id: string
  timestamp: string
  title: string
  summary: string
  duration_ms: number
  direction: 'INBOUND' | 'OUTBOUND'
  from_number: string | null
  to_number: string | null
  /** The caller, to find or create their contact. */
  phone: string | null
  email: string | null
  /** The contact saved during the call (the save function's answer names it), if any. */
  contact_id: string | null
}

/** The HubSpot contact saved during the call (the last one), from the save function's answers in the transcript. */
function contactOfTranscript (call: CallRow): string | null {
  for (const item of [...call.transcription].reverse()) {
    if (item.speaker !== 'tool' || item.tool?.type !== 'crm' || typeof item.tool.output !== 'string') continue
    const id = /^(?:Saved:|The caller is already in HubSpot as) HubSpot contact (\d+)/.exec(item.tool.output)
    if (id !== null) return id[1]
  }
  return null
}

function callLog (call: CallRow, variables: Record<string, unknown>): CallLog {
  // HubSpot's direction is the business's view: a web call is the customer reaching the agent, as an inbound call is.
  const inbound = call.call_type === 'web' || call.direction === 'inbound'
  // The call's other party as the contacts module names it (a web call's customer_phone from its dynamic_context too).
  const key = contactKeyOf(call)
  const phone = key !== undefined && 'phone_number' in key ? key.phone_number : null
  const email = typeof variables.customer_email === 'string' && EMAIL.test(variables.customer_email) ? variables.customer_email.toLowerCase() : null
  return {
    call_id: call.id,
    timestamp: call.start_timestamp.toISOString(),
    title: call.call_type === 'web' ? 'Web call with the voice agent' : `${inbound ? 'Inbound' : 'Outbound'} call with the voice agent`,
    summary: typeof variables.call_summary === 'string' && variables.call_summary !== '' ? variables.call_summary : 'No summary.',
    duration_ms: call.duration_ms ?? 0,
    direction: inbound ? 'INBOUND' : 'OUTBOUND',
    from_number: call.call_from,
    to_number: call.call_to,
    phone,
    email,
    contact_id: contactOfTranscript(call)
  }
}

/**
 * Logs the call on the caller's contact (found, else created); answers the log's preview text. The link to the call
 * in the console is made at each attempt, from the installation's PUBLIC_BASE_URL as it is then.
 */
async function logCall (api: Connection, log: CallLog, publicBaseUrl: string): Promise<string> {
  let contactId = log.contact_id
  if (contactId === null && (log.phone !== null || log.email !== null)) {
    const found = await search(api, { phone: log.phone ?? undefined, email: log.email ?? undefined })
    contactId = found.contacts[0]?.id ?? null
    if (contactId === null) {
      const properties = { ...(log.phone === null ? {} : { phone: log.phone }), ...(log.email === null ? {} : { email: log.email }) }
      try {
        contactId = contactOf((await api.request({ method: 'POST', path: '/crm/v3/objects/contacts', body: { properties } })).body).id
      } catch (err) {
        contactId = existingId(err) ?? null
        if (contactId === null) throw err
      }
    }
  }
  const properties = {
    hs_timestamp: log.timestamp,
    hs_call_title: log.title,
    hs_call_body: `${log.summary}\n\nTranscript and recording: ${publicBaseUrl.replace(/\/+$/, '')}/calls/${log.call_id}`,
    hs_call_duration: String(log.duration_ms),
    hs_call_direction: log.direction,
    hs_call_status: 'COMPLETED',
    ...(log.from_number === null ? {} : { hs_call_from_number: log.from_number }),
    ...(log.to_number === null ? {} : { hs_call_to_number: log.to_number })
  }
  const created = await api.request({
    method: 'POST',
    path: '/crm/v3/objects/calls',
    body: { properties, associations: contactId === null ? [] : [association(contactId, CALL_TO_CONTACT)] }
  })
  return `HubSpot call ${String(created.body?.id)} logged${contactId === null ? ' (no contact: the caller left no number or e-mail address)' : ` on contact ${contactId}`}.`
}

function isCallLog (payload: unknown): payload is CallLog {
  return typeof payload === 'object' && payload !== null && typeof (payload as CallLog).call_id === 'string' && typeof (payload as CallLog).timestamp === 'string'
}

export const crm = defineCapability({
  type: 'crm',
  label: 'CRM (HubSpot)',
  hint: 'Greets known callers by name, saves their contact and logs the call in HubSpot.',
  schema: CrmSettings,
  defaults: {},
  fieldLabels: { operations: 'Operations' },
  fieldHints: {
    operations: 'lookup_contact: greet a known caller by name, and look people up; create_contact, update_contact: save the caller\'s contact; log_call: log the call on the contact afterwards.'
  },
  check: requireConnection('crm'),
  live: async (row, ctx) => {
    const ops = new Set(row.settings.operations)
    // The caller looked up as the call starts (a tool item of the transcript), so that a known one is greeted by name.
    const lookup = ops.has('lookup_contact') ? await lookupCaller(ctx) : undefined
    const found = lookup?.found
    const instructions = found === undefined ? undefined : greeting(found)
    const known = found !== undefined && found.contacts.length === 1 ? found.contacts[0] : undefined
    return { tools: crmTools(row, ctx, ops, known), ...(instructions === undefined ? {} : { instructions }), ...(lookup === undefined ? {} : { events: [lookup.event] }) }
  },
  after: {
    channel: 'integration',
    // Only a tool that logs calls has a delivery.
    payload: (settings, call, variables) => settings.operations.includes('log_call') ? callLog(call, variables) : undefined,
    deliver: async (ctx, settings, payload) => {
      if (!settings.operations.includes('log_call')) return 'Not logged: the tool no longer logs calls.'
      if (!isCallLog(payload)) throw new Error('the stored call log is not one this version can send')
      return await logCall(await connectionOf(ctx, ctx.userId, 'crm'), payload, ctx.config.publicBaseUrl)
    }
  }
})
