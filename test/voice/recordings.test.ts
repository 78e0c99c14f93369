import http from 'node:http'
import t from 'tap'
import { decodeWav, encodeWav, FRAME_SAMPLES, pcmToBuffer, Recorder } from '../../src/modules/voice/audio.ts'
import { findRecording, recordingUrl, signRecordingLink, storeRecordingPart } from '../../src/modules/calls/recordings.ts'
import { createAgent } from '../helpers/calls.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { poll } from '../helpers/poll.ts'
import { mixTracks, splitTracks } from '../helpers/tracks.ts'

const BASE = 'https://switchboard.test'

/** A web call of the account, made through the API as a browser's would be. */
async function webCall (ctx: TestContext, account: Account): Promise<string> {
  const agent = await createAgent(ctx.app, account)
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-web-call', headers: account.headers, payload: { agent_id: agent._id } })
  t.equal(res.statusCode, 201, res.body)
  return res.json()._id
}

/**
 * Two seconds of a call: the caller's tone for the first second and a half, the agent's from the second on (both in
 * the half second between); its samples (two tracks) and its mono WAV (both mixed).
 */
function recording (): { pcm: Buffer, wav: Buffer } {
  const recorder = new Recorder(60_000)
  const tone = (amplitude: number) => Int16Array.from({ length: FRAME_SAMPLES }, (_, i) => Math.round(amplitude * Math.sin(i / 4)))
  for (let at = 0; at < 2000; at += 20) {
    if (at < 1500) recorder.add('caller', tone(3000), at)
    if (at >= 1000) recorder.add('agent', tone(-2000), at)
  }
  const pcm = pcmToBuffer(recorder.take(Infinity))
  return { pcm, wav: encodeWav(mixTracks(pcm)) }
}

/** Root mean square of samples `from` up to `to`. */
const energy = (pcm: Int16Array, from: number, to: number) => Math.sqrt(pcm.subarray(from, to).reduce((sum, x) => sum + x * x, 0) / (to - from))

/** The path and query of a link (the app is reached through inject, not at its public address). */
const pathOf = (url: string) => {
  t.ok(url.startsWith(`${BASE}/v1/recordings/`), `the link is under PUBLIC_BASE_URL: ${url}`)
  return url.slice(BASE.length)
}

