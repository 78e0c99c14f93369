import t from 'tap'
import { createAccount, setup, type TestContext } from '../helpers/app.ts'
import { csrfOf, signedInWithKey, unescapeHtml, type ConsoleClient } from '../helpers/console-client.ts'
import { agentOf, buyNumber } from '../modules/campaigns/helpers.ts'

// The console's Campaigns pages (docs/campaigns.md, "The console"): the list, the New campaign form (a multipart
// upload through the campaigns module's own checks, its refusals shown on the form with what was typed), a campaign's
// page (progress bar, outcome chart, the import's report), pause/resume/cancel, the results CSV through the session,
// another account's campaign and the CSRF token. No workers run: nobody is called.

const FROM = '+12125550100'
const SECOND = '+12125550101'
const LISTED = '+14155550177'

/** A multipart form as a browser sends it: the fields in order, then the CSV file (`file: null`: the input left empty). */
function multipart (fields: Array<[string, string]>, file: { name: string, text: string | Buffer } | null) {
  const boundary = '----console-campaign'
  const parts = fields.map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`).join('')
  const fileHead = `--${boundary}\r\nContent-Disposition: form-data; name="contacts"; filename="${file?.name ?? ''}"\r\nContent-Type: ${file === null ? 'application/octet-stream' : 'text/csv'}\r\n\r\n`
  const body = file === null ? Buffer.alloc(0) : Buffer.isBuffer(file.text) ? file.text : Buffer.from(file.text)
  return {
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    payload: Buffer.concat([Buffer.from(parts + fileHead), body, Buffer.from(`\r\n--${boundary}--\r\n`)])
  }
}

async function ready (t: Parameters<typeof setup>[0], env: Record<string, string> = {}) {
  const ctx = await setup(t, { CAMPAIGN_MAX_FILE_MB: '1', ...env })
  const { account, browser } = await signedInWithKey(ctx)
  const listed = await ctx.app.inject({ method: 'POST', url: '/v1/dnc', headers: account.headers, payload: { phone_number: LISTED } })
  if (listed.statusCode !== 201) throw new Error(listed.body)
  const agentId = await agentOf(ctx, account)
  await buyNumber(ctx, account, FROM)
  await buyNumber(ctx, account, SECOND)
  return { ctx, account, browser, agentId }
}

/** The form's fields as a person fills them in: weekday hours, own retries, both numbers. */
function filled (agentId: string, change: Record<string, string> = {}): Array<[string, string]> {
  const form: Record<string, string> = {
    name: 'December reminders',
    agent_id: agentId,
    [`from_${FROM.slice(1)}`]: 'on',
    [`from_${SECOND.slice(1)}`]: 'on',
    phone_column: 'phone',
    start_at: '2026-12-01T09:00',
    timezone: 'Europe/Berlin',
    hours_mon_start: '09:00',
    hours_mon_end: '17:30',
    hours_sat_start: '10:00',
    hours_sat_end: '24:00',
    max_concurrent_calls: '3',
    max_calls_per_minute: '12',
    ring_timeout_seconds: '25',
    retry: 'own',
    retry_max_attempts: '2',
    retry_delay_minutes: '90',
    retry_on_no_answer: 'on',
    retry_on_voicemail: 'on',
    ...change
  }
  return Object.entries(form)
}

async function postForm (ctx: TestContext, browser: ConsoleClient, fields: Array<[string, string]>, file: { name: string, text: string | Buffer } | null, csrf = true) {
  const token = csrfOf((await browser.get('/campaigns/new')).body)
  const form = multipart(csrf ? [['csrf_token', token], ...fields] : fields, file)
  return await ctx.app.inject({ method: 'POST', url: '/campaigns', headers: { cookie: browser.cookieHeader, ...form.headers }, payload: form.payload })
}

const CSV = 'phone,name\n+1 (415) 555-0101,Ada\n+14155550102,"Bob ""B"", Jr"\nnot a number,Cy\n+14155550101,Ada again\n' + `${LISTED},Dee\n`

t.test('list, create through the form with a CSV file, the campaign page with its report, progress, outcomes and results', async (t) => {
  const { ctx, account, browser, agentId } = await ready(t)

  const empty = await browser.get('/campaigns')
  t.equal(empty.statusCode, 200)
  t.match(empty.body, /<a href="\/campaigns" aria-current="page">Campaigns<\/a>/, 'in the navigation')
  t.match(empty.body, /No campaigns yet\. <a href="\/campaigns\/new">Create a campaign<\/a>/, 'the empty state explains and links to the form')

  const form = await browser.get('/campaigns/new')
  t.equal(form.statusCode, 200)
  t.match(form.body, `<option value="${agentId}">Caller</option>`)
  t.match(form.body, `<input type="checkbox" id="from_${FROM.slice(1)}" name="from_${FROM.slice(1)}"><label for="from_${FROM.slice(1)}">${FROM}</label>`)
  t.match(form.body, /enctype="multipart\/form-data"/)
  t.match(form.body, 'id="hours_mon_start" name="hours_mon_start" value="09:00"', 'the API\'s default hours filled in')

  const created = await postForm(ctx, browser, filled(agentId), { name: 'list.csv', text: CSV })
  t.equal(created.statusCode, 201, created.body)
  t.match(created.body, '<h1>December reminders</h1>')
  t.match(created.body, 'Created: 2 contacts to call.')
  t.match(created.body, '5 rows in the file: 2 imported, 1 invalid, 1 duplicate, 1 on the do-not-call list.')
  t.match(created.body, /<tr><td>3<\/td><td>not a number<\/td><td>Not a phone number<\/td><\/tr>/)
  t.match(created.body, /<tr><td>4<\/td><td>\+14155550101<\/td><td>The same number as row 1<\/td><\/tr>/)
  t.match(created.body, `<tr><td>5</td><td>${LISTED}</td><td>On your do-not-call list</td></tr>`)
  t.match(created.body, /<section aria-labelledby="report-title" class="report" data-address="\/campaigns\/[0-9a-f]{24}">/, 'static/campaigns.js gives the answer the campaign\'s address')
  t.match(created.body, '<script src="/console/campaigns.js" defer></script>')
  t.match(created.body, /role="progressbar" aria-label="Progress of December reminders" aria-valuemin="0" aria-valuemax="2" aria-valuenow="0" aria-valuetext="0 of 2 done, 0 calling, 2 pending"/)

  const [api] = (await ctx.app.inject({ method: 'GET', url: '/v1/campaigns', headers: account.headers })).json()
  t.match(api, {
    name: 'December reminders',
    agent_id: agentId,
    status: 'active',
    from_numbers: [FROM, SECOND],
    start_at: Date.parse('2026-12-01T08:00:00Z'), // 09:00 in Berlin
    calling_hours: { mon: [{ start: '09:00', end: '17:30' }], sat: [{ start: '10:00', end: '24:00' }] },
    timezones: ['America/Los_Angeles'],
    max_concurrent_calls: 3,
    max_calls_per_minute: 12,
    ring_timeout_seconds: 25,
    retry_settings: { max_attempts: 2, retry_delay_minutes: 90, on_outcomes: ['no_answer', 'voicemail'] },
    columns: ['name'],
    progress: { total: 2, pending: 2 }
  }, 'stored as POST /v1/campaigns stores it')
  t.same(Object.keys(api.calling_hours), ['mon', 'sat'], 'days left empty have no hours')

  const list = await browser.get('/campaigns')
  t.match(list.body, `<a href="/campaigns/${api._id as string}">December reminders</a>`)
  t.match(list.body, '<td>Caller</td>')
  t.match(list.body, 'Active, starts <time datetime="2026-12-01T08:00:00.000Z">2026-12-01 08:00 UTC</time>', 'in the viewer\'s zone once local-time.js runs')
  t.match(list.body, 'aria-valuetext="0 of 2 done, 0 calling, 2 pending"')

  // The dialler's work, written as it leaves it: one done, one being called.
  const contacts = await ctx.db.selectFrom('campaign_contacts').select('id').orderBy('row_number').execute()
  await ctx.db.updateTable('campaign_contacts').set({ status: 'done', outcome: 'success', attempts: 1 }).where('id', '=', contacts[0].id).execute()
  await ctx.db.updateTable('campaign_contacts').set({ status: 'calling', attempts: 1 }).where('id', '=', contacts[1].id).execute()
  const page = await browser.get(`/campaigns/${api._id as string}`)
  t.equal(page.statusCode, 200)
  t.match(page.body, 'aria-valuemax="2" aria-valuenow="1" aria-valuetext="1 of 2 done, 1 calling, 0 pending"')
  t.match(page.body, /<svg class="chart"[^>]*role="img"/, 'the outcome chart')
  t.match(page.body, '<title id="outcomes-title">Done contacts by outcome</title>')
  t.match(page.body, '<th scope="row">Talked to a person</th><td>1</td>')
  t.match(page.body, 'Up to 2 more calls, 90 minutes apart, after: no answer, voicemail')
  t.notMatch(page.body, 'Rows not imported', 'the report is shown once, with the answer that created it')

  const download = await browser.get(`/campaigns/${api._id as string}/results.csv`)
  t.equal(download.statusCode, 200)
  t.equal(download.headers['content-type'], 'text/csv; charset=utf-8')
  t.equal(download.headers['content-disposition'], `attachment; filename="campaign_${api._id as string}_results.csv"`)
  const fromApi = await ctx.app.inject({ method: 'GET', url: `/v1/campaigns/${api._id as string}/results.csv`, headers: account.headers })
  t.equal(download.body, fromApi.body, 'the API\'s CSV')
  t.match(download.body, /^phone_number,name,timezone,status,outcome,attempts,last_call_id,call_summary\n\+14155550101,Ada,America\/Los_Angeles,done,success,1,,\n/)
  t.equal((await ctx.app.inject({ method: 'GET', url: `/campaigns/${api._id as string}/results.csv` })).statusCode, 303, 'signed out: sent to sign in, no API key taken')

  // Paused by the dialler, its agent deleted: the page says why, and names no agent.
  await ctx.db.updateTable('campaigns').set({ status: 'paused', status_reason: 'no_credits' }).execute()
  await ctx.app.inject({ method: 'DELETE', url: `/v1/agent/${agentId}`, headers: account.headers })
  const paused = await browser.get(`/campaigns/${api._id as string}`)
  t.match(paused.body, '<dt>Status</dt><dd>Paused: the account has no credits and no auto top-up</dd>')
  t.match(paused.body, '<dt>Agent</dt><dd>A deleted agent</dd>')
  t.match((await browser.get('/campaigns')).body, '<td>A deleted agent</td>')
})

t.test('bad files and bad fields: the form again with each reason, what was typed kept, nothing stored', async (t) => {
  const { ctx, browser, agentId } = await ready(t)
  const kept = (body: string) => unescapeHtml(/id="name" name="name" value="([^"]*)"/.exec(body)?.[1] ?? '')

  const noColumn = await postForm(ctx, browser, filled(agentId, { name: 'Kept <name>' }), { name: 'x.csv', text: 'number,name\n+14155550101,Ada\n' })
  t.equal(noColumn.statusCode, 400)
  t.match(noColumn.body, /<p id="contacts-error" class="field-error">The CSV file&#39;s header has no &quot;phone&quot; column \(the phone numbers\); its columns: &quot;number&quot;, &quot;name&quot;\. Fix the file, then choose it again\.<\/p>/)
  t.match(noColumn.body, 'aria-invalid="true"')
  t.equal(kept(noColumn.body), 'Kept <name>', 'the name as typed')
  t.match(noColumn.body, 'id="hours_sat_end" name="hours_sat_end" value="24:00"', 'and the hours')
  t.match(noColumn.body, `id="from_${SECOND.slice(1)}" name="from_${SECOND.slice(1)}" checked`, 'and the numbers')
  t.match(noColumn.body, '<option value="Europe/Berlin" selected>')

  const noneCallable = await postForm(ctx, browser, filled(agentId), { name: 'x.csv', text: `phone\nnope\n${LISTED}\n` })
  t.equal(noneCallable.statusCode, 422)
  t.match(noneCallable.body, 'Why no row of the file can be called')
  t.match(noneCallable.body, '<tr><td>1</td><td>nope</td><td>Not a phone number</td></tr>')
  t.match(noneCallable.body, `<tr><td>2</td><td>${LISTED}</td><td>On your do-not-call list</td></tr>`)
  t.match(noneCallable.body, 'None of the 2 rows can be called: 1 invalid, 0 duplicates, 1 on the do-not-call list.')

  const unclosed = await postForm(ctx, browser, filled(agentId), { name: 'x.csv', text: 'phone,name\n+14155550101,"Ada\n' })
  t.equal(unclosed.statusCode, 400)
  t.match(unclosed.body, 'The CSV file cannot be read')

  const large = await postForm(ctx, browser, filled(agentId, { name: 'Big one' }), { name: 'big.csv', text: `phone\n${'+14155550101\n'.repeat(90_000)}` })
  t.equal(large.statusCode, 413)
  t.match(large.body, 'The CSV file is larger than 1 MB (CAMPAIGN_MAX_FILE_MB). Choose the file again.')
  t.equal(kept(large.body), 'Big one', 'fields before the file are kept')

  const noFile = await postForm(ctx, browser, filled(agentId), null)
  t.equal(noFile.statusCode, 400)
  t.match(noFile.body, 'Choose the CSV file of the contacts to call.')

  const fields = await postForm(ctx, browser, filled(agentId, { name: '', max_concurrent_calls: '0', hours_mon_end: '', hours_tue_start: '9', hours_tue_end: '17:00', hours_wed_start: '18:00', hours_wed_end: '08:00', retry_max_attempts: '11', start_at: 'soon' }), { name: 'ok.csv', text: 'phone\n+14155550101\n' })
  t.equal(fields.statusCode, 400)
  for (const message of [
    'The name is required.',
    'Calls at once must be &gt;= 1.',
    'Give Monday both times, or neither for no calls that day.',
    'Write a time of day as HH:MM',
    'Wednesday&#39;s calls must end after they start.',
    'Calls after the first must be &lt;= 10.',
    'Write the start as a date and time',
    'Choose the file again: a browser does not keep it when the form comes back.'
  ]) t.match(fields.body, message)

  const noNumber = await postForm(ctx, browser, filled(agentId).filter(([name]) => !name.startsWith('from_')), { name: 'ok.csv', text: 'phone\n+14155550101\n' })
  t.match(noNumber.body, 'Choose at least one number to call from.')

  await ctx.db.updateTable('agents').set({ status: 'inactive' }).where('id', '=', agentId).execute()
  const inactive = await postForm(ctx, browser, filled(agentId), { name: 'ok.csv', text: 'phone\n+14155550101\n' })
  t.equal(inactive.statusCode, 409)
  t.match(inactive.body, 'This agent is inactive: set it active on its page first, or choose another.')
  t.match(inactive.body, `<option value="${agentId}" selected>Caller (inactive)</option>`)

  const notMultipart = await browser.submit('/campaigns/new', '/campaigns', Object.fromEntries(filled(agentId)))
  t.equal(notMultipart.statusCode, 400)
  t.match(notMultipart.body, '<p class="notice error" role="alert">The form could not be read as an upload (multipart/form-data). Reload the page and send it again.</p>', 'a form sent without its file: a message, not a 500')
  t.notMatch(notMultipart.body, 'Some fields need another look')

  t.equal((await ctx.db.selectFrom('campaigns').select('id').execute()).length, 0, 'nothing stored')
})

t.test('pause, resume, cancel with the API\'s functions; a finished campaign; another account\'s id; the CSRF token', async (t) => {
  const { ctx, account, browser, agentId } = await ready(t)
  const create = async (headers: Record<string, string>, body: Record<string, unknown>) => {
    const res = await ctx.app.inject({ method: 'POST', url: '/v1/campaigns', headers, payload: { name: 'Quiet', calling_hours: {}, contacts: [{ phone_number: '+14155550101' }], ...body } })
    if (res.statusCode !== 201) throw new Error(res.body)
    return res.json().campaign._id as string
  }
  const id = await create(account.headers, { agent_id: agentId, from_number: FROM })
  const status = async () => (await ctx.app.inject({ method: 'GET', url: `/v1/campaigns/${id}`, headers: account.headers })).json().status

  const page = await browser.get(`/campaigns/${id}`)
  t.match(page.body, `<form method="post" action="/campaigns/${id}/pause">`)
  t.notMatch(page.body, `action="/campaigns/${id}/resume"`)
  const paused = await browser.submit(`/campaigns/${id}`, `/campaigns/${id}/pause`, {})
  t.equal(paused.statusCode, 303)
  t.equal(paused.headers.location, `/campaigns/${id}?done=pause`)
  t.equal(await status(), 'paused')
  const pausedPage = await browser.get(`/campaigns/${id}?done=pause`)
  t.match(pausedPage.body, 'Paused: no new calls.')
  t.match(pausedPage.body, `action="/campaigns/${id}/resume"`)
  t.equal((await browser.submit(`/campaigns/${id}`, `/campaigns/${id}/resume`, {})).headers.location, `/campaigns/${id}?done=resume`)
  t.equal(await status(), 'active')
  t.equal((await browser.post(`/campaigns/${id}/cancel`, {})).statusCode, 403, 'no CSRF token: refused')
  t.equal(await status(), 'active')
  t.equal((await browser.submit(`/campaigns/${id}`, `/campaigns/${id}/cancel`, {})).headers.location, `/campaigns/${id}?done=cancel`)
  t.equal(await status(), 'cancelled')
  const finished = await browser.get(`/campaigns/${id}`)
  t.notMatch(finished.body, `action="/campaigns/${id}/`, 'no buttons once cancelled')
  t.match(finished.body, 'aria-valuetext="0 of 1 done, 0 calling, 0 pending, 1 cancelled"')
  const again = await browser.post(`/campaigns/${id}/resume`, { csrf_token: csrfOf(finished.body) })
  t.equal(again.statusCode, 409)
  t.match(again.body, 'This campaign is cancelled: it cannot be paused, resumed or cancelled any more.')

  const other = await createAccount(ctx.db)
  const otherAgent = await agentOf(ctx, other)
  await buyNumber(ctx, other, '+12125550199')
  const theirs = await create(other.headers, { agent_id: otherAgent, from_number: '+12125550199' })
  const token = csrfOf(page.body)
  t.equal((await browser.get(`/campaigns/${theirs}`)).statusCode, 404)
  t.match((await browser.get(`/campaigns/${theirs}`)).body, 'You have no campaign with that id.')
  t.equal((await browser.get(`/campaigns/${theirs}/results.csv`)).statusCode, 404)
  for (const action of ['pause', 'resume', 'cancel']) t.equal((await browser.post(`/campaigns/${theirs}/${action}`, { csrf_token: token })).statusCode, 404)
  t.equal((await browser.get('/campaigns/not-an-id')).statusCode, 404)
  t.equal((await browser.get('/campaigns?skip=x')).statusCode, 400)
  t.equal((await ctx.app.inject({ method: 'GET', url: `/v1/campaigns/${theirs}`, headers: other.headers })).json().status, 'active', 'theirs untouched')
  t.notMatch((await browser.get('/campaigns')).body, theirs, 'not listed')

  // A forged upload: no token first, or another one: refused before the file is read, nothing stored.
  for (const fields of [filled(agentId), [['csrf_token', 'forged'] as [string, string], ...filled(agentId)]]) {
    const forged = await postForm(ctx, browser, fields, { name: 'ok.csv', text: 'phone\n+14155550101\n' }, false)
    t.equal(forged.statusCode, 403)
    t.match(forged.body, 'This form has expired.')
  }
  t.equal((await ctx.db.selectFrom('campaigns').select('id').execute()).length, 2, 'nothing more stored')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/campaigns' })).statusCode, 303, 'signed out: sent to sign in')
})
