import t from 'tap'
import type { Test } from 'tap'
import { createCarriers } from '../../src/modules/phone-numbers/carriers/index.ts'
import { repointNumbers } from '../../src/modules/phone-numbers/numbers.ts'
import { createAccount, type Account } from '../helpers/app.ts'
import { agentQuiet, poll } from '../helpers/poll.ts'
import { listenWithTelnyx, PUBLIC, type TelnyxContext } from '../helpers/telnyx-phone.ts'
import { type PbxInvite, type StandinCall, type TelnyxStream } from '../helpers/telnyx-standin.ts'
import { finishedCall, speech } from '../helpers/voice-client.ts'

// Numbers connected to a SIP trunk carried by Telnyx (SIP_CARRIER=telnyx, docs/sip.md "Telnyx"), end to end on
// loopback: the Telnyx stand-in keeps the Call Control application (SIP subdomain) and the credential connection the
// server makes per number, takes a PBX's INVITE authenticated with the credential connection and posts the signed
// call.initiated of the number's application, and dials sip: URIs answered by a PBX that challenges for credentials.

const SIP_NUMBER = '+4930901820'
const TRUNK = { username: 'pbxberlin', password: 'Trunk-Secret-2026' }
const PBX = 'pbx.example.test:5060'

type Ctx = TelnyxContext

async function listen (t: Test): Promise<Ctx> {
  return await listenWithTelnyx(t, { SIP_CARRIER: 'telnyx' })
}

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

async function say (stream: TelnyxStream): Promise<void> {
  await agentQuiet(stream)
  stream.sendAudio(speech(600, 700))
}

function accepted (invite: PbxInvite): { call: StandinCall, status: number } {
  if (invite.refused !== undefined) throw new Error(`Telnyx refused the PBX's INVITE (${invite.refused})`)
  return invite
}

const commandsOf = (call: StandinCall) => call.commands.map((c) => c.command)
const dialled = async (ctx: Ctx, to: string) => await poll(() => [...ctx.telnyx.calls.values()].find((c) => c.to === to), (c) => c !== undefined, { message: () => `${to} was not dialled` })

t.test('connect-to-sip makes the number a Call Control application with a SIP subdomain and a credential connection; the PBX\'s call is held by the agent', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentFor(ctx, account)
  const res = await connect(ctx, account, { inbound_agent_id: agent._id })
  t.equal(res.statusCode, 201, res.body)
  const number = res.json()
  const [application] = [...ctx.telnyx.applications.values()]
  const [credentials] = [...ctx.telnyx.credentialConnections.values()]
  t.match(application, { webhook_event_url: `${PUBLIC}/telephony/telnyx/webhook`, webhook_api_version: '2', inbound: { sip_subdomain: /^sb[0-9a-f]{20}$/, sip_subdomain_receive_settings: 'only_my_connections' } })
  t.not(application.inbound.sip_subdomain, `sb${number._id as string}`, 'the subdomain is not the number\'s id, which another tenant could learn')
  t.match(credentials, { user_name: TRUNK.username, password: TRUNK.password, active: true, sip_uri_calling_preference: 'disabled', outbound: {} })
  t.notOk('outbound_voice_profile_id' in credentials.outbound, 'no outbound voice profile: the PBX cannot call the phone network on the installation\'s account')
  const host = `${application.inbound.sip_subdomain!}.sip.telnyx.com`
  t.match(number, { phone_number: SIP_NUMBER, source: 'sip', carrier: 'sip', sip_trunk: { termination_uri: `sip:${PBX};transport=tcp`, auth_username: TRUNK.username, auth_password_set: true, sip_domain: host } })
  t.notOk(JSON.stringify(number).includes(TRUNK.password), 'the password is never returned')

  t.same(await ctx.telnyx.pbxInvite(`sip:4930901820@${host}`, 'sip:+4930555000@pbx.example.test', { username: TRUNK.username, password: 'Wrong-Password' }), { refused: 401 }, 'wrong credentials: Telnyx refuses the INVITE')
  t.same(await ctx.telnyx.pbxInvite(`sip:4930901820@${host}`, 'sip:+4930555000@pbx.example.test', undefined), { refused: 403 }, 'only the account\'s own connections may call the subdomain')

  ctx.openai.transcripts.push('I would like an appointment.')
  ctx.openai.replies.push({ text: 'Tuesday at ten is free.' })
  const { call, status } = accepted(await ctx.telnyx.pbxInvite(`sip:4930901820@${host}`, 'sip:+4930555000@pbx.example.test', TRUNK))
  t.equal(status, 204)
  await poll(() => commandsOf(call), (c) => c.length === 2, { message: () => 'answered and streamed' })
  t.same(commandsOf(call), ['answer', 'streaming_start'])
  const stream = await ctx.telnyx.stream(call)
  await say(stream)
  await poll(() => ctx.openai.requests.chat.length, (n) => n === 1, { message: 'the caller is answered' })
  await poll(() => ctx.openai.requests.speech.length, (n) => n === 2, { message: 'the answer is spoken' })
  await ctx.telnyx.hangup(call)

  const [row] = await ctx.db.selectFrom('calls').selectAll().execute()
  t.match(row, { carrier: 'telnyx', carrier_call_id: call.callControlId })
  const done = await finishedCall(ctx.app, account.headers, row.id)
  t.match(done, { direction: 'inbound', call_to: SIP_NUMBER, call_from: '+4930555000', agent_id: agent._id, call_status: 'success', disconnection_reason: 'user_hangup', simulated: false })
  t.match(done.transcription.map((i: { content: string }) => i.content), ['Hello, this is the clinic.', 'I would like an appointment.', 'Tuesday at ten is free.'])
})

