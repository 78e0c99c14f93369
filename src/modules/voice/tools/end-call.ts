import type { CapabilityRow } from '../../agents/queries.ts'
import type { LiveTool } from './types.ts'

/** Lets the model hang up: the session says its last words and ends the call as `agent_hangup`. */
export function endCallTool (row: CapabilityRow): LiveTool {
  return {
    type: 'end_call',
    spec: {
      name: String(row.settings.name),
      description: (row.settings.description as string | undefined) || 'End the call when the conversation is over or the caller wants to hang up.',
      parameters: { type: 'object', properties: { reason: { type: 'string', description: 'why the call ends' } } }
    },
    run: async () => ({ output: 'The call is ending.', endCall: {} })
  }
}
