import t from 'tap'
import { createCarriers } from '../../src/modules/phone-numbers/carriers/index.ts'
import { connectSip } from '../../src/modules/phone-numbers/numbers.ts'
import { createAccount } from '../helpers/app.ts'
import { startTelnyxStandIn } from '../helpers/telnyx-standin.ts'
import { listenWithTwilio } from '../helpers/twilio-phone.ts'

// Which carrier sets a SIP number up (SIP_CARRIER, docs/sip.md) on an installation with both a Twilio and a Telnyx
// account: Twilio unless SIP_CARRIER=telnyx, and a number connected again after SIP_CARRIER changed moves.

const SIP_NUMBER = '+4930901820'
const TRUNK = { termination_uri: 'sip:pbx.example.test:5060', sip_trunk_auth_username: 'pbxberlin', sip_trunk_auth_password: 'Trunk-Secret-2026' }

t.test('with both accounts, SIP numbers go to Twilio by default; connected again under SIP_CARRIER=telnyx they move to Telnyx and back', async (t) => {
  const telnyx = await startTelnyxStandIn(t)
  const ctx = await listenWithTwilio(t, { TELNYX_API_URL: telnyx.url, TELNYX_API_KEY: telnyx.apiKey, TELNYX_CONNECTION_ID: telnyx.connectionId, TELNYX_PUBLIC_KEY: telnyx.publicKey })
  t.equal(ctx.config.telnyx.sipCarrier, 'twilio', 'the default')
  const account = await createAccount(ctx.db)
  const res = await ctx.app.inject({ method: 'PATCH', url: '/v1/phone-number/connect-to-sip', headers: account.headers, payload: { phone_number: SIP_NUMBER, ...TRUNK } })
  t.equal(res.statusCode, 201, res.body)
  const id = res.json()._id as string
  t.equal(res.json().sip_trunk.sip_domain, `sb-${id}.sip.twilio.com`, 'a Twilio SIP Domain, as before')
  t.equal(ctx.twilio.sip.domains.length, 1)
  t.equal(telnyx.sipRequests.length, 0, 'nothing at Telnyx')

  const viaTelnyx = createCarriers(ctx.db, { ...ctx.config, telnyx: { ...ctx.config.telnyx, sipCarrier: 'telnyx' } })
  const moved = await connectSip(ctx.db, viaTelnyx, account.user.id, { phone_number: SIP_NUMBER, ...TRUNK })
  t.match(moved, { created: false, row: { id, sip_carrier: 'telnyx', carrier_account_id: null, sip_subdomain: /^sb[0-9a-f]{20}$/ } })
  t.equal(telnyx.applications.size, 1, 'set up at Telnyx')
  t.equal(telnyx.credentialConnections.size, 1)
  t.same(ctx.twilio.sip.domains, [], 'and the Twilio SIP Domain deleted')
  t.same(ctx.twilio.sip.lists, [])

  const back = await connectSip(ctx.db, createCarriers(ctx.db, ctx.config), account.user.id, { phone_number: SIP_NUMBER, ...TRUNK })
  t.match(back, { created: false, row: { sip_carrier: 'twilio', sip_subdomain: null } })
  t.equal(ctx.twilio.sip.domains.length, 1)
  t.equal(telnyx.applications.size + telnyx.credentialConnections.size, 0, 'what Telnyx held is deleted')
})
