// npm run bench:analytics — the console's Analytics page at BENCH_CALLS (100,000) calls.
// Seeds the calls once into an account of its own in the benchmark's database and gives them outcomes (an extracted
// field, transfers, timed turns), then times the page through a real server, one request after another: the default
// 30 days, the whole 100 days, one agent, and the Calls list that a bar links to; beside it the Calls list without a
// filter (the baseline of this run) and each outcome query alone. Ends with one JSON line of the figures.
import { createDb } from '../src/db/database.ts'
import { extractedValues, medianWaitBuckets, outcomeCounts, transferCounts, turnWaits } from '../src/modules/calls/queries.ts'
import { dateRange } from '../src/http/dates.ts'
import { createSession } from '../src/modules/console/queries.ts'
import { SESSION_COOKIE } from '../src/modules/console/security.ts'
import { readArgs } from './args.ts'
import { benchDatabase, quantile, startServer, table } from './bench/lib.ts'
import { seedBenchCalls } from './seed-data.ts'

readArgs({
  name: 'bench:analytics',
  usage: `usage: npm run bench:analytics

The console's Analytics page at BENCH_CALLS calls: seeds them once (with outcomes) into the benchmark's database,
then times the page through a server over loopback, one request at a time, and each outcome query alone.

  BENCH_CALLS         calls to seed (default 100000)
  BENCH_RUNS          times each request runs (default 20)
  BENCH_DATABASE_URL  the benchmark's database (default: an embedded one in BENCH_DATA_DIR, ./data/bench)`
}, {})

const CALLS = Number(process.env.BENCH_CALLS ?? 100_000)
const RUNS = Number(process.env.BENCH_RUNS ?? 20)
const EMAIL = 'bench-analytics@localhost'

const database = await benchDatabase()
const db = createDb(database.pool)
const account = await seedBenchCalls(db, database.pool, EMAIL, CALLS)
const userId = account.userId
// Outcomes the seed leaves out, given once: a city extracted from every analysed call (8 values), a transfer in 1 of
// 20 held calls (2 in 1 of 100), and 6-12 timed turns in 3 of 5 (a spread of waits around 0.9 s).
const { n: unfinished } = await db.selectFrom('calls').select((eb) => eb.fn.countAll<number>().as('n'))
  .where('user_id', '=', userId).where('call_status', '=', 'success').where('latency', 'is', null).where('custom_analysis_data', 'is', null).executeTakeFirstOrThrow()
if (unfinished > 0) {
  process.stdout.write(`giving ${unfinished} calls their outcomes\n`)
  await db.updateTable('agents').set({ data_retrieval: JSON.stringify([{ name: 'city', type: 'string', description: 'the caller\'s city', required: true }]) })
    .where('user_id', '=', userId).execute()
  await database.pool.query(`
    UPDATE calls SET
      custom_analysis_data = jsonb_build_object('city', (ARRAY['Lyon', 'Paris', 'Berlin', 'Madrid', 'Rome', 'Vienna', 'Oslo', 'Porto'])[1 + abs(hashtext(id)) % 8]),
      transfer_history = CASE WHEN abs(hashtext(id || 't')) % 100 = 0 THEN '[{"to": "+14155550111"}, {"to": "+14155550112"}]'::jsonb
        WHEN abs(hashtext(id || 't')) % 20 = 0 THEN '[{"to": "+14155550111"}]'::jsonb END,
      latency = CASE WHEN abs(hashtext(id || 'l')) % 5 < 3 THEN (
        SELECT jsonb_build_object('e2e', jsonb_build_object('p50', percentile_cont(0.5) WITHIN GROUP (ORDER BY w)), 'turns',
          jsonb_agg(jsonb_build_object('at', n, 'end_of_turn_ms', 200, 'transcription_ms', 150, 'llm_ms', 300, 'tts_ms', 120, 'e2e_ms', w)))
        FROM (SELECT n, 400 + abs(hashtext(id || n::text)) % 1200 AS w FROM generate_series(1, 6 + abs(hashtext(id)) % 7) AS n) AS t) END
    WHERE user_id = $1 AND call_status = 'success'`, [userId])
  await database.pool.query('VACUUM ANALYZE calls')
}

const day = (offset: number) => new Date(Date.now() - offset * 86_400_000).toISOString().slice(0, 10)
const [agent] = account.agents
const all = `from=${day(100)}&to=${day(0)}`

