import type { Test } from 'tap'
import { createLogger } from '../../src/logger.ts'
import { enqueuePostCall, type ConditionVerdicts } from '../../src/modules/deliveries/engine.ts'
import { createAccount, setup, type Account, type TestContext } from './app.ts'
import { insertCalls, type CallSeed } from './calls.ts'
import { poll } from './poll.ts'

// DELIVERY_TIME_SCALE=0.001 turns the default schedule's pauses (1 min … 48 h) into 60 ms … 173 s; tests
// that run a whole schedule use short custom schedules or answer success early.
export const FAST = { DELIVERY_TIME_SCALE: '0.001', DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIMEOUT_MS: '2000' }

/** The app with its workers, FAST unless `env` says otherwise, and one account. */
export async function fastSetup (t: Test, env: Record<string, string> = {}) {
  const ctx = await setup(t, { ...FAST, ...env }, { workers: true })
  const account = await createAccount(ctx.db)
  return { ...ctx, account }
}

/** An analysed call of the agent, and its deliveries enqueued as the analysis does. */
export async function analysedCall (ctx: TestContext, account: Account, agent: { _id: string, agent_name: string }, seed: CallSeed = {}, verdicts: ConditionVerdicts = new Map()) {
  const [id] = await insertCalls(ctx.db, account.user.id, agent, [{
    call_summary: 'Booked.', sentiment: 'positive', sentiment_explanation: 'happy', task_achieved: true,
    custom_analysis_data: JSON.stringify({ people: 2, caller_name: 'Ada Lovelace' }),
    transcription: [{ speaker: 'agent', content: 'Hello', timestamp: 1 }, { speaker: 'user', content: 'Hi', timestamp: 2 }],
    direction: 'inbound', call_from: '+4930123456', call_to: '+14155550123', ...seed
  }])
  const call = await ctx.db.selectFrom('calls').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
  await ctx.db.transaction().execute(async (trx) => await enqueuePostCall(trx, { boss: ctx.boss, log: createLogger(ctx.config) }, call, verdicts))
  return call
}

export async function deliveries (ctx: TestContext, account: Account, query = '') {
  return (await ctx.app.inject({ method: 'GET', url: `/v1/webhook-deliveries${query}`, headers: account.headers })).json()
}

/** Polls the delivery list until every delivery has left `pending`. */
export async function settled (t: Test, ctx: TestContext, account: Account, count: number) {
  const done = (list: any) => list.total === count && list.data.every((d: { status: string }) => d.status !== 'pending')
  const list = await poll(() => deliveries(ctx, account), done, { intervalMs: 30 })
  if (!done(list)) t.fail(`deliveries did not settle: ${JSON.stringify(list)}`)
  return list.data
}
