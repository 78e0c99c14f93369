import { sql } from 'kysely'
import t from 'tap'
import { loadConfig } from '../../../src/config.ts'
import { sendMessage } from '../../../src/modules/messaging/send.ts'
import { createAgent, insertCalls } from '../../helpers/calls.ts'
import { addNumber, messagingSetup, outgoing } from '../../helpers/messaging.ts'

// A prompt must not be able to send a hundred SMS: each message takes its place within the limits under the
// account's lock before anything leaves the server, so concurrent sends cannot all slip past one count.

const NUMBER = '+14155550100'
const count = <T> (items: T[], pick: (item: T) => boolean) => items.filter(pick).length

t.test('150 concurrent live SMS of one call: exactly MESSAGES_PER_CALL_MAX go out', async (t) => {
  const { app, db, deps, user, key, twilio } = await messagingSetup(t, { DATABASE_POOL_SIZE: '10' })
  await addNumber(db, user.id, NUMBER, 'twilio', twilio)
  const agent = await createAgent(app, { user, key, headers: { 'x-api-key': key } })
  const [callId, otherCall] = await insertCalls(db, user.id, agent, [{ call_status: 'started', call_from: NUMBER }, { call_status: 'started', call_from: NUMBER }])

  const started = performance.now()
  const results = await Promise.all(Array.from({ length: 150 }, (_, i) => sendMessage(deps, outgoing(user.id, { callId, origin: 'live', text: `message ${i}` }))))
  t.comment(`150 concurrent sends in ${Math.round(performance.now() - started)} ms`)
  t.equal(count(results, (r) => r.status === 'sent'), 10, 'the default MESSAGES_PER_CALL_MAX')
  t.equal(count(results, (r) => r.status === 'refused'), 140)
  t.equal(twilio.messages.length, 10, 'Twilio got exactly the ten')
  t.ok(results.filter((r) => r.status === 'refused').every((r) => r.error === 'the call has sent 10 messages, its limit (MESSAGES_PER_CALL_MAX)' && !r.retryable))
  const rows = await db.selectFrom('messages').select(['status']).where('call_id', '=', callId).execute()
  t.same({ sent: count(rows, (r) => r.status === 'sent'), refused: count(rows, (r) => r.status === 'refused') }, { sent: 10, refused: 140 }, 'every one is logged')
  t.equal((await db.selectFrom('calls').select('sms_count').where('id', '=', callId).executeTakeFirstOrThrow()).sms_count, 10)

  // The limit is the call's: another call, and the messages sent after the call, have their own room.
  t.equal((await sendMessage(deps, outgoing(user.id, { callId: otherCall, origin: 'live' }))).status, 'sent')
  t.equal((await sendMessage(deps, outgoing(user.id, { callId, origin: 'after_call' }))).status, 'sent')
})

t.test('150 concurrent messages of one account, whatever sends them: exactly MESSAGES_PER_ACCOUNT_HOUR in the hour', async (t) => {
  const { db, deps, user, twilio } = await messagingSetup(t, { MESSAGES_PER_ACCOUNT_HOUR: '40', DATABASE_POOL_SIZE: '10' })
  await addNumber(db, user.id, NUMBER, 'twilio', twilio)
  const origins = ['after_call', 'test', 'live'] as const
  const channels = ['sms', 'email'] as const
  const results = await Promise.all(Array.from({ length: 150 }, (_, i) => {
    const channel = channels[i % 2]
    return sendMessage(deps, outgoing(user.id, { origin: origins[i % 3], channel, to: channel === 'email' ? 'ada@example.com' : '+15105550123' }))
  }))
  t.equal(count(results, (r) => r.status === 'sent' || r.status === 'recorded'), 40)
  t.equal(count(results, (r) => r.status === 'refused'), 110)
  t.ok(results.filter((r) => r.status === 'refused').every((r) => r.error === 'the account has sent 40 messages in the last hour, its limit (MESSAGES_PER_ACCOUNT_HOUR)'))
  t.equal(twilio.messages.length, count(results, (r) => r.status === 'sent'), 'only the ones within the limit reached Twilio')

  // Refused ones take no place, failed ones do; an hour later the room is back.
  await sql`UPDATE messages SET created_at = now() - interval '61 minutes' WHERE user_id = ${user.id}`.execute(db)
  t.equal((await sendMessage(deps, outgoing(user.id))).status, 'sent')
})

t.test('messages that break a rule take no place within the limits', async (t) => {
  const { db, deps, user, twilio } = await messagingSetup(t, { MESSAGES_PER_ACCOUNT_HOUR: '1' })
  await addNumber(db, user.id, NUMBER, 'twilio', twilio)
  for (let i = 0; i < 3; i++) t.equal((await sendMessage(deps, outgoing(user.id, { text: 'x'.repeat(1601) }))).status, 'refused')
  twilio.failNext(500, 20500, 'Internal Server Error')
  t.equal((await sendMessage(deps, outgoing(user.id))).status, 'failed', 'a failure was an attempt: it takes the place')
  t.match(await sendMessage(deps, outgoing(user.id)), { status: 'refused', error: /MESSAGES_PER_ACCOUNT_HOUR/ })
})

t.test('the limits are configured, and a bad value stops the start with a line naming it', async (t) => {
  t.same(loadConfig({}).messaging, { perCall: 10, perAccountHour: 200 })
  t.same(loadConfig({ MESSAGES_PER_CALL_MAX: '3', MESSAGES_PER_ACCOUNT_HOUR: '1000' }).messaging, { perCall: 3, perAccountHour: 1000 })
  t.throws(() => loadConfig({ MESSAGES_PER_CALL_MAX: '0' }), { message: 'MESSAGES_PER_CALL_MAX must be a whole number from 1 to 10000, got "0"' })
  t.throws(() => loadConfig({ MESSAGES_PER_ACCOUNT_HOUR: 'lots' }), { message: 'MESSAGES_PER_ACCOUNT_HOUR must be a whole number from 1 to 1000000, got "lots"' })
})
