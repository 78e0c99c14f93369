import { Type } from 'typebox'
import { defineCapability } from '../registry.ts'
import { describedAs } from '../live.ts'
import { Description, Name } from '../../agents/settings-parts.ts'

/** Lets the model hang up: the session says its last words and ends the call as `agent_hangup`. */
export const endCall = defineCapability({
  type: 'end_call',
  label: 'End the call',
  hint: 'The agent may hang up when the conversation is over.',
  schema: Type.Object({ name: Name, description: Description }),
  defaults: {},
  live: (row) => ({
    type: 'end_call',
    spec: {
      name: row.settings.name,
      description: describedAs(row.settings, 'End the call when the conversation is over or the caller wants to hang up.'),
      parameters: { type: 'object', properties: { reason: { type: 'string', description: 'why the call ends' } } }
    },
    run: async () => ({ output: 'The call is ending.', endCall: {} })
  })
})
