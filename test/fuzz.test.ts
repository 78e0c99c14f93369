import t from 'tap'
import { createAccount, setup } from './helpers/app.ts'
import { addAction, createAgent, insertCalls } from './helpers/calls.ts'
import { fuzz, judge } from './helpers/fuzz.ts'

// `npm test` runs a few cases per operation; `npm run fuzz` (FUZZ_RUNS, FUZZ_SEED) runs as many as asked.
const RUNS = Number(process.env.FUZZ_RUNS ?? 12)
const SEED = Number(process.env.FUZZ_SEED ?? 20240601)

t.test('every documented operation answers generated requests within its documented responses, never 500', async (t) => {
  // Nothing leaves loopback: the sandbox carrier, Twilio pointed at a closed local port, no SMTP, the built-in
  // analyser, no workers (nothing stored is ever delivered) and deliveries refused to private addresses.
  const { app, db } = await setup(t, { PHONE_CARRIER: 'sandbox', TWILIO_API_URL: 'http://127.0.0.1:9', CALCOM_API_URL: 'http://127.0.0.1:9', CALENDLY_API_URL: 'http://127.0.0.1:9', HUBSPOT_API_URL: 'http://127.0.0.1:9', ANALYSER: 'builtin', DELIVERY_ALLOW_PRIVATE_NETWORKS: 'false' })
  const account = await createAccount(db)
  const post = async (url: string, payload: object) => (await app.inject({ method: 'POST', url, headers: account.headers, payload })).json()._id as string
  const agent = await createAgent(app, account, { data_retrieval: [{ name: 'plan', type: 'enum', enum_values: ['a', 'b'] }] })
  const action = await addAction(app, account, agent._id, { url: 'http://127.0.0.1:9/hook' })
  const ids = [
    agent._id, action._id,
    await post('/v1/customer', { customer_name: 'Fuzz' }),
    await post('/v1/workspaces', { workspace_name: 'Fuzz' }),
    await post('/v1/phone-number/buy', { area_code: '415' }),
    ...await insertCalls(db, account.user.id, agent, [{}, { call_status: 'failed' }]),
    // A web call whose customer_phone makes a contact: its id is fuzzed as the contact's.
    (await db.selectFrom('calls').select('contact_id').where('id', '=', await post('/v1/call/make-web-call', { agent_id: agent._id, dynamic_context: { customer_phone: '+4930123456' } })).executeTakeFirstOrThrow()).contact_id
  ].filter((id) => typeof id === 'string')

  const report = await fuzz(app, { headers: account.headers, ids, runs: RUNS, seed: SEED })
  judge(t, 'API fuzz', report)
  t.ok(report.operations > 70, 'every operation was fuzzed')
})
