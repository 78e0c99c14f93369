import { Writable } from 'node:stream'
import pino from 'pino'
import t from 'tap'
import type { Test } from 'tap'
import { sealSecret } from '../../src/db/secrets.ts'
import { createAccount, setup, type TestContext } from '../helpers/app.ts'
import { PUBLIC, telnyxSettings } from '../helpers/telnyx-phone.ts'
import { startTelnyxStandIn, type TelnyxStandIn } from '../helpers/telnyx-standin.ts'

// POST /v1/phone-number/import-carrier with carrier telnyx and the tenant's own Telnyx account (api_key, public_key),
// against the Telnyx stand-in's second account: checked with Telnyx, routed here through a Call Control application
// made in the tenant's account with a webhook URL of that account's own, kept per number and never returned;
// rotated with PATCH /v1/phone-number/telnyx-credentials; unrouted with the tenant's key on delete.

const TENANT_NUMBER = '+13125550140'
const SECOND_NUMBER = '+13125550141'

type Ctx = TestContext & { telnyx: TelnyxStandIn, logs: string[] }

async function listen (t: Test): Promise<Ctx> {
  const telnyx = await startTelnyxStandIn(t)
  const logs: string[] = []
  const logger = pino({ level: 'trace' }, new Writable({ write (chunk, _encoding, done) { logs.push(String(chunk)); done() } }))
  const ctx = await setup(t, telnyxSettings(telnyx), { logger })
  telnyx.tenant.owned.set('2293384261075731401', { id: '2293384261075731401', phone_number: TENANT_NUMBER, connection_id: null })
  telnyx.tenant.owned.set('2293384261075731402', { id: '2293384261075731402', phone_number: SECOND_NUMBER, connection_id: null })
  return { ...ctx, telnyx, logs }
}

const importTenant = async (ctx: Ctx, headers: Record<string, string>, payload: Record<string, unknown>) =>
  await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { carrier: 'telnyx', api_key: ctx.telnyx.tenant.apiKey, public_key: ctx.telnyx.tenant.publicKey, ...payload } })

t.test('a number of the tenant\'s own Telnyx account: imported, on an application of its own account whose webhook names the account here; the key never returned', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const res = await importTenant(ctx, account.headers, { phone_number: TENANT_NUMBER, nickname: 'Front desk' })
  t.equal(res.statusCode, 201, res.body)
  t.match(res.json(), { phone_number: TENANT_NUMBER, carrier: 'telnyx', source: 'imported', carrier_number_id: '2293384261075731401', nickname: 'Front desk' })
  t.notOk(res.body.includes(ctx.telnyx.tenant.apiKey), 'the API key is not in the answer')
  t.notOk('api_key' in res.json() || 'public_key' in res.json())

  const [application] = ctx.telnyx.tenant.applications.values()
  const row = await ctx.db.selectFrom('phone_numbers').selectAll().executeTakeFirstOrThrow()
  t.equal(application.webhook_event_url, `${PUBLIC}/telephony/telnyx/webhook/accounts/${row.carrier_account_id}`, 'the application\'s webhooks come to the URL naming the account')
  t.match(row, { carrier_public_key: ctx.telnyx.tenant.publicKey, carrier_connection_id: application.id })
  t.not(row.carrier_auth_token, ctx.telnyx.tenant.apiKey, 'the API key is stored sealed')
  t.equal(ctx.telnyx.tenant.owned.get('2293384261075731401')!.connection_id, application.id, 'the number\'s calls go to the application')
  t.same(ctx.telnyx.tenant.requests.map((r) => `${r.method} ${r.path}`), ['GET /v2/phone_numbers', 'POST /v2/call_control_applications', 'PATCH /v2/phone_numbers/2293384261075731401'], 'all with the tenant\'s key')
  t.equal(ctx.telnyx.owned.size, 0, 'nothing at the installation\'s account')

  // A second number of that account goes on the same application.
  const second = await importTenant(ctx, account.headers, { phone_number: SECOND_NUMBER })
  t.equal(second.statusCode, 201)
  t.equal(ctx.telnyx.tenant.applications.size, 1)
  t.equal(ctx.telnyx.tenant.owned.get('2293384261075731402')!.connection_id, application.id)

  for (const url of ['/v1/phone-number/list', `/v1/phone-number/${res.json()._id}`]) {
    const read = await ctx.app.inject({ method: 'GET', url, headers: account.headers })
    t.equal(read.statusCode, 200)
    t.notOk(read.body.includes(ctx.telnyx.tenant.apiKey), `${url} keeps the key to itself`)
  }
  t.notOk(ctx.logs.join('').includes(ctx.telnyx.tenant.apiKey), 'nor is it in any log line')
  t.ok(ctx.logs.length > 0, 'the logs were read')
})

