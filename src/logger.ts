import tty from 'node:tty'
import pino, { type DestinationStream, type Logger } from 'pino'
import type { Config } from './config.ts'

type LoggerConfig = Pick<Config, 'logLevel'> & Partial<Pick<Config, 'logFormat'>>

/** LOG_FORMAT, or else pretty on a terminal and JSON lines for everything else (files, pipes, collectors). */
export function logFormat (config: LoggerConfig, fd: 1 | 2 = 1): 'json' | 'pretty' {
  return config.logFormat ?? (tty.isatty(fd) ? 'pretty' : 'json')
}

/** Server logs go to stdout; the CLI passes stderr so that its own output stays clean. */
export function createLogger (config: LoggerConfig, fd: 1 | 2 = 1): Logger {
  return pino({
    level: config.logLevel,
    serializers: { err: serializeError, req: serializeRequest },
    redact: { paths: ['req.headers["x-api-key"]', 'req.headers.authorization', '*.apiKey', '*.password'], censor: '[redacted]' }
  }, logFormat(config, fd) === 'pretty' ? prettyDestination(fd) : pino.destination(fd))
}

// Credentials that travel in URLs: a web call's access token in the stream's query (a browser's WebSocket
// cannot send headers) and a recording link's signature by name; every token the server issues
// (`generateToken`: a lowercase prefix, `_`, 40 base62 characters: `wi_…` invitations, `sl_…` sign-in links,
// `wct_…`, `sk_…`) by its shape, wherever it stands in the path or the query.
const SECRET_QUERY = /([?&](?:access_token|signature)=)[^&#]*/g
const ISSUED_TOKEN = /([a-z]+_)[0-9A-Za-z]{40,}/g

/** A URL as the log shows it: its credentials masked, like the API key's header. */
function redactUrl (url: string): string {
  return url.replace(SECRET_QUERY, '$1[redacted]').replace(ISSUED_TOKEN, '$1[redacted]')
}

/** A request as the log shows it. */
export function serializeRequest (req: { method?: string, url?: string, hostname?: string, host?: string, ip?: string, socket?: { remoteAddress?: string, remotePort?: number } }) {
  return {
    method: req.method,
    url: req.url === undefined ? undefined : redactUrl(req.url),
    host: req.host ?? req.hostname,
    remoteAddress: req.ip ?? req.socket?.remoteAddress,
    remotePort: req.socket?.remotePort
  }
}

// What an error keeps in the log. PostgreSQL errors carry `where` (the failing statement's context),
// `detail` (often the offending row's values), `internalQuery` and bound parameters: data, not diagnosis.
const ERROR_FIELDS = ['code', 'statusCode', 'severity', 'schema', 'table', 'column', 'dataType', 'constraint'] as const
const MAX_CAUSES = 3

export function serializeError (err: unknown, depth = 0): unknown {
  if (!(err instanceof Error)) return err
  const fields = err as unknown as Record<string, unknown>
  const out: Record<string, unknown> = { type: err.constructor.name, message: err.message, stack: err.stack }
  for (const name of ERROR_FIELDS) {
    if (fields[name] !== undefined) out[name] = fields[name]
  }
  if (err.cause !== undefined && depth < MAX_CAUSES) out.cause = serializeError(err.cause, depth + 1)
  return out
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO ', 40: 'WARN ', 50: 'ERROR', 60: 'FATAL' }
const COLOURS: Record<number, string> = { 10: '90', 20: '90', 30: '32', 40: '33', 50: '31', 60: '35' }
// Fields every entry has, or that the line's head already shows.
const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'err', 'req', 'res', 'reqId', 'responseTime', 'banner'])

/** One JSON log line as a terminal line: `12:00:01 INFO  message key=value`, an error's stack below it. */
export function formatPretty (line: string, colour: boolean): string {
  let entry: Record<string, unknown>
  try {
    entry = JSON.parse(line) as Record<string, unknown>
  } catch {
    return line + '\n'
  }
  const paint = (code: string, text: string) => colour ? `\x1b[${code}m${text}\x1b[0m` : text
  if (Array.isArray(entry.banner)) {
    const lines = entry.banner.map(String)
    return '\n' + lines.map((text, i) => i === 0 ? `  ${paint('1', text)}` : text === '' ? '' : `  ${text}`).join('\n') + '\n\n'
  }
  const level = Number(entry.level)
  const time = new Date(Number(entry.time)).toTimeString().slice(0, 8)
  const parts = [paint('90', time), paint(COLOURS[level] ?? '0', LEVELS[level] ?? String(level))]
  const req = entry.req as { method?: string, url?: string } | undefined
  const res = entry.res as { statusCode?: number } | undefined
  if (req?.method !== undefined) parts.push(`${req.method} ${req.url}`)
  if (res?.statusCode !== undefined) parts.push(String(res.statusCode))
  if (typeof entry.responseTime === 'number') parts.push(`${Math.round(entry.responseTime)} ms`)
  if (entry.msg !== undefined) parts.push(String(entry.msg))
  for (const [key, value] of Object.entries(entry)) {
    if (!HIDDEN.has(key)) parts.push(paint('90', `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`))
  }
  const err = entry.err as { stack?: string, message?: string } | undefined
  const below = err === undefined ? '' : '\n    ' + (err.stack ?? err.message ?? '').split('\n').join('\n    ')
  return parts.join(' ') + below + '\n'
}

/** pino's JSON lines turned readable on their way to pino's own (synchronous) destination. */
function prettyDestination (fd: 1 | 2): DestinationStream {
  const out = pino.destination(fd)
  const colour = tty.isatty(fd)
  return {
    write (chunk: string) {
      for (const line of chunk.split('\n')) {
        if (line !== '') out.write(formatPretty(line, colour))
      }
    }
  }
}
