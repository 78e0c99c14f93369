import t from 'tap'
import { sendMessage } from '../../../src/modules/messaging/send.ts'
import { createAgent, insertCalls } from '../../helpers/calls.ts'
import { signedInWithKey } from '../../helpers/console-client.ts'
import { addNumber, messagingSetup, outgoing } from '../../helpers/messaging.ts'

// The console's call page lists the call's messages: channel, recipient, status, error, time.

t.test('a call\'s page shows its messages, and a call without any has no Messages section', async (t) => {
  const ctx = await messagingSetup(t)
  const { user, account, browser } = await signedInWithKey(ctx)
  await addNumber(ctx.db, user.id, '+14155550100', 'sandbox')
  const agent = await createAgent(ctx.app, account)
  const [callId, quiet] = await insertCalls(ctx.db, user.id, agent, [{ call_status: 'started' }, { call_status: 'started' }])
  await sendMessage(ctx.deps, outgoing(user.id, { callId, origin: 'live', to: '+15105550123' }))
  await sendMessage(ctx.deps, outgoing(user.id, { callId, origin: 'live', channel: 'email', to: 'ada<b>@example.com' }))
  await sendMessage(ctx.deps, outgoing(user.id, { callId, origin: 'live', channel: 'chat' }))

  const page = await browser.get(`/calls/${callId}`)
  t.equal(page.statusCode, 200)
  t.match(page.body, '<h2>Messages</h2>')
  t.match(page.body, /<td>SMS<\/td><td>\+15105550123<\/td><td>Recorded<\/td><td>—<\/td><td><time datetime="[^"]+">[^<]+ UTC<\/time><\/td>/)
  t.match(page.body, /<td>E-mail<\/td><td>ada&lt;b&gt;@example\.com<\/td><td>Refused<\/td><td>the recipient &quot;ada&lt;b&gt;@example\.com&quot; is not one e-mail address<\/td>/, 'escaped text')
  t.match(page.body, /<td>WhatsApp<\/td><td>\+15105550123<\/td><td>Refused<\/td><td>no WhatsApp sender is set/)
  t.notMatch((await browser.get(`/calls/${quiet}`)).body, '<h2>Messages</h2>')
})
