// Every route reached without an API key or a session (src/http/rate-limit.ts) is limited per client address
// before any lookup: over the limit 429 with Retry-After and no query, another address unaffected, and a burst
// of concurrent requests gets no more than the limit through.
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import t from 'tap'
import { poolOf } from '../../src/db/database.ts'
import { clientAddress, RequestBudget } from '../../src/http/rate-limit.ts'
import { signRecordingLink } from '../../src/modules/calls/recordings.ts'
import { twilioSignature } from '../../src/modules/telephony/signature.ts'
import { setup } from '../helpers/app.ts'

const LIMIT = 5
const RACE = 150
const TWILIO_SID = 'AC' + 'b'.repeat(32)
const TWILIO_TOKEN = 'the installation token'
const UNKNOWN_SID = 'AC' + 'c'.repeat(32)
const CALL_SID = 'CA' + 'd'.repeat(32)

const form = (fields: Record<string, string>) => ({
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  payload: new URLSearchParams(fields).toString()
})

/** One request of each family of keyless routes, and the answer it gets while under the limit. */
const families: Array<{ name: string, request: (ctx: { config: { publicBaseUrl: string } }) => InjectOptions, answer: number }> = [
  { name: 'console sign-in link', request: () => ({ method: 'GET', url: '/login/link/sl_' + 'x'.repeat(40) }), answer: 404 },
  { name: 'workspace invitation', request: () => ({ method: 'GET', url: '/invitations/' + 'x'.repeat(43) }), answer: 404 },
  {
    name: 'console sign-in form',
    request: () => ({ method: 'POST', url: '/login', headers: { cookie: 'switchboard_login_csrf=t', 'content-type': 'application/x-www-form-urlencoded' }, payload: 'csrf_token=t&email=nobody%40example.com&password=x' }),
    answer: 401
  },
  {
    name: 'signed recording link',
    request: (ctx) => {
      const link = new URL(signRecordingLink(ctx.config as never, 'aaaaaaaaaaaaaaaaaaaaaaaa').url)
      return { method: 'GET', url: link.pathname + link.search }
    },
    answer: 404
  },
  { name: 'web-call join', request: () => ({ method: 'POST', url: '/web-call/join', payload: { access_token: 'x'.repeat(43) } }), answer: 403 },
  { name: 'Twilio voice webhook, unsigned', request: () => ({ method: 'POST', url: '/telephony/twilio/voice', ...form({ AccountSid: UNKNOWN_SID, CallSid: CALL_SID }) }), answer: 403 },
  { name: 'Twilio status callback, unsigned', request: () => ({ method: 'POST', url: '/telephony/twilio/status', ...form({ AccountSid: UNKNOWN_SID, CallSid: CALL_SID }) }), answer: 403 },
  { name: 'Twilio dial result, unsigned', request: () => ({ method: 'POST', url: '/telephony/twilio/dial-result?call_id=aaaaaaaaaaaaaaaaaaaaaaaa', ...form({ AccountSid: UNKNOWN_SID, CallSid: CALL_SID }) }), answer: 403 }
]

t.test('each family of keyless routes: the limit per address before any lookup, other addresses unaffected, a race held to the limit', async (t) => {
  const ctx = await setup(t, { RATE_LIMIT_PER_ADDRESS: String(LIMIT), RATE_LIMIT_WINDOW_MS: '600000', TWILIO_ACCOUNT_SID: TWILIO_SID, TWILIO_AUTH_TOKEN: TWILIO_TOKEN })
  let queries = 0
  poolOf(ctx.db).on('acquire', () => { queries++ })
  const send = (options: InjectOptions, remoteAddress: string) => ctx.app.inject({ ...options, remoteAddress })

  for (const [i, family] of families.entries()) {
    const [mine, other, racing] = [`127.0.${i + 1}.1`, `127.0.${i + 1}.2`, `127.0.${i + 1}.3`]
    for (let n = 0; n < LIMIT; n++) t.equal((await send(family.request(ctx), mine)).statusCode, family.answer, `${family.name}: ${family.answer} within the limit`)
    queries = 0
    const limited = await send(family.request(ctx), mine)
    t.equal(limited.statusCode, 429, `${family.name}: over the limit`)
    t.ok(Number(limited.headers['retry-after']) > 500, `${family.name}: Retry-After says when`)
    t.match(limited.body, /too many requests from this address/, `${family.name}: says why`)
    t.equal(queries, 0, `${family.name}: no database lookup`)
    t.equal((await send(family.request(ctx), other)).statusCode, family.answer, `${family.name}: another address is not limited`)

    const race = await Promise.all(Array.from({ length: RACE }, () => send(family.request(ctx), racing)))
    // (Sign-ins past the limit of hashes at once are refused too, 429 of their own: counted among those let through here.)
    const limitedInRace = race.filter((answer: LightMyRequestResponse) => answer.statusCode === 429 && /too many requests from this address/.test(answer.body))
    t.equal(limitedInRace.length, RACE - LIMIT, `${family.name}: ${RACE} at once, ${LIMIT} through`)
    t.ok(limitedInRace.every((answer) => Number(answer.headers['retry-after']) > 0))
  }
})

