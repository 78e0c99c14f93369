import t, { type Test } from 'tap'
import { newId } from '../../src/db/ids.ts'
import { findPhoneNumber } from '../../src/modules/phone-numbers/queries.ts'
import { createAccount, setup } from '../helpers/app.ts'
import { runScript } from '../helpers/scripts.ts'
import { sid, startTwilioStandIn } from '../helpers/twilio-stand-in.ts'

const INSTALLATION_SID = sid('AC')
const INSTALLATION_TOKEN = 'installation-token'

async function twilioSetup (t: Test) {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(INSTALLATION_SID, INSTALLATION_TOKEN)
  twilio.offer('US', [
    { phone_number: '+14155550142', area_code: '415', locality: 'San Francisco', region: 'CA' },
    { phone_number: '+14155550143', area_code: '415', locality: 'San Francisco', region: 'CA' },
    { phone_number: '+12125550177', area_code: '212', locality: 'New York', region: 'NY' }
  ])
  const ctx = await setup(t, { PHONE_CARRIER: 'twilio', TWILIO_ACCOUNT_SID: INSTALLATION_SID, TWILIO_AUTH_TOKEN: INSTALLATION_TOKEN, TWILIO_API_URL: twilio.url, TWILIO_ALLOW_PRIVATE_BASE_URL: 'true' })
  const account = await createAccount(ctx.db)
  return { ...ctx, ...account, twilio }
}

t.test('twilio: search asks AvailablePhoneNumbers with the installation account', async (t) => {
  const { app, headers, twilio } = await twilioSetup(t)
  const res = await app.inject({ method: 'GET', url: '/v1/phone-number/available?country=us&area_code=415&contains=4&limit=5', headers })
  t.equal(res.statusCode, 200)
  t.same(res.json(), [
    { phone_number: '+14155550142', friendly_name: '+14155550142', country: 'US', locality: 'San Francisco', region: 'CA', carrier: 'twilio' },
    { phone_number: '+14155550143', friendly_name: '+14155550143', country: 'US', locality: 'San Francisco', region: 'CA', carrier: 'twilio' }
  ])
  const [request] = twilio.requests
  t.equal(request.method, 'GET')
  t.equal(request.accountSid, INSTALLATION_SID)
  t.equal(request.path, '/AvailablePhoneNumbers/US/Local.json')
  t.same(Object.fromEntries(request.query), { PageSize: '5', AreaCode: '415', Contains: '4' })

  const none = await app.inject({ method: 'GET', url: '/v1/phone-number/available?country=FR', headers })
  t.same(none.json(), [], 'a country the carrier does not serve has no numbers')
})

t.test('twilio: buy posts IncomingPhoneNumbers and stores the sid', async (t) => {
  const { app, db, headers, twilio } = await twilioSetup(t)
  const res = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+14155550142', nickname: 'front desk' } })
  t.equal(res.statusCode, 201)
  const [held] = twilio.incoming(INSTALLATION_SID)
  t.equal(held.phone_number, '+14155550142')
  t.match(res.json(), { phone_number: '+14155550142', nickname: 'front desk', source: 'purchased', carrier: 'twilio', carrier_number_id: held.sid, sip_trunk: null })
  const post = twilio.requests.find((r) => r.method === 'POST')!
  t.equal(post.path, '/IncomingPhoneNumbers.json')
  t.equal(post.form.get('PhoneNumber'), '+14155550142')
  const row = await db.selectFrom('phone_numbers').selectAll().executeTakeFirstOrThrow()
  t.equal(row.carrier_account_id, INSTALLATION_SID)
  t.equal(row.carrier_auth_token, null, 'the installation token stays in the config')

  const byArea = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { area_code: '212' } })
  t.equal(byArea.statusCode, 201)
  t.equal(byArea.json().phone_number, '+12125550177')
})