t.test('outbound: make-phone-call dials sip:<number>@<termination URI> with the trunk\'s credentials and transport; a PBX refusing them fails the call', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentFor(ctx, account)
  t.equal((await connect(ctx, account, { outbound_agent_id: agent._id })).statusCode, 201)
  ctx.telnyx.sipEndpoints.set(PBX, TRUNK)
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: SIP_NUMBER, to_number: '+4930555111', ring_timeout_seconds: 25 } })
  t.equal(res.statusCode, 201, res.body)
  const phone = await dialled(ctx, `sip:+4930555111@${PBX}`)
  t.match(phone!.commands[0].body, {
    connection_id: ctx.telnyx.connectionId, to: `sip:+4930555111@${PBX}`, from: SIP_NUMBER, timeout_secs: 25,
    sip_auth_username: TRUNK.username, sip_auth_password: TRUNK.password, sip_transport_protocol: 'TCP',
    webhook_url: `${PUBLIC}/telephony/telnyx/webhook`, stream_url: 'wss://voice.example.test/telephony/telnyx/stream'
  })
  const stream = await ctx.telnyx.stream(phone!)
  await agentQuiet(stream)
  await ctx.telnyx.hangup(phone!)
  t.match(await finishedCall(ctx.app, account.headers, res.json()._id), { direction: 'outbound', call_from: SIP_NUMBER, call_to: '+4930555111', call_status: 'success', simulated: false })

  // The PBX wants other credentials now: it refuses Telnyx's INVITE and the call fails, charged nothing.
  ctx.telnyx.sipEndpoints.set(PBX, { username: TRUNK.username, password: 'Rotated-Secret-2027' })
  const refused = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: SIP_NUMBER, to_number: '+4930555112' } })
  const failed = await finishedCall(ctx.app, account.headers, refused.json()._id)
  t.match(failed, { call_status: 'failed', disconnection_reason: 'failed' })
  t.equal(failed.call_credits_details?.total_credits ?? 0, 0)
})

