import t from 'tap'
import { conferenceTwiml, gatherTwiml } from '../../src/modules/telephony/twiml.ts'
import { accepted, announcement, withLeg } from '../../src/modules/telephony/warm.ts'
import type { Conversation } from '../../src/db/shapes.ts'

// The pieces of a warm transfer on their own (telephony/warm.ts): the TwiML, the person's answer, the legs.

t.test('the conference TwiML: the caller waits (music unless told none), the person starts it; either leaving ends it', async (t) => {
  t.equal(conferenceTwiml({ name: 'transfer-abc', starts: false, holdMusic: true }),
    '<?xml version="1.0" encoding="UTF-8"?><Response><Dial><Conference startConferenceOnEnter="false" endConferenceOnExit="true" beep="false">transfer-abc</Conference></Dial></Response>',
    'hold music: no waitUrl (Twilio\'s default)')
  t.match(conferenceTwiml({ name: 'transfer-abc', starts: false, holdMusic: false }), /<Conference startConferenceOnEnter="false" endConferenceOnExit="true" beep="false" waitUrl="">/, 'silence: an empty waitUrl')
  t.match(conferenceTwiml({ name: 'transfer-abc', starts: true }), /<Conference startConferenceOnEnter="true" endConferenceOnExit="true" beep="false">transfer-abc</)
})

t.test('the summary TwiML: said inside a <Gather> of one key or speech, escaped; silence hangs up', async (t) => {
  t.equal(gatherTwiml({ text: 'Ada & <Bob>', language: 'de-DE', action: 'https://a.test/t?call_id=1&x=2', timeoutSeconds: 8 }),
    '<?xml version="1.0" encoding="UTF-8"?><Response><Gather input="dtmf speech" numDigits="1" timeout="8" language="de-DE" action="https://a.test/t?call_id=1&#38;x=2" method="POST">' +
    '<Say language="de-DE">Ada &#38; &#60;Bob&#62;</Say></Gather><Hangup/></Response>')
  t.match(announcement('en-US', 'Ada wants Friday.'), /^Hello, .* Ada wants Friday\. To take the call, press 1 or say yes\.$/)
  t.match(announcement('de-DE', ''), /^Hallo, [^.]*\. Um den Anruf anzunehmen/, 'the agent\'s language; no summary, no gap')
  t.match(announcement('fr-FR', 'x'), /^Hello/, 'English for a language without lines')
})

t.test('the person accepts with 1 or a yes (in any language spoken here); anything else declines', async (t) => {
  t.ok(accepted('1', null))
  t.notOk(accepted('2', 'yes'), 'a key other than 1, whatever was heard')
  t.ok(accepted(null, 'Yes, put them through.'))
  t.ok(accepted('', 'Ja, gerne.'))
  t.notOk(accepted(null, 'No, I am in a meeting.'))
  t.notOk(accepted(null, 'yesterday'), 'whole words only')
  t.notOk(accepted(null, null))
})

t.test('a leg is recorded on the last transfer; the warm state is dropped', async (t) => {
  const state = {
    agent_id: 'a', transcript: [], tokens: {}, speech: { recognised: 0, synthesised: 0 }, recording_ms: 0,
    transfers: [
      { type: 'call_forwarding', from_agent_id: 'a', to_number: '+1', reason: null, timestamp: 1, outcome: 'no_answer', mode: 'warm', legs: [{ to: '+1', outcome: 'no_answer', seconds: 0 }] },
      { type: 'call_forwarding', from_agent_id: 'a', to_number: '+2', reason: null, timestamp: 2, outcome: 'dialing', mode: 'warm' }
    ],
    warm: { call_sid: 'CA1', accepted_at: null }
  } satisfies Conversation
  const after = withLeg(state, { to: '+2', outcome: 'declined', seconds: 4 })
  t.notOk('warm' in after)
  t.same(after.transfers.map((transfer) => transfer.legs), [[{ to: '+1', outcome: 'no_answer', seconds: 0 }], [{ to: '+2', outcome: 'declined', seconds: 4 }]])
})
