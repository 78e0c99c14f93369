import pino, { type Logger } from 'pino'
import type { Config } from './config.ts'

/** Server logs go to stdout; the CLI passes stderr so that its own output stays clean. */
export function createLogger (config: Pick<Config, 'logLevel'>, fd: 1 | 2 = 1): Logger {
  return pino({
    level: config.logLevel,
    redact: { paths: ['req.headers["x-api-key"]', 'req.headers.authorization', '*.apiKey', '*.password'], censor: '[redacted]' }
  }, pino.destination(fd))
}
