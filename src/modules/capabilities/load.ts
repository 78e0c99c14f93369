import type { CapabilityRow } from '../agents/queries.ts'
import type { AgentConfig } from '../agents/versions.ts'
import { ACTIONS, TOOLS, type Kind } from './catalog.ts'
import type { LiveTool, StartEvent, ToolContext } from './live.ts'
import { typed, whenOf } from './registry.ts'

// What an agent offers the model during a call: its active tools, and its active actions whose `when` includes the
// call, each through its type's `live`. The rows are those of the agent version the call runs (agents/versions.ts).

/** What model APIs accept as a function name (OpenAI's rule, the strictest of them). */
const SAFE_NAME = /^[a-zA-Z0-9_-]{1,64}$/

/** The name as it is when safe, else with every run of other characters as `_` (the type when nothing is left). */
function safeName (name: string, fallback: string): string {
  if (SAFE_NAME.test(name)) return name
  const safe = name.replace(/[^a-zA-Z0-9_-]+/g, '_').replace(/^_+|_+$/g, '').slice(0, 64)
  return safe === '' ? fallback : safe
}

/** The name, or with the first free `_2`, `_3`… suffix when taken (within 64 characters); adds it to `taken`. */
export function uniqueName (name: string, taken: Set<string>): string {
  let unique = name
  for (let n = 2; taken.has(unique); n++) unique = `${name.slice(0, 64 - `_${n}`.length)}_${n}`
  taken.add(unique)
  return unique
}

/** What the rows' preparation adds besides functions: prompt text and the transcript's start events. */
interface Prepared { instructions: string[], events: Array<StartEvent & { type: string }> }

/** The live functions of one row; a row whose settings no longer match its schema is left out with a warning. */
async function liveOf (kind: Kind, row: CapabilityRow, ctx: ToolContext, closers: Array<() => Promise<void>>, prepared: Prepared): Promise<LiveTool[]> {
  const definition = kind.types[row.type]
  if (definition?.live === undefined) {
    ctx.log.debug({ capabilityId: row.id, type: row.type }, 'capability skipped: its type does not act during calls')
    return []
  }
  const checked = typed(definition, row)
  if (checked === undefined) {
    ctx.log.warn({ capabilityId: row.id, type: row.type }, 'capability skipped: its settings no longer match its type')
    return []
  }
  const made = definition.live(checked, ctx)
  if (!(made instanceof Promise)) return [made]
  const set = await made
  if (set.close !== undefined) closers.push(set.close)
  if (set.instructions !== undefined && set.instructions !== '') prepared.instructions.push(set.instructions)
  for (const event of set.events ?? []) prepared.events.push({ ...event, type: row.type })
  return set.tools
}

/**
 * The agent's live functions as the model is offered them: one per tool or action row, one per allowed tool of
 * each MCP server. A capability that cannot be prepared (an MCP server that cannot be listed: refused address,
 * time-out, error) is left out with a warning: the call goes on without it. `instructions`: what they add to the
 * prompt, in the order of the rows. `close` closes what they hold open.
 */
export async function loadLive (ctx: ToolContext, config: Pick<AgentConfig, 'tools' | 'actions'>): Promise<{ tools: LiveTool[], instructions: string, events: Array<StartEvent & { type: string }>, close: () => Promise<void> }> {
  const tools = config.tools.filter((row) => row.is_active).map((row) => ({ kind: TOOLS, row }))
  const actions = config.actions.filter((row) => row.is_active && whenOf(row.settings) !== 'after_call').map((row) => ({ kind: ACTIONS, row }))
  const closers: Array<() => Promise<void>> = []
  const rows = [...tools, ...actions]
  const prepared: Prepared[] = rows.map(() => ({ instructions: [], events: [] }))
  // Prepared at once, not one after the other (MCP servers are listed): the call waits for the slowest only.
  const perRow = await Promise.all(rows.map(async ({ kind, row }, n) => {
    try {
      return (await liveOf(kind, row, ctx, closers, prepared[n])).map((tool) => ({ ...tool, capabilityId: row.id }))
    } catch (err) {
      ctx.log.warn({ err, capabilityId: row.id, callId: ctx.callId }, `${row.type} skipped: it could not be prepared for the call`)
      return []
    }
  }))
  const taken = new Set<string>()
  const live = perRow.flat().map((tool) => ({ ...tool, spec: { ...tool.spec, name: uniqueName(safeName(tool.spec.name, tool.type), taken) } }))
  return {
    tools: live,
    instructions: prepared.flatMap((p) => p.instructions).join('\n\n'),
    events: prepared.flatMap((p) => p.events),
    close: async () => { await Promise.all(closers.map(async (close) => await close())) }
  }
}