/** p50 and p95 of RUNS sequential runs after one to warm up, in ms. */
async function time (run: () => Promise<unknown>): Promise<{ p50: number, p95: number }> {
  await run()
  const ms: number[] = []
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now()
    await run()
    ms.push(performance.now() - started)
  }
  ms.sort((a, b) => a - b)
  return { p50: Math.round(quantile(ms, 0.5) * 10) / 10, p95: Math.round(quantile(ms, 0.95) * 10) / 10 }
}

const server = await startServer('src/main.ts', { DATABASE_URL: database.url, ROLE: 'api' }, '/health')
const results: Record<string, { p50: number, p95: number }> = {}
const rows: Array<Record<string, string | number>> = []
try {
  const { id } = await createSession(db, userId, { viaLink: false })
  const headers = { cookie: `${SESSION_COOKIE}=${id}` }
  const pages: Record<string, string> = {
    'calls list, no filter (baseline)': '/calls',
    'analytics, last 30 days (default)': '/analytics',
    'analytics, 100 days (every call)': `/analytics?${all}`,
    'analytics, 100 days, one agent': `/analytics?${all}&agent=${agent.id}`,
    'calls of a bar: 100 days, task achieved': `/calls?${all}&task=achieved`,
    'calls of a bar: 100 days, 2 transfers or 1': `/calls?${all}&transferred=yes`,
    'calls of a bar: 100 days, city = Oslo': `/calls?${all}&field=city&value=Oslo`
  }
  for (const [name, path] of Object.entries(pages)) {
    process.stdout.write(`  ${name}…\n`)
    const get = async () => {
      const res = await fetch(server.url + path, { headers })
      if (res.status !== 200) throw new Error(`${path}: ${res.status}`)
      return await res.text()
    }
    results[name] = await time(get)
    rows.push({ request: name, 'p50 ms': results[name].p50, 'p95 ms': results[name].p95, 'x baseline': Math.round((results[name].p50 / results['calls list, no filter (baseline)'].p50) * 10) / 10 })
  }
  const range = dateRange({ date_from: day(100), date_to: day(0) })
  const queries: Record<string, () => Promise<unknown>> = {
    'query: outcome counts (100 days)': async () => await outcomeCounts(db, userId, {}, range),
    'query: transfers (100 days)': async () => await transferCounts(db, userId, {}, range),
    'query: waits per turn, p50/p95 (100 days)': async () => await turnWaits(db, userId, {}, range),
    'query: calls by median wait (100 days)': async () => await medianWaitBuckets(db, userId, {}, range, 500, 7),
    'query: values of city (100 days)': async () => await extractedValues(db, userId, {}, range, 'city', 12)
  }
  for (const [name, run] of Object.entries(queries)) {
    process.stdout.write(`  ${name}…\n`)
    results[name] = await time(run)
    rows.push({ request: name, 'p50 ms': results[name].p50, 'p95 ms': results[name].p95, 'x baseline': '' })
  }
} finally {
  await server.stop()
  await database.stop()
}
process.stdout.write(`\n${CALLS.toLocaleString('en')} calls, ${RUNS} runs each, one at a time\n${table(rows)}\n`)
const figure = (name: string) => results[name]
process.stdout.write(JSON.stringify({
  bench: 'analytics',
  calls: CALLS,
  runs: RUNS,
  baseline_calls_list_p50_ms: figure('calls list, no filter (baseline)').p50,
  page_30_days_p50_ms: figure('analytics, last 30 days (default)').p50,
  page_30_days_p95_ms: figure('analytics, last 30 days (default)').p95,
  page_100_days_p50_ms: figure('analytics, 100 days (every call)').p50,
  page_100_days_p95_ms: figure('analytics, 100 days (every call)').p95,
  page_100_days_one_agent_p50_ms: figure('analytics, 100 days, one agent').p50,
  bar_calls_task_achieved_p50_ms: figure('calls of a bar: 100 days, task achieved').p50,
  bar_calls_field_value_p50_ms: figure('calls of a bar: 100 days, city = Oslo').p50,
  query_outcome_counts_p50_ms: figure('query: outcome counts (100 days)').p50,
  query_turn_waits_p50_ms: figure('query: waits per turn, p50/p95 (100 days)').p50
}) + '\n')
