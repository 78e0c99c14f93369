import t from 'tap'
import { endCall, finishCall } from '../../../src/modules/calls/lifecycle.ts'
import { findCallRow } from '../../../src/modules/calls/queries.ts'
import { sendMessage, senderProblem } from '../../../src/modules/messaging/send.ts'
import { createTwilioMessage } from '../../../src/modules/messaging/twilio.ts'
import type { CarrierError } from '../../../src/modules/phone-numbers/carriers/carrier.ts'
import { createAccount } from '../../helpers/app.ts'
import { createAgent, insertCalls } from '../../helpers/calls.ts'
import { addNumber, messagingSetup, outgoing, TWILIO_SID } from '../../helpers/messaging.ts'

// SMS and WhatsApp through Twilio's Messages resource (the stand-in speaks it on loopback), sandbox numbers recorded,
// and the count and charge of a call's text messages.

const NUMBER = '+14155550100'
const OTHER = '+14155550101'
const CALLER = '+15105550123'

t.test('an SMS is posted to Messages.json with the account\'s credentials, From, To and Body, and logged sent', async (t) => {
  const { db, deps, user, twilio } = await messagingSetup(t)
  await addNumber(db, user.id, NUMBER, 'twilio', twilio)
  const result = await sendMessage(deps, outgoing(user.id, { text: 'Your table is booked for 8 pm.' }))
  t.equal(result.status, 'sent')
  t.equal(result.error, null)
  t.equal(result.retryable, false)
  const [request] = twilio.requests
  t.equal(request.method, 'POST')
  t.equal(request.path, '/Messages.json')
  t.equal(request.accountSid, TWILIO_SID, 'the number\'s Twilio account, authenticated (the stand-in answers 401 to anything else)')
  t.same(Object.fromEntries(request.form), { To: CALLER, From: NUMBER, Body: 'Your table is booked for 8 pm.' })
  const [sent] = twilio.messages
  t.match(sent, { from: NUMBER, to: CALLER, channel: 'sms' })
  const row = await db.selectFrom('messages').selectAll().where('id', '=', result.id).executeTakeFirstOrThrow()
  t.match(row, { user_id: user.id, channel: 'sms', origin: 'test', sender: NUMBER, recipient: CALLER, body: 'Your table is booked for 8 pm.', status: 'sent', error: null, carrier_message_id: sent.sid })
  t.match(sent.sid, /^SM[0-9a-f]{32}$/)
})

t.test('the sender: `from` when given, else the number the call runs on, else the account\'s first number', async (t) => {
  const { app, db, deps, user, key, twilio } = await messagingSetup(t)
  await addNumber(db, user.id, NUMBER, 'twilio', twilio)
  await addNumber(db, user.id, OTHER, 'twilio', twilio)
  const agent = await createAgent(app, { user, key, headers: { 'x-api-key': key } })
  const [inbound, outbound, web] = await insertCalls(db, user.id, agent, [
    { direction: 'inbound', call_from: CALLER, call_to: OTHER, call_status: 'started' },
    { direction: 'outbound', call_from: OTHER, call_to: CALLER, call_status: 'started' },
    { call_type: 'web', call_from: null, call_to: null, call_status: 'started' }
  ])
  const senders = []
  for (const callId of [inbound, outbound, web]) {
    t.equal((await sendMessage(deps, outgoing(user.id, { callId, origin: 'live' }))).status, 'sent')
    senders.push(twilio.messages.at(-1)!.from)
  }
  t.same(senders, [OTHER, OTHER, NUMBER], 'the number called, the number calling, the first number for a web call')
  await sendMessage(deps, outgoing(user.id, { from: OTHER }))
  t.equal(twilio.messages.at(-1)!.from, OTHER)

  const notOurs = await sendMessage(deps, outgoing(user.id, { from: '+14155550199' }))
  t.same({ ...notOurs, id: undefined }, { id: undefined, status: 'refused', error: '+14155550199 is not one of your phone numbers', retryable: false })
  const sip = '+14155550177'
  await addNumber(db, user.id, sip, 'sip')
  t.match(await sendMessage(deps, outgoing(user.id, { from: sip })), { status: 'refused', error: /SIP trunk number/ })
  t.equal(twilio.messages.length, 4, 'nothing was sent for the refused ones')

  const stranger = await createAccount(db)
  t.match(await senderProblem(db, stranger.user.id, 'sms'), /has no phone number that can send SMS/)
  t.equal(await senderProblem(db, user.id, 'sms'), undefined)
  t.equal(await senderProblem(db, user.id, 'sms', OTHER), undefined)
  t.match(await senderProblem(db, user.id, 'sms', '+14155550199'), /not one of your phone numbers/)
  t.match(await sendMessage(deps, outgoing(stranger.user.id, { callId: inbound, origin: 'live' })), { status: 'refused', error: `call ${inbound} not found` },
    'another account\'s call is not found')
  t.match(await sendMessage(deps, outgoing(user.id, { callId: 'x\0y', origin: 'live' })), { status: 'refused', error: 'call x\uFFFDy not found' }, 'a malformed call id')
})

