import t, { type Test } from 'tap'
import { insertCapability } from '../../../src/modules/agents/queries.ts'
import { bookAppointment, type NewAppointment } from '../../../src/modules/appointments/appointments.ts'
import { createAccount, setup, type Account, type TestContext } from '../../helpers/app.ts'
import { calendarPart, textPart } from '../../helpers/calendar-mail.ts'
import { createAgent } from '../../helpers/calls.ts'
import { startInbox } from '../../helpers/smtp.ts'

// GET /v1/appointments, GET /v1/appointments/:id and POST /v1/appointments/:id/cancel (docs/appointments.md), and
// the table's rule that a tool's booked appointments never overlap, however many book at once.

const TOOLS = { table: 'agent_tools', typeColumn: 'tool_type' } as const
const MINUTE = 60_000
const BASE = Date.parse('2030-03-04T09:00:00Z')

async function bookingSetup (t: Test, ctx: TestContext, account: Account, notify = 'desk@example.com') {
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  const tool = await insertCapability(ctx.db, account.user.id, TOOLS, {
    agent_id: agent._id,
    type: 'appointment_booking',
    settings: { name: 'appointments', time_zone: 'Europe/Berlin', duration_minutes: 30, notify_email: notify },
    is_active: true
  })
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id, dynamic_context: { customer_phone: '+4930123456' } } })).json()
  t.ok(call._id, 'a web call')
  const book = async (startMs: number, more: Partial<NewAppointment> = {}) => await bookAppointment(ctx.db, {
    userId: account.user.id,
    agentId: agent._id,
    toolId: tool.id,
    callId: call._id,
    start: new Date(startMs),
    end: new Date(startMs + 30 * MINUTE),
    bufferMinutes: 10,
    timeZone: 'Europe/Berlin',
    name: 'Ada Lovelace',
    email: 'Ada@Example.com',
    phone: null,
    notes: 'first visit',
    ...more
  })
  return { agent, tool, call, book }
}

t.test('the list, its filters, one appointment, and another account\'s ids', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)
  const { agent, call, book } = await bookingSetup(t, ctx, account)
  const theirs = await bookingSetup(t, ctx, other)
  const later = await book(BASE + 120 * MINUTE)
  const first = await book(BASE)
  const noCall = await book(BASE + 240 * MINUTE, { callId: null, email: null, phone: '+1 (415) 555-0100', name: '  Grace   Hopper ' })
  const foreign = await theirs.book(BASE)
  if (first === 'taken' || later === 'taken' || noCall === 'taken' || foreign === 'taken') throw new Error('a booking was refused')
  t.equal(first.email, 'ada@example.com', 'the address lower-cased')
  t.equal(noCall.phone, '+14155550100', 'the number as E.164')
  t.equal(noCall.name, 'Grace Hopper', 'the name with its spaces collapsed')

  const get = async (query: string, account_ = account) => await ctx.app.inject({ method: 'GET', url: `/v1/appointments${query}`, headers: account_.headers })
  const all = (await get('')).json()
  t.same(all.data.map((a: { _id: string }) => a._id), [first.id, later.id, noCall.id], 'soonest first; only the account\'s')
  t.match(all, { total: 3, limit: 100, offset: 0 })
  const contactId = (await ctx.app.inject({ method: 'GET', url: `/v1/call/${call._id}`, headers: account.headers })).json().contact_id
  t.ok(contactId)
  t.match(all.data[0], {
    _id: first.id, agent_id: agent._id, call_id: call._id, contact_id: contactId, starts_at: BASE, ends_at: BASE + 30 * MINUTE,
    time_zone: 'Europe/Berlin', name: 'Ada Lovelace', email: 'ada@example.com', phone: null, notes: 'first visit', status: 'booked', sequence: 0, cancelled_at: null
  }, 'linked to the call\'s contact')
  t.equal(all.data[0].blocked_until, undefined, 'the buffer is not part of the answer')
  const grace = all.data[2].contact_id
  t.ok(grace, 'without a call: the contact of the number given, created')
  t.not(grace, contactId)
  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/contacts/${grace}`, headers: account.headers })).json(), { phone_number: '+14155550100' })

  t.same((await get(`?call_id=${call._id}`)).json().data.map((a: { _id: string }) => a._id), [first.id, later.id])
  t.same((await get(`?contact_id=${grace}`)).json().data.map((a: { _id: string }) => a._id), [noCall.id])
  t.same((await get(`?agent_id=${agent._id}&from=${BASE + 1}&to=${BASE + 240 * MINUTE}`)).json().data.map((a: { _id: string }) => a._id), [later.id], 'from included, to excluded')
  t.same((await get('?status=cancelled')).json(), { data: [], total: 0, limit: 100, offset: 0 })
  t.match((await get('?limit=1&offset=1')).json(), { data: [{ _id: later.id }], total: 3, limit: 1, offset: 1 })

  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/appointments/${first.id}`, headers: account.headers })).json(), { _id: first.id, status: 'booked' })
  for (const url of [`/v1/appointments/${foreign.id}`, `/v1/appointments?agent_id=${theirs.agent._id}`, `/v1/appointments?call_id=${theirs.call._id}`,
    `/v1/appointments?contact_id=${foreign.contact_id}`, '/v1/appointments?agent_id=6a00000000000000000000ff']) {
    const res = await ctx.app.inject({ method: 'GET', url, headers: account.headers })
    t.equal(res.statusCode, 404, url)
    t.equal(res.json().code, 'not_found')
  }
  t.equal((await ctx.app.inject({ method: 'POST', url: `/v1/appointments/${foreign.id}/cancel`, headers: account.headers, payload: {} })).statusCode, 404, 'nor cancelled')
  t.equal((await get('', other)).json().total, 1)

  for (const query of ['?from=2&to=1', '?status=done', '?limit=0', '?limit=1001', '?from=abc', '?offset=-1', '?agent_id=nothex', '?from=-5']) {
    const res = await get(query)
    t.equal(res.statusCode, 400, query)
    t.match(res.json(), { statusCode: 400, code: String })
  }
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/appointments/nothex', headers: account.headers })).json().code, 'invalid_id')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/appointments' })).statusCode, 401)
})

