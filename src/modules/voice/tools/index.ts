import { TOOLS } from '../../agents/capabilities.ts'
import { listCapabilities, type CapabilityRow } from '../../agents/queries.ts'
import { agentTransferTool } from './agent-transfer.ts'
import { apiRagTool } from './api-rag.ts'
import { callForwardingTool } from './call-forwarding.ts'
import { endCallTool } from './end-call.ts'
import { mcpTools } from './mcp.ts'
import type { LiveTool, ToolContext } from './types.ts'

// The tool types that act during a call. appointment_booking, calendar_*, booking_* and crm are not live:
// they are configured and handed to an external voice runtime, and the built-in voice engine skips them.
const LIVE: Record<string, (row: CapabilityRow) => LiveTool> = {
  end_call: endCallTool,
  api_rag: apiRagTool,
  agent_transfer: agentTransferTool,
  call_forwarding: callForwardingTool
}

/** What model APIs accept as a function name (OpenAI's rule, the strictest of them). */
const SAFE_NAME = /^[a-zA-Z0-9_-]{1,64}$/

/** The name as it is when safe, else with every run of other characters as `_` (the type when nothing is left). */
function safeName (name: string, fallback: string): string {
  if (SAFE_NAME.test(name)) return name
  const safe = name.replace(/[^a-zA-Z0-9_-]+/g, '_').replace(/^_+|_+$/g, '').slice(0, 64)
  return safe === '' ? fallback : safe
}

function uniqueName (name: string, taken: Set<string>): string {
  let unique = name
  for (let n = 2; taken.has(unique); n++) unique = `${name.slice(0, 64 - `_${n}`.length)}_${n}`
  taken.add(unique)
  return unique
}

/**
 * The agent's active tools as the model is offered them: one per tool row, and one per allowed tool of
 * each MCP server. A server that cannot be listed (refused address, time-out, error) is left out with a
 * warning: the call goes on without it. `close` closes the MCP connections.
 */
export async function loadTools (ctx: ToolContext, agentId: string): Promise<{ tools: LiveTool[], close: () => Promise<void> }> {
  const rows = (await listCapabilities(ctx.db, ctx.userId, TOOLS, agentId)).filter((row) => row.is_active)
  const closers: Array<() => Promise<void>> = []
  // MCP servers are listed at once, not one after the other: the call waits for the slowest only.
  const perRow = await Promise.all(rows.map(async (row): Promise<LiveTool[]> => {
    if (row.type === 'mcp') {
      try {
        const server = await mcpTools(row, ctx)
        closers.push(server.close)
        return server.tools
      } catch (err) {
        ctx.log.warn({ err, toolId: row.id, agentId, callId: ctx.callId }, 'MCP server skipped: its tools could not be listed')
        return []
      }
    }
    const make = LIVE[row.type]
    if (make === undefined) {
      ctx.log.debug({ toolId: row.id, type: row.type }, 'tool type not live during calls: skipped')
      return []
    }
    return [make(row)]
  }))
  const taken = new Set<string>()
  const tools = perRow.flat().map((tool) => ({ ...tool, spec: { ...tool.spec, name: uniqueName(safeName(tool.spec.name, tool.type), taken) } }))
  return {
    tools,
    close: async () => { await Promise.all(closers.map(async (close) => await close())) }
  }
}
