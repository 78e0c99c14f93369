import { findAgent, type CapabilityRow } from '../../agents/queries.ts'
import { dialTarget } from './call-forwarding.ts'
import type { LiveTool } from './types.ts'

/**
 * Continues the call with another agent of the account, or puts it through to an agent at a phone number.
 * The target agent is checked when the tool runs, not when the call starts: it may have been switched off
 * (or deleted) since the tool was configured.
 */
export function agentTransferTool (row: CapabilityRow): LiveTool {
  const spec = {
    name: String(row.settings.name),
    description: (row.settings.description as string | undefined) || 'Transfer the call to another agent who can help the caller better.',
    parameters: { type: 'object', properties: { reason: { type: 'string', description: 'why the call is transferred' } } }
  }
  if (row.settings.agent_id === undefined) {
    return {
      type: 'agent_transfer',
      spec,
      run: async () => ({
        output: 'The call is put through to the other agent as soon as you have finished speaking: tell the caller so in one short sentence.',
        forwardTo: dialTarget('agent_transfer', row.settings)
      })
    }
  }
  const agentId = String(row.settings.agent_id)
  return {
    type: 'agent_transfer',
    spec,
    run: async (_args, ctx) => {
      const target = await findAgent(ctx.db, ctx.userId, agentId)
      if (target === undefined) throw new Error('The agent to transfer to does not exist any more; the transfer is not possible.')
      if (target.status !== 'active') throw new Error('The agent to transfer to is not active; the transfer is not possible.')
      return { output: `The call is being transferred to ${target.agent_name}.`, transferTo: target.id }
    }
  }
}