t.test('a call\'s recording: stored for its account, served to it alone, in ranges, and through signed links', async (t) => {
  const ctx = await setup(t, { CALL_RUNTIME: 'external', PUBLIC_BASE_URL: BASE, RECORDING_LINK_SECONDS: '600' })
  const { app, db } = ctx
  const a = await createAccount(db)
  const b = await createAccount(db)
  const callId = await webCall(ctx, a)
  const bare = await webCall(ctx, a)
  const { pcm, wav } = recording()

  t.equal(recordingUrl(ctx.config, callId), `${BASE}/v1/call/${callId}/recording`)
  t.equal(await storeRecordingPart(db, { callId, userId: b.user.id, pcm, channels: 2 }), false, 'not for another account\'s call')
  t.equal(await findRecording(db, a.user.id, callId), undefined)
  // Stored in parts, as a call does while it runs.
  t.equal(await storeRecordingPart(db, { callId, userId: a.user.id, pcm: pcm.subarray(0, 1000), channels: 2 }), true)
  t.equal(await storeRecordingPart(db, { callId, userId: a.user.id, pcm: pcm.subarray(1000, 3000) }), false, 'not a mono part after stereo ones')
  t.equal(await storeRecordingPart(db, { callId, userId: a.user.id, pcm: pcm.subarray(1000), channels: 2 }), true, 'a second part follows the first')
  const stored = await findRecording(db, a.user.id, callId)
  t.match(stored, { callId, durationMs: 2000, channels: 2, size: wav.length })
  t.same(Buffer.concat(await stored!.stream().toArray()), wav, 'read back as one WAV file')
  t.equal(await findRecording(db, b.user.id, callId), undefined, 'owner-scoped')

  const url = `/v1/call/${callId}/recording`
  const res = await app.inject({ method: 'GET', url, headers: a.headers })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'audio/wav')
  t.equal(res.headers['content-disposition'], `inline; filename="${callId}.wav"`)
  t.equal(res.headers['accept-ranges'], 'bytes')
  t.equal(Number(res.headers['content-length']), wav.length)
  const decoded = decodeWav(res.rawPayload)
  t.equal(decoded.rate, 16_000)
  t.equal(decoded.pcm.length, 2 * 16_000, 'the WAV decodes to the two seconds recorded')
  t.ok(decoded.pcm[4] > 0 && decoded.pcm[24_000 + 4] < 0, 'the caller first, then the agent')
  t.same(decoded.pcm, mixTracks(pcm), 'both tracks mixed')

  t.equal((await app.inject({ method: 'HEAD', url, headers: a.headers })).headers['content-length'], String(wav.length), 'HEAD for players that probe')
  t.equal((await app.inject({ method: 'GET', url, headers: b.headers })).json().code, 'not_found', 'another account\'s key: 404')
  t.equal((await app.inject({ method: 'GET', url })).statusCode, 401, 'no key')
  const none = await app.inject({ method: 'GET', url: `/v1/call/${bare}/recording`, headers: a.headers })
  t.equal(none.statusCode, 404, 'a call without a recording')
  t.equal(none.json().code, 'not_found')
  t.equal((await app.inject({ method: 'GET', url: '/v1/call/65a0f0000000000000000001/recording', headers: a.headers })).statusCode, 404, 'no such call')

  t.test('ranges', async (t) => {
    const range = async (header: string) => await app.inject({ method: 'GET', url, headers: { ...a.headers, range: header } })
    const head = await range('bytes=0-43')
    t.equal(head.statusCode, 206)
    t.equal(head.headers['content-range'], `bytes 0-43/${wav.length}`)
    t.same(head.rawPayload, wav.subarray(0, 44), 'the WAV header')
    const middle = await range('bytes=1000-1999')
    t.same(middle.rawPayload, wav.subarray(1000, 2000))
    for (const [from, to] of [[45, 45], [1001, 2000], [33_333, 40_000], [44, 44 + 16_000 * 2]]) {
      t.same((await range(`bytes=${from}-${to}`)).rawPayload, wav.subarray(from, to + 1), `bytes ${from}-${to}: mixed from the frames that hold them`)
    }
    t.equal(middle.headers['content-type'], 'audio/wav')
    const open = await range('bytes=64000-')
    t.equal(open.headers['content-range'], `bytes 64000-${wav.length - 1}/${wav.length}`)
    t.same(open.rawPayload, wav.subarray(64_000))
    const suffix = await range('bytes=-100')
    t.same(suffix.rawPayload, wav.subarray(wav.length - 100))
    t.same((await range(`bytes=100-${wav.length + 500}`)).rawPayload, wav.subarray(100), 'an end past the file is cut to it')
    const past = await range(`bytes=${wav.length}-`)
    t.equal(past.statusCode, 416)
    t.equal(past.json().code, 'range_not_satisfiable')
    t.equal(past.headers['content-range'], `bytes */${wav.length}`)
    for (const ignored of ['bytes=0-10,20-30', 'items=0-10', 'bytes=50-10', 'bytes=x-y']) {
      const whole = await range(ignored)
      t.equal(whole.statusCode, 200, `${ignored}: the whole file`)
      t.equal(whole.rawPayload.length, wav.length)
    }
  })

  t.test('the two tracks: ?channels=2 gives the stereo WAV, the caller left and the agent right, in ranges too', async (t) => {
    const stereoUrl = `${url}?channels=2`
    const res = await app.inject({ method: 'GET', url: stereoUrl, headers: a.headers })
    t.equal(res.statusCode, 200)
    t.equal(res.headers['content-type'], 'audio/wav')
    t.equal(res.headers['content-disposition'], `inline; filename="${callId}-stereo.wav"`)
    const file = res.rawPayload
    t.equal(Number(res.headers['content-length']), 44 + pcm.length)
    t.ok(file.subarray(44).equals(pcm), 'the stored samples as they are')
    const { left, right } = splitTracks(t, file)
    t.equal(left.length, 2 * 16_000, 'two seconds')
    t.equal(energy(right, 0, 16_000), 0, 'the first second: nothing on the agent\'s track')
    t.ok(energy(left, 0, 16_000) > 1500, 'the caller\'s tone on the left')
    t.equal(energy(left, 24_000, 32_000), 0, 'the last half second: nothing on the caller\'s track')
    t.ok(energy(right, 24_000, 32_000) > 1000, 'the agent\'s tone on the right')
    t.ok(energy(left, 16_000, 24_000) > 1500 && energy(right, 16_000, 24_000) > 1000, 'both where both spoke, each on its own track')
    t.same(mixTracks(file.subarray(44)), decodeWav(wav).pcm, 'the mono download is their mix')

    t.equal((await app.inject({ method: 'HEAD', url: stereoUrl, headers: a.headers })).headers['content-length'], String(file.length))
    for (const [from, to] of [[0, 43], [0, 99], [45, 1002], [64_000, file.length - 1]]) {
      const part = await app.inject({ method: 'GET', url: stereoUrl, headers: { ...a.headers, range: `bytes=${from}-${to}` } })
      t.equal(part.statusCode, 206)
      t.equal(part.headers['content-range'], `bytes ${from}-${to}/${file.length}`)
      t.ok(part.rawPayload.equals(file.subarray(from, to + 1)), `bytes ${from}-${to}`)
    }
    t.equal((await app.inject({ method: 'GET', url: stereoUrl, headers: { ...a.headers, range: `bytes=${file.length}-` } })).statusCode, 416)
    const mono = await app.inject({ method: 'GET', url: `${url}?channels=1`, headers: a.headers })
    t.ok(mono.rawPayload.equals(wav), 'channels=1: the mono mix, as without it')
    for (const bad of ['3', '0', 'two']) {
      const res = await app.inject({ method: 'GET', url: `${url}?channels=${bad}`, headers: a.headers })
      t.equal(res.statusCode, 400, `channels=${bad}: 400`)
      t.equal(res.json().code, 'validation_error')
    }

    // A recording made before two tracks (mono, both sides mixed) downloads as before; it has no tracks to give.
    const old = await webCall(ctx, a)
    t.equal(await storeRecordingPart(db, { callId: old, userId: a.user.id, pcm: pcmToBuffer(decodeWav(wav).pcm) }), true)
    t.match(await findRecording(db, a.user.id, old), { channels: 1, durationMs: 2000, size: wav.length })
    const oldUrl = `/v1/call/${old}/recording`
    t.ok((await app.inject({ method: 'GET', url: oldUrl, headers: a.headers })).rawPayload.equals(wav), 'an old mono recording downloads as it was')
    const oldPart = await app.inject({ method: 'GET', url: oldUrl, headers: { ...a.headers, range: 'bytes=1001-2000' } })
    t.equal(oldPart.statusCode, 206)
    t.ok(oldPart.rawPayload.equals(wav.subarray(1001, 2001)), 'and in ranges')
    const refused = await app.inject({ method: 'GET', url: `${oldUrl}?channels=2`, headers: a.headers })
    t.equal(refused.statusCode, 409)
    t.equal(refused.json().code, 'recording_not_stereo')
    t.match(refused.json().message, /one track/)
  })

  t.test('signed links open the recording without a key, and nothing else', async (t) => {
    const before = Date.now()
    const made = await app.inject({ method: 'POST', url: `/v1/call/${callId}/recording-link`, headers: a.headers })
    t.equal(made.statusCode, 200)
    const { url: link, expires_at: expiresAt } = made.json()
    t.ok(expiresAt >= before + 600_000 && expiresAt <= Date.now() + 600_000, 'valid RECORDING_LINK_SECONDS')
    const path = pathOf(link)
    const opened = await app.inject({ method: 'GET', url: path })
    t.equal(opened.statusCode, 200)
    t.equal(opened.headers['content-type'], 'audio/wav')
    t.same(opened.rawPayload, wav)
    const part = await app.inject({ method: 'GET', url: path, headers: { range: 'bytes=44-99' } })
    t.equal(part.statusCode, 206)
    t.same(part.rawPayload, wav.subarray(44, 100))
    const tracks = await app.inject({ method: 'GET', url: `${path}&channels=2` })
    t.equal(tracks.statusCode, 200)
    t.ok(tracks.rawPayload.subarray(44).equals(pcm), 'the link with &channels=2: the two tracks')
    t.equal(tracks.rawPayload.readUInt16LE(22), 2)

    t.equal((await app.inject({ method: 'POST', url: `/v1/call/${callId}/recording-link`, headers: b.headers })).statusCode, 404, 'only for the owner')
    t.equal((await app.inject({ method: 'POST', url: `/v1/call/${bare}/recording-link`, headers: a.headers })).statusCode, 404, 'only for a recording')

    const query = new URL(link).searchParams
    const expires = query.get('expires')!
    const signature = query.get('signature')!
    const refused = async (what: string, target: string, code: string) => {
      const res = await app.inject({ method: 'GET', url: target })
      t.equal(res.statusCode, 403, `${what}: 403`)
      t.equal(res.json().code, code, `${what}: ${code}`)
    }
    const flipped = (signature[0] === 'A' ? 'B' : 'A') + signature.slice(1)
    await refused('a changed signature', `/v1/recordings/${callId}.wav?expires=${expires}&signature=${flipped}`, 'invalid_recording_link')
    await refused('a later expiry', `/v1/recordings/${callId}.wav?expires=${Number(expires) + 1}&signature=${signature}`, 'invalid_recording_link')
    await refused('another call', `/v1/recordings/${bare}.wav?expires=${expires}&signature=${signature}`, 'invalid_recording_link')
    await refused('the same expiry written otherwise', `/v1/recordings/${callId}.wav?expires=${expires}.0&signature=${signature}`, 'invalid_recording_link')
    await refused('a short signature', `/v1/recordings/${callId}.wav?expires=${expires}&signature=abc`, 'invalid_recording_link')
    const old = signRecordingLink(ctx.config, callId, Date.now() - 601_000)
    t.ok(old.expires_at < Date.now())
    await refused('an expired link', pathOf(old.url), 'recording_link_expired')
    t.equal((await app.inject({ method: 'GET', url: `/v1/recordings/${callId}.wav?expires=${expires}` })).statusCode, 400, 'no signature: a malformed request')

    // A valid link whose call was deleted since: 404, as for any recording that is not there.
    const gone = await webCall(ctx, a)
    await storeRecordingPart(db, { callId: gone, userId: a.user.id, pcm, channels: 2 })
    const goneLink = (await app.inject({ method: 'POST', url: `/v1/call/${gone}/recording-link`, headers: a.headers })).json().url
    await db.deleteFrom('calls').where('id', '=', gone).execute()
    t.equal((await app.inject({ method: 'GET', url: pathOf(goneLink) })).json().code, 'not_found')
  })

  t.test('the OpenAPI document declares the routes', async (t) => {
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
    const download = doc.paths['/v1/call/{id}/recording'].get
    t.ok(download.responses['200'].content['audio/wav'])
    t.ok(download.responses['206'].content['audio/wav'])
    for (const status of ['401', '403', '404', '409', '416', '429']) t.ok(download.responses[status].content['application/json'], `GET recording declares ${status}`)
    t.same(download.parameters.filter((p: { in: string }) => p.in === 'query').map((p: { name: string }) => p.name), ['channels'])
    const link = doc.paths['/v1/call/{id}/recording-link'].post
    t.match(link.responses['200'].content['application/json'].schema, { properties: { url: {}, expires_at: {} } })
    const signed = doc.paths['/v1/recordings/{id}.wav'].get
    t.same(signed.security, [], 'the signed route takes no key')
    for (const operation of [download, link, signed]) t.match(operation.operationId, /^[a-z][A-Za-z0-9]*$/, `${operation.operationId} is a camelCase id`)
    t.ok(signed.responses['200'].content['audio/wav'])
    for (const status of ['400', '403', '404', '416', '429']) t.ok(signed.responses[status], `the signed route declares ${status}`)
    t.same(signed.parameters.map((p: { name: string }) => p.name).sort(), ['channels', 'expires', 'id', 'signature'])
  })
})

