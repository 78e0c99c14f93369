import t from 'tap'
import { parseString } from 'fast-csv'
import { callsPerNumber, create, finished, listen, maxOverlap, number } from './twilio.ts'

// The dialler end to end: campaigns of hundreds of contacts called through the Twilio stand-in (CALL_RUNTIME=voice),
// whose callees answer and hang up, do not answer, or are busy.

t.test('two campaigns of 100 contacts: outcomes, retries, stop on success, the caps of each campaign and of the account', async (t) => {
  const ctx = await listen(t, { CAMPAIGN_ACCOUNT_MAX_CONCURRENT: '5' })
  const lists = [0, 1].map((c) => Array.from({ length: 100 }, (_, i) => number(c * 1000 + i)))
  for (const list of lists) {
    list.forEach((to, i) => {
      if (i % 3 === 0) ctx.twilio.callee(to, { answer: 'answer', hangUpAfterMs: 1500 })
      else if (i % 3 === 1) ctx.twilio.callee(to, { answer: 'no-answer', afterMs: 20 })
      else ctx.twilio.callee(to, { answer: 'busy', afterMs: 10 })
    })
  }
  const retry = { max_attempts: 1, retry_delay_minutes: 0, on_outcomes: ['no_answer'] }
  const campaigns = [
    await create(ctx, { max_concurrent_calls: 4, retry_settings: retry, contacts: lists[0].map((to, i) => ({ phone_number: to, dynamic_context: { name: `Person ${i}` } })) }),
    await create(ctx, { max_concurrent_calls: 3, retry_settings: retry, contacts: lists[1].map((to) => ({ phone_number: to })) })
  ]
  const [first, second] = await Promise.all(campaigns.map(async (c) => await finished(ctx, c._id)))
  const reasons = await ctx.db.selectFrom('calls').select(['disconnection_reason', (eb) => eb.fn.countAll().as('n')]).groupBy('disconnection_reason').execute()
  for (const done of [first, second]) {
    t.same(done.progress, { total: 100, pending: 0, calling: 0, done: 100, cancelled: 0, outcomes: { success: 34, no_answer: 33, busy: 33 } }, JSON.stringify(reasons))
  }
  const perNumber = callsPerNumber(ctx.twilio)
  const expected = (i: number) => i % 3 === 1 ? 2 : 1 // no_answer: the first call and 1 retry; answered and busy: once
  t.same(lists.flatMap((list) => list.filter((to, i) => perNumber.get(to) !== expected(i))), [], 'each number called as often as its outcome allows, never more')
  t.ok(maxOverlap(ctx.twilio, new Set(lists[0])) <= 4, `campaign 1 held at most 4 calls (${maxOverlap(ctx.twilio, new Set(lists[0]))})`)
  t.ok(maxOverlap(ctx.twilio, new Set(lists[1])) <= 3, `campaign 2 held at most 3 calls (${maxOverlap(ctx.twilio, new Set(lists[1]))})`)
  t.ok(maxOverlap(ctx.twilio) <= 5, `the account held at most 5 calls (${maxOverlap(ctx.twilio)})`)
  t.ok(maxOverlap(ctx.twilio) >= 4, 'and used more than one campaign\'s cap')

  const calls = await ctx.db.selectFrom('calls').select(['custom_data', 'dynamic_context', 'call_to', 'campaign_id']).where('call_to', '=', lists[0][3]).execute()
  t.match(calls, [{ custom_data: { campaign_id: campaigns[0]._id }, dynamic_context: { name: 'Person 3' }, campaign_id: campaigns[0]._id }], 'a call carries its campaign and its row\'s columns')
  t.equal(Number((await ctx.db.selectFrom('call_callbacks').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n), 0, 'the agent\'s callbacks leave campaign calls alone')

  const csv = await ctx.app.inject({ method: 'GET', url: `/v1/campaigns/${campaigns[0]._id}/results.csv`, headers: ctx.account.headers })
  t.equal(csv.statusCode, 200)
  t.match(csv.headers['content-type'], /^text\/csv/)
  const rows: Array<Record<string, string>> = []
  await new Promise((resolve, reject) => parseString(csv.body, { headers: true }).on('data', (r) => rows.push(r)).on('end', resolve).on('error', reject))
  t.equal(rows.length, 100)
  t.match(rows[0], { phone_number: lists[0][0], name: 'Person 0', status: 'done', outcome: 'success', attempts: '1', last_call_id: /^[0-9a-f]{24}$/ })
  t.match(rows[1], { outcome: 'no_answer', attempts: '2' })
  t.same(ctx.twilio.errors, [])
})
