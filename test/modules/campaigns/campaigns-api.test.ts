import t from 'tap'
import { createAccount, setup, type TestContext } from '../../helpers/app.ts'
import { agentOf, ALWAYS, buyNumber, csvUpload } from './helpers.ts'

// POST /v1/campaigns and the campaign routes without the dialler: the import's checks and report, bad files,
// limits, pause/resume/cancel and another account's ids. The dialler is test/modules/campaigns/dialler.test.ts.

const FROM = '+12125550100'
const LISTED = '+14155550177'

async function ready (t: Parameters<typeof setup>[0], env: Record<string, string> = {}) {
  const ctx = await setup(t, { CAMPAIGN_MAX_ROWS: '100', CAMPAIGN_MAX_FILE_MB: '1', ...env })
  const account = await createAccount(ctx.db)
  const listed = await ctx.app.inject({ method: 'POST', url: '/v1/dnc', headers: account.headers, payload: { phone_number: LISTED } })
  if (listed.statusCode !== 201) throw new Error(listed.body)
  const agentId = await agentOf(ctx, account)
  await buyNumber(ctx, account, FROM)
  return { ctx, account, agentId, settings: { name: 'Reminders', agent_id: agentId, from_number: FROM, calling_hours: ALWAYS } }
}

const post = (ctx: TestContext, headers: Record<string, string>, payload: unknown, extra: Record<string, string> = {}) =>
  ctx.app.inject({ method: 'POST', url: '/v1/campaigns', headers: { ...headers, ...extra }, payload: payload as string })

t.test('a CSV upload: each row checked and reported, columns become dynamic_context, only the callable rows stored', async (t) => {
  const { ctx, account, settings } = await ready(t)
  const csv = 'phone_number,name,timezone\n' +
    '+1 (415) 555-0101,Ada,\n' + // formatted: normalised
    '"+14155550102","Bob ""the builder"", Jr",Europe/Berlin\n' + // quoted, a zone of its own
    'not a number,Cy,\n' +
    '+14155550101,Ada again,\n' + // duplicate of row 1
    `${LISTED},Dee,\n` + // on the do-not-call list
    '+14155550103,Eve,Mars/Olympus\n' + // no such zone
    '+14155550104,Fay\n' // a column short
  const upload = csvUpload(settings, csv)
  const res = await post(ctx, { ...account.headers, ...upload.headers }, upload.payload)
  t.equal(res.statusCode, 201, res.body)
  const { campaign, report } = res.json()
  t.match(report, {
    rows: 7,
    imported: 2,
    invalid_count: 3,
    duplicate_count: 1,
    do_not_call_count: 1,
    invalid: [{ row: 3, reason: 'invalid_phone_number' }, { row: 6, reason: 'invalid_timezone' }, { row: 7, reason: 'wrong_column_count' }],
    duplicates: [{ row: 4, phone_number: '+14155550101', first_row: 1 }],
    do_not_call: [{ row: 5, phone_number: LISTED }]
  })
  t.match(campaign, { name: 'Reminders', status: 'active', from_numbers: [FROM], columns: ['name'], timezones: ['America/Los_Angeles', 'Europe/Berlin'], progress: { total: 2, pending: 2 } })
  const rows = await ctx.db.selectFrom('campaign_contacts').select(['row_number', 'phone_number', 'timezone', 'columns']).orderBy('row_number').execute()
  t.same(rows, [
    { row_number: 1, phone_number: '+14155550101', timezone: 'America/Los_Angeles', columns: { name: 'Ada' } },
    { row_number: 2, phone_number: '+14155550102', timezone: 'Europe/Berlin', columns: { name: 'Bob "the builder", Jr' } }
  ])
})

t.test('JSON contacts and a text/csv body take the same checks', async (t) => {
  const { ctx, account, settings } = await ready(t)
  const json = await post(ctx, account.headers, { ...settings, contacts: [{ phone_number: '+4930123456', dynamic_context: { name: 'Ute' } }, { phone_number: '+4930123456' }, { phone_number: 'x' }] })
  t.equal(json.statusCode, 201, json.body)
  t.match(json.json(), { campaign: { columns: ['name'], timezones: ['Europe/Berlin'] }, report: { rows: 3, imported: 1, duplicate_count: 1, invalid_count: 1 } })
  const text = await ctx.app.inject({
    method: 'POST', url: `/v1/campaigns?settings=${encodeURIComponent(JSON.stringify(settings))}`, headers: { ...account.headers, 'content-type': 'text/csv' }, payload: 'phone_number\n+12125550123\n'
  })
  t.equal(text.statusCode, 201, text.body)
  t.match(text.json(), { campaign: { timezones: ['America/New_York'] }, report: { imported: 1 } })
  const noSettings = await ctx.app.inject({ method: 'POST', url: '/v1/campaigns', headers: { ...account.headers, 'content-type': 'text/csv' }, payload: 'phone_number\n+12125550123\n' })
  t.match(noSettings.json(), { statusCode: 400, code: 'validation_error', message: /query.settings is required/ })
})

