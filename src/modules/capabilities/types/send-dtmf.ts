import { Type } from 'typebox'
import { defineCapability } from '../registry.ts'
import { describedAs } from '../live.ts'
import { Description, Name } from '../../agents/settings-parts.ts'

/**
 * What the agent may send: keys and `w`, half a second of pause, as Twilio's <Play digits> takes them
 * (https://www.twilio.com/docs/voice/twiml/play, "digits"). A-D are left out: Twilio's reference does not list them.
 */
export const SEND_KEYS = /^[0-9*#w]+$/
/** Most characters one call sends: a menu choice, an extension or an account number with pauses. */
export const MAX_SENT_KEYS = 40

/** Keys spaced for reading ("4 2 #"): the transcript's and the model's form. */
export const spaced = (keys: string) => [...keys].join(' ')

/**
 * Lets the model press keys: keypad tones (DTMF) to the other side of the call, to find its way through another
 * company's phone menu. The session decides whether its transport can send them (a phone call; docs/voice.md, "Keypad").
 */
export const sendDtmf = defineCapability({
  type: 'send_dtmf',
  label: 'Press keys',
  hint: 'The agent sends keypad tones, to find its way through another company\'s phone menu (phone calls).',
  schema: Type.Object({ name: Name, description: Description }),
  defaults: {},
  live: (row) => ({
    type: 'send_dtmf',
    spec: {
      name: row.settings.name,
      description: describedAs(row.settings, 'Press keys on the phone keypad, for an automated phone menu that asks for them ("press 1 for sales", an extension, an account number followed by #).'),
      parameters: {
        type: 'object',
        properties: {
          digits: { type: 'string', pattern: SEND_KEYS.source, maxLength: MAX_SENT_KEYS, description: `the keys in order: 0-9, * and #; w waits half a second between keys; at most ${MAX_SENT_KEYS}` }
        },
        required: ['digits']
      }
    },
    run: async (args) => {
      const { digits } = args
      if (typeof digits !== 'string' || !SEND_KEYS.test(digits) || digits.length > MAX_SENT_KEYS) {
        throw new Error(`digits must be 1 to ${MAX_SENT_KEYS} of 0-9, *, # and w (a half-second pause); nothing was sent`)
      }
      return { output: `The keys ${spaced(digits)} were sent. Stay quiet and listen to what the other side says next.`, sendDigits: digits }
    }
  })
})
