import t, { type Test } from 'tap'
import { findPhoneNumber, findPhoneNumberByE164 } from '../../src/modules/phone-numbers/queries.ts'
import { createAccount, setup } from '../helpers/app.ts'

// Two agents of the account, with fixed ids so that the tests can name them.
const AGENT_A = '65a0f000000000000000a001'
const AGENT_B = '65a0f000000000000000a002'

async function sandboxSetup (t: Test) {
  const ctx = await setup(t)
  const account = await createAccount(ctx.db)
  const llm = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: {} })).json()
  for (const id of [AGENT_A, AGENT_B]) {
    const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: id, llm_id: llm._id } })).json()
    // Renamed as an agent from before versions (its version 1 follows the new id on first use).
    await ctx.db.deleteFrom('agent_versions').where('agent_id', '=', agent._id).execute()
    await ctx.db.updateTable('agents').set({ id, version: 0 }).where('id', '=', agent._id).execute()
  }
  return { ...ctx, ...account }
}

t.test('sandbox: a deterministic inventory of fictional numbers', async (t) => {
  const { app, headers } = await sandboxSetup(t)
  const get = async (query: string) => {
    const res = await app.inject({ method: 'GET', url: `/v1/phone-number/available${query}`, headers })
    t.equal(res.statusCode, 200, query)
    return res.json() as Array<{ phone_number: string, friendly_name: string, country: string, locality: string | null, carrier: string }>
  }
  const us = await get('')
  t.equal(us.length, 20, 'US by default, 20 by default')
  t.same(us[0], { phone_number: '+12125550100', friendly_name: '(212) 555-0100', country: 'US', locality: 'New York', region: 'NY', carrier: 'sandbox' })
  t.ok(us.every((n) => /^\+1[2-9]\d\d55501\d\d$/.test(n.phone_number)), 'only the 555-01XX numbers set aside for fiction')
  t.same(await get(''), us, 'the same every time')

  const hawaii = await get('?area_code=808&limit=3')
  t.same(hawaii.map((n) => n.phone_number), ['+18085550100', '+18085550101', '+18085550102'])
  t.same((await get('?area_code=415&contains=0199')).map((n) => n.phone_number), ['+14155550199'])
  const gb = await get('?country=GB&area_code=20&limit=2')
  t.same(gb.map((n) => [n.phone_number, n.friendly_name]), [['+442079460000', '+44 20 7946 0000'], ['+442079460001', '+44 20 7946 0001']])
  t.same(await get('?country=FR'), [])
  t.same(await get('?area_code=123'), [], 'no NANP area code starts with 1')

  for (const [query, message] of [
    ['?country=USA', /^query\.country must match pattern/],
    ['?area_code=abc', /^query\.area_code must match pattern/],
    ['?contains=55x', /^query\.contains must match pattern/],
    ['?limit=51', /^query\.limit must be <= 50/]
  ] as const) {
    const res = await app.inject({ method: 'GET', url: `/v1/phone-number/available${query}`, headers })
    t.equal(res.statusCode, 400, query)
    t.match(res.json().message, message)
  }
})

