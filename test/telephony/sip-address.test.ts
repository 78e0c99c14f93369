import t from 'tap'
import { sipAddress } from '../../src/modules/telephony/calls.ts'
import { sipCredentialProblem } from '../../src/modules/phone-numbers/carriers/twilio-sip.ts'

// Where Twilio sends the agent's calls for a SIP trunk number, from the termination URIs connect-to-sip accepts.

t.test('a termination URI and a number make the SIP URI Twilio dials', async (t) => {
  for (const [uri, expected] of [
    ['sip:trunk.example.com:5060;transport=tcp', 'sip:+15550100@trunk.example.com:5060;transport=tcp'],
    ['trunk.example.com', 'sip:+15550100@trunk.example.com'],
    ['203.0.113.7', 'sip:+15550100@203.0.113.7'],
    ['SIP:[2001:db8::1]:5070', 'sip:+15550100@[2001:db8::1]:5070'],
    ['sips:pbx.example.de', 'sip:+15550100@pbx.example.de;transport=tls'],
    ['sips:pbx.example.de:5061;transport=tcp', 'sip:+15550100@pbx.example.de:5061;transport=tcp']
  ] as const) t.equal(sipAddress(uri, '+15550100'), expected, uri)
})

t.test('SIP credentials as Twilio takes them', async (t) => {
  t.equal(sipCredentialProblem({ username: 'pbx', password: 'Trunk-Secret-2026' }), undefined)
  t.match(sipCredentialProblem({ username: 'pbx', password: 'Short-1a' }), /12 characters/)
  t.match(sipCredentialProblem({ username: 'pbx', password: 'no-digits-Here' }), /digit/)
  t.match(sipCredentialProblem({ username: 'x'.repeat(33), password: 'Trunk-Secret-2026' }), /32/)
})