t.test('the signed route is rate-limited per address', async (t) => {
  const ctx = await setup(t, { CALL_RUNTIME: 'external', PUBLIC_BASE_URL: BASE, RATE_LIMIT_PER_ADDRESS: '3' })
  const a = await createAccount(ctx.db)
  const callId = await webCall(ctx, a)
  await storeRecordingPart(ctx.db, { callId, userId: a.user.id, pcm: recording().pcm, channels: 2 })
  const { url } = signRecordingLink(ctx.config, callId)
  const statuses: number[] = []
  // From an address of its own: the account's first API requests above were counted per address too.
  for (let i = 0; i < 5; i++) statuses.push((await ctx.app.inject({ method: 'GET', url: pathOf(url), remoteAddress: '127.0.0.2' })).statusCode)
  t.same(statuses, [200, 200, 200, 429, 429])
})

/** `minutes` of recording as samples that differ byte by byte (PCM16 little-endian). */
function longRecording (minutes: number): Buffer {
  const pcm = Buffer.alloc(minutes * 60 * 16_000 * 2)
  for (let i = 0; i < pcm.length; i += 4) pcm.writeUInt32LE((i * 2654435761) >>> 0, i)
  return pcm
}

/** Stores `pcm` in parts of about two seconds (of mono), as a call does while it runs. */
async function storeInParts (db: TestContext['db'], userId: string, callId: string, pcm: Buffer, channels: 1 | 2 = 1, partBytes = 64_000): Promise<void> {
  for (let at = 0; at < pcm.length; at += partBytes) await storeRecordingPart(db, { callId, userId, pcm: pcm.subarray(at, at + partBytes), channels })
}

