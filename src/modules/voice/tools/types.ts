import type { Logger } from 'pino'
import type { Config } from '../../../config.ts'
import type { DB } from '../../../db/database.ts'
import type { ToolSpec } from '../engines/types.ts'

// A live tool (one file per tool type in this folder): what the model is offered, and what running it
// does. A tool that fails throws; the session answers the model with the error and the call goes on.

export interface ToolContext {
  db: DB
  config: Config
  log: Logger
  userId: string
  callId: string
  /** Aborted when the call ends: a tool still running gives up. */
  signal: AbortSignal
}

/** What running a tool did: `output` answers the model; the other members ask the session to act. */
export interface ToolOutcome {
  output: string
  /** end_call: say the last words (if any), then end the call as `agent_hangup`. */
  endCall?: { message?: string }
  /** agent_transfer: continue the call with this agent (same account; checked by the tool). */
  transferTo?: string
  /** call_forwarding, or agent_transfer to a number: on a transport that can dial (the phone); the browser cannot. */
  forwardTo?: { type: 'call_forwarding' | 'agent_transfer', phoneNumber: string, timeoutSeconds: number, showCallerNumber: boolean }
}

export interface LiveTool {
  spec: ToolSpec
  /** The tool row's type (end_call, api_rag, …), for the transcript's tool events. */
  type: string
  run: (args: Record<string, unknown>, ctx: ToolContext) => Promise<ToolOutcome>
}
