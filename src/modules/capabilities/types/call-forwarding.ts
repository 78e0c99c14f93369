import { Type } from 'typebox'
import { E164 } from '../../../http/schemas.ts'
import { defineCapability } from '../registry.ts'
import { describedAs, type ToolOutcome } from '../live.ts'
import { Description, Dialling, Name } from '../../agents/settings-parts.ts'

/** The default ring time before the agent takes the call back (Twilio's <Dial> default too). */
const RING_SECONDS = 30

/** The members of a tool's settings that say how a call is put through. */
interface DiallingSettings { timeout_seconds?: number, show_caller_number?: boolean }

/** Where a call is put through to, from a call_forwarding or agent_transfer tool's settings. */
export function dialTarget (type: 'call_forwarding' | 'agent_transfer', phoneNumber: string, settings: DiallingSettings): NonNullable<ToolOutcome['forwardTo']> {
  return {
    type,
    phoneNumber,
    timeoutSeconds: settings.timeout_seconds ?? RING_SECONDS,
    showCallerNumber: settings.show_caller_number === true
  }
}

/** Hands the caller to a person at a phone number; the session decides whether its transport can dial. */
export const callForwarding = defineCapability({
  type: 'call_forwarding',
  label: 'Call forwarding',
  hint: 'The agent puts the caller through to a person at a phone number (phone calls).',
  schema: Type.Object({
    name: Name,
    description: Description,
    phone_number: E164,
    transfer_message: Type.Optional(Type.String({ maxLength: 500, description: 'said before forwarding' })),
    ...Dialling
  }),
  defaults: {},
  fieldLabels: { timeout_seconds: 'Ring for (seconds)', show_caller_number: "Show the caller's number" },
  live: (row) => {
    const message = row.settings.transfer_message
    return {
      type: 'call_forwarding',
      spec: {
        name: row.settings.name,
        description: describedAs(row.settings, 'Forward the call to a person when the caller asks for one or needs help the agent cannot give.'),
        parameters: { type: 'object', properties: { reason: { type: 'string', description: 'why the call is forwarded' } } }
      },
      run: async () => ({
        output: message === undefined || message === ''
          ? 'The call is put through to a person as soon as you have finished speaking: tell the caller so in one short sentence.'
          : `The call is put through to a person as soon as you have finished speaking: say exactly this to the caller: ${message}`,
        forwardTo: dialTarget('call_forwarding', row.settings.phone_number, row.settings)
      })
    }
  }
})
