import { Type } from 'typebox'
import { badRequest, HttpError } from '../../../http/errors.ts'
import { E164, E164_PATTERN, Email, EMAIL_PATTERN } from '../../../http/schemas.ts'
import { renderText, VARIABLE } from '../../../templates.ts'
import { CALL_VARIABLES } from '../../agents/data-retrieval.ts'
import { senderProblem, sendMessage, type Channel } from '../../messaging/send.ts'
import { describedAs, type Customer, type LiveTool, type ToolContext } from '../live.ts'
import { defineCapability, type CheckContext, type OutboxMessage } from '../registry.ts'
import { DeliveryMembers, Description, Name, When } from '../../agents/settings-parts.ts'

// E-mail, SMS and chat-app (WhatsApp) messages: after the call, one post-call delivery per recipient (the
// delivery engine's schedule, attempts log and resend); during the call, a function the agent uses ("I'll text
// you the link"), sent once through the messaging module, which logs it with the call and applies the limits.

interface MessageSettings {
  name: string
  description?: string
  when?: 'after_call' | 'during_call' | 'both'
  subject?: string
  message: string
  send_to_customer?: boolean
  direct_recipients?: string[]
  from_number?: string
}

const messageMembers = (maxLength: number, channel: string) => ({
  name: Name,
  description: Description,
  when: When,
  ...DeliveryMembers,
  message: Type.String({ minLength: 1, maxLength, description: `text of the ${channel}; {{variables}} are filled in (during the call, those that are no call variable are asked of the agent)` })
})

const EmailSettings = Type.Object({
  ...messageMembers(20000, 'e-mail'),
  subject: Type.String({ minLength: 1, maxLength: 200 }),
  send_to_customer: Type.Optional(Type.Boolean({ description: 'also send to the other party of the call, at the e-mail address it gave (default false)' })),
  direct_recipients: Type.Optional(Type.Array(Email, { maxItems: 50, description: 'fixed recipients (default none)' }))
})

const phoneMembers = (maxLength: number, channel: string) => ({
  ...messageMembers(maxLength, channel),
  send_to_customer: Type.Optional(Type.Boolean({ description: 'send to the other party of the call (default true)' })),
  direct_recipients: Type.Optional(Type.Array(E164, { maxItems: 20, description: 'further fixed recipients (default none)' }))
})

const SmsSettings = Type.Object({
  ...phoneMembers(1600, 'SMS'),
  from_number: Type.Optional({ ...E164, description: 'the number of yours it is sent from (default: the call\'s own number when it is yours, else your first number)' })
})

const ChatSettings = Type.Object(phoneMembers(1600, 'WhatsApp message'))

/** The {{variables}} of the texts that no call variable fills: during the call the agent is asked for them. */
function askedVariables (settings: MessageSettings): string[] {
  const names = [settings.subject ?? '', settings.message].flatMap((text) => [...text.matchAll(VARIABLE)].map((m) => m[1]))
  return [...new Set(names)].filter((name) => !CALL_VARIABLES.has(name))
}

/** The recipients of a message: the other party (when asked for and known) and the fixed ones, without repeats. */
function recipients (settings: MessageSettings, customer: string | null, toCustomerByDefault: boolean): string[] {
  const toCustomer = settings.send_to_customer ?? toCustomerByDefault
  return [...new Set([...(toCustomer && customer !== null ? [customer] : []), ...settings.direct_recipients ?? []])]
}

interface Kind {
  channel: Exclude<Channel, 'http'>
  noun: string
  toCustomerByDefault: boolean
  customerOf: (customer: Customer) => string | null
  /** The argument that names the other party when the call does not know it (a web call). */
  address: { name: string, description: string, valid: (value: string) => boolean }
}

const isNumber = (value: string) => new RegExp(E164_PATTERN).test(value)
const isEmail = (value: string) => value.length <= 254 && new RegExp(EMAIL_PATTERN).test(value)

function liveMessage (kind: Kind, row: { id: string, type: string, settings: MessageSettings }, ctx: ToolContext): LiveTool {
  const { settings } = row
  const asked = askedVariables(settings)
  const known = kind.customerOf(ctx.customer)
  const askAddress = (settings.send_to_customer ?? kind.toCustomerByDefault) && known === null
  const properties: Record<string, unknown> = Object.fromEntries(asked.map((name) => [name, { type: 'string', description: `the value of {{${name}}} in the ${kind.noun}` }]))
  if (askAddress) properties[kind.address.name] = { type: 'string', description: kind.address.description }
  return {
    type: row.type,
    spec: {
      name: settings.name,
      description: describedAs(settings, `Sends the ${kind.noun} "${settings.name}"${askAddress ? ' to the caller' : ''}.`),
      parameters: { type: 'object', properties, required: asked }
    },
    run: async (args, runCtx) => {
      const missing = asked.filter((name) => typeof args[name] !== 'string' || args[name] === '')
      if (missing.length > 0) throw new Error(`${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} required`)
      let customer = known
      if (askAddress) {
        const given = typeof args[kind.address.name] === 'string' ? String(args[kind.address.name]).trim() : ''
        if (given !== '' && !kind.address.valid(given)) throw new Error(`${kind.address.name} is not valid: ${kind.address.description}`)
        customer = given === '' ? null : given
      }
      const to = recipients(settings, customer, kind.toCustomerByDefault)
      if (to.length === 0) throw new Error(`there is nobody to send the ${kind.noun} to: ask the caller for their ${kind.address.name.replace('_', ' ')} first`)
      const variables = { ...Object.fromEntries(asked.map((name) => [name, args[name]])), ...runCtx.variables() }
      const text = renderText(settings.message, variables)
      const subject = settings.subject === undefined ? undefined : renderText(settings.subject, variables)
      const results = []
      for (const recipient of to) {
        const result = await sendMessage({ db: runCtx.db, config: runCtx.config, log: runCtx.log, mailer: runCtx.mailer }, {
          userId: runCtx.userId, callId: runCtx.callId, origin: 'live', actionId: row.id, channel: kind.channel, to: recipient, from: settings.from_number, subject, text
        })
        results.push({ recipient, ...result })
      }
      const done = results.filter((r) => r.status === 'sent' || r.status === 'recorded')
      const failed = results.filter((r) => r.status !== 'sent' && r.status !== 'recorded')
      if (done.length === 0) throw new Error(`the ${kind.noun} could not be sent: ${failed.map((r) => `${r.recipient}: ${r.error ?? r.status}`).join('; ')}`)
      return {
        output: `The ${kind.noun} was sent to ${done.map((r) => r.recipient).join(', ')}.` +
          (failed.length === 0 ? '' : ` It could not be sent to ${failed.map((r) => `${r.recipient} (${r.error ?? r.status})`).join(', ')}.`)
      }
    }
  }
}

