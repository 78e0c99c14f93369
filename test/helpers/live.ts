import { loadAgentConfig } from '../../src/modules/agents/versions.ts'
import type { ToolContext } from '../../src/modules/capabilities/live.ts'
import { loadLive } from '../../src/modules/capabilities/load.ts'

/** The live functions of the agent's latest version, as a call loads them. */
export async function loadAgentLive (ctx: ToolContext, agentId: string): ReturnType<typeof loadLive> {
  const config = await loadAgentConfig(ctx.db, ctx.userId, agentId, null)
  if (config === undefined) throw new Error(`no agent ${agentId}`)
  return await loadLive(ctx, config)
}
