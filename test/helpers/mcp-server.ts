import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { Test } from 'tap'
import * as z from 'zod'

export interface McpRequest { method: string, headers: http.IncomingHttpHeaders }

export interface McpStandIn {
  /** The endpoint, http://127.0.0.1:<port>/mcp. */
  url: string
  /** Every HTTP request that reached the server, in order. */
  requests: McpRequest[]
  /** Tool calls the server ran, in order. */
  calls: Array<{ name: string, arguments: unknown }>
  /** TCP connections accepted so far. */
  connections: number
  /** Answers every `slow` call waiting (teardown does it too). */
  release: () => void
}

/**
 * A real MCP server (the SDK's, stateless Streamable HTTP on node:http) on a free loopback port, with the
 * tools the voice tests call: `lookup_order` answers, `fails` answers with isError, `slow` answers only
 * once released, `secret_tool` is there to be filtered out, and `orders.status` has a name that is a valid
 * MCP name but not a model function name.
 */
export async function startMcpServer (t: Test): Promise<McpStandIn> {
  let waiting: Array<() => void> = []
  const standIn: McpStandIn = {
    url: '',
    requests: [],
    calls: [],
    connections: 0,
    release: () => {
      for (const resolve of waiting) resolve()
      waiting = []
    }
  }
  const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] })

  function mcpServer (): McpServer {
    const server = new McpServer({ name: 'stand-in', version: '1.0.0' })
    server.registerTool('lookup_order', {
      description: 'Looks up an order',
      inputSchema: { order_id: z.string().describe('the order number') }
    }, async (args) => {
      standIn.calls.push({ name: 'lookup_order', arguments: args })
      return text(`Order ${args.order_id} ships tomorrow`)
    })
    server.registerTool('fails', { description: 'Always fails' }, async () => {
      standIn.calls.push({ name: 'fails', arguments: {} })
      return { ...text('The order system is down'), isError: true }
    })
    server.registerTool('slow', { description: 'Answers when released' }, async () => {
      standIn.calls.push({ name: 'slow', arguments: {} })
      await new Promise<void>((resolve) => waiting.push(resolve))
      return text('Finally done')
    })
    server.registerTool('secret_tool', { description: 'Not for agents' }, async () => {
      standIn.calls.push({ name: 'secret_tool', arguments: {} })
      return text('secret')
    })
    server.registerTool('orders.status', { description: 'Order system status' }, async () => {
      standIn.calls.push({ name: 'orders.status', arguments: {} })
      return text('All systems go')
    })
    return server
  }

  const httpServer = http.createServer((req, res) => {
    standIn.requests.push({ method: req.method ?? '', headers: req.headers })
    if (req.method !== 'POST') {
      // Stateless: no stream of server-initiated messages, no session to delete.
      res.writeHead(405, { allow: 'POST' }).end()
      return
    }
    const server = mcpServer()
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    res.on('close', () => {
      void transport.close()
      void server.close()
    })
    server.connect(transport)
      .then(async () => { await transport.handleRequest(req, res) })
      .catch((err: Error) => { if (!res.headersSent) res.writeHead(500).end(err.message) })
  })
  httpServer.on('connection', () => { standIn.connections++ })
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve))
  standIn.url = `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}/mcp`
  t.teardown(async () => {
    standIn.release()
    httpServer.closeAllConnections()
    await new Promise<void>((resolve) => httpServer.close(() => resolve()))
  })
  return standIn
}
