import { Type } from 'typebox'
import { ID_PATTERN } from '../../../db/ids.ts'
import { badRequest, notFound } from '../../../http/errors.ts'
import { E164 } from '../../../http/schemas.ts'
import { findAgent } from '../../agents/queries.ts'
import { defineCapability } from '../registry.ts'
import { describedAs, type LiveTool } from '../live.ts'
import { Description, Dialling, Name } from '../../agents/settings-parts.ts'
import { dialTarget, Handover, handoverNote, HANDOVER_HINTS, HANDOVER_LABELS, handoverParameters } from './call-forwarding.ts'

/**
 * Continues the call with another agent of the account, or puts it through to an agent at a phone number.
 * The target agent is checked when the tool runs, not when the call starts: it may have been switched off
 * (or deleted) since the tool was configured.
 */
export const agentTransfer = defineCapability({
  type: 'agent_transfer',
  label: 'Agent transfer',
  hint: 'The agent hands the call to another agent of yours, or to an agent at a phone number.',
  schema: Type.Object({
    name: Name,
    description: Description,
    agent_id: Type.Optional(Type.String({ pattern: ID_PATTERN, description: 'the agent that takes over; another agent of the same account' })),
    phone_number: Type.Optional({ ...E164, description: 'or: the number of an agent elsewhere (another platform, a team) that the call is put through to' }),
    ...Dialling,
    ...Handover
  }, { anyOf: [{ required: ['agent_id'] }, { required: ['phone_number'] }] }),
  defaults: {},
  fieldLabels: { agent_id: 'Agent', timeout_seconds: 'Ring for (seconds)', show_caller_number: "Show the caller's number", ...HANDOVER_LABELS },
  fieldHints: { agent_id: 'Another agent of yours that takes the call over; or give a phone number below.', ...HANDOVER_HINTS },
  check: async ({ db, agent }, settings) => {
    if ((settings.agent_id === undefined) === (settings.phone_number === undefined)) {
      throw badRequest('body.settings needs one of agent_id (another agent here) and phone_number (a number to put the call through to), not both')
    }
    if (settings.agent_id === undefined) return
    if (settings.transfer_mode === 'warm') throw badRequest('body.settings.transfer_mode warm needs a phone_number: a transfer to another agent here is always immediate')
    const target = settings.agent_id.toLowerCase()
    settings.agent_id = target
    if (target === agent.id) throw badRequest('body.settings.agent_id must name another agent than the one the tool belongs to')
    if (await findAgent(db, agent.user_id, target) === undefined) throw notFound(`agent ${target} (body.settings.agent_id)`)
  },
  live: (row): LiveTool => {
    const spec = {
      name: row.settings.name,
      description: describedAs(row.settings, 'Transfer the call to another agent who can help the caller better.'),
      parameters: handoverParameters('why the call is transferred', row.settings)
    }
    const { agent_id: agentId, phone_number: phoneNumber } = row.settings
    if (agentId === undefined) {
      return {
        type: 'agent_transfer',
        spec,
        run: async () => ({
          output: `${handoverNote(row.settings)} tell the caller so in one short sentence.`,
          forwardTo: dialTarget('agent_transfer', phoneNumber ?? '', row.settings)
        })
      }
    }
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
})