t.test('a long recording is read back from its parts byte for byte, whole and in ranges across their borders', async (t) => {
  const ctx = await setup(t, { CALL_RUNTIME: 'external' })
  const a = await createAccount(ctx.db)
  const callId = await webCall(ctx, a)
  const pcm = longRecording(10)
  await storeInParts(ctx.db, a.user.id, callId, pcm)
  const wav = encodeWav(new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length / 2))

  const url = `/v1/call/${callId}/recording`
  const whole = await ctx.app.inject({ method: 'GET', url, headers: a.headers })
  t.equal(whole.statusCode, 200)
  t.equal(Number(whole.headers['content-length']), wav.length)
  t.ok(whole.rawPayload.equals(wav), `${wav.length} bytes, the same`)
  t.equal(decodeWav(whole.rawPayload).pcm.length, 10 * 60 * 16_000, 'ten minutes in its header')
  for (const [from, to] of [[0, 99], [63_990, 64_100], [40, 640_043], [wav.length - 70_000, wav.length - 1]]) {
    const part = await ctx.app.inject({ method: 'GET', url, headers: { ...a.headers, range: `bytes=${from}-${to}` } })
    t.equal(part.statusCode, 206)
    t.ok(part.rawPayload.equals(wav.subarray(from, to + 1)), `bytes ${from}-${to}`)
  }
})