t.test('a key Telnyx refuses is the caller\'s (400 carrier_credentials_rejected); nothing is stored or routed', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const wrongKey = 'KEYwrong0123456789abcdef'
  const res = await importTenant(ctx, account.headers, { phone_number: TENANT_NUMBER, api_key: wrongKey })
  t.equal(res.statusCode, 400)
  t.equal(res.json().code, 'carrier_credentials_rejected')
  t.notOk(res.body.includes(wrongKey), 'the key is not echoed')
  t.equal(ctx.telnyx.tenant.applications.size, 0)
  t.equal(ctx.telnyx.tenant.owned.get('2293384261075731401')!.connection_id, null)
  t.equal((await ctx.db.selectFrom('phone_numbers').selectAll().execute()).length, 0)
  t.notOk(ctx.logs.join('').includes(wrongKey), 'nor logged')
})

t.test('a number the account does not hold is 404, the installation\'s own numbers included; another account\'s number is 404 too', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const missing = await importTenant(ctx, account.headers, { phone_number: '+13125550199' })
  t.equal(missing.statusCode, 404)
  ctx.telnyx.owned.set('1293384261075731499', { id: '1293384261075731499', phone_number: '+13125550100', connection_id: null })
  const installations = await importTenant(ctx, account.headers, { phone_number: '+13125550100' })
  t.equal(installations.statusCode, 404, 'the installation\'s number is not in the tenant\'s account')
  t.equal(ctx.telnyx.owned.get('1293384261075731499')!.connection_id, null)

  const other = await createAccount(ctx.db)
  t.equal((await importTenant(ctx, other.headers, { phone_number: TENANT_NUMBER })).statusCode, 201)
  const again = await importTenant(ctx, account.headers, { phone_number: TENANT_NUMBER })
  t.equal(again.statusCode, 404, 'held by another account here: as a number the caller cannot see')
  t.equal((await importTenant(ctx, other.headers, { phone_number: TENANT_NUMBER })).json().code, 'number_taken')
  t.equal(ctx.telnyx.tenant.applications.size, 1, 'no application was made for a refused import')
})

t.test('the body: api_key and public_key together, telnyx\'s only, and never the installation\'s own account', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const cases: Array<[Record<string, unknown>, number, string | undefined]> = [
    [{ public_key: undefined }, 400, 'carrier_credentials_required'],
    [{ api_key: undefined }, 400, 'carrier_credentials_required'],
    [{ api_key: undefined, public_key: undefined }, 400, 'carrier_credentials_required'],
    [{ carrier: 'twilio' }, 400, undefined],
    [{ carrier: 'sandbox' }, 400, undefined],
    [{ public_key: ctx.telnyx.publicKey }, 400, 'carrier_credentials_required'],
    [{ public_key: 'not a key' }, 400, undefined]
  ]
  for (const [change, status, code] of cases) {
    const res = await importTenant(ctx, account.headers, { phone_number: TENANT_NUMBER, ...change })
    t.equal(res.statusCode, status, JSON.stringify(change))
    if (code !== undefined) t.equal(res.json().code, code, JSON.stringify(change))
  }
  // Without a carrier, the Telnyx credentials name it.
  const { carrier: _, ...body } = { carrier: 'telnyx', api_key: ctx.telnyx.tenant.apiKey, public_key: ctx.telnyx.tenant.publicKey, phone_number: TENANT_NUMBER }
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers: account.headers, payload: body })
  t.equal(res.statusCode, 201, res.body)
  t.equal(res.json().carrier, 'telnyx')
})

t.test('credentials rotation: a new API key checked with Telnyx, a new public key kept for every number of the account', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  await importTenant(ctx, account.headers, { phone_number: TENANT_NUMBER })
  await importTenant(ctx, account.headers, { phone_number: SECOND_NUMBER })
  const patch = async (payload: Record<string, unknown>, headers = account.headers) => await ctx.app.inject({ method: 'PATCH', url: '/v1/phone-number/telnyx-credentials', headers, payload })

  const refused = await patch({ phone_number: TENANT_NUMBER, api_key: 'KEYrotatedbutwrong' })
  t.equal(refused.statusCode, 400)
  t.equal(refused.json().code, 'carrier_credentials_rejected')
  const ok = await patch({ phone_number: TENANT_NUMBER, api_key: ctx.telnyx.tenant.apiKey })
  t.equal(ok.statusCode, 200)
  t.same(ok.json(), { phone_number: TENANT_NUMBER, numbers_updated: 2 })
  t.notOk(ok.body.includes(ctx.telnyx.tenant.apiKey))

  const newKey = Buffer.alloc(32, 7).toString('base64')
  const rotated = await patch({ phone_number: SECOND_NUMBER, public_key: newKey })
  t.same(rotated.json(), { phone_number: SECOND_NUMBER, numbers_updated: 2 })
  t.same((await ctx.db.selectFrom('phone_numbers').select('carrier_public_key').execute()).map((r) => r.carrier_public_key), [newKey, newKey])

  t.equal((await patch({ phone_number: TENANT_NUMBER, public_key: ctx.telnyx.publicKey })).json().code, 'carrier_credentials_required', 'never the installation\'s key')
  t.equal((await patch({ phone_number: TENANT_NUMBER })).statusCode, 400, 'something to replace')
  t.equal((await patch({ phone_number: '+13125550199', public_key: newKey })).statusCode, 404, 'not a number of the caller')
  const other = await createAccount(ctx.db)
  t.equal((await patch({ phone_number: TENANT_NUMBER, public_key: newKey }, other.headers)).statusCode, 404, 'another account\'s number')
})

