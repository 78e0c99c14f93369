// npm run bench:calls — the calls API at a million calls.
// Seeds BENCH_CALLS (1,000,000) calls over 100 days once into its own database, then measures every calls
// endpoint at 50 concurrent clients against a bare Fastify primary-key route and the CSV export against
// PostgreSQL's own COPY, all in this run. BENCH_SECONDS (5) sets each load's length.
import { pipeline } from 'node:stream/promises'
import { Writable } from 'node:stream'
import { to as copyTo } from 'pg-copy-streams'
import { createDb } from '../src/db/database.ts'
import { createApiKey } from '../src/modules/users/queries.ts'
import { readArgs } from './args.ts'
import { benchDatabase, countLines, load, sampleRss, startServer, table, type LoadResult } from './bench/lib.ts'
import { seedBenchCalls } from './seed-data.ts'

readArgs({
  name: 'bench:calls',
  usage: `usage: npm run bench:calls

The calls API at a million calls: seeds BENCH_CALLS calls once into the benchmark's database, then measures
every calls endpoint at 50 connections beside a bare primary-key route, and the CSV export beside COPY.

  BENCH_CALLS         calls to seed (default 1000000)
  BENCH_SECONDS       the length of each load (default 5)
  BENCH_DATABASE_URL  the benchmark's database (default: an embedded one in BENCH_DATA_DIR, ./data/bench)`
}, {})

const CALLS = Number(process.env.BENCH_CALLS ?? 1_000_000)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const EMAIL = 'bench@localhost'

const day = (offset: number) => new Date(Date.now() - offset * 86_400_000).toISOString().slice(0, 10)

const database = await benchDatabase()
const db = createDb(database.pool)
const account = await seedBenchCalls(db, database.pool, EMAIL, CALLS)
await db.updateTable('api_keys').set({ revoked_at: new Date() }).where('user_id', '=', account.userId).where('revoked_at', 'is', null).execute()
const { key } = await createApiKey(db, account.userId, { name: 'bench' })
const headers = { 'x-api-key': key }

const sampleIds = (await db.selectFrom('calls').select('id').where('user_id', '=', account.userId)
  .orderBy(({ fn }) => fn('md5', ['id'])).limit(2000).execute()).map((r) => r.id)
const [agentA, agentB] = account.agents
const from30 = day(30)
const to = day(0)
const range30 = `date_from=${from30}&date_to=${to}`

const results: Record<string, LoadResult> = {}
const baseline = await startServer('scripts/bench/baseline-server.ts', { DATABASE_URL: database.url }, `/calls/${sampleIds[0]}`)
results['baseline: bare route, pk select'] = await load(baseline.url, sampleIds.map((id) => `/calls/${id}`), {}, SECONDS)
await baseline.stop()

const server = await startServer('src/main.ts', { DATABASE_URL: database.url, ROLE: 'api' }, '/health')
const endpoints: Record<string, string[]> = {
  'GET /v1/call/:id': sampleIds.map((id) => `/v1/call/${id}`),
  'list limit=100': ['/v1/call/list?limit=100'],
  'list agent+status': [`/v1/call/list?limit=100&agent_ids=${agentA.id}&call_status=success`],
  'list 2 agents, dir, type, 30d': [`/v1/call/list?limit=100&agent_ids=${agentA.id},${agentB.id}&direction=inbound&call_type=web&${range30}`],
  'list customer+workspace': [`/v1/call/list?limit=100&customer_id=${agentA.customerId}&workspace_id=${agentA.workspaceId}`],
  'list status=started (rare)': ['/v1/call/list?limit=100&call_status=started'],
  'list asc, skip=1000': ['/v1/call/list?limit=100&sort_order=asc&skip=1000'],
  'general-metrics 30d': [`/v1/call/general-metrics?${range30}`],
  'general-metrics 30d filtered': [`/v1/call/general-metrics?${range30}&agent_ids=${agentA.id}&direction=outbound&call_status=success`],
  'daily-metrics 30d': [`/v1/call/daily-metrics?${range30}`],
  'sentiment-stats 30d': [`/v1/call/sentiment-stats?agent_id=${agentA.id}&${range30}`],
  'costs-breakdown 30d by agent': [`/v1/call/costs-breakdown?${range30}&group_by=agent`],
  'costs-breakdown 30d by workspace': [`/v1/call/costs-breakdown?${range30}&group_by=workspace`],
  'agent call-stats 30d': [`/v1/agent/${agentA.id}/call-stats?${range30}`]
}
for (const [name, paths] of Object.entries(endpoints)) {
  process.stdout.write(`  ${name}…\n`)
  results[name] = await load(server.url, paths, headers, SECONDS)
}
await server.stop()

