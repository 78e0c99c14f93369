import t from 'tap'
import { createCarriers } from '../../src/modules/phone-numbers/carriers/index.ts'
import { repointNumbers } from '../../src/modules/phone-numbers/numbers.ts'
import { createAccount, setup, type Account } from '../helpers/app.ts'
import { poll } from '../helpers/poll.ts'
import { sid, type TwilioStandIn } from '../helpers/twilio-stand-in.ts'
import { ACCOUNT_SID, listenWithTwilio, type PhoneContext, PUBLIC, say } from '../helpers/twilio-phone.ts'
import { finishedCall } from '../helpers/voice-client.ts'

// Numbers connected to a SIP trunk (connect-to-sip, docs/sip.md), carried by the installation's Twilio account on
// loopback: the stand-in keeps the SIP Domains and credential lists the server configures, challenges the PBX's
// INVITEs with them, posts the signed voice webhook with SIP URIs, and calls SIP endpoints that challenge Twilio.

const SIP_NUMBER = '+4930901820'
const TRUNK = { username: 'pbx-berlin', password: 'Trunk-Secret-2026' }
const PBX = 'pbx.example.test:5060'

type Ctx = PhoneContext

const listen = listenWithTwilio

async function agentFor (ctx: Ctx, account: Account, tools: Array<{ type: string, settings: Record<string, unknown> }> = []) {
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: { begin_message: 'Hello, this is the clinic.', general_prompt: 'You are the clinic\'s receptionist.' } })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'Clinic', llm_id: config._id } })).json() as { _id: string }
  for (const tool of tools) {
    const res = await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/tools`, headers: account.headers, payload: { tool_type: tool.type, settings: tool.settings } })
    if (res.statusCode !== 201) throw new Error(res.body)
  }
  return agent
}

async function connect (ctx: Ctx, account: Account, payload: Record<string, unknown>) {
  return await ctx.app.inject({ method: 'PATCH', url: '/v1/phone-number/connect-to-sip', headers: account.headers, payload: { phone_number: SIP_NUMBER, termination_uri: `sip:${PBX};transport=tcp`, sip_trunk_auth_username: TRUNK.username, sip_trunk_auth_password: TRUNK.password, ...payload } })
}

const sipRequests = (twilio: TwilioStandIn) => twilio.requests.filter((r) => r.path.startsWith('/SIP/'))

t.test('connect-to-sip makes the number a SIP Domain at Twilio; the PBX\'s call with the trunk\'s credentials is held by the agent', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentFor(ctx, account)
  const res = await connect(ctx, account, { inbound_agent_id: agent._id })
  t.equal(res.statusCode, 201, res.body)
  const number = res.json()
  const domainName = `sb-${number._id as string}.sip.twilio.com`
  t.match(number, { phone_number: SIP_NUMBER, source: 'sip', carrier: 'sip', sip_trunk: { termination_uri: `sip:${PBX};transport=tcp`, auth_username: TRUNK.username, auth_password_set: true, sip_domain: domainName } })
  const [domain] = ctx.twilio.sip.domains
  t.match(domain, { account_sid: ACCOUNT_SID, domain_name: domainName, voice_url: `${PUBLIC}/telephony/twilio/voice`, voice_method: 'POST', voice_status_callback_url: `${PUBLIC}/telephony/twilio/status` })
  t.same(ctx.twilio.sip.lists.map((l) => [l.sid, l.credentials.map((c) => c.username)]), [[domain.credentialLists[0], [TRUNK.username]]], 'one credential list, mapped to the domain for calls')

  t.same(await ctx.twilio.sipInvite(`sip:${SIP_NUMBER}@${domainName}`, 'sip:+4930555000@pbx.example.test', { username: TRUNK.username, password: 'Wrong-Password-1' }), { refused: 401 }, 'wrong credentials: Twilio refuses the INVITE')
  t.equal(ctx.twilio.webhooks.length, 0, 'and nothing reaches this server')

  ctx.openai.transcripts.push('I would like an appointment.')
  ctx.openai.replies.push({ text: 'Tuesday at ten is free.' })
  const invite = await ctx.twilio.sipInvite(`sip:${SIP_NUMBER}@${domainName}`, 'sip:+4930555000@pbx.example.test', TRUNK)
  if (invite.refused !== undefined) throw new Error(`refused ${invite.refused}`)
  t.equal(invite.webhook.status, 200)
  t.match(invite.webhook.params, { To: `sip:${SIP_NUMBER}@${domainName}`, SipDomainSid: domain.sid, SipUsername: TRUNK.username })
  t.match(invite.webhook.body, /<Connect><Stream url="wss:\/\/voice\.example\.test\/telephony\/twilio\/stream">/)
  const stream = await invite.call.waitForStream()
  await say(stream)
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 1, { message: 'the caller is answered' })
  await poll(() => ctx.openai.requests.speech.length, (n) => n === 2, { message: 'the answer is spoken' })
  await stream.hangup()

  const [row] = await ctx.db.selectFrom('calls').selectAll().execute()
  const done = await finishedCall(ctx.app, account.headers, row.id)
  t.match(done, { direction: 'inbound', call_to: SIP_NUMBER, call_from: '+4930555000', agent_id: agent._id, call_status: 'success', disconnection_reason: 'user_hangup', simulated: false })
  t.equal(row.carrier, 'twilio', 'Twilio holds the call')
  t.equal(row.carrier_call_id, invite.call.sid)
})

t.test('an outbound call goes to the PBX at the termination URI with the trunk\'s credentials; other credentials are refused by the PBX', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentFor(ctx, account)
  t.equal((await connect(ctx, account, { outbound_agent_id: agent._id })).statusCode, 201)
  ctx.twilio.sipEndpoint(PBX, TRUNK)
  const callee = '+4930555111'
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: SIP_NUMBER, to_number: callee } })
  t.equal(res.statusCode, 201, res.body)
  const target = `sip:${callee}@${PBX};transport=tcp`
  const phone = await ctx.twilio.waitForCall(target)
  const placed = ctx.twilio.requests.find((r) => r.path === '/Calls.json')!
  t.same({ to: placed.form.get('To'), from: placed.form.get('From'), user: placed.form.get('SipAuthUsername'), password: placed.form.get('SipAuthPassword') },
    { to: target, from: SIP_NUMBER, user: TRUNK.username, password: TRUNK.password })
  const stream = await phone.waitForStream()
  await poll(() => stream.frames.length, (n) => n > 10, { message: 'the agent speaks to the PBX\'s callee' })
  await stream.hangup()
  t.match(await finishedCall(ctx.app, account.headers, res.json()._id), { direction: 'outbound', call_from: SIP_NUMBER, call_to: callee, call_status: 'success', simulated: false })

  // The PBX wants other credentials now: it refuses the INVITE and the call fails.
  ctx.twilio.sipEndpoint(PBX, { username: TRUNK.username, password: 'Rotated-Secret-2027' })
  const refused = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: SIP_NUMBER, to_number: '+4930555112' } })
  t.match(await finishedCall(ctx.app, account.headers, refused.json()._id), { call_status: 'failed', disconnection_reason: 'failed' })

  // Connected again with the new password: the credential list is replaced, calls carry the new password.
  t.equal((await connect(ctx, account, { sip_trunk_auth_password: 'Rotated-Secret-2027' })).statusCode, 200)
  t.equal(ctx.twilio.sip.domains.length, 1, 'the same domain')
  t.equal(ctx.twilio.sip.lists.length, 1, 'the old credential list is gone')
  t.same(ctx.twilio.sip.domains[0].credentialLists, [ctx.twilio.sip.lists[0].sid])
  const again = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: SIP_NUMBER, to_number: '+4930555113' } })
  const phone2 = await ctx.twilio.waitForCall(`sip:+4930555113@${PBX};transport=tcp`)
  const stream2 = await phone2.waitForStream()
  await poll(() => stream2.frames.length, (n) => n > 10, { message: 'the agent speaks on the new call' })
  await stream2.hangup()
  t.match(await finishedCall(ctx.app, account.headers, again.json()._id), { call_status: 'success' })
})

t.test('forwarding a SIP call dials the person through the trunk (<Dial><Sip> with its credentials)', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentFor(ctx, account, [{ type: 'call_forwarding', settings: { name: 'Front desk', phone_number: '+4930555222', transfer_message: 'Putting you through.' } }])
  const number = (await connect(ctx, account, { inbound_agent_id: agent._id })).json()
  ctx.twilio.sipEndpoint(PBX, TRUNK)
  ctx.openai.transcripts.push('A person, please.')
  ctx.openai.replies.push({ toolCalls: [{ name: 'Front_desk', arguments: { reason: 'asked for a person' } }] }, { text: 'Putting you through.' })
  const invite = await ctx.twilio.sipInvite(`sip:${SIP_NUMBER}@sb-${number._id as string}.sip.twilio.com`, 'sip:+4930555000@pbx.example.test', TRUNK)
  if (invite.refused !== undefined) throw new Error(`refused ${invite.refused}`)
  const stream = await invite.call.waitForStream()
  await say(stream)
  t.equal(await invite.call.ended, 'completed')
  t.match(invite.call.dials, [{ number: `sip:+4930555222@${PBX};transport=tcp`, callerId: SIP_NUMBER, sipAuth: TRUNK, status: 'completed' }])
  const [row] = await ctx.db.selectFrom('calls').selectAll().execute()
  t.match(await finishedCall(ctx.app, account.headers, row.id), { disconnection_reason: 'call_transfer', transfer_history: [{ to_number: '+4930555222', outcome: 'answered' }] })
})

t.test('bad trunks are refused before anything is made at Twilio; a refusal by Twilio stores nothing and leaves nothing there', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  for (const [payload, status, message] of [
    [{ termination_uri: 'http://pbx.example.test' }, 400, /must be a SIP URI/],
    [{ termination_uri: 'sip:pbx example.test' }, 400, /must be a SIP URI/],
    [{ sip_trunk_auth_username: undefined, sip_trunk_auth_password: undefined }, 400, /sip_trunk_auth_username and body.sip_trunk_auth_password/],
    [{ sip_trunk_auth_password: 'short1A' }, 400, /at least 12 characters/],
    [{ sip_trunk_auth_password: 'alllowercase123' }, 400, /upper-case/],
    [{ sip_trunk_auth_username: 'u'.repeat(33) }, 400, /at most 32/]
  ] as const) {
    const res = await connect(ctx, account, payload)
    t.equal(res.statusCode, status, JSON.stringify(payload))
    t.match(res.json().message, message)
  }
  t.equal(sipRequests(ctx.twilio).length, 0, 'Twilio was not asked')
  t.equal((await connect(ctx, account, { sip_trunk_auth_username: undefined, sip_trunk_auth_password: undefined })).json().code, 'sip_credentials_required')

  // Twilio fails while the domain is made: nothing is stored, nothing is left at Twilio.
  ctx.twilio.failNext(500, 20500, 'Internal Server Error')
  const failed = await connect(ctx, account, {})
  t.equal(failed.statusCode, 502, failed.body)
  t.equal(ctx.twilio.sip.domains.length + ctx.twilio.sip.lists.length, 0)
  t.equal((await ctx.db.selectFrom('phone_numbers').selectAll().execute()).length, 0)

  // Twilio refuses the credential (after the domain and the list were made): both are deleted again.
  const realRest = ctx.twilio.sip.rest.bind(ctx.twilio.sip)
  ctx.twilio.sip.rest = (method, accountSid, path, form) => path.endsWith('/Credentials.json')
    ? { status: 400, body: { code: 21100, message: 'Password is not strong enough', status: 400 } }
    : realRest(method, accountSid, path, form)
  const refused = await connect(ctx, account, {})
  t.match(refused.json(), { statusCode: 400, code: 'carrier_rejected', message: /Password is not strong enough/ })
  t.equal(ctx.twilio.sip.domains.length + ctx.twilio.sip.lists.length, 0, 'the domain and the list made before are deleted')
  t.equal((await ctx.db.selectFrom('phone_numbers').selectAll().execute()).length, 0)
})

t.test('another account: cannot take or reach a SIP number; its PBX credentials and its Twilio account sign nothing about it', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)
  const agent = await agentFor(ctx, account)
  const number = (await connect(ctx, account, { inbound_agent_id: agent._id })).json()
  const otherNumber = '+4930901999'
  t.equal((await connect(ctx, other, { phone_number: otherNumber, sip_trunk_auth_username: 'pbx-other' })).statusCode, 201)
  const requests = sipRequests(ctx.twilio).length

  const taken = await connect(ctx, other, { sip_trunk_auth_username: 'evil', termination_uri: 'sip:evil.example.test' })
  t.same(taken.json(), { statusCode: 404, error: 'Not Found', code: 'not_found', message: 'phone number not found' })
  t.equal(sipRequests(ctx.twilio).length, requests, 'nothing made at Twilio for it')
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: other.headers, payload: { agent_id: agent._id, from_number: SIP_NUMBER, to_number: '+4930555111' } })
  t.equal(res.statusCode, 404, 'the other account cannot call from it')

  // The other account's PBX credentials do not open this number's domain.
  t.same(await ctx.twilio.sipInvite(`sip:${SIP_NUMBER}@sb-${number._id as string}.sip.twilio.com`, 'sip:x@evil.example.test', { username: 'pbx-other', password: TRUNK.password }), { refused: 401 })

  // A webhook naming the number's domain signed by another Twilio account (one imported by a tenant): 403, no call.
  const tenantSid = sid('AC')
  ctx.twilio.addAccount(tenantSid, 'tenant-token')
  await ctx.db.insertInto('phone_numbers').values({ id: '65000000eeeeeeeeeeeeeeee', user_id: other.user.id, phone_number: '+14155550777', source: 'imported', carrier: 'twilio', carrier_account_id: tenantSid, carrier_auth_token: 'tenant-token' }).execute()
  const forged = await ctx.twilio.post(`${PUBLIC}/telephony/twilio/voice`, { AccountSid: tenantSid, CallSid: sid('CA'), From: 'sip:x@evil', To: `sip:${SIP_NUMBER}@sb-${number._id as string}.sip.twilio.com`, SipDomainSid: ctx.twilio.sip.domains[0].sid, CallStatus: 'ringing' })
  t.equal(forged.status, 403)
  t.equal((await ctx.db.selectFrom('calls').selectAll().execute()).length, 0)

  // Released: the domain and its credentials go with the number.
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/phone-number/${number._id as string}`, headers: account.headers })).statusCode, 204)
  t.same(ctx.twilio.sip.domains.map((d) => d.domain_name), [`sb-${(await ctx.db.selectFrom('phone_numbers').select('id').executeTakeFirstOrThrow()).id}.sip.twilio.com`], 'only the other account\'s domain is left')
  t.equal(ctx.twilio.sip.lists.length, 1)
})