t.test('buy: numbers leave the inventory, are unique across the installation and validated', async (t) => {
  const { app, db, headers, user } = await sandboxSetup(t)
  const other = await createAccount(db)
  const res = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+12125550100', user_id: other.user.id, carrier_auth_token: 'x', sip_password: 'x' } })
  t.equal(res.statusCode, 201)
  const number = res.json()
  t.same(Object.keys(number).sort(), ['_id', 'carrier', 'carrier_number_id', 'created_at', 'customer_id', 'inbound_agent_id', 'inbound_agent_version', 'nickname', 'outbound_agent_id', 'outbound_agent_version', 'phone_number', 'sip_trunk', 'source', 'updated_at', 'user_id', 'workspace_id'])
  t.match(number, { phone_number: '+12125550100', source: 'purchased', carrier: 'sandbox', carrier_number_id: 'SB12125550100', user_id: user.id, nickname: '', inbound_agent_id: null, sip_trunk: null })
  const row = await db.selectFrom('phone_numbers').selectAll().executeTakeFirstOrThrow()
  t.match(row, { user_id: user.id, carrier_auth_token: null, sip_password: null })

  const available = (await app.inject({ method: 'GET', url: '/v1/phone-number/available?area_code=212&limit=1', headers })).json()
  t.equal(available[0].phone_number, '+12125550101', 'a bought number is no longer offered')

  const again = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+12125550100' } })
  t.same(again.json(), { statusCode: 409, error: 'Conflict', code: 'number_taken', message: '+12125550100 is already in your account' })
  const elsewhere = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: other.headers, payload: { phone_number: '+12125550100' } })
  t.same(elsewhere.json(), { statusCode: 409, error: 'Conflict', code: 'number_unavailable', message: '+12125550100 is not available' }, 'another account\'s number is not on offer, as search shows')

  const notSandbox = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+14155551234' } })
  t.equal(notSandbox.statusCode, 409)
  t.match(notSandbox.json(), { code: 'number_unavailable', message: /not in the sandbox inventory/ })

  const byArea = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { area_code: '212' } })
  t.equal(byArea.json().phone_number, '+12125550101')
  const gb = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { area_code: '7700', country: 'gb' } })
  t.equal(gb.json().phone_number, '+447700900000')
  const noArea = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { area_code: '99', country: 'GB' } })
  t.match(noArea.json(), { statusCode: 409, code: 'number_unavailable', message: 'no number is available in area code 99 (GB)' })

  for (const [payload, message] of [
    [{}, 'body.phone_number or body.area_code is required'],
    [{ phone_number: '4155550100' }, 'body.phone_number must be an E.164 phone number such as +14155550123'],
    [{ phone_number: '+0155550100' }, 'body.phone_number must be an E.164 phone number such as +14155550123'],
    [{ phone_number: '+1 415 555 0100' }, 'body.phone_number must be an E.164 phone number such as +14155550123'],
    [{ phone_number: '+1234567890123456' }, 'body.phone_number must be an E.164 phone number such as +14155550123'],
    [{ phone_number: 14155550100 }, 'body.phone_number must be string'],
    [{ phone_number: '+12125550150', inbound_agent_id: 'agent-1' }, 'body.inbound_agent_id must be a 24-character hexadecimal id'],
    [{ phone_number: '+12125550150', nickname: 'x'.repeat(101) }, 'body.nickname must NOT have more than 100 characters']
  ] as const) {
    const res = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload })
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    t.equal(res.json().message, message)
  }
  t.equal(await db.selectFrom('phone_numbers').select('id').execute().then((r) => r.length), 3)
})

t.test('agents, customer and workspace: assigned, checked, cleared', async (t) => {
  const { app, db, headers, user } = await sandboxSetup(t)
  const other = await createAccount(db)
  const customer = (await app.inject({ method: 'POST', url: '/v1/customer', headers, payload: { customer_name: 'C' } })).json()
  const workspace = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers, payload: { workspace_name: 'W' } })).json()
  const foreignCustomer = (await app.inject({ method: 'POST', url: '/v1/customer', headers: other.headers, payload: { customer_name: 'theirs' } })).json()
  const foreignWorkspace = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers: other.headers, payload: { workspace_name: 'theirs' } })).json()

  const bought = await app.inject({
    method: 'POST',
    url: '/v1/phone-number/buy',
    headers,
    payload: { phone_number: '+13125550100', inbound_agent_id: AGENT_A, outbound_agent_id: AGENT_B, customer_id: customer._id, workspace_id: workspace._id, nickname: 'main line' }
  })
  t.equal(bought.statusCode, 201)
  const number = bought.json()
  t.match(number, { inbound_agent_id: AGENT_A, outbound_agent_id: AGENT_B, customer_id: customer._id, workspace_id: workspace._id, nickname: 'main line' })

  const refusals = [
    [{ inbound_agent_id: '65a0f000000000000000dead' }, 'inbound agent not found'],
    [{ outbound_agent_id: '65a0f000000000000000dead' }, 'outbound agent not found'],
    [{ customer_id: foreignCustomer._id }, 'customer not found'],
    [{ workspace_id: foreignWorkspace._id }, 'workspace not found']
  ] as const
  for (const [payload, message] of refusals) {
    const patch = await app.inject({ method: 'PATCH', url: `/v1/phone-number/${number._id}`, headers, payload })
    t.same(patch.json(), { statusCode: 404, error: 'Not Found', message, code: 'not_found' }, JSON.stringify(payload))
    const buy = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+13125550101', ...payload } })
    t.equal(buy.statusCode, 404, 'checked before anything is bought')
  }
  t.equal(await db.selectFrom('phone_numbers').select('id').execute().then((r) => r.length), 1)

  const swapped = await app.inject({ method: 'PATCH', url: `/v1/phone-number/${number._id}`, headers, payload: { inbound_agent_id: AGENT_B, outbound_agent_id: null, phone_number: '+19999999999' } })
  t.equal(swapped.statusCode, 200)
  t.match(swapped.json(), { phone_number: '+13125550100', inbound_agent_id: AGENT_B, outbound_agent_id: null, customer_id: customer._id, nickname: 'main line' })
  t.ok(swapped.json().updated_at >= number.updated_at)

  t.equal((await findPhoneNumberByE164(db, user.id, '+13125550100'))?.inbound_agent_id, AGENT_B, 'inbound routing finds the agent by the called number')
  t.equal(await findPhoneNumberByE164(db, other.user.id, '+13125550100'), undefined)
})

