import t from 'tap'
import { newId } from '../../../src/db/ids.ts'
import { sendMessage } from '../../../src/modules/messaging/send.ts'
import { createAccount } from '../../helpers/app.ts'
import { createAgent, insertCalls } from '../../helpers/calls.ts'
import { addNumber, messagingSetup, outgoing, TWILIO_SID } from '../../helpers/messaging.ts'

// GET /v1/messages (the log, the account's own only) and GET/PATCH /v1/messaging-settings.

const NUMBER = '+14155550100'

t.test('messaging settings: defaults, changes, null clears, and every bad value a 400', async (t) => {
  const { app, db, user, headers, twilio } = await messagingSetup(t, { MAIL_FROM: 'Switchboard <noreply@switchboard.test>' })
  const get = async () => (await app.inject({ method: 'GET', url: '/v1/messaging-settings', headers })).json()
  const patch = async (payload: unknown) => await app.inject({ method: 'PATCH', url: '/v1/messaging-settings', headers, payload: payload as Record<string, unknown> })
  t.same(await get(), { whatsapp_sender: null, email_from_name: null, email_reply_to: null, email_from: 'Switchboard <noreply@switchboard.test>' })

  // The WhatsApp sender must be one of the account's numbers on Twilio.
  const notOwned = await patch({ whatsapp_sender: NUMBER })
  t.equal(notOwned.statusCode, 400)
  t.same(notOwned.json(), { statusCode: 400, error: 'Bad Request', code: 'invalid_sender', message: `whatsapp_sender: ${NUMBER} is not one of your phone numbers` })
  await addNumber(db, user.id, NUMBER, 'sandbox')
  t.match((await patch({ whatsapp_sender: NUMBER })).json(), { code: 'invalid_sender', message: /not a Twilio number/ })
  const other = await createAccount(db)
  await addNumber(db, other.user.id, '+14155550101', 'twilio', twilio)
  t.match((await patch({ whatsapp_sender: '+14155550101' })).json(), { code: 'invalid_sender', message: /not one of your phone numbers/ }, 'another account\'s number')
  await addNumber(db, user.id, '+14155550102', 'twilio', twilio)
  twilio.enableWhatsApp(TWILIO_SID, '+14155550102')
  const set = await patch({ whatsapp_sender: '+14155550102', email_from_name: 'Bella Napoli' })
  t.equal(set.statusCode, 200)
  t.same(set.json(), { whatsapp_sender: '+14155550102', email_from_name: 'Bella Napoli', email_reply_to: null, email_from: '"Bella Napoli" <noreply@switchboard.test>' })
  t.same((await patch({ email_reply_to: 'desk@bella.test' })).json().whatsapp_sender, '+14155550102', 'fields not given stay')
  t.same(await get(), { whatsapp_sender: '+14155550102', email_from_name: 'Bella Napoli', email_reply_to: 'desk@bella.test', email_from: '"Bella Napoli" <noreply@switchboard.test>' })

  const bad: Array<[unknown, string]> = [
    [{ whatsapp_sender: '14155550102' }, 'validation_error'],
    [{ whatsapp_sender: 'whatsapp:+14155550102' }, 'validation_error'],
    [{ email_from_name: 'Bella\0Napoli' }, 'invalid_text'],
    [{ email_from_name: 'Bella\nBcc: eve@example.com' }, 'validation_error'],
    [{ email_from_name: 'security@bank.test' }, 'validation_error'],
    [{ email_from_name: 'Bank <security@bank.test>' }, 'validation_error'],
    [{ email_from_name: '' }, 'validation_error'],
    [{ email_from_name: 'x'.repeat(65) }, 'validation_error'],
    [{ email_reply_to: 'not an address' }, 'validation_error'],
    [{ email_reply_to: 'a@b.test, eve@example.com' }, 'validation_error'],
    [{ email_reply_to: 'desk@bella.test\0' }, 'invalid_text'],
    [{ email_reply_to: 42 }, 'validation_error']
  ]
  for (const [payload, code] of bad) {
    const res = await patch(payload)
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    t.equal(res.json().code, code, JSON.stringify(payload))
  }
  t.same(await get(), { whatsapp_sender: '+14155550102', email_from_name: 'Bella Napoli', email_reply_to: 'desk@bella.test', email_from: '"Bella Napoli" <noreply@switchboard.test>' }, 'nothing changed')

  const cleared = await patch({ whatsapp_sender: null, email_from_name: null, email_reply_to: null })
  t.same(cleared.json(), { whatsapp_sender: null, email_from_name: null, email_reply_to: null, email_from: 'Switchboard <noreply@switchboard.test>' })
  t.equal((await app.inject({ method: 'GET', url: '/v1/messaging-settings' })).statusCode, 401)
  t.same((await app.inject({ method: 'GET', url: '/v1/messaging-settings', headers: other.headers })).json().whatsapp_sender, null, 'another account has its own')
})