t.test('Twilio webhooks: a signed request gives its count back, so that Twilio\'s few addresses are never limited; unsigned ones are', async (t) => {
  const ctx = await setup(t, { RATE_LIMIT_PER_ADDRESS: String(LIMIT), RATE_LIMIT_WINDOW_MS: '600000', TWILIO_ACCOUNT_SID: TWILIO_SID, TWILIO_AUTH_TOKEN: TWILIO_TOKEN })
  const twilio = '127.0.50.1'
  const signed = () => {
    const fields = { AccountSid: TWILIO_SID, CallSid: CALL_SID, CallStatus: 'completed' }
    const signature = twilioSignature(TWILIO_TOKEN, `${ctx.config.publicBaseUrl}/telephony/twilio/status`, new URLSearchParams(fields))
    const request = form(fields)
    return ctx.app.inject({ method: 'POST', url: '/telephony/twilio/status', remoteAddress: twilio, ...request, headers: { ...request.headers, 'x-twilio-signature': signature } })
  }
  for (let n = 0; n < 4 * LIMIT; n++) t.equal((await signed()).statusCode, 404, 'signed: a call that is not here, never limited')
  const unsigned = () => ctx.app.inject({ method: 'POST', url: '/telephony/twilio/status', remoteAddress: twilio, ...form({ AccountSid: TWILIO_SID, CallSid: CALL_SID }) })
  for (let n = 0; n < LIMIT; n++) t.equal((await unsigned()).statusCode, 403, 'unsigned: counted')
  t.equal((await unsigned()).statusCode, 429, 'and limited')
  t.equal((await signed()).statusCode, 429, 'once the address is over, signed requests wait too (their check is a lookup)')
})

t.test('RATE_LIMIT_PER_ADDRESS=0 lifts the limit; web-call joins count per client behind TRUST_PROXY', async (t) => {
  const off = await setup(t, { RATE_LIMIT_PER_ADDRESS: '0' })
  const joins = await Promise.all(Array.from({ length: RACE }, () => off.app.inject({ method: 'POST', url: '/web-call/join', payload: { access_token: 'x'.repeat(43) } })))
  t.ok(joins.every((answer) => answer.statusCode === 403), 'no limit')

  const behind = await setup(t, { RATE_LIMIT_PER_ADDRESS: String(LIMIT), RATE_LIMIT_WINDOW_MS: '600000', TRUST_PROXY: '1' })
  const join = (client: string) => behind.app.inject({ method: 'POST', url: '/web-call/join', remoteAddress: '127.0.0.1', headers: { 'x-forwarded-for': client }, payload: { access_token: 'x'.repeat(43) } })
  for (let n = 0; n < LIMIT; n++) t.equal((await join('198.51.100.1')).statusCode, 403)
  t.equal((await join('198.51.100.1')).statusCode, 429, 'one client behind the balancer is limited')
  t.equal((await join('198.51.100.2')).statusCode, 403, 'another client behind the same balancer is not')
})

t.test('the budget: counted at once, given back once, a new window after the old one; addresses by IPv4 or IPv6 /64', async (t) => {
  let now = 0
  const budget = new RequestBudget({ max: 2, windowMs: 1000, maxKeys: 3, now: () => now })
  const first = budget.take('a')
  t.ok('giveBack' in first)
  t.ok('giveBack' in budget.take('a'))
  t.same(budget.take('a'), { retryAfterSeconds: 1 })
  if ('giveBack' in first) { first.giveBack(); first.giveBack() }
  t.ok('giveBack' in budget.take('a'), 'given back: one more')
  t.ok('retryAfterSeconds' in budget.take('a'), 'given back once only')
  now = 1000
  t.ok('giveBack' in budget.take('a'), 'a new window')

  t.equal(clientAddress('192.0.2.1'), '192.0.2.1')
  t.equal(clientAddress('::ffff:192.0.2.1'), '192.0.2.1')
  t.equal(clientAddress('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64')
  t.equal(clientAddress('2001:db8:1:2::7'), '2001:db8:1:2::/64')
  t.equal(clientAddress('2001:db8::1'), '2001:db8:0:0::/64')
  t.equal(clientAddress('::1'), '0:0:0:0::/64')
  t.equal(clientAddress('fe80::1%eth0'), 'fe80:0:0:0::/64')
  t.equal(clientAddress(undefined), 'unknown', 'a socket closed before its request was read has no address')
})