// The export on a fresh process, so that its peak memory is the export's own.
const exportFrom = day(101)
const exporter = await startServer('src/main.ts', { DATABASE_URL: database.url, ROLE: 'api' }, '/health')
const rss = sampleRss(exporter.child.pid!)
let exportRows = -1
let exportBytes = 0
const exportStart = performance.now()
const response = await fetch(`${exporter.url}/v1/call/list/export?date_from=${exportFrom}&date_to=${to}`, { headers })
for await (const chunk of response.body!) {
  exportBytes += chunk.length
  exportRows += countLines(chunk as Uint8Array)
}
const exportSeconds = (performance.now() - exportStart) / 1000
const exportPeakMb = await rss.stop()
await exporter.stop()

// PostgreSQL writing the same rows as CSV itself: the ceiling for any export.
const client = await database.pool.connect()
let copyRows = 0
const copyStart = performance.now()
await pipeline(client.query(copyTo(`COPY (
  SELECT c.id, c.agent_id, c.agent_name, c.call_type, c.direction, c.call_status, c.call_from, c.call_to, c.start_timestamp,
    c.end_timestamp, c.duration_ms / 1000.0, c.disconnection_reason, c.sentiment, c.task_achieved, c.phone_call_credits,
    c.web_call_credits, c.text_message_credits, c.call_forwarding_credits, t.key, t.value ->> 'input', t.value ->> 'output'
  FROM calls c LEFT JOIN LATERAL jsonb_each(c.token_usage) t ON true
  WHERE c.user_id = '${account.userId}' AND c.start_timestamp >= '${exportFrom}' AND c.start_timestamp < '${to}'::date + 1
  ORDER BY c.start_timestamp, c.id, t.key) TO STDOUT CSV`)), new Writable({
  write (chunk: Buffer, _encoding, done) {
    copyRows += countLines(chunk)
    done()
  }
}))
const copySeconds = (performance.now() - copyStart) / 1000
client.release()

const baseRps = results['baseline: bare route, pk select'].rps
const rows = Object.entries(results).map(([name, r]) => ({
  endpoint: name,
  'req/s': r.rps,
  'p50 ms': r.p50,
  'p99 ms': r.p99,
  'vs baseline': `${Math.round((r.rps / baseRps) * 100)}%`,
  errors: r.errors + r.non2xx
}))
const exportRate = Math.round(exportRows / exportSeconds)
const copyRate = Math.round(copyRows / copySeconds)
process.stdout.write(`\n${CALLS.toLocaleString('en')} calls; ${SECONDS} s per endpoint at 50 connections\n\n${table(rows)}\n\n`)
process.stdout.write(table([
  { export: 'GET /v1/call/list/export (100 days)', rows: exportRows, 'rows/s': exportRate, 'MB/s': (exportBytes / 1e6 / exportSeconds).toFixed(1), 'peak RSS MB': exportPeakMb },
  { export: 'baseline: COPY … TO STDOUT CSV', rows: copyRows, 'rows/s': copyRate, 'MB/s': '', 'peak RSS MB': '' }
]) + '\n\n')

const metricNames = Object.keys(results).filter((n) => /metrics|stats|breakdown/.test(n))
const listNames = Object.keys(results).filter((n) => n.startsWith('list'))
// The slowest of a group, beside the bare route's own p99: this machine's speed varies from minute to
// minute, and the bare route shows how fast it ran during this run.
const slowest = (names: string[]) => {
  const name = names.reduce((a, b) => (results[b].p99 > results[a].p99 ? b : a))
  return `slowest: ${name}, ${results[name].p99} ms; bare route: ${results['baseline: bare route, pk select'].p99} ms`
}
const checks: Array<[string, boolean, string?]> = [
  ['GET /v1/call/:id ≥ 50% of the bare route', results['GET /v1/call/:id'].rps / baseRps >= 0.5],
  ['every list p99 < 50 ms', listNames.every((n) => results[n].p99 < 50), slowest(listNames)],
  ['every metrics p99 < 50 ms', metricNames.every((n) => results[n].p99 < 50), slowest(metricNames)],
  ['export ≥ 30% of COPY', exportRate / copyRate >= 0.3],
  ['export peak RSS < 200 MB', exportPeakMb < 200],
  ['no errors', Object.values(results).every((r) => r.errors + r.non2xx === 0)]
]
for (const [name, ok, detail] of checks) process.stdout.write(`${ok ? 'PASS' : 'FAIL'}  ${name}${detail === undefined ? '' : ` (${detail})`}\n`)

process.stdout.write(JSON.stringify({
  bench: 'calls',
  at: new Date().toISOString(),
  calls: CALLS,
  seconds: SECONDS,
  connections: 50,
  endpoints: results,
  export: { rows: exportRows, rows_per_s: exportRate, peak_rss_mb: exportPeakMb, seconds: Number(exportSeconds.toFixed(2)) },
  baselines: { bare_route_rps: baseRps, copy_rows_per_s: copyRate },
  ratios: { call_by_id_vs_bare: Number((results['GET /v1/call/:id'].rps / baseRps).toFixed(2)), export_vs_copy: Number((exportRate / copyRate).toFixed(2)) },
  checks: Object.fromEntries(checks.map(([name, ok]) => [name, ok]))
}) + '\n')
await database.stop()
