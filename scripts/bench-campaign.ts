// npm run bench:campaign — a campaign of BENCH_CONTACTS (10,000) contacts dialled through the Twilio stand-in
// (test/helpers/twilio-stand-in.ts, on loopback) by two worker processes sharing it: a ROLE=all server and a
// ROLE=worker one, which is killed (SIGKILL) once BENCH_KILL_AT (30%) of the contacts are done. Callees: half answer
// and hang up after BENCH_TALK_MS (1000 ms; the media stream opens and the agent greets them: VOICE_ENGINE=simulator,
// no providers), a quarter do not answer, a quarter are busy. Prints contacts per minute, the most calls the carrier
// held at once (never above the cap) and duplicates (numbers called more than once: must be 0), then one JSON line.
import { createDb } from '../src/db/database.ts'
import { createApiKey, createUser } from '../src/modules/users/queries.ts'
import { ACCOUNT_SID, AUTH_TOKEN, PUBLIC, twilioSettings } from '../test/helpers/twilio-phone.ts'
import { createTwilioStandIn } from '../test/helpers/twilio-stand-in.ts'
import { readArgs } from './args.ts'
import { benchDatabase, startServer, type Server } from './bench/lib.ts'

readArgs({
  name: 'bench:campaign',
  usage: `usage: npm run bench:campaign

Dials a campaign through the Twilio stand-in with two worker processes, one killed mid-run.

  BENCH_CONTACTS      contacts (default 10000)
  BENCH_CAP           the campaign's and the account's cap on calls at once (default 50)
  BENCH_TALK_MS       how long an answering callee stays on the line (default 1000)
  BENCH_KILL_AT       the share of contacts done when the worker process is killed (default 0.3)
  BENCH_DATABASE_URL  the benchmark's database (default: an embedded one in BENCH_DATA_DIR, ./data/bench)`
}, {})

const CONTACTS = Number(process.env.BENCH_CONTACTS ?? 10_000)
const CAP = Number(process.env.BENCH_CAP ?? 50)
const TALK_MS = Number(process.env.BENCH_TALK_MS ?? 1000)
const KILL_AT = Number(process.env.BENCH_KILL_AT ?? 0.3)
// A number of its own each run: the bench database keeps the accounts of earlier runs.
const FROM = `+1415555${String(Date.now() % 10_000).padStart(4, '0')}`

const database = await benchDatabase()
const db = createDb(database.pool)
const user = await createUser(db, { email: `bench-campaign-${Date.now()}@localhost` })
const headers = { 'x-api-key': (await createApiKey(db, user.id)).key, 'content-type': 'application/json' }

const twilio = await createTwilioStandIn()
twilio.addAccount(ACCOUNT_SID, AUTH_TOKEN)
twilio.offer('US', [{ phone_number: FROM, area_code: '415', locality: 'San Francisco', region: 'CA' }])
const contacts = Array.from({ length: CONTACTS }, (_, i) => `+1415${String(5_000_000 + i).padStart(7, '0')}`)
contacts.forEach((to, i) => {
  if (i % 4 < 2) twilio.callee(to, { answer: 'answer', hangUpAfterMs: TALK_MS })
  else if (i % 4 === 2) twilio.callee(to, { answer: 'no-answer', afterMs: 500 })
  else twilio.callee(to, { answer: 'busy', afterMs: 200 })
})

const env = {
  DATABASE_URL: database.url,
  ...twilioSettings(twilio.url),
  CALL_RUNTIME: 'voice',
  VOICE_ENGINE: 'simulator',
  CALL_TIME_SCALE: '0.01',
  VOICE_STREAM_TIMEOUT_MS: '2000',
  CAMPAIGN_TICK_MS: '200',
  CAMPAIGN_ACCOUNT_MAX_CONCURRENT: String(CAP),
  CAMPAIGN_ACCOUNT_CALLS_PER_MINUTE: '1000000',
  CAMPAIGN_MAX_ROWS: String(Math.max(CONTACTS, 50_000))
}
const main = await startServer('src/main.ts', { ...env, ROLE: 'all' }, '/health')
twilio.route(PUBLIC, main.url)
const worker: Server = await startServer('src/main.ts', { ...env, ROLE: 'worker' }, '/health/live')

