import { Type } from 'typebox'
import { defineCapability } from '../registry.ts'
import { Description, Name } from '../schemas.ts'
import { NOT_YET } from '../booking/settings.ts'

export const crm = defineCapability({
  type: 'crm',
  label: 'CRM (HubSpot)',
  hint: 'Looks up and updates the caller in HubSpot.',
  schema: Type.Object({
    name: Name,
    description: Description,
    operations: Type.Array(Type.Union([Type.Literal('lookup_contact'), Type.Literal('create_contact'), Type.Literal('update_contact'), Type.Literal('log_call')]), { minItems: 1, uniqueItems: true })
  }),
  defaults: {},
  unavailable: NOT_YET
})