t.test('an installation without Twilio (the sandbox) keeps SIP settings only: the number places no calls, never simulated ones', async (t) => {
  const ctx = await setup(t, { PHONE_CARRIER: 'sandbox' })
  const account = await createAccount(ctx.db)
  const config = (await ctx.app.inject({ method: 'POST', url: '/v1/llm', headers: account.headers, payload: {} })).json()
  const agent = (await ctx.app.inject({ method: 'POST', url: '/v1/agent', headers: account.headers, payload: { agent_name: 'A', llm_id: config._id } })).json()
  const connected = await ctx.app.inject({ method: 'PATCH', url: '/v1/phone-number/connect-to-sip', headers: account.headers, payload: { phone_number: SIP_NUMBER, termination_uri: 'sip:pbx.example.test' } })
  t.equal(connected.statusCode, 201)
  t.equal(connected.json().sip_trunk.sip_domain, null)
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: SIP_NUMBER, to_number: '+4930555111' } })
  t.equal(res.statusCode, 409)
  t.equal(res.json().code, 'sip_not_connected')
  t.equal((await ctx.db.selectFrom('calls').selectAll().execute()).length, 0, 'no call, simulated or not')
})

t.test('after PUBLIC_BASE_URL changed, repointing points each SIP Domain at the new address (the CLI\'s numbers repoint)', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  t.equal((await connect(ctx, account, {})).statusCode, 201)
  const moved = createCarriers(ctx.db, { ...ctx.config, publicBaseUrl: 'https://moved.example.test' })
  t.same(await repointNumbers(ctx.db, moved), { repointed: [SIP_NUMBER], failed: [] })
  t.match(ctx.twilio.sip.domains[0], { voice_url: 'https://moved.example.test/telephony/twilio/voice', voice_status_callback_url: 'https://moved.example.test/telephony/twilio/status' })
  t.equal(ctx.twilio.sip.lists.length, 1, 'the credentials stay as they are')
})