const api = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(main.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`)
  return await res.json() as Record<string, any> // the API's answers, read by name below
}
// 10,000 calls spend more than the welcome credits: without a top-up the dialler pauses the campaign (no_credits).
await api('PATCH', '/v1/subscription/auto-top-up', { enabled: true })
const llm = await api('POST', '/v1/llm', { begin_message: 'Hello, this is a reminder of your appointment.', general_prompt: 'You remind people of appointments.' })
const agent = await api('POST', '/v1/agent', { agent_name: 'Reminders', llm_id: llm._id })
await api('POST', '/v1/phone-number/buy', { phone_number: FROM, outbound_agent_id: agent._id })
const always = Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]]))

const started = performance.now()
const { campaign } = await api('POST', '/v1/campaigns', {
  name: 'Bench', agent_id: agent._id, from_number: FROM, calling_hours: always, max_concurrent_calls: CAP, max_calls_per_minute: 100_000,
  contacts: contacts.map((phone) => ({ phone_number: phone }))
})
const imported = performance.now()
let killedAt: number | undefined
let progress = campaign.progress
let stalled = false
let last = { done: -1, at: performance.now() }
while (true) {
  const view = await api('GET', `/v1/campaigns/${campaign._id as string}`)
  progress = view.progress
  if (progress.done !== last.done) last = { done: progress.done, at: performance.now() }
  // Reported rather than waited for: no contact finished for two minutes.
  if (performance.now() - last.at > 120_000) {
    stalled = true
    break
  }
  process.stdout.write(`\r${progress.done}/${CONTACTS} done, ${progress.calling} calling${killedAt === undefined ? '' : ' (worker killed)'}   `)
  if (killedAt === undefined && progress.done >= CONTACTS * KILL_AT) {
    worker.child.kill('SIGKILL')
    killedAt = progress.done
  }
  if (view.status === 'completed') break
  await new Promise((resolve) => setTimeout(resolve, 1000))
}
// Until the last contact finished (a stall's two minutes of waiting are not dialling).
const seconds = ((stalled ? last.at : performance.now()) - imported) / 1000
process.stdout.write('\n')

// The carrier's view: each call from its creation to its end; the most at once, and numbers called twice.
const events: Array<[number, number]> = []
const perNumber = new Map<string, number>()
for (const call of twilio.calls) {
  if (call.direction !== 'outbound-api') continue
  perNumber.set(call.to, (perNumber.get(call.to) ?? 0) + 1)
  events.push([(call as unknown as { created: Date }).created.getTime(), 1], [call.endedAt === undefined ? Date.now() : performance.timeOrigin + call.endedAt, -1])
}
events.sort((a, b) => a[0] - b[0] || a[1] - b[1])
let held = 0
let maxHeld = 0
for (const [, step] of events) maxHeld = Math.max(maxHeld, held += step)
const duplicates = [...perNumber.values()].reduce((sum, n) => sum + n - 1, 0)
const result = {
  contacts: CONTACTS,
  import_seconds: Math.round(imported - started) / 1000,
  dial_seconds: Math.round(seconds * 10) / 10,
  contacts_per_minute: Math.round(progress.done / seconds * 60),
  cap: CAP,
  max_concurrency: maxHeld,
  duplicates,
  carrier_calls: events.length / 2,
  never_placed: CONTACTS - perNumber.size,
  worker_killed_at_done: killedAt,
  stalled,
  done: progress.done,
  outcomes: progress.outcomes
}
console.log(`${result.contacts_per_minute} contacts/minute; at most ${maxHeld} calls at once (cap ${CAP}); ${duplicates} duplicates; ${progress.done} of ${CONTACTS} done; ${result.never_placed} never reached the carrier${stalled ? ' (stalled: no contact finished for two minutes)' : ''}`)
console.log(JSON.stringify(result))
await main.stop()
twilio.close()

await database.stop()
