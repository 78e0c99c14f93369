import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'

// What the Cal.com and Calendly stand-ins share: a loopback HTTP server answering JSON, the requests it got, and
// answers queued by a test ahead of the normal handling (a 429 next, a 500 next).

export interface StandInRequest { method: string, path: string, query: URLSearchParams, headers: http.IncomingHttpHeaders, body: any }

/** An answer a test puts ahead of the stand-in's own: status, JSON body and headers (e.g. Retry-After). */
export interface Queued { status: number, body?: unknown, headers?: Record<string, string> }

export interface JsonReply { status: number, body?: unknown, headers?: Record<string, string> }

export interface JsonServer {
  url: string
  server: http.Server
  requests: StandInRequest[]
  /** Answered, in turn, before anything else (the request is still recorded). */
  queued: Queued[]
  close: () => Promise<void>
}

/** A handler offered each request before the JSON API (an OAuth authorization server on the same origin): true when it answered. */
export type Mounted = (req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams, body: string) => boolean

/** Starts a loopback server whose `handle` answers each JSON request that `mounted` (when there is one) leaves. */
export async function startJsonServer (t: Test, handle: (request: StandInRequest) => JsonReply | Promise<JsonReply>, mounted?: () => Mounted | undefined): Promise<JsonServer> {
  const requests: StandInRequest[] = []
  const queued: Queued[] = []
  const server = http.createServer((req, res) => {
    void (async () => {
      let raw = ''
      for await (const chunk of req) raw += String(chunk)
      const url = new URL(req.url ?? '/', 'http://stand.in')
      if (mounted?.()?.(req, res, url.pathname, url.searchParams, raw) === true) return
      let body: unknown = null
      const type = String(req.headers['content-type'] ?? '')
      try { body = raw === '' ? null : type.includes('json') ? JSON.parse(raw) : Object.fromEntries(new URLSearchParams(raw)) } catch { body = { unparsable: raw } }
      const request = { method: req.method ?? 'GET', path: url.pathname, query: url.searchParams, headers: req.headers, body }
      requests.push(request)
      const reply = queued.shift() ?? await handle(request)
      res.writeHead(reply.status, { 'content-type': 'application/json; charset=utf-8', ...reply.headers })
      res.end(reply.body === undefined ? '' : JSON.stringify(reply.body))
    })().catch((error: unknown) => { res.writeHead(500).end(String(error)) })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const close = () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) })
  t.teardown(close)
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, requests, queued, close }
}

/** The bearer token of a request, or undefined. */
export const bearerOf = (request: StandInRequest): string | undefined =>
  /^Bearer (.+)$/.exec(String(request.headers.authorization ?? ''))?.[1]

/** Minutes east of UTC of `timeZone` at `date`. */
export function offsetMinutes (date: Date, timeZone: string): number {
  const name = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' }).formatToParts(date).find((p) => p.type === 'timeZoneName')?.value ?? 'GMT'
  const match = /GMT([+-])(\d{2}):(\d{2})/.exec(name)
  return match === null ? 0 : (match[1] === '-' ? -1 : 1) * (Number(match[2]) * 60 + Number(match[3]))
}

/** ISO 8601 of `date` in `timeZone` with its offset: 2050-09-05T09:00:00.000+02:00. */
export function isoInZone (date: Date, timeZone: string): string {
  const offset = offsetMinutes(date, timeZone)
  const local = new Date(date.getTime() + offset * 60_000).toISOString().slice(0, 23)
  const abs = Math.abs(offset)
  return `${local}${offset < 0 ? '-' : '+'}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`
}