t.test('twilio: an error answer leaves nothing stored', async (t) => {
  const { app, db, headers, twilio } = await twilioSetup(t)
  const unavailable = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+14155550999' } })
  t.equal(unavailable.statusCode, 409)
  t.same(unavailable.json(), { statusCode: 409, error: 'Conflict', code: 'number_unavailable', message: 'Twilio answered 400 (error 21422): PhoneNumber requested is not available' })

  twilio.failNext(503, 20503, 'Service Unavailable')
  const down = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+14155550142' } })
  t.equal(down.statusCode, 502)
  t.match(down.json(), { statusCode: 502, error: 'Bad Gateway', code: 'carrier_error', message: /Twilio answered 503 \(error 20503\)/ })

  twilio.failNext(400, 21631, 'Phone Number Requires an Address')
  const refused = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+14155550142' } })
  t.equal(refused.statusCode, 400)
  t.equal(refused.json().code, 'carrier_rejected')

  t.same(await db.selectFrom('phone_numbers').selectAll().execute(), [])
  t.same(twilio.incoming(INSTALLATION_SID), [])
})

t.test('twilio: a purchase that cannot be stored is released again', async (t) => {
  const { app, db, headers, twilio } = await twilioSetup(t)
  const other = await createAccount(db)
  // Another account registers the number over SIP while the purchase is on its way.
  twilio.onPurchase = async (phoneNumber) => {
    await db.insertInto('phone_numbers').values({ id: newId(), user_id: other.user.id, phone_number: phoneNumber, source: 'sip', carrier: 'sip', sip_termination_uri: 'sip:pbx.example.com' }).execute()
  }
  const res = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+14155550143' } })
  t.equal(res.statusCode, 409)
  t.equal(res.json().code, 'number_unavailable', 'nothing tells that another account holds it')
  const release = twilio.requests.find((r) => r.method === 'DELETE')
  t.match(release, { path: /^\/IncomingPhoneNumbers\/PN[0-9a-f]{32}\.json$/ })
  t.same(twilio.incoming(INSTALLATION_SID), [], 'the number went back to the carrier')
  const rows = await db.selectFrom('phone_numbers').select('user_id').execute()
  t.same(rows, [{ user_id: other.user.id }])
})

t.test('twilio: rejected installation credentials are a 502, not the caller\'s fault', async (t) => {
  const twilio = await startTwilioStandIn(t)
  const { app, db } = await setup(t, { PHONE_CARRIER: 'twilio', TWILIO_ACCOUNT_SID: INSTALLATION_SID, TWILIO_AUTH_TOKEN: 'wrong', TWILIO_API_URL: twilio.url })
  const { headers } = await createAccount(db)
  const res = await app.inject({ method: 'GET', url: '/v1/phone-number/available', headers })
  t.equal(res.statusCode, 502)
  t.match(res.json().message, /Twilio answered 401 \(error 20003\): Authenticate; check the account SID and auth token/)
})

