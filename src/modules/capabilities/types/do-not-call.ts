import { Type } from 'typebox'
import { E164_PATTERN } from '../../../http/schemas.ts'
import { addDoNotCall } from '../../contacts/dnc.ts'
import { defineCapability } from '../registry.ts'
import { describedAs } from '../live.ts'
import { Description, Name } from '../../agents/settings-parts.ts'

const isNumber = (value: string) => new RegExp(E164_PATTERN).test(value)

/**
 * Lets the model honour "don't call me again": the other party's number goes on the account's do-not-call list
 * (source `call`, with the call's id), so that no later call, callback or campaign reaches it (docs/contacts.md).
 */
export const doNotCall = defineCapability({
  type: 'do_not_call',
  label: 'Do not call',
  hint: 'When the caller asks not to be called again, the agent puts their number on your do-not-call list.',
  schema: Type.Object({ name: Name, description: Description }),
  defaults: {},
  live: (row) => ({
    type: 'do_not_call',
    spec: {
      name: row.settings.name,
      description: describedAs(row.settings, 'Put the caller\'s phone number on the do-not-call list when they ask not to be called (or contacted by phone) again. Then confirm to them that they will not be called again.'),
      parameters: { type: 'object', properties: {} }
    },
    run: async (_args, ctx) => {
      // A phone call's other party; a web call's, when its dynamic_context names a customer_phone.
      const number = ctx.customer.phone
      if (number === null || !isNumber(number)) {
        return { output: 'There is no phone number for this caller, so nothing was added to the do-not-call list. Tell the caller that you cannot see their number and how else they can ask.' }
      }
      await addDoNotCall(ctx.db, ctx.userId, { phone_number: number, source: 'call', call_id: ctx.callId })
      return { output: `Done: ${number} is on the do-not-call list; this account will not call it again. Confirm that to the caller.` }
    }
  })
})
