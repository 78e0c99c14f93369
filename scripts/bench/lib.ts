// What the benchmark scripts share: their own database, server processes, load runs and memory readings.
import { spawn, type ChildProcess } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import { createInterface } from 'node:readline'
import autocannon from 'autocannon'
import { loadConfig } from '../../src/config.ts'
import { createPool } from '../../src/db/database.ts'
import { migrate } from '../../src/db/migrate.ts'
import { openDatabase } from '../../src/db/open.ts'
import { createLogger } from '../../src/logger.ts'

const ROOT = path.resolve(import.meta.dirname, '../..')

// The V8 flags `npm start` gives the server, so that the benchmarks measure what runs.
const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }
const START_FLAGS = pkg.scripts.start.split(' ').filter((word) => word.startsWith('--'))

/** The secrets key of the benchmark's database and servers: fixed, since that database is kept between runs. */
export const BENCH_SECRETS_KEY = process.env.SECRETS_KEY ?? Buffer.alloc(32, 0x42).toString('base64')

/** The benchmark's database: BENCH_DATABASE_URL, or an embedded one in BENCH_DATA_DIR (default ./data/bench), kept between runs. */
export async function benchDatabase () {
  const config = loadConfig({ DATABASE_URL: process.env.BENCH_DATABASE_URL, SECRETS_KEY: BENCH_SECRETS_KEY, DATA_DIR: process.env.BENCH_DATA_DIR ?? path.join(ROOT, 'data/bench') })
  const { url, embedded } = await openDatabase(config, createLogger({ logLevel: 'warn' }, 2), 'shared')
  const pool = createPool(url, 4)
  await migrate(pool)
  return { url, pool, stop: async () => { await pool.end(); await embedded?.stop() } }
}

export async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    }).on('error', reject)
  })
}

export interface Server { url: string, child: ChildProcess, stop: () => Promise<void> }

/** Starts a script (the real server, as `npm start` does, or the baseline) as its own process and waits until it answers. */
export async function startServer (script: string, env: Record<string, string>, readyPath: string, options: { onLogLine?: (line: string) => void } = {}): Promise<Server> {
  const port = await freePort()
  const flags = script === 'src/main.ts' ? START_FLAGS : []
  const child = spawn(process.execPath, [...flags, path.join(ROOT, script)], {
    cwd: ROOT,
    // Rate limits off (and the cap on one address's pending call streams: every caller is on loopback): a benchmark
    // measures what the server can do, not the limits put on one client.
    env: { ...process.env, SECRETS_KEY: BENCH_SECRETS_KEY, RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_PER_ADDRESS: '0', VOICE_PENDING_STREAMS_PER_ADDRESS: '0', LOG_LEVEL: 'warn', ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', options.onLogLine === undefined ? 'ignore' : 'pipe', 'inherit']
  })
  if (options.onLogLine !== undefined) createInterface({ input: child.stdout! }).on('line', options.onLogLine)
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`${script} exited with ${child.exitCode}`)
    const ok = await fetch(url + readyPath).then((r) => r.status < 500, () => false)
    if (ok) break
    if (i > 300) throw new Error(`${script} did not start`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return {
    url,
    child,
    stop: async () => {
      child.kill('SIGTERM')
      await new Promise((resolve) => child.once('exit', resolve))
    }
  }
}

export interface LoadResult { rps: number, p50: number, p99: number, errors: number, non2xx: number }

/**
 * `connections` clients for `seconds`, each request's path from `paths` in turn, after a second unmeasured
 * (the route's code and prepared statements warm, as they are in a server that runs). Latencies are those
 * of requests on open connections: autocannon writes each connection's first request before the
 * connection is made and times it from there, so the fifty connections it opens at once lend their first
 * requests their set-up, up to half a second (docs/calls.md). Those first requests are left out.
 */
export async function load (url: string, paths: string[], headers: Record<string, string>, seconds: number, connections = 50): Promise<LoadResult> {
  let next = 0
  const requests = [{ setupRequest: (request: autocannon.Request) => ({ ...request, path: paths[next++ % paths.length] }) }]
  await autocannon({ url, connections, duration: 1, headers, requests })
  const latencies: number[] = []
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    headers,
    requests,
    setupClient: (client) => {
      let first = true
      client.on('response', (_status: number, _bytes: number, ms: number) => {
        if (!first) latencies.push(ms)
        first = false
      })
    }
  })
  latencies.sort((a, b) => a - b)
  const percentile = (q: number) => Math.round(latencies[Math.max(0, Math.ceil(q * latencies.length) - 1)] ?? 0)
  return { rps: Math.round(result.requests.average), p50: percentile(0.5), p99: percentile(0.99), errors: result.errors, non2xx: result.non2xx }
}

/** Line feeds in a chunk, found natively: a byte-by-byte loop would take the CPU the measured process needs. */
export function countLines (chunk: Uint8Array): number {
  let count = 0
  for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) count++
  return count
}

/** Samples a process's resident memory every 50 ms; `stop` answers the peak in MB. */
export function sampleRss (pid: number): { stop: () => Promise<number> } {
  let peak = 0
  const read = async () => {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '')
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
    peak = Math.max(peak, kb)
  }
  const timer = setInterval(() => { void read() }, 50)
  return { stop: async () => { clearInterval(timer); await read(); return Math.round(peak / 1024) } }
}

/** Prints rows as an aligned table. */
export function table (rows: Array<Record<string, string | number>>): string {
  const columns = Object.keys(rows[0])
  const width = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)))
  const line = (values: string[]) => values.map((v, i) => (i === 0 ? v.padEnd(width[i]) : v.padStart(width[i]))).join('  ')
  return [line(columns), line(width.map((w) => '-'.repeat(w))), ...rows.map((r) => line(columns.map((c) => String(r[c]))))].join('\n')
}

/** The q-quantile of sorted values (the nearest rank); NaN when there are none. */
export const quantile = (sorted: number[], q: number) => sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]
