import type { DB } from '../../db/database.ts'
import { badRequest, HttpError, invalidInput, notFound, type AjvIssue } from '../../http/errors.ts'
import {
  countCapabilities, deleteCapability, findCapability, insertCapability, lockAgent, updateCapability, type AgentRow, type CapabilityRow
} from '../agents/queries.ts'
import { recordVersion } from '../agents/versions.ts'
import type { Kind } from './catalog.ts'
import { validatorOf, type CapabilityType } from './registry.ts'
import { forgetStoredCredentials, movesOrigin, unmaskSettings } from '../agents/settings-parts.ts'

// Adding and changing an agent's actions and tools: the API's and the console's one rule. Each type's definition
// (catalog.ts) gives the schema, the defaults and the checks; a type that cannot act is refused.

type Settings = Record<string, unknown>

/** A null member of a PATCH removes the member, which then takes its default. */
function withoutNulls (settings: Settings): Settings {
  return Object.fromEntries(Object.entries(settings).filter(([, value]) => value !== null))
}

function validateSettings (definition: CapabilityType, settings: Settings): void {
  const validate = validatorOf(definition.schema)
  if (!validate(settings)) throw invalidInput('body.settings', validate.errors![0] as AjvIssue)
}

/** The type's definition (the route's schema has checked the type is one of the kind's). */
export function definitionOf (kind: Kind, type: string): CapabilityType {
  return kind.types[type]
}

/**
 * Adds an action or tool to an agent (the API's and the console's rule): the settings with the type's defaults
 * filled in, validated against its schema, checked, and counted against the limit under the agent's row lock,
 * so that concurrent requests cannot pass the cap together.
 */
export async function addCapability (db: DB, userId: string, kind: Kind, agent: AgentRow, type: string, input: Settings, active: boolean): Promise<CapabilityRow> {
  const definition = definitionOf(kind, type)
  const settings = { ...definition.defaults, ...input }
  const masked = unmaskSettings(settings, undefined)
  if (masked !== undefined) throw badRequest(`body.settings.headers.${masked} must be the header's value, not the mask`)
  validateSettings(definition, settings)
  await definition.check?.({ db, agent }, settings, active)
  return await db.transaction().execute(async (trx) => {
    if (await lockAgent(trx, userId, agent.id) === undefined) throw notFound(`agent ${agent.id}`)
    if (await countCapabilities(trx, userId, kind, agent.id) >= kind.max) {
      throw new HttpError(409, `${kind.noun}_limit_reached`, `an agent has at most ${kind.max} ${kind.path}; delete one before adding another`)
    }
    const row = await insertCapability(trx, userId, kind, { agent_id: agent.id, type, settings, is_active: active })
    await recordVersion(trx, userId, agent.id, kind.path)
    return row
  })
}

/**
 * Changes an action or tool: `settings` members merge with the stored ones (a null member returns to its
 * default; a header value sent as the mask keeps its stored value) and are validated against the type's schema.
 * A change that moves the URL to another origin keeps no stored header value: only those it sends itself.
 */
export async function changeCapability (db: DB, userId: string, kind: Kind, agent: AgentRow, id: string, changes: { settings?: Settings, is_active?: boolean }): Promise<CapabilityRow> {
  return await db.transaction().execute(async (trx) => {
    // The agent first, as every change of it locks it (its version is written under that lock).
    if (await lockAgent(trx, userId, agent.id) === undefined) throw notFound(`agent ${agent.id}`)
    const current = await findCapability(trx, userId, kind, agent.id, id, true)
    if (current === undefined) throw notFound(`${kind.noun} ${id}`)
    const definition = kind.types[current.type]
    const active = changes.is_active ?? current.is_active
    // A stored row of a type that cannot act may be switched off (or deleted), not changed or switched on.
    if (changes.settings !== undefined || active) definitionOf(kind, current.type)
    let settings = current.settings
    if (changes.settings !== undefined) {
      settings = { ...definition.defaults, ...withoutNulls({ ...current.settings, ...changes.settings }) }
      if (movesOrigin(definition.credentialsUrl, current.settings, settings)) {
        const kept = forgetStoredCredentials(settings, changes.settings)
        if (kept !== undefined) {
          throw badRequest(`body.settings.headers.${kept} cannot keep its stored value: stored header values go only to the origin they were given for, and the URL now points to another (scheme, host or port); send the value itself`)
        }
      }
      const masked = unmaskSettings(settings, current.settings)
      if (masked !== undefined) throw badRequest(`body.settings.headers.${masked} has no stored value to keep; send the value itself`)
      validateSettings(definition, settings)
    }
    await definition.check?.({ db, agent }, settings, active)
    const row = await updateCapability(trx, userId, kind, current.id, { settings, is_active: active })
    await recordVersion(trx, userId, agent.id, kind.path)
    return row
  })
}

/** Deletes an action or tool of the agent, with a new version of the agent; false when there is no such row. */
export async function removeCapability (db: DB, userId: string, kind: Kind, agent: AgentRow, id: string): Promise<boolean> {
  return await db.transaction().execute(async (trx) => {
    if (await lockAgent(trx, userId, agent.id) === undefined) return false
    if (!await deleteCapability(trx, userId, kind, agent.id, id)) return false
    await recordVersion(trx, userId, agent.id, kind.path)
    return true
  })
}
