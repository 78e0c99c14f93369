import t from 'tap'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { setup } from '../helpers/app.ts'
import { runScript } from '../helpers/scripts.ts'

const seed = async (url: string, ...args: string[]) => await runScript('seed.ts', url, ...args)

const day = (offset: number) => new Date(Date.now() - offset * 86_400_000).toISOString().slice(0, 10)

t.test('npm run seed fills an account with calls the API lists, details and counts', async (t) => {
  const { app, db, url } = await setup(t)

  const first = await seed(url, '--calls', '3000', '--email', 'demo@example.com')
  t.equal(first.code, 0, first.stderr)
  t.match(first.stdout, /3,000 \/ 3,000 calls/, 'it shows progress')
  t.match(first.stdout, /seeded 3000 calls for demo@example.com across 6 agents/)

  const user = await db.selectFrom('users').select('id').where('email', '=', 'demo@example.com').executeTakeFirstOrThrow()
  const { key } = await createApiKey(db, user.id)
  const headers = { 'x-api-key': key }
  const get = async (query: string) => {
    const response = await app.inject({ method: 'GET', url: `/v1/call/${query}`, headers })
    t.equal(response.statusCode, 200, query)
    return response.json()
  }

  const range = `date_from=${day(101)}&date_to=${day(0)}`
  t.equal((await get(`general-metrics?${range}`)).total_calls, 3000, 'the rollup counts every seeded call')
  // It prints the range it filled and a command that reads its metrics.
  t.match(first.stdout, new RegExp(`calls from (${day(100)}|${day(99)}) to ${day(0)} \\(UTC days\\)`))
  const printed = /curl -H "x-api-key: \$KEY" "http:\/\/[^/"]+(\/v1\/call\/general-metrics\?date_from=[\d-]+&date_to=[\d-]+)"/.exec(first.stdout)
  t.ok(printed, first.stdout)
  const metrics = await app.inject({ method: 'GET', url: printed![1], headers })
  t.equal(metrics.json().total_calls, 3000, 'the printed command counts every seeded call')
  const page = await get('list?limit=1000')
  t.equal(page.length, 1000)
  t.same(new Set(page.map((c: { direction: string }) => c.direction)), new Set(['inbound', 'outbound']))
  t.same(new Set(page.map((c: { call_type: string }) => c.call_type)), new Set(['phone', 'web']))
  t.same(new Set(page.map((c: { call_status: string }) => c.call_status)), new Set(['success', 'failed', 'pending', 'started']))
  t.same(new Set(page.map((c: { agent_name: string }) => c.agent_name)).size, 6)
  const days = new Set((await get('list?limit=1000&sort_order=asc')).map((c: { start_timestamp: number }) => new Date(c.start_timestamp).toISOString().slice(0, 10)))
  t.ok(days.has(day(100)) || days.has(day(99)), 'the oldest calls are 100 days old')

  // The list view of a seeded (bulk-loaded) call is the same call as its detail view.
  const listed = page.find((c: { call_status: string }) => c.call_status === 'success')
  const detail = await get(listed._id)
  for (const [field, value] of Object.entries(listed)) t.same(detail[field], value, field)
  t.equal(detail.transcription.length, 4)
  t.ok(detail.call_credits_details.phone_call_credits + detail.call_credits_details.web_call_credits > 0)
  const moods = await get(`sentiment-stats?agent_id=${listed.agent_id}&${range}`)
  t.ok(moods.positive > 0 && moods.neutral > 0 && moods.negative > 0, 'every sentiment')

  const second = await seed(url, '--calls', '500', '--email', 'demo@example.com')
  t.equal(second.code, 0, second.stderr)
  t.equal((await get(`general-metrics?${range}`)).total_calls, 3500, 'a second seed adds to the first')
  t.equal((await db.selectFrom('agents').select('id').where('user_id', '=', user.id).execute()).length, 6, 'and reuses its agents')

  const bad = await seed(url, '--calls', 'many')
  t.equal(bad.code, 2)
  t.equal(bad.stderr, 'seed: --calls must be a whole number from 1 to 100000000, got many (npm run seed -- --help shows the usage)\n')
})