t.test("twilio: import with the caller's own account; credentials kept, never returned", async (t) => {
  const { app, db, headers, twilio } = await twilioSetup(t)
  const customerSid = sid('AC')
  twilio.addAccount(customerSid, 'customer-secret-token')
  const held = twilio.hold(customerSid, '+13125550188')

  const imported = await app.inject({
    method: 'POST',
    url: '/v1/phone-number/import-carrier',
    headers,
    payload: { phone_number: '+13125550188', carrier: 'twilio', account_sid: customerSid, auth_token: 'customer-secret-token', nickname: 'own twilio' }
  })
  t.equal(imported.statusCode, 201)
  t.match(imported.json(), { phone_number: '+13125550188', source: 'imported', carrier: 'twilio', carrier_number_id: held.sid, nickname: 'own twilio' })
  t.notMatch(imported.body, /customer-secret-token|AC[0-9a-f]{32}/, 'neither the token nor the account SID is returned')
  const [lookup, pointed] = twilio.requests.slice(-2)
  t.match(lookup, { method: 'GET', path: '/IncomingPhoneNumbers.json', accountSid: customerSid })
  t.equal(lookup.query.get('PhoneNumber'), '+13125550188')
  t.match(pointed, { method: 'POST', path: /^\/IncomingPhoneNumbers\/PN[0-9a-f]{32}\.json$/, accountSid: customerSid }, 'the number is pointed at this server')
  t.match(Object.fromEntries(pointed.form), { VoiceUrl: /\/telephony\/twilio\/voice$/, VoiceMethod: 'POST', StatusCallback: /\/telephony\/twilio\/status$/ })
  const row = await db.selectFrom('phone_numbers').selectAll().where('id', '=', imported.json()._id).executeTakeFirstOrThrow()
  t.equal(row.carrier_account_id, customerSid)
  t.match(row.carrier_auth_token, /^enc:v1:[0-9a-f]{8}:/, 'the token is stored encrypted')
  t.notMatch(row.carrier_auth_token, /customer-secret-token/)
  t.equal((await findPhoneNumber(db, row.user_id, row.id))!.carrier_auth_token, 'customer-secret-token', 'and read back as it was given')
  const listed = await app.inject({ method: 'GET', url: '/v1/phone-number/list', headers })
  t.notMatch(listed.body, /customer-secret-token/)

  const missing = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+13125550199', carrier: 'twilio', account_sid: customerSid, auth_token: 'customer-secret-token' } })
  t.equal(missing.statusCode, 404)
  t.equal(missing.json().message, '+13125550199 in the twilio account not found')

  const wrongToken = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+13125550199', carrier: 'twilio', account_sid: customerSid, auth_token: 'nope' } })
  t.equal(wrongToken.statusCode, 400)
  t.equal(wrongToken.json().code, 'carrier_credentials_rejected')

  const half = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+13125550199', account_sid: customerSid } })
  t.match(half.json(), { statusCode: 400, message: 'body.account_sid and body.auth_token go together' })
  const badSid = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+13125550199', account_sid: 'AC123', auth_token: 'x' } })
  t.match(badSid.json(), { statusCode: 400, message: /^body\.account_sid must match pattern/ })
})

t.test("twilio: a tenant cannot import the installation's own numbers; the operator assigns them with the CLI", async (t) => {
  const { app, db, headers, user, twilio, url } = await twilioSetup(t)
  const held = twilio.hold(INSTALLATION_SID, '+13125550200', { voice_url: 'https://elsewhere.example.com/voice' })
  const before = twilio.requests.length
  for (const payload of [{}, { carrier: 'twilio' }]) {
    const res = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+13125550200', ...payload } })
    t.match(res.json(), { statusCode: 400, code: 'carrier_credentials_required', message: /operator/ }, JSON.stringify(payload))
  }
  t.equal(twilio.requests.length, before, 'nothing reached Twilio')
  t.equal(held.voice_url, 'https://elsewhere.example.com/voice', 'the number still sends its calls where it did')
  t.equal(await db.selectFrom('phone_numbers').select('id').executeTakeFirst(), undefined)

  const env = { PHONE_CARRIER: 'twilio', TWILIO_ACCOUNT_SID: INSTALLATION_SID, TWILIO_AUTH_TOKEN: INSTALLATION_TOKEN, TWILIO_API_URL: twilio.url, TWILIO_ALLOW_PRIVATE_BASE_URL: 'true', PUBLIC_BASE_URL: 'https://sb.example.com' }
  const bad = await runScript('cli.ts', { url, env }, 'number', 'import', '--user', user.email, '--number', '3125550200')
  t.match(bad, { code: 2, stderr: /--number 3125550200 is not an E\.164 number/ })
  const imported = await runScript('cli.ts', { url, env }, 'number', 'import', '--user', user.email, '--number', '+13125550200', '--name', 'front desk')
  t.equal(imported.code, 0, imported.stderr)
  t.match(imported.stdout, /imported \+13125550200 \(PN[0-9a-f]{32}\) into /)
  t.equal(held.voice_url, 'https://sb.example.com/telephony/twilio/voice', 'pointed at this server')
  const listed = (await app.inject({ method: 'GET', url: '/v1/phone-number/list', headers })).json()
  t.match(listed, [{ phone_number: '+13125550200', source: 'imported', carrier: 'twilio', carrier_number_id: held.sid, nickname: 'front desk' }])
  const row = await db.selectFrom('phone_numbers').select(['carrier_account_id', 'carrier_auth_token']).executeTakeFirstOrThrow()
  t.same(row, { carrier_account_id: INSTALLATION_SID, carrier_auth_token: null }, 'the installation\'s number: no token kept with it')
})

