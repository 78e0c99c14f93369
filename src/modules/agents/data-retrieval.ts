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
    return {
      name: item.name,
      type: item.type,
      description: item.description ?? '',
      required: item.required ?? false,
      ...(item.enum_values === undefined ? {} : { enum_values: item.enum_values })
    }
  })
}
