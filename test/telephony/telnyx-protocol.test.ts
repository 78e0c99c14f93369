import { generateKeyPairSync, sign } from 'node:crypto'
import t from 'tap'
import { decodeClientState, encodeClientState } from '../../src/modules/telephony/telnyx/commands.ts'
import { telnyxPublicKey, telnyxSignatureValid } from '../../src/modules/telephony/telnyx/signature.ts'
import { parseTelnyxMessage } from '../../src/modules/voice/transports/telnyx.ts'

// The Telnyx protocol pieces on their own: the Ed25519 webhook signature with its replay window, client_state,
// and the media stream's frames (developers.telnyx.com references cited in the sources).

const { publicKey, privateKey } = generateKeyPairSync('ed25519')
const key = telnyxPublicKey(Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64'))
const signed = (timestamp: string, body: string) => sign(null, Buffer.from(`${timestamp}|${body}`), privateKey).toString('base64')

t.test('a webhook signature: valid within the tolerance, refused outside it, over another body or timestamp, or malformed', async (t) => {
  const now = 1_800_000_000_000
  const ts = String(now / 1000)
  const body = '{"data":{"event_type":"call.hangup"}}'
  t.ok(telnyxSignatureValid(key, { signature: signed(ts, body), timestamp: ts, body }, 300, now))
  t.ok(telnyxSignatureValid(key, { signature: signed(ts, body), timestamp: ts, body }, 300, now + 300_000), 'at the edge of the window')
  t.notOk(telnyxSignatureValid(key, { signature: signed(ts, body), timestamp: ts, body }, 300, now + 301_000), 'a replay after the window')
  t.notOk(telnyxSignatureValid(key, { signature: signed(ts, body), timestamp: ts, body }, 300, now - 301_000), 'from the future')
  t.notOk(telnyxSignatureValid(key, { signature: signed(ts, body), timestamp: ts, body: body + ' ' }, 300, now), 'another body')
  t.notOk(telnyxSignatureValid(key, { signature: signed(ts, body), timestamp: String(now / 1000 + 1), body }, 300, now), 'another timestamp')
  t.notOk(telnyxSignatureValid(key, { signature: undefined, timestamp: ts, body }, 300, now))
  t.notOk(telnyxSignatureValid(key, { signature: signed(ts, body), timestamp: undefined, body }, 300, now))
  t.notOk(telnyxSignatureValid(key, { signature: 'AAAA', timestamp: ts, body }, 300, now), 'not 64 bytes')
  t.notOk(telnyxSignatureValid(key, { signature: signed(ts, body), timestamp: '1e9', body }, 300, now), 'not whole seconds')
  const other = generateKeyPairSync('ed25519').privateKey
  t.notOk(telnyxSignatureValid(key, { signature: sign(null, Buffer.from(`${ts}|${body}`), other).toString('base64'), timestamp: ts, body }, 300, now), 'another account\'s key')
})

t.test('client_state names a call id only', async (t) => {
  t.same(decodeClientState(encodeClientState({ call_id: '0123456789abcdef01234567', leg: 'transfer' })), { call_id: '0123456789abcdef01234567', leg: 'transfer' })
  t.same(decodeClientState(encodeClientState({ call_id: '0123456789abcdef01234567' })), { call_id: '0123456789abcdef01234567' })
  t.equal(decodeClientState(Buffer.from('{"call_id":"x"}').toString('base64')), undefined)
  t.equal(decodeClientState('%%%'), undefined)
  t.equal(decodeClientState(42), undefined)
})

t.test('media stream frames: start, PCMU media of the caller\'s track, marks, the rest ignored or refused', async (t) => {
  const frame = (value: unknown) => parseTelnyxMessage(Buffer.from(JSON.stringify(value)), false)
  t.same(frame({ event: 'connected', version: '1.0.0', connected: { 'x-telnyx-streaming-auth-token': 'mst_a' } }), { kind: 'connected', token: 'mst_a' })
  t.same(frame({ event: 'start', stream_id: '32DE0DEA-53CB-4B21-89A4-9E1819C043BC', start: { call_control_id: 'v3:MdI91X4lWFEs7IgbBEOT9M4AigoY08M0WWZFISt1Yw2axZ_IiE4pqg', media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 } } }),
    { kind: 'start', streamId: '32DE0DEA-53CB-4B21-89A4-9E1819C043BC', callControlId: 'v3:MdI91X4lWFEs7IgbBEOT9M4AigoY08M0WWZFISt1Yw2axZ_IiE4pqg' })
  t.match(frame({ event: 'start', stream_id: 'a', start: { call_control_id: 'v3:x', media_format: { encoding: 'L16', sample_rate: 16000 } } }), { kind: 'invalid' })
  const media = frame({ event: 'media', media: { track: 'inbound', chunk: '1', timestamp: '20', payload: Buffer.alloc(160, 0xff).toString('base64') } })
  t.equal(media.kind, 'media')
  t.equal((media as { pcm: Int16Array }).pcm.length, 320, '20 ms at 16 kHz')
  t.same(frame({ event: 'media', media: { track: 'outbound', payload: 'AA==' } }), { kind: 'ignored' })
  t.match(frame({ event: 'media', media: { payload: 'not base64!' } }), { kind: 'invalid' })
  t.same(frame({ event: 'mark', mark: { name: 'played-1' } }), { kind: 'mark', name: 'played-1' })
  t.same(frame({ event: 'dtmf', dtmf: { digit: '1' } }), { kind: 'dtmf', digit: '1' })
  t.same(frame({ event: 'dtmf', dtmf: { digit: '12' } }).kind, 'invalid', 'one key a frame')
  t.same(frame({ event: 'stop', stop: {} }), { kind: 'stop' })
  t.match(frame({ event: 'nonsense' }), { kind: 'invalid' })
  t.match(parseTelnyxMessage(Buffer.from('x'), true), { kind: 'invalid' })
})