/** The messages of one call after it: one per recipient. */
function outbox (kind: Kind, settings: MessageSettings, variables: Record<string, unknown>, customer: Customer): OutboxMessage[] {
  const text = renderText(settings.message, variables)
  const subject = settings.subject === undefined ? undefined : renderText(settings.subject, variables)
  return recipients(settings, kind.customerOf(customer), kind.toCustomerByDefault)
    .map((to) => ({ to, text, ...(subject === undefined ? {} : { subject }), ...(settings.from_number === undefined ? {} : { from: settings.from_number }) }))
}

/** Refuses a message nobody would receive, and an SMS sender the account does not own. */
function messageCheck (kind: Kind) {
  return async ({ db, agent }: CheckContext, settings: MessageSettings, active: boolean) => {
    const toCustomer = settings.send_to_customer ?? kind.toCustomerByDefault
    if (!toCustomer && (settings.direct_recipients ?? []).length === 0) {
      throw badRequest(`body.settings needs a recipient: send_to_customer true or at least one direct_recipients ${kind.channel === 'email' ? 'address' : 'number'}`)
    }
    // A sender the account names must be its own; without one, the sender is chosen when the message goes (and a
    // missing one is a failed message in the log), so that an action may be set up before a number is bought.
    if (kind.channel === 'email' || !active || settings.from_number === undefined) return
    const problem = await senderProblem(db, agent.user_id, kind.channel, settings.from_number)
    if (problem !== undefined) throw new HttpError(409, 'sender_not_available', problem)
  }
}

const EMAIL: Kind = {
  channel: 'email',
  noun: 'e-mail',
  toCustomerByDefault: false,
  customerOf: (customer) => customer.email,
  address: { name: 'email', description: 'the caller\'s e-mail address, as they spelled it', valid: isEmail }
}

const SMS: Kind = {
  channel: 'sms',
  noun: 'SMS',
  toCustomerByDefault: true,
  customerOf: (customer) => customer.phone,
  address: { name: 'phone_number', description: 'the caller\'s mobile number in international format, such as +14155550100', valid: isNumber }
}

const CHAT: Kind = { ...SMS, channel: 'chat', noun: 'WhatsApp message' }

const RECIPIENT_LABELS = { send_to_customer: 'Send to the other party of the call', direct_recipients: 'Further recipients' }

export const sendEmail = defineCapability({
  type: 'send_email',
  label: 'Send an e-mail',
  hint: 'Sends an e-mail through this installation\'s mail server, during or after the call.',
  schema: EmailSettings,
  defaults: { when: 'after_call', send_to_customer: false, direct_recipients: [] },
  fieldLabels: RECIPIENT_LABELS,
  check: messageCheck(EMAIL),
  live: (row, ctx) => liveMessage(EMAIL, row, ctx),
  after: { channel: 'email', messages: (settings, variables, customer) => outbox(EMAIL, settings, variables, customer) }
})

export const sendSms = defineCapability({
  type: 'send_sms',
  label: 'Send an SMS',
  hint: 'Sends a text message from one of your numbers, during or after the call.',
  schema: SmsSettings,
  defaults: { when: 'after_call', send_to_customer: true, direct_recipients: [] },
  fieldLabels: { ...RECIPIENT_LABELS, from_number: 'Send from' },
  check: messageCheck(SMS),
  live: (row, ctx) => liveMessage(SMS, row, ctx),
  after: { channel: 'sms', messages: (settings, variables, customer) => outbox(SMS, settings, variables, customer) }
})

export const sendChat = defineCapability({
  type: 'send_chat',
  label: 'Send a WhatsApp message',
  hint: 'Sends a WhatsApp message from your account\'s WhatsApp sender, during or after the call.',
  schema: ChatSettings,
  defaults: { when: 'after_call', send_to_customer: true, direct_recipients: [] },
  fieldLabels: RECIPIENT_LABELS,
  check: messageCheck(CHAT),
  live: (row, ctx) => liveMessage(CHAT, row, ctx),
  after: { channel: 'chat', messages: (settings, variables, customer) => outbox(CHAT, settings, variables, customer) }
})
