import type { Static, TObject } from 'typebox'
import type { ValidateFunction } from 'ajv'
import type { Logger } from 'pino'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import type { CallRow } from '../../db/schema.ts'
import { compileBodySchema } from '../../http/validation.ts'
import type { AgentRow, CapabilityRow } from '../agents/queries.ts'
import type { Customer, LiveSet, LiveTool, ToolContext } from './live.ts'
import { DeliveryOptions } from '../agents/settings-parts.ts'

// Every tool and action type is defined once (DESIGN.md, "Capabilities"): its settings schema, defaults, checks,
// what it does during a call (`live`), what it does after the call (`after`, a delivery channel), and how the
// console names it. The API, the console, the voice engine and the delivery engine read these definitions; none
// of them switches on type names. (Methods, not function members: a definition of one schema is then one of the
// catalogue's, whose rows are checked against their own schema before they reach it: see `typed`.)

/**
 * How a post-call action is delivered: one outbox, one schedule, one attempts log for all of them. `integration`:
 * through a connected account's service (a CRM's call log), with the account's credentials as they are at the attempt.
 */
export type Channel = 'http' | 'email' | 'sms' | 'chat' | 'integration'

/** What an integration's post-call delivery may use. */
export interface DeliverContext { db: DB, config: Config, log: Logger, userId: string, callId: string }

export type When = 'during_call' | 'after_call' | 'both'

/** A request as a delivery stores it: method, URL (variables filled in), JSON body (null: none). */
export interface ShapedRequest { method: string, url: string, body: unknown }

/** One message to send after a call: a delivery of its own, so that each recipient has its attempts and resend. */
export interface OutboxMessage { to: string, subject?: string, text: string, from?: string }

/** What a type's check may read: the database and the agent the capability belongs to. */
export interface CheckContext { db: DB, agent: AgentRow }

export interface CapabilityType<S extends TObject = TObject> {
  type: string
  /** What the console calls it, and one sentence on what it does. */
  label: string
  hint: string
  schema: S
  /** Members filled in when a new settings object leaves them out. */
  defaults: Partial<Static<S>>
  /** Console labels and hints of its settings members, where the schema's own description is not enough. */
  fieldLabels?: Record<string, string>
  fieldHints?: Record<string, string>
  /** The member holding the URL its write-only header values are sent to (they must never follow it elsewhere). */
  credentialsUrl?: string
  /** What a schema cannot check (references, recipients, senders); throws an HTTP error. May normalise `settings`. */
  check? (ctx: CheckContext, settings: Static<S>, active: boolean): Promise<void>
  /**
   * During a call: the functions offered to the model (several for an MCP server). Actions are offered only when
   * their `when` says so. Absent: the type does nothing during calls.
   */
  live? (row: Typed<S>, ctx: ToolContext): LiveTool | Promise<LiveSet>
  /**
   * After the call: the delivery channel its post-call deliveries go through, and what one call makes of it: the
   * request (http), or the messages (one delivery each), from the call's {{variables}} and the other party.
   */
  after?: { channel: 'http', request (settings: Static<S>, call: CallRow, variables: Record<string, unknown>): ShapedRequest } |
  { channel: 'email' | 'sms' | 'chat', messages (settings: Static<S>, variables: Record<string, unknown>, customer: Customer): OutboxMessage[] } |
  {
    /** A tool's work after the call (it is a tool's: its row is read at every attempt, and a deleted tool ends the delivery). */
    channel: 'integration'
    /**
     * What the delivery stores from the call (its body): what `deliver` sends, also when it is sent again. Undefined:
     * no delivery for this call (a CRM tool that does not log calls).
     */
    payload (settings: Static<S>, call: CallRow, variables: Record<string, unknown>): unknown
    /** One attempt: answers the attempts log's text, or throws (an IntegrationError says whether a retry may help). */
    deliver (ctx: DeliverContext, settings: Static<S>, payload: unknown): Promise<string>
  }
}

/** A stored row with its settings checked against its type's schema. */
export type Typed<S extends TObject> = Omit<CapabilityRow, 'settings'> & { settings: Static<S> }

/** A type definition, checked against its schema's type where it is written. */
export function defineCapability<S extends TObject> (definition: CapabilityType<S>): CapabilityType<S> {
  return definition
}

const validators = new Map<TObject, ValidateFunction>()

/** The compiled validator of a schema (one per schema, compiled on first use). */
export function validatorOf (schema: TObject): ValidateFunction {
  let validate = validators.get(schema)
  if (validate === undefined) {
    validate = compileBodySchema(schema)
    validators.set(schema, validate)
  }
  return validate
}

/**
 * A stored row with its settings as its type says they are, or undefined when they no longer match (a row written
 * before a schema change). Validation is the proof of the type: no cast stands in for it.
 */
export function typed<S extends TObject> (definition: CapabilityType<S>, row: CapabilityRow): Typed<S> | undefined {
  const validate = validatorOf(definition.schema)
  const settings: unknown = structuredClone(row.settings)
  return isSettings<S>(validate, settings) ? { ...row, settings } : undefined
}

function isSettings<S extends TObject> (validate: ValidateFunction, settings: unknown): settings is Static<S> {
  return validate(settings)
}

/** An action's delivery options (schedule, failure e-mails, condition), read through their schema; {} when they do not match. */
export function deliveryOptions (settings: Record<string, unknown>): Static<typeof DeliveryOptions> {
  const validate = validatorOf(DeliveryOptions)
  const options: unknown = { retry_schedule: settings.retry_schedule, notify: settings.notify, notify_email: settings.notify_email, condition: settings.condition }
  const present: unknown = JSON.parse(JSON.stringify(options))
  return isOptions(validate, present) ? present : {}
}

function isOptions (validate: ValidateFunction, options: unknown): options is Static<typeof DeliveryOptions> {
  return validate(options)
}

/** Whether an action runs during the call, after it, or both (actions without `when` keep their type's default). */
export function whenOf (settings: Record<string, unknown>): When {
  return settings.when === 'during_call' || settings.when === 'both' ? settings.when : 'after_call'
}