t.test('WhatsApp goes to the same resource with whatsapp: on From and To, from the account\'s whatsapp_sender', async (t) => {
  const { app, db, deps, user, headers, twilio } = await messagingSetup(t)
  t.match(await sendMessage(deps, outgoing(user.id, { channel: 'chat' })), { status: 'refused', error: /no WhatsApp sender is set/ })
  await addNumber(db, user.id, NUMBER, 'twilio', twilio)
  twilio.enableWhatsApp(TWILIO_SID, NUMBER)
  const res = await app.inject({ method: 'PATCH', url: '/v1/messaging-settings', headers, payload: { whatsapp_sender: NUMBER } })
  t.equal(res.statusCode, 200)
  t.equal(await senderProblem(db, user.id, 'chat'), undefined)

  const result = await sendMessage(deps, outgoing(user.id, { channel: 'chat', text: 'See you tomorrow' }))
  t.equal(result.status, 'sent')
  t.same(Object.fromEntries(twilio.requests.at(-1)!.form), { To: `whatsapp:${CALLER}`, From: `whatsapp:${NUMBER}`, Body: 'See you tomorrow' })
  t.match(twilio.messages.at(-1), { channel: 'whatsapp', from: `whatsapp:${NUMBER}`, to: `whatsapp:${CALLER}` })
  t.match(await db.selectFrom('messages').selectAll().where('id', '=', result.id).executeTakeFirstOrThrow(), { channel: 'chat', sender: NUMBER, recipient: CALLER, status: 'sent' })

  // A Twilio number that Twilio has not enabled for WhatsApp: Twilio refuses it (63007), for good.
  await addNumber(db, user.id, OTHER, 'twilio', twilio)
  const refused = await sendMessage(deps, outgoing(user.id, { channel: 'chat', from: OTHER }))
  t.match(refused, { status: 'failed', error: /Twilio answered 400 \(error 63007\)/, retryable: false })
})

t.test('a sandbox number records the message and sends nothing', async (t) => {
  const { db, deps, user, twilio } = await messagingSetup(t)
  await addNumber(db, user.id, NUMBER, 'sandbox')
  const result = await sendMessage(deps, outgoing(user.id))
  t.same({ ...result, id: undefined }, { id: undefined, status: 'recorded', error: null, retryable: false })
  t.same(twilio.requests, [], 'no request left for Twilio')
  t.match(await db.selectFrom('messages').selectAll().where('id', '=', result.id).executeTakeFirstOrThrow(), { status: 'recorded', sender: NUMBER })
  t.match(await sendMessage(deps, outgoing(user.id, { channel: 'chat', from: NUMBER })), { status: 'refused', error: /not a Twilio number/ })
})

t.test('a text over 1600 characters is refused before any request; 1600 go out', async (t) => {
  const { db, deps, user, twilio } = await messagingSetup(t)
  await addNumber(db, user.id, NUMBER, 'twilio', twilio)
  const tooLong = await sendMessage(deps, outgoing(user.id, { text: 'x'.repeat(1601) }))
  t.same({ ...tooLong, id: undefined }, {
    id: undefined, status: 'refused', retryable: false, error: 'the text is 1601 characters long, over the carrier\'s limit of 1600 (Twilio error 21617)'
  })
  t.same(twilio.requests, [])
  t.equal((await sendMessage(deps, outgoing(user.id, { text: 'x'.repeat(1600) }))).status, 'sent')
  t.match(await sendMessage(deps, outgoing(user.id, { to: '5105550123' })), { status: 'refused', error: /not an E\.164 phone number/ })
  t.match(await sendMessage(deps, outgoing(user.id, { text: '  ' })), { status: 'refused', error: 'the message has no text' })
  const nul = await sendMessage(deps, outgoing(user.id, { text: 'a\0b' }))
  t.match(nul, { status: 'refused', error: /NUL characters/ })
  t.equal((await db.selectFrom('messages').select('body').where('id', '=', nul.id).executeTakeFirstOrThrow()).body, 'a\uFFFDb', 'logged as far as it can be stored')
  t.equal(twilio.requests.length, 1)
})

