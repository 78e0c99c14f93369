import t from 'tap'
import type { Workflow } from '../../src/modules/agents/workflow.ts'
import { createLogger } from '../../src/logger.ts'
import { createMailer } from '../../src/mail/mailer.ts'
import { actionConditions, registerDeliveryWorkers } from '../../src/modules/deliveries/engine.ts'
import { guardedAgent } from '../../src/net/guard.ts'
import { createAccount, setup, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { analysedCall, FAST } from '../helpers/deliveries.ts'
import { poll } from '../helpers/poll.ts'
import { startReceiver, type Receiver } from '../helpers/receiver.ts'
import { startInbox } from '../helpers/smtp.ts'

// A workflow's after-call API call steps as post-call deliveries (kind workflow_step): request shaped as an api_call
// action's, the step's schedule, failure e-mails and condition, headers read from the workflow at each attempt, and
// a step removed since the call. The voice path to them: test/voice/workflow.test.ts.

const step = (receiver: Receiver, id: string, extra: Record<string, unknown> = {}) => ({
  id, name: `Step ${id}`, type: 'api_call' as const, run: 'after_call' as const, url: `${receiver.url}/${id}?slot={{slot}}`, headers: { 'x-key': 'old' }, body: { guest: '{{guest}}' }, ...extra
})

async function withWorkflow (ctx: TestContext, agentId: string, workflow: Workflow) {
  await ctx.db.updateTable('agents').set({ workflow: JSON.stringify(workflow) }).where('id', '=', agentId).execute()
}

const rowsOf = async (ctx: TestContext, callId: string) => await ctx.db.selectFrom('webhook_deliveries').selectAll().where('call_id', '=', callId).orderBy('name').execute()

t.test('one delivery per step reached, shaped with the workflow\'s variables; its condition judged; headers as the workflow holds them at the attempt; a removed step fails at once', async (t) => {
  const inbox = await startInbox(t)
  const ctx = await setup(t, { ...FAST, SMTP_URL: inbox.url }) // the delivery workers start below
  const account = await createAccount(ctx.db)
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, account)
  const workflow: Workflow = {
    start: 'talk',
    steps: [
      { id: 'talk', name: 'Talk', type: 'conversation', instructions: 'Talk.' },
      step(receiver, 'crm', { retry_schedule: [60], notify: 'every_attempt', notify_email: 'ops@example.com' }),
      step(receiver, 'gone'),
      step(receiver, 'vip', { condition: 'the caller is a VIP' }),
      step(receiver, 'later')
    ]
  }
  await withWorkflow(ctx, agent._id, workflow)
  const seed = { workflow: JSON.stringify({ step: 'talk', path: [], variables: { guest: 'Ada', slot: '19:30' }, after: ['crm', 'gone', 'vip', 'later', 'never_was'] }) }
  t.same(await actionConditions(ctx.db, { agent_id: agent._id, workflow: JSON.parse(seed.workflow) }), [{ actionId: 'step:vip', condition: 'the caller is a VIP' }], 'the analysis judges the steps\' conditions')

  // The first attempt of crm fails and is retried on the step's schedule.
  let crmAttempts = 0
  const answer = (request: { url: string }) => ({ status: request.url.startsWith('/crm') && ++crmAttempts === 1 ? 500 : 200 })
  receiver.answers.push(answer, answer, answer, answer)
  const call = await analysedCall(ctx, account, agent, seed, new Map([['step:vip', { condition: 'the caller is a VIP', met: false }]]))
  // After the deliveries were stored, before their first attempts: "gone" leaves the workflow, crm's header changes.
  await withWorkflow(ctx, agent._id, { ...workflow, steps: workflow.steps.filter((s) => s.id !== 'gone').map((s) => s.id === 'crm' ? { ...s, headers: { 'x-key': 'new' } } : s) })
  const log = createLogger(ctx.config)
  const pool = guardedAgent(ctx.config.delivery)
  t.teardown(async () => await pool.close())
  await registerDeliveryWorkers({ db: ctx.db, boss: ctx.boss, config: ctx.config, log, agent: pool, mailer: createMailer(ctx.db, ctx.config, log) })

  const rows = await poll(() => rowsOf(ctx, call.id), (all) => all.length === 3 && all.every((r) => r.status !== 'pending'),
    { message: (all) => JSON.stringify(all.map((r) => [r.name, r.status])) })
  t.same(rows.map((r) => [r.action_id, r.kind, r.status]), [['crm', 'workflow_step', 'delivered'], ['gone', 'workflow_step', 'failed'], ['later', 'workflow_step', 'delivered']],
    'the unmet condition (vip) and a step the workflow does not have (never_was) are not sent')
  t.match(rows[0], { name: 'Step crm', schedule: [60], attempts_max: 2, attempts_made: 2 })
  t.match(rows[1].attempts, [{ error: /workflow step behind this delivery was removed/ }])
  t.equal(rows[1].attempts_made, 1, 'not retried')
  t.match(rows[2], { schedule: [60, 300, 1800, 7200, 21_600, 86_400, 172_800] }, 'the default schedule')

  const crm = receiver.received.filter((r) => r.url.startsWith('/crm'))
  t.equal(crm[0].url, '/crm?slot=19%3A30')
  t.match(crm[0].json, { guest: 'Ada', call_id: call.id }, 'the step\'s body beside the call payload, as an api_call action\'s')
  t.same(crm.map((r) => r.headers['x-key']), ['new', 'new'], 'headers read from the workflow at the attempts, not when the delivery was stored')
  t.equal(receiver.received.filter((r) => r.url.startsWith('/gone')).length, 0)

  // crm's failed first attempt (notify every_attempt, to its notify_email); gone's last one (the default, to the owner).
  const mails = await inbox.waitFor(2)
  t.same(mails.map((mail) => mail.to[0]).sort(), [account.user.email, 'ops@example.com'].sort(), 'the step\'s notify and notify_email')
})