t.test('GET /v1/messages: the account\'s own, newest first, filtered and paged', async (t) => {
  const { app, db, deps, user, key, headers } = await messagingSetup(t)
  await addNumber(db, user.id, NUMBER, 'sandbox')
  const agent = await createAgent(app, { user, key, headers })
  const [callId] = await insertCalls(db, user.id, agent, [{ call_status: 'started', call_from: NUMBER }])
  const sent = []
  for (let i = 0; i < 5; i++) sent.push(await sendMessage(deps, outgoing(user.id, { callId: i < 3 ? callId : null, origin: i < 3 ? 'live' : 'test', text: `message ${i}` })))
  sent.push(await sendMessage(deps, outgoing(user.id, { channel: 'email', to: 'ada@example.com', subject: 'Hi', text: 'mail' })))
  sent.push(await sendMessage(deps, outgoing(user.id, { text: 'x'.repeat(1601) })))

  const list = async (query = '', as = headers) => {
    const res = await app.inject({ method: 'GET', url: `/v1/messages${query}`, headers: as })
    t.equal(res.statusCode, 200, query)
    return res.json()
  }
  const all = await list()
  t.same(all.data.map((m: { _id: string }) => m._id), sent.map((m) => m.id).reverse(), 'newest first')
  t.equal(all.next_before, null)
  const [refused, email] = all.data
  t.match(refused, { status: 'refused', error: /over the carrier's limit of 1600/, channel: 'sms', origin: 'test', call_id: null })
  t.match(email, { channel: 'email', recipient: 'ada@example.com', subject: 'Hi', body: 'mail', status: 'recorded', sender: 'Switchboard <noreply@localhost>' })
  t.same(Object.keys(email).sort(), ['_id', 'action_id', 'body', 'call_id', 'carrier_message_id', 'channel', 'created_at', 'error', 'origin', 'recipient', 'sender', 'status', 'subject', 'updated_at'])
  t.equal(typeof email.created_at, 'number')

  t.same((await list(`?call_id=${callId}`)).data.map((m: { body: string }) => m.body), ['message 2', 'message 1', 'message 0'])
  t.same((await list('?channel=email')).data.map((m: { _id: string }) => m._id), [sent[5].id])
  t.same((await list('?status=refused')).data.map((m: { _id: string }) => m._id), [sent[6].id])

  const first = await list('?limit=4')
  t.equal(first.data.length, 4)
  t.equal(first.next_before, first.data[3]._id)
  const second = await list(`?limit=4&before=${first.next_before}`)
  t.same([...first.data, ...second.data].map((m: { _id: string }) => m._id), all.data.map((m: { _id: string }) => m._id), 'the pages hold every message once')
  t.equal(second.next_before, null)

  // Another account sees none of it, not even through the call's id.
  const stranger = await createAccount(db)
  t.same(await list('', stranger.headers), { data: [], next_before: null })
  t.same(await list(`?call_id=${callId}`, stranger.headers), { data: [], next_before: null })

  for (const query of ['?call_id=nope', '?channel=fax', '?status=queued', '?limit=0', '?limit=1001', '?before=xyz', '?call_id=%00']) {
    const res = await app.inject({ method: 'GET', url: `/v1/messages${query}`, headers })
    t.equal(res.statusCode, 400, query)
  }
  t.equal((await app.inject({ method: 'GET', url: '/v1/messages' })).statusCode, 401)
})

t.test('GET /v1/messages?contact_id: the messages of a contact\'s calls, its communications; another account\'s contact gives none', async (t) => {
  const { app, db, deps, user, key, headers } = await messagingSetup(t)
  await addNumber(db, user.id, NUMBER, 'sandbox')
  const agent = await createAgent(app, { user, key, headers })
  const [first, second, other] = await insertCalls(db, user.id, agent, [{ call_status: 'started', call_from: NUMBER }, { call_status: 'started', call_from: NUMBER }, { call_status: 'started', call_from: NUMBER }])
  const contact = newId()
  await db.insertInto('contacts').values({ id: contact, user_id: user.id, phone_number: '+4930123456', last_call_at: new Date() }).execute()
  await db.updateTable('calls').set({ contact_id: contact }).where('id', 'in', [first, second]).execute()
  const mine = [
    await sendMessage(deps, outgoing(user.id, { callId: first, text: 'first' })),
    await sendMessage(deps, outgoing(user.id, { callId: other, text: 'someone else' })),
    await sendMessage(deps, outgoing(user.id, { callId: second, text: 'second' }))
  ]
  const list = async (as: Record<string, string>) => (await app.inject({ method: 'GET', url: `/v1/messages?contact_id=${contact}`, headers: as })).json()
  t.same((await list(headers)).data.map((m: { _id: string }) => m._id), [mine[2].id, mine[0].id], 'newest first, only the contact\'s calls')
  t.same(await list((await createAccount(db)).headers), { data: [], next_before: null })
  t.equal((await app.inject({ method: 'GET', url: '/v1/messages?contact_id=nope', headers })).statusCode, 400)
})

t.test('the routes are in the OpenAPI document, with named schemas', async (t) => {
  const { app } = await messagingSetup(t)
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
  t.ok(doc.paths['/v1/messages'].get)
  t.ok(doc.paths['/v1/messaging-settings'].get)
  t.ok(doc.paths['/v1/messaging-settings'].patch)
  t.ok(doc.components.schemas.Message)
  t.ok(doc.components.schemas.MessagingSettings)
  t.ok(doc.components.schemas.Error.properties.code.enum.includes('invalid_sender'))
})
