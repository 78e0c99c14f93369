import t from 'tap'
import { createTestDatabase } from '../helpers/database.ts'
import { runScript } from '../helpers/scripts.ts'

// The turn-taking benchmark's harness, end to end (scripts/bench-turns.ts --smoke): a server of its own, its
// stand-ins, browser and phone callers in real time, the scoring and the JSON line. Only the shape is checked:
// timing goals belong to the benchmark, never to a test.

const rate = (value: unknown) => value === null || (typeof value === 'number' && value >= 0 && value <= 1)
const latency = (value: any) => typeof value === 'object' && value !== null && Object.keys(value).sort().join() === 'p50,p90' &&
  [value.p50, value.p90].every((ms) => ms === null || (Number.isInteger(ms) && ms >= 0))
const FIGURES = ['barge_in_reaction_ms', 'eot_ms', 'false_barge_in_rate', 'false_cutoff_rate', 'missed_barge_in_rate', 'pause_ms', 'pause_rate', 'unheard_rate']
const figuresOf = (object: any) => Object.fromEntries(FIGURES.map((key) => [key, object[key]]))

t.test('npm run bench:turns -- --smoke plays its cases over both transports and ends with one JSON line of figures', async (t) => {
  process.env.BENCH_DATABASE_URL = await createTestDatabase(t)
  const run = await runScript('bench-turns.ts', 'postgres://unused@127.0.0.1:9/none', '--smoke')
  t.equal(run.code, 0, run.stderr)
  const lines = run.stdout.trimEnd().split('\n')
  const result = JSON.parse(lines.at(-1)!)
  t.equal(lines.filter((line) => line.startsWith('{')).length, 1, 'one JSON line, the last')
  t.match(run.stdout, /while the agent talks/, 'human-readable figures before it')

  t.equal(result.bench, 'turns')
  t.equal(result.errors, 0, 'no call broke')
  t.equal(result.cases, 10, 'five cases over two transports')
  t.equal(result.transport, 'browser,twilio')
  t.equal(result.engine, 'cascade')
  t.equal(result.stt, 'deepgram', 'by default the cascade hears the corpus words through the Deepgram stand-in')
  for (const [name, figures] of [['clean', figuresOf(result)], ['noisy', result.noisy], ['10 dB', result.by_snr['10']], ['20 dB', result.by_snr['20']]] as const) {
    t.same(Object.keys(figures).sort(), FIGURES, `${name}: every figure`)
    t.ok(latency(figures.eot_ms) && latency(figures.barge_in_reaction_ms) && latency(figures.pause_ms), `${name}: latencies are p50 and p90 in ms`)
    t.ok(['false_cutoff_rate', 'false_barge_in_rate', 'missed_barge_in_rate', 'pause_rate', 'unheard_rate'].every((key) => rate(figures[key])), `${name}: rates are shares`)
  }
  // Every kind of case was scored: a turn was answered, a barge-in got a reaction time, the noisy turn counted.
  t.not(result.eot_ms.p50, null)
  t.not(result.barge_in_reaction_ms.p50, null)
  t.not(result.false_cutoff_rate, null)
  t.not(result.false_barge_in_rate, null)
  t.not(result.noisy.unheard_rate, null)
})

t.test('a wrong option is one line and exit 2', async (t) => {
  const usage = (mistake: string) => `bench:turns: ${mistake} (npm run bench:turns -- --help shows the usage)\n`
  const none = 'postgres://nobody@127.0.0.1:9/none'
  const cases: Array<[string[], string]> = [
    [['--transport', 'fax'], '--transport is browser, twilio or both, got fax'],
    [['--engine', 'fast'], '--engine is cascade, realtime or both, got fast'],
    [['--stt', 'whisper'], '--stt is deepgram or batch, got whisper'],
    [['--cases', '('], '--cases is a regular expression, got ('],
    [['--cases', 'no-such-case'], 'no case matches no-such-case'],
    [['--concurrency', '0'], '--concurrency is a number of calls, got 0']
  ]
  for (const [args, mistake] of cases) {
    const run = await runScript('bench-turns.ts', none, ...args)
    t.equal(run.code, 2, args.join(' '))
    t.equal(run.stderr, usage(mistake), args.join(' '))
  }
})
