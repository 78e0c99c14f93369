import t from 'tap'
import { inviteMember } from '../../src/modules/account/workspace-queries.ts'
import { bookAppointment } from '../../src/modules/appointments/appointments.ts'
import { createApiKey } from '../../src/modules/users/queries.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { calendarPart } from '../helpers/calendar-mail.ts'
import { createAgent } from '../helpers/calls.ts'
import { axeViolations, launchChromium, signInAt } from '../helpers/chromium.ts'
import { ConsoleClient, createConsoleUser, PASSWORD, signedInWithKey } from '../helpers/console-client.ts'
import { startInbox } from '../helpers/smtp.ts'

// The console's Appointments page (docs/appointments.md): the list with its filters, each appointment's call and
// contact, the cancel button (CSRF, e-mails); the workspace rule; and the appointment_booking tool's form with its
// opening hours written one line per day. Markup that axe-core passes, in Chromium.

const MINUTE = 60_000
const BASE = Date.parse('2030-03-04T09:00:00Z')
const idsOf = (body: string) => [...body.matchAll(/action="\/appointments\/([0-9a-f]{24})\/cancel"/g)].map((m) => m[1])

async function toolOf (ctx: TestContext, account: Account, agentId: string) {
  const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agentId}/tools`, headers: account.headers, payload: { tool_type: 'appointment_booking', settings: { name: 'appointments', time_zone: 'Europe/Berlin', duration_minutes: 30, notify_email: 'desk@example.com' } } })
  if (res.statusCode !== 201) throw new Error(res.body)
  return res.json()._id as string
}

async function booked (ctx: TestContext, account: Account, agentId: string, toolId: string, startMs: number, name: string, customer: Record<string, string> = { customer_phone: '+4930123456' }) {
  const call = (await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agentId, dynamic_context: customer } })).json()
  const row = await bookAppointment(ctx.db, { userId: account.user.id, agentId, toolId, callId: call._id, start: new Date(startMs), end: new Date(startMs + 30 * MINUTE), bufferMinutes: 0, timeZone: 'Europe/Berlin', name, email: 'ada@example.com', phone: null, notes: null })
  if (row === 'taken') throw new Error('taken')
  return row
}

t.test('the list, its filters, the call and contact links, and the cancel button', async (t) => {
  const inbox = await startInbox(t)
  const ctx = await setup(t, { SMTP_URL: inbox.url })
  const { account, browser } = await signedInWithKey(ctx)
  const front = await createAgent(ctx.app, account, { agent_name: 'Front <desk>' })
  const back = await createAgent(ctx.app, account, { agent_name: 'Back office' })
  const frontTool = await toolOf(ctx, account, front._id)
  const backTool = await toolOf(ctx, account, back._id)
  const first = await booked(ctx, account, front._id, frontTool, BASE, 'Ada <b>Lovelace</b>')
  const second = await booked(ctx, account, back._id, backTool, BASE + 24 * 60 * MINUTE, 'Grace Hopper')
  const other = await createAccount(ctx.db)
  const otherAgent = await createAgent(ctx.app, other)
  const foreign = await booked(ctx, other, otherAgent._id, await toolOf(ctx, other, otherAgent._id), BASE, 'Mallory')

  const list = await browser.get('/appointments')
  t.equal(list.statusCode, 200)
  t.match(list.body, /<a href="\/appointments" aria-current="page">Appointments<\/a>/, 'in the navigation')
  t.same(idsOf(list.body), [first.id, second.id], 'soonest first, only the account\'s')
  t.match(list.body, 'Ada &lt;b&gt;Lovelace&lt;/b&gt;', 'names are text')
  t.match(list.body, 'Monday, 4 March 2030 at 10:00 (Europe/Berlin)</time>, until 10:30', 'in the appointment\'s time zone')
  t.match(list.body, `<a href="/calls/${first.call_id}">The call</a>`)
  t.match(list.body, `<a href="/contacts/${first.contact_id}">The contact</a>`)
  t.match(list.body, '<td>Front &lt;desk&gt;</td>')
  t.same(idsOf((await browser.get(`/appointments?agent=${back._id}`)).body), [second.id])
  t.same(idsOf((await browser.get('/appointments?from=2030-03-05&to=2030-03-05')).body), [second.id], 'by UTC day, the last one included')
  t.match((await browser.get('/appointments?status=cancelled')).body, 'No appointments match.')
  for (const query of ['?status=done', '?from=2030-02-30', '?from=2030-03-05&to=2030-03-04', '?agent=nope', '?skip=x']) {
    const res = await browser.get(`/appointments${query}`)
    t.equal(res.statusCode, 400, query)
    t.match(res.body, /class="notice error"/)
  }

  t.equal((await browser.post(`/appointments/${first.id}/cancel`, {})).statusCode, 403, 'no CSRF token: refused')
  t.equal((await browser.submit('/appointments', `/appointments/${foreign.id}/cancel`, {})).statusCode, 404, 'another account\'s')
  const cancelled = await browser.submit('/appointments', `/appointments/${first.id}/cancel`, { back: `/appointments?agent=${front._id}` })
  t.equal(cancelled.statusCode, 303)
  t.equal(cancelled.headers.location, `/appointments?agent=${front._id}&cancelled=1`, 'back to the list as it was filtered')
  const after = await browser.get(cancelled.headers.location as string)
  t.match(after.body, 'The appointment is cancelled')
  t.match(after.body, /<td>Cancelled<\/td>/)
  t.same(idsOf(after.body), [], 'a cancelled one has no button')
  const mails = await inbox.waitFor(2)
  t.same(mails.map((mail) => mail.to[0]).sort(), ['ada@example.com', 'desk@example.com'])
  t.ok(mails.every((mail) => calendarPart(mail).props.METHOD === 'CANCEL'))
  t.equal((await browser.submit('/appointments', `/appointments/${second.id}/cancel`, { back: 'https://evil.example/' })).headers.location, '/appointments?cancelled=1', 'never back to another site')
})

t.test('in a workspace a member sees its appointments only and cancels none', async (t) => {
  const ctx = await setup(t)
  const { user, account } = await signedInWithKey(ctx)
  const workspace = (await ctx.app.inject({ method: 'POST', url: '/v1/workspaces', headers: account.headers, payload: { workspace_name: 'Sales' } })).json()
  const shared = await createAgent(ctx.app, account, {}, `?workspace_id=${workspace._id}`)
  const own = await createAgent(ctx.app, account)
  const inside = await booked(ctx, account, shared._id, await toolOf(ctx, account, shared._id), BASE, 'Inside')
  const outside = await booked(ctx, account, own._id, await toolOf(ctx, account, own._id), BASE, 'Outside')

  const member = await createConsoleUser(ctx.db)
  await inviteMember(ctx.db, user.id, workspace._id, member.email, 'member')
  await ctx.app.inject({ method: 'POST', url: `/v1/workspaces/${workspace._id}/accept-invitation`, headers: { 'x-api-key': (await createApiKey(ctx.db, member.id)).key } })
  const browser = new ConsoleClient(ctx.app)
  await browser.signIn(member.email, PASSWORD)
  await browser.submit('/workspaces', '/workspace', { workspace_id: workspace._id })

  const list = await browser.get('/appointments')
  t.match(list.body, 'Inside')
  t.notMatch(list.body, 'Outside')
  t.same(idsOf(list.body), [], 'no cancel button for a member')
  t.equal((await browser.submit('/appointments', `/appointments/${inside.id}/cancel`, {})).statusCode, 403)
  t.equal((await ctx.db.selectFrom('appointments').select('status').where('id', '=', inside.id).executeTakeFirstOrThrow()).status, 'booked')
  t.ok(outside)
})

t.test('the tool\'s form: opening hours one line per day, read back into the settings, a wrong line named', async (t) => {
  const ctx = await setup(t)
  const { account, browser } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account)
  const form = await browser.get(`/agents/${agent._id}/tools/new?type=appointment_booking`)
  t.equal(form.statusCode, 200)
  t.match(form.body, /<textarea id="settings-opening_hours" name="settings.opening_hours"[^>]*>\nMon 09:00-17:00\nTue 09:00-17:00\nWed 09:00-17:00\nThu 09:00-17:00\nFri 09:00-17:00<\/textarea>/, 'the default hours as text')
  t.match(form.body, /Days not listed are closed/)
  const outlook = await browser.get(`/agents/${agent._id}/tools/new?type=calendar_two`)
  t.match(outlook.body, /<textarea id="settings-opening_hours" name="settings.opening_hours"/, 'the calendar tools that share opening_hours get the same field')
  const fields = {
    type: 'appointment_booking',
    'settings.name': 'Book',
    'settings.time_zone': 'America/New_York',
    'settings.duration_minutes': '45',
    'settings.buffer_minutes': '10',
    'settings.days_ahead': '30',
    'settings.min_notice_minutes': '120',
    'settings.notify_email': 'desk@example.com',
    'settings.opening_hours': 'monday 9:00-12:00, 13:00 - 17:30\r\nSat 10:00-14:00\r\n\r\n',
    is_active: 'true'
  }
  const added = await browser.submit(`/agents/${agent._id}/tools/new?type=appointment_booking`, `/agents/${agent._id}/tools`, fields)
  t.equal(added.statusCode, 303, added.body)
  const tool = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/tools`, headers: account.headers })).json()[0]
  t.same(tool.settings, {
    name: 'Book', time_zone: 'America/New_York', duration_minutes: 45, buffer_minutes: 10, days_ahead: 30, min_notice_minutes: 120, notify_email: 'desk@example.com',
    opening_hours: { mon: [{ from: '09:00', to: '12:00' }, { from: '13:00', to: '17:30' }], sat: [{ from: '10:00', to: '14:00' }] }
  })
  const page = `/agents/${agent._id}/tools/${tool._id}`
  t.match((await browser.get(page)).body, />\nMon 09:00-12:00, 13:00-17:30\nSat 10:00-14:00<\/textarea>/, 'shown as it was written')

  for (const [hours, problem] of [
    ['Mon 09:00-12:00\nMonday 13:00-14:00', 'Line 2 of the opening hours (“Monday 13:00-14:00”): Monday is given twice; put all its times on one line, separated by commas.'],
    ['Someday 09:00-12:00', 'Line 1 of the opening hours (“Someday 09:00-12:00”) must start with a day such as Mon, Tue … Sun.'],
    ['Mon 9 to noon', 'Line 1 of the opening hours (“Mon 9 to noon”): “9 to noon” is not a time range such as 09:00-12:00.'],
    ['Tue 09:00-25:00', 'Line 1 of the opening hours (“Tue 09:00-25:00”): 25:00 is not a time of day (00:00 to 24:00).'],
    ['Wed', 'Line 1 of the opening hours (“Wed”) gives no times: write them after the day, such as Wed 09:00-17:00, or leave the day out to close it.'],
    ['Thu 12:00-09:00', 'The opening hours of Thursday: 12:00–09:00 ends before it starts.'],
    ['Fri 09:00-12:00, 11:00-13:00', 'The opening hours of Friday: 09:00–12:00 and 11:00–13:00 overlap.'],
    ['Sat 01:00-02:00, 03:00-04:00, 05:00-06:00, 07:00-08:00, 09:00-10:00, 11:00-12:00, 13:00-14:00', 'Line 1 of the opening hours (“Sat 01:00-02:00, 03:00-04:00, 05:00-06:…”) has 7 time ranges; a day has at most 6.']
  ]) {
    // Refused: 303 to the form's draft (Post/Redirect/Get), which shows the problem.
    const sent = await browser.submit(page, page, { ...fields, 'settings.opening_hours': hours })
    t.equal(sent.statusCode, 303, hours)
    const res = await browser.get(String(sent.headers.location).replace(/#.*$/, ''))
    t.match(res.body, `<p id="settings-opening_hours-error" class="field-error">${problem.replaceAll('“', '“').replaceAll('"', '&quot;')}</p>`, problem)
    t.match(res.body, /<textarea id="settings-opening_hours" name="settings.opening_hours" rows="7" class="code" spellcheck="false" aria-describedby="settings-opening_hours-hint settings-opening_hours-error" aria-invalid="true">/)
  }
  const emptied = await browser.submit(page, page, { ...fields, 'settings.opening_hours': '' })
  t.equal(emptied.statusCode, 303)
  t.same((await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/tools`, headers: account.headers })).json()[0].settings.opening_hours,
    Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri'].map((day) => [day, [{ from: '09:00', to: '17:00' }]])), 'empty: the default hours')
})

t.test('the Appointments page and the tool\'s form pass axe-core in Chromium; cancelling and saving hours by clicking', async (t) => {
  const ctx = await setup(t)
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const user = await createConsoleUser(ctx.db)
  const { key } = await createApiKey(ctx.db, user.id)
  const account = { user, key, headers: { 'x-api-key': key } }
  const agent = await createAgent(ctx.app, account, { agent_name: 'Front desk' })
  const toolId = await toolOf(ctx, account, agent._id)
  const row = await booked(ctx, account, agent._id, toolId, BASE, 'Ada Lovelace')

  const browser = await launchChromium(t)
  const page = await browser.newPage()
  await signInAt(page, url, user.email, PASSWORD)
  const checked: Record<string, unknown> = {}
  await page.goto(`${url}/appointments`)
  checked.appointments = await axeViolations(page)
  await page.getByRole('button', { name: /Cancel the appointment of Ada Lovelace/ }).click()
  await page.getByText('The appointment is cancelled').waitFor()
  checked['after a cancel'] = await axeViolations(page)
  t.equal((await ctx.db.selectFrom('appointments').select('status').where('id', '=', row.id).executeTakeFirstOrThrow()).status, 'cancelled')
  await page.goto(`${url}/appointments?from=2030-13-01`)
  checked['a bad filter'] = await axeViolations(page)

  await page.goto(`${url}/agents/${agent._id}/tools/${toolId}`)
  checked['the tool form'] = await axeViolations(page)
  await page.getByLabel('Opening hours').fill('Mon 09:00-12:00\nMon 13:00-17:00')
  await page.getByRole('button', { name: 'Save' }).click()
  await page.locator('#settings-opening_hours-error').waitFor()
  t.match(await page.locator('#settings-opening_hours-error').textContent(), /Monday is given twice/)
  checked['hours refused'] = await axeViolations(page)
  await page.getByLabel('Opening hours').fill('Mon 09:00-12:00, 13:00-17:00\nSun 10:00-12:00')
  await page.getByRole('button', { name: 'Save' }).click()
  await page.getByText('Saved.').waitFor()
  const settings = (await ctx.app.inject({ method: 'GET', url: `/v1/agent/${agent._id}/tools`, headers: account.headers })).json()[0].settings
  t.same(settings.opening_hours, { mon: [{ from: '09:00', to: '12:00' }, { from: '13:00', to: '17:00' }], sun: [{ from: '10:00', to: '12:00' }] })
  t.same(checked, Object.fromEntries(Object.keys(checked).map((name) => [name, []])), 'no violations')
})
