import t from 'tap'
import type { Test } from 'tap'
import { importNumber } from '../../src/modules/phone-numbers/numbers.ts'
import { createCarriers } from '../../src/modules/phone-numbers/carriers/index.ts'
import { createAccount, setup, type TestContext } from '../helpers/app.ts'
import { startTelnyxStandIn, type TelnyxStandIn } from '../helpers/telnyx-standin.ts'

// Numbers at Telnyx (PHONE_CARRIER=telnyx) against the Telnyx stand-in: search, buy (an order on our Call Control
// application), release, and the operator's import of a number the installation's Telnyx account holds.

const PUBLIC = 'https://voice.example.test'

async function listen (t: Test): Promise<TestContext & { telnyx: TelnyxStandIn }> {
  const telnyx = await startTelnyxStandIn(t)
  telnyx.offer([{ phone_number: '+14155550100', rate_center: 'SAN FRANCISCO', state: 'CA' }, { phone_number: '+14155550101' }, { phone_number: '+12125550100' }])
  const ctx = await setup(t, {
    PHONE_CARRIER: 'telnyx', TELNYX_API_URL: telnyx.url, TELNYX_API_KEY: telnyx.apiKey, TELNYX_CONNECTION_ID: telnyx.connectionId, TELNYX_PUBLIC_KEY: telnyx.publicKey, PUBLIC_BASE_URL: PUBLIC
  })
  return { ...ctx, telnyx }
}

t.test('search, buy, list and release a Telnyx number; the purchase is on our Call Control application', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const search = await ctx.app.inject({ method: 'GET', url: '/v1/phone-number/available?area_code=415', headers: account.headers })
  t.equal(search.statusCode, 200)
  t.same(search.json().map((n: any) => n.phone_number), ['+14155550100', '+14155550101'])
  t.match(search.json()[0], { carrier: 'telnyx', locality: 'SAN FRANCISCO', region: 'CA', country: 'US' })
  t.same((await ctx.app.inject({ method: 'GET', url: '/v1/phone-number/available?contains=2125', headers: account.headers })).json().map((n: any) => n.phone_number), ['+12125550100'])

  const bought = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: '+14155550100', nickname: 'Front desk' } })
  t.equal(bought.statusCode, 201, bought.body)
  const [held] = [...ctx.telnyx.owned.values()]
  t.match(bought.json(), { phone_number: '+14155550100', carrier: 'telnyx', source: 'purchased', carrier_number_id: held.id })
  t.equal(held.connection_id, ctx.telnyx.connectionId, 'the number\'s calls go to our Call Control application')

  const gone = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: account.headers, payload: { phone_number: '+14155550199' } })
  t.match(gone, { statusCode: 409 })
  t.equal(gone.json().code, 'number_unavailable', 'a number Telnyx does not offer')

  const released = await ctx.app.inject({ method: 'DELETE', url: `/v1/phone-number/${bought.json()._id}`, headers: account.headers })
  t.equal(released.statusCode, 204)
  t.equal(ctx.telnyx.owned.size, 0, 'given back to Telnyx')
})

t.test('a wrong API key is the installation\'s problem (502), never the caller\'s', async (t) => {
  const telnyx = await startTelnyxStandIn(t)
  const ctx = await setup(t, { PHONE_CARRIER: 'telnyx', TELNYX_API_URL: telnyx.url, TELNYX_API_KEY: 'KEYwrong', TELNYX_CONNECTION_ID: telnyx.connectionId, TELNYX_PUBLIC_KEY: telnyx.publicKey })
  const account = await createAccount(ctx.db)
  const res = await ctx.app.inject({ method: 'GET', url: '/v1/phone-number/available', headers: account.headers })
  t.equal(res.statusCode, 502)
  t.equal(res.json().code, 'carrier_error')
})

t.test('a number of the installation\'s Telnyx account is imported by the operator only, and pointed at our application', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  ctx.telnyx.owned.set('1293384261075731499', { id: '1293384261075731499', phone_number: '+13125550100', connection_id: null })
  const tenant = await ctx.app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers: account.headers, payload: { phone_number: '+13125550100', carrier: 'telnyx' } })
  t.equal(tenant.statusCode, 400)
  t.equal(tenant.json().code, 'carrier_credentials_required')
  t.equal(ctx.telnyx.owned.get('1293384261075731499')!.connection_id, null, 'nothing reached Telnyx')

  const row = await importNumber(ctx.db, createCarriers(ctx.db, ctx.config), account.user.id, { phone_number: '+13125550100', carrier: 'telnyx' }, 'operator')
  t.match(row, { carrier: 'telnyx', source: 'imported', carrier_number_id: '1293384261075731499' })
  t.equal(ctx.telnyx.owned.get('1293384261075731499')!.connection_id, ctx.telnyx.connectionId)
  await t.rejects(importNumber(ctx.db, createCarriers(ctx.db, ctx.config), account.user.id, { phone_number: '+13125550177', carrier: 'telnyx' }, 'operator'), /\+13125550177/, 'a number the account does not hold')
  // An imported number stays at Telnyx when it is removed here.
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/phone-number/${row.id}`, headers: account.headers })).statusCode, 204)
  t.ok(ctx.telnyx.owned.has('1293384261075731499'))
})