t.test('concurrent downloads are bounded per account and per process (429, 503, Retry-After), and free again when a client goes', async (t) => {
  const ctx = await setup(t, { CALL_RUNTIME: 'external', RECORDING_DOWNLOADS_PER_ACCOUNT: '2', RECORDING_DOWNLOADS_MAX: '3' })
  const base = await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const a = await createAccount(ctx.db)
  const b = await createAccount(ctx.db)
  const pcm = longRecording(10)
  const calls = { a: await webCall(ctx, a), b: await webCall(ctx, b) }
  await storeInParts(ctx.db, a.user.id, calls.a, pcm)
  await storeInParts(ctx.db, b.user.id, calls.b, pcm)

  /** A download that reads nothing after its headers: the server holds it open, as a stalled client would. */
  const stalled: http.ClientRequest[] = []
  t.teardown(() => { for (const request of stalled) request.destroy() })
  const download = async (account: Account, callId: string) => await new Promise<{ status: number, retryAfter?: string, code?: string }>((resolve, reject) => {
    const request = http.get(`${base}/v1/call/${callId}/recording`, { headers: account.headers }, (res) => {
      if (res.statusCode === 200) {
        stalled.push(request)
        res.pause()
        resolve({ status: 200 })
        return
      }
      let body = ''
      res.on('data', (chunk: Buffer) => { body += chunk.toString() })
      res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], code: JSON.parse(body).code }))
    })
    request.on('error', reject)
  })

  // 150 at once from one account: two stream, the others are told to wait.
  const race = await Promise.all(Array.from({ length: 150 }, async () => await download(a, calls.a)))
  t.equal(race.filter((r) => r.status === 200).length, 2, 'two downloads of the account run')
  t.ok(race.filter((r) => r.status !== 200).every((r) => r.status === 429 && r.code === 'too_many_concurrent_downloads' && r.retryAfter === '5'), 'the rest: 429 with Retry-After')

  t.same(await download(b, calls.b), { status: 200 }, 'another account still downloads')
  t.match(await download(b, calls.b), { status: 503, code: 'downloads_busy', retryAfter: '5' }, 'the process streams three at once')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/health' })).statusCode, 200)

  stalled[0].destroy()
  const again = await poll(async () => await download(a, calls.a), (r) => r.status === 200, { message: 'the slot came back' })
  t.equal(again.status, 200)
})