t.test('list filters and isolation', async (t) => {
  const { app, db, headers, user } = await sandboxSetup(t)
  const other = await createAccount(db)
  const customer = (await app.inject({ method: 'POST', url: '/v1/customer', headers, payload: { customer_name: 'C' } })).json()
  const workspace = (await app.inject({ method: 'POST', url: '/v1/workspaces', headers, payload: { workspace_name: 'W' } })).json()
  const buy = async (phoneNumber: string, extra: object) => (await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: phoneNumber, ...extra } })).json()
  const a = await buy('+16175550100', { inbound_agent_id: AGENT_A, customer_id: customer._id })
  const b = await buy('+16175550101', { outbound_agent_id: AGENT_A, workspace_id: workspace._id })
  const c = await buy('+16175550102', { inbound_agent_id: AGENT_B, outbound_agent_id: AGENT_A, customer_id: customer._id, workspace_id: workspace._id })
  const theirs = (await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers: other.headers, payload: { phone_number: '+16175550103' } })).json()

  const list = async (query: string, h = headers) => {
    const res = await app.inject({ method: 'GET', url: `/v1/phone-number/list${query}`, headers: h })
    t.equal(res.statusCode, 200, query)
    return res.json().map((n: { _id: string }) => n._id)
  }
  t.same(await list(''), [a._id, b._id, c._id])
  t.same(await list(`?inbound_agent_id=${AGENT_A}`), [a._id])
  t.same(await list(`?outbound_agent_id=${AGENT_A}`), [b._id, c._id])
  t.same(await list(`?customer_id=${customer._id}`), [a._id, c._id])
  t.same(await list(`?workspace_id=${workspace._id}`), [b._id, c._id])
  t.same(await list(`?customer_id=${customer._id}&workspace_id=${workspace._id}&outbound_agent_id=${AGENT_A}`), [c._id])
  t.same(await list(`?user_id=${user.id}`), [a._id, b._id, c._id])
  t.same(await list(`?user_id=${other.user.id}`), [], "another user's numbers are never listed")
  t.same(await list('?limit=1&skip=1'), [b._id])
  t.same(await list('', other.headers), [theirs._id])

  const badFilter = await app.inject({ method: 'GET', url: '/v1/phone-number/list?inbound_agent_id=xyz', headers })
  t.match(badFilter.json(), { statusCode: 400, code: 'invalid_id', message: 'query.inbound_agent_id must be a 24-character hexadecimal id' })
  const foreignCustomer = await app.inject({ method: 'GET', url: `/v1/phone-number/list?customer_id=${customer._id}`, headers: other.headers })
  t.equal(foreignCustomer.statusCode, 404)

  for (const [method, payload] of [['GET', undefined], ['PATCH', { nickname: 'mine' }], ['DELETE', undefined]] as const) {
    const res = await app.inject({ method, url: `/v1/phone-number/${a._id}`, headers: other.headers, payload })
    t.same(res.json(), { statusCode: 404, error: 'Not Found', message: 'phone number not found', code: 'not_found' }, method)
  }
  t.equal((await app.inject({ method: 'GET', url: '/v1/phone-number/12', headers })).json().code, 'invalid_id')
  t.equal((await app.inject({ method: 'GET', url: `/v1/phone-number/${a._id}`, headers })).json().phone_number, '+16175550100')
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/phone-number/${a._id}`, headers })).statusCode, 204)
  t.same(await list(''), [b._id, c._id])
})

t.test('import from the sandbox carrier', async (t) => {
  const { app, db, headers } = await sandboxSetup(t)
  const imported = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+12065550142', carrier: 'sandbox', inbound_agent_id: AGENT_A } })
  t.equal(imported.statusCode, 201)
  t.match(imported.json(), { phone_number: '+12065550142', source: 'imported', carrier: 'sandbox', inbound_agent_id: AGENT_A })
  const twice = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+12065550142' } })
  t.equal(twice.statusCode, 409)
  t.equal(twice.json().code, 'number_taken', 'the caller\'s own number')
  const other = await createAccount(db)
  const elsewhere = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers: other.headers, payload: { phone_number: '+12065550142' } })
  const absent = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers: other.headers, payload: { phone_number: '+4930123457' } })
  t.equal(elsewhere.statusCode, 404, 'another account\'s number answers as a number the carrier account does not hold')
  t.same(elsewhere.json(), { ...absent.json(), message: '+12065550142 in the sandbox account not found' })
  const real = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+4930123456' } })
  t.same(real.json(), { statusCode: 404, error: 'Not Found', code: 'not_found', message: '+4930123456 in the sandbox account not found' })
  const noTwilio = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+4930123456', carrier: 'twilio' } })
  t.match(noTwilio.json(), { statusCode: 400, code: 'carrier_disabled' })
  const sandboxWithCredentials = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+12065550143', carrier: 'sandbox', account_sid: 'AC' + '0'.repeat(32), auth_token: 't' } })
  t.match(sandboxWithCredentials.json(), { statusCode: 400, message: /are for carrier twilio/ })
})

t.test('connect-to-sip: connects a number or brings a new one; the password stays hidden', async (t) => {
  const { app, db, headers } = await sandboxSetup(t)
  const other = await createAccount(db)
  const bought = (await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+15125550100', inbound_agent_id: AGENT_A } })).json()

  const connected = await app.inject({
    method: 'PATCH',
    url: '/v1/phone-number/connect-to-sip',
    headers,
    payload: { phone_number: '+15125550100', termination_uri: 'sip:trunk.example.com:5060;transport=tcp', sip_trunk_auth_username: 'switchboard', sip_trunk_auth_password: 'sip-secret-1' }
  })
  t.equal(connected.statusCode, 200)
  t.match(connected.json(), { _id: bought._id, source: 'purchased', inbound_agent_id: AGENT_A, sip_trunk: { termination_uri: 'sip:trunk.example.com:5060;transport=tcp', auth_username: 'switchboard', auth_password_set: true } })
  t.notMatch(connected.body, /sip-secret-1/)
  const stored = (await db.selectFrom('phone_numbers').select('sip_password').executeTakeFirstOrThrow()).sip_password!
  t.match(stored, /^enc:v1:[0-9a-f]{8}:/, 'the password is stored encrypted')
  t.notMatch(stored, /sip-secret-1/)
  t.equal((await findPhoneNumber(db, bought.user_id, bought._id))!.sip_password, 'sip-secret-1', 'and read back as it was given')

  const reconnected = await app.inject({ method: 'PATCH', url: '/v1/phone-number/connect-to-sip', headers, payload: { phone_number: '+15125550100', termination_uri: '203.0.113.7' } })
  t.same(reconnected.json().sip_trunk, { termination_uri: '203.0.113.7', auth_username: null, auth_password_set: false, sip_domain: null }, 'the trunk settings are replaced whole')

  const brought = await app.inject({ method: 'PATCH', url: '/v1/phone-number/connect-to-sip', headers, payload: { phone_number: '+4930901820', termination_uri: 'sips:pbx.example.de', outbound_agent_id: AGENT_B } })
  t.equal(brought.statusCode, 201)
  t.match(brought.json(), { phone_number: '+4930901820', source: 'sip', carrier: 'sip', carrier_number_id: null, outbound_agent_id: AGENT_B, sip_trunk: { termination_uri: 'sips:pbx.example.de' } })

  const taken = await app.inject({ method: 'PATCH', url: '/v1/phone-number/connect-to-sip', headers: other.headers, payload: { phone_number: '+4930901820', termination_uri: 'sip:evil.example.com' } })
  t.same(taken.json(), { statusCode: 404, error: 'Not Found', code: 'not_found', message: 'phone number not found' }, 'another account\'s number: as for any record of another account')
  t.equal((await db.selectFrom('phone_numbers').select('sip_termination_uri').where('phone_number', '=', '+4930901820').executeTakeFirstOrThrow()).sip_termination_uri, 'sips:pbx.example.de')

  for (const [payload, message] of [
    [{ phone_number: '+15125550100', termination_uri: 'http://example.com' }, 'body.termination_uri must be a SIP URI such as sip:trunk.example.com:5060'],
    [{ phone_number: '+15125550100', termination_uri: 'sip:trunk example.com' }, 'body.termination_uri must be a SIP URI such as sip:trunk.example.com:5060'],
    [{ phone_number: '+15125550100' }, 'body.termination_uri is required'],
    [{ termination_uri: 'sip:a.example.com' }, 'body.phone_number is required'],
    [{ phone_number: '+15125550100', termination_uri: 'sip:a.example.com', sip_trunk_auth_password: 'x' }, 'body.sip_trunk_auth_password needs body.sip_trunk_auth_username']
  ] as const) {
    const res = await app.inject({ method: 'PATCH', url: '/v1/phone-number/connect-to-sip', headers, payload })
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    t.equal(res.json().message, message)
  }
})