t.test('a sips: trunk is dialled over TLS', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentFor(ctx, account)
  t.equal((await connect(ctx, account, { termination_uri: 'sips:pbx.example.test', outbound_agent_id: agent._id })).statusCode, 201)
  ctx.telnyx.sipEndpoints.set('pbx.example.test', TRUNK)
  const res = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: account.headers, payload: { agent_id: agent._id, from_number: SIP_NUMBER, to_number: '+4930555113' } })
  t.equal(res.statusCode, 201, res.body)
  const phone = await dialled(ctx, 'sip:+4930555113@pbx.example.test')
  t.match(phone!.commands[0].body, { sip_transport_protocol: 'TLS', sip_auth_username: TRUNK.username })
  await ctx.telnyx.stream(phone!)
  await ctx.telnyx.hangup(phone!)
  await finishedCall(ctx.app, account.headers, res.json()._id)
})

t.test('forwarding a SIP call dials the person through the PBX (transfer to a sip: URI with the trunk\'s credentials)', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentFor(ctx, account, [{ type: 'call_forwarding', settings: { name: 'Front desk', phone_number: '+4930555222', timeout_seconds: 20 } }])
  t.equal((await connect(ctx, account, { inbound_agent_id: agent._id })).statusCode, 201)
  const host = `${[...ctx.telnyx.applications.values()][0].inbound.sip_subdomain!}.sip.telnyx.com`
  ctx.telnyx.sipEndpoints.set(PBX, TRUNK)
  ctx.telnyx.callees.set(`sip:+4930555222@${PBX}`, { answer: 'answer', talkMs: 1000 })
  ctx.openai.transcripts.push('A person, please.')
  ctx.openai.replies.push({ toolCalls: [{ name: 'Front_desk', arguments: { reason: 'asked for a person' } }] }, { text: 'Putting you through.' })
  const { call } = accepted(await ctx.telnyx.pbxInvite(`sip:4930901820@${host}`, 'sip:+4930555000@pbx.example.test', TRUNK))
  await say(await ctx.telnyx.stream(call))
  const transfer = await poll(() => call.commands.find((c) => c.command === 'transfer'), (c) => c !== undefined, { message: () => 'no transfer' })
  t.match(transfer!.body, { to: `sip:+4930555222@${PBX}`, from: SIP_NUMBER, sip_auth_username: TRUNK.username, sip_auth_password: TRUNK.password, sip_transport_protocol: 'TCP' })
  const [row] = await ctx.db.selectFrom('calls').selectAll().execute()
  t.match(await finishedCall(ctx.app, account.headers, row.id), { disconnection_reason: 'call_transfer', transfer_history: [{ to_number: '+4930555222', outcome: 'answered' }] })
})

