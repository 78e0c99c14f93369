import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js'
import { ErrorCode, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js'
import { fetch as undiciFetch, type Agent } from 'undici'
import { Type } from 'typebox'
import { badRequest } from '../../../http/errors.ts'
import { guardedAgent } from '../../../net/guard.ts'
import type { LiveSet, LiveTool, ToolContext } from '../live.ts'
import { defineCapability, type Typed } from '../registry.ts'
import { Description, headerProblem, Headers, Name } from '../../agents/settings-parts.ts'

// An MCP server is a user-given URL, so it is reached under the deliveries' address rules (every address
// resolved and checked before a connection opens; private ones only with DELIVERY_ALLOW_PRIVATE_NETWORKS),
// its configured headers never leave its origin, and every request is bounded in time and bytes.

/** Most bytes one answer of the server may carry: a tool listing or result, never a download. */
const MAX_RESPONSE_BYTES = 4 * 1024 * 1024
/** Pages of a tool listing read at most; a server that keeps paging is cut off there. */
const MAX_LIST_PAGES = 10

/** A fetch through `agent` that refuses redirects to another origin (the SDK follows same-origin ones itself). */
function guardedFetch (agent: Agent): FetchLike {
  return async (url, init) => {
    const response = await undiciFetch(url, { ...init, redirect: 'manual', dispatcher: agent } as Parameters<typeof undiciFetch>[1]) as unknown as Response
    const location = response.headers.get('location')
    if (response.status >= 300 && response.status < 400 && location !== null) {
      if (new URL(location, url).origin !== new URL(url).origin) {
        await response.body?.cancel()
        throw new Error('the MCP server redirected to another origin; refused')
      }
      return response
    }
    return bounded(response)
  }
}

function bounded (response: Response): Response {
  if (response.body === null) return response
  let total = 0
  const body = response.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
    transform (chunk, controller) {
      total += chunk.byteLength
      if (total > MAX_RESPONSE_BYTES) controller.error(new Error(`the MCP server's answer passed ${MAX_RESPONSE_BYTES} bytes`))
      else controller.enqueue(chunk)
    }
  }))
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers })
}

/** The result as text for the model; a result flagged as an error throws its text. */
function outputOf (result: CallToolResult): string {
  const parts = (result.content ?? []).map((item) => {
    switch (item.type) {
      case 'text': return item.text
      case 'resource': return 'text' in item.resource ? item.resource.text : `[resource ${item.resource.uri}]`
      case 'resource_link': return `[link ${item.uri}]`
      default: return `[${item.type} ${item.mimeType}]`
    }
  })
  const text = parts.join('\n').trim()
  if (result.isError === true) throw new Error(text || 'the tool failed')
  if (text === '' && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent)
  return text === '' ? 'The tool returned nothing.' : text
}

const tooLate = (what: string, ms: number) => new Error(`${what} did not answer within ${ms} ms`)

/** The promise, or a rejection once `ms` have passed. */
async function within<T> (promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(tooLate(what, ms)), ms) })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

const McpSettings = Type.Object({
  name: Name,
  description: Description,
  server_url: Type.String({ format: 'http-url', maxLength: 2000 }),
  allowed_tools: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 100, uniqueItems: true, description: 'tool names the agent may call; [] or absent: all' })),
  headers: Type.Optional(Headers)
})

export const mcp = defineCapability({
  type: 'mcp',
  label: 'MCP server',
  hint: 'The agent calls the tools of a Model Context Protocol server (streamable HTTP).',
  schema: McpSettings,
  defaults: { allowed_tools: [], headers: {} },
  credentialsUrl: 'server_url',
  fieldLabels: { server_url: 'Server URL', allowed_tools: 'Allowed tools' },
  check: async (_ctx, settings) => {
    const problem = headerProblem(settings.headers)
    if (problem !== undefined) throw badRequest(problem)
  },
  live: async (row, ctx) => await mcpTools(row, ctx)
})

/**
 * Connects to the tool's server and offers each of its allowed tools (all when `allowed_tools` is empty).
 * Throws, with nothing left open, when the server cannot be listed. Each LiveTool's spec name is the
 * server's tool name; the caller makes it safe and unique, while calls keep using the server's name.
 */
async function mcpTools (row: Typed<typeof McpSettings>, ctx: ToolContext): Promise<LiveSet> {
  const { settings } = row
  const timeout = ctx.config.voice.mcpTimeoutMs
  const agent = guardedAgent(ctx.config.delivery)
  const client = new Client({ name: 'switchboard', version: '1.0.0' })
  const transport = new StreamableHTTPClientTransport(new URL(settings.server_url), {
    fetch: guardedFetch(agent),
    requestInit: { headers: settings.headers ?? {} }
  })
  const close = async () => {
    await client.close().catch(() => {})
    await agent.destroy().catch(() => {})
  }
  client.onerror = (err) => ctx.log.debug({ err, toolId: row.id }, 'MCP transport error')
  const list = async () => {
    // The connection's first requests (initialize, then a notification the SDK does not bound) count too.
    await client.connect(transport, { signal: ctx.signal })
    const tools: Tool[] = []
    let cursor: string | undefined
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const result = await client.listTools(cursor === undefined ? undefined : { cursor }, { signal: ctx.signal })
      tools.push(...result.tools)
      cursor = result.nextCursor
      if (cursor === undefined) break
    }
    return tools
  }
  let listed: Tool[]
  try {
    listed = await within(list(), timeout, `the MCP server of ${settings.name}`)
  } catch (err) {
    await close()
    throw err
  }
  const allowed = settings.allowed_tools ?? []
  if (allowed.length > 0) listed = listed.filter((tool) => allowed.includes(tool.name))
  const tools = listed.map((tool): LiveTool => ({
    type: 'mcp',
    spec: {
      name: tool.name,
      description: tool.description || settings.description || `${tool.title ?? tool.name} (from ${settings.name})`,
      parameters: tool.inputSchema
    },
    run: async (args, runCtx) => {
      try {
        const result = await client.callTool({ name: tool.name, arguments: args }, undefined, { timeout, signal: runCtx.signal })
        return { output: outputOf(result as CallToolResult) }
      } catch (err) {
        throw err instanceof McpError && err.code === ErrorCode.RequestTimeout ? tooLate(`the tool ${tool.name}`, timeout) : err
      }
    }
  }))
  return { tools, close }
}
