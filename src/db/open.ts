import type { Logger } from 'pino'
import type { Config } from '../config.ts'
import { openEmbedded, type EmbeddedPostgres } from './embedded.ts'

/**
 * The database URL: DATABASE_URL, or the embedded PostgreSQL kept in DATA_DIR. The server opens the
 * embedded cluster `exclusive`; the CLI `shared`, so it works beside a running server on the same data.
 */
export async function openDatabase (config: Config, log: Logger, mode: 'exclusive' | 'shared'): Promise<{ url: string, embedded?: EmbeddedPostgres }> {
  if (config.databaseUrl !== undefined) return { url: config.databaseUrl }
  const embedded = await openEmbedded(config.dataDir, { mode, log: (line) => log.info(line) })
  log.debug({ dataDir: config.dataDir, owned: embedded.owned }, 'embedded PostgreSQL ready')
  return { url: embedded.url, embedded }
}
