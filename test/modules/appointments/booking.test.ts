import t, { type Test } from 'tap'
import { createLogger } from '../../../src/logger.ts'
import { createMailer } from '../../../src/mail/mailer.ts'
import { loadAgentLive } from '../../helpers/live.ts'
import type { LiveTool, ToolContext } from '../../../src/modules/capabilities/live.ts'
import { createAccount, setup, type Account, type TestContext } from '../../helpers/app.ts'
import { calendarPart } from '../../helpers/calendar-mail.ts'
import { createAgent } from '../../helpers/calls.ts'
import { startInbox } from '../../helpers/smtp.ts'

// The appointment_booking tool's functions (docs/appointments.md) over the built-in calendar, run as the voice
// session runs them: opening hours, buffer, notice, days ahead, time zones across a daylight-saving change, one
// winner among concurrent bookings of a slot, reschedule and cancel with their e-mails. The clock is Date.now,
// moved to a fixed instant for each test (it keeps running from there), so that the dates stay the ones below.

const MINUTE = 60_000

/** Date.now from `at` on, running; restored when the test ends. */
function clockAt (t: Test, at: string) {
  const real = Date.now.bind(Date)
  const offset = Date.parse(at) - real()
  Date.now = () => real() + offset
  t.teardown(() => { Date.now = real })
}