t.test('Twilio\'s answers: a 4xx refusal fails for good, a 5xx, a 429 or no answer may be retried', async (t) => {
  const { db, deps, user, twilio } = await messagingSetup(t)
  await addNumber(db, user.id, NUMBER, 'twilio', twilio)

  twilio.failNext(400, 21211, "Invalid 'To' Phone Number: +15105550123")
  const invalid = await sendMessage(deps, outgoing(user.id))
  t.same({ ...invalid, id: undefined }, { id: undefined, status: 'failed', retryable: false, error: "Twilio answered 400 (error 21211): Invalid 'To' Phone Number: +15105550123" })
  t.match(await db.selectFrom('messages').selectAll().where('id', '=', invalid.id).executeTakeFirstOrThrow(), { status: 'failed', error: /21211/ })

  twilio.failNext(500, 20500, 'Internal Server Error')
  t.match(await sendMessage(deps, outgoing(user.id)), { status: 'failed', retryable: true, error: /Twilio answered 500/ })
  twilio.failNext(429, 20429, 'Too Many Requests')
  t.match(await sendMessage(deps, outgoing(user.id)), { status: 'failed', retryable: true, error: /Twilio answered 429/ })

  // A number the account holds here but that its Twilio account does not (released at Twilio meanwhile).
  await addNumber(db, user.id, OTHER, 'twilio')
  t.match(await sendMessage(deps, outgoing(user.id, { from: OTHER })), { status: 'failed', retryable: false, error: /error 21606/ })

  twilio.addAccount(TWILIO_SID, 'rotated-at-twilio')
  t.match(await sendMessage(deps, outgoing(user.id)), { status: 'failed', retryable: false, error: /Twilio answered 401 \(error 20003\).*check the account SID and auth token/ })
})

t.test('Twilio unreachable: failed, retryable', async (t) => {
  // A port on loopback that nothing listens on.
  const { db, deps, user } = await messagingSetup(t, { TWILIO_API_URL: 'http://127.0.0.1:9' })
  await addNumber(db, user.id, NUMBER, 'twilio')
  const result = await sendMessage(deps, outgoing(user.id))
  t.match(result, { status: 'failed', retryable: true, error: /Twilio could not be reached/ })
})

t.test('a number of the installation\'s own Twilio account sends with the installation\'s credentials', async (t) => {
  const { db, deps, user, twilio } = await messagingSetup(t, { TWILIO_ACCOUNT_SID: TWILIO_SID, TWILIO_AUTH_TOKEN: 'messaging-auth-token' })
  const number = await addNumber(db, user.id, NUMBER, 'twilio', twilio)
  await db.updateTable('phone_numbers').set({ carrier_auth_token: null }).where('id', '=', number.id).execute()
  t.equal((await sendMessage(deps, outgoing(user.id))).status, 'sent')
  const orphan = await addNumber(db, user.id, OTHER, 'twilio', twilio)
  await db.updateTable('phone_numbers').set({ carrier_auth_token: null, carrier_account_id: 'AC' + '0'.repeat(32) }).where('id', '=', orphan.id).execute()
  t.match(await sendMessage(deps, outgoing(user.id, { from: OTHER })), { status: 'refused', error: /no Twilio credentials are kept for \+14155550101/ })
})

