import { findAgent, type CapabilityRow } from '../../agents/queries.ts'
import type { LiveTool } from './types.ts'

/**
 * Continues the call with another agent of the account. The target is checked when the tool runs, not
 * when the call starts: it may have been switched off (or deleted) since the tool was configured.
 */
export function agentTransferTool (row: CapabilityRow): LiveTool {
  const agentId = String(row.settings.agent_id)
  return {
    type: 'agent_transfer',
    spec: {
      name: String(row.settings.name),
      description: (row.settings.description as string | undefined) || 'Transfer the call to another agent who can help the caller better.',
      parameters: { type: 'object', properties: { reason: { type: 'string', description: 'why the call is transferred' } } }
    },
    run: async (_args, ctx) => {
      const target = await findAgent(ctx.db, ctx.userId, agentId)
      if (target === undefined) throw new Error('The agent to transfer to does not exist any more; the transfer is not possible.')
      if (target.status !== 'active') throw new Error('The agent to transfer to is not active; the transfer is not possible.')
      return { output: `The call is being transferred to ${target.agent_name}.`, transferTo: target.id }
    }
  }
}