async function toolOf (ctx: TestContext, account: Account, agentId: string, settings: Record<string, unknown>) {
  const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agentId}/tools`, headers: account.headers, payload: { tool_type: 'appointment_booking', settings: { name: 'appointments', ...settings } } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json() as { _id: string }
}

/** The tool's functions in one call (a call id of its own), keyed by their names without the tool's prefix. */
async function callFunctions (ctx: TestContext, account: Account, agentId: string, customer: ToolContext['customer'] = { phone: null, email: null }, callId = `call-${Math.random()}`) {
  const log = createLogger(ctx.config)
  const context: ToolContext = { db: ctx.db, config: ctx.config, log, mailer: createMailer(ctx.db, ctx.config, log), userId: account.user.id, callId, signal: new AbortController().signal, variables: () => ({}), customer, language: 'en-US' }
  const loaded = await loadAgentLive(context, agentId)
  const byName = Object.fromEntries(loaded.tools.map((tool: LiveTool) => [tool.spec.name.replace(/^appointments_/, ''), tool]))
  const run = async (name: string, args: Record<string, unknown>) => JSON.parse((await byName[name].run(args, context)).output)
  return { run, loaded, byName, context }
}

const starts = (answer: { free_times: Array<{ start: string }> }) => answer.free_times.map((slot) => slot.start)

t.test('free times only inside the opening hours, clear of the buffer, after the notice, within days_ahead; past and closed times refused', async (t) => {
  clockAt(t, '2026-10-19T06:00:00Z') // Monday, 08:00 in Berlin
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await toolOf(ctx, account, agent._id, {
    time_zone: 'Europe/Berlin',
    duration_minutes: 30,
    buffer_minutes: 15,
    days_ahead: 14,
    min_notice_minutes: 60,
    opening_hours: { mon: [{ from: '09:00', to: '12:00' }, { from: '13:00', to: '15:00' }], tue: [{ from: '09:00', to: '10:00' }] }
  })
  const { run, loaded } = await callFunctions(ctx, account, agent._id)
  t.match(loaded.instructions, /Now it is .* in Europe\/Berlin/, 'the model is told today in the tool\'s zone')

  const monday = await run('find_times', { from: '2026-10-19', to: '2026-10-19' })
  t.same(starts(monday), ['2026-10-19T09:30', '2026-10-19T10:00', '2026-10-19T10:30', '2026-10-19T11:00', '2026-10-19T11:30', '2026-10-19T13:00', '2026-10-19T13:30', '2026-10-19T14:00'],
    'from just over an hour after now (09:00 is past it), the gap at noon left out; the first eight listed')
  t.equal(monday.more, 1, '14:30 is the one more')
  t.equal(monday.free_times[0].spoken, 'Monday, October 19 at 9:30 AM', 'spoken in the zone and the agent\'s language')

  const booked = await run('book', { start: '2026-10-19T10:30', name: 'Ada Lovelace', email: 'ada@example.com' })
  t.match(booked, { booked: { start: '2026-10-19T10:30', spoken: 'Monday, October 19 at 10:30 AM' } })
  t.same(starts(await run('find_times', { from: '2026-10-19T09:00', to: '2026-10-19T12:00' })), ['2026-10-19T09:30', '2026-10-19T11:30'],
    'the 15-minute buffer keeps 10:00 (ends 10:30) and 11:00 (starts 11:00) clear of 10:30–11:00')
  t.same(starts(await run('find_times', { from: '2026-10-20', to: '2026-10-20' })), ['2026-10-20T09:00', '2026-10-20T09:30'], 'Tuesday has its own hours')
  t.same(starts(await run('find_times', { from: '2026-10-24', to: '2026-10-25' })), [], 'the weekend is closed')
  t.same(starts(await run('find_times', { from: '2026-11-02', to: '2026-11-03' })), [], 'beyond 14 days ahead nothing is offered')

  await t.rejects(run('book', { start: '2026-10-19T12:00', name: 'Ada' }), /12:00 .* is not a free appointment time/, 'noon is closed')
  await t.rejects(run('book', { start: '2026-10-19T09:15', name: 'Ada' }), /not a free appointment time/, 'off the slot grid')
  await t.rejects(run('book', { start: '2026-10-19T09:00', name: 'Ada' }), /not a free appointment time/, 'inside the minimum notice')
  await t.rejects(run('book', { start: '2026-11-02T09:00', name: 'Ada' }), /not a free appointment time/, 'beyond days_ahead')
  await t.rejects(run('book', { start: '2026-10-16T10:00', name: 'Ada' }), /has already passed/, 'the past')
  const taken = await run('book', { start: '2026-10-19T11:00', name: 'Grace' })
  t.match(taken, { booked: null, problem: /was taken by someone else meanwhile/ }, 'inside another appointment\'s buffer: taken, with other times offered')
  t.same(starts(taken), ['2026-10-19T09:30', '2026-10-19T11:30', '2026-10-19T13:00', '2026-10-19T13:30', '2026-10-19T14:00', '2026-10-19T14:30'])

  const list = (await ctx.app.inject({ method: 'GET', url: '/v1/appointments', headers: account.headers })).json()
  t.equal(list.total, 1)
  t.match(list.data[0], { starts_at: Date.parse('2026-10-19T08:30:00Z'), ends_at: Date.parse('2026-10-19T09:00:00Z'), time_zone: 'Europe/Berlin', name: 'Ada Lovelace', email: 'ada@example.com' })
})

t.test('settings: opening hours that end before they start or overlap are refused with the day named', async (t) => {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  for (const [hours, message] of [
    [{ mon: [{ from: '12:00', to: '09:00' }] }, /^body\.settings\.opening_hours\.mon: 12:00–09:00 ends before it starts/],
    [{ fri: [{ from: '09:00', to: '12:00' }, { from: '11:00', to: '13:00' }] }, /^body\.settings\.opening_hours\.fri: 09:00–12:00 and 11:00–13:00 overlap/],
    [{ mon: [{ from: '9:00', to: '12:00' }] }, /^body\.settings\.opening_hours/],
  ] as const) {
    const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: 'appointment_booking', settings: { name: 'x', time_zone: 'UTC', duration_minutes: 30, opening_hours: hours } } })
    t.equal(res.statusCode, 400, JSON.stringify(hours))
    t.match(res.json().message, message)
  }
})

t.test('across a daylight-saving change: Europe/Berlin on 2026-10-25 and America/New_York on 2026-11-01, slots at the right instants, said in local time', async (t) => {
  clockAt(t, '2026-10-20T00:00:00Z')
  const inbox = await startInbox(t)
  const ctx = await setup(t, { SMTP_URL: inbox.url })
  const account = await createAccount(ctx.db)
  const hours = { sat: [{ from: '09:00', to: '10:00' }], sun: [{ from: '09:00', to: '10:00' }], mon: [{ from: '09:00', to: '10:00' }] }
  const cases = [
    { zone: 'Europe/Berlin', days: ['2026-10-24', '2026-10-25', '2026-10-26'], utc: ['2026-10-24T07:00:00Z', '2026-10-25T08:00:00Z', '2026-10-26T08:00:00Z'], spoken: 'Sunday, October 25 at 9:00 AM' },
    { zone: 'America/New_York', days: ['2026-10-31', '2026-11-01', '2026-11-02'], utc: ['2026-10-31T13:00:00Z', '2026-11-01T14:00:00Z', '2026-11-02T14:00:00Z'], spoken: 'Sunday, November 1 at 9:00 AM' }
  ]
  for (const { zone, days, utc, spoken } of cases) {
    const agent = await createAgent(ctx.app, account, { agent_name: zone })
    await toolOf(ctx, account, agent._id, { time_zone: zone, duration_minutes: 60, opening_hours: hours, notify_email: 'desk@example.com' })
    const { run } = await callFunctions(ctx, account, agent._id, { phone: '+4930123456', email: null })
    const found = await run('find_times', { from: days[0], to: days[2] })
    t.same(starts(found), days.map((day) => `${day}T09:00`), `${zone}: 09:00 local on each day`)
    t.equal(found.free_times[1].spoken, spoken, 'said in local time')
    const booked = await run('book', { start: `${days[1]}T09:00`, name: 'Ada' })
    t.match(booked, { booked: { start: `${days[1]}T09:00`, spoken } })
    const rows = await ctx.db.selectFrom('appointments').select(['starts_at', 'ends_at', 'time_zone']).where('agent_id', '=', agent._id).execute()
    t.same(rows.map((row) => row.starts_at.toISOString()), [utc[1].replace('Z', '.000Z')], `${zone}: stored at the UTC instant of 09:00 on the day of the change`)
    // The slots either side of the change are an hour further apart in UTC than the 24 hours on the clock.
    const instants = await Promise.all(days.map(async (day) => {
      const slot = await run('find_times', { from: day, to: day })
      return slot.free_times.length === 0 ? utc[1] : `${slot.free_times[0].start}`
    }))
    t.same(instants, [`${days[0]}T09:00`, utc[1], `${days[2]}T09:00`], 'the booked day has no slot left, the others keep theirs')
    t.same([Date.parse(utc[1]) - Date.parse(utc[0]), Date.parse(utc[2]) - Date.parse(utc[1])], [25 * 60 * MINUTE, 24 * 60 * MINUTE], 'the 25-hour day')
  }
  const mails = await inbox.waitFor(2)
  t.same(mails.map((mail) => calendarPart(mail).props.DTSTART).sort(), ['20261025T080000Z', '20261101T140000Z'], 'the .ics files say the UTC instants')
})

t.test('two calls booking the last slot at once: exactly one wins, the other is told and offered nothing left; then 20 at once', async (t) => {
  clockAt(t, '2026-10-19T06:00:00Z')
  const ctx = await setup(t, { DATABASE_POOL_SIZE: '12' })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account)
  await toolOf(ctx, account, agent._id, { time_zone: 'UTC', duration_minutes: 60, min_notice_minutes: 0, opening_hours: { tue: [{ from: '10:00', to: '11:00' }], wed: [{ from: '10:00', to: '11:00' }] } })
  const [first, second] = await Promise.all([callFunctions(ctx, account, agent._id), callFunctions(ctx, account, agent._id)])
  const answers = await Promise.all([first.run('book', { start: '2026-10-20T10:00', name: 'Ada' }), second.run('book', { start: '2026-10-20T10:00', name: 'Grace' })])
  t.equal(answers.filter((answer) => answer.booked !== null).length, 1, 'one booked')
  const lost = answers.find((answer) => answer.booked === null)
  t.match(lost, { problem: /was taken by someone else meanwhile/, free_times: [] }, 'the other told, with nothing left that day to offer')

  const calls = await Promise.all(Array.from({ length: 20 }, async () => await callFunctions(ctx, account, agent._id)))
  const many = await Promise.all(calls.map(async (call, i) => await call.run('book', { start: '2026-10-21T10:00', name: `Caller ${i}` })))
  t.equal(many.filter((answer) => answer.booked !== null).length, 1, 'of 20 at once, one booked')
  t.equal(many.filter((answer) => /taken by someone else/.test(answer.problem)).length, 19, 'nineteen told it is taken')
  const { n } = await ctx.db.selectFrom('appointments').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()
  t.equal(Number(n), 2, 'two appointments in all')
})

t.test('the caller finds their booking, moves it and cancels it: each change e-mailed to notify_email and the caller with the same UID and a growing SEQUENCE', async (t) => {
  clockAt(t, '2026-10-19T06:00:00Z')
  const inbox = await startInbox(t)
  const ctx = await setup(t, { SMTP_URL: inbox.url, MAIL_FROM: 'Dental <noreply@dental.example>' })
  const account = await createAccount(ctx.db)
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  await toolOf(ctx, account, agent._id, { time_zone: 'America/New_York', duration_minutes: 30, notify_email: 'desk@example.com' })
  const caller = { phone: '+14155550100', email: null }
  const call = await callFunctions(ctx, account, agent._id, caller)
  const booked = await call.run('book', { start: '2026-10-20T10:00', name: 'Ada Lovelace', email: 'ada@example.com', notes: 'cleaning; first visit' })
  const id = booked.booked.booking_id
  t.ok(id)

  const later = await callFunctions(ctx, account, agent._id, caller)
  const found = await later.run('find_booking', {})
  t.match(found, { bookings: [{ booking_id: id, start: '2026-10-20T10:00', spoken: 'Tuesday, October 20 at 10:00 AM' }] }, 'a later call from the same number finds it')
  const stranger = await callFunctions(ctx, account, agent._id, { phone: '+14155550199', email: null })
  t.same((await stranger.run('find_booking', {})).bookings, [], 'another number finds none')
  await t.rejects(stranger.run('cancel', { booking_id: id }), /the caller has no upcoming booking/, 'nor may cancel it')

  const moved = await later.run('reschedule', { booking_id: id, start: '2026-10-20T10:30' })
  t.match(moved, { rescheduled: { booking_id: id, start: '2026-10-20T10:30' }, was: 'Tuesday, October 20 at 10:00 AM' })
  t.same(starts(await later.run('find_times', { from: '2026-10-20T09:00', to: '2026-10-20T11:30' })), ['2026-10-20T09:00', '2026-10-20T09:30', '2026-10-20T10:00', '2026-10-20T11:00'], 'the old time is free again')
  const cancelled = await later.run('cancel', { booking_id: id, reason: 'feeling better' })
  t.match(cancelled, { cancelled: { booking_id: id } })
  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/appointments/${id}`, headers: account.headers })).json(), { status: 'cancelled', cancel_reason: 'feeling better', sequence: 2, phone: '+14155550100' })

  const mails = await inbox.waitFor(6)
  const versions = mails.map((mail): Record<string, string> => ({ to: mail.to[0], ...calendarPart(mail).props })).sort((a, b) => Number(a.SEQUENCE) - Number(b.SEQUENCE) || a.to.localeCompare(b.to))
  t.match(versions, [
    { to: 'ada@example.com', METHOD: 'REQUEST', SEQUENCE: '0', DTSTART: '20261020T140000Z' },
    { to: 'desk@example.com', METHOD: 'REQUEST', SEQUENCE: '0', DTSTART: '20261020T140000Z' },
    { to: 'ada@example.com', METHOD: 'REQUEST', SEQUENCE: '1', DTSTART: '20261020T143000Z' },
    { to: 'desk@example.com', METHOD: 'REQUEST', SEQUENCE: '1', DTSTART: '20261020T143000Z' },
    { to: 'ada@example.com', METHOD: 'CANCEL', SEQUENCE: '2', STATUS: 'CANCELLED' },
    { to: 'desk@example.com', METHOD: 'CANCEL', SEQUENCE: '2', STATUS: 'CANCELLED' }
  ])
  t.ok(versions.every((version) => version.UID === `${id}@switchboard`), 'one UID: calendars update the event they hold')
  t.match(versions[1], { SUMMARY: 'Appointment: Ada Lovelace', DESCRIPTION: 'Booked by Front desk.\\nNotes: cleaning\\; first visit', ORGANIZER: 'mailto:noreply@dental.example' })
  t.match(versions[0], { SUMMARY: 'Appointment with Dental', ATTENDEE: 'mailto:ada@example.com' })
})
