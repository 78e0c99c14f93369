import t from 'tap'
import { mulawEncode, rms } from '../../src/modules/voice/audio.ts'
import { parseTwilioMessage } from '../../src/modules/voice/transports/twilio.ts'
import { signatureValid, twilioSignature } from '../../src/modules/telephony/signature.ts'
import { dialTwiml, streamTwiml } from '../../src/modules/telephony/twiml.ts'
import { tone } from '../helpers/openai-http-standin.ts'

// The pieces of Twilio's protocols checked on their own: request signatures, TwiML, Media Streams messages.

t.test('X-Twilio-Signature as Twilio documents it', async (t) => {
  // Twilio's own example (https://www.twilio.com/docs/usage/security#validating-requests).
  const form = new URLSearchParams({ CallSid: 'CA1234567890ABCDE', Caller: '+12349013030', Digits: '1234', From: '+12349013030', To: '+18005551212' })
  const url = 'https://mycompany.com/myapp.php?foo=1&bar=2'
  t.equal(twilioSignature('12345', url, form), '0/KCTR6DLpKmkAf8muzZqo1nDgQ=')
  t.ok(signatureValid('12345', url, form, '0/KCTR6DLpKmkAf8muzZqo1nDgQ='))
  t.notOk(signatureValid('12345', url, form, undefined), 'unsigned')
  t.notOk(signatureValid('54321', url, form, '0/KCTR6DLpKmkAf8muzZqo1nDgQ='), 'another account\'s token')
  t.notOk(signatureValid('12345', url.replace('foo=1', 'foo=2'), form, '0/KCTR6DLpKmkAf8muzZqo1nDgQ='), 'another URL')
  form.set('Digits', '1235')
  t.notOk(signatureValid('12345', url, form, '0/KCTR6DLpKmkAf8muzZqo1nDgQ='), 'another parameter')
  t.notOk(signatureValid('12345', url, form, 'short'), 'a signature of another length')
})

t.test('TwiML is escaped', async (t) => {
  t.equal(streamTwiml('wss://a.test/s?x=1&y="2"', 'tok<en>'),
    '<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="wss://a.test/s?x=1&#38;y=&#34;2&#34;"><Parameter name="token" value="tok&#60;en&#62;"/></Stream></Connect></Response>')
  t.match(dialTwiml({ number: '+14155550100', callerId: undefined, timeoutSeconds: 30, action: 'https://a.test/d?call_id=1&x=2' }),
    /<Dial timeout="30" action="https:\/\/a\.test\/d\?call_id=1&#38;x=2" method="POST"><Number>\+14155550100<\/Number><\/Dial>/)
})

t.test('Media Streams messages in', async (t) => {
  const message = (value: unknown) => Buffer.from(JSON.stringify(value))
  const frame = tone(320).filter((_, i) => i % 2 === 0)
  const media = parseTwilioMessage(message({ event: 'media', sequenceNumber: '3', media: { track: 'inbound', chunk: '1', timestamp: '20', payload: mulawEncode(frame).toString('base64') }, streamSid: 'MZ1' }), false)
  t.equal(media.kind, 'media')
  if (media.kind === 'media') {
    t.equal(media.pcm.length, 320, '160 µ-law bytes at 8 kHz are 320 samples at 16 kHz')
    t.ok(rms(media.pcm) > 1000)
  }
  const sids = { streamSid: `MZ${'a'.repeat(32)}`, callSid: `CA${'b'.repeat(32)}`, accountSid: `AC${'c'.repeat(32)}` }
  t.match(parseTwilioMessage(message({ event: 'start', start: { ...sids, customParameters: { token: 'x', n: 3 } } }), false),
    { kind: 'start', ...sids, parameters: { token: 'x' } })
  t.same(parseTwilioMessage(message({ event: 'start', start: { parameters: {} } }), false).kind, 'invalid')
  t.same(parseTwilioMessage(message({ event: 'start', start: { ...sids, streamSid: 'MZ1","x":"' } }), false).kind, 'invalid', 'a stream sid that is not Twilio\'s')
  t.same(parseTwilioMessage(message({ event: 'mark', mark: { name: 'played-1' } }), false), { kind: 'mark', name: 'played-1' })
  t.same(parseTwilioMessage(message({ event: 'dtmf', dtmf: { digit: '1' } }), false), { kind: 'dtmf', digit: '1' })
  t.same(parseTwilioMessage(message({ event: 'media', media: { track: 'outbound', payload: '' } }), false), { kind: 'ignored' })
  for (const bad of [
    Buffer.from('not json'), message([1]), message(null), message({ event: 'teleport' }), message({ event: 'mark', mark: {} }),
    message({ event: 'media', media: { payload: '***' } }), message({ event: 'media', media: { payload: 'A'.repeat(20_000) } }), message({ event: 'media', media: {} })
  ]) {
    t.equal(parseTwilioMessage(bad, false).kind, 'invalid', bad.toString().slice(0, 40))
  }
  t.equal(parseTwilioMessage(Buffer.from([1, 2]), true).kind, 'invalid', 'binary')
})
