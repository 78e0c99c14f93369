import pg from 'pg'
import Cursor from 'pg-cursor'
import { Kysely, PostgresDialect } from 'kysely'
import type { Database } from './schema.ts'

export type DB = Kysely<Database>

const INT8 = 20

/** Counts and sums come back as int8; they fit a JS number for everything this server counts. */
const types = {
  getTypeParser (oid: number, format?: 'text' | 'binary') {
    if (oid === INT8) return (value: string) => Number(value)
    return pg.types.getTypeParser(oid, format)
  }
}

export function createPool (connectionString: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString, max, types })
  // An idle client losing its server (restart, network) must not crash the process; the pool replaces it.
  pool.on('error', () => {})
  return pool
}

export function createDb (pool: pg.Pool): DB {
  // The cursor lets `.stream()` read large results (CSV exports) in chunks instead of all at once.
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool, cursor: Cursor }) })
}
