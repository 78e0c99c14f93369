import t from 'tap'
import { poll } from '../../helpers/poll.ts'
import { callsPerNumber, create, finished, listen, number, view } from './twilio.ts'

// The dialler's calling hours in each contact's time zone (a fake clock), its per-minute cap, and numbers put on the
// do-not-call list after the import; through the Twilio stand-in.

t.test('calling hours in each contact\'s zone, with a fake clock; the per-minute cap', async (t) => {
  // Monday 30 November 2026, 14:00 UTC: 09:00 in New York, 06:00 in Los Angeles, 15:00 in Berlin.
  let now = new Date('2026-11-30T14:00:00Z')
  const ctx = await listen(t, {}, { now: () => now })
  const ny = Array.from({ length: 20 }, (_, i) => number(i, 12125560000))
  const la = Array.from({ length: 20 }, (_, i) => number(i, 14155560000))
  const berlin = Array.from({ length: 20 }, (_, i) => number(i, 493012340000))
  const laByColumn = number(99, 12125560000) // a New York number with a Los Angeles `timezone` column
  for (const to of [...ny, ...la, ...berlin, laByColumn]) ctx.twilio.callee(to, { answer: 'answer', hangUpAfterMs: 1500 })
  const hours = Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri'].map((d) => [d, [{ start: '09:00', end: '17:00' }]]))
  const campaign = await create(ctx, {
    calling_hours: hours,
    max_concurrent_calls: 10,
    max_calls_per_minute: 25,
    contacts: [...ny, ...la, ...berlin].map((to) => ({ phone_number: to })).concat([{ phone_number: laByColumn, timezone: 'America/Los_Angeles' } as never])
  })
  t.match(await view(ctx, campaign._id), { timezones: ['America/Los_Angeles', 'America/New_York', 'Europe/Berlin'] })

  const called = () => new Set(ctx.twilio.calls.map((c) => c.to))
  // 40 are open (New York and Berlin), but 25 a minute: the clock stands still, so the cap holds at 25.
  await poll(() => view(ctx, campaign._id), (c) => c.progress.done === 25, { message: (c) => JSON.stringify(c.progress) })
  const tokenTurns = async () => (await ctx.db.selectFrom('campaigns').select('tick_token').executeTakeFirstOrThrow()).tick_token
  for (let i = 0, token = await tokenTurns(); i < 3; i++) token = await poll(tokenTurns, (next) => next !== token) // three more ticks
  t.equal(called().size, 25, 'no more than 25 new calls within the minute')
  now = new Date('2026-11-30T14:01:01Z')
  await poll(() => view(ctx, campaign._id), (c) => c.progress.done === 40, { message: (c) => JSON.stringify(c.progress) })
  for (let i = 0, token = await tokenTurns(); i < 3; i++) token = await poll(tokenTurns, (next) => next !== token)
  t.same([...called()].filter((to) => la.includes(to) || to === laByColumn), [], 'nobody in Los Angeles is called at 06:00 there')
  t.equal((await view(ctx, campaign._id)).progress.pending, 21)

  // 17:30 UTC: 09:30 in Los Angeles, 18:30 in Berlin (closed; its contacts are done anyway).
  now = new Date('2026-11-30T17:30:00Z')
  const done = await finished(ctx, campaign._id)
  t.match(done.progress, { done: 61, outcomes: { success: 61 } })
  t.ok(called().has(laByColumn), 'the row\'s own zone was used')
})

t.test('do-not-call numbers listed after the import are not dialled', async (t) => {
  let now = new Date('2026-11-30T14:00:00Z')
  const ctx = await listen(t, {}, { now: () => now })
  const list = Array.from({ length: 5 }, (_, i) => number(i))
  for (const to of list) ctx.twilio.callee(to, { answer: 'answer', hangUpAfterMs: 1500 })
  // The import sees none listed; the campaign starts in a minute, by when two are.
  const campaign = await create(ctx, { start_at: now.getTime() + 60_000, contacts: list.map((to) => ({ phone_number: to })) })
  for (const phone of [number(1), number(3)]) {
    const listed = await ctx.app.inject({ method: 'POST', url: '/v1/dnc', headers: ctx.account.headers, payload: { phone_number: phone } })
    t.equal(listed.statusCode, 201)
  }
  t.equal(ctx.twilio.calls.length, 0, 'nobody called before the start')
  now = new Date('2026-11-30T14:01:01Z')
  const done = await finished(ctx, campaign._id)
  t.same(done.progress.outcomes, { success: 3, do_not_call: 2 })
  t.same([...callsPerNumber(ctx.twilio).keys()].sort(), [number(0), number(2), number(4)])
})
