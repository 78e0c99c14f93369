import type { TurnDetection } from '../../db/shapes.ts'
import { badRequest } from '../../http/errors.ts'
import type { LlmRow } from './queries.ts'

/** What an LLM configuration without a turn_detection of its own uses: ours. */
export const TURN_DETECTION_DEFAULT: TurnDetection = { type: 'switchboard' }

/** The settings each type takes; the others would be stored and never act. */
const MEMBERS: Record<TurnDetection['type'], readonly string[]> = {
  switchboard: [],
  server_vad: ['threshold', 'silence_duration_ms', 'prefix_padding_ms'],
  semantic_vad: ['eagerness']
}

/**
 * Checks what the schema cannot, for the LLM routes and the console alike: each type takes its own settings only,
 * and the provider's turn detection needs the realtime engine (the cascade has none: a setting that is stored and
 * never acts is refused). `stored`: the configuration a PATCH changes. Messages name the field as `body.<field>`.
 */
export function checkTurnDetection (values: { engine?: LlmRow['engine'], turn_detection?: TurnDetection }, stored?: Pick<LlmRow, 'engine' | 'turn_detection'>): void {
  const given = values.turn_detection
  if (given !== undefined) {
    for (const member of Object.keys(given)) {
      if (member === 'type' || MEMBERS[given.type].includes(member)) continue
      const owner = (Object.keys(MEMBERS) as Array<TurnDetection['type']>).find((type) => MEMBERS[type].includes(member))
      throw badRequest(`body.turn_detection.${member} is allowed only with type ${owner ?? 'none'}, not ${given.type}`)
    }
  }
  const turns = given ?? stored?.turn_detection ?? TURN_DETECTION_DEFAULT
  const engine = values.engine !== undefined ? values.engine : stored?.engine ?? null
  if (turns.type === 'switchboard' || engine === 'realtime') return
  const current = engine === null ? 'null (the installation\'s VOICE_ENGINE)' : engine
  throw given !== undefined
    ? badRequest(`body.turn_detection.type ${turns.type} is the realtime provider's turn detection: it needs engine "realtime", and the engine is ${current}`)
    : badRequest(`body.engine ${current} cannot use the configuration's turn_detection ${turns.type}, which is the realtime provider's: set turn_detection to { "type": "switchboard" } as well`)
}
