import t from 'tap'
import { createTestDatabase } from '../helpers/database.ts'
import { start, stop } from '../helpers/server-process.ts'

// A self-hoster with a real Twilio account is told at start when Twilio could not reach PUBLIC_BASE_URL.

const TWILIO = { PHONE_CARRIER: 'twilio', TWILIO_ACCOUNT_SID: 'AC' + 'a'.repeat(32), TWILIO_AUTH_TOKEN: 'tok', TWILIO_API_URL: 'http://127.0.0.1:9', LOG_FORMAT: 'json' }

t.test('PHONE_CARRIER=twilio with a PUBLIC_BASE_URL Twilio cannot reach: a warning at start', async (t) => {
  const server = await start({ ...TWILIO, DATABASE_URL: await createTestDatabase(t), PUBLIC_BASE_URL: 'http://localhost:3000' })
  t.teardown(() => { server.child.kill('SIGKILL') })
  t.match(server.output(), /"level":40[^\n]*PUBLIC_BASE_URL \(http:\/\/localhost:3000\) cannot be reached by Twilio: it is not https:\/\/[^\n]*numbers cannot be bought, imported or repointed/)
  t.equal(await stop(server), 0)
})

t.test('no warning with a public https PUBLIC_BASE_URL', async (t) => {
  const server = await start({ ...TWILIO, DATABASE_URL: await createTestDatabase(t), PUBLIC_BASE_URL: 'https://switchboard.example.com' })
  t.teardown(() => { server.child.kill('SIGKILL') })
  t.notMatch(server.output(), /cannot be reached by Twilio/)
  t.equal(await stop(server), 0)
})
