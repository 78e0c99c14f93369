import { sql } from 'kysely'
import { Webhook } from 'standardwebhooks'
import t, { type Test } from 'tap'
import { createLogger } from '../../src/logger.ts'
import { enqueuePostCall } from '../../src/modules/deliveries/engine.ts'
import { createAccount, setup, type Account, type TestContext } from '../helpers/app.ts'
import { createAgent, insertCalls } from '../helpers/calls.ts'
import { poll } from '../helpers/poll.ts'
import { startReceiver, type Received } from '../helpers/receiver.ts'
import { startInbox } from '../helpers/smtp.ts'

const FAST = { DELIVERY_TIME_SCALE: '0.001', DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true', DELIVERY_TIMEOUT_MS: '2000', PUBLIC_BASE_URL: 'https://sb.example.com' }

async function start (t: Test, language = 'en') {
  const inbox = await startInbox(t)
  const ctx = await setup(t, { ...FAST, SMTP_URL: inbox.url }, { workers: true })
  const account = await createAccount(ctx.db)
  if (language !== 'en') await ctx.db.updateTable('users').set({ language }).where('id', '=', account.user.id).execute()
  return { ...ctx, account, inbox }
}

async function enqueue (ctx: TestContext, account: Account, agent: { _id: string, agent_name: string }) {
  const [id] = await insertCalls(ctx.db, account.user.id, agent, [{ call_summary: 'Booked.' }])
  const call = await ctx.db.selectFrom('calls').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
  await ctx.db.transaction().execute(async (trx) => await enqueuePostCall(trx, { boss: ctx.boss, log: createLogger(ctx.config) }, call))
}

/** Every delivery finished and every attempt job done (its failure e-mail, if any, sent or held back). */
async function settle (ctx: TestContext, account: Account, count: number) {
  const { data } = await poll(async () => {
    const { data, total } = (await ctx.app.inject({ method: 'GET', url: '/v1/webhook-deliveries', headers: account.headers })).json()
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pgboss.job WHERE name = 'delivery-attempt' AND state IN ('created', 'retry', 'active')`.execute(ctx.db)
    return { data, total, jobs: rows[0].n }
  }, ({ data, total, jobs }) => total === count && data.every((d: { status: string }) => d.status !== 'pending') && jobs === 0,
  { intervalMs: 30, message: 'deliveries did not settle' })
  return data
}

const emails = async (ctx: TestContext) => await ctx.db.selectFrom('emails').selectAll().where('kind', '=', 'delivery_failure').orderBy('created_at').execute()

/** The failure e-mails once there are `count` (an e-mail is recorded after the SMTP server took it). */
async function emailsAt (ctx: TestContext, count: number) {
  return await poll(() => emails(ctx), (rows) => rows.length >= count, { timeoutMs: 10_000 })
}

function verifies (secret: string, request: Received): boolean {
  try {
    new Webhook(secret).verify(request.body, request.headers as Record<string, string>)
    return true
  } catch {
    return false
  }
}

t.test('deliveries are signed; a receiver verifies them with standardwebhooks, through a rotation', async (t) => {
  const ctx = await setup(t, FAST, { workers: true })
  const account = await createAccount(ctx.db)
  const receiver = await startReceiver(t)
  const agent = await createAgent(ctx.app, account, { webhook_url: `${receiver.url}/hook` })
  const first = (await ctx.app.inject({ method: 'GET', url: '/v1/webhook-secret', headers: account.headers })).json()
  t.match(first, { secret: /^whsec_[A-Za-z0-9+/=]{40,}$/, created_at: Number })
  t.same((await ctx.app.inject({ method: 'GET', url: '/v1/webhook-secret', headers: account.headers })).json(), first, 'stable until rotated')

  await enqueue(ctx, account, agent)
  const [signed] = await receiver.waitFor(1)
  t.equal(signed.headers['webhook-id'], signed.headers['x-service-delivery-id'])
  t.ok(verifies(first.secret, signed), 'verifies with the secret')
  t.notOk(verifies(first.secret, { ...signed, body: signed.body.replace('Booked.', 'Forged.') }), 'a changed body does not verify')

  const rotated = (await ctx.app.inject({ method: 'POST', url: '/v1/webhook-secret/rotate', headers: account.headers })).json()
  t.not(rotated.secret, first.secret)
  t.ok(rotated.previous_expires_at > Date.now() + 23 * 3_600_000, 'the previous secret works 24 hours more')
  t.equal((await ctx.app.inject({ method: 'GET', url: '/v1/webhook-secret', headers: account.headers })).json().secret, rotated.secret)
  await enqueue(ctx, account, agent)
  const [, during] = await receiver.waitFor(2)
  t.equal((during.headers['webhook-signature'] as string).split(' ').length, 2, 'one signature per secret during the overlap')
  t.ok(verifies(rotated.secret, during), 'the new secret verifies')
  t.ok(verifies(first.secret, during), 'the old secret verifies during the overlap')

  // The previous secret is the one with an end (secrets are stored encrypted: not found by value).
  await ctx.db.updateTable('webhook_secrets').set({ expires_at: new Date(Date.now() - 1000) }).where('expires_at', 'is not', null).execute()
  await enqueue(ctx, account, agent)
  const [, , after] = await receiver.waitFor(3)
  t.ok(verifies(rotated.secret, after))
  t.notOk(verifies(first.secret, after), 'the old secret no longer verifies after the overlap')

  const other = await createAccount(ctx.db)
  t.not((await ctx.app.inject({ method: 'GET', url: '/v1/webhook-secret', headers: other.headers })).json().secret, rotated.secret, 'each account has its own')
})

t.test('after the last attempt (default): one e-mail to the owner, with what the specification lists', async (t) => {
  const ctx = await start(t)
  const receiver = await startReceiver(t)
  for (let i = 0; i < 10; i++) receiver.answers.push({ status: 500 })
  const agent = await createAgent(ctx.app, ctx.account, { agent_name: 'Front desk' })
  await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions`, headers: ctx.account.headers, payload: { action_type: 'api_call', settings: { name: 'CRM sync', url: `${receiver.url}/crm`, retry_schedule: [60] } } })
  await enqueue(ctx, ctx.account, agent)
  const [delivery] = await settle(ctx, ctx.account, 1)
  t.equal(delivery.status, 'failed')
  const [message] = await ctx.inbox.waitFor(1)
  t.same(message.to, [ctx.account.user.email])
  const [mail] = await emailsAt(ctx, 1)
  t.match(mail, { status: 'sent', to_address: ctx.account.user.email, subject: `Not delivered: "CRM sync" to ${new URL(receiver.url).host}` })
  t.match(mail.body_text, /"CRM sync" of the agent "Front desk"/)
  t.match(mail.body_text, /The receiver's answer: HTTP 500/)
  t.match(mail.body_text, /Attempt 2 of 2\. This was the last attempt\./)
  t.match(mail.body_text, /kept until \d{4}-\d{2}-\d{2} and can be sent again/)
  t.match(mail.body_text, new RegExp(`POST https://sb\\.example\\.com/v1/webhook-deliveries/${delivery.id}/resend`))
  t.match(mail.body_text, /can be sent again until then with "Send again" on the delivery's page below, or through the API:/)
  t.match(mail.body_text, new RegExp(`Delivery log: https://sb\\.example\\.com/deliveries/${delivery.id}$`), 'the console\'s page of the delivery')

  // A manual resend that fails sends nothing.
  const resend = await ctx.app.inject({ method: 'POST', url: `/v1/webhook-deliveries/${delivery.id}/resend`, headers: ctx.account.headers })
  t.equal(resend.json().outcome.ok, false)
  t.equal((await emails(ctx)).length, 1)
})

t.test('every_attempt to notify_email, with the next attempt; never sends none; German for a German account', async (t) => {
  const ctx = await start(t, 'de')
  const receiver = await startReceiver(t)
  for (let i = 0; i < 10; i++) receiver.answers.push({ status: 503 })
  const agent = await createAgent(ctx.app, ctx.account, { agent_name: 'Praxis' })
  const add = async (name: string, settings: object) => await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions`, headers: ctx.account.headers, payload: { action_type: 'api_call', settings: { name, url: `${receiver.url}/${name}`, retry_schedule: [60], ...settings } } })
  await add('laut', { notify: 'every_attempt', notify_email: 'ops@example.com' })
  await add('still', { notify: 'never' })
  await enqueue(ctx, ctx.account, agent)
  await settle(ctx, ctx.account, 2)
  await ctx.inbox.waitFor(2)
  const mails = await emailsAt(ctx, 2)
  t.equal(mails.length, 2, 'two attempts of "laut", none of "still"')
  t.ok(mails.every((m) => m.to_address === 'ops@example.com'))
  t.match(mails[0].subject, /^Zustellung fehlgeschlagen, neuer Versuch folgt: „laut“/)
  t.match(mails[0].body_text, /Versuch 1 von 2\. Der nächste Versuch folgt um \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\./)
  t.match(mails[1].subject, /^Nicht zugestellt: „laut“/)
  t.match(mails[1].body_text, /Das war der letzte Versuch\./)
  t.match(mails[1].body_text, /Antwort des Empfängers: HTTP 503/)
  t.match(mails[1].body_text, /mit „Send again“ auf der Seite der Zustellung unten oder über die API:/)
  t.match(mails[1].body_text, /Zustellprotokoll: https:\/\/sb\.example\.com\/deliveries\/[0-9a-f]{24}$/)
})

t.test('at most 10 e-mails an hour and 30 a day per action; the last before a pause says until when', async (t) => {
  const ctx = await start(t)
  const receiver = await startReceiver(t)
  for (let i = 0; i < 40; i++) receiver.answers.push({ status: 500 })
  const agent = await createAgent(ctx.app, ctx.account)
  const action = (await ctx.app.inject({ method: 'POST', url: `/v1/agent/${agent._id}/actions`, headers: ctx.account.headers, payload: { action_type: 'api_call', settings: { name: 'noisy', url: `${receiver.url}/x`, retry_schedule: [] } } })).json()
  for (let i = 0; i < 12; i++) await enqueue(ctx, ctx.account, agent)
  const deliveries = await settle(ctx, ctx.account, 12)
  t.ok(deliveries.every((d: { status: string, attempts: unknown[] }) => d.status === 'failed' && d.attempts.length === 1), 'every failure is still logged')
  await ctx.inbox.waitFor(10)
  const mails = await emailsAt(ctx, 10)
  t.equal(mails.length, 10, 'the hour allows 10')
  t.equal(mails.filter((m) => /last failure e-mail for "noisy" until/.test(m.body_text)).length, 1, 'one pause notice')
  t.match(mails.at(-1)!.body_text, /This is the last failure e-mail for "noisy" until \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC/)

  // The day: 29 notices earlier today but outside the hour, then one more is sent with the day's pause, then none.
  await ctx.db.updateTable('delivery_notifications').set({ sent_at: new Date(Date.now() - 2 * 3_600_000) } as never).execute()
  const rows = await ctx.db.selectFrom('delivery_notifications').select(['user_id', 'delivery_row_id', 'email_id']).limit(1).executeTakeFirstOrThrow()
  for (let i = 0; i < 19; i++) {
    await ctx.db.insertInto('delivery_notifications').values({ id: `${'0'.repeat(22)}${String(i).padStart(2, '0')}`, user_id: rows.user_id, source_key: action._id, delivery_row_id: rows.delivery_row_id, final: true, email_id: rows.email_id, sent_at: new Date(Date.now() - 3 * 3_600_000) } as never).execute()
  }
  await enqueue(ctx, ctx.account, agent)
  await settle(ctx, ctx.account, 13)
  const after = await emailsAt(ctx, 11)
  t.equal(after.length, 11, 'the 30th of the day is sent')
  t.match(after.at(-1)!.body_text, /last failure e-mail for "noisy" until/)
  await enqueue(ctx, ctx.account, agent)
  await settle(ctx, ctx.account, 14)
  t.equal((await emails(ctx)).length, 11, 'the 31st is held back')
})
