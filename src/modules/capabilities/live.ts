import type { Logger } from 'pino'
import type { Config } from '../../config.ts'
import type { DB } from '../../db/database.ts'
import type { Mailer } from '../../mail/mailer.ts'

// What a capability does during a call (its type's `live`): the functions the model is offered, and what running
// one does. A run that fails throws; the session answers the model with the error and the call goes on.

/** A function the model may call during the call; `parameters` is a JSON Schema object. */
export interface ToolSpec {
  name: string
  description: string
  parameters: Record<string, unknown>
}

/** The other party of a call, as far as it is known. */
export interface Customer { phone: string | null, email: string | null }

export interface ToolContext {
  db: DB
  config: Config
  log: Logger
  userId: string
  callId: string
  /** Aborted when the call ends: a tool still running gives up. */
  signal: AbortSignal
  /** The call's {{variables}} as far as they are known now (its numbers, dynamic_context, what was collected). */
  variables: () => Record<string, unknown>
  /** The other party of the call as far as it is known: a phone call's number, an e-mail given to a web call. */
  customer: Customer
  /** Sends e-mail (the installation's mailer), for the message actions. */
  mailer: Mailer
  /** The agent's language (BCP 47): what a tool's answers are worded and its times spoken in. */
  language: string
}

/** What running a tool did: `output` answers the model; the other members ask the session to act. */
export interface ToolOutcome {
  output: string
  /** end_call: say the last words (if any), then end the call as `agent_hangup`. */
  endCall?: { message?: string }
  /** agent_transfer: continue the call with this agent (same account; checked by the tool). */
  transferTo?: string
  /** call_forwarding, or agent_transfer to a number: on a transport that can dial (the phone); the browser cannot. */
  forwardTo?: {
    type: 'call_forwarding' | 'agent_transfer', phoneNumber: string, timeoutSeconds: number, showCallerNumber: boolean
    /** A warm transfer: the caller is held (with music or in silence) while the person is called and told the summary. */
    warm?: { holdMusic: boolean }
  }
  /** A workflow's transition function: the call moves to this step (workflows/run.ts). */
  step?: string
  /** send_dtmf: play these keypad tones to the other side (checked by the tool; voice/keypad.ts SEND_KEYS). */
  sendDigits?: string
}

export interface LiveTool {
  spec: ToolSpec
  /** The capability's type (end_call, api_rag, send_sms, …), for the transcript's tool events. */
  type: string
  run: (args: Record<string, unknown>, ctx: ToolContext) => Promise<ToolOutcome>
  /** The action or tool it comes from (a workflow step allows tools by id); absent for the session's own functions. */
  capabilityId?: string
}

/** What a capability did by itself as the call started (a CRM's lookup of the caller): a tool item of the transcript. */
export interface StartEvent { name: string, arguments: Record<string, unknown>, output?: string, error?: string }

/**
 * The functions of one capability prepared when the call starts (an MCP server's, a calendar's), what it adds to the
 * agent's prompt (today's date for a calendar, the known customer for a CRM), and what it holds open while the call lasts.
 */
export interface LiveSet { tools: LiveTool[], instructions?: string, events?: StartEvent[], close?: () => Promise<void> }

/** The description the model reads: the configured one, else the type's own. */
export const describedAs = (settings: { description?: string }, fallback: string) =>
  settings.description === undefined || settings.description === '' ? fallback : settings.description