t.test('a long two-track recording: stereo byte for byte and its mono mix, whole and in ranges across the parts\' and windows\' borders', async (t) => {
  const ctx = await setup(t, { CALL_RUNTIME: 'external' })
  const a = await createAccount(ctx.db)
  const callId = await webCall(ctx, a)
  const pcm = longRecording(12) // six minutes of two tracks
  // Parts that split frames (never the voice session's, but the bytes must join whatever their parts).
  await storeInParts(ctx.db, a.user.id, callId, pcm, 2, 64_002)
  t.match(await findRecording(ctx.db, a.user.id, callId), { channels: 2, durationMs: 6 * 60_000 })
  const url = `/v1/call/${callId}/recording`

  const stereo = await ctx.app.inject({ method: 'GET', url: `${url}?channels=2`, headers: a.headers })
  t.equal(Number(stereo.headers['content-length']), 44 + pcm.length)
  t.ok(stereo.rawPayload.subarray(44).equals(pcm), `${pcm.length} bytes of samples, the same`)
  t.equal(splitTracks(t, stereo.rawPayload).left.length, 6 * 60 * 16_000, 'six minutes in its header')

  const wav = encodeWav(mixTracks(pcm))
  const mono = await ctx.app.inject({ method: 'GET', url, headers: a.headers })
  t.equal(Number(mono.headers['content-length']), wav.length)
  t.ok(mono.rawPayload.equals(wav), `the mono mix: ${wav.length} bytes, the same`)
  const windows = 256 * 1024 / 2 + 44 // where the second window's mix starts in the mono file
  for (const [from, to] of [[0, 99], [31_990, 32_100], [32_045, 32_047], [windows - 3, windows + 2], [41, 640_042], [wav.length - 70_001, wav.length - 1]]) {
    const part = await ctx.app.inject({ method: 'GET', url, headers: { ...a.headers, range: `bytes=${from}-${to}` } })
    t.equal(part.statusCode, 206)
    t.ok(part.rawPayload.equals(wav.subarray(from, to + 1)), `mono bytes ${from}-${to}`)
  }
  for (const [from, to] of [[63_990, 64_100], [262_100, 262_200], [43, 1_280_045], [stereo.rawPayload.length - 70_001, stereo.rawPayload.length - 1]]) {
    const part = await ctx.app.inject({ method: 'GET', url: `${url}?channels=2`, headers: { ...a.headers, range: `bytes=${from}-${to}` } })
    t.equal(part.statusCode, 206)
    t.ok(part.rawPayload.equals(stereo.rawPayload.subarray(from, to + 1)), `stereo bytes ${from}-${to}`)
  }
})
