import t from 'tap'
import { poll } from '../../helpers/poll.ts'
import { start } from '../../helpers/server-process.ts'
import { TEST_SECRETS_KEY } from '../../setup/db-env.ts'
import { callsPerNumber, create, finished, listen, maxOverlap, number, twilioEnv } from './twilio.ts'

// Two worker processes share one campaign: `ROLE=worker` servers started as `npm start` starts them (this test's
// process serves the API and Twilio's webhooks only), one killed (SIGKILL) mid-run. Nobody is dialled twice, the cap
// holds across both, and what the dead process held is finished by the other: a tick job it held is retried once
// pg-boss's supervision finds it expired, and a call it had not placed yet ends `failed` at its deadline and is retried.

t.test('two worker processes, one killed mid-run: every contact called once and settled, the cap never exceeded', async (t) => {
  const ctx = await listen(t, {}, { workers: false })
  const env = { ...twilioEnv(ctx.twilio), ROLE: 'worker', DATABASE_URL: ctx.url, SECRETS_KEY: TEST_SECRETS_KEY, VOICE_STREAM_TIMEOUT_MS: '2000' }
  const [worker, survivor] = await Promise.all([start(env), start(env)])
  t.teardown(() => { worker.child.kill('SIGKILL'); survivor.child.kill('SIGKILL') })
  const list = Array.from({ length: 150 }, (_, i) => number(i))
  for (const to of list) ctx.twilio.callee(to, { answer: 'answer', hangUpAfterMs: 1500 })
  const campaign = await create(ctx, { max_concurrent_calls: 8, retry_settings: { max_attempts: 1, retry_delay_minutes: 0, on_outcomes: ['failed'] }, contacts: list.map((to) => ({ phone_number: to })) })
  await poll(() => ctx.twilio.calls.length, (n) => n >= 50, { timeoutMs: 120_000 })
  worker.child.kill('SIGKILL')
  await worker.exited
  const done = await finished(ctx, campaign._id, 170_000)
  t.same(done.progress.outcomes, { success: 150 }, 'every contact reached')
  t.same([...callsPerNumber(ctx.twilio).entries()].filter(([, n]) => n !== 1), [], 'nobody called twice')
  t.same(list.filter((to) => !callsPerNumber(ctx.twilio).has(to)), [], 'nobody left out')
  t.ok(maxOverlap(ctx.twilio) <= 8, `at most 8 calls at once (${maxOverlap(ctx.twilio)})`)
  const dials = await ctx.db.selectFrom('campaign_dials').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()
  t.ok(Number(dials.n) >= 150, `${dials.n} dials recorded`)
})