t.test('delete: the number leaves its application with the tenant\'s key, and the last one takes the application; the number stays in the tenant\'s account', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const first = (await importTenant(ctx, account.headers, { phone_number: TENANT_NUMBER })).json()
  const second = (await importTenant(ctx, account.headers, { phone_number: SECOND_NUMBER })).json()
  const [application] = ctx.telnyx.tenant.applications.values()
  ctx.telnyx.tenant.requests.length = 0

  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/phone-number/${first._id}`, headers: account.headers })).statusCode, 204)
  t.equal(ctx.telnyx.tenant.owned.get('2293384261075731401')!.connection_id, null, 'its calls no longer come here')
  t.ok(ctx.telnyx.tenant.applications.has(application.id), 'the other number keeps the application')
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/phone-number/${second._id}`, headers: account.headers })).statusCode, 204)
  t.equal(ctx.telnyx.tenant.applications.size, 0, 'the last number took the application with it')
  t.equal(ctx.telnyx.tenant.owned.size, 2, 'the numbers stay the tenant\'s')
  t.same(ctx.telnyx.tenant.requests.map((r) => `${r.method} ${r.path}`), [
    'PATCH /v2/phone_numbers/2293384261075731401', 'PATCH /v2/phone_numbers/2293384261075731402', `DELETE /v2/call_control_applications/${application.id}`
  ])

  // A key revoked at Telnyx: the delete says so and keeps the number, until the key is replaced.
  const again = (await importTenant(ctx, account.headers, { phone_number: TENANT_NUMBER })).json()
  await ctx.db.updateTable('phone_numbers').set({ carrier_auth_token: sealSecret('KEYrevoked') }).execute()
  const refused = await ctx.app.inject({ method: 'DELETE', url: `/v1/phone-number/${again._id}`, headers: account.headers })
  t.equal(refused.statusCode, 400)
  t.equal(refused.json().code, 'carrier_credentials_rejected')
  t.match(refused.json().message, /telnyx-credentials/)
  t.equal((await ctx.app.inject({ method: 'PATCH', url: '/v1/phone-number/telnyx-credentials', headers: account.headers, payload: { phone_number: TENANT_NUMBER, api_key: ctx.telnyx.tenant.apiKey } })).statusCode, 200)
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/phone-number/${again._id}`, headers: account.headers })).statusCode, 204)
})

t.test('an installation without a Telnyx account of its own (on Twilio) still takes a tenant\'s own Telnyx numbers and their webhooks', async (t) => {
  const telnyx = await startTelnyxStandIn(t)
  telnyx.tenant.owned.set('2293384261075731401', { id: '2293384261075731401', phone_number: TENANT_NUMBER, connection_id: null })
  const ctx = await setup(t, { PHONE_CARRIER: 'twilio', TWILIO_ACCOUNT_SID: 'AC' + 'a'.repeat(32), TWILIO_AUTH_TOKEN: 'token', TWILIO_ALLOW_PRIVATE_BASE_URL: 'true', TELNYX_API_URL: telnyx.url, PUBLIC_BASE_URL: PUBLIC })
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  telnyx.route(PUBLIC, url)
  const account = await createAccount(ctx.db)
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers: account.headers, payload: { phone_number: TENANT_NUMBER, carrier: 'telnyx', api_key: telnyx.tenant.apiKey, public_key: telnyx.tenant.publicKey } })
  t.equal(res.statusCode, 201, res.body)
  const [application] = telnyx.tenant.applications.values()
  const hangup = { call_control_id: 'v3:nobody', hangup_cause: 'normal_clearing' }
  t.equal((await telnyx.post(application.webhook_event_url, 'call.hangup', hangup, 'valid', 'tenant')).status, 204, 'its account\'s webhooks are taken')
  t.equal((await telnyx.post(`${PUBLIC}/telephony/telnyx/webhook`, 'call.hangup', hangup, 'valid', 'tenant')).status, 403, 'the installation\'s URL has no key to take them with')
})

t.test('racing imports of one number: one is stored, the number is on its application, and no other application is left behind', async (t) => {
  const ctx = await listen(t)
  const accounts = [await createAccount(ctx.db), await createAccount(ctx.db)]
  const answers = await Promise.all(Array.from({ length: 12 }, async (_, i) => await importTenant(ctx, accounts[i % 2].headers, { phone_number: TENANT_NUMBER })))
  const created = answers.filter((a) => a.statusCode === 201)
  t.equal(created.length, 1, answers.map((a) => a.statusCode).join(' '))
  t.ok(answers.every((a) => [201, 404, 409].includes(a.statusCode)), 'the others are told the number is taken')
  const row = await ctx.db.selectFrom('phone_numbers').selectAll().executeTakeFirstOrThrow()
  t.equal(ctx.telnyx.tenant.owned.get('2293384261075731401')!.connection_id, row.carrier_connection_id, 'routed to the stored number\'s application')
  t.same([...ctx.telnyx.tenant.applications.keys()], [row.carrier_connection_id], 'the losers\' applications were deleted')
})