t.test('connected again: the credentials are replaced in place (the same application and connection, never a moment without one); released: both are deleted', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const agent = await agentFor(ctx, account)
  const first = (await connect(ctx, account, { inbound_agent_id: agent._id })).json()
  const [application] = [...ctx.telnyx.applications.values()]
  const [credentials] = [...ctx.telnyx.credentialConnections.values()]
  const host = `${application.inbound.sip_subdomain!}.sip.telnyx.com`
  const made = ctx.telnyx.sipRequests.length

  const again = await connect(ctx, account, { sip_trunk_auth_username: 'pbxberlin2', sip_trunk_auth_password: 'Rotated-Secret-2027' })
  t.equal(again.statusCode, 200, again.body)
  t.match(again.json(), { _id: first._id, sip_trunk: { auth_username: 'pbxberlin2', sip_domain: host } })
  t.same(ctx.telnyx.sipRequests.slice(made).map((r) => `${r.method} ${r.path}`), [`PATCH /v2/call_control_applications/${application.id}`, `PATCH /v2/credential_connections/${credentials.id}`], 'updated in place: nothing deleted, nothing made')
  t.same([...ctx.telnyx.applications.keys()], [application.id])
  t.match([...ctx.telnyx.credentialConnections.values()], [{ id: credentials.id, user_name: 'pbxberlin2', password: 'Rotated-Secret-2027' }])
  t.same(await ctx.telnyx.pbxInvite(`sip:4930901820@${host}`, 'sip:+4930555000@pbx.example.test', TRUNK), { refused: 401 }, 'the old credentials no longer pass')
  const { call } = accepted(await ctx.telnyx.pbxInvite(`sip:4930901820@${host}`, 'sip:+4930555000@pbx.example.test', { username: 'pbxberlin2', password: 'Rotated-Secret-2027' }))
  await ctx.telnyx.stream(call)
  await ctx.telnyx.hangup(call)

  // A user name Telnyx refuses (taken at Telnyx): 400, and the PBX keeps its working credentials.
  ctx.telnyx.credentialConnections.set('1', { id: '1', connection_name: 'someone else', user_name: 'takenname', password: 'whatever123', active: true, sip_uri_calling_preference: 'disabled', outbound: {} })
  const taken = await connect(ctx, account, { sip_trunk_auth_username: 'takenname', sip_trunk_auth_password: 'Another-Secret-1' })
  t.match(taken.json(), { statusCode: 400, code: 'carrier_rejected', message: /already been taken/ })
  t.match(ctx.telnyx.credentialConnections.get(credentials.id), { user_name: 'pbxberlin2', password: 'Rotated-Secret-2027' })
  t.match((await ctx.app.inject({ method: 'GET', url: `/v1/phone-number/${first._id as string}`, headers: account.headers })).json(), { sip_trunk: { auth_username: 'pbxberlin2' } }, 'the stored trunk is unchanged')

  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/phone-number/${first._id as string}`, headers: account.headers })).statusCode, 204)
  t.equal(ctx.telnyx.applications.size, 0, 'the application is deleted')
  t.same([...ctx.telnyx.credentialConnections.keys()], ['1'], 'and the credential connection')
  t.same(await ctx.telnyx.pbxInvite(`sip:4930901820@${host}`, 'sip:+4930555000@pbx.example.test', { username: 'pbxberlin2', password: 'Rotated-Secret-2027' }), { refused: 404 })
})

t.test('bad trunks are refused before Telnyx is asked; a refusal by Telnyx stores nothing and leaves nothing there', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  for (const [payload, message] of [
    [{ termination_uri: 'http://pbx.example.test' }, /must be a SIP URI/],
    [{ sip_trunk_auth_username: 'pbx-berlin' }, /4 to 32 letters and digits/],
    [{ sip_trunk_auth_username: 'pbx' }, /4 to 32 letters and digits/],
    [{ sip_trunk_auth_password: 'short' }, /8 to 128 characters/],
    [{ sip_trunk_auth_username: undefined, sip_trunk_auth_password: undefined }, /sip_trunk_auth_username and body.sip_trunk_auth_password/]
  ] as const) {
    const res = await connect(ctx, account, payload)
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    t.match(res.json().message, message)
  }
  t.equal((await connect(ctx, account, { sip_trunk_auth_password: undefined })).json().code, 'sip_credentials_required')
  t.equal(ctx.telnyx.sipRequests.length, 0, 'Telnyx was not asked')

  // Telnyx refuses the credential connection after the application was made: the application is deleted again.
  ctx.telnyx.credentialConnections.set('1', { id: '1', connection_name: 'someone else', user_name: TRUNK.username, password: 'whatever123', active: true, sip_uri_calling_preference: 'disabled', outbound: {} })
  const refused = await connect(ctx, account, {})
  t.match(refused.json(), { statusCode: 400, code: 'carrier_rejected', message: /already been taken/ })
  t.equal(ctx.telnyx.applications.size, 0, 'the application made before is deleted')
  t.equal((await ctx.db.selectFrom('phone_numbers').selectAll().execute()).length, 0)
})

t.test('another account: cannot take or call from a SIP number, nor reach it with its own PBX credentials; forged webhooks are refused', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  const other = await createAccount(ctx.db)
  const agent = await agentFor(ctx, account)
  const number = (await connect(ctx, account, { inbound_agent_id: agent._id })).json()
  t.equal((await connect(ctx, other, { phone_number: '+4930901999', sip_trunk_auth_username: 'pbxother' })).statusCode, 201)
  const requests = ctx.telnyx.sipRequests.length

  const taken = await connect(ctx, other, { sip_trunk_auth_username: 'evil1234', termination_uri: 'sip:evil.example.test' })
  t.same(taken.json(), { statusCode: 404, error: 'Not Found', code: 'not_found', message: 'phone number not found' })
  t.equal(ctx.telnyx.sipRequests.length, requests, 'nothing asked of Telnyx for it')
  const call = await ctx.app.inject({ method: 'POST', url: '/v1/call/make-phone-call', headers: other.headers, payload: { agent_id: agent._id, from_number: SIP_NUMBER, to_number: '+4930555111' } })
  t.equal(call.statusCode, 404, 'the other account cannot call from it')
  t.equal((await ctx.app.inject({ method: 'DELETE', url: `/v1/phone-number/${number._id as string}`, headers: other.headers })).statusCode, 404)

  // The other account's PBX is one of the installation's connections, but it cannot name this number's subdomain.
  t.same(await ctx.telnyx.pbxInvite(`sip:4930901820@sb${number._id as string}.sip.telnyx.com`, 'sip:x@evil.example.test', { username: 'pbxother', password: TRUNK.password }), { refused: 404 })

  // A call.initiated naming the number's application, not signed by the installation's Telnyx key: 403, no call.
  const application = [...ctx.telnyx.applications.values()].find((a) => a.application_name.endsWith(number._id as string))!
  const forged = await ctx.telnyx.post(ctx.telnyx.webhookUrl, 'call.initiated', { call_control_id: 'v3:forged', connection_id: application.id, direction: 'incoming', from: 'sip:x@evil', to: 'sip:1@x' }, 'wrong')
  t.equal(forged.status, 403)
  t.equal((await ctx.db.selectFrom('calls').selectAll().execute()).length, 0)
  t.equal(ctx.telnyx.applications.size, 2, 'both numbers keep theirs')
})

t.test('after PUBLIC_BASE_URL changed, repointing points each SIP application\'s webhook at the new address', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  t.equal((await connect(ctx, account, {})).statusCode, 201)
  const moved = createCarriers(ctx.db, { ...ctx.config, publicBaseUrl: 'https://moved.example.test' })
  t.same(await repointNumbers(ctx.db, moved), { repointed: [SIP_NUMBER], failed: [] })
  t.match([...ctx.telnyx.applications.values()], [{ webhook_event_url: 'https://moved.example.test/telephony/telnyx/webhook', inbound: { sip_subdomain_receive_settings: 'only_my_connections' } }])
  t.match([...ctx.telnyx.credentialConnections.values()], [{ user_name: TRUNK.username, password: TRUNK.password }], 'the credentials stay as they are')
})

t.test('a PBX\'s call to a SIP number without an active inbound agent is rejected before it is answered; so is one to an application that is no number\'s', async (t) => {
  const ctx = await listen(t)
  const account = await createAccount(ctx.db)
  t.equal((await connect(ctx, account, {})).statusCode, 201)
  const host = `${[...ctx.telnyx.applications.values()][0].inbound.sip_subdomain!}.sip.telnyx.com`
  const { call } = accepted(await ctx.telnyx.pbxInvite(`sip:4930901820@${host}`, 'sip:+4930555000@pbx.example.test', TRUNK))
  t.same(commandsOf(call), ['reject'])
  const forged = await ctx.telnyx.post(ctx.telnyx.webhookUrl, 'call.initiated', { call_control_id: 'v3:unknown-application', connection_id: '2999999999999999999', direction: 'incoming', from: 'sip:x@pbx', to: `sip:4930901820@${host}` })
  t.equal(forged.status, 204)
  t.equal((await ctx.db.selectFrom('calls').selectAll().execute()).length, 0)
})
