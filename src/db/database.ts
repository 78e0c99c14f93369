import { Readable } from 'node:stream'
import pg from 'pg'
import Cursor from 'pg-cursor'
import { Kysely, PostgresDialect, type CompiledQuery } from 'kysely'
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

export interface PoolLimits {
  /** How long a query waits for a free connection before it fails with a 503 (0: for ever). */
  waitMs?: number
  /** PostgreSQL ends a session idle inside a transaction this long (0: never), so a stalled client cannot hold locks. */
  idleInTransactionMs?: number
}

/** A pool that waited too long for a connection: the server is busy, not broken (the error handler answers 503). */
function busy (err: Error): Error {
  return err.message === 'timeout exceeded when trying to connect' ? Object.assign(err, { statusCode: 503 }) : err
}

export function createPool (connectionString: string, max: number, limits: PoolLimits = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    types,
    connectionTimeoutMillis: limits.waitMs ?? 0,
    // A startup parameter: set on every connection the pool opens.
    ...(limits.idleInTransactionMs ? { idle_in_transaction_session_timeout: limits.idleInTransactionMs } : {})
  })
  // An idle client losing its server (restart, network) must not crash the process; the pool replaces it.
  pool.on('error', () => {})
  // pool.query takes a connection through connect(callback), Kysely and cursors through connect().
  const connect = pool.connect.bind(pool) as (callback?: (err: Error | undefined, ...rest: unknown[]) => void) => Promise<pg.PoolClient> | undefined
  pool.connect = ((callback?: (err: Error | undefined, ...rest: unknown[]) => void) => callback === undefined
    ? connect()!.catch((err: Error) => { throw busy(err) })
    : connect((err, ...rest) => callback(err == null ? err : busy(err), ...rest))) as typeof pool.connect
  return pool
}

const pools = new WeakMap<DB, pg.Pool>()

export function createDb (pool: pg.Pool): DB {
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  pools.set(db, pool)
  return db
}

/**
 * Runs `read` in one snapshot (a read-only REPEATABLE READ transaction): a page of rows and the total that goes with
 * it agree even while rows are added or removed, which two statements on the pool do not.
 */
export async function inOneSnapshot<T> (db: DB, read: (snapshot: DB) => Promise<T>): Promise<T> {
  return await db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(read)
}

/** The pool behind a DB, for what Kysely does not offer: prepared statements and array rows. */
export function poolOf (db: DB): pg.Pool {
  const pool = pools.get(db)
  if (pool === undefined) throw new Error('not a DB made by createDb')
  return pool
}

// Each name is prepared once per connection and kept by it; the cap bounds what a connection holds.
const PREPARED_MAX = 100
const prepared = new Map<string, string>()

function statementName (text: string): string | undefined {
  let name = prepared.get(text)
  if (name === undefined && prepared.size < PREPARED_MAX) prepared.set(text, name = `sb_${prepared.size}`)
  return name
}

/**
 * Runs a hot read as a named prepared statement, which PostgreSQL parses and plans once per connection
 * rather than per request (filtered general-metrics: 1,450 → 3,100 requests/s, docs/calls.md). Only for
 * statements that name their columns (a prepared `SELECT *` fails once a migration adds one) and that
 * inline values whose best plan differs (enums, LIMIT), so that a generic plan fits every parameter. Rows
 * as arrays spare an object per row where there are many.
 */
export async function queryPrepared<R extends object> (db: DB, query: CompiledQuery, rowMode?: 'array'): Promise<R[]> {
  const config = { name: statementName(query.sql), text: query.sql, values: query.parameters as unknown[] }
  const { rows } = rowMode === 'array' ? await poolOf(db).query({ ...config, rowMode }) : await poolOf(db).query(config)
  return rows as R[]
}

/**
 * A large result as a stream of `map(row)`, read through a cursor `batch` array rows at a time so memory
 * stays flat whatever the row count. The connection goes back to the pool when the stream ends or is
 * destroyed (a client leaving mid-download), and when its reader takes nothing for `stallMs` (0: never):
 * a client that stops reading must not hold the connection for as long as the socket stays open.
 */
export function cursorStream<T> (db: DB, query: CompiledQuery, batch: number, map: (row: unknown[]) => T, stallMs = 0): Readable {
  let client: pg.PoolClient | undefined
  let cursor: Cursor<unknown[]> | undefined
  let failed: Error | undefined
  let reading: Promise<void> = Promise.resolve()
  let stall: NodeJS.Timeout | undefined
  return new Readable({
    objectMode: true,
    // Room for two batches: the next is read from PostgreSQL while the last is still being written.
    highWaterMark: 2 * batch,
    read () {
      clearTimeout(stall)
      reading = (async () => {
        try {
          if (cursor === undefined) {
            client = await poolOf(db).connect()
            cursor = client.query(new Cursor<unknown[]>(query.sql, query.parameters as unknown[], { rowMode: 'array' }))
          }
          const rows = await cursor.read(batch)
          for (const row of rows) this.push(map(row))
          if (rows.length < batch) this.push(null)
          else if (stallMs > 0) {
            // Cleared by the next read, which comes as soon as the reader has taken a batch of the two buffered.
            stall = setTimeout(() => this.destroy(Object.assign(new Error(`the reader took no rows for ${stallMs} ms`), { code: 'READER_STALLED' })), stallMs)
          }
        } catch (err) {
          failed = err as Error
          this.destroy(failed)
        }
      })()
    },
    destroy (err, done) {
      clearTimeout(stall)
      // After the pending read; a connection whose query failed is closed rather than reused.
      void reading.then(async () => {
        if (failed === undefined) await cursor?.close()
      }).then(() => client?.release(failed), (closeErr: Error) => client?.release(closeErr)).then(() => done(err))
    }
  })
}
