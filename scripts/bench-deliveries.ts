// npm run bench:deliveries [-- --chaos] — the post-call delivery engine under load.
// BENCH_DELIVERIES (20,000) analysed calls commit their deliveries to a local receiver, which fails the first
// attempt of every tenth; a separate worker process (ROLE=worker) delivers them. Measured in the same run:
// undici POSTs to the same receiver and pg-boss draining plain jobs (batch 100, burst), the two things a
// delivery is made of. --chaos kills the worker with SIGKILL three times during the run and checks that
// afterwards every delivery id reached the receiver and none is left pending.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { PgBoss } from 'pg-boss'
import { Agent, request } from 'undici'
import { loadConfig } from '../src/config.ts'
import { createDb } from '../src/db/database.ts'
import { newId } from '../src/db/ids.ts'
import { createLogger } from '../src/logger.ts'
import { enqueuePostCall } from '../src/modules/deliveries/engine.ts'
import { createQueues } from '../src/jobs/queues.ts'
import { BENCH_SECRETS_KEY, benchDatabase, startServer, table, type Server } from './bench/lib.ts'
import { readArgs } from './args.ts'
import { seedAccount } from './seed-data.ts'

const { values } = readArgs({
  name: 'bench:deliveries',
  usage: `usage: npm run bench:deliveries [-- --chaos]

The post-call delivery engine under load: BENCH_DELIVERIES analysed calls deliver to a local receiver through a
worker process, beside undici POSTs and pg-boss draining plain jobs measured in the same run.

  --chaos             kill the worker three times during the run, then check that nothing was lost
  -h, --help          this text
  BENCH_DELIVERIES    deliveries to make (default 20000)
  BENCH_DATABASE_URL  the benchmark's database (default: an embedded one in BENCH_DATA_DIR, ./data/bench)`
}, { options: { chaos: { type: 'boolean', default: false } } })
const COUNT = Number(process.env.BENCH_DELIVERIES ?? 20_000)
const BATCH = 50
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]

const database = await benchDatabase()
const db = createDb(database.pool)

