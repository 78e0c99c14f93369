import { Type } from 'typebox'
import { E164 } from '../../../http/schemas.ts'
import { defineCapability } from '../registry.ts'
import { describedAs, type ToolOutcome } from '../live.ts'
import { Description, Dialling, Name } from '../../agents/settings-parts.ts'

/** The default ring time before the agent takes the call back (Twilio's <Dial> default too). */
const RING_SECONDS = 30

/** How a tool puts a call through to a number: blind (the default) or warm, and what the caller hears on hold (docs/voice.md, "Warm transfer"). */
export const Handover = {
  transfer_mode: Type.Optional(Type.Union([Type.Literal('blind'), Type.Literal('warm')], {
    description: 'blind (default): the caller is put straight through; warm: the caller is held while the agent calls the person, tells them a summary of the call and connects both once they accept (press 1 or say yes), or takes the caller back'
  })),
  hold_music: Type.Optional(Type.Union([Type.Literal('music'), Type.Literal('none')], { description: 'warm transfers: what the caller hears on hold, hold music (default: Twilio\'s; on Telnyx a tune this server serves) or silence' }))
}

/** Console labels and hints of the handover members (both tool types). */
export const HANDOVER_LABELS = { transfer_mode: 'Transfer mode', hold_music: 'On hold (warm)' }
export const HANDOVER_HINTS = {
  transfer_mode: 'blind: put straight through. warm: the caller waits on hold while the agent calls the person and tells them what the call is about; they press 1 or say yes to take it, otherwise the agent takes the caller back.',
  hold_music: 'What the caller hears while the person is being called: music, or none (silence).'
}

/** The members of a tool's settings that say how a call is put through. */
interface DiallingSettings { timeout_seconds?: number, show_caller_number?: boolean, transfer_mode?: 'blind' | 'warm', hold_music?: 'music' | 'none' }

/** Where a call is put through to, from a call_forwarding or agent_transfer tool's settings (a workflow's transfer step: blind). */
export function dialTarget (type: 'call_forwarding' | 'agent_transfer', phoneNumber: string, settings: DiallingSettings): NonNullable<ToolOutcome['forwardTo']> {
  return {
    type,
    phoneNumber,
    timeoutSeconds: settings.timeout_seconds ?? RING_SECONDS,
    showCallerNumber: settings.show_caller_number === true,
    ...(settings.transfer_mode === 'warm' && { warm: { holdMusic: settings.hold_music !== 'none' } })
  }
}

/** What the model is told once it asked for the handover, before what it should say. */
export const handoverNote = (settings: DiallingSettings) => settings.transfer_mode === 'warm'
  ? 'As soon as you have finished speaking the caller is put on hold while the person is called and told your summary; should nobody take the call, you get the caller back:'
  : 'The call is put through to a person as soon as you have finished speaking:'

/** The function's parameters: why; and for a warm transfer the summary the person hears before taking the call. */
export function handoverParameters (why: string, settings: DiallingSettings): Record<string, unknown> {
  const reason = { reason: { type: 'string', description: why } }
  if (settings.transfer_mode !== 'warm') return { type: 'object', properties: reason }
  return {
    type: 'object',
    properties: { ...reason, summary: { type: 'string', description: 'a short summary of the call for the person who takes it (two sentences at most): who is calling and what they need' } },
    required: ['summary']
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
    ...Dialling,
    ...Handover
  }),
  defaults: {},
  fieldLabels: { timeout_seconds: 'Ring for (seconds)', show_caller_number: "Show the caller's number", ...HANDOVER_LABELS },
  fieldHints: HANDOVER_HINTS,
  live: (row) => {
    const message = row.settings.transfer_message
    return {
      type: 'call_forwarding',
      spec: {
        name: row.settings.name,
        description: describedAs(row.settings, 'Forward the call to a person when the caller asks for one or needs help the agent cannot give.'),
        parameters: handoverParameters('why the call is forwarded', row.settings)
      },
      run: async () => ({
        output: message === undefined || message === ''
          ? `${handoverNote(row.settings)} tell the caller so in one short sentence.`
          : `${handoverNote(row.settings)} say exactly this to the caller: ${message}`,
        forwardTo: dialTarget('call_forwarding', row.settings.phone_number, row.settings)
      })
    }
  }
})
