import type { RetrievalField } from '../../db/schema.ts'
import { badRequest } from '../../http/errors.ts'
import type { AgentUpdateBody } from './schemas.ts'

/** Variables every action can use already; a retrieval field of the same name would shadow them. */
export const CALL_VARIABLES = new Set(['call_id', 'call_from', 'call_to', 'customer_phone', 'customer_email', 'call_direction',
  'call_type', 'call_start', 'call_end', 'call_duration', 'call_summary', 'call_transcription', 'call_sentiment',
  'call_task_achieved', 'call_recording_url', 'agent_id'])

type DataRetrievalInput = NonNullable<AgentUpdateBody['data_retrieval']>

/**
 * Checks what the schema cannot (unique names, enum_values with enum only) and fills in the defaults: the
 * agent routes' and the console's rule. Messages name the item as `body.data_retrieval.<index>`.
 */
export function dataRetrieval (items: DataRetrievalInput): RetrievalField[] {
  const names = new Set<string>()
  return items.map((item, i) => {
    const field = `body.data_retrieval.${i}`
    if (names.has(item.name)) throw badRequest(`${field}.name "${item.name}" is used twice; names must be unique`)
    if (CALL_VARIABLES.has(item.name)) throw badRequest(`${field}.name "${item.name}" is a built-in call variable; choose another name`)
    names.add(item.name)
    if (item.type === 'enum' && item.enum_values === undefined) throw badRequest(`${field}.enum_values is required for type enum`)
    if (item.type !== 'enum' && item.enum_values !== undefined) throw badRequest(`${field}.enum_values is allowed only for type enum`)
    if (item.keypad === true && item.type !== 'string') throw badRequest(`${field}.keypad is allowed only for type string (keys are text: 0-9 * and letters A-D)`)
    return {
      name: item.name,
      type: item.type,
      description: item.description ?? '',
      required: item.required ?? false,
      ...(item.enum_values === undefined ? {} : { enum_values: item.enum_values }),
      ...(item.keypad === true ? { keypad: true } : {})
    }
  })
}

/** A value of a data_retrieval field, typed as the field says (a date as YYYY-MM-DD). */
export type FieldValue = string | number | boolean

/**
 * A value given for a field (by an analyser, or by the agent during the call) checked against the field's type:
 * the value as kept (a string trimmed), or what is wrong with it, naming the field. The one rule for both.
 */
export function checkFieldValue (field: Pick<RetrievalField, 'name' | 'type' | 'enum_values'>, value: unknown): { value: FieldValue } | { problem: string } {
  const { name } = field
  switch (field.type) {
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? { value } : { problem: `${name} must be a number` }
    case 'boolean':
      return typeof value === 'boolean' ? { value } : { problem: `${name} must be true or false` }
    case 'enum':
      return typeof value === 'string' && field.enum_values?.includes(value) === true
        ? { value }
        : { problem: `${name} must be one of ${(field.enum_values ?? []).join(', ')}` }
    case 'date':
      // Round-tripped, so that a day that does not exist (2026-02-30) is refused rather than read as another.
      return typeof value === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(value) && !Number.isNaN(Date.parse(value)) && new Date(value).toISOString().startsWith(value)
        ? { value }
        : { problem: `${name} must be a date as YYYY-MM-DD` }
    case 'string':
      // Text the database can store (DESIGN.md, "Security rules"): no NUL, no lone surrogates.
      return typeof value === 'string' && value.trim() !== '' && value.isWellFormed() && !value.includes('\0')
        ? { value: value.trim() }
        : { problem: `${name} must be a text that is not empty` }
  }
}