// The receiver: notes when each delivery first arrives; the first attempt of every tenth call gets a 500.
const committedAt = new Map<string, number>()
const firstSeen = new Map<string, number>()
const succeeded = new Set<string>()
let requests = 0
const receiver = http.createServer((req, res) => {
  let raw = ''
  req.on('data', (chunk) => { raw += chunk })
  req.on('end', () => {
    if (req.url === '/raw') return res.end('{}')
    requests++
    const callId = (JSON.parse(raw) as { call_id: string }).call_id
    if (!firstSeen.has(callId)) firstSeen.set(callId, performance.now())
    const fail = Number.parseInt(callId.slice(-2), 16) % 10 === 0 && req.headers['x-service-attempt'] === '1'
    if (!fail) succeeded.add(req.headers['x-service-delivery-id'] as string)
    res.writeHead(fail ? 500 : 200).end(fail ? 'try again' : '{"ok":true}')
  })
})
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`

// Baseline 1: undici POSTs of the same size to the same receiver, 20 at a time.
const body = JSON.stringify({ call_id: 'x'.repeat(24), transcription: Array(4).fill({ speaker: 'user', content: 'x'.repeat(80) }) })
const dispatcher = new Agent({ connections: 64 })
let posted = 0
const postStart = performance.now()
await Promise.all(Array.from({ length: 20 }, async () => {
  while (posted < COUNT) {
    posted++
    const res = await request(`${receiverUrl}/raw`, { method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher })
    await res.body.dump()
  }
}))
const undiciRate = Math.round(COUNT / ((performance.now() - postStart) / 1000))
await dispatcher.close()

// Baseline 2: pg-boss draining COUNT plain jobs, batch 100, burst.
const boss = new PgBoss({ connectionString: database.url, useListenNotify: true, supervise: false, schedule: false, max: 4 })
await boss.start()
const drainQueue = `bench-drain-${Date.now()}`
await boss.createQueue(drainQueue, { notify: true })
for (let i = 0; i < COUNT; i += 1000) await boss.insert(drainQueue, Array.from({ length: Math.min(1000, COUNT - i) }, () => ({ data: {} })))
let drained = 0
const drainStart = performance.now()
await new Promise<void>((resolve) => {
  void boss.work(drainQueue, { batchSize: 100, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 }, async (jobs) => {
    drained += jobs.length
    if (drained >= COUNT) resolve()
  })
})
const drainRate = Math.round(COUNT / ((performance.now() - drainStart) / 1000))
await boss.offWork(drainQueue)
await boss.deleteQueue(drainQueue)

// The engine: a worker process, and the calls' deliveries committed from here as the analysis would.
const env = {
  DATABASE_URL: database.url,
  SECRETS_KEY: BENCH_SECRETS_KEY,
  ROLE: 'worker',
  DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true',
  DELIVERY_TIME_SCALE: '0.001',
  DELIVERY_TIMEOUT_MS: '5000',
  DELIVERY_CONCURRENCY: process.env.BENCH_CONCURRENCY ?? '400',
  NODE_OPTIONS: process.env.BENCH_WORKER_NODE_OPTIONS ?? ''
}
await createQueues(boss, loadConfig(env))
let worker: Server = await startServer('src/main.ts', env, '/health')
const account = await seedAccount(db, 'bench-deliveries@localhost')
const agent = account.agents[0]
await db.updateTable('agents').set({ webhook_url: `${receiverUrl}/hook` }).where('id', '=', agent.id).execute()
const log = createLogger({ logLevel: 'warn' }, 2)
const run = `run ${new Date().toISOString()}`

/** Commits the deliveries of `count` analysed calls, `perCommit` calls a transaction, as the analysis would. */
async function commitCalls (count: number, perCommit: number, pauseMs = 0): Promise<void> {
  for (let i = 0; i < count; i += perCommit) {
    const calls = Array.from({ length: Math.min(perCommit, count - i) }, () => ({
      id: newId(), user_id: account.userId, agent_id: agent.id, agent_name: agent.name, call_type: 'phone' as const, direction: 'outbound' as const,
      call_status: 'success' as const, call_from: '+14155550100', call_to: '+14155550199', start_timestamp: new Date(), end_timestamp: new Date(),
      duration_ms: 60_000, call_summary: run, transcription: JSON.stringify([{ speaker: 'user', content: 'x'.repeat(80), timestamp: Date.now() }])
    }))
    await db.transaction().execute(async (trx) => {
      const rows = await trx.insertInto('calls').values(calls).returningAll().execute()
      for (const row of rows) await enqueuePostCall(trx, { boss, log }, row)
    })
    const now = performance.now()
    for (const call of calls) committedAt.set(call.id, now)
    if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs))
  }
}

async function allDelivered (count: number): Promise<void> {
  const deadline = Date.now() + 600_000
  while (succeeded.size < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
}

// Latency: one call a transaction, about 100 a second, the worker idle between them.
const LATENCY_CALLS = Math.min(1000, COUNT)
await commitCalls(LATENCY_CALLS, 1, 10)
await allDelivered(LATENCY_CALLS)
const latencies = [...committedAt].map(([id, at]) => (firstSeen.get(id) ?? Infinity) - at).sort((a, b) => a - b)

// Throughput: COUNT deliveries committed while the worker is down, then drained by it.
await worker.stop()
succeeded.clear()
await commitCalls(COUNT, BATCH)
const kills: number[] = values.chaos ? [0.25, 0.5, 0.75].map((f) => Math.floor(f * COUNT)) : []
const killer = setInterval(() => {
  if (kills.length > 0 && succeeded.size >= kills[0]) {
    kills.shift()
    const old = worker
    old.child.kill('SIGKILL')
    process.stdout.write(`  chaos: killed the worker after ${succeeded.size} deliveries\n`)
    void new Promise((resolve) => old.child.once('exit', resolve))
      .then(async () => { worker = await startServer('src/main.ts', env, '/health') })
  }
}, 10)
worker = await startServer('src/main.ts', env, '/health')
// From the moment the worker answers; the deliveries delivered while it started count against the clock.
const started = performance.now()
await allDelivered(COUNT)
const seconds = (performance.now() - started) / 1000
clearInterval(killer)
// The receiver answers before the attempt is logged: give the last logs a moment to commit.
let pending = -1
for (let i = 0; i < 300 && pending !== 0; i++) {
  if (i > 0) await new Promise((resolve) => setTimeout(resolve, 100))
  pending = (await db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<number>().as('n'))
    .where('user_id', '=', account.userId).where('status', '=', 'pending').executeTakeFirstOrThrow()).n
}
await worker.stop()
await boss.stop({ graceful: false })
receiver.close()

const rate = Math.round(succeeded.size / seconds)
const p50 = Math.round(quantile(latencies, 0.5))
const p99 = Math.round(quantile(latencies, 0.99))
process.stdout.write(`\n${COUNT.toLocaleString('en')} deliveries drained by one worker process, every tenth failing its first attempt${values.chaos ? ', the worker killed 3 times' : ''}; latency over ${LATENCY_CALLS} paced commits\n\n`)
process.stdout.write(table([
  { measure: 'deliveries delivered', value: succeeded.size },
  { measure: 'delivery rate (deliveries/s)', value: rate },
  { measure: 'commit to first request p50 (ms)', value: p50 },
  { measure: 'commit to first request p99 (ms)', value: p99 },
  { measure: 'delivery requests received (with retries)', value: requests },
  { measure: 'left pending', value: pending },
  { measure: 'baseline: undici POST/s', value: undiciRate },
  { measure: 'baseline: pg-boss drain jobs/s', value: drainRate }
]) + '\n\n')
const checks = [
  // Under --chaos the rate mostly measures how long killed attempts take to expire: it is not judged.
  ...(values.chaos ? [] : [['delivery rate ≥ 25% of the pg-boss drain', rate / drainRate >= 0.25] as const]),
  ['first attempt p50 < 20 ms after commit', p50 < 20],
  ['first attempt p99 < 100 ms after commit', p99 < 100],
  ['every delivery reached the receiver, none pending', succeeded.size === COUNT && pending === 0]
] as const
for (const [name, ok] of checks) process.stdout.write(`${ok ? 'PASS' : 'FAIL'}  ${name}\n`)
process.stdout.write(JSON.stringify({
  bench: 'deliveries',
  at: new Date().toISOString(),
  chaos: values.chaos,
  deliveries: COUNT,
  delivered: succeeded.size,
  pending,
  rate_per_s: rate,
  first_attempt_ms: { p50, p99 },
  baselines: { undici_post_per_s: undiciRate, pgboss_drain_per_s: drainRate },
  ratios: { rate_vs_drain: Number((rate / drainRate).toFixed(2)), rate_vs_undici: Number((rate / undiciRate).toFixed(2)) },
  checks: Object.fromEntries(checks)
}) + '\n')
await database.stop()
