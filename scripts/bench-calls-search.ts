// npm run bench:calls-search — the console's calls list (its queries) at BENCH_CALLS (100,000) calls.
// Seeds the calls once into an account of its own in the benchmark's database, then times, one query after another,
// the list's page and its total with each kind of search, and deep pages by keyset against the same depth by offset.
import { createDb } from '../src/db/database.ts'
import { countCalls, listCallsJson, type CallFilter } from '../src/modules/calls/queries.ts'
import { callSearch, COUNT_CAP } from '../src/modules/console/calls.ts'
import { readArgs } from './args.ts'
import { benchDatabase, quantile, table } from './bench/lib.ts'
import { seedBenchCalls } from './seed-data.ts'

readArgs({
  name: 'bench:calls-search',
  usage: `usage: npm run bench:calls-search

The console's calls list at BENCH_CALLS calls: seeds them once into the benchmark's database, then times each search
(a page of 51 and the total) and deep keyset pages against offsets, one query at a time.

  BENCH_CALLS         calls to seed (default 100000)
  BENCH_RUNS          times each query runs (default 30)
  BENCH_DATABASE_URL  the benchmark's database (default: an embedded one in BENCH_DATA_DIR, ./data/bench)`
}, {})

const CALLS = Number(process.env.BENCH_CALLS ?? 100_000)
const RUNS = Number(process.env.BENCH_RUNS ?? 30)
const EMAIL = 'bench-search@localhost'

const database = await benchDatabase()
const db = createDb(database.pool)
const account = await seedBenchCalls(db, database.pool, EMAIL, CALLS)
const userId = account.userId

/** p50 and p95 of `runs` sequential runs, in ms. */
async function time (run: () => Promise<unknown>): Promise<{ p50: string, p95: string }> {
  await run()
  const ms: number[] = []
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now()
    await run()
    ms.push(performance.now() - started)
  }
  ms.sort((a, b) => a - b)
  return { p50: quantile(ms, 0.5).toFixed(1), p95: quantile(ms, 0.95).toFixed(1) }
}

const page = (filter: CallFilter, extra: { after?: string, skip?: number } = {}) => async () =>
  await listCallsJson(db, userId, filter, { order: 'desc', limit: 51, skip: extra.skip ?? 0, after: extra.after })
const total = (filter: CallFilter) => async () => await countCalls(db, userId, filter, {}, COUNT_CAP)
const byDepth = async (depth: number) => (await db.selectFrom('calls').select('id').where('user_id', '=', userId)
  .orderBy('start_timestamp', 'desc').orderBy('id', 'desc').offset(depth - 1).limit(1).executeTakeFirstOrThrow()).id
const anId = await byDepth(Math.floor(CALLS / 2))
const deep = await byDepth(Math.floor(CALLS * 0.9))

const searches: Record<string, string> = {
  'no search': '',
  'call id': anId,
  'a whole number (~10 calls)': '+1 415 555 1234',
  'part of a number, rare (~100)': '555123',
  'the account\'s own number (every phone call)': '4155550100',
  'a word in every call (appointment)': 'appointment',
  'a phrase in ~25% ("not sure")': '"not sure"',
  'a word in no call (zebra)': 'zebra'
}
const rows: Array<Record<string, string | number>> = []
for (const [name, q] of Object.entries(searches)) {
  process.stdout.write(`  ${name}…\n`)
  const filter: CallFilter = { search: callSearch(q) }
  const found = await total(filter)()
  const [list, counted] = [await time(page(filter)), await time(total(filter))]
  rows.push({ query: name, matches: found > COUNT_CAP && q !== '' ? `>${COUNT_CAP.toLocaleString('en')}` : found, 'page p50 ms': list.p50, 'page p95 ms': list.p95, 'total p50 ms': counted.p50, 'total p95 ms': counted.p95 })
}
for (const [name, run] of Object.entries({
  [`keyset page at ${(CALLS * 0.9).toLocaleString('en')}`]: page({}, { after: deep }),
  [`offset page at ${(CALLS * 0.9).toLocaleString('en')} (the API's skip)`]: page({}, { skip: Math.floor(CALLS * 0.9) }),
  [`keyset page at ${(CALLS * 0.9).toLocaleString('en')}, searching "appointment"`]: page({ search: { words: 'appointment' } }, { after: deep }),
  [`keyset page at ${(CALLS * 0.9).toLocaleString('en')}, status=failed`]: page({ callStatus: ['failed'] }, { after: deep })
})) {
  process.stdout.write(`  ${name}…\n`)
  const measured = await time(run)
  rows.push({ query: name, matches: '', 'page p50 ms': measured.p50, 'page p95 ms': measured.p95, 'total p50 ms': '', 'total p95 ms': '' })
}
process.stdout.write(`\n${CALLS.toLocaleString('en')} calls, ${RUNS} runs each, one at a time\n${table(rows)}\n`)
await database.stop()
