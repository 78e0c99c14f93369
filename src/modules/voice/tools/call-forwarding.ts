import type { CapabilityRow } from '../../agents/queries.ts'
import type { LiveTool, ToolOutcome } from './types.ts'

/** The default ring time before the agent takes the call back (Twilio's <Dial> default too). */
const RING_SECONDS = 30

/** Where a call is put through to, from a call_forwarding or agent_transfer tool's settings. */
export function dialTarget (type: 'call_forwarding' | 'agent_transfer', settings: Record<string, unknown>): NonNullable<ToolOutcome['forwardTo']> {
  return {
    type,
    phoneNumber: String(settings.phone_number),
    timeoutSeconds: typeof settings.timeout_seconds === 'number' ? settings.timeout_seconds : RING_SECONDS,
    showCallerNumber: settings.show_caller_number === true
  }
}

/** Hands the caller to a person at a phone number; the session decides whether its transport can dial. */
export function callForwardingTool (row: CapabilityRow): LiveTool {
  const message = row.settings.transfer_message as string | undefined
  return {
    type: 'call_forwarding',
    spec: {
      name: String(row.settings.name),
      description: (row.settings.description as string | undefined) || 'Forward the call to a person when the caller asks for one or needs help the agent cannot give.',
      parameters: { type: 'object', properties: { reason: { type: 'string', description: 'why the call is forwarded' } } }
    },
    run: async () => ({
      output: message === undefined || message === ''
        ? 'The call is put through to a person as soon as you have finished speaking: tell the caller so in one short sentence.'
        : `The call is put through to a person as soon as you have finished speaking: say exactly this to the caller: ${message}`,
      forwardTo: dialTarget('call_forwarding', row.settings)
    })
  }
}
