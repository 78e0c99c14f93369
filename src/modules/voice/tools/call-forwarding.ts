import type { CapabilityRow } from '../../agents/queries.ts'
import type { LiveTool } from './types.ts'

/** Hands the caller to a person at a phone number; the session decides whether its transport can dial. */
export function callForwardingTool (row: CapabilityRow): LiveTool {
  const phoneNumber = String(row.settings.phone_number)
  const message = row.settings.transfer_message as string | undefined
  return {
    type: 'call_forwarding',
    spec: {
      name: String(row.settings.name),
      description: (row.settings.description as string | undefined) || 'Forward the call to a person when the caller asks for one or needs help the agent cannot give.',
      parameters: { type: 'object', properties: { reason: { type: 'string', description: 'why the call is forwarded' } } }
    },
    run: async () => ({
      output: 'The call is being forwarded to a person.',
      forwardTo: message === undefined ? { phoneNumber } : { phoneNumber, message }
    })
  }
}
