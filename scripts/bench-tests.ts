// npm run bench:tests — a suite of agent tests (docs/testing.md) against stand-ins: BENCH_TESTS (20) scenarios,
// half scripted callers, half personas played by the LLM stand-in, each with a criterion for the judge stand-in, run
// as POST /v1/agent/:id/tests/run runs them. Measured in the same run: bare chat completions against the same
// stand-in, one after another, the model requests a run is made of. Prints a table, then one JSON line.
import type { Test } from 'tap'
import { loadConfig } from '../src/config.ts'
import { createDb } from '../src/db/database.ts'
import { prepareSecrets } from '../src/db/stored-secrets.ts'
import { createBoss } from '../src/jobs/boss.ts'
import { createQueues } from '../src/jobs/queues.ts'
import { createLogger } from '../src/logger.ts'
import { createMailer } from '../src/mail/mailer.ts'
import { createScenario, MAX_SCENARIOS, runTests } from '../src/modules/agent-tests/tests.ts'
import { startOpenAiHttpStandin } from '../test/helpers/openai-http-standin.ts'
import { readArgs } from './args.ts'
import { BENCH_SECRETS_KEY, benchDatabase, table } from './bench/lib.ts'
import { seedAccount } from './seed-data.ts'

readArgs({
  name: 'bench:tests',
  usage: `usage: npm run bench:tests

A suite of agent tests against an LLM stand-in and a judge stand-in, timed, beside bare chat completions.

  -h, --help          this text
  BENCH_TESTS         scenarios in the suite (default 20, at most ${MAX_SCENARIOS})
  BENCH_DATABASE_URL  the benchmark's database (default: an embedded one in BENCH_DATA_DIR, ./data/bench)`
}, { options: {} })
const COUNT = Math.min(MAX_SCENARIOS, Number(process.env.BENCH_TESTS ?? 20))
const PERSONA_LINES = ['I would like a table for two.', 'Tonight at eight, please.', 'Thanks, that is all.']

const host = { teardown () {} } as unknown as Test
const llm = await startOpenAiHttpStandin(host)
// The persona (not streamed) says its lines, then hangs up; the agent (streamed) echoes what it heard.
llm.replyTo = (body) => {
  if (body.stream === true) return undefined
  const said = (body.messages as Array<{ role: string }>).filter((m) => m.role === 'assistant').length
  return { text: PERSONA_LINES[said] ?? '[HANG UP]' }
}
const judge = await startOpenAiHttpStandin(host)
judge.replyTo = (body) => {
  const keys = [...(body.messages[0].content as string).matchAll(/^(c\d+): /gm)].map((m) => m[1])
  return { text: JSON.stringify({ criteria: Object.fromEntries(keys.map((key) => [key, { passed: true, reason: 'it did' }])) }) }
}

const database = await benchDatabase()
const db = createDb(database.pool)
const config = loadConfig({ DATABASE_URL: database.url, SECRETS_KEY: BENCH_SECRETS_KEY, LLM_URL: llm.url, ANALYSER: 'openai', ANALYSER_BASE_URL: judge.url, ANALYSER_API_KEY: 'sk-bench' })
await prepareSecrets(config, db)
const log = createLogger({ logLevel: 'warn' }, 2)
const boss = createBoss(database.url, config)
boss.on('error', (err) => log.error({ err }, 'job queue error'))
await boss.start()
await createQueues(boss, config)
const mailer = createMailer(db, config, log)

const account = await seedAccount(db, 'bench-tests@localhost')
const agentId = account.agents[0].id
// The database is kept between runs: the suite is made afresh.
await db.deleteFrom('agent_tests').where('agent_id', '=', agentId).execute()
for (let i = 0; i < COUNT; i++) {
  await createScenario(db, account.userId, agentId, {
    name: `bench ${i}`,
    caller: i % 2 === 0 ? { type: 'script', lines: ['Hello, I need a table.', 'For two people.', 'Thank you.'] } : { type: 'persona', persona: 'Ada wants a table for two tonight.', max_turns: 5 },
    expectations: [{ type: 'transcript_contains', text: 'you said' }, { type: 'criterion', criterion: 'The agent listened to the caller.' }]
  })
}

// Baseline: bare chat completions against the same stand-in, one after another.
const BASELINE = 200
const baselineStart = performance.now()
for (let i = 0; i < BASELINE; i++) {
  const res = await fetch(`${llm.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'bench', stream: true, messages: [{ role: 'user', content: 'Hi' }] }) })
  await res.text()
}
const baselineMs = (performance.now() - baselineStart) / BASELINE
llm.requests.chat.length = 0
judge.requests.chat.length = 0

const started = performance.now()
const run = await runTests({ db, boss, config, log, mailer }, account.userId, agentId, {})
const runMs = Math.round(performance.now() - started)
const modelRequests = llm.requests.chat.length + judge.requests.chat.length
const turns = run.results.reduce((sum, r) => sum + r.caller_turns, 0)

process.stdout.write(table([
  { measure: 'scenarios', value: run.results.length },
  { measure: 'passed', value: run.passed },
  { measure: 'caller turns', value: turns },
  { measure: 'model requests (agent, persona, judge)', value: modelRequests },
  { measure: 'suite run (ms)', value: runMs },
  { measure: 'per scenario (ms)', value: Math.round(runMs / run.results.length) },
  { measure: 'baseline: one bare chat completion (ms)', value: Number(baselineMs.toFixed(2)) }
]) + '\n\n')
process.stdout.write(JSON.stringify({
  bench: 'tests',
  at: new Date().toISOString(),
  scenarios: run.results.length,
  passed: run.passed,
  failed: run.failed,
  caller_turns: turns,
  model_requests: modelRequests,
  run_ms: runMs,
  per_scenario_ms: Math.round(runMs / run.results.length),
  baseline_completion_ms: Number(baselineMs.toFixed(2)),
  ratios: { run_vs_sequential_requests: Number((runMs / (modelRequests * baselineMs)).toFixed(2)) }
}) + '\n')
await mailer.close()
await boss.stop({ graceful: false })
await database.stop()
process.exit(run.failed === 0 ? 0 : 1)