t.test('twilio: numbers are neither bought nor imported while PUBLIC_BASE_URL is not https on a public name', async (t) => {
  const twilio = await startTwilioStandIn(t)
  twilio.addAccount(INSTALLATION_SID, INSTALLATION_TOKEN)
  twilio.offer('US', [{ phone_number: '+14155550142', area_code: '415', locality: 'San Francisco', region: 'CA' }])
  const customerSid = sid('AC')
  twilio.addAccount(customerSid, 'tok')
  twilio.hold(customerSid, '+13125550188')
  for (const base of ['http://localhost:3000', 'https://localhost', 'https://10.0.0.5', 'https://switchboard.internal', 'http://sb.example.com']) {
    const { app, db } = await setup(t, { PHONE_CARRIER: 'twilio', TWILIO_ACCOUNT_SID: INSTALLATION_SID, TWILIO_AUTH_TOKEN: INSTALLATION_TOKEN, TWILIO_API_URL: twilio.url, PUBLIC_BASE_URL: base })
    const { headers } = await createAccount(db)
    const bought = await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+14155550142' } })
    t.match(bought.json(), { statusCode: 409, code: 'webhooks_unreachable', message: /PUBLIC_BASE_URL \(.*\) cannot be reached by Twilio/ }, `buy with ${base}`)
    const imported = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+13125550188', account_sid: customerSid, auth_token: 'tok' } })
    t.match(imported.json(), { statusCode: 409, code: 'webhooks_unreachable' }, `import with ${base}`)
  }
  t.equal(twilio.requests.length, 0, 'nothing reached Twilio')
})