t.test('a call\'s text messages count on the call; once the call is charged, each is charged at once', async (t) => {
  const { app, db, boss, config, deps, user, key, twilio } = await messagingSetup(t)
  await addNumber(db, user.id, NUMBER, 'twilio', twilio)
  const agent = await createAgent(app, { user, key, headers: { 'x-api-key': key } })
  const [callId] = await insertCalls(db, user.id, agent, [{ call_status: 'started', call_from: NUMBER, call_to: CALLER, end_timestamp: null, duration_ms: null }])

  // During the call: an SMS and a WhatsApp message count; an e-mail and a failed SMS do not.
  twilio.enableWhatsApp(TWILIO_SID, NUMBER)
  t.equal((await sendMessage(deps, outgoing(user.id, { callId, origin: 'live' }))).status, 'sent')
  t.equal((await sendMessage(deps, outgoing(user.id, { callId, origin: 'live', channel: 'chat', from: NUMBER }))).status, 'sent')
  t.equal((await sendMessage(deps, outgoing(user.id, { callId, origin: 'live', channel: 'email', to: 'ada@example.com' }))).status, 'recorded')
  twilio.failNext(500, 20500, 'Internal Server Error')
  t.equal((await sendMessage(deps, outgoing(user.id, { callId, origin: 'live' }))).status, 'failed')
  t.equal((await findCallRow(db, callId))!.sms_count, 2)

  // The end adds what an outside runtime reports; it no longer overwrites the server's count.
  const ended = await endCall(db, { boss, config }, user.id, callId, { outcome: 'completed', disconnection_reason: 'user_hangup', usage: { sms_sent: 1 } })
  t.equal(ended.outcome, 'ended')
  const pending = (await findCallRow(db, callId))!
  t.equal(pending.sms_count, 3)

  // Sent while the analysis runs: charged with the call, from the count as it is when the call is finished.
  t.equal((await sendMessage(deps, outgoing(user.id, { callId, origin: 'after_call' }))).status, 'sent')
  const analysis = { held: true, summary: null, sentiment: null, taskAchieved: true, usage: {} }
  const finished = await db.transaction().execute(async (trx) => await finishCall(trx, pending, analysis, config.prices))
  t.equal(finished?.sms_count, 4)
  t.equal(finished?.text_message_credits, 4 * config.prices.sms)
  const balance = async () => (await db.selectFrom('credit_ledger').select((eb) => eb.fn.sum<string>('amount').as('n')).where('user_id', '=', user.id).executeTakeFirstOrThrow()).n
  const before = Number(await balance())

  // After the call was charged: counted and charged at once, in the call and in the ledger.
  t.equal((await sendMessage(deps, outgoing(user.id, { callId, origin: 'after_call' }))).status, 'sent')
  const after = (await findCallRow(db, callId))!
  t.equal(after.sms_count, 5)
  t.equal(after.text_message_credits, 5 * config.prices.sms, 'the call\'s credits match its count')
  t.equal(Number(await balance()), before - config.prices.sms)
  const charge = await db.selectFrom('credit_ledger').selectAll().where('user_id', '=', user.id).where('kind', '=', 'call_charge').orderBy('created_at', 'desc').orderBy('id', 'desc').executeTakeFirstOrThrow()
  t.match(charge, { call_id: callId, amount: -config.prices.sms, description: `text message of call ${callId}` })
})

t.test('the stand-in refuses as Twilio does: a Body over 1600 characters, an invalid To, a From of another account, bad credentials', async (t) => {
  const { twilio } = await messagingSetup(t)
  twilio.hold(TWILIO_SID, NUMBER)
  const account = { apiUrl: twilio.url, accountSid: TWILIO_SID, authToken: 'messaging-auth-token' }
  const send = async (message: Partial<Parameters<typeof createTwilioMessage>[1]>, as = account) => {
    try {
      await createTwilioMessage(as, { channel: 'sms', from: NUMBER, to: CALLER, body: 'hi', ...message })
      return 'sent'
    } catch (err) {
      return { status: (err as CarrierError).status, code: (err as CarrierError).carrierCode, kind: (err as CarrierError).kind }
    }
  }
  t.same(await send({ body: 'x'.repeat(1601) }), { status: 400, code: 21617, kind: 'rejected' })
  t.same(await send({ to: '555-0123' }), { status: 400, code: 21211, kind: 'rejected' })
  t.same(await send({ from: OTHER }), { status: 400, code: 21606, kind: 'rejected' })
  t.same(await send({ channel: 'chat' }), { status: 400, code: 63007, kind: 'rejected' }, 'a number that is no WhatsApp sender')
  t.same(await send({}, { ...account, authToken: 'wrong' }), { status: 401, code: 20003, kind: 'credentials' })
  t.equal(await send({}), 'sent')
  t.same(twilio.messages.map((m) => m.body), ['hi'], 'only the accepted one is kept')
})