t.test('bad files are refused whole with a clear 4xx, and nothing is stored', async (t) => {
  const { ctx, account, settings } = await ready(t)
  const send = async (csv: string | Buffer, s: unknown = settings) => {
    const upload = csvUpload(s, csv)
    return (await post(ctx, { ...account.headers, ...upload.headers }, upload.payload)).json()
  }
  t.match(await send('phone,name\n+14155550101,Ada\n'), { statusCode: 400, code: 'invalid_csv', message: /no "phone_number" column/ }, 'the phone column missing')
  t.match(await send('number,name\n+14155550101,Ada\n', { ...settings, phone_column: 'number' }), { campaign: { status: 'active' } }, 'phone_column names another')
  t.match(await send('phone_number,name\n"+14155550101,Ada\n'), { statusCode: 400, code: 'invalid_csv', message: /cannot be read/ }, 'an unclosed quote')
  t.match(await send('phone_number,a,a\n+14155550101,1,2\n'), { statusCode: 400, code: 'invalid_csv', message: /appears twice/ })
  t.match(await send('phone_number,name\n+14155550101,A\0da\n'), { statusCode: 400, code: 'invalid_text' }, 'a NUL byte')
  t.match(await send('phone_number\n'), { statusCode: 400, code: 'invalid_csv', message: /no rows/ })
  t.match(await send(`phone_number\n${Array.from({ length: 101 }, (_, i) => `+1415555${String(i).padStart(4, '0')}`).join('\n')}\n`), { statusCode: 413, code: 'too_many_rows' })
  t.match(await send(Buffer.alloc(1024 * 1024 + 10, 'a')), { statusCode: 413, code: 'file_too_large' })
  t.match(await send('phone_number\nnope\n'), { statusCode: 422, code: 'no_valid_contacts', message: /1 invalid/ })
  t.match(await send('phone_number\n+14155550101\n', { ...settings, from_number: undefined }), { statusCode: 400, message: /from_number/ })
  t.match(await send('phone_number\n+14155550101\n', { ...settings, calling_hours: { mon: [{ start: '9:00', end: '17:00' }] } }), { statusCode: 400, code: 'validation_error', message: /body.settings.calling_hours.mon/ })
  t.match(await send('phone_number\n+14155550101\n', { ...settings, timezone: 'Nowhere/Land' }), { statusCode: 400, code: 'invalid_value' })
  t.match((await post(ctx, { ...account.headers, 'content-type': 'application/xml' }, '<a/>')).json(), { statusCode: 415 })
  t.match((await post(ctx, account.headers, { ...settings, contacts: Array.from({ length: 101 }, () => ({ phone_number: '+14155550101' })) })).json(), { statusCode: 413, code: 'too_many_rows' })
  const campaigns = await ctx.db.selectFrom('campaigns').select('id').execute()
  t.equal(campaigns.length, 1, 'only the good upload made a campaign')
  t.equal((await ctx.db.selectFrom('campaign_contacts').select('id').execute()).length, 1)
})

t.test('pause, resume, cancel; another account sees none of it', async (t) => {
  const { ctx, account, settings, agentId } = await ready(t)
  const created = (await post(ctx, account.headers, { ...settings, contacts: [{ phone_number: '+14155550101' }, { phone_number: '+14155550102' }] })).json()
  const id = created.campaign._id
  const act = async (action: string, headers = account.headers) => (await ctx.app.inject({ method: 'POST', url: `/v1/campaigns/${id}/${action}`, headers })).json()
  t.match(await act('pause'), { status: 'paused', status_reason: null })
  t.match(await act('pause'), { status: 'paused' }, 'pausing twice changes nothing')
  t.match(await act('resume'), { status: 'active' })
  t.match(await act('cancel'), { status: 'cancelled', progress: { total: 2, cancelled: 2, pending: 0 } })
  t.match(await act('resume'), { statusCode: 409, code: 'campaign_finished' })

  const list = (await ctx.app.inject({ method: 'GET', url: '/v1/campaigns', headers: account.headers })).json()
  t.match(list, [{ _id: id, status: 'cancelled' }])

  const other = await createAccount(ctx.db)
  t.same((await ctx.app.inject({ method: 'GET', url: '/v1/campaigns', headers: other.headers })).json(), [])
  for (const url of [`/v1/campaigns/${id}`, `/v1/campaigns/${id}/results.csv`]) {
    t.match((await ctx.app.inject({ method: 'GET', url, headers: other.headers })).json(), { statusCode: 404, code: 'not_found' }, url)
  }
  for (const action of ['pause', 'resume', 'cancel']) t.match(await act(action, other.headers), { statusCode: 404 }, action)
  // Nor can another account use this one's agent or number.
  const otherAgent = await agentOf(ctx, other)
  t.match((await post(ctx, other.headers, { ...settings, contacts: [{ phone_number: '+14155550101' }] })).json(), { statusCode: 404, message: new RegExp(`agent ${agentId}`) })
  t.match((await post(ctx, other.headers, { ...settings, agent_id: otherAgent, contacts: [{ phone_number: '+14155550101' }] })).json(), { statusCode: 404, message: /phone number/ })
  t.match((await ctx.app.inject({ method: 'GET', url: '/v1/campaigns/nothex', headers: account.headers })).json(), { statusCode: 400, code: 'invalid_id' })
})
