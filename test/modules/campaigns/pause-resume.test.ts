import t from 'tap'
import { poll } from '../../helpers/poll.ts'
import { callsPerNumber, create, listen, number, view } from './twilio.ts'

// Pausing, resuming and cancelling a running campaign of 200 contacts (Twilio stand-in).

t.test('pause stops new calls and resume goes on; cancel leaves the rest uncalled', async (t) => {
  const ctx = await listen(t)
  const list = Array.from({ length: 200 }, (_, i) => number(i))
  for (const to of list) ctx.twilio.callee(to, { answer: 'answer', hangUpAfterMs: 1500 })
  const campaign = await create(ctx, { max_concurrent_calls: 2, contacts: list.map((to) => ({ phone_number: to })) })
  const act = async (action: string) => (await ctx.app.inject({ method: 'POST', url: `/v1/campaigns/${campaign._id}/${action}`, headers: ctx.account.headers })).json()
  await poll(() => ctx.twilio.calls.length, (n) => n >= 6)
  t.match(await act('pause'), { status: 'paused' })
  // Calls in progress end and are settled; then the dialler rests.
  await poll(() => ctx.db.selectFrom('campaigns').select('tick_token').executeTakeFirstOrThrow(), (c) => c.tick_token === null)
  const atPause = ctx.twilio.calls.length
  t.match((await view(ctx, campaign._id)).progress, { calling: 0, done: atPause, pending: 200 - atPause })
  t.match(await act('resume'), { status: 'active' })
  await poll(() => ctx.twilio.calls.length, (n) => n >= atPause + 6)
  const cancelled = await act('cancel')
  t.equal(cancelled.status, 'cancelled')
  await poll(() => view(ctx, campaign._id), (c) => c.progress.calling === 0)
  const end = await view(ctx, campaign._id)
  t.equal(end.progress.done + end.progress.cancelled, 200)
  t.equal(end.progress.done, ctx.twilio.calls.length, 'every call placed was settled; none after the cancel')
  t.ok(end.progress.cancelled > 0)
  t.same([...callsPerNumber(ctx.twilio).values()].filter((n) => n > 1), [], 'nobody called twice')
})