t.test('cancelling frees the time and e-mails notify_email and the person booked an .ics METHOD:CANCEL, once', async (t) => {
  const inbox = await startInbox(t)
  const ctx = await setup(t, { SMTP_URL: inbox.url, MAIL_FROM: 'Clinic <noreply@clinic.example>' })
  const account = await createAccount(ctx.db)
  const { book } = await bookingSetup(t, ctx, account)
  const booked = await book(BASE)
  if (booked === 'taken') throw new Error('refused')
  t.equal(await book(BASE + 15 * MINUTE), 'taken', 'an overlapping time is taken')

  const res = await ctx.app.inject({ method: 'POST', url: `/v1/appointments/${booked.id}/cancel`, headers: account.headers, payload: { reason: 'the caller asked' } })
  t.equal(res.statusCode, 200)
  t.match(res.json(), { _id: booked.id, status: 'cancelled', cancel_reason: 'the caller asked', sequence: 1, cancelled_at: Number })
  const mails = await inbox.waitFor(2)
  const byRecipient = Object.fromEntries(mails.map((mail) => [mail.to[0], mail]))
  t.same(Object.keys(byRecipient).sort(), ['ada@example.com', 'desk@example.com'])
  for (const mail of mails) {
    const ics = calendarPart(mail)
    t.match(ics.contentType, /^text\/calendar; charset=utf-8; method=CANCEL/)
    t.match(ics.props, { METHOD: 'CANCEL', UID: `${booked.id}@switchboard`, SEQUENCE: '1', STATUS: 'CANCELLED', DTSTART: '20300304T090000Z', DTEND: '20300304T093000Z' })
    t.notOk(/[^\r]\n/.test(ics.raw), 'CRLF line endings')
  }
  t.match(textPart(byRecipient['desk@example.com']), /Reason: the caller asked/)
  t.match(textPart(byRecipient['ada@example.com']), /Hello Ada Lovelace,/)
  t.match(textPart(byRecipient['ada@example.com']), /Monday, 4 March 2030 at 10:00 \(Europe\/Berlin\)/, 'the time in the tool\'s time zone')

  const again = await ctx.app.inject({ method: 'POST', url: `/v1/appointments/${booked.id}/cancel`, headers: account.headers })
  t.equal(again.statusCode, 200)
  t.match(again.json(), { status: 'cancelled', sequence: 1 }, 'a second cancel changes nothing')
  const stored = await ctx.db.selectFrom('emails').select(['kind', 'to_address']).where('user_id', '=', account.user.id).execute()
  t.equal(stored.length, 2, 'and sends nothing more')
  t.ok(stored.every((mail) => mail.kind === 'appointment_cancelled'))

  const rebooked = await book(BASE + 15 * MINUTE)
  t.not(rebooked, 'taken', 'the cancelled appointment\'s time is free again')
})

t.test('a tool\'s booked appointments never overlap: of 20 bookings of one time at once exactly one wins', async (t) => {
  const ctx = await setup(t, { DATABASE_POOL_SIZE: '10' })
  const account = await createAccount(ctx.db)
  const { book } = await bookingSetup(t, ctx, account)
  const outcomes = await Promise.all(Array.from({ length: 20 }, async (_, i) => await book(BASE + (i % 3) * 10 * MINUTE, { name: `Caller ${i}` })))
  t.equal(outcomes.filter((outcome) => outcome !== 'taken').length, 1, 'one booked')
  t.equal(outcomes.filter((outcome) => outcome === 'taken').length, 19, 'nineteen told the time is taken')
  const { n } = await ctx.db.selectFrom('appointments').select((eb) => eb.fn.countAll<number>().as('n')).where('status', '=', 'booked').executeTakeFirstOrThrow()
  t.equal(Number(n), 1)

  // The buffer (10 minutes) belongs to the earlier appointment: the next may start 10 minutes after its end, not sooner.
  const won = outcomes.find((outcome) => outcome !== 'taken')!
  const end = won.ends_at.getTime()
  t.equal(await book(end + 5 * MINUTE), 'taken', 'inside the buffer')
  t.not(await book(end + 10 * MINUTE), 'taken', 'after the buffer')
})

t.test('the person booked is notify_email themselves (in another case): one e-mail, not two', async (t) => {
  const inbox = await startInbox(t)
  const ctx = await setup(t, { SMTP_URL: inbox.url })
  const account = await createAccount(ctx.db)
  const { book } = await bookingSetup(t, ctx, account, 'Desk@Example.com')
  const booked = await book(BASE, { email: 'desk@example.com' })
  if (booked === 'taken') throw new Error('refused')
  t.equal((await ctx.app.inject({ method: 'POST', url: `/v1/appointments/${booked.id}/cancel`, headers: account.headers })).statusCode, 200)
  t.same((await ctx.db.selectFrom('emails').select('to_address').execute()).map((mail) => mail.to_address), ['Desk@Example.com'])
  t.equal((await inbox.waitFor(1)).length, 1)
})