t.test('twilio: numbers repointed after PUBLIC_BASE_URL changed (CLI), and a rotated auth token replaced without importing again (API)', async (t) => {
  const { app, db, headers, twilio, url } = await twilioSetup(t)
  const customerSid = sid('AC')
  twilio.addAccount(customerSid, 'old-token')
  const imported = twilio.hold(customerSid, '+13125550188')
  t.equal((await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+13125550188', account_sid: customerSid, auth_token: 'old-token' } })).statusCode, 201)
  t.equal((await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+14155550142' } })).statusCode, 201)
  const bought = twilio.incoming(INSTALLATION_SID)[0]

  // The token is rotated at Twilio: the old one no longer works.
  twilio.addAccount(customerSid, 'new-token')
  const refused = await app.inject({ method: 'PATCH', url: '/v1/phone-number/carrier-credentials', headers, payload: { account_sid: customerSid, auth_token: 'not-it' } })
  t.match(refused.json(), { statusCode: 400, code: 'carrier_credentials_rejected' })
  const unknown = await app.inject({ method: 'PATCH', url: '/v1/phone-number/carrier-credentials', headers, payload: { account_sid: sid('AC'), auth_token: 'new-token' } })
  t.equal(unknown.statusCode, 404, 'an account none of the caller\'s numbers came from')
  const replaced = await app.inject({ method: 'PATCH', url: '/v1/phone-number/carrier-credentials', headers, payload: { account_sid: customerSid, auth_token: 'new-token' } })
  t.same(replaced.json(), { account_sid: customerSid, numbers_updated: 1 })
  t.notMatch(replaced.body, /new-token/)
  const row = await db.selectFrom('phone_numbers').selectAll().where('phone_number', '=', '+13125550188').executeTakeFirstOrThrow()
  t.equal((await findPhoneNumber(db, row.user_id, row.id))!.carrier_auth_token, 'new-token', 'kept, encrypted')
  t.match(row.carrier_auth_token, /^enc:v1:/)

  const env = { PHONE_CARRIER: 'twilio', TWILIO_ACCOUNT_SID: INSTALLATION_SID, TWILIO_AUTH_TOKEN: INSTALLATION_TOKEN, TWILIO_API_URL: twilio.url, PUBLIC_BASE_URL: 'https://new.example.com' }
  const repointed = await runScript('cli.ts', { url, env }, 'numbers', 'repoint')
  t.equal(repointed.code, 0, repointed.stderr)
  t.match(repointed.stdout, '2 Twilio numbers now send calls to https://new.example.com')
  for (const number of [bought, imported]) {
    t.match(number, { voice_url: 'https://new.example.com/telephony/twilio/voice', status_callback: 'https://new.example.com/telephony/twilio/status' }, number.phone_number)
  }
  const updates = twilio.requests.filter((r) => r.method === 'POST' && /^\/IncomingPhoneNumbers\/PN/.test(r.path)).slice(-2)
  t.same(updates.map((r) => r.accountSid).sort(), [customerSid, INSTALLATION_SID].sort(), 'each number is updated in its own account (the imported one with its new token)')
  const privateBase = await runScript('cli.ts', { url, env: { ...env, PUBLIC_BASE_URL: 'http://localhost:3000' } }, 'numbers', 'repoint')
  t.match(privateBase, { code: 1, stderr: /cannot be reached by Twilio/ })
})

t.test('twilio: releasing gives bought numbers back and keeps them when the carrier fails', async (t) => {
  const { app, db, headers, twilio } = await twilioSetup(t)
  const bought = (await app.inject({ method: 'POST', url: '/v1/phone-number/buy', headers, payload: { phone_number: '+14155550142' } })).json()

  twilio.failNext(500, 20500, 'Internal Server Error')
  const failed = await app.inject({ method: 'DELETE', url: `/v1/phone-number/${bought._id}`, headers })
  t.equal(failed.statusCode, 502)
  t.equal(await db.selectFrom('phone_numbers').select('id').execute().then((r) => r.length), 1, 'the number is kept')

  const released = await app.inject({ method: 'DELETE', url: `/v1/phone-number/${bought._id}`, headers })
  t.equal(released.statusCode, 204)
  t.same(twilio.incoming(INSTALLATION_SID), [])
  t.same(await db.selectFrom('phone_numbers').select('id').execute(), [])

  const customerSid = sid('AC')
  twilio.addAccount(customerSid, 'tok')
  twilio.hold(customerSid, '+13125550188')
  const imported = (await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+13125550188', account_sid: customerSid, auth_token: 'tok' } })).json()
  const deletes = twilio.requests.filter((r) => r.method === 'DELETE').length
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/phone-number/${imported._id}`, headers })).statusCode, 204)
  t.equal(twilio.requests.filter((r) => r.method === 'DELETE').length, deletes, 'an imported number stays with its carrier account')
  t.equal(twilio.incoming(customerSid).length, 1)
})

t.test('twilio: a sandbox installation never reaches Twilio, even with credentials', async (t) => {
  const twilio = await startTwilioStandIn(t)
  const { app, db } = await setup(t, { TWILIO_API_URL: twilio.url })
  const { headers } = await createAccount(db)
  const customerSid = sid('AC')
  twilio.addAccount(customerSid, 'tok')
  twilio.hold(customerSid, '+13125550188')
  for (const payload of [{ account_sid: customerSid, auth_token: 'tok' }, { carrier: 'twilio', account_sid: customerSid, auth_token: 'tok' }, { carrier: 'twilio' }]) {
    const res = await app.inject({ method: 'POST', url: '/v1/phone-number/import-carrier', headers, payload: { phone_number: '+13125550188', ...payload } })
    t.match(res.json(), { statusCode: 400, code: 'carrier_disabled', message: /PHONE_CARRIER=sandbox/ }, JSON.stringify(payload))
  }
  t.equal(twilio.requests.length, 0, 'no request reached the carrier')
  t.equal(await db.selectFrom('phone_numbers').select('id').executeTakeFirst(), undefined)
})
